"""A search's budget: the LM's limits on spending (:mod:`masforge.lm.budget`) plus the search's own limits on
its progress (candidates, patience), each declared once here, as the spending ones are there. The command line's
options, the run configuration's ``budget:`` keys, the plan printed before a search and the stop messages all read
these declarations (:data:`BUDGET_LIMITS`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from pydantic import Field

from masforge.lm.budget import SPEND_LIMITS, Budget, BudgetLimit, Limit, Usage


@dataclass(frozen=True)
class SearchUsage(Usage):
    """What a search has spent and done so far."""

    candidates: int = 0
    since_best: int = 0
    """Candidates evaluated since the best one so far."""


# The search's limits on its progress, checked between candidates after the spending ones.
SEARCH_LIMITS: dict[str, BudgetLimit] = {limit.field: limit for limit in (
    BudgetLimit("max_candidates", "max_candidates", "candidates", "candidates", "--max-candidates",
                "Candidates to evaluate.", "all candidates evaluated ({flags})", short="-n"),
    BudgetLimit("patience", "patience", "since_best", "candidates without a new best", "--patience",
                "Stop after this many candidates without a new best.", "no new best for {flags} candidates"),
)}

BUDGET_LIMITS: dict[str, BudgetLimit] = {**SPEND_LIMITS, **SEARCH_LIMITS}
"""Every limit of a search, by its field, in the order a budget checks them (the first one reached names the
stop)."""


@dataclass(frozen=True)
class MaxCandidates(Limit):
    """Stop when ``value`` candidates were evaluated (or restored) in this run."""

    declared = SEARCH_LIMITS["max_candidates"]


@dataclass(frozen=True)
class Patience(Limit):
    """Stop after ``value`` candidates in a row without a new best."""

    declared = SEARCH_LIMITS["patience"]


class SearchBudget(Budget):
    """The limits of a search: spending, candidates, patience; and the share of the spending kept for the
    held-out re-scoring of the finalists."""

    LIMITS: ClassVar[tuple[type[Limit], ...]] = (*Budget.LIMITS, MaxCandidates, Patience)

    max_candidates: int | None = Field(default=None, ge=1)
    patience: int | None = Field(default=None, ge=1)
    test_share: float = Field(default=0.2, ge=0, lt=1)
    """Share of each spend limit (dollars, tokens, calls, time) kept for re-scoring the finalists on the
    held-out split: the search stops at the rest, the re-scoring may use what is left of the whole."""

    def for_search(self) -> Budget:
        """The part of this budget the search may spend (the rest is kept for the held-out re-scoring)."""
        return self.scaled(1.0 - self.test_share) if self.test_share else self


def budget_data(budget: dict[str, Any] | int) -> dict[str, Any]:
    """The ``budget:`` section of a run configuration from what the Python API takes: limits by field, or a
    number meaning the candidate limit."""
    return {MaxCandidates.field: budget} if isinstance(budget, int) else budget
