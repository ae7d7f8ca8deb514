"""Two systems on the same examples: which is better, by how much, and how sure.

A difference of means with two separate confidence intervals throws away what the pairing knows: most
examples are easy or hard for both systems. The comparison here pairs the two reports example by example
(by example id, over the examples both scored) and gives the mean of (B - A) with its paired bootstrap
interval, and how many examples B won, lost and tied. Reports come from :class:`~.runner.Evaluator` or from
the JSON that ``masforge evaluate -o`` writes.
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from masforge.errors import TaskError
from masforge.evaluators.runner import EvalReport
from masforge.evaluators.stats import paired_difference


@dataclass(frozen=True)
class Side:
    """One system's evaluation, as the comparison needs it."""

    name: str
    genome_id: str
    task: str
    split: str
    lm_key: str
    scores: dict[str, float]
    """Score per example id, for the examples the report scored (unscored ones are left out)."""
    dollars: float
    tokens: int
    llm_calls: int
    """LM answers the system used, paid for or from the answer cache (what it costs to run, not what this run paid)."""
    planned: int
    """Examples the evaluation set out to run (the first ``planned`` of the split)."""
    split_size: int = 0
    """Examples the split holds (0: not known)."""

    @classmethod
    def of(cls, report: EvalReport | Mapping[str, Any]) -> Side:
        """A side from an :class:`EvalReport` or the JSON form ``masforge evaluate -o`` writes."""
        data = report.to_dict() if isinstance(report, EvalReport) else report
        try:
            scores = {str(e["example_id"]): float(e["score"]) for e in data["examples"] if not e.get("unscored")}
            return cls(name=str(data.get("genome_name") or data["genome_id"]), genome_id=str(data["genome_id"]),
                       task=str(data["task"]), split=str(data["split"]), lm_key=str(data.get("lm_key", "")),
                       scores=scores, dollars=float(data.get("dollars", 0.0)), tokens=int(data.get("tokens", 0)),
                       llm_calls=int(data.get("llm_calls", 0)) + int(data.get("cache_hits", 0)),
                       planned=int(data.get("planned") or len(data["examples"])),
                       split_size=int(data.get("split_size") or 0))
        except (KeyError, TypeError, ValueError) as exc:
            raise TaskError(f"not an evaluation report (missing or bad {exc}): write one with "
                            "'masforge evaluate SYSTEM -t TASK -o report.json'") from None


def load_report(path: str | Path) -> Side:
    """A side from a report file written by ``masforge evaluate -o``."""
    p = Path(path)
    try:
        data = json.loads(p.read_text(encoding="utf-8"))
    except OSError as exc:
        raise TaskError(f"cannot read report {p}: {exc.strerror or exc}") from None
    except json.JSONDecodeError as exc:
        raise TaskError(f"report {p} is not JSON (line {exc.lineno}): write one with "
                        "'masforge evaluate SYSTEM -t TASK -o report.json'") from None
    if not isinstance(data, dict):
        raise TaskError(f"report {p} is not an evaluation report: expected a JSON object")
    return Side.of(data)


def _report_data(text: str) -> dict[str, Any] | None:
    """The parsed report in a JSON file, or None when ``text`` names no such file (a genome file in JSON has
    agents, not examples)."""
    p = Path(text)
    if p.suffix.lower() != ".json" or not p.is_file():
        return None
    try:
        data = json.loads(p.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) and "examples" in data and "genome_id" in data else None


def report_side(text: str) -> Side | None:
    """The side a report file holds (read once), or None when ``text`` is not a report file: a system to run."""
    data = _report_data(text)
    return None if data is None else Side.of(data)


MIN_VERDICT_EXAMPLES = 30
"""Fewer paired examples than this and no verdict is given: a bootstrap interval over a handful of examples is
too ragged to trust (with 2 examples, 1.0 against 0.0 twice gives the interval [1, 1])."""


def outcome(n: int, ci_low: float, ci_high: float) -> str:
    """What a paired difference over ``n`` examples with this 95% interval supports: ``too_few``, ``better``,
    ``worse`` or ``no_difference``."""
    if n < MIN_VERDICT_EXAMPLES:
        return "too_few"
    if ci_low > 0:
        return "better"
    if ci_high < 0:
        return "worse"
    return "no_difference"


def more_examples_advice(flag: str, split: str, split_size: int) -> str:
    """How to get enough examples for a verdict: ``raise FLAG``, or, when the split holds fewer than a verdict needs
    (``split_size``; 0: not known), that the task needs more data (no limit can score examples that are not there)."""
    if 0 < split_size < MIN_VERDICT_EXAMPLES:
        return f"the {split} split holds {split_size}: give the task more data"
    return f"raise {flag}"


def too_few_words(n: int, flag: str = "--limit", split: str = "", split_size: int = 0) -> str:
    """The verdict under :data:`MIN_VERDICT_EXAMPLES` examples, naming the flag that scores more of them, or saying
    the split has no more (:func:`more_examples_advice`)."""
    return (f"too few examples to tell ({n}; a verdict needs about {MIN_VERDICT_EXAMPLES}): "
            f"{more_examples_advice(flag, split, split_size)}")


