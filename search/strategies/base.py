"""The shared shape of every strategy: propose genomes, let the context evaluate them, observe, repeat
until a stop condition holds. One strategy per module; :func:`register` makes it available by name."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, ClassVar

from masforge.errors import ConfigError
from masforge.search.context import Proposal, SearchContext
from masforge.search.population import Candidate

STRATEGIES: dict[str, type[Strategy]] = {}


def register(cls: type[Strategy]) -> type[Strategy]:
    """Class decorator: make ``cls`` available as ``cls.name`` in run configurations."""
    STRATEGIES[cls.name] = cls
    return cls


def get_strategy(name: str, **options: Any) -> Strategy:
    """A strategy instance by name; one-line error listing the known names. (The built-ins are registered:
    importing this module runs the package's ``__init__``, which imports them all.)"""
    cls = STRATEGIES.get(name)
    if cls is None:
        raise ConfigError(f"unknown strategy '{name}' (strategies: {', '.join(sorted(STRATEGIES))})")
    try:
        return cls(**options)
    except TypeError as exc:
        raise ConfigError(f"strategy '{name}': bad option ({exc})") from None


class Strategy(ABC):
    """A search strategy. Subclasses implement :meth:`step`; :meth:`setup` and :meth:`observe` are hooks."""

    name: ClassVar[str] = "base"
    max_idle_steps: ClassVar[int] = 5
    """Give up after this many steps in a row that produce nothing new."""

    def setup(self, ctx: SearchContext) -> None:
        """Called once before the first step (e.g. build a population)."""
        return None

    @abstractmethod
    def step(self, ctx: SearchContext) -> list[Proposal]:
        """Genomes to evaluate next (may be empty)."""

    def observe(self, ctx: SearchContext, proposal: Proposal, candidate: Candidate | None) -> None:
        """Called after each proposal is evaluated (``None``: invalid or rejected)."""
        return None

    def run(self, ctx: SearchContext) -> None:
        """Propose and evaluate until the context says stop."""
        previous = ctx.strategy
        ctx.strategy = self.name
        try:
            self.setup(ctx)
            idle = 0
            while not ctx.should_stop():
                ctx.generation += 1
                before = ctx.evaluated
                proposals = self.step(ctx)
                for p in proposals:
                    if ctx.should_stop():
                        break
                    cand = ctx.try_submit(p)
                    self.observe(ctx, p, cand)
                idle = idle + 1 if ctx.evaluated == before else 0
                if idle >= self.max_idle_steps:
                    ctx.emit("stalled", strategy=self.name)
                    break
        finally:
            ctx.strategy = previous
