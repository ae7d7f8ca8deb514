"""Budgets: one type made of composable stop conditions (in the manner of GEPA's ``stop_condition.py``).

A :class:`Budget` holds :class:`StopCondition` s and stops a run when any one of them holds. Each condition
looks at a :class:`Usage` (what the run has spent and done so far) and, when it fires, says which limit was
reached and which flag the user set it with, so the message names what to raise. The same type is the run
configuration's ``budget:`` section, the LM ledger's limits (checked before every request to a provider) and
the search's limits (candidates, patience)::

    Budget(max_calls=100, max_candidates=20)
    Budget(max_dollars=2) | Patience(5) | MyCondition()   # composed with |

Conditions on spending (dollars, tokens, calls, wall time) are checked by the ledger before every LM request;
conditions on the search's progress (candidates, patience) by the search between candidates.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr


@dataclass(frozen=True)
class Usage:
    """What a run has spent and done so far: what stop conditions look at."""

    dollars: float = 0.0
    tokens: int = 0
    calls: int = 0
    """Requests sent to a provider (failed ones and retries included)."""
    seconds: float = 0.0
    candidates: int = 0
    since_best: int = 0
    """Candidates evaluated since the best one so far."""


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


# Every limit of a run, in the order a budget checks them (the first one reached names the stop).
BUDGET_LIMITS: dict[str, BudgetLimit] = {limit.field: limit for limit in (
    BudgetLimit("max_dollars", "dollars", "dollars", "dollars", "--budget-usd", "Dollar budget.",
                "dollar budget reached ({flags})", spend=True),
    BudgetLimit("max_tokens", "tokens", "tokens", "tokens", "--max-tokens", "Token budget.",
                "token budget reached ({flags})", spend=True),
    BudgetLimit("max_calls", "llm_calls", "calls", "LM calls", "--max-calls",
                "LM-call budget (every request sent counts, retries too).", "LM-call budget reached ({flags})",
                spend=True),
    BudgetLimit("max_seconds", "wall_time", "seconds", "seconds", "--max-minutes", "Wall-time budget.",
                "time budget reached ({flags})", spend=True, scale=60),
    BudgetLimit("max_candidates", "max_candidates", "candidates", "candidates", "--max-candidates",
                "Candidates to evaluate.", "all candidates evaluated ({flags})", short="-n"),
    BudgetLimit("patience", "patience", "since_best", "candidates without a new best", "--patience",
                "Stop after this many candidates without a new best.", "no new best for {flags} candidates"),
)}


@dataclass(frozen=True)
class _Limit(StopCondition):
    """A condition ``usage.<field> >= value``; what it says about itself comes from its row of
    :data:`BUDGET_LIMITS` (``field`` names the row)."""

    value: float
    field: ClassVar[str] = ""
    field_name: ClassVar[str] = ""
    unit: ClassVar[str] = ""
    scale: ClassVar[int] = 1

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        row = BUDGET_LIMITS[cls.field]
        cls.limit, cls.flag, cls.spend, cls.field_name, cls.unit, cls.scale = (
            row.name, row.flag, row.spend, row.usage, row.unit, row.scale)

    def reached(self, usage: Usage) -> bool:
        return getattr(usage, self.field_name) >= self.value

    def progress(self, usage: Usage) -> str:
        return f"{_num(getattr(usage, self.field_name))} of {_num(self.value)} {self.unit}".rstrip()

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
class MaxDollars(_Limit):
    """Stop when the LM spend reaches ``value`` dollars."""

    field = "max_dollars"


@dataclass(frozen=True)
class MaxTokens(_Limit):
    """Stop when prompt plus completion tokens reach ``value``."""

    field = "max_tokens"


@dataclass(frozen=True)
class MaxCalls(_Limit):
    """Stop when ``value`` requests were sent to a provider (retries and failed requests count)."""

    field = "max_calls"


@dataclass(frozen=True)
class MaxSeconds(_Limit):
    """Stop after ``value`` seconds of running (a resumed run counts the time of its earlier sessions)."""

    field = "max_seconds"


@dataclass(frozen=True)
class MaxCandidates(_Limit):
    """Stop when ``value`` candidates were evaluated (or restored) in this run."""

    field = "max_candidates"


@dataclass(frozen=True)
class Patience(_Limit):
    """Stop after ``value`` candidates in a row without a new best."""

    field = "patience"


# field name in the configuration -> condition, in the table's order
_CONDITIONS = {cls.field: cls for cls in (MaxDollars, MaxTokens, MaxCalls, MaxSeconds, MaxCandidates, Patience)}
_FIELDS: dict[str, type[_Limit]] = {field: _CONDITIONS[field] for field in BUDGET_LIMITS}


class Budget(BaseModel):
    """Limits of a run, any of which stops it (None: no such limit), plus any further conditions composed in
    with ``|``. Built from keywords, from the ``budget:`` section of a run configuration, or from conditions."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True)

    max_dollars: float | None = Field(default=None, ge=0)
    max_tokens: int | None = Field(default=None, ge=1)
    max_calls: int | None = Field(default=None, ge=1)
    max_seconds: float | None = Field(default=None, gt=0)
    max_candidates: int | None = Field(default=None, ge=1)
    patience: int | None = Field(default=None, ge=1)
    test_share: float = Field(default=0.2, ge=0, lt=1)
    """Share of each spend limit (dollars, tokens, calls, time) kept for re-scoring the finalists on the
    held-out split: the search stops at the rest, the re-scoring may use what is left of the whole."""
    _extra: list[StopCondition] = PrivateAttr(default_factory=list)

    def __init__(self, conditions: Iterable[StopCondition] = (), **limits: Any) -> None:
        super().__init__(**limits)
        for cond in conditions:
            self._add(cond)

    def _add(self, cond: StopCondition) -> None:
        name = next((k for k, cls in _FIELDS.items() if type(cond) is cls), None)
        if name is not None and isinstance(cond, _Limit):
            current = getattr(self, name)
            value = cond.value if current is None else min(current, cond.value)
            setattr(self, name, value)
        else:
            self._extra.append(cond)

    @property
    def conditions(self) -> list[StopCondition]:
        """Every condition of this budget (limits first, in a fixed order)."""
        out: list[StopCondition] = [cls(getattr(self, name)) for name, cls in _FIELDS.items()
                                    if getattr(self, name) is not None]
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

    def scaled(self, share: float) -> Budget:
        """This budget with every spend limit multiplied by ``share`` (the search's part of it)."""
        out = Budget(**self.model_dump())
        for name, cls in _FIELDS.items():
            value = getattr(self, name)
            if value is not None and cls.spend:
                scaled = cls(value).scaled(share)
                assert isinstance(scaled, _Limit)
                setattr(out, name, scaled.value)
        out._extra = [c.scaled(share) for c in self._extra]
        return out

    def for_search(self) -> Budget:
        """The part of this budget the search may spend (the rest is kept for the held-out re-scoring)."""
        return self.scaled(1.0 - self.test_share) if self.test_share else self

    def get(self, limit: str) -> float | None:
        """The value of a limit by the name a stop reports (``llm_calls``, ``dollars``, ...), or None."""
        for name, cls in _FIELDS.items():
            if cls.limit == limit:
                value = getattr(self, name)
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
            elif isinstance(cond, _Limit):
                parts.append(f"{_num(cond.value)} {cond.unit}")
            else:
                parts.append(cond.flag)
        return ", ".join(parts) or "no limit"

    def __or__(self, other: StopCondition | Budget) -> Budget:
        out = Budget(**self.model_dump())
        out._extra = list(self._extra)
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
