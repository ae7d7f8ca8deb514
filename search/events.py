"""What a search reports while it runs: one frozen dataclass per kind of event.

A :class:`~masforge.search.context.SearchContext` hands each event to its ``on_event`` listener (the engine's, which
shows it in the live view and logs admitted candidates to ``events.jsonl``; or your own, when you build a context
yourself). Strategies emit event objects (``ctx.emit(Note(strategy=..., message=...))``); every event class has a
``kind``, the name it has in ``events.jsonl`` (its ``event`` field), and :data:`EVENTS` maps each kind to its class.
An admitted candidate's line in ``events.jsonl`` is read back as a :class:`LoggedCandidate`, what a resume replays.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Any, ClassVar

if TYPE_CHECKING:
    from masforge.search.population import Candidate

EVENTS: dict[str, type[Event]] = {}
"""Every kind of search event, by its ``kind``."""


@dataclass(frozen=True)
class Event:
    """Base of the search events; a subclass names its kind: ``class Note(Event, kind="note")``."""

    kind: ClassVar[str] = ""

    def __init_subclass__(cls, kind: str = "", **options: Any) -> None:
        super().__init_subclass__(**options)
        if not kind:
            raise TypeError(f"{cls.__name__}: a search event needs a kind, e.g. class {cls.__name__}(Event, kind=...)")
        if kind in EVENTS:
            raise TypeError(f"{cls.__name__}: the event kind '{kind}' is taken by {EVENTS[kind].__name__}")
        cls.kind = kind
        EVENTS[kind] = cls

    def data(self) -> dict[str, Any]:
        """The event's fields by name (shallow: a candidate stays the :class:`Candidate` object)."""
        return {f.name: getattr(self, f.name) for f in fields(self)}


# ------------------------------------------------------------------------------------------------ candidates


@dataclass(frozen=True)
class Admitted(Event, kind="candidate"):
    """A candidate joined the population: evaluated, or ``reused`` from the archive. ``seq`` is its position and
    ``rng`` a fingerprint of the search's RNG then (what a resume checks its replay against); ``replayed``: a
    candidate of the stopped run a resume walked again (not logged twice)."""

    candidate: Candidate
    reused: bool
    improved: bool
    seq: int
    rng: str
    replayed: bool

    def logged(self, spent: dict[str, Any]) -> LoggedCandidate:
        """The event as ``events.jsonl`` keeps it (``spent``: the ledger's totals), the log a resume replays."""
        c = self.candidate
        return LoggedCandidate(t=time.time(), id=c.id, name=c.genome.name, score=c.score, dollars=c.dollars,
                               operator=c.operator, strategy=c.strategy, reused=self.reused, seq=self.seq,
                               rng=self.rng, spent=dict(spent))


@dataclass(frozen=True)
class LoggedCandidate:
    """An :class:`Admitted` event as a line of ``events.jsonl`` holds it, written and read back typed: the log a
    resume replays and checks its candidates against (see :mod:`masforge.search.replay`)."""

    t: float
    id: str
    name: str
    score: float
    dollars: float
    operator: str
    strategy: str
    reused: bool
    seq: int
    """Its position among the run's admitted candidates."""
    rng: str | None
    """A fingerprint of the search's RNG when it was admitted (None in a log written before runs kept one)."""
    spent: dict[str, Any]
    """The ledger's totals then."""

    def row(self) -> dict[str, Any]:
        """Its line of ``events.jsonl`` (the fields, in the order, of every run since the log began)."""
        return {"t": self.t, "event": Admitted.kind, "id": self.id, "name": self.name, "score": self.score,
                "dollars": self.dollars, "operator": self.operator, "strategy": self.strategy, "reused": self.reused,
                "seq": self.seq, "rng": self.rng, "spent": self.spent}

    @classmethod
    def from_row(cls, row: dict[str, Any], position: int) -> LoggedCandidate:
        """A candidate line read back; ``position`` is its place in the log, its ``seq`` in a log written before
        positions were kept. Fields an older log lacks are empty; a value of the wrong type is a ValueError."""
        seq, rng, spent = row.get("seq"), row.get("rng"), row.get("spent")
        return cls(t=float(row.get("t") or 0.0), id=str(row.get("id") or ""), name=str(row.get("name") or ""),
                   score=float(row.get("score") or 0.0), dollars=float(row.get("dollars") or 0.0),
                   operator=str(row.get("operator") or ""), strategy=str(row.get("strategy") or ""),
                   reused=bool(row.get("reused")), seq=seq if isinstance(seq, int) else position,
                   rng=rng if isinstance(rng, str) else None, spent=spent if isinstance(spent, dict) else {})


