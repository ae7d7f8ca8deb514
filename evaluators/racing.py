"""Racing: score a candidate in batches and stop as soon as it can no longer beat the incumbent.

A search compares every candidate with its incumbent (the best system so far) on the *same* examples. Most
candidates are not better, and most of those show it early, so scoring each of them on the whole selection set
wastes the LM calls a search needs for its good candidates. A race scores a first batch, then further batches,
and after each one looks at the paired differences (candidate minus incumbent, example by example) so far.

The test is a *sequential paired test*, as in F-Race / irace's t-race (Birattari et al. 2002; López-Ibáñez et al.
2016): the candidate is dropped when the upper end of the percentile-bootstrap confidence interval of the mean
paired difference falls below 0, i.e. when the data already say, at that confidence, that it is worse. We chose
it over successive halving because a search meets its candidates one at a time (halving needs a cohort to
halve), and because the paired test uses what a race has that halving ignores: each example's difficulty, which
pairing cancels (most problems are easy or hard for both systems), so a worse candidate is seen after few
examples. A candidate that ties or beats the incumbent is never dropped and is scored on the whole set, where the
search decides (on the complete paired comparison) whether it becomes the incumbent.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from masforge.evaluators.example import Example
from masforge.evaluators.stats import paired_difference

DEFAULT_FIRST = 16
"""Examples in a race's first batch: fewer cannot tell a 10-point loss from noise."""
DEFAULT_BATCH = 16
"""Examples in each later batch (one look of the paired test per batch)."""
DEFAULT_CONFIDENCE = 0.95


@dataclass(frozen=True)
class Look:
    """One look of the paired test: the examples compared so far and the mean paired difference with its CI."""

    n: int
    diff: float
    low: float
    high: float

    @property
    def behind(self) -> bool:
        """The data already say the candidate is worse (the interval lies below 0)."""
        return self.high < 0.0

    def to_dict(self) -> dict[str, Any]:
        return {"n": self.n, "diff": round(self.diff, 6), "low": round(self.low, 6), "high": round(self.high, 6)}


@dataclass(frozen=True)
class Race:
    """A race against an incumbent: its per-example values (example id -> value, the same measure ``value`` gives
    for the candidate's examples), the batch sizes and the confidence of the paired test."""

    incumbent: Mapping[str, float]
    incumbent_name: str = "incumbent"
    first: int = DEFAULT_FIRST
    batch: int = DEFAULT_BATCH
    confidence: float = DEFAULT_CONFIDENCE
    value: Callable[[Any], float] = field(default=lambda ex: float(ex.score))
    """Per-example value of a candidate's :class:`ExampleResult` (the search's fitness: score minus weighted
    cost); the incumbent's values were computed the same way."""

    def __post_init__(self) -> None:
        if self.first < 1 or self.batch < 1:
            raise ValueError(f"race batches must hold at least one example (first={self.first}, batch={self.batch})")
        if not 0.5 <= self.confidence < 1:
            raise ValueError(f"race confidence must be in [0.5, 1), got {self.confidence}")

    def batches(self, examples: Sequence[Example]) -> list[list[Example]]:
        """The examples in the batches they are scored in: ``first``, then ``batch`` at a time."""
        items = list(examples)
        out = [items[: self.first]]
        for start in range(self.first, len(items), self.batch):
            out.append(items[start: start + self.batch])
        return [b for b in out if b]

    def look(self, results: Sequence[Any]) -> Look | None:
        """The paired test over the scored examples both systems have (None: none in common yet)."""
        pairs = [(self.value(r), self.incumbent[r.example_id]) for r in results
                 if not r.unscored and r.example_id in self.incumbent]
        if not pairs:
            return None
        mine, theirs = [p[0] for p in pairs], [p[1] for p in pairs]
        diff, low, high = paired_difference(mine, theirs, confidence=self.confidence)
        return Look(len(pairs), diff, low, high)


def incumbent_values(example_scores: Mapping[str, float], example_dollars: Mapping[str, float] | None,
                     per_example: Callable[[float, float], float]) -> dict[str, float]:
    """An incumbent's per-example values from its stored scores and dollars (``per_example(score, dollars)``)."""
    dollars = example_dollars or {}
    return {k: per_example(float(v), float(dollars.get(k, 0.0))) for k, v in example_scores.items()}


@dataclass(frozen=True)
class RaceSettings:
    """How a search races its candidates (batch sizes and the paired test's confidence); :meth:`against` makes
    the race of one candidate against the current incumbent."""

    first: int = DEFAULT_FIRST
    batch: int = DEFAULT_BATCH
    confidence: float = DEFAULT_CONFIDENCE

    def against(self, incumbent: Mapping[str, float], name: str, *,
                value: Callable[[Any], float] | None = None) -> Race:
        extra = {"value": value} if value is not None else {}
        return Race(dict(incumbent), name, self.first, self.batch, self.confidence, **extra)
