"""Live terminal view of a search: strategy, generation, candidates, best and median score, the
quality-vs-cost front, dollars/tokens/calls against budget, elapsed time and ETA."""

from __future__ import annotations

import statistics
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import singledispatch
from typing import Any

from rich.console import Console, Group
from rich.live import Live
from rich.table import Table
from rich.text import Text

from masforge.redact import redact
from masforge.search import events as ev
from masforge.search.context import SearchContext
from masforge.search.events import Event
from masforge.terminal import SafeConsole
from masforge.text import shorten, shorten_name


def _fmt_limit(value: float, limit: float | None, fmt: str) -> str:
    return f"{value:{fmt}}" + (f" / {limit:{fmt}}" if limit is not None else "")


@singledispatch
def describe_event(event: Event) -> str | None:
    """A search event as one readable line for the live view (None: not worth showing)."""
    return None


@describe_event.register
def _(event: ev.Admitted) -> str:
    c = event.candidate
    tag = "reused" if event.reused else c.operator
    star = " *best*" if event.improved else ""
    dropped = f", dropped by the race after {c.n} examples" if c.pruned and not event.reused else ""
    calls = "" if event.reused else f", {c.llm_calls} new + {c.cache_hits} cached LM calls"
    return f"{c.short_id} {shorten_name(c.genome.name, 40)} score {c.score:.3f} ({tag}{calls}{dropped}){star}"


@describe_event.register
def _(event: ev.NewIncumbent) -> str:
    return (f"new incumbent {shorten_name(event.candidate.genome.name, 40)}: {event.diff:+.3f} "
            f"[{event.low:+.3f}, {event.high:+.3f}] over {event.n} paired examples")


@describe_event.register
def _(event: ev.Rejected) -> str:
    return f"rejected {shorten(event.name, 30)}: {shorten(event.reason, 90)}"


@describe_event.register
def _(event: ev.Stage) -> str:
    where = f" (stage {event.index} of {event.of})" if event.of > 1 else ""
    return f"strategy {event.strategy}{where} starts"


@describe_event.register
def _(event: ev.HeldOutTest) -> str:
    return f"re-scoring {shorten_name(event.name, 40)} on the held-out test split"


@describe_event.register
def _(event: ev.Stalled) -> str:
    return f"{event.strategy} stopped: {event.steps} steps in a row found nothing new"


@describe_event.register
def _(event: ev.Note) -> str:
    return f"{event.strategy}: {shorten(event.message, 110)}"


@describe_event.register
def _(event: ev.Waiting) -> str:
    who = event.holder
    return (f"waiting: run {who.get('run', '?')} (pid {who.get('pid', '?')}) is evaluating "
            f"{shorten(event.name, 40)}")


@describe_event.register
def _(event: ev.Incomplete) -> str:
    return (f"unscored {shorten(event.name, 30)}: {event.unscored} of {event.attempted} "
            f"examples ({shorten(str(event.error), 80)}); evaluated again later")


HEARTBEAT_S = 60.0
"""Without a terminal (a log file), a line at least this often while a long evaluation runs."""


def clock(seconds: float) -> str:
    """``40s``, ``7 min``, ``1 h 20 min``: how long is left, as a progress line says it."""
    if seconds < 90:
        return f"{max(seconds, 0):.0f}s"
    minutes = round(seconds / 60)
    return f"{minutes} min" if minutes < 60 else f"{minutes // 60} h {minutes % 60} min"


@dataclass
class Underway:
    """The evaluation under way (a candidate's, or a finalist's on the held-out split) and how far it got."""

    doing: str
    """What is done, in words: ``evaluating io``, ``re-scoring io on the held-out test split``."""
    planned: int
    calls: float
    """LM calls it is expected to ask (0: not said)."""
    seconds: float
    """About how long it was expected to take (0: not said)."""
    answered_before: int
    """LM answers (new and cached) the run had when it started: the ones since are its own."""
    started: float = field(default_factory=time.monotonic)
    done: int = 0
    done_at: float = 0.0
    """When its last example ended."""
    answers: int = 0
    """Its own LM answers seen so far, and when the last was seen."""
    answered_at: float = 0.0

    def finished(self, done: int, planned: int, now: float) -> None:
        """Note that ``done`` of ``planned`` examples have ended, the last at ``now``."""
        self.done, self.planned, self.done_at = done, planned, now

    def see(self, answered: int, now: float) -> None:
        """Note the run's LM answers (new and cached) at ``now``."""
        own = answered - self.answered_before
        if own > self.answers:
            self.answers, self.answered_at = own, now

    def eta(self, now: float) -> float | None:
        """Seconds left, counting down from the best evidence so far: the examples ended; before the first, its LM
        answers against the calls it is expected to ask; before the first answer, the estimate. None: past the
        estimate with no answer yet."""
        if self.done:
            per = (self.done_at - self.started) / self.done
            return max(per * (self.planned - self.done) - (now - self.done_at), 0.0)
        if self.answers and self.calls > self.answers:
            per = (self.answered_at - self.started) / self.answers
            return max(per * (self.calls - self.answers) - (now - self.answered_at), 0.0)
        left = self.seconds - (now - self.started)
        return left if self.seconds and left > 0 else None

    def line(self, now: float) -> str:
        """``evaluating io: 3/16 examples, ETA 4 min``."""
        eta = self.eta(now)
        if eta is not None:
            when = f"ETA {clock(eta)}"
        elif self.seconds:
            over = now - self.started - self.seconds
            when = f"no LM answer yet, {clock(over)} over the {clock(self.seconds)} estimated"
        else:
            when = "ETA after its first LM answer"
        return f"{self.doing}: {self.done}/{self.planned} examples, {when}"


