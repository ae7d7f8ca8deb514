"""Random search: the baseline every other strategy must beat. Each step applies one to three random
structural edits to a random candidate."""

from __future__ import annotations

import random
from collections.abc import Sequence

from masforge.genome.schema import Genome
from masforge.search.context import Proposal, SearchContext
from masforge.search.operators.structural import mutate
from masforge.search.selection import Uniform
from masforge.search.strategies.base import Strategy, register


@register
class RandomSearch(Strategy):
    """Random search, the baseline: a uniformly random parent with 1-3 random structural edits."""

    name = "random"
    sketch_exact = True  # a uniform parent and random edits, drawn from the search's seed in this order
    selector = Uniform()

    def step(self, ctx: SearchContext) -> list[Proposal]:
        if not ctx.population:
            return []
        parent = self.selector.select(ctx.population, ctx)
        genome, notes = _edited(parent.genome, ctx.rng)
        if not notes:
            return []
        return [Proposal(genome, [parent.id], "random_edit", "; ".join(notes))]

    def sketch(self, population: Sequence[Genome], rng: random.Random) -> Genome:
        return _edited(rng.choice(list(population)), rng)[0]


def _edited(genome: Genome, rng: random.Random) -> tuple[Genome, list[str]]:
    """``genome`` after 1-3 random structural edits, and the edits in words (none: no edit applied)."""
    notes: list[str] = []
    for _ in range(rng.randint(1, 3)):
        out = mutate(genome, rng)
        if out is None:
            break
        genome, what = out
        notes.append(what)
    return genome, notes
