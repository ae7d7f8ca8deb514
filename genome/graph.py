"""Graph helpers over a config genome's topology: predecessors, strongly connected components and the
execution order of the condensation (components run in topological order, ties broken by agent order)."""

from __future__ import annotations

import hashlib

from masforge.genome.cycles import is_cyclic, strongly_connected
from masforge.genome.schema import Genome


class Wiring:
    """Predecessor and successor sets of every node, built once (O(edges)) so whole-genome checks stay linear
    in the genome's size instead of scanning every edge for every agent."""

    def __init__(self, genome: Genome) -> None:
        self.agents = {a.id: a for a in reversed(genome.agents)}  # the first of duplicate ids wins, as in agent()
        self.order = {"input": 0, **{a.id: i + 1 for i, a in enumerate(genome.agents)}}
        self.preds: dict[str, set[str]] = {}
        self.succs: dict[str, set[str]] = {}
        for a, b in genome.topology.edges:
            self.preds.setdefault(b, set()).add(a)
            self.succs.setdefault(a, set()).add(b)
        self.nodes_in_edges = set(self.preds) | set(self.succs)

    def predecessors(self, node: str) -> list[str]:
        """Like :func:`predecessors`: sources of edges into ``node`` (agents or ``input``), in agent order."""
        found = [n for n in self.preds.get(node, ()) if n in self.order]
        return sorted(found, key=self.order.__getitem__)

    def _walk(self, start: str, step: dict[str, set[str]]) -> set[str]:
        seen = {start}
        frontier = [start]
        while frontier:
            for nxt in step.get(frontier.pop(), ()):
                if nxt not in seen:
                    seen.add(nxt)
                    frontier.append(nxt)
        return seen

    def reachable_from(self, start: str) -> set[str]:
        """Every node a directed path from ``start`` leads to (``start`` included)."""
        return self._walk(start, self.succs)

    def reaching(self, goal: str) -> set[str]:
        """Every node with a directed path to ``goal`` (``goal`` included)."""
        return self._walk(goal, self.preds)


def agent_edges(genome: Genome) -> list[tuple[str, str]]:
    """Edges between agents only (deduplicated, in first-seen order)."""
    ids = {a.id for a in genome.agents}
    seen: dict[tuple[str, str], None] = {}
    for a, b in genome.topology.edges:
        if a in ids and b in ids:
            seen[(a, b)] = None
    return list(seen)


def predecessors(genome: Genome, node: str) -> list[str]:
    """Sources of edges into ``node`` (agents or ``input``), in agent order."""
    srcs = {a for a, b in genome.topology.edges if b == node}
    order = ["input"] + [a.id for a in genome.agents]
    return [n for n in order if n in srcs]


def output_agents(genome: Genome) -> list[str]:
    """The agents wired to ``output``, in agent order."""
    return [n for n in predecessors(genome, "output") if n != "input"]


def answers_at_output(genome: Genome) -> int:
    """How many answers reach ``output``: the copies of the agents wired to it (what a majority vote votes over)."""
    voters = set(output_agents(genome))
    return sum(a.copies for a in genome.agents if a.id in voters)


def successors(genome: Genome, node: str) -> list[str]:
    """Targets of edges out of ``node``."""
    return sorted({b for a, b in genome.topology.edges if a == node})


def cyclic_agents(genome: Genome) -> set[str]:
    """Ids of the agents that sit on a cycle (they run ``topology.rounds`` times); empty for a DAG."""
    edges = agent_edges(genome)
    ids = [a.id for a in genome.agents]
    return {n for comp in strongly_connected(ids, edges) if is_cyclic(comp, edges) for n in comp}


def execution_plan(genome: Genome) -> list[list[str]]:
    """Components in the order they run: a topological order of the condensation, ties by agent order.

    Only agents that take part in the graph (appear in an edge) are included; the judge runs after.
    """
    edges = agent_edges(genome)
    in_graph = {n for e in genome.topology.edges for n in e}
    nodes = [a.id for a in genome.agents if a.id in in_graph]
    comps = strongly_connected(nodes, edges)
    comp_of = {n: i for i, comp in enumerate(comps) for n in comp}
    first_pos = {i: min(nodes.index(n) for n in comp) for i, comp in enumerate(comps)}
    deps: dict[int, set[int]] = {i: set() for i in range(len(comps))}
    for a, b in edges:
        ca, cb = comp_of[a], comp_of[b]
        if ca != cb:
            deps[cb].add(ca)
    done: set[int] = set()
    order: list[list[str]] = []
    while len(done) < len(comps):
        ready = [i for i in deps if i not in done and deps[i] <= done]
        nxt = min(ready, key=first_pos.__getitem__)
        done.add(nxt)
        order.append(comps[nxt])
    return order


def reaches(genome: Genome, start: str, goal: str) -> bool:
    """True if a directed path leads from ``start`` to ``goal``."""
    seen = {start}
    frontier = [start]
    while frontier:
        node = frontier.pop()
        if node == goal:
            return True
        for nxt in successors(genome, node):
            if nxt not in seen:
                seen.add(nxt)
                frontier.append(nxt)
    return False


_CALLS_PER_MODULE = {"predict": 1, "chain_of_thought": 1, "react": 3, "program_of_thought": 2, "refine": 3,
                     "execute": 0}  # an execute node runs code, no LM; refine: draft, critique, and a revision


