"""EvoMAS-style evolution in configuration space: a pool of systems improved by feedback-conditioned
mutation and crossover, with an experience memory of which edits helped.

Each step makes ``offspring`` children. Parents come from the pool by tournament, or from the MAP-Elites
cells of the whole population (``selection="map_elites"``). A child is a crossover of two parents (with
probability ``crossover_rate``) or a mutation of one; either is done by the meta-agent (mutation sees the
parent's failed examples with their execution traces) or, with probability ``structural_rate``, by the
cheap LLM-free structural operators; when one kind fails the other is tried. Survivors are the fittest
with a bonus for diversity (distance in genome-feature space), the best always kept. Every evaluated
child adds a note ``edit: effect on score`` (e.g. ``solver.copies 1->5: +0.10``) to the experience
memory, and the most telling notes are summarised into the meta-agent's mutation prompt.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from masforge.genome.diff import diff_genomes
from masforge.genome.schema import Genome
from masforge.search.context import Proposal, SearchContext
from masforge.search.operators import structural
from masforge.search.operators.meta import MetaAgent, starter_genome
from masforge.search.population import Candidate, feature_matrix, map_elites, tournament
from masforge.search.strategies.base import Strategy, register


@dataclass
class Experience:
    """One remembered edit and what it did to the fitness."""

    edit: str
    delta: float | None
    """Fitness change against the parent; None when the child was rejected as invalid."""

    def __str__(self) -> str:
        effect = "rejected (invalid)" if self.delta is None else f"{self.delta:+.2f}"
        return f"{self.edit}: {effect}"


def _short(value: Any, limit: int = 40) -> str:
    text = " ".join(str(value).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


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
    parts = ([f"+'{_short(' '.join(added), 30)}'"] if added else []) + (
        [f"-'{_short(' '.join(removed), 20)}'"] if removed else [])
    return " ".join(parts) or "reworded"


def _layout(genome: Genome) -> str:
    if genome.kind == "code":
        return f"code ({(genome.code or '').count('llm(')} llm calls)"
    agents = ", ".join(f"{a.id}:{a.module}" + (f"x{a.copies}" if a.copies > 1 else "") for a in genome.agents)
    topo = genome.topology
    extra = (f", rounds {topo.rounds}" if topo.rounds > 1 else "") + (
        f", {topo.aggregation}" if topo.aggregation != "last" else "")
    return f"[{_short(agents, 90)}{extra}]"


def describe_edit(parent: Genome, child: Genome, limit: int = 3) -> str:
    """A compact summary of how ``child`` differs from ``parent`` (e.g. ``solver.copies 1->5, +checker``);
    a wholesale change is summarised as a redesign into the child's layout."""
    changes = [c for c in diff_genomes(parent, child) if c.path != "name"]
    if not changes:
        return "no structural change"
    if parent.kind != child.kind or len(changes) > 2 * limit:
        return f"redesign into {_layout(child)}"
    parts = []
    for c in changes[:limit]:
        path = c.path.removeprefix("agent ")
        if c.op == "+":
            parts.append(f"+{path} {_short(c.new)}")
        elif c.op == "-":
            parts.append(f"-{path} {_short(c.old)}")
        elif path == "code":
            parts.append("code rewritten")
        elif c.old == "text":  # a long text change, already a word diff
            parts.append(f"{path} {_short(c.new, 60)}")
        elif isinstance(c.old, str) and isinstance(c.new, str) and len(c.old) + len(c.new) > 24:
            parts.append(f"{path} {_word_change(c.old, c.new)}")
        else:
            parts.append(f"{path} {_short(c.old, 20)}->{_short(c.new, 20)}")
    more = f" (+{len(changes) - limit} more)" if len(changes) > limit else ""
    return ", ".join(parts) + more


