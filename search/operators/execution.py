"""Execution and control edits: wrap a system's answering agents in execute nodes and conditional edges.

* a **test gate**: an execute node between the answering agents and ``output`` (the answer whose code passes the
  most checks wins);
* a **repair loop**: a gate whose ``fail`` edge sends the code and its report to a repairer, whose repair goes
  back to the gate (Self-Debugging);
* an **escalation**: a gate on one answer whose ``pass`` edge answers and whose ``fail`` edge calls a sampled copy
  of the answering agent, a second gate picking among the samples and the first answer (a cascade);
* a **test writer**: an agent writing ``assert`` lines into ``tests`` for every gate (CodeT).

The ``insert_*`` functions apply a pattern at a given place (knapsack composition uses them through
:func:`apply_pattern`); the ``add_*`` edits choose the place at random and return a description, or None where
the pattern cannot change what the system answers. The repairer and the test writer are the inventory's
``code_repairer`` and ``test_writer`` fragments.
"""

from __future__ import annotations

import functools
import random

from masforge.genome.graph import Wiring
from masforge.genome.names import EXECUTE_MODULE, TESTS_FIELD
from masforge.genome.schema import Agent, Genome
from masforge.genome.validate import agent_signature, problems, writes_tests
from masforge.search.operators.proposal import MAX_AGENTS

REPAIR_ROUNDS = (2, 3)
"""Rounds of a new repair loop: the gate checks that many times, so at most one or two repairs."""
ESCALATION_COPIES = (3, 5)
"""Samples an escalation draws when the first answer fails."""
SAMPLE_COUNTS = (3, 5, 8, 10, 12)
"""Samples a gate's sampled agent may draw (:func:`tune_execution`)."""
TIER_TEMPERATURES = (0.5, 0.7, 0.9, 1.0)
"""Temperatures sampled answers may be drawn at."""
TIER_COPIES = (5, 8, 10)
"""Samples a further escalation tier draws."""
REPAIR_ROUNDS_RANGE = (2, 3, 4)
"""Rounds a repair loop may run (:func:`tune_execution`)."""


@functools.cache
def _fragment_source(component: str) -> Agent:
    from masforge.seeds import load_inventory

    return next(c.agent for c in load_inventory() if c.id == component and c.agent is not None)


def inventory_agent(component: str, agent_id: str) -> Agent:
    """A fresh copy of the shipped inventory's agent fragment ``component``, called ``agent_id``."""
    agent = _fragment_source(component).model_copy(deep=True)
    agent.id = agent_id
    return agent


def fresh_id(genome: Genome, base: str) -> str:
    """``base``, or ``base_2``, ``base_3``, ... : an agent id the genome does not use yet."""
    ids = {a.id for a in genome.agents}
    if base not in ids:
        return base
    i = 2
    while f"{base}_{i}" in ids:
        i += 1
    return f"{base}_{i}"


def answering_feeders(genome: Genome) -> list[str]:
    """The LM agents with an edge to ``output`` that write its first field (not the judge), in agent order."""
    topo = genome.topology
    judge = topo.judge if topo.aggregation == "judge" else None
    feeding = {a for a, b in topo.edges if b == "output"}
    wiring = Wiring(genome)
    return [a.id for a in genome.agents if a.id in feeding and a.id != judge and a.module != EXECUTE_MODULE
            and genome.outputs[0] in agent_signature(genome, a, wiring).output_names]


def gates(genome: Genome) -> list[str]:
    """The execute nodes with an edge to ``output``, in agent order."""
    feeding = {a for a, b in genome.topology.edges if b == "output"}
    return [a.id for a in genome.agents if a.module == EXECUTE_MODULE and a.id in feeding]


def prune_conditions(genome: Genome) -> None:
    """Drop conditions whose edge an edit removed (they would name no edge)."""
    edges = {f"{a} -> {b}" for a, b in genome.topology.edges}
    genome.topology.conditions = {k: v for k, v in genome.topology.conditions.items() if k in edges}


def _answers_into(genome: Genome, node: str) -> int:
    """How many answers reach execute node ``node``: the copies of the agents before it that write the answer."""
    wiring = Wiring(genome)
    return sum(wiring.agents[p].copies for p in wiring.predecessors(node) if p != "input"
               and genome.outputs[0] in agent_signature(genome, wiring.agents[p], wiring).output_names)