@dataclass(frozen=True)
class Comparison:
    """System B against system A on the examples both scored."""

    a: Side
    b: Side
    example_ids: list[str]
    diff: float
    ci_low: float
    ci_high: float

    @property
    def n(self) -> int:
        """Examples both sides scored: the pairs the difference is over."""
        return len(self.example_ids)

    @property
    def wins(self) -> int:
        """Examples B scored higher on."""
        return len(self.differing()[0])

    @property
    def losses(self) -> int:
        """Examples B scored lower on."""
        return len(self.differing()[1])

    @property
    def ties(self) -> int:
        """Examples both scored the same."""
        return self.n - self.wins - self.losses

    def mean(self, side: Side) -> float:
        """A side's mean score over the paired examples only."""
        return sum(side.scores[i] for i in self.example_ids) / self.n if self.n else 0.0

    @property
    def split_size(self) -> int:
        """Examples the compared split holds (the smaller side's count where both are known; 0: not known)."""
        return min((s.split_size for s in (self.a, self.b) if s.split_size), default=0)

    @property
    def outcome(self) -> str:
        """``better`` / ``worse`` (B against A: the paired 95% interval lies above / below 0), ``no_difference``
        (it contains 0), or ``too_few`` (fewer than :data:`MIN_VERDICT_EXAMPLES` paired examples)."""
        return outcome(self.n, self.ci_low, self.ci_high)

    @property
    def verdict(self) -> str:
        """One sentence a reader can act on."""
        kind = self.outcome
        if kind == "too_few":
            return too_few_words(self.n, "--limit", self.a.split, self.split_size)
        if kind == "better":
            return f"{self.b.name} is better than {self.a.name}: the 95% interval lies above 0 ({self.n} examples)"
        if kind == "worse":
            return f"{self.b.name} is worse than {self.a.name}: the 95% interval lies below 0 ({self.n} examples)"
        return (f"no significant difference on {self.n} examples: the 95% interval contains 0 "
                "(more examples would narrow it)")

    def versus_seeds(self) -> str:
        """Deprecated: :func:`versus_seeds_sentence` (a search's verdict is ``SearchResult.verdict.sentence``)."""
        warnings.warn("Comparison.versus_seeds() is deprecated: a search's verdict is SearchResult.verdict.sentence",
                      DeprecationWarning, stacklevel=2)
        return versus_seeds_sentence(self)

    def differing(self) -> tuple[list[str], list[str]]:
        """The example ids B won on and those it lost on (the rest are ties): the ones worth reading."""
        won = [i for i in self.example_ids if self.b.scores[i] > self.a.scores[i]]
        lost = [i for i in self.example_ids if self.b.scores[i] < self.a.scores[i]]
        return won, lost

    def to_dict(self) -> dict[str, Any]:
        """The comparison as ``masforge compare -o`` writes it, with every pair of scores."""
        def side(s: Side) -> dict[str, Any]:
            return {"name": s.name, "genome_id": s.genome_id, "lm_key": s.lm_key, "score": self.mean(s),
                    "dollars": s.dollars, "tokens": s.tokens, "llm_calls": s.llm_calls}

        return {"task": self.a.task, "split": self.a.split, "n": self.n, "a": side(self.a), "b": side(self.b),
                "diff": self.diff, "ci_low": self.ci_low, "ci_high": self.ci_high, "wins": self.wins,
                "losses": self.losses, "ties": self.ties, "outcome": self.outcome, "verdict": self.verdict,
                "per_example": [{"example_id": i, "a": self.a.scores[i], "b": self.b.scores[i]}
                                for i in self.example_ids]}


def versus_seeds_sentence(comparison: Comparison) -> str:
    """B (the best new system of a search) against A (its best seed), as the search states its result."""
    return {"better": "better than the seeds", "worse": "worse than the seeds",
            "no_difference": "no better than the seeds",
            "too_few": too_few_words(comparison.n, "--test-limit", comparison.a.split,
                                     comparison.split_size)}[comparison.outcome]


def compare(a: Side | EvalReport | Mapping[str, Any], b: Side | EvalReport | Mapping[str, Any]) -> Comparison:
    """B against A, paired example by example over the examples both scored (in A's order)."""
    sa = a if isinstance(a, Side) else Side.of(a)
    sb = b if isinstance(b, Side) else Side.of(b)
    if (sa.task, sa.split) != (sb.task, sb.split):
        raise TaskError(f"the reports are on different data ({sa.task}/{sa.split} and {sb.task}/{sb.split}): "
                        "evaluate both systems on the same task and split")
    ids = [i for i in sa.scores if i in sb.scores]
    if not ids:
        raise TaskError(f"the reports share no scored example on {sa.task}/{sa.split}: evaluate both systems "
                        "on the same examples (same --limit)")
    diff, lo, hi = paired_difference([sb.scores[i] for i in ids], [sa.scores[i] for i in ids])
    return Comparison(a=sa, b=sb, example_ids=ids, diff=diff, ci_low=lo, ci_high=hi)
