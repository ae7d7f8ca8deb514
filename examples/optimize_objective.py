"""Optimise a multi-agent system for your own Python objective function.

    python examples/optimize_objective.py            # on the embedded local model
    python examples/optimize_objective.py --lm fake  # offline, deterministic
"""

from __future__ import annotations

import argparse

import masforge
from masforge import Task


def mentions_the_number(outputs: dict, example: object) -> float:
    """1 if the system's answer contains the expected number, else 0."""
    return 1.0 if str(example.target) in str(outputs.get("answer", "")) else 0.0  # type: ignore[attr-defined]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--lm", default=None, help="worker LM (default: the embedded local model)")
    parser.add_argument("--output", default="runs")
    args = parser.parse_args()

    questions = [{"question": f"What is {a} + {b}?", "target": str(a + b)} for a, b in [(12, 30), (7, 8), (100, 23)]]
    task = Task.from_callable(mentions_the_number, examples=questions, name="sums")
    result = masforge.optimize(task, strategy="random", budget=4, lm=args.lm, seeds=["io", "cot"],
                               limit=3, test_limit=3, output=args.output)
    best = result.best
    print(f"best system: {best.genome.name} ({best.short_id}) score {best.score:.2f}")
    print(f"spent: {result.spend['llm_calls']} LM calls, ${result.spend['dollars']:.4f}")
    print(f"run folder: {result.run_dir}")


if __name__ == "__main__":
    main()