def _routes(genome: Genome, node: str) -> bool:
    return any(k.startswith(f"{node} -> ") for k in genome.topology.conditions)


# ------------------------------------------------------------------------------------------------ patterns


def insert_test_gate(genome: Genome, sources: list[str]) -> str:
    """Put a new execute node between ``sources`` (agents feeding ``output``) and ``output``; its id."""
    check = fresh_id(genome, "check")
    genome.agents.append(Agent(id=check, module=EXECUTE_MODULE))
    topo = genome.topology
    topo.edges = [e for e in topo.edges if not (e[1] == "output" and e[0] in sources)]
    topo.edges += [*((s, check) for s in sources), (check, "output")]
    prune_conditions(genome)
    return check


def insert_repair_loop(genome: Genome, check: str, rounds: int) -> str:
    """Close a repair loop behind execute node ``check``: on ``fail`` a repairer (the inventory's
    ``code_repairer``, listed just before ``check``) reads the code and the report and hands its repair back to
    ``check``; at least ``rounds`` rounds. The repairer's id."""
    repairer = inventory_agent("code_repairer", fresh_id(genome, "repairer"))
    at = next(i for i, a in enumerate(genome.agents) if a.id == check)
    genome.agents.insert(at, repairer)  # before the check: its last round ends with a check, never a lost repair
    topo = genome.topology
    topo.edges += [("input", repairer.id), (check, repairer.id), (repairer.id, check)]
    topo.conditions = {**topo.conditions, f"{check} -> {repairer.id}": "fail"}
    topo.rounds = max(topo.rounds, rounds)
    return repairer.id


def insert_escalation(genome: Genome, source: str, copies: int) -> tuple[str, str, str]:
    """Escalate ``source`` (an agent feeding ``output``): a first check answers on ``pass``; on ``fail`` a sampled
    copy of ``source`` (``copies`` samples, same prompt: its signature is written out so the fail edge adds no
    messages) runs and a final check picks among the samples and ``source``'s answer. (first, sampler, final)."""
    src = next(a for a in genome.agents if a.id == source)
    first = fresh_id(genome, "first_check")
    genome.agents.append(Agent(id=first, module=EXECUTE_MODULE))
    sampler = src.model_copy(deep=True)
    sampler.id = fresh_id(genome, f"{source}_sampled")
    sampler.copies = copies
    sampler.temperature = src.temperature or None  # None: copies of a greedy LM sample at the runtime's temperature
    sampler.signature = str(agent_signature(genome, src))
    genome.agents.append(sampler)
    final = fresh_id(genome, "final_check")
    genome.agents.append(Agent(id=final, module=EXECUTE_MODULE))
    topo = genome.topology
    feeds = [a for a, b in topo.edges if b == source and a != source]
    topo.edges = [e for e in topo.edges if e != (source, "output")]
    topo.edges += [(source, first), (first, "output"), (first, sampler.id), *((a, sampler.id) for a in feeds),
                   (sampler.id, final), (source, final), (final, "output")]
    topo.conditions = {**topo.conditions, f"{first} -> output": "pass", f"{first} -> {sampler.id}": "fail"}
    prune_conditions(genome)
    return first, sampler.id, final


def insert_test_writer(genome: Genome, checks: list[str]) -> str:
    """A test writer (the inventory's ``test_writer``, reading the genome inputs) feeding every execute node in
    ``checks``; its id."""
    writer = inventory_agent("test_writer", fresh_id(genome, "tester"))
    writer.signature = f"{', '.join(genome.inputs)} -> {TESTS_FIELD}"
    genome.agents.append(writer)
    genome.topology.edges += [("input", writer.id), *((writer.id, c) for c in checks)]
    return writer.id