class Heartbeat:
    """Calls ``beat`` on a daemon thread every few seconds (at most every :data:`HEARTBEAT_S`) between
    :meth:`start` and :meth:`stop`; ``beat`` decides whether a line is due. For progress written to a log."""

    def __init__(self, beat: Callable[[], None], name: str) -> None:
        self._call = beat
        self._name = name
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def running(self) -> bool:
        return self._thread is not None

    def start(self) -> None:
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name=self._name, daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(5)
            self._thread = None

    def _run(self) -> None:
        while not self._stop.wait(min(HEARTBEAT_S, 5.0)):
            self._call()


class SearchProgress:
    """Event sink for :class:`SearchContext` that renders a live panel (or plain lines without a TTY, with a
    heartbeat line when nothing else was printed for :data:`HEARTBEAT_S`: a log shows the run is alive and what
    it is doing long before the first candidate is finished). Re-entrant: only the outermost ``with`` opens and
    closes the display, so the search and its held-out stage share one panel on a terminal."""

    def __init__(self, console: Console | None = None, enabled: bool = True) -> None:
        self.console = console or SafeConsole()  # the CLI passes its own (of the same kind)
        self.enabled = enabled
        self.ctx: SearchContext | None = None
        self.live: Live | None = None
        self.started = time.monotonic()
        self.last = ""
        self.working_on = ""
        self.underway: Underway | None = None
        """The evaluation under way, for the panel's and the log's progress line."""
        self._panel = Group(Text("starting search ..."))
        self._printed = time.monotonic()
        self._beat = Heartbeat(self._heartbeat, "masforge-progress")
        self._depth = 0

    def attach(self, ctx: SearchContext) -> None:
        self.ctx = ctx

    def __enter__(self) -> SearchProgress:
        self._depth += 1
        if self._depth > 1:
            return self
        if self.enabled and self.console.is_terminal:  # drawn anew at each refresh: elapsed time and ETA move
            self.live = Live(console=self.console, refresh_per_second=4, transient=False,
                             get_renderable=self._render)
            self.live.__enter__()
        elif self.enabled:
            self._beat.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._depth -= 1
        if self._depth > 0:
            return
        self._beat.stop()
        if self.live is not None:
            self.live.refresh()
            self.live.__exit__(None, None, None)
            self.live = None

    def _heartbeat(self) -> None:
        if time.monotonic() - self._printed < HEARTBEAT_S or self.ctx is None:
            return
        snap, waiting = self.ctx.client.ledger.snapshot(), self.ctx.client.ledger.in_flight
        answered = snap["llm_calls"] - waiting
        self._print(f"{time.monotonic() - self.started:.0f}s: {self._now()} ({self.ctx.evaluated} candidates done; "
                    f"{answered} LM calls answered, {waiting} waiting, +{snap['cache_hits']} cached)")

    def _answered(self) -> int:
        """LM answers of the run so far, new and cached (the ledger counts a call when it is sent)."""
        if self.ctx is None:
            return 0
        ledger = self.ctx.client.ledger
        snap = ledger.snapshot()
        return snap["llm_calls"] - ledger.in_flight + snap["cache_hits"]

    def _now(self) -> str:
        """The evaluation under way with its examples done and ETA (``working`` between evaluations)."""
        if self.underway is None:
            return "working"
        now = time.monotonic()
        self.underway.see(self._answered(), now)
        return self.underway.line(now)

    def _start(self, doing: str, planned: int, calls: float, seconds: float) -> None:
        self.underway = Underway(doing, planned, calls, seconds, self._answered())

    def __call__(self, event: Event) -> None:
        match event:
            case ev.Evaluating(name=name, planned=planned, calls=calls, seconds=seconds):
                self.working_on = name
                self._start(f"evaluating {shorten_name(name, 40)}", planned, calls, seconds)
            case ev.HeldOutTest(name=name, planned=planned, calls=calls, seconds=seconds):
                self.working_on = name
                self._start(f"re-scoring {shorten_name(name, 40)} on the held-out test split", planned, calls,
                            seconds)
            case ev.ExampleDone(done=done, planned=planned) if self.underway is not None:
                self.underway.finished(done, planned, time.monotonic())
                return  # shown by the panel's next refresh, or the log's next heartbeat
            case ev.Notice(text=text, warning=warning):  # a run-level line (budget plan, warning, resume): as it is
                self._print(f"[yellow]{text}[/yellow]" if warning else text)
                return
            case ev.Diverged():
                self._print(f"[yellow]resume took another path than the stopped run at candidate {event.seq} "
                            f"({event.expected} before, {event.got} now): a non-deterministic LM or changed "
                            "options; the run goes on from here[/yellow]")
                return
        text = describe_event(event)
        if text is None:
            return
        self.last = redact(text)  # rejection reasons quote errors; the terminal output is often a log file
        if self.live is not None:
            self.live.refresh()
        elif self.enabled and self.ctx is not None:
            self._print(self._line())

    def _print(self, text: str) -> None:
        if self.enabled:
            self._printed = time.monotonic()
            self.console.print(text, highlight=False)

    def _stats(self) -> dict[str, Any]:
        ctx = self.ctx
        if ctx is None:
            return {}
        snap = ctx.client.ledger.snapshot()
        scores = [c.score for c in ctx.population]
        best = ctx.best(1)
        elapsed = time.monotonic() - self.started
        cap = ctx.budget.max_candidates
        eta = None
        if cap and ctx.evaluated:
            eta = elapsed / ctx.evaluated * max(cap - ctx.evaluated, 0)
        return {"snap": snap, "best": best[0] if best else None, "median": statistics.median(scores) if scores else 0,
                "elapsed": elapsed, "eta": eta, "cap": cap, "front": len(ctx.front())}

    def _line(self) -> str:
        s = self._stats()
        ctx = self.ctx
        assert ctx is not None
        best = f"{s['best'].score:.3f}" if s["best"] else "-"
        return (f"[{ctx.strategy} g{ctx.generation}] {ctx.evaluated}/{s['cap'] or '∞'} cand, best {best}, "
                f"${s['snap']['dollars']:.4f}, {s['snap']['tokens']} tok | {self.last}")

    def _render(self) -> Group:
        """The panel; drawn by the display's refresh thread while the search changes what it reads, so a draw
        that meets a list changing under it keeps the last panel."""
        try:
            self._panel = self._draw()
        except RuntimeError:
            pass
        return self._panel

    def _draw(self) -> Group:
        ctx = self.ctx
        if ctx is None:
            return Group(Text("starting search ..."))
        s = self._stats()
        b = ctx.client.ledger.budget
        snap = s["snap"]
        table = Table.grid(padding=(0, 2))
        table.add_column(style="bold")
        table.add_column()
        best = s["best"]
        table.add_row("strategy", f"{ctx.strategy}  (generation {ctx.generation})")
        table.add_row("candidates", f"{ctx.evaluated}" + (f" / {s['cap']}" if s["cap"] else "")
                      + f"   rejected {ctx.rejected}, duplicates {ctx.duplicates}, reused {ctx.reused}")
        table.add_row("best", f"{best.score:.3f} {best.genome.name} ({best.short_id})" if best else "-")
        table.add_row("median", f"{s['median']:.3f}    front: {s['front']} systems")
        calls = b.get("llm_calls")
        tokens = b.get("tokens")
        table.add_row("spent", f"${_fmt_limit(snap['dollars'], b.get('dollars'), '.4f')}   tokens "
                      f"{_fmt_limit(snap['tokens'], int(tokens) if tokens else None, 'd')}   LM calls "
                      f"{_fmt_limit(snap['llm_calls'], int(calls) if calls else None, 'd')} "
                      f"(+{snap['cache_hits']} cached, {snap['errors']} failed)")
        eta = f"{s['eta']:.0f}s" if s["eta"] is not None else "-"
        table.add_row("time", f"{s['elapsed']:.0f}s elapsed, ETA {eta}")
        table.add_row("now", self._now())
        table.add_row("last", self.last)
        return Group(table)
