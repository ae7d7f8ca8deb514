"""Knapsack composition: build systems from the component inventory under a cost budget.

Idea from "Automated Composition of Agents: A Knapsack Approach for Agentic Component Selection" (2025):
treat every inventory component (agent fragment, tool, model alias, graph pattern) as a knapsack item whose weight is
its cost per use and whose value is measured, not guessed, by trying it on a few probe examples; then
select items with an *online* knapsack rule, so that the selection does not depend on seeing every
component first and a component is judged by value per dollar against a bar that rises as the budget
fills. The accepted components are wired into a pipeline genome and submitted.

1. **Probe.** Each agent component is placed in the smallest system that exercises it (alone if it
   answers by itself; after a base solver if it reads ``messages``; before the base solver if it
   produces notes such as a plan) and evaluated on ``probes`` examples of the ``probe_split`` split (chosen
   from a pool of ``probe_pool`` the base solver ran on: half among those it fails, the rest among those it passes)
   with a separate small :class:`Evaluator` (default) or through ``ctx.submit`` (``probe_mode="submit"``,
   which makes probes real candidates). Solvers are worth their probe score; helpers are worth what
   they add over the base solver alone. Model aliases are probed as the base solver's LM. Graph patterns
   (execution and control genes: test gate, repair loop, escalation, test writer) are applied around the
   base solver (three sampled copies of it for the patterns that only choose among answers) and are worth
   what they add over the base solver alone. Tools are smoke-tested by calling them (patterns need python).
   A component that errors on at least ``broken_fraction`` of its probes (or a tool whose call fails) is
   blacklisted, with everything that depends on it.
2. **Select** (online knapsack, Zhou, Chakrabarty & Lukose 2008, "Budget constrained bidding in keyword
   auctions and online knapsack problems"). Items arrive in some order; with ``z`` the fraction of the
   budget already used, accept an item iff it fits and its value density ``value / cost`` is at least

       psi(z) = max(L, (U * e / L) ** z * (L / e))

   where ``U`` and ``L`` bound the densities (here: the largest and smallest positive probed densities).
   ``psi`` is ``L`` until ``z = 1 / (1 + ln(U / L))`` and then rises exponentially to ``U`` at a full
   budget, which makes the rule ``ln(U / L) + 1``-competitive against the best selection in hindsight.
   Zero-cost items are accepted when their value is positive; they never use budget.
3. **Compose** the accepted agents in layers: note-takers (plan, principles) -> solvers in parallel ->
   reviewers (critic, summariser) -> answer-producing post-processors (reviser, verifier) in a chain ->
   output; several candidates are combined by a judge if one was accepted, else by majority vote.
   Accepted tools are attached to agents that can use them (react gets all, program_of_thought python);
   the best accepted model alias becomes every agent's LM. Accepted patterns are then wrapped around the
   answering agents in the order of :data:`PATTERN_ORDER` (one that does not fit is left out).
4. **Repeat** with other arrival orders while the budget and ``rounds`` allow; equal compositions are duplicates
   and cost nothing. The first round offers the components best value per dollar first (free ones first), the
   greedy order of an offline knapsack: every value is known by then, and in inventory order the answering
   agents, listed first, filled the budget before any graph pattern was offered. Later rounds shuffle.

Probes go round-robin over the kinds (agent, pattern, model, in the inventory's order within a kind), so the
``probe_share`` cap cuts every kind alike: probing in inventory order spent the whole share on agents and left
every graph pattern unprobed (HumanEval, 300 calls), though the patterns make every good code system found.

Options: ``budget`` (component dollars per example), ``probes``, ``probe_split``, ``probe_mode``,
``probe_share`` (the most of the LM-call budget the probes may use: half by default, so a small budget still
composes), ``probe_pool``, ``rounds``, ``inventory`` (a components.yaml path) or ``components`` (objects),
``broken_fraction``, ``surrogate``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from masforge.errors import BudgetExceeded, MasforgeError
from masforge.evaluators.runner import Evaluator
from masforge.genome.schema import Agent, Genome
from masforge.genome.signature import parse_signature
from masforge.genome.validate import problems
from masforge.search.context import Proposal, SearchContext
from masforge.search.events import KnapsackBlacklist, KnapsackProbe, KnapsackSelect
from masforge.search.operators.execution import apply_pattern
from masforge.search.strategies.base import Strategy, bad_option, register

Role = Literal["pre", "solver", "mid", "post", "judge"]

# Known-answer smoke tests for the built-in tools; other tools only have to run without an error.
TOOL_SMOKE: dict[str, tuple[str, str | None]] = {
    "calculator": ("2+3", "5"),
    "python": ("print(2+3)", "5"),
}
BASE_ID = "probe_base"
PATTERN_ORDER = ("escalation", "repair_loop", "test_gate", "test_writer")
"""The order accepted patterns are applied in: an escalation needs an answering agent wired to output; a repair
loop then closes behind a gate that routes nothing yet; a test writer feeds every gate there is."""
FILTER_PATTERNS = ("test_gate", "test_writer")
"""Patterns that only choose among answers (no route): probed over three sampled copies of the base solver."""
KINDS = ("agent", "tool", "model", "pattern")


# ----------------------------------------------------------------------------------- the knapsack rule


def zcl_threshold(z: float, upper: float, lower: float) -> float:
    """The online-knapsack acceptance bar psi(z) = max(L, (U e / L)^z (L / e)) at budget fraction ``z``.

    From Zhou, Chakrabarty & Lukose (2008); ``U`` / ``L`` are upper / lower bounds on value density.
    With ``U <= L`` (one density seen) the bar is constant at ``L``."""
    if lower <= 0:
        raise ValueError(f"lower density bound must be positive, got {lower}")
    z = min(max(z, 0.0), 1.0)
    if upper <= lower:
        return lower
    return max(lower, (upper * math.e / lower) ** z * (lower / math.e))


@dataclass
class OnlineKnapsack:
    """Accept-or-reject items one at a time against ``capacity`` with the :func:`zcl_threshold` rule.

    The capacity is a hard limit: an item that does not fit is rejected whatever its density."""

    capacity: float
    upper: float
    lower: float
    used: float = 0.0
    accepted: list[str] = field(default_factory=list)
    decisions: list[tuple[str, bool, str]] = field(default_factory=list)
    """(key, accepted, why) for every offer, in order."""

    @property
    def fraction(self) -> float:
        """Share of the capacity already used (1.0 for a zero capacity)."""
        return 1.0 if self.capacity <= 0 else min(1.0, self.used / self.capacity)

    def offer(self, key: str, value: float, weight: float) -> bool:
        """Decide on one item now; True if accepted (then its weight is used)."""
        if value <= 0:
            return self._decide(key, False, "no value")
        if weight <= 0:
            return self._decide(key, True, "free")
        if self.used + weight > self.capacity * (1 + 1e-9):
            return self._decide(key, False, f"does not fit ({self.used + weight:.6g} > {self.capacity:.6g})")
        psi = zcl_threshold(self.fraction, self.upper, self.lower)
        density = value / weight
        if density + 1e-12 < psi:
            return self._decide(key, False, f"density {density:.4g} < threshold {psi:.4g}")
        self.used += weight
        return self._decide(key, True, f"density {density:.4g} >= threshold {psi:.4g}")

    def _decide(self, key: str, ok: bool, why: str) -> bool:
        if ok:
            self.accepted.append(key)
        self.decisions.append((key, ok, why))
        return ok


def density_bounds(items: list[tuple[float, float]]) -> tuple[float, float] | None:
    """(U, L): the largest and smallest positive value/cost among priced items; None if there is none."""
    dens = [v / w for v, w in items if v > 0 and w > 0]
    if not dens:
        return None
    return max(dens), min(dens)


# ----------------------------------------------------------------------------------- component roles


def agent_role(agent: Agent, outputs: list[str]) -> Role:
    """Where an agent fragment goes in a pipeline, read from its signature (or, for fragments that adapt
    to their wiring, from its role and instructions): ``pre`` note-taker, ``solver``, ``mid`` reviewer
    of messages, ``post`` answer-producing post-processor, or ``judge``."""
    text = f"{agent.id} {agent.role} {agent.instructions}".lower()
    if agent.signature:
        sig = parse_signature(agent.signature)
        if "candidates" in sig.input_names:
            return "judge"
        answers = all(o in sig.output_names for o in outputs)
        reads = "messages" in sig.input_names
        if answers:
            return "post" if reads else "solver"
        return "mid" if reads else "pre"
    if "judge" in agent.role.lower() or agent.id == "judge" or "candidate answers" in text:
        return "judge"
    if "messages" in text:
        return "post"
    return "solver"


def probe_order(components: list[Any]) -> list[Any]:
    """``components`` round-robin over their kinds (kinds and members in first-seen order), so that a cap on the
    probes leaves no kind unprobed."""
    by_kind: dict[str, list[Any]] = {}
    for comp in components:
        by_kind.setdefault(comp.kind, []).append(comp)
    queues = list(by_kind.values())
    order: list[Any] = []
    for i in range(max((len(q) for q in queues), default=0)):
        order += [q[i] for q in queues if i < len(q)]
    return order


def _base_agent() -> Agent:
    return Agent(id=BASE_ID, role="solver", instructions="Answer the question.", module="predict")


def _fragment(comp: Any) -> Agent:
    return comp.agent.model_copy(deep=True)


def probe_genome(comp: Any, inputs: list[str], outputs: list[str]) -> tuple[Genome, bool]:
    """The smallest system exercising an agent, model or pattern component, and whether it includes the base
    solver (then the component's value is its gain over the base alone)."""
    name = f"probe-{comp.id}"
    if comp.kind == "pattern":
        base = _base_agent()
        if comp.pattern in FILTER_PATTERNS:
            base.copies = 3  # a filter needs answers to choose from (copies of a greedy LM sample)
        genome = Genome(name=name, inputs=inputs, outputs=outputs, agents=[base],
                        topology={"edges": [("input", BASE_ID), (BASE_ID, "output")]})
        apply_pattern(genome, comp.pattern)
        return genome, True
    if comp.kind == "model":
        base = _base_agent()
        base.lm = comp.model
        return Genome(name=name, inputs=inputs, outputs=outputs, agents=[base],
                      topology={"edges": [("input", BASE_ID), (BASE_ID, "output")]}), False
    agent = _fragment(comp)
    role = agent_role(agent, outputs)
    base = _base_agent()
    if role == "solver":
        edges = [("input", agent.id), (agent.id, "output")]
        return Genome(name=name, inputs=inputs, outputs=outputs, agents=[agent], topology={"edges": edges}), False
    if role == "pre":
        edges = [("input", agent.id), ("input", BASE_ID), (agent.id, BASE_ID), (BASE_ID, "output")]
        return Genome(name=name, inputs=inputs, outputs=outputs, agents=[agent, base],
                      topology={"edges": edges}), True
    if role == "judge":
        base.copies, base.temperature = 3, 0.7
        topo = {"edges": [("input", BASE_ID), (BASE_ID, "output")], "aggregation": "judge", "judge": agent.id}
        return Genome(name=name, inputs=inputs, outputs=outputs, agents=[base, agent], topology=topo), True
    if role == "mid":
        # A reviewer's notes need a consumer that answers: a second base-like finisher.
        finisher = Agent(id=f"{BASE_ID}_final", role="solver", module="predict",
                         instructions="Give the final answer, using the notes in messages.")
        edges = [("input", BASE_ID), ("input", agent.id), (BASE_ID, agent.id), ("input", finisher.id),
                 (BASE_ID, finisher.id), (agent.id, finisher.id), (finisher.id, "output")]
        return Genome(name=name, inputs=inputs, outputs=outputs, agents=[base, agent, finisher],
                      topology={"edges": edges}), True
    edges = [("input", BASE_ID), ("input", agent.id), (BASE_ID, agent.id), (agent.id, "output")]
    return Genome(name=name, inputs=inputs, outputs=outputs, agents=[base, agent], topology={"edges": edges}), True


def compose(selected: list[Any], inputs: list[str], outputs: list[str], *, tools: list[str] | None = None,
            model: str | None = None, name: str = "knapsack", tool_ids: dict[str, str] | None = None,
            model_id: str | None = None) -> Genome | None:
    """Wire accepted agent components into a layered pipeline genome (see the module docstring); None if
    no accepted agent can answer or no valid wiring exists. ``tools`` are tool names and ``model`` an LM
    alias; ``tool_ids`` / ``model_id`` name their components in the genome's ``components`` list."""
    tools = tools or []
    tool_ids = tool_ids or {}
    layers: dict[Role, list[Agent]] = {"pre": [], "solver": [], "mid": [], "post": [], "judge": []}
    ids: set[str] = set()
    used: dict[str, str] = {}
    for comp in selected:
        agent = _fragment(comp)
        if agent.id in ids:  # two fragments may share an id; keep both, renamed
            i = 2
            while f"{agent.id}_{i}" in ids:
                i += 1
            agent.id = f"{agent.id}_{i}"
        ids.add(agent.id)
        used[agent.id] = comp.id
        layers[agent_role(agent, outputs)].append(agent)
    if not layers["solver"]:
        # Post-processors with an adaptive signature can answer from the input alone.
        adaptive = [a for a in layers["post"] if not a.signature]
        if not adaptive:
            return None
        layers["solver"].append(adaptive[0])
        layers["post"].remove(adaptive[0])
    attempts = [(True, True, True), (True, False, True), (False, False, False)]
    for use_pre, use_mid, use_post in attempts:
        g = _wire(layers, inputs, outputs, use_pre=use_pre, use_mid=use_mid, use_post=use_post, name=name)
        for agent in g.agents:
            if agent.module == "react":
                agent.tools = list(dict.fromkeys([*agent.tools, *tools]))
            elif agent.module == "program_of_thought" and "python" in tools and "python" not in agent.tools:
                agent.tools = [*agent.tools, "python"]
            if model and agent.lm == "worker":
                agent.lm = model
        if not problems(g):
            comps = [used[a.id] for a in g.agents]
            comps += [tool_ids.get(t, t) for t in tools if any(t in a.tools for a in g.agents)]
            if model:
                comps.append(model_id or model)
            g.components = list(dict.fromkeys(comps))
            return g
    return None


def with_patterns(genome: Genome, patterns: list[tuple[str, str]]) -> tuple[Genome, list[str]]:
    """``genome`` with the ``(component id, pattern)`` s applied in :data:`PATTERN_ORDER`, each only if it fits and
    leaves a valid genome; the ids of the components applied (also added to the genome's ``components``)."""
    applied: list[str] = []
    for pattern in PATTERN_ORDER:
        for cid, name in patterns:
            if name != pattern:
                continue
            trial = genome.model_copy(deep=True)
            if apply_pattern(trial, pattern) is not None and not problems(trial):
                genome = trial
                genome.components = list(dict.fromkeys([*genome.components, cid]))
                applied.append(cid)
    return genome, applied


def _wire(layers: dict[Role, list[Agent]], inputs: list[str], outputs: list[str], *, use_pre: bool,
          use_mid: bool, use_post: bool, name: str) -> Genome:
    pre = layers["pre"] if use_pre else []
    solvers = layers["solver"]
    post = layers["post"] if use_post else []
    mid = layers["mid"] if (use_mid and post) else []  # reviewers' notes need an answering consumer
    edges: list[tuple[str, str]] = []
    for p in pre:
        edges.append(("input", p.id))
    for s in solvers:
        edges.append(("input", s.id))
        edges += [(p.id, s.id) for p in pre]
    for m in mid:
        edges.append(("input", m.id))
        edges += [(s.id, m.id) for s in solvers]
    for i, q in enumerate(post):
        edges.append(("input", q.id))
        feeders = [*solvers, *mid] if i == 0 else [post[i - 1], *mid]
        edges += [(f.id, q.id) for f in feeders]
    finals = [post[-1]] if post else solvers
    edges += [(f.id, "output") for f in finals]
    agents = [*pre, *solvers, *mid, *post]
    candidates = sum(a.copies for a in finals)
    topo: dict[str, Any] = {"edges": edges, "aggregation": "last"}
    if candidates > 1:
        if layers["judge"]:
            judge = layers["judge"][0]
            agents.append(judge)
            topo.update(aggregation="judge", judge=judge.id)
        else:
            topo["aggregation"] = "majority_vote"
    parts = [a.id for a in agents]
    return Genome(name=name, description=f"Knapsack composition of {', '.join(parts)}.",
                  source="Automated Composition of Agents (online knapsack selection)", inputs=inputs,
                  outputs=outputs, agents=agents, topology=topo)


# ----------------------------------------------------------------------------------- the strategy


@dataclass
class ComponentValue:
    """What probing found out about one component."""

    id: str
    kind: str
    cost: float
    value: float = 0.0
    score: float | None = None
    broken: str | None = None
    """Why the component is blacklisted (None: usable)."""
    skipped: str | None = None
    """Why it was not probed (incompatible with the task, alias not configured, budget)."""


@register
class Knapsack(Strategy):
    """Probe inventory components, select them with the online-knapsack rule under a dollar budget per
    example, compose the accepted ones into a pipeline and submit it; repeat with other arrival orders."""

    name = "knapsack"

    def __init__(self, budget: float = 0.002, probes: int = 3, probe_split: str = "train",
                 probe_mode: Literal["evaluator", "submit"] = "evaluator", rounds: int = 4,
                 inventory: str | None = None, components: list[Any] | None = None,
                 broken_fraction: float = 0.5, kinds: tuple[str, ...] = KINDS,
                 probe_share: float | None = 0.5, probe_pool: int | None = None, **options: Any) -> None:
        """Options of knapsack.

        Args:
            budget: dollars per example the selected components may cost together.
            probes: examples each component is tried on to measure its value.
            probe_split: the split probes are drawn from (train keeps them off the validation examples).
            probe_mode: evaluator (probes are private measurements) or submit (probes become real candidates).
            rounds: compositions tried, each with another arrival order of the components.
            inventory: a components.yaml file to draw components from (None: the shipped inventory).
            components: component objects given directly (the Python API), instead of an inventory file.
            broken_fraction: share of probes a component may fail on before it is blacklisted.
            kinds: the kinds of component considered: agent, tool, model.
            probe_share: the most of the search's LM-call budget the probes may use (counted as the calls they
                make, answered from the cache or not, so a resumed run probes as the stopped one did); the
                components left when it is used are not probed and not selected. None: no limit.
            probe_pool: examples of the probe split the base solver is run on first, to draw the probes from: half
                of them among the examples it fails, where a helper or pattern can show what it adds, the rest among
                those it passes, where it can do harm (None: four times ``probes``; ``probes`` or fewer: the first
                examples, as they come). Evaluator probes only.
        """
        super().__init__(**options)
        if budget < 0:
            raise bad_option("budget", f"must be >= 0 dollars per example, got {budget}")
        if probe_mode not in ("evaluator", "submit"):
            raise bad_option("probe_mode", f"must be 'evaluator' or 'submit', got {probe_mode!r}")
        if probe_share is not None and not 0.0 < probe_share <= 1.0:
            raise bad_option("probe_share", f"must be in (0, 1] (or None), got {probe_share}")
        if not 0.0 < broken_fraction <= 1.0:
            raise bad_option("broken_fraction", f"must be in (0, 1], got {broken_fraction}")
        unknown = [k for k in kinds if k not in KINDS]
        if unknown:
            raise bad_option("kinds", f"unknown component kind '{unknown[0]}' (kinds: {', '.join(KINDS)})")
        if inventory is not None and not Path(inventory).is_file():
            raise bad_option("inventory", f"no inventory file {inventory} (a components.yaml)")
        self.budget = float(budget)
        self.probes = max(1, int(probes))
        self.probe_split = probe_split
        self.probe_mode = probe_mode
        self.rounds = max(1, int(rounds))
        self.inventory = inventory
        self.components = list(components) if components is not None else None
        self.broken_fraction = broken_fraction
        self.probe_share = probe_share
        if probe_pool is not None and probe_pool < 1:
            raise bad_option("probe_pool", f"must be at least 1 example (or None), got {probe_pool}")
        self.probe_pool = max(self.probes, probe_pool if probe_pool is not None else 4 * self.probes)
        self.probe_examples: list[str] = []
        """The ids of the examples every component was probed on."""
        self._probe_calls = 0
        """LM calls the probes made so far (new or from the cache)."""
        self.kinds = tuple(kinds)
        self.values: dict[str, ComponentValue] = {}
        self.blacklist: dict[str, str] = {}
        """Component id -> why it is unusable."""
        self.selections: list[dict[str, Any]] = []
        """Per round: order, accepted ids, dollars used, budget, the decisions and the composed genome id."""
        self._round = 0
        self._base_score: float | None = None
        self._catalog: dict[str, Any] = {}
        self._outputs: list[str] = ["answer"]

    # ------------------------------------------------------------------ probing

    def setup(self, ctx: SearchContext) -> None:
        comps = self.components
        if comps is None:
            from masforge.seeds import load_inventory

            comps = load_inventory(self.inventory)
        self._catalog = {c.id: c for c in comps if c.kind in self.kinds}
        self._probe_all(ctx)

    def _genome_io(self, ctx: SearchContext) -> tuple[list[str], list[str]]:
        self._outputs = [ctx.task.output_field]
        return list(ctx.task.input_fields), [ctx.task.output_field]

    def _probe_all(self, ctx: SearchContext) -> None:
        inputs, outputs = self._genome_io(ctx)
        evaluator: Evaluator | None = None
        if self.probe_mode == "evaluator":
            try:
                evaluator = Evaluator(ctx.task, ctx.client, split=self.probe_split, limit=self.probe_pool,
                                      concurrency=min(4, self.probes), executor=ctx.evaluator.executor)
            except MasforgeError:  # no such split for this task: probe on the search split instead
                evaluator = Evaluator(ctx.task, ctx.client, split=ctx.evaluator.split, limit=self.probe_pool,
                                      concurrency=min(4, self.probes), executor=ctx.evaluator.executor)
        # Tools first: they cost nothing to test and agents depending on a broken tool are skipped.
        for comp in self._catalog.values():
            if comp.kind == "tool":
                self.values[comp.id] = self._smoke_tool(comp)
        base = Genome(name="probe-base", inputs=inputs, outputs=outputs, agents=[_base_agent()],
                      topology={"edges": [("input", BASE_ID), (BASE_ID, "output")]})
        base_scores: dict[str, float] = {}
        base_result = self._run_probe(ctx, evaluator, base, base_scores)
        if evaluator is not None and base_result is not None and base_scores:  # scores come with a finished run
            base_result = (self._keep_probes(evaluator, base_scores), base_result[1])
        cap = ctx.calls_share(self.probe_share)
        self._base_score = base_result[0] if base_result and base_result[1] is None else 0.0
        for comp in probe_order(list(self._catalog.values())):
            if comp.kind == "tool":
                continue
            cv = ComponentValue(comp.id, comp.kind, comp.cost)
            self.values[comp.id] = cv
            if ctx.should_stop():
                cv.skipped = "budget reached before probing"
                continue
            if cap is not None and self._probe_calls >= cap:  # on a small budget, probes must leave room to compose
                cv.skipped = f"probes used their share of the budget ({self._probe_calls} LM calls)"
                continue
            if comp.kind == "model" and comp.model not in ctx.client.lms:
                cv.skipped = f"LM alias '{comp.model}' is not configured in this run"
                continue
            needs = comp.agent.tools if comp.kind == "agent" else ["python"] if comp.kind == "pattern" else []
            bad_tools = [t for t in needs if self._tool_broken(t)]
            if bad_tools:
                self._blacklist(ctx, cv, f"needs broken tool '{bad_tools[0]}'")
                continue
            genome, relative = probe_genome(comp, inputs, outputs)
            found = problems(genome)
            if found:
                cv.skipped = f"does not fit this task: {found[0]}"
                continue
            result = self._run_probe(ctx, evaluator, genome)
            if result is None:
                cv.skipped = "probe not finished (budget)"
                continue
            score, broken = result
            if broken:
                self._blacklist(ctx, cv, broken)
                continue
            cv.score = score
            cv.value = max(0.0, score - (self._base_score or 0.0)) if relative else score
            ctx.emit(KnapsackProbe(component=comp.id, value=cv.value, cost=cv.cost, score=score))
        # A tool is worth what the best agent that can use it is worth.
        for comp in self._catalog.values():
            if comp.kind == "tool" and not self.values[comp.id].broken:
                users = [self.values[c.id].value for c in self._catalog.values() if c.id in self.values and (
                    (c.kind == "agent" and self._can_use(c.agent, comp.tool))
                    or (c.kind == "pattern" and comp.tool == "python"))]
                self.values[comp.id].value = max(users, default=0.0)

    @staticmethod
    def _can_use(agent: Agent, tool: str) -> bool:
        return tool in agent.tools or agent.module == "react" or (
            agent.module == "program_of_thought" and tool == "python")

    def _tool_broken(self, tool: str) -> bool:
        comp = next((c for c in self._catalog.values() if c.kind == "tool" and c.tool == tool), None)
        return comp is not None and self.values.get(comp.id, ComponentValue(comp.id, "tool", 0)).broken is not None

    def _smoke_tool(self, comp: Any) -> ComponentValue:
        from masforge.sandbox.tools import get_tool

        cv = ComponentValue(comp.id, "tool", comp.cost)
        arg, expected = TOOL_SMOKE.get(comp.tool, ("1", None))
        try:
            out = get_tool(comp.tool)(arg)
        except MasforgeError as exc:
            cv.broken = f"tool call failed: {exc}"
            self.blacklist[comp.id] = cv.broken
            return cv
        if out.startswith("error") or (expected is not None and expected not in out):
            cv.broken = f"tool smoke test failed: {arg!r} gave {out[:80]!r}"
            self.blacklist[comp.id] = cv.broken
        return cv

    def _blacklist(self, ctx: SearchContext, cv: ComponentValue, why: str) -> None:
        cv.broken = why
        self.blacklist[cv.id] = why
        ctx.emit(KnapsackBlacklist(component=cv.id, reason=why))

    def _keep_probes(self, evaluator: Evaluator, base_scores: dict[str, float]) -> float:
        """Narrow ``evaluator`` from the pool the base solver ran on to ``probes`` examples: half (rounded up) among
        those the base fails, the rest among those it passes, each in split order, one side filling in for the other
        when short. On three easy-or-impossible examples every pattern's gain over the base is 0: HumanEval's first
        three training problems gave every component 2 of 3. Returns the base's score on the examples kept."""
        pool = [e for e in evaluator.examples if e.id in base_scores]
        failed = [e for e in pool if base_scores[e.id] < 1.0]
        passed = [e for e in pool if base_scores[e.id] >= 1.0]
        n_failed = min(len(failed), max(self.probes - len(passed), (self.probes + 1) // 2))
        kept = {e.id for e in [*failed[:n_failed], *passed[:self.probes - n_failed]]}
        evaluator.examples = [e for e in pool if e.id in kept]
        self.probe_examples = [e.id for e in evaluator.examples]
        return sum(base_scores[i] for i in self.probe_examples) / max(1, len(self.probe_examples))

    def _run_probe(self, ctx: SearchContext, evaluator: Evaluator | None, genome: Genome,
                   scores: dict[str, float] | None = None) -> tuple[float, str | None] | None:
        """(score, why broken or None) of a probe system; None if the budget ended it. ``scores``, if given, is
        filled with the score of each example (evaluator probes only)."""
        if evaluator is None:
            try:
                cand = ctx.try_submit(Proposal(genome, [], "knapsack_probe", f"probe {genome.name}"))
            except BudgetExceeded:
                return None
            if cand is None:
                return 0.0, "rejected by the runtime"
            self._probe_calls += cand.llm_calls + cand.cache_hits
            errors = sum(v for k, v in cand.failures.items() if k not in ("wrong", "unscored"))
            n = max(1, len(ctx.evaluator.examples))
            broken = f"errors on {errors} of {n} probes" if errors / n >= self.broken_fraction else None
            return cand.score, broken
        try:
            report = evaluator.evaluate(genome)
        except BudgetExceeded:
            return None
        except MasforgeError as exc:
            return 0.0, f"cannot run: {str(exc)[:200]}"
        self._probe_calls += report.llm_calls + report.cache_hits
        if report.stopped or report.incomplete:
            return None  # no budget left, or the provider is failing: no value can be measured now
        if scores is not None:
            scores.update({e.example_id: e.score for e in report.scored})
        errors = [e for e in report.scored if e.error]
        if report.n and len(errors) / report.n >= self.broken_fraction:
            kind = errors[0].error_kind or "error"
            return report.score, f"errors on {len(errors)} of {report.n} probes ({kind}: {errors[0].error[:120]})"
        return report.score, None

    # ------------------------------------------------------------------ selection and composition

    def select(self, order: list[str]) -> tuple[OnlineKnapsack, list[str]]:
        """Run the online knapsack over usable components in ``order``; (knapsack, accepted ids)."""
        usable = [cid for cid in order if cid in self.values and not self.values[cid].broken
                  and not self.values[cid].skipped]
        bounds = density_bounds([(self.values[c].value, self.values[c].cost) for c in usable])
        upper, lower = bounds or (1.0, 1.0)
        ks = OnlineKnapsack(capacity=self.budget, upper=upper, lower=lower)
        for cid in usable:
            ks.offer(cid, self.values[cid].value, self.values[cid].cost)
        accepted = list(ks.accepted)
        agents = [c for c in accepted if self._catalog[c].kind == "agent"]
        outs = self._outputs
        answerers = [c for c in agents if agent_role(self._catalog[c].agent, outs) in ("solver", "post")]
        if not answerers:
            # A system needs someone to answer: take the best usable solver that still fits the budget.
            spare = self.budget - ks.used
            options = [c for c in usable if self._catalog[c].kind == "agent" and c not in accepted
                       and agent_role(self._catalog[c].agent, outs) == "solver"
                       and self.values[c].cost <= spare + 1e-12]
            if options:
                pick = max(options, key=lambda c: (self.values[c].value, -self.values[c].cost))
                ks.used += self.values[pick].cost
                ks.accepted.append(pick)
                ks.decisions.append((pick, True, "fallback answerer (no solver accepted)"))
                accepted.append(pick)
        return ks, accepted

    def _density(self, cid: str) -> float:
        """Value per dollar of a component (infinite for a free one with a value, 0 without a value)."""
        cv = self.values[cid]
        if cv.value <= 0:
            return 0.0
        return math.inf if cv.cost <= 0 else cv.value / cv.cost

    def step(self, ctx: SearchContext) -> list[Proposal]:
        if self._round >= self.rounds or not self.values:
            return []
        order = [cid for cid in self._catalog if cid in self.values]
        if self._round > 0:
            ctx.rng.shuffle(order)
        else:
            order.sort(key=self._density, reverse=True)  # stable: equal densities keep inventory order
        self._round += 1
        ks, accepted = self.select(order)
        inputs, outputs = self._genome_io(ctx)
        agents = [self._catalog[c] for c in accepted if self._catalog[c].kind == "agent"]
        tools = [self._catalog[c].tool for c in accepted if self._catalog[c].kind == "tool"]
        models = [c for c in accepted if self._catalog[c].kind == "model"]
        model, model_id = None, None
        if models:
            model_id = max(models, key=lambda c: (self.values[c].value, -self.values[c].cost))
            model = self._catalog[model_id].model
        tool_ids = {self._catalog[c].tool: c for c in accepted if self._catalog[c].kind == "tool"}
        genome = compose(agents, inputs, outputs, tools=tools, model=model, name=f"knapsack-r{self._round}",
                         tool_ids=tool_ids, model_id=model_id)
        patterns = [(c, self._catalog[c].pattern) for c in accepted if self._catalog[c].kind == "pattern"]
        if genome is not None and patterns:
            genome, _ = with_patterns(genome, patterns)
        record = {"round": self._round, "order": order, "accepted": accepted, "used": ks.used,
                  "budget": self.budget, "decisions": ks.decisions, "genome": genome.id if genome else None}
        self.selections.append(record)
        ctx.emit(KnapsackSelect(**{k: v for k, v in record.items() if k != "decisions"}))
        if genome is None:
            return []
        genome.metadata = {"knapsack": {"accepted": accepted, "used": round(ks.used, 8), "budget": self.budget}}
        why = f"online knapsack round {self._round}: {', '.join(accepted)} (${ks.used:.5f} of ${self.budget:.5f})"
        return [Proposal(genome, [], "knapsack_compose", why)]

    def report(self) -> dict[str, Any]:
        """Probe values, blacklist, selections and surrogate counts (for logs and tests)."""
        return {"values": {k: vars(v) for k, v in self.values.items()}, "blacklist": dict(self.blacklist),
                "selections": self.selections, "surrogate": self.filter.stats() if self.filter else None}