def apply_pattern(genome: Genome, pattern: str) -> str | None:
    """Apply inventory pattern ``pattern`` to ``genome`` in place, deterministically (gates over every answering
    agent, escalation of the first, three rounds of repair, five samples); a description, or None where it
    does not fit (no answering agent, a judge picks the answer, too many agents)."""
    if genome.topology.aggregation == "judge":
        return None
    feeders = answering_feeders(genome)
    if pattern == "escalation":
        if not feeders or len(genome.agents) + 3 > MAX_AGENTS:
            return None
        first, sampler, final = insert_escalation(genome, feeders[0], ESCALATION_COPIES[-1])
        return f"escalate {feeders[0]} to {sampler} when {first} fails"
    existing = [g for g in gates(genome) if not _routes(genome, g)]
    if pattern == "test_gate":
        if not feeders or len(genome.agents) + 1 > MAX_AGENTS:
            return None
        return f"test gate {insert_test_gate(genome, feeders)} over {', '.join(feeders)}"
    if pattern == "repair_loop":
        if len(genome.agents) + (1 if existing else 2) > MAX_AGENTS or not (existing or feeders):
            return None
        check = existing[-1] if existing else insert_test_gate(genome, feeders)
        return f"repair loop behind {check} ({insert_repair_loop(genome, check, REPAIR_ROUNDS[-1])})"
    if pattern == "test_writer":
        checks = [a.id for a in genome.agents if a.module == EXECUTE_MODULE]
        if len(genome.agents) + (1 if checks else 2) > MAX_AGENTS or not (checks or feeders):
            return None
        checks = checks or [insert_test_gate(genome, feeders)]
        return f"tests by {insert_test_writer(genome, checks)} for {', '.join(checks)}"
    raise ValueError(f"unknown pattern '{pattern}' (patterns: test_gate, repair_loop, escalation, test_writer)")


# ------------------------------------------------------------------------------------------------ edits


def add_test_gate(g: Genome, rng: random.Random) -> str | None:
    """Insert an execute node between the answering agents and output (the answer passing the most of the task's
    stated examples wins). Only where at least two answers reach it (over one answer it changes nothing) and the
    output does not pick that way already (run_examples)."""
    feeders = answering_feeders(g)
    if g.topology.aggregation in ("judge", "run_examples") or not feeders or len(g.agents) >= MAX_AGENTS:
        return None
    if sum(a.copies for a in g.agents if a.id in feeders) < 2:
        return None
    check = insert_test_gate(g, feeders)
    return f"add test gate {check} over {', '.join(feeders)}"


def add_repair_loop(g: Genome, rng: random.Random) -> str | None:
    """Close a repair loop (2 or 3 rounds) behind a test gate that routes nothing yet, creating the gate over the
    answering agents if there is none: a failing answer goes with its execution report to a repairer."""
    if g.topology.aggregation == "judge":
        return None
    free = [c for c in gates(g) if not _routes(g, c)]
    feeders = answering_feeders(g)
    if len(g.agents) + (1 if free else 2) > MAX_AGENTS or not (free or feeders):
        return None
    check = rng.choice(free) if free else insert_test_gate(g, feeders)
    rounds = rng.choice(REPAIR_ROUNDS)
    repairer = insert_repair_loop(g, check, rounds)
    return f"add repair loop {check} -> {repairer} on fail, {g.topology.rounds} rounds"


def add_escalation(g: Genome, rng: random.Random) -> str | None:
    """Escalate an answering agent: its answer is checked and, only if it fails the stated examples, 3 or 5
    samples of it are drawn and the best-passing answer taken."""
    feeders = [f for f in answering_feeders(g) if g.agent(f).copies == 1]
    if g.topology.aggregation == "judge" or not feeders or len(g.agents) + 3 > MAX_AGENTS:
        return None
    source = rng.choice(feeders)
    first, sampler, final = insert_escalation(g, source, rng.choice(ESCALATION_COPIES))
    return f"add escalation of {source}: {g.agent(sampler).copies} samples when {first} fails"


def _sampled_answerers(g: Genome, node: str) -> list[Agent]:
    """The LM agents with several copies whose answers reach execute node ``node``."""
    wiring = Wiring(g)
    return [wiring.agents[p] for p in wiring.predecessors(node) if p != "input"
            and wiring.agents[p].module != EXECUTE_MODULE and wiring.agents[p].copies > 1
            and g.outputs[0] in agent_signature(g, wiring.agents[p], wiring).output_names]