@register
class EvolveSearch(Strategy):
    """Evolution of a pool with meta-agent and structural operators and an experience memory (EvoMAS)."""

    name = "evolve"
    max_idle_steps = 6

    def __init__(self, population_size: int = 6, selection: Literal["tournament", "map_elites"] = "tournament",
                 tournament_k: int = 3, structural_rate: float = 0.3, crossover_rate: float = 0.2,
                 offspring: int = 2, diversity_weight: float = 0.1, memory_notes: int = 6, reflect: bool = False,
                 alias: str = "meta", max_repairs: int = 2, temperature: float | None = None,
                 max_tokens: int | None = None) -> None:
        if selection not in ("tournament", "map_elites"):
            raise TypeError(f"selection must be tournament or map_elites, not {selection!r}")
        if population_size < 1 or offspring < 1:
            raise TypeError("population_size and offspring must be at least 1")
        self.population_size = population_size
        self.selection = selection
        self.tournament_k = tournament_k
        self.structural_rate = structural_rate
        self.crossover_rate = crossover_rate
        self.offspring = offspring
        self.diversity_weight = diversity_weight
        self.memory_notes = memory_notes
        self.reflect = reflect
        self.agent_options: dict[str, Any] = {"alias": alias, "max_repairs": max_repairs,
                                              "temperature": temperature, "max_tokens": max_tokens}
        self.meta: MetaAgent | None = None
        self.pool: list[Candidate] = []
        self.memory: list[Experience] = []
        self._origin: dict[int, tuple[Candidate | None, str]] = {}

    def setup(self, ctx: SearchContext) -> None:
        self.meta = MetaAgent(ctx.client, **self.agent_options)
        self.pool = ctx.best(self.population_size)

    # ------------------------------------------------------------------ steps

    def step(self, ctx: SearchContext) -> list[Proposal]:
        assert self.meta is not None, "setup() first"
        self._origin.clear()  # proposals of earlier steps were all observed (or dropped at a stop)
        if not self.pool:
            prop = self._initial(ctx)
            if prop is None:
                return []
            self._origin[id(prop)] = (None, "")
            return [prop]
        proposals: list[Proposal] = []
        for _ in range(self.offspring):
            made = self._child(ctx)
            if made is None:
                continue
            prop, parent = made
            if ctx.is_near_duplicate(prop.genome) or any(p.genome.id == prop.genome.id for p in proposals):
                continue
            self._origin[id(prop)] = (parent, describe_edit(parent.genome, prop.genome))
            proposals.append(prop)
        return proposals

    def observe(self, ctx: SearchContext, proposal: Proposal, candidate: Candidate | None) -> None:
        parent, edit = self._origin.pop(id(proposal), (None, ""))
        if parent is not None:
            delta = None if candidate is None else candidate.fitness - parent.fitness
            self.memory.append(Experience(edit, delta))
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

    def _select(self, ctx: SearchContext) -> Candidate:
        if self.selection == "map_elites":
            elites = list(map_elites(ctx.population).values())
            if elites:
                return ctx.rng.choice(elites)
        return tournament(self.pool, ctx.rng, self.tournament_k)

    def _child(self, ctx: SearchContext) -> tuple[Proposal, Candidate] | None:
        assert self.meta is not None
        rng = ctx.rng
        structural_first = rng.random() < self.structural_rate
        if len(self.pool) >= 2 and rng.random() < self.crossover_rate:
            a = self._select(ctx)
            b = next((c for c in (self._select(ctx) for _ in range(4)) if c.id != a.id), None)
            b = b or rng.choice([c for c in self.pool if c.id != a.id])
            prop = self._crossover(a, b, ctx, structural_first)
            if prop is not None:
                return prop, max((a, b), key=lambda c: c.fitness)
            # No crossover possible (e.g. parents too alike): a mutation, in the same preference order.
        parent = self._select(ctx)
        for use_structural in ((True, False) if structural_first else (False, True)):
            prop = self._mutate(parent, ctx, use_structural)
            if prop is not None:
                return prop, parent
        return None

    def _mutate(self, parent: Candidate, ctx: SearchContext, use_structural: bool) -> Proposal | None:
        assert self.meta is not None
        if use_structural:
            out = structural.mutate(parent.genome, ctx.rng)
            return None if out is None else Proposal(out[0], [parent.id], "structural_mutate", out[1])
        prop = self.meta.mutate(parent, ctx, notes=self.memory_summary())
        if prop is not None and self.reflect:
            prop = self.meta.reflect(prop, ctx) or prop
        return prop

    def _crossover(self, a: Candidate, b: Candidate, ctx: SearchContext, use_structural: bool) -> Proposal | None:
        assert self.meta is not None
        if use_structural:
            out = structural.crossover(a.genome, b.genome, ctx.rng)
            return None if out is None else Proposal(out[0], [a.id, b.id], "structural_crossover", out[1])
        return self.meta.crossover(a, b, ctx)

    def _initial(self, ctx: SearchContext) -> Proposal | None:
        """A first pool member when the search starts empty: invented, else the starter genome."""
        assert self.meta is not None
        prop = self.meta.invent(ctx, kind="config", from_scratch=True)
        if prop is not None and not ctx.is_near_duplicate(prop.genome):
            return prop
        starter = starter_genome(ctx.task.input_fields, [ctx.task.output_field])
        if ctx.is_near_duplicate(starter):
            return None
        return Proposal(starter, operator="starter", rationale="fallback start: one step-by-step solver")

    def _survive(self) -> None:
        """Drop members until the pool fits: lowest fitness plus diversity bonus goes first, never the best."""
        while len(self.pool) > self.population_size:
            best = max(self.pool, key=lambda c: (c.fitness, -c.dollars))
            feats = feature_matrix([c.genome for c in self.pool])
            scale = feats.std(axis=0)
            scale[scale == 0] = 1.0
            z = (feats - feats.mean(axis=0)) / scale
            dist = np.linalg.norm(z[:, None, :] - z[None, :, :], axis=2)
            np.fill_diagonal(dist, np.inf)
            nearest = dist.min(axis=1)
            nearest[~np.isfinite(nearest)] = 0.0
            novelty = nearest / nearest.max() if nearest.max() > 0 else nearest
            values = [c.fitness + self.diversity_weight * float(n) for c, n in zip(self.pool, novelty, strict=True)]
            order = sorted(range(len(self.pool)), key=lambda i: values[i])
            victim = next(i for i in order if self.pool[i].id != best.id)
            self.pool.pop(victim)
