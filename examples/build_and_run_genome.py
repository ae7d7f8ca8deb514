"""Build a genome in Python, add your own tool, validate it, run it and score it.

    python examples/build_and_run_genome.py --lm fake
"""

from __future__ import annotations

import argparse

import masforge
from masforge import Agent, Genome, LMClient, Topology
from masforge.execution.compile import compile_genome


@masforge.register_tool("word_count", "Counts the words in a text.")
def word_count(text: str) -> str:
    return str(len(text.split()))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--lm", default=None, help="worker LM (default: the embedded local model)")
    args = parser.parse_args()

    genome = Genome(
        name="solve-then-check",
        description="A solver drafts, a checker with a calculator confirms the arithmetic.",
        agents=[
            Agent(id="solver", role="solver", instructions="Solve the problem step by step.",
                  module="chain_of_thought"),
            Agent(id="checker", role="checker", instructions="Check the solver's answer and give the final one.",
                  module="predict", signature="question, messages -> answer"),
        ],
        topology=Topology(edges=[("input", "solver"), ("input", "checker"), ("solver", "checker"),
                                 ("checker", "output")]),
    )
    masforge.validate(genome)
    print(f"genome {genome.name} id {genome.short_id}")

    client = LMClient({"worker": args.lm} if args.lm else None)
    system = compile_genome(genome, client)
    result = system(question="What is 17 * 3?")
    print("answer:", result.outputs["answer"])
    for call in result.trace.calls:
        print(f"  {call.agent}: {call.tokens} tokens, {call.latency_s:.2f}s")

    report = masforge.evaluate(genome, "rg:basic_arithmetic", client=client, limit=5)
    lo, hi = report.ci
    print(f"score {report.score:.2f} (95% CI {lo:.2f}-{hi:.2f}) on {report.n} examples")


if __name__ == "__main__":
    main()
