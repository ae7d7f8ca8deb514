"""Random search: the baseline every other strategy must beat. Each step applies one to three random
structural edits to a random candidate."""

from __future__ import annotations

from masforge.search.context import Proposal, SearchContext
from masforge.search.operators.structural import mutate
from masforge.search.selection import Uniform
from masforge.search.strategies.base import Strategy, register


@register
class RandomSearch(Strategy):
    """Random search, the baseline: a uniformly random parent with 1-3 random structural edits."""

    name = "random"
    selector = Uniform()

    def step(self, ctx: SearchContext) -> list[Proposal]:
        if not ctx.population:
            return []
        parent = self.selector.select(ctx.population, ctx)
        genome, notes = parent.genome, []
        for _ in range(ctx.rng.randint(1, 3)):
            out = mutate(genome, ctx.rng)
            if out is None:
                break
            genome, what = out
            notes.append(what)
        if not notes:
            return []
        return [Proposal(genome, [parent.id], "random_edit", "; ".join(notes))]
