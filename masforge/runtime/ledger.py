"""Accounting of LM use: one :class:`Completion` with its tokens and cost, the run's :class:`Budget` and the
thread-safe :class:`Ledger` of totals it is checked against before every LM call."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import Any

from masforge.errors import BudgetExceeded


@dataclass
class Completion:
    """One LM answer with its accounting."""

    text: str
    prompt_tokens: int
    completion_tokens: int
    cost: float
    latency_s: float
    cached: bool
    model: str


@dataclass
class Budget:
    """Limits for a run; None means unlimited. Checked before every LM call."""

    max_dollars: float | None = None
    max_tokens: int | None = None
    max_calls: int | None = None
    max_seconds: float | None = None


class Ledger:
    """Thread-safe totals of LM use and the budget they are checked against."""

    def __init__(self, budget: Budget | None = None, spent_dollars: float = 0.0, spent_tokens: int = 0,
                 spent_calls: int = 0) -> None:
        self.budget = budget or Budget()
        self._lock = threading.Lock()
        self.calls = spent_calls
        self.cache_hits = 0
        self.prompt_tokens = spent_tokens
        self.completion_tokens = 0
        self.dollars = spent_dollars
        self.errors = 0
        self.started = time.monotonic()

    @property
    def tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    @property
    def elapsed_s(self) -> float:
        return time.monotonic() - self.started

    def exceeded(self) -> str | None:
        """Name of the first limit reached, or None."""
        b = self.budget
        if b.max_dollars is not None and self.dollars >= b.max_dollars:
            return "dollars"
        if b.max_tokens is not None and self.tokens >= b.max_tokens:
            return "tokens"
        if b.max_calls is not None and self.calls >= b.max_calls:
            return "llm_calls"
        if b.max_seconds is not None and self.elapsed_s >= b.max_seconds:
            return "wall_time"
        return None

    def lift_limits(self) -> None:
        """Drop every limit, keeping the totals (for work that must finish once a search budget is spent)."""
        self.budget = Budget()

    def check(self) -> None:
        """Raise :class:`BudgetExceeded` naming the limit if one is reached."""
        limit = self.exceeded()
        if limit is None:
            return
        b = self.budget
        shown = {"dollars": f"${self.dollars:.4f} of ${b.max_dollars}", "tokens": f"{self.tokens} of {b.max_tokens}",
                 "llm_calls": f"{self.calls} of {b.max_calls}",
                 "wall_time": f"{self.elapsed_s:.0f}s of {b.max_seconds}s"}[limit]
        raise BudgetExceeded(limit, f"budget reached: {limit} ({shown}); raise the limit or resume the run")

    def add(self, c: Completion) -> None:
        with self._lock:
            if c.cached:
                self.cache_hits += 1
                return
            self.calls += 1
            self.prompt_tokens += c.prompt_tokens
            self.completion_tokens += c.completion_tokens
            self.dollars += c.cost

    def add_error(self) -> None:
        with self._lock:
            self.errors += 1

    def snapshot(self) -> dict[str, Any]:
        with self._lock:
            return {"llm_calls": self.calls, "cache_hits": self.cache_hits, "prompt_tokens": self.prompt_tokens,
                    "completion_tokens": self.completion_tokens, "tokens": self.tokens, "dollars": self.dollars,
                    "errors": self.errors, "elapsed_s": self.elapsed_s}
