"""Budgets: one type made of composable stop conditions (in the manner of GEPA's ``stop_condition.py``).

A :class:`Budget` holds :class:`StopCondition` s and stops a run when any one of them holds. Each condition
looks at a :class:`Usage` (what the run has spent so far) and, when it fires, says which limit was reached and
which flag the user set it with, so the message names what to raise. Every limit is declared once, as a
:class:`BudgetLimit` (name, unit, flag, help), and its condition, the run configuration's key, the stop message
and the command-line option are all read from that declaration::

    Budget(max_calls=100, max_dollars=2)
    Budget(max_dollars=2) | MaxCalls(100) | MyCondition()   # composed with |

Here are the limits on spending (dollars, tokens, calls, wall time), which the LM ledger checks before every
request; the search adds its own limits on progress (candidates, patience: :mod:`masforge.search.budget`).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, ClassVar, Self

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr


@dataclass(frozen=True)
class Usage:
    """What a run has spent so far: what stop conditions look at (a search adds its progress to it)."""

    dollars: float = 0.0
    tokens: int = 0
    calls: int = 0
    """Requests sent to a provider (failed ones and retries included)."""
    seconds: float = 0.0


@dataclass(frozen=True)
class Stop:
    """Why a run stops: the limit's name (``llm_calls``, ...), the flag that sets it and a one-line message."""

    limit: str
    flag: str
    message: str


class StopCondition(ABC):
    """One reason to stop. Subclasses set ``limit`` (the name a stop reports), ``flag`` (how the user sets
    it) and ``spend`` (True: a limit on spending, checked before every LM request and scalable)."""

    limit: ClassVar[str] = "custom"
    flag: ClassVar[str] = "a custom stop condition"
    spend: ClassVar[bool] = False

    @abstractmethod
    def reached(self, usage: Usage) -> bool:
        """Whether the run must stop now."""

    def progress(self, usage: Usage) -> str:
        """Where the run stands against this condition, e.g. ``10 of 10 LM calls``."""
        return self.limit

    def setting(self) -> str:
        """How the user set this condition, e.g. ``--max-calls 10``."""
        return self.flag

    def scaled(self, share: float) -> StopCondition:
        """This condition with its limit multiplied by ``share`` (spend limits only; others unchanged)."""
        return self

    def stop(self, usage: Usage) -> Stop | None:
        """A :class:`Stop` naming this condition if it is reached, else None."""
        if not self.reached(usage):
            return None
        return Stop(self.limit, self.flag, f"budget reached: {self.setting()} ({self.progress(usage)}); raise it to "
                                           "go on (a stopped search continues with --resume)")

    def __or__(self, other: StopCondition | Budget) -> Budget:
        return Budget(conditions=[self]) | other


@dataclass(frozen=True)
class BudgetLimit:
    """One limit of a run, declared once: everything the run configuration, the stop messages and the command
    line say about it comes from here."""

    field: str
    """The :class:`Budget` field, also the key under ``budget:`` in a run configuration."""
    name: str
    """What a stop by this limit reports (``Stop.limit``, a search's ``stop_reason``)."""
    usage: str
    """The :class:`Usage` field it bounds."""
    unit: str
    """How its amounts are counted in messages."""
    flag: str
    """The command-line flag that sets it."""
    help: str
    """The flag's help in ``masforge search``."""
    reason: str
    """Why a run stopped, in words; ``{flags}`` stands for the flag (and its short form)."""
    spend: bool = False
    """A limit on spending: checked before every LM request, and partly kept for the held-out re-scoring."""
    scale: int = 1
    """The flag's value times ``scale`` is the field's (minutes on the command line, seconds in the budget)."""
    short: str = ""
    """The flag's short form, if it has one."""

    @property
    def flags(self) -> str:
        """The flag as the user may type it, e.g. ``-n / --max-candidates``."""
        return " / ".join(f for f in (self.short, self.flag) if f)

    @property
    def stopped(self) -> str:
        """Why a run stopped by this limit, naming its flag, e.g. ``LM-call budget reached (--max-calls)``."""
        return self.reason.format(flags=self.flags)


