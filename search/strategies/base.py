"""The shared shape of every strategy: propose genomes, let the context evaluate them, observe, repeat
until a stop condition holds. One strategy per module; :func:`register` makes it available by name.

A strategy's options are its constructor's keyword arguments (and those of the bases it forwards
``**options`` to). :func:`get_strategy` checks every option against its type before the strategy is
built, so a bad value is one line naming the strategy and the option, and the engine builds the whole
pipeline this way before anything is paid for.

Every strategy takes ``surrogate`` / ``surrogate_margin``: with ``surrogate=True`` its proposals pass
through a :class:`~masforge.search.surrogate.SurrogateFilter` (:meth:`Strategy.screen`) before the
context pays for them; a strategy that screens differently overrides :meth:`Strategy.screen`.
"""

from __future__ import annotations

import inspect
import random
import re
import typing
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from pydantic import TypeAdapter, ValidationError

from masforge.errors import ConfigError
from masforge.genome.schema import Genome
from masforge.search.context import Proposal, SearchContext
from masforge.search.events import Stalled
from masforge.search.population import Candidate
from masforge.search.surrogate import SurrogateFilter

STRATEGIES: dict[str, type[Strategy]] = {}


def register(cls: type[Strategy]) -> type[Strategy]:
    """Class decorator: make ``cls`` available as ``cls.name`` in run configurations."""
    STRATEGIES[cls.name] = cls
    return cls


def bad_option(option: str, why: str) -> ValueError:
    """The error a strategy raises for an option value it cannot use (``get_strategy`` adds its name)."""
    return ValueError(f"option '{option}': {why}")


@dataclass(frozen=True)
class Option:
    """One option of a strategy: its name, default, type and what it does."""

    name: str
    default: Any
    annotation: Any
    help: str = ""
    """What the option does: its line in the ``Args:`` section of the constructor's docstring."""

    def __str__(self) -> str:
        return f"{self.name}={self.default!r}"


def _option_help(init: Any) -> dict[str, str]:
    """The ``Args:`` section of a constructor's docstring: option name -> its explanation on one line."""
    doc = inspect.getdoc(init) or ""
    if "Args:" not in doc:
        return {}
    found: dict[str, str] = {}
    name = None
    for line in doc.split("Args:", 1)[1].splitlines():
        m = re.match(r"^    (\w+): (.*)$", line)
        if m:
            name = m.group(1)
            found[name] = m.group(2).strip().replace("``", "")
        elif name and line.startswith("        "):
            found[name] += " " + line.strip().replace("``", "")
        elif line.strip():
            break
    return found


def strategy_options(cls: type[Strategy]) -> dict[str, Option]:
    """The options ``cls`` accepts: its ``__init__`` keywords, then those of each base it forwards
    ``**options`` to (a base's option a subclass repeats is the subclass's)."""
    found: dict[str, Option] = {}
    for klass in cls.__mro__:
        init = klass.__dict__.get("__init__")
        if init is None:
            continue
        if klass is object:
            break
        hints = typing.get_type_hints(init)
        helps = _option_help(init)
        forwards = False
        for p in list(inspect.signature(init).parameters.values())[1:]:
            if p.kind is p.VAR_KEYWORD:
                forwards = True
            elif p.kind is not p.VAR_POSITIONAL and p.name not in found:
                default = None if p.default is p.empty else p.default
                found[p.name] = Option(p.name, default, hints.get(p.name, Any), helps.get(p.name, ""))
        if not forwards:
            break
    return found


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__


def get_strategy(name: str, **options: Any) -> Strategy:
    """A strategy instance by name, its options checked first: an unknown strategy or option, or a value
    of the wrong type or range, is one :class:`ConfigError` line naming the strategy and the option. (The
    built-ins are registered: importing this module runs the package's ``__init__``, which imports them.)"""
    cls = STRATEGIES.get(name)
    if cls is None:
        raise ConfigError(f"unknown strategy '{name}' (strategies: {', '.join(sorted(STRATEGIES))}; "
                          "`masforge strategies` describes them)")
    known = strategy_options(cls)
    checked: dict[str, Any] = {}
    for key, value in options.items():
        opt = known.get(key)
        if opt is None:
            raise ConfigError(f"strategy '{name}': unknown option '{key}' (options: {', '.join(sorted(known))})")
        try:
            checked[key] = TypeAdapter(opt.annotation).validate_python(value)
        except ValidationError as exc:
            raise ConfigError(f"strategy '{name}': option '{key}': {exc.errors()[0]['msg']} (got {value!r})") from None
    try:
        return cls(**checked)
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"strategy '{name}': {_one_line(exc)}") from None


