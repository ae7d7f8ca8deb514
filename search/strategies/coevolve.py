"""Co-evolution of agents and topology on two time scales (after TacoMAS).

What an agent is told and how agents are wired are two different kinds of knobs: instructions are cheap
to change and their effect shows in the failure traces right away, while a topology change only pays off
once the agents in it have been tuned to their new places. So the search runs two loops:

* **fast loop (every step)**: take the best system, pick one of its agents (round robin, agents feeding
  the output first) and rewrite its instructions *reflectively*: the meta LM reads the system, its
  score and the failed examples with their traces and is asked "given these failures, rewrite this
  agent's instructions" (template ``coevolve_rewrite``). If the reply is unusable (no
  ``<instructions>`` block, empty, unchanged, absurdly long, or the LM failed), an edit from a small
  library of instruction edits (``coevolve_edits``: verify, restate, decompose, answer format, ...)
  not yet tried on that agent is appended instead, so the loop makes progress even with a weak or fake
  meta LM.
* **slow loop (every ``slow_every`` steps, in addition)**: edit the topology of the best system with a
  structural mutation (add or remove an agent, rewire an edge, rounds, aggregation), or with the
  meta-agent's ``mutate`` when ``use_meta_agent`` is set and that operator is available. The fast loop
  then spends the next ``incubation`` steps (default ``slow_every - 1``) adapting the instructions of
  the new structure, whatever its first score, before it goes back to the best system: a topology
  change is judged with instructions written for the old topology, so its first score undersells it.

Why reflective rewriting and not a dspy optimizer (MIPRO, COPRO, GEPA): those optimise one dspy program
with their own trace format and need many evaluations per proposal; a single meta-LM call per step that
reads our own failure notes (input, expected, got, trace summary, which every candidate already carries)
is cheap, works with any genome the compiler builds, and keeps each step to one evaluation.

Options: ``slow_every``, ``incubation``, ``meta_alias``, ``temperature`` (meta LM), ``failures`` (failed
examples shown), ``topology_edits`` (structural edit names), ``use_meta_agent``, ``seed_genome`` (used
if the population is empty), ``surrogate`` / ``surrogate_margin``. The surrogate only screens the slow loop's topology
proposals: its features describe structure, so it cannot tell two wordings of an instruction apart and
would wrongly call every rewrite of a strong system hopeless.
"""

from __future__ import annotations

import random
import re
from collections.abc import Sequence
from typing import Any

from masforge.errors import BudgetExceeded, GenomeError, MasforgeError
from masforge.genome.schema import Agent, Genome
from masforge.genome.validate import problems
from masforge.search.context import Proposal, SearchContext
from masforge.search.events import Note
from masforge.search.operators.execution import EXECUTION_EDITS
from masforge.search.operators.prompting import genome_brief
from masforge.search.operators.structural import EDITS, mutate_with
from masforge.search.population import Candidate
from masforge.search.prompts import render, template
from masforge.search.strategies.base import Strategy, bad_option, register, rewritten
from masforge.seeds import load_seed
from masforge.standalone.plain_adapter import strip_think

TOPOLOGY_EDITS = ("add_agent", "add_sampled_branch", "remove_agent", "rewire", "change_rounds",
                  "change_aggregation", "change_module", "change_copies", *EXECUTION_EDITS)
"""The slow loop's structural edits by default (the fast loop rewrites instructions); the module kind and the copies
belong here too: a program-of-thought solver or a vote changes how a system works, not what it is told. So do the
execution edits (a test gate, a repair loop, escalation, a test writer): on code tasks they are the edits that help
small models most, and credit assignment stops drawing them where they do not help."""
_TAGGED = re.compile(r"<instructions>\s*(.*?)\s*</instructions>", re.S | re.I)


def instruction_edits() -> list[str]:
    """The fallback library of instruction edits (one sentence per line of ``coevolve_edits.txt``)."""
    return [line.strip() for line in template("coevolve_edits").splitlines() if line.strip()]