# The limits on spending, in the order a budget checks them (the first one reached names the stop).
SPEND_LIMITS: dict[str, BudgetLimit] = {limit.field: limit for limit in (
    BudgetLimit("max_dollars", "dollars", "dollars", "dollars", "--budget-usd", "Dollar budget.",
                "dollar budget reached ({flags})", spend=True),
    BudgetLimit("max_tokens", "tokens", "tokens", "tokens", "--max-tokens", "Token budget.",
                "token budget reached ({flags})", spend=True),
    BudgetLimit("max_calls", "llm_calls", "calls", "LM calls", "--max-calls",
                "LM-call budget (every request sent counts, retries too).", "LM-call budget reached ({flags})",
                spend=True),
    BudgetLimit("max_seconds", "wall_time", "seconds", "seconds", "--max-minutes", "Wall-time budget.",
                "time budget reached ({flags})", spend=True, scale=60),
)}


@dataclass(frozen=True)
class Limit(StopCondition):
    """A condition ``usage.<field> >= value``; what it says about itself comes from its declaration
    (``declared``, set by each subclass)."""

    value: float
    declared: ClassVar[BudgetLimit]
    field: ClassVar[str] = ""
    field_name: ClassVar[str] = ""
    unit: ClassVar[str] = ""
    scale: ClassVar[int] = 1

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        row = cls.declared
        cls.field, cls.limit, cls.flag, cls.spend, cls.field_name, cls.unit, cls.scale = (
            row.field, row.name, row.flag, row.spend, row.usage, row.unit, row.scale)

    def counted(self, usage: Usage) -> float:
        """What ``usage`` counts of this limit (0 in a usage that does not count it: a search's progress is not in
        the LM ledger's)."""
        return getattr(usage, self.field_name, 0)

    def reached(self, usage: Usage) -> bool:
        return self.counted(usage) >= self.value

    def progress(self, usage: Usage) -> str:
        return f"{_num(self.counted(usage))} of {_num(self.value)} {self.unit}".rstrip()

    def setting(self) -> str:
        value = self.value if self.scale == 1 else round(self.value / self.scale, 2)
        return f"{self.flag} {_num(value)}"

    def scaled(self, share: float) -> StopCondition:
        if not self.spend:
            return self
        value = self.value * share
        return type(self)(value if isinstance(self.value, float) else max(1, int(value)))


def _num(value: float) -> str:
    return f"{value:g}" if isinstance(value, int) or float(value).is_integer() else f"{value:.4f}"


@dataclass(frozen=True)
class MaxDollars(Limit):
    """Stop when the LM spend reaches ``value`` dollars."""

    declared = SPEND_LIMITS["max_dollars"]


@dataclass(frozen=True)
class MaxTokens(Limit):
    """Stop when prompt plus completion tokens reach ``value``."""

    declared = SPEND_LIMITS["max_tokens"]


@dataclass(frozen=True)
class MaxCalls(Limit):
    """Stop when ``value`` requests were sent to a provider (retries and failed requests count)."""

    declared = SPEND_LIMITS["max_calls"]


@dataclass(frozen=True)
class MaxSeconds(Limit):
    """Stop after ``value`` seconds of running (a resumed run counts the time of its earlier sessions)."""

    declared = SPEND_LIMITS["max_seconds"]


