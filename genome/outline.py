"""A one-sentence description of what a config genome is, read off its structure.

Operators that change a system's structure without a model (structural mutation, crossover) use it as the
child's description: the parent's prose would describe the parent ("five chains vote") and be wrong for
the child.
"""

from __future__ import annotations

from masforge.genome.graph import answers_at_output, output_agents, predecessors
from masforge.genome.names import EXECUTE_MODULE
from masforge.genome.schema import Agent, Genome
from masforge.genome.validate import writes_tests


def _agent_text(agent: Agent) -> str:
    parts = [agent.module.replace("_", " ")]
    if agent.copies > 1:
        parts.append(f"{agent.copies} copies")
    if agent.tools:
        parts.append("tools " + ", ".join(agent.tools))
    role = f" the {agent.role}" if agent.role and agent.role != agent.id else ""
    return f"{agent.id}{role} ({'; '.join(parts)})"


def outline(genome: Genome) -> str:
    """E.g. ``"2 agents: solver (chain of thought; 5 copies); checker (predict) reading solver; the output is
    checker's answer."``"""
    if genome.kind != "config":
        return genome.description
    chain: list[str] = []
    for agent in genome.agents:
        reads = [a for a in predecessors(genome, agent.id) if a != "input"]
        if agent.module == EXECUTE_MODULE:
            writers = [r for r in reads if writes_tests(genome, genome.agent(r))]
            coders = [r for r in reads if r not in writers]
            tests = f" and the tests of {', '.join(writers)}" if writers else ""
            doubt = "; with nothing to run it fails" if agent.unchecked == "fail" else ""
            chain.append(f"{agent.id} runs the code of {', '.join(coders)} against the stated examples{tests} "
                         f"(no LM{doubt})")
            continue
        text = _agent_text(agent)
        chain.append(f"{text} reading {', '.join(reads)}" if reads else text)
    voters = output_agents(genome) or [genome.agents[-1].id]
    topo = genome.topology
    answers = answers_at_output(genome)
    if topo.aggregation == "judge" and topo.judge:
        ending = f"the output is {topo.judge}'s pick among {', '.join(voters)}"
    elif topo.aggregation == "majority_vote" and answers > 1:
        ending = f"the output is a majority vote over {', '.join(voters)}"
    elif topo.aggregation == "run_examples" and answers > 1:
        ending = f"the output is the answer of {', '.join(voters)} whose code passes most of the task's stated examples"
    else:
        ending = f"the output is {voters[-1]}'s answer"
    for key, verdict in sorted(topo.conditions.items()):
        source, _, target = key.partition(" -> ")
        goes = "the output takes its answer" if target == "output" else f"{target} runs"
        chain.append(f"if {source} {'passes' if verdict == 'pass' else 'fails'}, {goes}")
    rounds = f", {topo.rounds} rounds" if topo.rounds > 1 else ""
    n = len(genome.agents)
    return f"{n} agent{'s' if n != 1 else ''}{rounds}: {'; '.join(chain)}; {ending}."