def effective_temperature(agent: Agent) -> float:
    """The temperature ``agent``'s copies sample at (None on a sampled agent: the runtime's copies temperature)."""
    from masforge.standalone.system import COPIES_TEMPERATURE

    return agent.temperature if agent.temperature else COPIES_TEMPERATURE


def insert_escalation_tier(genome: Genome, gate: str, sampler: str, copies: int, temperature: float) -> tuple[str,
                                                                                                          str]:
    """One more tier behind ``gate`` (an execute node answering the output, routing nothing): on ``pass`` it
    answers; on ``fail`` a copy of ``sampler`` draws ``copies`` new samples at ``temperature`` (another
    temperature: the same prompt, sample numbers and temperature would draw the same answers again) and a new gate
    picks among them and ``gate``'s pick. (new sampler, new gate)."""
    src = genome.agent(sampler)
    more = src.model_copy(deep=True)
    more.id = fresh_id(genome, f"{sampler}_more")
    more.copies, more.temperature = copies, temperature
    more.signature = str(agent_signature(genome, src))
    genome.agents.append(more)
    last = fresh_id(genome, "last_check")
    genome.agents.append(Agent(id=last, module=EXECUTE_MODULE))
    topo = genome.topology
    feeds = [a for a, b in topo.edges if b == sampler and a != sampler
             and (a == "input" or genome.agent(a).module != EXECUTE_MODULE)]
    topo.edges += [(gate, more.id), *((a, more.id) for a in feeds), (more.id, last), (gate, last), (last, "output")]
    topo.conditions = {**topo.conditions, f"{gate} -> output": "pass", f"{gate} -> {more.id}": "fail"}
    return more.id, last


def add_escalation_tier(g: Genome, rng: random.Random) -> str | None:
    """Escalate again where an escalation's last gate still fails: more samples, at another temperature, only
    for the questions nothing so far passes (a deeper cascade; what is answered already costs nothing more)."""
    if g.topology.aggregation == "judge" or len(g.agents) + 2 > MAX_AGENTS:
        return None
    places = [(gate, a) for gate in gates(g) if not _routes(g, gate) for a in _sampled_answerers(g, gate)]
    if not places:
        return None
    gate, sampler = rng.choice(places)
    temperature = rng.choice([t for t in TIER_TEMPERATURES if t != effective_temperature(sampler)])
    more, last = insert_escalation_tier(g, gate, sampler.id, rng.choice(TIER_COPIES), temperature)
    return f"add escalation tier behind {gate}: {g.agent(more).copies} samples at {temperature} when it fails"


def tune_execution(g: Genome, rng: random.Random) -> str | None:
    """Change one setting inside an execution gene: the samples a gate's sampled agent draws, their temperature, the
    rounds of a repair loop, or a routing gate's verdict when there is nothing to run (trust the answer, or send it
    on to its ``fail`` edge as unverified)."""
    options: list[str] = []
    sampled = {a.id: a for gate in (a.id for a in g.agents if a.module == EXECUTE_MODULE)
               for a in _sampled_answerers(g, gate)}
    if sampled:
        options += ["copies", "temperature"]
    edges = set(g.topology.edges)
    loops = any(v == "fail" and (k.split(" -> ")[1], k.split(" -> ")[0]) in edges
                for k, v in g.topology.conditions.items())  # a fail edge whose target feeds back: a repair loop
    if loops:
        options.append("rounds")
    routing = sorted({k.split(" -> ")[0] for k, v in g.topology.conditions.items() if v == "fail"})
    if routing:
        options.append("unchecked")
    if not options:
        return None
    what = rng.choice(options)
    if what == "unchecked":
        gate = g.agent(rng.choice(routing))
        gate.unchecked = "pass" if gate.unchecked == "fail" else "fail"
        return f"{gate.id}.unchecked -> {gate.unchecked}"
    if what == "rounds":
        old = g.topology.rounds
        g.topology.rounds = rng.choice([r for r in REPAIR_ROUNDS_RANGE if r != old])
        return f"repair rounds {old} -> {g.topology.rounds}"
    agent = sampled[rng.choice(sorted(sampled))]
    if what == "copies":
        old_copies = agent.copies
        agent.copies = rng.choice([c for c in SAMPLE_COUNTS if c != old_copies])
        return f"{agent.id}.copies {old_copies} -> {agent.copies}"
    old_t = effective_temperature(agent)
    agent.temperature = rng.choice([t for t in TIER_TEMPERATURES if t != old_t])
    return f"{agent.id}.temperature {old_t} -> {agent.temperature}"


