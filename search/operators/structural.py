"""Cheap, LLM-free genome edits: add/remove an agent, add a sampled branch beside an answering agent, rewire
an edge, change a module kind, copies, rounds, temperature, aggregation, an agent's model or its prompt adapter,
and the execution and control edits of :mod:`.execution` (test gate, repair loop, escalation, test writer); and a
structural crossover. Every result is validated; an edit that breaks the genome is retried with another edit.
:data:`EDIT_FAMILIES` groups the edits by what they change."""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import NamedTuple

from masforge.genome.names import EXECUTE_MODULE
from masforge.genome.outline import outline
from masforge.genome.schema import MODULE_KINDS, PICKING_AGGREGATIONS, Agent, Genome
from masforge.genome.validate import problems
from masforge.lm.adapters import ADAPTERS
from masforge.search.operators.execution import EXECUTION_EDITS, prune_conditions
from masforge.search.operators.proposal import MAX_AGENTS

Edit = Callable[[Genome, random.Random], str | None]
TEMPERATURES = (0.0, 0.3, 0.7, 1.0)
DEFAULT_ROLES = (
    ("verifier", "Check the previous answer carefully and give the corrected final answer."),
    ("critic", "Find mistakes in the previous reasoning, then give the best final answer."),
    ("planner", "Break the task into steps and solve them in order; give the final answer."),
    ("expert", "Answer as a domain expert, precisely and concisely."),
)


def _fresh_id(genome: Genome, base: str) -> str:
    ids = {a.id for a in genome.agents}
    i = 1
    while f"{base}_{i}" in ids:
        i += 1
    return f"{base}_{i}"


def _feeders(genome: Genome) -> list[str]:
    return [a for a, b in genome.topology.edges if b == "output"]


def _lm_agents(genome: Genome) -> list[Agent]:
    """The agents that call an LM (an execute node has no module, copies, temperature or adapter to change)."""
    return [a for a in genome.agents if a.module != EXECUTE_MODULE]


def add_agent(g: Genome, rng: random.Random) -> str | None:
    """Insert a checker agent between an output feeder and output."""
    feeders = _feeders(g)
    if not feeders or len(g.agents) >= MAX_AGENTS:
        return None
    src = rng.choice(feeders)
    role, instructions = rng.choice(DEFAULT_ROLES)
    new = Agent(id=_fresh_id(g, role), role=role, instructions=instructions, module=rng.choice(
        ("predict", "chain_of_thought")))
    g.agents.append(new)
    g.topology.edges = [e for e in g.topology.edges if e != (src, "output")]
    g.topology.edges += [(src, new.id), ("input", new.id), (new.id, "output")]
    return f"add {new.role} after {src}"


def add_sampled_branch(g: Genome, rng: random.Random) -> str | None:
    """Beside an agent that answers, a sampled copy of it: same settings and inputs, 3 or 5 copies at a
    sampling temperature (its own if it samples, else the runtime's), answering to the output next to the
    original, and a pick among the answers (a vote, or the drafts that pass the task's stated examples) where
    there was none. Unlike raising the original's copies, this keeps the original (often greedy) answer among
    the candidates: best-of-n as in self-consistency and AlphaCode/CodeT filtering."""
    judge = g.topology.judge if g.topology.aggregation == "judge" else None
    feeders = [a for a in _feeders(g) if a != judge and a in {x.id for x in _lm_agents(g)}]
    if not feeders or len(g.agents) >= MAX_AGENTS:
        return None
    src_id = rng.choice(feeders)
    src = next(a for a in g.agents if a.id == src_id)
    branch = src.model_copy(deep=True)
    branch.id = _fresh_id(g, f"{src.id}_sampled")
    branch.copies = rng.choice((3, 5))
    branch.temperature = src.temperature or None  # None: copies of a greedy LM sample at the runtime's temperature
    g.agents.append(branch)
    g.topology.edges += [(a, branch.id) for a, b in g.topology.edges if b == src.id and a != src.id]
    g.topology.edges.append((branch.id, "output"))
    if g.topology.aggregation == "last":
        g.topology.aggregation = rng.choice(PICKING_AGGREGATIONS)
    return f"add {branch.copies} samples of {src.id} beside it, {g.topology.aggregation}"


def _drop(g: Genome, victim: str) -> None:
    """Remove agent ``victim`` in place, reconnecting its predecessors to its successors."""
    ins = [a for a, b in g.topology.edges if b == victim and a != victim]
    outs = [b for a, b in g.topology.edges if a == victim and b != victim]
    edges = [e for e in g.topology.edges if victim not in e]
    edges += [(a, b) for a in ins for b in outs if a != b and not (a == "input" and b == "output")]
    g.topology.edges = list(dict.fromkeys(edges))
    g.agents = [a for a in g.agents if a.id != victim]
    prune_conditions(g)  # its conditional edges went with it


