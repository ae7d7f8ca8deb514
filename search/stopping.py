"""When a search stops: its own limits (candidates, patience), a provider or sandbox that refuses the run, and the
spending limits the LM ledger keeps; and the error that unwinds a strategy when it must stop."""

from __future__ import annotations

from masforge.errors import BudgetExceeded
from masforge.lm.budget import Stop
from masforge.lm.ledger import Ledger
from masforge.search.budget import SearchBudget, SearchUsage


def limit_reached(budget: SearchBudget, usage: SearchUsage, ledger: Ledger, *, replaying: bool) -> Stop | None:
    """Why the search must stop now (None: it may go on). A replay re-walks points the stopped run had passed: its
    spend then was below the limits even if the ledger, which continues from the stopped run's total, is not."""
    stop = budget.stop(usage, progress_only=True)
    if stop is None and ledger.halted is not None:  # the provider or the sandbox refuses the run
        stop = Stop(ledger.halted[0], "--lm", ledger.halted[1])
    if stop is None and not replaying:
        stop = ledger.budget.stop(ledger.usage(), spend_only=True)
    return stop


def unwinding(stop: Stop | None) -> BudgetExceeded:
    """The error that unwinds a strategy that must stop: for ``stop``, or (None) because the strategy's share of the
    candidates in a pipeline is used up."""
    if stop is None:
        return BudgetExceeded("stage_done", "search stopped: stage_done")
    return BudgetExceeded(stop.limit, stop.message)
