"""Accounting of LM use: one :class:`Completion` with its tokens and cost, and the thread-safe :class:`Ledger` of
totals that the run's :class:`~masforge.lm.budget.Budget` is checked against before every request.

Every request sent to a provider is counted, whether it was answered, failed or timed out: a request slot is
*reserved* (budget checked, call counted) before anything is sent, then *settled* with the answer's tokens and
cost or *failed* with the kind of failure. So a call limit is never passed, and a dollar or token limit is passed
by at most what the requests in flight at that moment cost (``overshoot``). A priced request reserves its worst
cost, and an answer billed past it stops the run (an *overrun*, see ``LMClient._overrun``), so what a provider
bills cannot carry the spend past the dollar limit plus the reservations in flight.

With a ``journal`` file the ledger survives a kill: one line per reserved, settled or failed request, written
before the request goes out and as soon as it ends, so a resumed run continues the same totals
(:meth:`Ledger.resume`).
"""

from __future__ import annotations

import json
import threading
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from masforge.errors import BudgetExceeded, RunHalted, stop_error
from masforge.lm.budget import Budget, MaxDollars, Usage


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


class Ledger:
    """Thread-safe totals of LM use and the budget they are checked against."""

    def __init__(self, budget: Budget | None = None, *, journal: str | Path | None = None) -> None:
        self.budget = budget or Budget()
        self._lock = threading.Lock()
        self.calls = 0
        """Requests sent to a provider: answered, failed and timed out (retries included)."""
        self.cache_hits = 0
        self.prompt_tokens = 0
        self.completion_tokens = 0
        self.dollars = 0.0
        self.errors = 0
        """Requests that got no usable answer (each retry counts)."""
        self.failures: Counter[str] = Counter()
        """Failed requests by kind (rate_limit, server_error, timeout, connection, bad_answer, client_error)."""
        self.notes: Counter[str] = Counter()
        """Answers delivered but odd: ``empty`` (no text), ``overlong`` (longer than max_tokens allows: cut)."""
        self.abandoned = 0
        """Requests in flight when the run was stopped (Ctrl-C): sent, so counted as calls, but no failure."""
        self.overruns = 0
        """Answers billed past what was reserved for them (each stops the run)."""
        self.uncounted_dollars = 0.0
        """What those bills asked beyond what was counted (only the reservation is, where an answer shows the
        provider ignored the request's limits)."""
        self.max_attempt = 0
        """The most requests one LM call has needed (1 + its retries)."""
        self.in_flight = 0
        self.max_in_flight = 0
        self.reserved_dollars = 0.0
        """What the requests in flight could cost at most (their worst-case estimates, see :meth:`reserve`)."""
        self.halted: tuple[str, str] | None = None
        """(limit, message) of a :class:`RunHalted` that stopped the run: every later request raises it again."""
        self.prior_s = 0.0
        """Running time of earlier sessions of a resumed run."""
        self.started = time.monotonic()
        self._journal: IO[str] | None = None
        self.journal_path = Path(journal) if journal is not None else None
        """Where the journal goes (public: a shared ledger on a cluster writes it from the hub)."""

    # ------------------------------------------------------------------ totals

    @property
    def tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    @property
    def elapsed_s(self) -> float:
        return self.prior_s + time.monotonic() - self.started

    def usage(self) -> Usage:
        """What the budget's spend conditions look at."""
        return Usage(dollars=self.dollars, tokens=self.tokens, calls=self.calls, seconds=self.elapsed_s)

    def exceeded(self) -> str | None:
        """Name of the first spend limit reached (or of the halt that stopped the run), or None."""
        if self.halted is not None:
            return self.halted[0]
        stop = self.budget.stop(self.usage(), spend_only=True)
        return stop.limit if stop else None

    def check(self) -> None:
        """Raise :class:`BudgetExceeded` naming the limit (and its flag) if one is reached."""
        if self.halted is not None:
            raise stop_error(*self.halted)
        stop = self.budget.stop(self.usage(), spend_only=True)
        if stop is not None:
            raise BudgetExceeded(stop.limit, stop.message)

    def halt(self, exc: RunHalted) -> None:
        """The run cannot go on (a provider refuses it, the sandbox is missing): every later request raises
        ``exc`` again, wherever it comes from (the first halt is kept)."""
        with self._lock:
            if self.halted is None:
                self.halted = (exc.limit, str(exc))

    def overshoot(self) -> dict[str, float]:
        """How far spending went past each spend limit (0 where not passed or not set)."""
        usage = self.usage()
        out: dict[str, float] = {}
        for limit, value in (("dollars", usage.dollars), ("tokens", usage.tokens), ("llm_calls", usage.calls)):
            cap = self.budget.get(limit)
            if cap is not None:
                out[limit] = max(0.0, value - cap)
        return out

    # ------------------------------------------------------------------ requests

    def reserve(self, attempt: int = 1, worst_dollars: float = 0.0, worst_detail: str = "") -> None:
        """Check the budget and count one request about to be sent, the ``attempt``-th for its LM call (raises
        :class:`BudgetExceeded`). ``worst_dollars`` is the most the request can cost (its prompt and max_tokens at
        the model's price): it is refused if that, with what the requests in flight could cost, would pass the
        dollar limit, so the limit holds whatever the provider answers (``worst_detail`` says how it was priced).
        Pass the same ``worst_dollars`` to :meth:`settle`, :meth:`fail` or :meth:`release`."""
        with self._lock:
            if self.halted is not None:
                raise stop_error(*self.halted)
            stop = self.budget.stop(self.usage(), spend_only=True)
            if stop is not None:
                raise BudgetExceeded(stop.limit, stop.message)
            cap = self.budget.max_dollars
            if cap is not None and worst_dollars > 0 and self.dollars + self.reserved_dollars + worst_dollars > cap:
                left = max(0.0, cap - self.dollars - self.reserved_dollars)
                raise BudgetExceeded(MaxDollars.limit, (
                    f"budget reached: {MaxDollars.flag} {cap:g}: the next request could cost up to ${worst_dollars:.4f}"
                    f"{f' ({worst_detail})' if worst_detail else ''}, more than the ${left:.4f} left (spent "
                    f"${self.dollars:.4f}, ${self.reserved_dollars:.4f} in flight); raise it to go on (a stopped "
                    "search continues with --resume)"))
            self.reserved_dollars += worst_dollars
            self.max_attempt = max(self.max_attempt, attempt)
            self.calls += 1
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
            self._write({"r": 1})

    def settle(self, c: Completion, note: str | None = None, worst_dollars: float = 0.0,
               uncounted: float | None = None) -> None:
        """A reserved request answered: add its tokens and cost. ``uncounted``: the answer's bill overran its
        reservation, and this much of it is not counted (0: all of it is)."""
        with self._lock:
            self.in_flight -= 1
            self.reserved_dollars = max(0.0, self.reserved_dollars - worst_dollars)
            self.prompt_tokens += c.prompt_tokens
            self.completion_tokens += c.completion_tokens
            self.dollars += c.cost
            row: dict[str, Any] = {"pt": c.prompt_tokens, "ct": c.completion_tokens, "d": c.cost}
            if note:
                self.notes[note] += 1
                row["n"] = note
            if uncounted is not None:
                self.overruns += 1
                self.uncounted_dollars += uncounted
                row["o"] = uncounted
            self._write(row)

    def release(self, worst_dollars: float = 0.0) -> None:
        """Undo a reservation whose request was never sent."""
        with self._lock:
            self.in_flight -= 1
            self.reserved_dollars = max(0.0, self.reserved_dollars - worst_dollars)
            self.calls -= 1
            self._write({"u": 1})

    def fail(self, kind: str, worst_dollars: float = 0.0) -> None:
        """A reserved request that got no usable answer (``kind`` as in :attr:`failures`)."""
        with self._lock:
            self.in_flight -= 1
            self.reserved_dollars = max(0.0, self.reserved_dollars - worst_dollars)
            self.errors += 1
            self.failures[kind] += 1
            self._write({"f": kind})

    def abandon(self, worst_dollars: float = 0.0) -> None:
        """A reserved request given up because the run was stopped: it was sent (it counts as a call, and may
        cost), but it did not fail."""
        with self._lock:
            self.in_flight -= 1
            self.reserved_dollars = max(0.0, self.reserved_dollars - worst_dollars)
            self.abandoned += 1
            self._write({"a": 1})

    def add(self, c: Completion) -> None:
        """Count a completion that was not reserved: a cache hit, or an answer from elsewhere."""
        with self._lock:
            if c.cached:
                self.cache_hits += 1
                return
            self.calls += 1
            self.prompt_tokens += c.prompt_tokens
            self.completion_tokens += c.completion_tokens
            self.dollars += c.cost
            self._write({"r": 1})
            self._write({"pt": c.prompt_tokens, "ct": c.completion_tokens, "d": c.cost})

    def add_error(self) -> None:
        with self._lock:
            self.errors += 1

    def snapshot(self) -> dict[str, Any]:
        with self._lock:
            snap = {"llm_calls": self.calls, "cache_hits": self.cache_hits, "prompt_tokens": self.prompt_tokens,
                    "completion_tokens": self.completion_tokens, "tokens": self.tokens, "dollars": self.dollars,
                    "errors": self.errors, "failures": dict(self.failures), "notes": dict(self.notes),
                    "abandoned": self.abandoned,
                    "max_in_flight": self.max_in_flight, "max_attempt": self.max_attempt,
                    "elapsed_s": self.elapsed_s}
            if self.overruns:  # only then: summaries of ordinary runs keep their shape
                snap["overruns"] = self.overruns
                snap["uncounted_dollars"] = self.uncounted_dollars
            return snap

    # ------------------------------------------------------------------ journal

    def _write(self, row: dict[str, Any]) -> None:
        # Called under the lock. One short line per event, flushed at once: a SIGKILL loses nothing written.
        if self.journal_path is None:
            return
        if self._journal is None:
            self.journal_path.parent.mkdir(parents=True, exist_ok=True)
            self._journal = self.journal_path.open("a", encoding="utf-8")
        row["t"] = round(self.elapsed_s, 3)
        self._journal.write(json.dumps(row, separators=(",", ":")) + "\n")
        self._journal.flush()

    def mark(self) -> None:
        """Record the running time (so a resumed run's clock starts where this one was)."""
        with self._lock:
            self._write({})

    def resume(self) -> None:
        """Load the totals of the journal's earlier sessions (a request reserved but never settled counts as
        sent: it may have reached the provider)."""
        path = self.journal_path
        if path is None or not path.is_file():
            return
        pending = 0
        with path.open(encoding="utf-8") as fh:
            for line in fh:
                try:
                    row = json.loads(line)
                except json.JSONDecodeError:
                    continue  # a line cut by a kill: its request is counted by its reservation
                if not isinstance(row, dict):
                    continue
                self.prior_s = max(self.prior_s, float(row.get("t") or 0.0))
                if row.get("r"):
                    self.calls += 1
                    pending += 1
                elif row.get("u"):
                    self.calls -= 1
                    pending -= 1
                elif row.get("a"):
                    pending -= 1
                    self.abandoned += 1
                elif "f" in row:
                    pending -= 1
                    self.errors += 1
                    self.failures[str(row["f"])] += 1
                elif "pt" in row:
                    pending -= 1
                    self.prompt_tokens += int(row.get("pt") or 0)
                    self.completion_tokens += int(row.get("ct") or 0)
                    self.dollars += float(row.get("d") or 0.0)
                    if row.get("n"):
                        self.notes[str(row["n"])] += 1
                    if "o" in row:
                        self.overruns += 1
                        self.uncounted_dollars += float(row.get("o") or 0.0)
        self.failures["unsettled"] += max(0, pending)
        if not self.failures["unsettled"]:
            del self.failures["unsettled"]
        self.started = time.monotonic()

    def close(self) -> None:
        with self._lock:
            if self._journal is not None:
                self._journal.close()
                self._journal = None