def remove_agent(g: Genome, rng: random.Random) -> str | None:
    """Drop an agent, reconnecting its predecessors to its successors."""
    judge = g.topology.judge if g.topology.aggregation == "judge" else None
    removable = [a for a in g.agents if a.id != judge]
    if len(removable) < 2:
        return None
    victim = rng.choice(removable)
    _drop(g, victim.id)
    return f"remove {victim.id}"


def without_agent(genome: Genome, agent_id: str) -> Genome | None:
    """``genome`` with agent ``agent_id`` removed and its neighbours reconnected (an ablation); None when that
    leaves no valid system (the only answering agent, a judge, ...)."""
    if genome.kind != "config" or len(genome.agents) < 2:
        return None
    if genome.topology.aggregation == "judge" and genome.topology.judge == agent_id:
        return None
    child = genome.model_copy(deep=True)
    _drop(child, agent_id)
    child.metadata = {}
    if problems(child) or child.id == genome.id:
        return None
    child.name = f"{genome.name.split('~')[0]}-{agent_id}"[:60]
    child.description = f"{outline(child)} Ablation of {genome.name}: without {agent_id}."
    return child


def rewire(g: Genome, rng: random.Random) -> str | None:
    """Add or remove one edge between agents."""
    ids = [a.id for a in g.agents if not (g.topology.aggregation == "judge" and a.id == g.topology.judge)]
    if len(ids) < 2:
        return None
    a, b = rng.sample(ids, 2)
    if (a, b) in g.topology.edges:
        g.topology.edges = [e for e in g.topology.edges if e != (a, b)]
        return f"remove edge {a} -> {b}"
    g.topology.edges = [*g.topology.edges, (a, b)]
    if g.topology.rounds < 2:
        g.topology.rounds = 2  # a new back edge may close a cycle
    return f"add edge {a} -> {b}"


def change_module(g: Genome, rng: random.Random) -> str | None:
    agent = rng.choice(_lm_agents(g))
    kinds = [k for k in MODULE_KINDS if k not in (agent.module, "react")]
    new = rng.choice(kinds)
    old, agent.module = agent.module, new
    if new == "program_of_thought" and "python" not in agent.tools:
        agent.tools = [*agent.tools, "python"]
    return f"{agent.id}.module {old} -> {new}"


def change_copies(g: Genome, rng: random.Random) -> str | None:
    agent = rng.choice(_lm_agents(g))
    new = rng.choice([c for c in (1, 3, 5) if c != agent.copies])
    old, agent.copies = agent.copies, new
    if new > 1 and g.topology.aggregation == "last" and (agent.id, "output") in g.topology.edges:
        g.topology.aggregation = "majority_vote"
    return f"{agent.id}.copies {old} -> {new}"


def change_rounds(g: Genome, rng: random.Random) -> str | None:
    new = rng.choice([r for r in (1, 2, 3) if r != g.topology.rounds])
    old, g.topology.rounds = g.topology.rounds, new
    return f"rounds {old} -> {new}"


def change_temperature(g: Genome, rng: random.Random) -> str | None:
    agent = rng.choice(_lm_agents(g))
    new = rng.choice([t for t in TEMPERATURES if t != agent.temperature])
    old, agent.temperature = agent.temperature, new
    return f"{agent.id}.temperature {old} -> {new}"


def change_aggregation(g: Genome, rng: random.Random) -> str | None:
    options = [a for a in ("last", *PICKING_AGGREGATIONS) if a != g.topology.aggregation]
    if g.topology.aggregation == "judge":
        judge = g.topology.judge
        g.agents = [a for a in g.agents if a.id != judge]
        g.topology.judge = None
    new = rng.choice(options)
    old, g.topology.aggregation = g.topology.aggregation, new
    return f"aggregation {old} -> {new}"


def change_lm(g: Genome, rng: random.Random, aliases: tuple[str, ...] = ("worker", "meta")) -> str | None:
    agent = rng.choice(_lm_agents(g))
    options = [a for a in aliases if a != agent.lm]
    if not options:
        return None
    old, agent.lm = agent.lm, rng.choice(options)
    return f"{agent.id}.lm {old} -> {agent.lm}"


