"""Parent selection: which candidate a strategy builds on next, as small swappable pieces behind one
protocol (after GEPA's candidate selectors). A strategy holds a :class:`ParentSelector` and asks it for a
parent from its pool; :func:`make_selector` builds one by the name a run configuration gives."""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from masforge.search.features import llm_calls_estimate
from masforge.search.population import Candidate, front, merit

if TYPE_CHECKING:
    from masforge.search.context import SearchContext


class ParentSelector(Protocol):
    """Picks one parent from a non-empty ``pool`` (``ctx`` gives the random stream and the population)."""

    def select(self, pool: Sequence[Candidate], ctx: SearchContext) -> Candidate:
        """The chosen parent."""
        ...


def tournament(cands: Sequence[Candidate], rng: random.Random, k: int = 3) -> Candidate:
    """The fittest of ``k`` random candidates."""
    return max(rng.sample(list(cands), min(k, len(cands))), key=merit)


def map_elites(cands: Sequence[Candidate], bins: int = 4) -> dict[tuple[int, int], Candidate]:
    """MAP-Elites archive: the fittest candidate per cell of (agent count, estimated LM calls per example)."""
    cells: dict[tuple[int, int], Candidate] = {}
    for c in cands:
        agents = len(c.genome.agents) if c.genome.kind == "config" else 1
        calls = llm_calls_estimate(c.genome)
        cell = (min(agents, bins) - 1 if agents else 0, min(int(math.log2(max(calls, 1.0))), bins - 1))
        if cell not in cells or c.fitness > cells[cell].fitness:
            cells[cell] = c
    return cells


@dataclass
class Tournament:
    """The fittest of ``k`` candidates drawn at random from the pool (selection pressure grows with k)."""

    k: int = 3

    def select(self, pool: Sequence[Candidate], ctx: SearchContext) -> Candidate:
        return tournament(pool, ctx.rng, self.k)


@dataclass
class MapElites:
    """A random elite of the whole population's MAP-Elites cells: diverse designs get picked too."""

    bins: int = 4

    def select(self, pool: Sequence[Candidate], ctx: SearchContext) -> Candidate:
        elites = list(map_elites(ctx.population, self.bins).values())
        return ctx.rng.choice(elites) if elites else tournament(pool, ctx.rng)


@dataclass
class ParetoFront:
    """A random member of the pool's quality-vs-cost Pareto front (cheap good systems are parents too)."""

    def select(self, pool: Sequence[Candidate], ctx: SearchContext) -> Candidate:
        return ctx.rng.choice(front(pool))


@dataclass
class Uniform:
    """Any member of the pool, uniformly (the random-search baseline)."""

    def select(self, pool: Sequence[Candidate], ctx: SearchContext) -> Candidate:
        return ctx.rng.choice(list(pool))


@dataclass
class Best:
    """Always the fittest (pure exploitation)."""

    def select(self, pool: Sequence[Candidate], ctx: SearchContext) -> Candidate:
        return max(pool, key=merit)


SELECTORS: dict[str, Callable[..., ParentSelector]] = {
    "tournament": Tournament, "map_elites": MapElites, "pareto": ParetoFront, "uniform": Uniform, "best": Best,
}


def make_selector(name: str, *, tournament_k: int = 3) -> ParentSelector:
    """The selector called ``name`` (see :data:`SELECTORS`); ValueError naming the known ones."""
    if name not in SELECTORS:
        raise ValueError(f"unknown selection '{name}' (selections: {', '.join(SELECTORS)})")
    return Tournament(tournament_k) if name == "tournament" else SELECTORS[name]()