def has_execution(genome: Genome) -> bool:
    """Whether ``genome`` has an execution gene (an execute node)."""
    return genome.kind == "config" and any(a.module == EXECUTE_MODULE for a in genome.agents)


def answering_part(genome: Genome) -> list[str]:
    """The LM agents that write the answer an execute node checks (the answering part of an execution gene), in
    agent order; without execute nodes, the agents answering the output."""
    checks = [a.id for a in genome.agents if a.module == EXECUTE_MODULE]
    if not checks:
        return answering_feeders(genome)
    wiring = Wiring(genome)
    feeding = {p for c in checks for p in wiring.predecessors(c) if p != "input"}
    edges = set(genome.topology.edges)
    repairers = {t for c in checks for t in feeding if (c, t) in edges and (t, c) in edges}  # they answer reports
    return [a.id for a in genome.agents if a.id in feeding and a.id not in repairers and a.module != EXECUTE_MODULE
            and genome.outputs[0] in agent_signature(genome, a, wiring).output_names]


def graft(a: Genome, b: Genome, rng: random.Random) -> tuple[Genome, str] | None:
    """A crossover of structures: ``a``'s execution part (its gates, escalations, repair loops, test writers) with
    ``b``'s way of answering: the agents whose answers ``a``'s gates check take the module, role, instructions,
    adapter and tools of ``b``'s first answering agent (all of them, only the greedy one or only the sampled ones),
    keeping their copies, temperatures and wiring. None where ``a`` has no execute node or nothing changes."""
    if b.kind != "config" or not has_execution(a):
        return None
    donors = answering_part(b)
    targets = answering_part(a)
    if not donors or not targets:
        return None
    donor = b.agent(donors[0])
    groups = {"all": targets, "greedy": [t for t in targets if a.agent(t).copies == 1],
              "sampled": [t for t in targets if a.agent(t).copies > 1]}
    which = rng.choice([k for k, v in groups.items() if v])
    child = a.model_copy(deep=True)
    for t in groups[which]:
        agent = child.agent(t)
        agent.module, agent.role, agent.instructions = donor.module, donor.role, donor.instructions
        agent.adapter, agent.tools, agent.max_iters = donor.adapter, list(donor.tools), donor.max_iters
    if child.id == a.id or problems(child):
        return None
    return child, f"{which} answering agents of {a.name} ({', '.join(groups[which])}) answer as {b.name}'s " \
                  f"{donor.id}"


def add_test_writer(g: Genome, rng: random.Random) -> str | None:
    """Give the execute nodes a test writer (its asserts join the stated examples), creating a test gate over the
    answering agents if there is none. Only where the verdict or the pick can change: a gate that routes, sits
    in a loop or chooses among several answers."""
    checks = [a.id for a in g.agents if a.module == EXECUTE_MODULE
              and not any(writes_tests(g, g.agent(p)) for p, b in g.topology.edges if b == a.id and p != "input")]
    feeders = answering_feeders(g)
    if not checks:
        if g.topology.aggregation == "judge" or sum(g.agent(f).copies for f in feeders) < 2:
            return None
        if len(g.agents) + 2 > MAX_AGENTS:
            return None
        checks = [insert_test_gate(g, feeders)]
    elif len(g.agents) >= MAX_AGENTS:
        return None
    useful = [c for c in checks if _routes(g, c) or _answers_into(g, c) > 1]
    if not useful:
        return None
    writer = insert_test_writer(g, useful)
    return f"add test writer {writer} for {', '.join(useful)}"


EXECUTION_EDITS = {"add_test_gate": add_test_gate, "add_repair_loop": add_repair_loop,
                   "add_escalation": add_escalation, "add_test_writer": add_test_writer,
                   "add_escalation_tier": add_escalation_tier, "tune_execution": tune_execution}
"""The execution and control edits by name (registered in :data:`masforge.search.operators.structural.EDITS`)."""