def change_adapter(g: Genome, rng: random.Random) -> str | None:
    """Switch how one agent talks to its LM (plain chat, dspy's field markers, JSON, or the LM's default),
    so the prompt format co-evolves with roles and topology."""
    agent = rng.choice(_lm_agents(g))
    old = agent.adapter
    agent.adapter = rng.choice([a for a in ADAPTERS if a != old])
    return f"{agent.id}.adapter {old} -> {agent.adapter}"


EDITS: dict[str, Edit] = {
    "add_agent": add_agent, "add_sampled_branch": add_sampled_branch, "remove_agent": remove_agent,
    "rewire": rewire, "change_module": change_module, "change_copies": change_copies,
    "change_rounds": change_rounds, "change_temperature": change_temperature,
    "change_aggregation": change_aggregation, "change_adapter": change_adapter,
    **EXECUTION_EDITS,
}

EDIT_FAMILIES: dict[str, tuple[str, ...]] = {
    "execution": tuple(EXECUTION_EDITS),
    "sampling": ("add_sampled_branch", "change_copies", "change_temperature", "change_aggregation"),
    "topology": ("add_agent", "remove_agent", "rewire", "change_rounds"),
    "prompting": ("change_module", "change_adapter"),
}
"""Every edit of :data:`EDITS` in one family: what it changes (run code against checks and route on the verdict;
how many answers and how they are picked; the wiring; how an agent is prompted)."""


class Edited(NamedTuple):
    """A genome one structural edit away from its parent: the child, the edit in words and the edit's name."""

    genome: Genome
    what: str
    edit: str


def mutate_with(genome: Genome, rng: random.Random, *, edits: dict[str, Edit] | None = None,
                choose: Callable[[list[str]], str] | None = None, tries: int = 12) -> Edited | None:
    """A valid, different genome one structural edit away. ``choose`` picks the edit's name among those not yet
    tried for this genome (default: uniformly at random; an adaptive strategy passes its operator bandit)."""
    if genome.kind != "config":
        return None
    pool = dict(edits or EDITS)
    for _ in range(tries):
        if not pool:
            return None
        names = sorted(pool)
        name = choose(names) if choose is not None else rng.choice(names)
        child = genome.model_copy(deep=True)
        what = pool[name](child, rng)
        if what is None:
            if choose is not None:
                pool.pop(name)  # an edit that cannot apply here is not drawn again for this genome
            continue
        prune_conditions(child)  # an edit that removed an edge out of an execute node removes its condition
        child.metadata = {}
        if not problems(child) and child.id != genome.id:
            child.name = f"{genome.name.split('~')[0]}~{child.short_id[:6]}"
            child.description = f"{outline(child)} From {genome.name}: {what}."
            return Edited(child, what, name)
    return None


def mutate(genome: Genome, rng: random.Random, *, edits: dict[str, Edit] | None = None,
           tries: int = 12) -> tuple[Genome, str] | None:
    """A valid, different genome one structural edit away (edit drawn uniformly), with a description of the edit."""
    out = mutate_with(genome, rng, edits=edits, tries=tries)
    return None if out is None else (out.genome, out.what)


def crossover(a: Genome, b: Genome, rng: random.Random, tries: int = 8) -> tuple[Genome, str] | None:
    """Child with ``a``'s topology whose agents take ``b``'s settings (module, instructions, copies,
    temperature) where ids or positions match: capabilities from one parent, wiring from the other. The description
    names each agent that took the other parent's settings, with the donor's id where the two differ
    ("tester (as sampler_more)")."""
    if a.kind != "config" or b.kind != "config":
        return None
    for _ in range(tries):
        child = a.model_copy(deep=True)
        taken = []
        for i, agent in enumerate(child.agents):
            donor = next((x for x in b.agents if x.id == agent.id), b.agents[i] if i < len(b.agents) else None)
            if donor is None or (donor.module == EXECUTE_MODULE) != (agent.module == EXECUTE_MODULE) or \
                    rng.random() < 0.5:
                continue
            agent.instructions, agent.module = donor.instructions, donor.module
            agent.copies, agent.temperature, agent.role = donor.copies, donor.temperature, donor.role
            agent.adapter = donor.adapter
            agent.tools = list(donor.tools)
            taken.append(agent.id if donor.id == agent.id else f"{agent.id} (as {donor.id})")  # matched by position
        if rng.random() < 0.5:
            child.topology.rounds = max(child.topology.rounds, b.topology.rounds)
        if taken and not problems(child) and child.id not in (a.id, b.id):
            child.name = f"{a.name.split('~')[0]}x{b.name.split('~')[0]}"[:60]
            child.metadata = {}
            child.description = f"{outline(child)} Wiring of {a.name}, agents {', '.join(taken)} from {b.name}."
            return child, f"agents {', '.join(taken)} from {b.short_id}"
    return None
