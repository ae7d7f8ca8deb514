"""What the archive stores about a candidate: who it is, where it came from and how it scored.

Both records are plain dataclasses with a JSON round trip. ``CandidateRecord.meta_dict()`` is what goes into
``candidates/<id>/meta.json``; each :class:`ResultRecord` is a file of its own under ``results/``, made by the
evaluator's report (``EvalReport.result()``) and stored as it is, redacted field by field (:func:`redacted`).
So that older masforge versions can read newer archives, unknown keys of a stored candidate are ignored and those of
a stored result are kept in its ``extra``: a result read back loses nothing.
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, ClassVar, Self

from masforge.errors import ArchiveError
from masforge.redact import redact_data

STATUSES = ("active", "promoted", "pruned")
KINDS = ("config", "code", "portfolio")
SORTS = ("score", "cost", "generation", "created")
"""The orders a candidate list comes in: best score, cheapest, newest generation, newest."""


def check_sort(sort: str) -> None:
    """A one-line ArchiveError for an order that is not one of :data:`SORTS`."""
    if sort not in SORTS:
        raise ArchiveError(f"unknown sort '{sort}' (use one of: {', '.join(SORTS)})")


def now_iso() -> str:
    """Current UTC time as ISO 8601 with milliseconds (sorts as text)."""
    return datetime.now(UTC).isoformat(timespec="milliseconds")


def _known(cls: type, data: dict[str, Any]) -> dict[str, Any]:
    names = {f.name for f in dataclasses.fields(cls)}
    return {k: v for k, v in data.items() if k in names}


def _dumps(data: dict[str, Any]) -> str:
    # Sorted keys and fixed layout: equal records give equal git blobs.
    return json.dumps(data, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


class _JsonRecord:
    """The JSON round trip both records share (a subclass has ``to_dict`` and ``from_dict``)."""

    label: ClassVar[str] = "record"

    def to_dict(self) -> dict[str, Any]:
        raise NotImplementedError

    @classmethod
    def from_dict(cls, data: dict[str, Any], origin: str) -> Self:
        raise NotImplementedError

    def to_json(self) -> str:
        """Deterministic JSON text of :meth:`to_dict`."""
        return _dumps(self.to_dict())

    @classmethod
    def from_json(cls, text: str, origin: str | None = None) -> Self:
        """Parse :meth:`to_json` output (for a candidate also ``meta.json``); one-line ArchiveError if broken."""
        origin = origin or cls.label
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ArchiveError(f"{origin}: invalid JSON in {cls.label} record ({exc.msg})") from None
        if not isinstance(data, dict):
            raise ArchiveError(f"{origin}: a {cls.label} record must be a JSON object")
        return cls.from_dict(data, origin)


@dataclass
class ResultRecord(_JsonRecord):
    """One evaluation of one candidate on one task split with one LM configuration."""

    label: ClassVar[str] = "result"

    task: str
    split: str
    lm_key: str
    score: float
    ci_low: float | None = None
    ci_high: float | None = None
    n: int = 0
    dollars: float = 0.0
    tokens: int = 0
    llm_calls: int = 0
    """LM answers generated (paid for) by this evaluation."""
    cache_hits: int = 0
    """LM answers this evaluation read from the answer cache (asked for before, by any system)."""
    latency_s: float = 0.0
    failures: dict[str, int] = field(default_factory=dict)
    example_scores: dict[str, float] = field(default_factory=dict)
    """Score of each scored example by id: paired comparisons, races and portfolios are built from them."""
    example_dollars: dict[str, float] = field(default_factory=dict)
    """Dollars of each example by id (examples that cost nothing are left out)."""
    extra: dict[str, Any] = field(default_factory=dict)
    evaluated_at: str = field(default_factory=now_iso)

    def __post_init__(self) -> None:
        if not self.task:
            raise ValueError("ResultRecord.task must not be empty")
        for name in ("score", "ci_low", "ci_high"):
            value = getattr(self, name)
            if value is None:
                continue
            value = float(value)
            if not math.isfinite(value) or not 0.0 <= value <= 1.0:
                raise ValueError(f"ResultRecord.{name} must be a number in [0, 1], got {value!r}")
            setattr(self, name, value)
        if not math.isfinite(float(self.dollars)) or self.dollars < 0:
            raise ValueError(f"ResultRecord.dollars must be a finite number >= 0, got {self.dollars!r}")
        self.dollars = float(self.dollars)
        self.latency_s = float(self.latency_s)
        self.n, self.tokens, self.llm_calls = int(self.n), int(self.tokens), int(self.llm_calls)
        self.cache_hits = int(self.cache_hits)
        self.example_scores = {str(k): float(v) for k, v in self.example_scores.items()}
        self.example_dollars = {str(k): float(v) for k, v in self.example_dollars.items()}
        self.failures = {str(k): int(v) for k, v in self.failures.items()}

    @property
    def key(self) -> tuple[str, str, str]:
        """What makes two results "the same evaluation": (task, split, lm_key)."""
        return (self.task, self.split, self.lm_key)

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-ready dict."""
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any], origin: str = "result") -> ResultRecord:
        """Build from a dict; a key this version has no field for (a newer masforge wrote it) is kept in
        ``extra``, unless ``extra`` names it already. Bad data raises a one-line ArchiveError."""
        values = _known(cls, data)
        unknown = {k: v for k, v in data.items() if k not in values}
        try:
            if unknown:
                extra = values.get("extra", {})
                if not isinstance(extra, Mapping):
                    raise TypeError(f"extra must be a JSON object, got {type(extra).__name__}")
                values["extra"] = {**unknown, **extra}
            return cls(**values)
        except (TypeError, ValueError) as exc:
            raise ArchiveError(f"{origin}: invalid result record ({exc})") from None