def parse_instructions(text: str, old: str, *, min_chars: int = 12, max_chars: int = 2000) -> str | None:
    """The new instructions in a meta-LM reply, or None when the reply is unusable: no
    ``<instructions>`` block, too short or too long, chat-format residue, or the same as ``old``."""
    m = _TAGGED.search(strip_think(text or ""))
    if not m:
        return None
    new = " ".join(m.group(1).split())
    if not min_chars <= len(new) <= max_chars or "[[ ##" in new or "<instructions>" in new.lower():
        return None
    if new.lower() == " ".join(old.split()).lower():
        return None
    return new


@register
class Coevolve(Strategy):
    """Fast reflective instruction rewriting every step, structural topology edits every ``slow_every``."""

    name = "coevolve"

    def __init__(self, slow_every: int = 3, meta_alias: str = "meta", temperature: float = 0.8,
                 failures: int = 3, topology_edits: list[str] | tuple[str, ...] | None = None,
                 use_meta_agent: bool = False, seed_genome: str = "cot", incubation: int | None = None,
                 adaptive: bool = True, ablate: bool = True, **options: Any) -> None:
        """Options of coevolve.

        Args:
            slow_every: steps between topology edits (the slow loop); 0: instructions only.
            meta_alias: the LM alias that rewrites instructions (``meta``: --meta-lm).
            temperature: sampling temperature of the instruction rewrites.
            failures: failed examples (with their traces) shown for each rewrite.
            topology_edits: the structural edits the slow loop may make (default: add_agent, add_sampled_branch,
                remove_agent, rewire, change_rounds, change_aggregation, change_module, change_copies).
            use_meta_agent: let the meta-agent's mutation make the topology edits instead of the structural operators.
            seed_genome: the seed started from when the archive holds no system yet.
            incubation: steps spent tuning a new topology's instructions before going back to the best system
                (None: slow_every - 1).
            adaptive: choose topology edits by their observed success in this run (a bandit; see
                :mod:`masforge.search.credit`) and the failure kinds of the parent; False: uniform draws.
            ablate: re-score the best system with each agent dropped (on cached answers where possible) and
                feed the per-agent credit to remove_agent.
        """
        super().__init__(**options)
        names = tuple(topology_edits) if topology_edits else TOPOLOGY_EDITS
        unknown = [n for n in names if n not in EDITS]
        if unknown:
            raise bad_option("topology_edits",
                             f"unknown topology edit '{unknown[0]}' (edits: {', '.join(sorted(EDITS))})")
        if not 0.0 <= temperature <= 2.0:
            raise bad_option("temperature", f"must be between 0 and 2, got {temperature}")
        try:
            load_seed(seed_genome)
        except GenomeError as exc:
            raise bad_option("seed_genome", str(exc)) from None
        self.slow_every = max(0, int(slow_every))
        self.incubation = max(0, int(incubation if incubation is not None else max(1, self.slow_every - 1)))
        self.meta_alias = meta_alias
        self.temperature = temperature
        self.failures = failures
        self.edits = {n: EDITS[n] for n in names}
        self.use_meta_agent = use_meta_agent
        self.seed_genome = seed_genome
        self.adaptive = adaptive
        """Topology edits drawn by the run's operator bandit with a failure-kind prior (else uniformly)."""
        self.ablate = ablate
        """Each new incumbent is scored without each of its agents: credit per agent, and pruning."""
        self.stats: dict[str, int] = {"steps": 0, "rewrites": 0, "meta_unusable": 0, "fallbacks": 0,
                                      "topology": 0, "improved_fast": 0, "improved_slow": 0}
        self._turn: dict[str, int] = {}
        self._tried: set[tuple[str, str, str]] = set()
        self._meta: Any = None
        self._focus: str | None = None
        """A new topology the fast loop adapts before it must compete on fitness (candidate id)."""
        self._focus_left = 0

    def setup(self, ctx: SearchContext) -> None:
        if self.use_meta_agent:
            try:
                from masforge.search.operators.meta import MetaAgent

                self._meta = MetaAgent(ctx.client, alias=self.meta_alias)
            except (ImportError, TypeError) as exc:  # optional operator: structural edits still work
                ctx.emit(Note(strategy=self.name, message=f"meta-agent unavailable ({exc}); structural edits"))
        if not ctx.population:
            try:
                ctx.try_submit(Proposal(load_seed(self.seed_genome), [], "seed", "coevolve starting point"))
            except BudgetExceeded:
                return

    # ------------------------------------------------------------------ one step

    def step(self, ctx: SearchContext) -> list[Proposal]:
        best = next((c for c in ctx.best(len(ctx.population)) if c.genome.kind == "config"), None)
        if best is None:
            return []  # only config genomes have agents and a topology to co-evolve
        self.stats["steps"] += 1
        proposals: list[Proposal] = ctx.ablations() if self.ablate else []
        focus = ctx.by_id.get(self._focus) if self._focus and self._focus_left > 0 else None
        if focus is not None:
            self._focus_left -= 1
        else:
            self._focus = None
        try:
            fast = self._fast(ctx, focus or best)
            if fast is not None:
                proposals.append(fast)
            # A step with nothing left to rewrite moves the topology instead of idling.
            slow_turn = bool(self.slow_every) and self.stats["steps"] % self.slow_every == 0
            if slow_turn or fast is None:
                slow = self._slow(ctx, best)
                if slow is not None:
                    proposals.append(slow)
        except BudgetExceeded:
            return proposals  # the meta LM hit the budget; the run loop sees should_stop() next
        return proposals

    def screen(self, ctx: SearchContext, proposal: Proposal) -> bool:
        # The surrogate sees structure, not wording: it screens topology proposals only (see the module doc).
        return proposal.operator != "coevolve_topology" or self.admit(ctx, proposal.genome)

    def observe(self, ctx: SearchContext, proposal: Proposal, candidate: Candidate | None) -> None:
        if candidate is None or not proposal.parents:
            return
        parent = ctx.by_id.get(proposal.parents[0])
        improved = parent is not None and candidate.fitness > parent.fitness
        if improved:
            loop = "improved_slow" if proposal.operator == "coevolve_topology" else "improved_fast"
            self.stats[loop] += 1
        if proposal.operator == "coevolve_topology" and candidate.genome.id == proposal.genome.id:
            # A new structure is judged with instructions written for the old one: give the fast loop
            # a few steps to adapt it before it has to beat the best on fitness.
            self._focus, self._focus_left = candidate.id, self.incubation
        elif self._focus is not None and proposal.parents[0] == self._focus and improved:
            self._focus = candidate.id  # follow the adapted lineage

    # ------------------------------------------------------------------ fast loop: instructions

    def _agent_order(self, genome: Genome, credit: dict[str, float] | None = None) -> list[Agent]:
        # Agents that feed the output shape the answer most directly, so they are rewritten first; where an
        # ablation measured what each agent is worth, the ones the system needs most come first (a rewrite
        # there shows). Execution nodes have no instructions to rewrite.
        feeders = {a for a, b in genome.topology.edges if b == "output"}
        worth = credit or {}
        agents = [a for a in genome.agents if a.module != "execute"]
        return sorted(agents, key=lambda a: (-worth.get(a.id, 0.0), a.id not in feeders,
                                             a.id == genome.topology.judge))

    def sketch(self, population: Sequence[Genome], rng: random.Random) -> Genome:
        # a rewrite of instructions; one system in slow_every + 1 is a topology edit
        parent = rng.choice(list(population))
        if not self.slow_every or rng.random() >= 1.0 / (self.slow_every + 1):
            return rewritten(parent, rng)
        out = mutate_with(parent, rng, edits=self.edits)
        return parent if out is None else out.genome

    def meta_calls_per_system(self) -> float:
        # one rewrite per step; a topology edit by the meta-agent (a proposal and up to 2 repairs) when asked
        if not self.slow_every:
            return 1.0
        topology = 3.0 if self.use_meta_agent else 0.0
        return (self.slow_every + topology) / (self.slow_every + 1)

    def _fast(self, ctx: SearchContext, parent: Candidate) -> Proposal | None:
        g = parent.genome
        order = self._agent_order(g, ctx.credit.agent_credit(parent.id))
        if not order:
            return None
        # Round robin per set of agents, not per genome: each rewrite makes a new genome, and keying by
        # genome would rewrite the first agent of an improving lineage forever.
        team = ",".join(a.id for a in order)
        turn = self._turn.get(team, 0)
        self._turn[team] = turn + 1
        agent = order[turn % len(order)]
        new = self._reflect(ctx, parent, agent)
        operator, why = "coevolve_rewrite", f"reflective rewrite of {agent.id}'s instructions from failures"
        if new is None:
            new = self._library_edit(ctx, g, agent)
            operator, why = "coevolve_edit", f"instruction edit for {agent.id}: {new}"
            if new is None:
                return None
            new = f"{agent.instructions.strip()} {new}".strip()
            self.stats["fallbacks"] += 1
        else:
            self.stats["rewrites"] += 1
        child = g.model_copy(deep=True)
        child.agent(agent.id).instructions = new
        child.metadata = {}
        child.name = f"{g.name.split('~')[0]}~{child.short_id[:6]}"
        return Proposal(child, [parent.id], operator, why)

    def _reflect(self, ctx: SearchContext, parent: Candidate, agent: Agent) -> str | None:
        prompt = render("coevolve_rewrite", task=ctx.task.description or ctx.task.name,
                        system=genome_brief(parent.genome, max_instructions=220), score=f"{parent.score:.3f}",
                        failures=parent.feedback(self.failures), agent=agent.id, role=agent.role or "agent",
                        instructions=agent.instructions.strip() or "(none)")
        try:
            reply = ctx.client.complete([{"role": "user", "content": prompt}], alias=self.meta_alias,
                                        temperature=self.temperature, max_tokens=600,
                                        sample=self.stats["steps"]).text
        except BudgetExceeded:
            raise
        except MasforgeError as exc:
            ctx.emit(Note(strategy=self.name, message=f"meta LM failed: {exc}"))
            self.stats["meta_unusable"] += 1
            return None
        new = parse_instructions(reply, agent.instructions)
        if new is None:
            self.stats["meta_unusable"] += 1
        return new

    def _library_edit(self, ctx: SearchContext, genome: Genome, agent: Agent) -> str | None:
        have = agent.instructions.lower()
        options = [e for e in instruction_edits()
                   if e.lower() not in have and (genome.id, agent.id, e) not in self._tried]
        if not options:
            return None
        pick = ctx.rng.choice(options)
        self._tried.add((genome.id, agent.id, pick))
        return pick

    # ------------------------------------------------------------------ slow loop: topology

    def _slow(self, ctx: SearchContext, parent: Candidate) -> Proposal | None:
        if self._meta is not None:
            try:
                prop = self._meta.mutate(parent, ctx)
            except BudgetExceeded:
                raise
            except MasforgeError as exc:
                ctx.emit(Note(strategy=self.name, message=f"meta-agent mutate failed: {exc}"))
                prop = None
            if prop is not None and not problems(prop.genome):
                self.stats["topology"] += 1
                return Proposal(prop.genome, [parent.id], "coevolve_topology", prop.rationale)
        choose = ctx.edit_chooser(parent) if self.adaptive else None
        out = mutate_with(parent.genome, ctx.rng, edits=self.edits, choose=choose)
        if out is None:
            return None
        ctx.credit.note_proposed(out.edit)
        self.stats["topology"] += 1
        return Proposal(out.genome, [parent.id], "coevolve_topology", out.what, info={"arm": out.edit})