def describe_strategies() -> list[tuple[str, str, list[Option]]]:
    """(name, one-line summary, options) of every registered strategy, by name."""
    return [(name, cls.summary(), list(strategy_options(cls).values())) for name, cls in sorted(STRATEGIES.items())]


def rewritten(genome: Genome, rng: random.Random) -> Genome:
    """A stand-in, for the estimate, for a system an LM writes from ``genome`` (a meta-agent's mutation, a rewrite
    of instructions): its design, with instructions, and so prompts, of its own."""
    child = genome.model_copy(deep=True)
    tag = f"{rng.getrandbits(32):08x}"
    for agent in child.agents:
        agent.instructions = f"{agent.instructions} ({tag})"
    return child


class Strategy(ABC):
    """A search strategy. Subclasses implement :meth:`step`; :meth:`setup`, :meth:`observe` and
    :meth:`screen` are hooks. A subclass with its own options calls ``super().__init__(**options)``."""

    name: ClassVar[str] = "base"
    sketch_exact: ClassVar[bool] = False
    """True when :meth:`sketch`, drawing from the search's random seed, makes exactly the systems this strategy will
    propose (they depend on no LM answer and no score)."""
    max_idle_steps: ClassVar[int] = 5
    """Give up after this many steps in a row that produce nothing new."""
    use_surrogate: bool = False
    surrogate_margin: float = 0.1
    filter: SurrogateFilter | None = None
    """The surrogate screen of this run (set by :meth:`run` when ``surrogate`` is on)."""

    def __init__(self, *, surrogate: bool = False, surrogate_margin: float = 0.1) -> None:
        """Options every strategy takes.

        Args:
            surrogate: screen proposals with a surrogate model trained on the candidates scored so far, and skip
                those it calls hopeless before they are paid for.
            surrogate_margin: how far below the best a proposal's predicted score may be and still be evaluated.
        """
        if surrogate_margin < 0:
            raise bad_option("surrogate_margin", f"must be >= 0, got {surrogate_margin}")
        self.use_surrogate = surrogate
        self.surrogate_margin = surrogate_margin

    @classmethod
    def summary(cls) -> str:
        """The first paragraph of the class docstring on one line (what ``masforge strategies`` shows)."""
        return " ".join((inspect.getdoc(cls) or cls.name).split("\n\n")[0].split()).replace("``", "")

    def setup(self, ctx: SearchContext) -> None:
        """Called once before the first step (e.g. build a population)."""
        return None

    @abstractmethod
    def step(self, ctx: SearchContext) -> list[Proposal]:
        """Genomes to evaluate next (may be empty)."""

    def observe(self, ctx: SearchContext, proposal: Proposal, candidate: Candidate | None) -> None:
        """Called after each proposal is evaluated (``None``: invalid or rejected)."""
        return None

    # -- what the plan's estimate prices (see masforge.search.plan) -----------------------------------

    def sketch(self, population: Sequence[Genome], rng: random.Random) -> Genome:
        """A system this strategy might propose next from ``population``, made without an LM: what the plan's
        estimate prices a new system at. By default a member :func:`rewritten` (an LM's child is priced like its
        parent, its prompts new); a strategy whose own edits change what a system costs (copies, agents, rounds)
        makes them."""
        return rewritten(rng.choice(list(population)), rng)

    def meta_calls_per_system(self) -> float:
        """Meta-agent calls this strategy makes for each new system, at most on average (0: it needs none)."""
        return 0.0

    def admit(self, ctx: SearchContext, genome: Genome) -> bool:
        """False when the surrogate (if on) calls ``genome`` hopeless."""
        return self.filter is None or self.filter.admit(ctx, genome)

    def screen(self, ctx: SearchContext, proposal: Proposal) -> bool:
        """Whether ``proposal`` is worth paying for (a screened-out one is neither submitted nor observed)."""
        return self.admit(ctx, proposal.genome)

    def run(self, ctx: SearchContext) -> None:
        """Propose and evaluate until the context says stop."""
        previous = ctx.strategy
        ctx.strategy = self.name
        if self.use_surrogate and self.filter is None:  # a filter set beforehand (e.g. a tuned one) is kept
            self.filter = SurrogateFilter(margin=self.surrogate_margin, seed=ctx.seed)
        try:
            self.setup(ctx)
            idle = 0
            while not ctx.should_stop():
                ctx.generation += 1
                before = ctx.evaluated
                proposals = ctx.cheapest_first(self.step(ctx))
                for p in proposals:
                    if ctx.should_stop():
                        break
                    if not self.screen(ctx, p):
                        continue
                    cand = ctx.try_submit(p)
                    self.observe(ctx, p, cand)
                idle = idle + 1 if ctx.evaluated == before else 0
                if idle >= self.max_idle_steps:
                    ctx.emit(Stalled(strategy=self.name, steps=idle))
                    break
        finally:
            ctx.strategy = previous