def redacted(result: ResultRecord) -> ResultRecord:
    """``result`` with every string it holds redacted (keys of its dicts included): the record itself when nothing
    needed redacting, else a copy. Failure notes quote errors and model output, which may carry a key."""
    changed = {}
    for f in dataclasses.fields(result):
        value = getattr(result, f.name)
        clean = redact_data(value)
        if clean != value:
            changed[f.name] = clean
    return dataclasses.replace(result, **changed) if changed else result



@dataclass
class CandidateRecord(_JsonRecord):
    """A stored candidate: identity, lineage, provenance, status and its results."""

    label: ClassVar[str] = "candidate"

    genome_id: str
    name: str
    kind: str = "config"
    parents: list[str] = field(default_factory=list)
    strategy: str = "seed"
    operator: str = "seed"
    rationale: str = ""
    generation: int = 0
    run: str = ""
    created_at: str = field(default_factory=now_iso)
    tags: list[str] = field(default_factory=list)
    status: str = "active"
    results: list[ResultRecord] = field(default_factory=list)
    # The commit that added the genome; filled from the index, never stored in meta.json
    # (a commit cannot contain its own sha).
    commit: str = ""

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise ValueError(f"CandidateRecord.status must be one of {', '.join(STATUSES)}, got {self.status!r}")
        if self.kind not in KINDS:
            raise ValueError(f"CandidateRecord.kind must be one of {', '.join(KINDS)}, got {self.kind!r}")
        self.generation = int(self.generation)

    @property
    def short_id(self) -> str:
        """First 12 hex digits of the genome id."""
        return self.genome_id[:12]

    def result_for(self, task: str | None = None, split: str | None = None,
                   lm_key: str | None = None) -> ResultRecord | None:
        """Best-scoring result matching the filters (cheapest on ties), or None."""
        matches = [
            r for r in self.results
            if (task is None or r.task == task) and (split is None or r.split == split)
            and (lm_key is None or r.lm_key == lm_key)
        ]
        if not matches:
            return None
        return min(matches, key=lambda r: (-r.score, r.dollars))

    def meta_dict(self) -> dict[str, Any]:
        """What ``meta.json`` holds: everything except results (own files) and the commit sha."""
        data = dataclasses.asdict(self)
        del data["results"], data["commit"]
        return data

    def to_dict(self) -> dict[str, Any]:
        """Everything, results included (for JSON export)."""
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any], origin: str = "candidate") -> CandidateRecord:
        """Build from :meth:`to_dict` / :meth:`meta_dict` output (unknown keys ignored)."""
        try:
            values = _known(cls, data)
            values["results"] = [ResultRecord.from_dict(r, origin) for r in values.get("results", [])]
            values["parents"] = list(values.get("parents", []))
            values["tags"] = list(values.get("tags", []))
            return cls(**values)
        except (TypeError, ValueError) as exc:
            raise ArchiveError(f"{origin}: invalid candidate record ({exc})") from None

    def meta_json(self) -> str:
        """Deterministic ``meta.json`` text."""
        return _dumps(self.meta_dict())