@dataclass(frozen=True)
class NewIncumbent(Event, kind="incumbent"):
    """``candidate`` beat the ``previous`` incumbent by ``diff`` (95% interval ``low`` to ``high``) in mean
    fitness over ``n`` paired examples."""

    candidate: Candidate
    previous: Candidate
    diff: float
    low: float
    high: float
    n: int


@dataclass(frozen=True)
class Evaluating(Event, kind="evaluating"):
    """The evaluation of a new genome starts: ``planned`` examples, about ``calls`` LM calls and ``seconds``
    (by the seconds per call measured here; 0: not said)."""

    name: str
    operator: str
    planned: int = 0
    calls: float = 0.0
    seconds: float = 0.0


@dataclass(frozen=True)
class ExampleDone(Event, kind="example_done"):
    """An example of the evaluation under way (a candidate's, or a finalist's held-out one) ended: ``done`` of
    ``planned``."""

    name: str
    done: int
    planned: int


@dataclass(frozen=True)
class Rejected(Event, kind="rejected"):
    """A proposal was invalid, or the runtime could not build it."""

    name: str
    reason: str
    operator: str


@dataclass(frozen=True)
class Duplicate(Event, kind="duplicate"):
    """A proposal was a genome already in the population (``candidate``)."""

    candidate: Candidate
    operator: str


@dataclass(frozen=True)
class Skipped(Event, kind="skipped"):
    """A strategy left out a proposal before paying for it (e.g. a near-duplicate)."""

    name: str
    reason: str
    operator: str


@dataclass(frozen=True)
class SurrogateSkip(Event, kind="surrogate_skip"):
    """The surrogate model predicted ``predicted`` for a genome, too far below the ``best``: not evaluated."""

    name: str
    predicted: float
    best: float


@dataclass(frozen=True)
class Waiting(Event, kind="waiting"):
    """Another search sharing the archive is evaluating the same genome (``holder``: its run, pid, ...)."""

    name: str
    holder: dict[str, Any]


@dataclass(frozen=True)
class Incomplete(Event, kind="incomplete"):
    """An evaluation had too many unscored examples (the provider or sandbox failed, ``error``): no score is
    kept and the genome is evaluated again later."""

    name: str
    id: str
    unscored: int
    attempted: int
    planned: int
    error: str


@dataclass(frozen=True)
class Diverged(Event, kind="diverged"):
    """A resume's replay took another path than the stopped run at position ``seq`` (``expected`` and ``got``:
    short ids of the candidates there)."""

    seq: int
    expected: str
    got: str


# ------------------------------------------------------------------------------------------------ the run


@dataclass(frozen=True)
class Notice(Event, kind="notice"):
    """A run-level line (the budget plan, a warning, a resume), shown as it is."""

    text: str
    warning: bool


@dataclass(frozen=True)
class Stage(Event, kind="stage"):
    """Strategy ``strategy`` starts, stage ``index`` of the ``of`` stages of the pipeline."""

    strategy: str
    index: int
    of: int


@dataclass(frozen=True)
class Stalled(Event, kind="stalled"):
    """A strategy gave up: ``steps`` steps in a row found no new candidate."""

    strategy: str
    steps: int


@dataclass(frozen=True)
class Note(Event, kind="note"):
    """A strategy's remark (e.g. the meta-agent failed and structural edits stand in)."""

    strategy: str
    message: str


@dataclass(frozen=True)
class HeldOutTest(Event, kind="test"):
    """A finalist is being re-scored on the held-out test split: ``planned`` examples, about ``calls`` LM calls and
    ``seconds`` (0: not said)."""

    name: str
    planned: int = 0
    calls: float = 0.0
    seconds: float = 0.0


# ------------------------------------------------------------------------------------------------ knapsack


@dataclass(frozen=True)
class KnapsackProbe(Event, kind="knapsack_probe"):
    """The knapsack strategy measured a component's ``value`` (probe ``score``) for its ``cost``."""

    component: str
    value: float
    cost: float
    score: float


@dataclass(frozen=True)
class KnapsackBlacklist(Event, kind="knapsack_blacklist"):
    """The knapsack strategy dropped a broken component."""

    component: str
    reason: str


@dataclass(frozen=True)
class KnapsackSelect(Event, kind="knapsack_select"):
    """A knapsack round: the components looked at (``order``), those ``accepted`` (``used`` of ``budget``) and the
    composed ``genome`` (its id; None: nothing could be composed)."""

    round: int
    order: list[str]
    accepted: list[str]
    used: float
    budget: float
    genome: str | None