class Budget(BaseModel):
    """Limits on spending, any of which stops a run (None: no such limit), plus any further conditions composed
    in with ``|``. Built from keywords, from the ``budget:`` section of a run configuration, or from conditions.
    A subclass adds limits of its own: a field and a :class:`Limit` in :attr:`LIMITS` each."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True)
    LIMITS: ClassVar[tuple[type[Limit], ...]] = (MaxDollars, MaxTokens, MaxCalls, MaxSeconds)
    """The conditions of the fields, in the order they are checked (the first one reached names the stop)."""

    max_dollars: float | None = Field(default=None, ge=0)
    max_tokens: int | None = Field(default=None, ge=1)
    max_calls: int | None = Field(default=None, ge=1)
    max_seconds: float | None = Field(default=None, gt=0)
    _extra: list[StopCondition] = PrivateAttr(default_factory=list)

    def __init__(self, conditions: Iterable[StopCondition] = (), **limits: Any) -> None:
        super().__init__(**limits)
        for cond in conditions:
            self._add(cond)

    @classmethod
    def declared(cls) -> dict[str, BudgetLimit]:
        """The declaration of each limit of this budget, by field, in the order they are checked."""
        return {limit.field: limit.declared for limit in cls.LIMITS}

    def _add(self, cond: StopCondition) -> None:
        if isinstance(cond, Limit) and type(cond) in self.LIMITS:
            current = getattr(self, cond.field)
            value = cond.value if current is None else min(current, cond.value)
            setattr(self, cond.field, value)
        else:
            self._extra.append(cond)

    def _copy(self) -> Self:
        out = type(self)(**self.model_dump())
        out._extra = list(self._extra)
        return out

    @property
    def conditions(self) -> list[StopCondition]:
        """Every condition of this budget (limits first, in a fixed order)."""
        out: list[StopCondition] = [cls(getattr(self, cls.field)) for cls in self.LIMITS
                                    if getattr(self, cls.field) is not None]
        return out + list(self._extra)

    def stop(self, usage: Usage, *, spend_only: bool = False, progress_only: bool = False) -> Stop | None:
        """The first condition reached, or None. ``spend_only``/``progress_only`` look at one kind."""
        for cond in self.conditions:
            if (spend_only and not cond.spend) or (progress_only and cond.spend):
                continue
            found = cond.stop(usage)
            if found is not None:
                return found
        return None

    def scaled(self, share: float) -> Self:
        """This budget with every spend limit multiplied by ``share`` (the search's part of it)."""
        out = self._copy()
        for cls in self.LIMITS:
            value = getattr(self, cls.field)
            if value is not None and cls.spend:
                scaled = cls(value).scaled(share)
                assert isinstance(scaled, Limit)
                setattr(out, cls.field, scaled.value)
        out._extra = [c.scaled(share) for c in self._extra]
        return out

    def spending(self) -> Budget:
        """Only the limits on spending of this budget (what the LM ledger checks)."""
        return Budget(**{cls.field: getattr(self, cls.field) for cls in self.LIMITS if cls.spend})

    def get(self, limit: str) -> float | None:
        """The value of a limit by the name a stop reports (``llm_calls``, ``dollars``, ...), or None."""
        for cls in self.LIMITS:
            if cls.limit == limit:
                value = getattr(self, cls.field)
                return float(value) if value is not None else None
        return None

    @property
    def has_spend_limit(self) -> bool:
        return any(c.spend for c in self.conditions)

    def describe(self) -> str:
        """The limits in words, e.g. ``$2, 100 LM calls, 20 candidates`` (``no limit`` if none)."""
        parts = []
        for cond in self.conditions:
            if isinstance(cond, MaxDollars):
                parts.append(f"${_num(cond.value)}")
            elif isinstance(cond, Limit):
                parts.append(f"{_num(cond.value)} {cond.unit}")
            else:
                parts.append(cond.flag)
        return ", ".join(parts) or "no limit"

    def __or__(self, other: StopCondition | Budget) -> Self:
        out = self._copy()
        for cond in (other.conditions if isinstance(other, Budget) else [other]):
            out._add(cond)
        return out


def free_lm_warning(budget: Budget, models: dict[str, tuple[bool, bool]]) -> str | None:
    """One line if a dollar limit cannot bind: ``models`` maps each LM to (free, price known)."""
    if budget.max_dollars is None or not models:
        return None
    dollars, calls = MaxDollars.flag, MaxCalls.flag
    if all(free for free, _ in models.values()):
        names = ", ".join(f"'{m}'" for m in models)
        return (f"{dollars} {_num(budget.max_dollars)} has no effect: LM {names} costs nothing here; bound the run "
                f"with {calls}, {MaxTokens.flag} or {MaxSeconds.flag} instead")
    unknown = [m for m, (free, known) in models.items() if not free and not known]
    if unknown:
        return (f"{dollars}: the price of LM '{unknown[0]}' is unknown, so its calls count $0; set price_in_per_m "
                f"and price_out_per_m in its LM configuration, or bound the run with {calls}")
    return None