def lm_calls_per_example(genome: Genome, *, fail_share: float = 1.0, fault_share: float = 1.0) -> float:
    """Rough LM calls a system makes per example: its agents' copies, times the rounds for agents on a cycle,
    times the calls their module makes (a code genome: its ``llm(`` calls, at least 1). The defaults count the
    most it can cost; an estimate of what it will cost says how often the optional calls happen: an agent behind
    a gate's ``fail`` edges runs only when the gate fails (``fail_share`` of the time; a repair loop behind such an
    edge repairs at most rounds - 1 times), and refine revises its draft only when its critique finds fault
    (``fault_share``)."""
    if genome.kind == "code":
        return max(1.0, float((genome.code or "").count("llm(")))
    if genome.portfolio is not None:  # the costliest member the router may pick, or the whole escalation order
        body = genome.portfolio
        per = [lm_calls_per_example(m, fail_share=fail_share, fault_share=fault_share) for m in body.members]
        picked = max((per[i] for i in body.router.classes if 0 <= i < len(per)), default=0.0)
        return max(picked, sum(per[i] for i in set(body.escalation) if 0 <= i < len(per)))
    runs = _runs(genome, fail_share)
    total = 0.0
    for a in genome.agents:
        calls = _CALLS_PER_MODULE.get(a.module, 1) - (1.0 - fault_share if a.module == "refine" else 0.0)
        total += calls * a.copies * runs[a.id]
    return total


def _runs(genome: Genome, fail_share: float) -> dict[str, float]:
    """How many times each agent runs per example (see :func:`lm_calls_per_example`)."""
    on_cycle = cyclic_agents(genome)
    gated = set() if fail_share == 1.0 else _behind_fail_edges(genome)
    rounds = genome.topology.rounds
    runs = {}
    for a in genome.agents:
        runs[a.id] = float(rounds if a.id in on_cycle else 1)
        if a.id in gated:
            runs[a.id] = fail_share * (max(1, rounds - 1) if a.id in on_cycle else 1)
    return runs


# The prompts each module's steps send, by the dspy module that sends them: refine drafts as chain of thought does,
# so a refine agent's draft is the prompt a chain-of-thought agent with its settings sends.
_STEPS: dict[str, tuple[str, ...]] = {"predict": ("Predict",), "chain_of_thought": ("ChainOfThought",),
                                      "react": ("ReAct 1", "ReAct 2", "ReAct 3"),
                                      "program_of_thought": ("pot write", "pot answer"),
                                      "refine": ("ChainOfThought", "refine critique", "refine revise"), "execute": ()}


def lm_call_keys(genome: Genome, *, fail_share: float = 1.0, fault_share: float = 1.0) -> dict[str, float]:
    """The LM calls a system asks per example, each under a key that stands for its prompt (two systems, or two
    agents, that send the same prompt share the key: the answer cache answers the second), with how many calls
    the key stands for (as :func:`lm_calls_per_example` counts them). A prompt is what the agent's settings and
    what it reads make it: its step, role, instructions, adapter, temperature, LM and tools, the task's fields
    it reads, and the same of the agents it reads from (by their ids, which label their messages); each copy
    is a sample of its own."""
    if genome.kind == "code" or genome.portfolio is not None:  # no agents to share: one key per call
        return {f"{genome.id}#{i}": 1.0 for i in range(round(lm_calls_per_example(genome)))}
    runs = _runs(genome, fail_share)
    by_id = {a.id: a for a in genome.agents}
    known: dict[str, str] = {}

    def prompt_of(aid: str, reading: frozenset[str]) -> str:
        if aid in known:
            return known[aid]
        a = by_id[aid]
        parts: list[object] = [a.role, a.instructions, a.adapter, a.temperature, a.lm, tuple(a.tools), a.signature,
                               genome.topology.rounds if aid in cyclic_agents(genome) else 1]
        for p in predecessors(genome, aid):
            if p == "input":
                parts.append(("input", tuple(genome.inputs), tuple(genome.outputs)))
            elif p in reading or p not in by_id:  # a cycle: what it reads comes round again
                parts.append((p, "cycle"))
            else:
                parts.append((p, by_id[p].copies, prompt_of(p, reading | {aid})))
        known[aid] = hashlib.sha256(repr(parts).encode()).hexdigest()[:16]
        return known[aid]

    keys: dict[str, float] = {}
    for a in genome.agents:
        steps = _STEPS.get(a.module, ("Predict",))
        for copy in range(a.copies):
            for step in steps:
                weight = fault_share if step == "refine revise" else 1.0
                key = f"{step}|{prompt_of(a.id, frozenset())}|{copy}"
                keys[key] = keys.get(key, 0.0) + weight * runs[a.id]
    return keys


def _behind_fail_edges(genome: Genome) -> set[str]:
    """Agents whose conditional edges in all wait for a ``fail`` verdict (an agent with conditional edges in runs
    only when one of them carries)."""
    verdicts: dict[str, set[str]] = {}
    for a, b in genome.topology.edges:
        verdict = genome.topology.condition_of(a, b)
        if verdict is not None:
            verdicts.setdefault(b, set()).add(verdict)
    return {agent for agent, kinds in verdicts.items() if kinds == {"fail"}}
