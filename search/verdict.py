"""What a search concludes: the finalists' held-out scores, and its best new system against its best seed on the same
held-out examples.

A search always has a conclusion, even when it cannot compare anything: it proposed nothing new (a budget no
larger than the seeds), or the two were not both re-scored on held-out data. :class:`SearchVerdict` holds that
state beside the paired comparison, so code that reads a verdict never meets None.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from typing import Any

from masforge.errors import MasforgeError
from masforge.evaluators.compare import Comparison, Side, compare, versus_seeds_sentence


@dataclass
class TestScore:
    """A finalist re-scored on the held-out split (never seen by the search)."""

    genome_id: str
    name: str
    validation: float
    test: float
    ci: tuple[float, float]
    dollars_per_example: float
    is_seed: bool
    n: int = 0
    """Held-out examples scored."""
    unscored: int = 0
    """Held-out examples left out because the provider or the sandbox failed."""
    stopped: str | None = None
    """The budget limit that cut this re-scoring short (the score covers the examples finished)."""
    example_scores: dict[str, float] = field(default_factory=dict)
    """Held-out score of each example by id: found and seed are compared on the same examples, paired (empty for
    a result stored by a masforge that did not keep them)."""

    @property
    def gap(self) -> float:
        """Selection score minus held-out score: how much of the selection score was luck of the selection set
        (overfitting, when it is large and positive)."""
        return self.validation - self.test


OUTCOMES = ("better", "worse", "no_difference", "too_few", "nothing_new", "not_rescored", "unpaired")
"""Every state of a verdict: the first four come from the paired comparison (see
:meth:`masforge.evaluators.compare.Comparison.outcome`); ``nothing_new``: the search proposed no system besides
the seeds; ``not_rescored``: the best new system or the best seed has no held-out score (the budget ran out, or
the test split is empty); ``unpaired``: both have one, but on no common example."""


@dataclass(frozen=True)
class SearchVerdict:
    """The best new system against the best seed on the same held-out examples, paired, or why there is no such
    comparison. ``str(verdict)`` is its one-line sentence."""

    outcome: str
    """One of :data:`OUTCOMES`."""
    sentence: str
    """What the outcome means for the reader, in one line that names the next step."""
    found: str | None = None
    """Name of the best new system (the best candidate the search made, by selection score)."""
    seed: str | None = None
    """Name of the best seed (by selection score)."""
    comparison: Comparison | None = None
    """The paired comparison (A: the best seed, B: the best new system); None without one."""

    def __str__(self) -> str:
        return self.sentence

    @property
    def compared(self) -> bool:
        """Whether the two were compared on common held-out examples (even too few of them for a verdict)."""
        return self.comparison is not None

    @property
    def n(self) -> int:
        """Held-out examples both scored (0 without a comparison)."""
        return self.comparison.n if self.comparison else 0

    @property
    def diff(self) -> float:
        """Mean of (new - seed) over those examples (0.0 without a comparison)."""
        return self.comparison.diff if self.comparison else 0.0

    @property
    def ci_low(self) -> float:
        """Lower end of the paired 95% interval of :attr:`diff` (0.0 without a comparison)."""
        return self.comparison.ci_low if self.comparison else 0.0

    @property
    def ci_high(self) -> float:
        """Upper end of the paired 95% interval of :attr:`diff` (0.0 without a comparison)."""
        return self.comparison.ci_high if self.comparison else 0.0

    @property
    def found_score(self) -> float | None:
        """The best new system's mean held-out score over the common examples (None without a comparison)."""
        return self.comparison.mean(self.comparison.b) if self.comparison else None

    @property
    def seed_score(self) -> float | None:
        """The best seed's mean held-out score over the common examples (None without a comparison)."""
        return self.comparison.mean(self.comparison.a) if self.comparison else None

    def versus_seeds(self) -> str:
        """Deprecated: the sentence (:attr:`sentence`)."""
        warnings.warn("SearchVerdict.versus_seeds() is deprecated: read .sentence", DeprecationWarning, stacklevel=2)
        return self.sentence

    def to_dict(self) -> dict[str, Any]:
        """The verdict as a run's ``summary.json`` keeps it (what the report's first cards show)."""
        c = self.comparison
        if c is None:
            return {"outcome": self.outcome, "verdict": self.sentence, "found": self.found, "seed": self.seed}
        return {"found": c.b.name, "found_id": c.b.genome_id, "seed": c.a.name, "seed_id": c.a.genome_id,
                "n": c.n, "found_score": c.mean(c.b), "seed_score": c.mean(c.a), "diff": c.diff,
                "ci_low": c.ci_low, "ci_high": c.ci_high, "wins": c.wins, "losses": c.losses,
                "outcome": self.outcome, "verdict": self.sentence}


def search_verdict(found: TestScore | None, seed: TestScore | None, *, new_systems: int, task: str,
                   split: str, split_size: int = 0) -> SearchVerdict:
    """The verdict of a search whose best new system and best seed got the held-out scores ``found`` and ``seed``
    (None where not re-scored); ``new_systems`` is how many systems besides the seeds it evaluated, ``split_size``
    how many examples the held-out split holds (0: not known)."""
    if new_systems == 0:
        return SearchVerdict("nothing_new", "nothing new was proposed: every candidate was a seed (raise the "
                             "budget's max_candidates, -n, above the number of seeds)",
                             seed=seed.name if seed else None)
    if found is None or seed is None or not found.example_scores or not seed.example_scores:
        missing = "the best new system" if found is None or not found.example_scores else "the best seed"
        return SearchVerdict("not_rescored", f"no verdict: {missing} has no held-out score (the budget ran out "
                             "before the re-scoring, or the test split is empty)",
                             found=found.name if found else None, seed=seed.name if seed else None)
    try:
        comparison = compare(held_out_side(seed, task, split, split_size),
                             held_out_side(found, task, split, split_size))
    except MasforgeError:  # no held-out example scored by both
        return SearchVerdict("unpaired", "no verdict: the best new system and the best seed share no held-out "
                             "example", found=found.name, seed=seed.name)
    return SearchVerdict(comparison.outcome, versus_seeds_sentence(comparison), found=found.name, seed=seed.name,
                         comparison=comparison)


def held_out_side(t: TestScore, task: str, split: str, split_size: int = 0) -> Side:
    """One system's held-out scores as a side of a paired comparison (``split_size``: examples the split holds)."""
    return Side(name=t.name, genome_id=t.genome_id, task=task, split=split, lm_key="", scores=t.example_scores,
                dollars=t.dollars_per_example * t.n, tokens=0, llm_calls=0, planned=t.n, split_size=split_size)
