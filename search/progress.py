"""Live terminal view of a search: strategy, generation, candidates, best and median score, the
quality-vs-cost front, dollars/tokens/calls against budget, elapsed time and ETA."""

from __future__ import annotations

import statistics
import threading
import time
from typing import Any

from rich.console import Console, Group
from rich.live import Live
from rich.table import Table
from rich.text import Text

from masforge.redact import redact
from masforge.search.context import SearchContext
from masforge.text import shorten, shorten_name


def _fmt_limit(value: float, limit: float | None, fmt: str) -> str:
    return f"{value:{fmt}}" + (f" / {limit:{fmt}}" if limit is not None else "")


def describe_event(kind: str, data: dict[str, Any]) -> str | None:
    """A search event as one readable line for the live view (None: not worth showing)."""
    if kind == "candidate":
        c = data["candidate"]
        tag = "reused" if data.get("reused") else c.operator
        star = " *best*" if data.get("improved") else ""
        dropped = f", dropped by the race after {c.n} examples" if c.pruned and not data.get("reused") else ""
        calls = "" if data.get("reused") else f", {c.llm_calls} new + {c.cache_hits} cached LM calls"
        return f"{c.short_id} {shorten_name(c.genome.name, 40)} score {c.score:.3f} ({tag}{calls}{dropped}){star}"
    if kind == "incumbent":
        c = data["candidate"]
        return (f"new incumbent {shorten_name(c.genome.name, 40)}: {data.get('diff', 0):+.3f} "
                f"[{data.get('low', 0):+.3f}, {data.get('high', 0):+.3f}] over {data.get('n')} paired examples")
    if kind == "rejected":
        return f"rejected {shorten(data.get('name', ''), 30)}: {shorten(data.get('reason', ''), 90)}"
    if kind == "stage":
        if data.get("strategy") == "resume":
            return f"resumed: {data.get('restored', 0)} candidates of this run restored from the archive"
        where = f" (stage {data['index']} of {data['of']})" if data.get("of", 1) > 1 else ""
        return f"strategy {data.get('strategy')}{where} starts"
    if kind == "test":
        return f"re-scoring {shorten_name(data.get('name', ''), 40)} on the held-out test split"
    if kind == "stalled":
        return f"{data.get('strategy')} stopped: {data.get('steps', 'several')} steps in a row found nothing new"
    if kind == "note":
        return f"{data.get('strategy', 'note')}: {shorten(data.get('message', ''), 110)}"
    if kind == "waiting":
        who = data.get("holder") or {}
        return (f"waiting: run {who.get('run', '?')} (pid {who.get('pid', '?')}) is evaluating "
                f"{shorten(data.get('name', ''), 40)}")
    if kind == "incomplete":
        return (f"unscored {shorten(data.get('name', ''), 30)}: {data.get('unscored')} of {data.get('attempted')} "
                f"examples ({shorten(str(data.get('error', '')), 80)}); evaluated again later")
    return None


HEARTBEAT_S = 60.0
"""Without a terminal (a log file), a line at least this often while a long evaluation runs."""


class SearchProgress:
    """Event sink for :class:`SearchContext` that renders a live panel (or plain lines without a TTY, with a
    heartbeat line when nothing else was printed for :data:`HEARTBEAT_S`: a log shows the run is alive and what
    it is doing long before the first candidate is finished)."""

    def __init__(self, console: Console | None = None, enabled: bool = True) -> None:
        self.console = console or Console()  # the CLI passes its own (markup-safe) console
        self.enabled = enabled
        self.ctx: SearchContext | None = None
        self.live: Live | None = None
        self.started = time.monotonic()
        self.last = ""
        self.working_on = ""
        self._printed = time.monotonic()
        self._stop = threading.Event()
        self._beat: threading.Thread | None = None

    def attach(self, ctx: SearchContext) -> None:
        self.ctx = ctx

    def __enter__(self) -> SearchProgress:
        if self.enabled and self.console.is_terminal:
            self.live = Live(self._render(), console=self.console, refresh_per_second=4, transient=False)
            self.live.__enter__()
        elif self.enabled:
            self._stop.clear()
            self._beat = threading.Thread(target=self._heartbeat, name="masforge-progress", daemon=True)
            self._beat.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._beat is not None:
            self._beat.join(5)
            self._beat = None
        if self.live is not None:
            self.live.update(self._render())
            self.live.__exit__(None, None, None)
            self.live = None

    def _heartbeat(self) -> None:
        while not self._stop.wait(min(HEARTBEAT_S, 5.0)):
            if time.monotonic() - self._printed < HEARTBEAT_S or self.ctx is None:
                continue
            snap = self.ctx.client.ledger.snapshot()
            doing = f"evaluating {shorten_name(self.working_on, 40)}" if self.working_on else "working"
            self._print(f"{time.monotonic() - self.started:.0f}s: {doing} ({self.ctx.evaluated} candidates done; "
                        f"{snap['llm_calls']} LM calls answered, +{snap['cache_hits']} cached)")

    def __call__(self, kind: str, data: dict[str, Any]) -> None:
        if kind in ("evaluating", "test"):
            self.working_on = str(data.get("name", ""))
        if kind == "notice":  # a run-level line (budget plan, warning, resume): printed as it is
            self._print(f"[yellow]{data.get('text', '')}[/yellow]" if data.get("warning") else str(data.get("text")))
            return
        if kind == "diverged":
            self._print(f"[yellow]resume took another path than the stopped run at candidate {data.get('seq')} "
                        f"({data.get('expected')} before, {data.get('got')} now): a non-deterministic LM or changed "
                        "options; the run goes on from here[/yellow]")
            return
        text = describe_event(kind, data)
        if text is None:
            return
        self.last = redact(text)  # rejection reasons quote errors; the terminal output is often a log file
        if self.live is not None:
            self.live.update(self._render())
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
        table.add_row("last", self.last)
        return Group(table)
