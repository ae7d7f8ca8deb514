"""EvoMAS-style evolution in configuration space: a pool of systems improved by feedback-conditioned
mutation and crossover, with an experience memory of which edits helped.

Each step makes ``offspring`` children. Parents come from the pool by a selection policy
(:mod:`masforge.search.selection`): ``tournament`` (default), ``map_elites`` (an elite of the whole
population's MAP-Elites cells), ``pareto``, ``uniform`` or ``best``. A child is a crossover of two parents (with
probability ``crossover_rate``) or a mutation of one; either is done by the meta-agent (mutation sees the
parent's failed examples with their execution traces) or, with probability ``structural_rate``, by the
cheap LLM-free structural operators; when one kind fails the other is tried. Survivors are the fittest
with a bonus for diversity (distance in genome-feature space), the best always kept. Every evaluated
child adds a note ``edit: effect on score`` (e.g. ``solver.copies 1->5: +0.10``) to the experience
memory, and the most telling notes are summarised into the meta-agent's mutation prompt.
"""

from __future__ import annotations

import difflib
import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from masforge.evaluators.estimate import sent_calls
from masforge.genome.diff import diff_genomes
from masforge.genome.outline import outline
from masforge.genome.schema import Genome
from masforge.search.context import Proposal, SearchContext
from masforge.search.features import scaled_features
from masforge.search.operators import structural
from masforge.search.operators.execution import graft, has_execution
from masforge.search.operators.prompting import layout
from masforge.search.operators.proposal import starter_genome
from masforge.search.population import Candidate, merit
from masforge.search.selection import ParentSelector, make_selector
from masforge.search.strategies.base import bad_option, register, rewritten
from masforge.search.strategies.meta_driven import MetaAgentStrategy
from masforge.text import shorten


@dataclass
class Experience:
    """One remembered edit and what it did to the fitness."""

    edit: str
    delta: float | None
    """Fitness change against the parent; None when the child was rejected as invalid."""

    def __str__(self) -> str:
        effect = "rejected (invalid)" if self.delta is None else f"{self.delta:+.2f}"
        return f"{self.edit}: {effect}"


def _word_change(old: str, new: str) -> str:
    """The words added and removed between two texts (``+'verify it' -'think'``)."""
    a, b = old.split(), new.split()
    added: list[str] = []
    removed: list[str] = []
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(a=a, b=b).get_opcodes():
        if tag in ("delete", "replace"):
            removed.extend(a[i1:i2])
        if tag in ("insert", "replace"):
            added.extend(b[j1:j2])
    parts = ([f"+'{shorten(' '.join(added), 30)}'"] if added else []) + (
        [f"-'{shorten(' '.join(removed), 20)}'"] if removed else [])
    return " ".join(parts) or "reworded"


def describe_edit(parent: Genome, child: Genome, limit: int = 3) -> str:
    """A compact summary of how ``child`` differs from ``parent`` (e.g. ``solver.copies 1->5, +checker``);
    a wholesale change is summarised as a redesign into the child's layout."""
    changes = [c for c in diff_genomes(parent, child) if c.path != "name"]
    if not changes:
        return "no structural change"
    if parent.kind != child.kind or len(changes) > 2 * limit:
        return f"redesign into {layout(child)}"
    parts = []
    for c in changes[:limit]:
        path = c.path.removeprefix("agent ")
        if c.op == "+":
            parts.append(f"+{path} {shorten(c.new, 40)}")
        elif c.op == "-":
            parts.append(f"-{path} {shorten(c.old, 40)}")
        elif path == "code":
            parts.append("code rewritten")
        elif c.old == "text":  # a long text change, already a word diff
            parts.append(f"{path} {shorten(c.new, 60)}")
        elif isinstance(c.old, str) and isinstance(c.new, str) and len(c.old) + len(c.new) > 24:
            parts.append(f"{path} {_word_change(c.old, c.new)}")
        else:
            parts.append(f"{path} {shorten(c.old, 20)}->{shorten(c.new, 20)}")
    more = f" (+{len(changes) - limit} more)" if len(changes) > limit else ""
    return ", ".join(parts) + more


@register
class EvolveSearch(MetaAgentStrategy):
    """EvoMAS evolution of a pool: meta-agent and structural mutation/crossover, with an experience memory."""

    name = "evolve"
    max_idle_steps = 6

    def __init__(self, population_size: int = 6, selection: str = "tournament", tournament_k: int = 3,
                 structural_rate: float = 0.3, crossover_rate: float = 0.2, offspring: int = 2,
                 diversity_weight: float = 0.1, memory_notes: int = 6, adaptive: bool = True, ablate: bool = True,
                 scouts: int = 2, **options: Any) -> None:
        """Options of evolve.

        Args:
            population_size: systems kept in the pool that parents are drawn from.
            selection: how parents are picked: tournament, map_elites, pareto, uniform or best.
            tournament_k: systems drawn per tournament (selection tournament).
            structural_rate: chance that a child is made by the LLM-free structural operators instead of the
                meta-agent.
            crossover_rate: chance that a child crosses two parents instead of mutating one.
            offspring: children proposed per step.
            diversity_weight: bonus for being unlike the rest of the pool when survivors are chosen.
            memory_notes: remembered edits (and what they did to the score) shown to the meta-agent.
            adaptive: pick structural edits by their observed success in this run (a bandit; see
                :mod:`masforge.search.credit`) and the failure kinds of the parent; False: uniform draws.
            ablate: re-score parents with each agent dropped and feed the per-agent credit to the edits.
            scouts: extra children proposed per step that are evaluated only if they are free (every answer they
                need already in the answer cache, found by a dry run): recombinations of answers already paid for
                cost nothing but sandbox time. Of the children that need new LM calls, the ``offspring`` cheapest
                are evaluated.
        """
        super().__init__(**options)
        for option, value in (("population_size", population_size), ("offspring", offspring),
                              ("tournament_k", tournament_k)):
            if value < 1:
                raise bad_option(option, f"must be at least 1, got {value}")
        if scouts < 0:
            raise bad_option("scouts", f"must be at least 0, got {scouts}")
        self.scouts = scouts
        for option, rate in (("structural_rate", structural_rate), ("crossover_rate", crossover_rate)):
            if not 0.0 <= rate <= 1.0:
                raise bad_option(option, f"must be a probability between 0 and 1, got {rate}")
        try:
            self.selector: ParentSelector = make_selector(selection, tournament_k=tournament_k)
        except ValueError as exc:
            raise bad_option("selection", str(exc)) from None
        self.population_size = population_size
        self.selection = selection
        self.structural_rate = structural_rate
        self.crossover_rate = crossover_rate
        self.offspring = offspring
        self.diversity_weight = diversity_weight
        self.memory_notes = memory_notes
        self.pool: list[Candidate] = []
        self.memory: list[Experience] = []
        self.adaptive = adaptive
        """Operators drawn by the run's bandit (structural edits with a failure-kind prior) instead of fixed rates."""
        self.ablate = ablate
        """Each new incumbent is scored without each of its agents: credit per agent, and pruning."""

    def setup(self, ctx: SearchContext) -> None:
        super().setup(ctx)
        self.pool = ctx.best(self.population_size)

    def sketch(self, population: Sequence[Genome], rng: random.Random) -> Genome:
        # with scouts, each step's children are the free ones and the cheapest paid ones: about the cheaper of two
        draws = [self._sketch_child(population, rng) for _ in range(1 + (1 if self.scouts else 0))]
        return min(draws, key=lambda child: sent_calls([*population, child])[-1])

    def _sketch_child(self, population: Sequence[Genome], rng: random.Random) -> Genome:
        parent = rng.choice(list(population))
        if rng.random() >= self.structural_rate:
            return rewritten(parent, rng)  # the meta-agent's child
        out = structural.mutate(parent, rng)
        return parent if out is None else out[0]

    def meta_calls_per_system(self) -> float:
        # only the children the meta-agent makes; a failed meta crossover is followed by a meta mutation
        return (1.0 - self.structural_rate) * (1.0 + self.crossover_rate) * super().meta_calls_per_system()

    # ------------------------------------------------------------------ steps

    def step(self, ctx: SearchContext) -> list[Proposal]:
        if not self.pool:
            prop = self._initial(ctx)
            return [] if prop is None else [prop]
        proposals: list[Proposal] = []
        if self.ablate:
            for prop in ctx.ablations():
                parent = ctx.by_id[prop.parents[0]]
                prop.info.update(parent=parent, edit=describe_edit(parent.genome, prop.genome))
                proposals.append(prop)
        scouting = self.scouts if ctx.costs.usable() else 0
        children: list[Proposal] = []
        for _ in range(self.offspring + scouting):
            made = self._child(ctx)
            if made is None:
                continue
            prop, parent = made
            if ctx.is_near_duplicate(prop.genome) or any(p.genome.id == prop.genome.id
                                                         for p in (*proposals, *children)):
                continue
            prop.info.update(parent=parent, edit=describe_edit(parent.genome, prop.genome))
            children.append(prop)
        if scouting:  # every free child, and the cheapest paid ones up to ``offspring``
            children = ctx.cheapest_first(children)
            free = [p for p in children if self._free(ctx, p)]
            children = free + [p for p in children if p not in free][: self.offspring]
        return proposals + children

    @staticmethod
    def _free(ctx: SearchContext, proposal: Proposal) -> bool:
        cost = ctx.costs.cost(proposal.genome)
        return cost is not None and cost.free

    def observe(self, ctx: SearchContext, proposal: Proposal, candidate: Candidate | None) -> None:
        parent = proposal.info.get("parent")
        if parent is not None:
            delta = None if candidate is None else candidate.fitness - parent.fitness
            self.memory.append(Experience(proposal.info.get("edit", ""), delta))
        if candidate is not None and candidate.id not in {c.id for c in self.pool}:
            self.pool.append(candidate)
            self._survive()

    # ------------------------------------------------------------------ operators

    def memory_summary(self) -> list[str]:
        """The most telling notes: the biggest gains, the worst losses and rejections, the latest."""
        scored = [e for e in self.memory if e.delta is not None]
        gains = sorted((e for e in scored if e.delta and e.delta > 0), key=lambda e: -(e.delta or 0.0))[:3]
        losses = sorted((e for e in scored if e.delta and e.delta < 0), key=lambda e: e.delta or 0.0)[:2]
        rejected = [e for e in self.memory if e.delta is None][-1:]
        picked: list[str] = []
        for e in [*gains, *losses, *rejected, *reversed(self.memory[-3:])]:
            text = str(e)
            if text not in picked:
                picked.append(text)
        return picked[: self.memory_notes]

    def _child(self, ctx: SearchContext) -> tuple[Proposal, Candidate] | None:
        rng = ctx.rng
        if self.adaptive and 0.0 < self.structural_rate < 1.0:  # a rate of 0 or 1 is a hard choice
            families = {"structural": [*structural.EDITS, "structural_mutate", "structural_crossover"],
                        "meta": ["meta_mutate", "meta_crossover", "meta_invent", "meta_repair"]}
            prior = {"structural": self.structural_rate, "meta": 1.0 - self.structural_rate}
            structural_first = ctx.credit.choose_family(families, rng, prior) == "structural"
        else:
            structural_first = rng.random() < self.structural_rate
        if len(self.pool) >= 2 and rng.random() < self.crossover_rate:
            a = self.selector.select(self.pool, ctx)
            b = next((c for c in (self.selector.select(self.pool, ctx) for _ in range(4)) if c.id != a.id), None)
            b = b or rng.choice([c for c in self.pool if c.id != a.id])
            prop = self._crossover(a, b, ctx, structural_first)
            if prop is not None:
                return prop, max((a, b), key=lambda c: c.fitness)
            # No crossover possible (e.g. parents too alike): a mutation, in the same preference order.
        parent = self.selector.select(self.pool, ctx)
        for use_structural in ((True, False) if structural_first else (False, True)):
            prop = self._mutate(parent, ctx, use_structural)
            if prop is not None:
                return prop, parent
        return None

    def _mutate(self, parent: Candidate, ctx: SearchContext, use_structural: bool) -> Proposal | None:
        if use_structural:
            choose = ctx.edit_chooser(parent) if self.adaptive else None
            out = structural.mutate_with(parent.genome, ctx.rng, choose=choose)
            if out is None:
                return None
            ctx.credit.note_proposed(out.edit)
            return Proposal(out.genome, [parent.id], "structural_mutate", out.what, info={"arm": out.edit})
        return self.reflected(self.agent().mutate(parent, ctx, notes=self.memory_summary()), ctx)

    def _crossover(self, a: Candidate, b: Candidate, ctx: SearchContext, use_structural: bool) -> Proposal | None:
        if use_structural:
            # A parent with an execution part hands it on, the other its way of answering (a graft), half the time
            # it can; else agents' settings are crossed over a shared wiring.
            exe, other = (a, b) if has_execution(a.genome) else (b, a)
            if has_execution(exe.genome) and ctx.rng.random() < 0.5:
                grafted = graft(exe.genome, other.genome, ctx.rng)
                if grafted is not None:
                    child, what = grafted
                    child.name = f"{exe.genome.name.split('~')[0]}~{child.short_id[:6]}"
                    child.metadata = {}
                    child.description = f"{outline(child)} From {exe.genome.name}: {what}."
                    return Proposal(child, [exe.id, other.id], "structural_crossover", what, info={"arm": "graft"})
            out = structural.crossover(a.genome, b.genome, ctx.rng)
            return None if out is None else Proposal(out[0], [a.id, b.id], "structural_crossover", out[1])
        return self.agent().crossover(a, b, ctx)

    def _initial(self, ctx: SearchContext) -> Proposal | None:
        """A first pool member when the search starts empty: invented, else the starter genome."""
        prop = self.agent().invent(ctx, kind="config", from_scratch=True)
        if prop is not None and not ctx.is_near_duplicate(prop.genome):
            return prop
        starter = starter_genome(ctx.task.input_fields, [ctx.task.output_field])
        if ctx.is_near_duplicate(starter):
            return None
        return Proposal(starter, operator="starter", rationale="fallback start: one step-by-step solver")

    def _survive(self) -> None:
        """Drop members until the pool fits: lowest fitness plus diversity bonus goes first, never the best."""
        while len(self.pool) > self.population_size:
            best = max(self.pool, key=merit)
            z = scaled_features([c.genome for c in self.pool])
            dist = np.linalg.norm(z[:, None, :] - z[None, :, :], axis=2)
            np.fill_diagonal(dist, np.inf)
            nearest = dist.min(axis=1)
            nearest[~np.isfinite(nearest)] = 0.0
            novelty = nearest / nearest.max() if nearest.max() > 0 else nearest
            values = [c.fitness + self.diversity_weight * float(n) for c, n in zip(self.pool, novelty, strict=True)]
            order = sorted(range(len(self.pool)), key=lambda i: values[i])
            victim = next(i for i in order if self.pool[i].id != best.id)
            self.pool.pop(victim)
