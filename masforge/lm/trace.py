"""What happened while a system answered: one :class:`AgentCall` per agent invocation, with its LM calls.

Recording uses context variables, so concurrent evaluations in threads each get their own trace.
"""

from __future__ import annotations

import contextvars
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, fields
from typing import Any

from masforge.redact import redact
from masforge.text import shorten


@dataclass
class LMCall:
    """One request to a language model."""

    alias: str
    model: str
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost: float = 0.0
    latency_s: float = 0.0
    cached: bool = False
    error: str | None = None


@dataclass
class AgentCall:
    """One agent invocation: what it read, what it wrote and what it cost."""

    agent: str
    module: str = ""
    copy: int = 0
    round: int = 0
    inputs: dict[str, Any] = field(default_factory=dict)
    outputs: dict[str, Any] = field(default_factory=dict)
    lm_calls: list[LMCall] = field(default_factory=list)
    latency_s: float = 0.0
    error: str | None = None

    @property
    def tokens(self) -> int:
        return sum(c.prompt_tokens + c.completion_tokens for c in self.lm_calls)

    @property
    def cost(self) -> float:
        return sum(c.cost for c in self.lm_calls)


@dataclass
class Trace:
    """All agent calls of one system run, in the order they finished."""

    calls: list[AgentCall] = field(default_factory=list)

    @property
    def tokens(self) -> int:
        return sum(c.tokens for c in self.calls)

    @property
    def cost(self) -> float:
        return sum(c.cost for c in self.calls)

    @property
    def lm_calls(self) -> int:
        return sum(len(c.lm_calls) for c in self.calls)

    def to_dict(self) -> list[dict[str, Any]]:
        """JSON-ready list of calls (for archives and failure reports): each call's fields in order, its LM calls
        as dicts, its inputs and outputs copied one level deep (dataclasses.asdict's deep copy of every string
        cost a twentieth of masforge's time per LM call at 64 in flight)."""
        out = []
        for c in self.calls:
            d = {f.name: getattr(c, f.name) for f in fields(c)}
            d["inputs"], d["outputs"] = dict(c.inputs), dict(c.outputs)
            d["lm_calls"] = [{f.name: getattr(x, f.name) for f in fields(x)} for x in c.lm_calls]
            d["tokens"] = c.tokens
            d["cost"] = c.cost
            out.append(d)
        return out

    def summary(self, limit: int = 1500) -> str:
        """Compact text of the calls for a meta-agent prompt."""
        lines: list[str] = []
        for c in self.calls:
            outs = "; ".join(f"{k}={str(v)[:200]!r}" for k, v in c.outputs.items())
            tag = f"{c.agent}#{c.copy} r{c.round}"
            lines.append(f"{tag}: {c.error or outs}")
        return shorten("\n".join(lines), limit, flat=False)


_current_trace: contextvars.ContextVar[Trace | None] = contextvars.ContextVar("masforge_trace", default=None)
_current_call: contextvars.ContextVar[AgentCall | None] = contextvars.ContextVar("masforge_call", default=None)


@contextmanager
def recording(trace: Trace | None = None) -> Iterator[Trace]:
    """Collect agent calls made inside the block into ``trace`` (a new one by default)."""
    trace = trace if trace is not None else Trace()
    token = _current_trace.set(trace)
    try:
        yield trace
    finally:
        _current_trace.reset(token)


@contextmanager
def agent_call(agent: str, module: str = "", copy: int = 0, round: int = 0,
               inputs: dict[str, Any] | None = None) -> Iterator[AgentCall]:
    """Record one agent invocation; LM calls inside it attach to it. Errors are noted, then re-raised."""
    call = AgentCall(agent=agent, module=module, copy=copy, round=round, inputs=dict(inputs or {}))
    token = _current_call.set(call)
    start = time.perf_counter()
    try:
        yield call
    except BaseException as exc:
        call.error = redact(f"{type(exc).__name__}: {exc}")[:500]
        raise
    finally:
        call.latency_s = time.perf_counter() - start
        _current_call.reset(token)
        trace = _current_trace.get()
        if trace is not None:
            trace.calls.append(call)


def note_lm_call(lm_call: LMCall) -> None:
    """Attach an LM call to the current agent call (or to an anonymous one if none is open)."""
    call = _current_call.get()
    if call is not None:
        call.lm_calls.append(lm_call)
        return
    trace = _current_trace.get()
    if trace is not None:
        trace.calls.append(AgentCall(agent="(direct)", lm_calls=[lm_call], latency_s=lm_call.latency_s))


@dataclass
class Incidents:
    """Infrastructure failures met while one example ran (the provider or the sandbox failed, not the system),
    and how many LM requests of it are waiting on a provider right now."""

    failures: list[str] = field(default_factory=list)
    waiting: int = 0
    given_up: bool = False
    """The evaluator stopped waiting for the example (its timeout): its further LM requests are not sent."""
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)
    _waited_s: float = field(default=0.0, repr=False, compare=False)
    _waiting_since: float | None = field(default=None, repr=False, compare=False)

    def add(self, text: str) -> None:
        with self._lock:
            self.failures.append(text)

    def give_up(self) -> None:
        """The example timed out and was abandoned: a thread cannot be killed, but it must not spend more."""
        self.given_up = True

    def wait(self, delta: int) -> None:
        with self._lock:
            before, self.waiting = self.waiting, self.waiting + delta
            now = time.monotonic()
            if before <= 0 < self.waiting:
                self._waiting_since = now
            elif self.waiting <= 0 < before and self._waiting_since is not None:
                self._waited_s += now - self._waiting_since
                self._waiting_since = None

    def waited_s(self) -> float:
        """Wall seconds during which at least one LM request of the example was in flight (parallel requests
        count once)."""
        with self._lock:
            open_s = time.monotonic() - self._waiting_since if self._waiting_since is not None else 0.0
            return self._waited_s + open_s


_current_incidents: contextvars.ContextVar[Incidents | None] = contextvars.ContextVar("masforge_incidents",
                                                                                       default=None)


@contextmanager
def watching_incidents(incidents: Incidents | None = None) -> Iterator[Incidents]:
    """Collect the infrastructure failures of the code inside the block (threads copying the context too)."""
    incidents = incidents if incidents is not None else Incidents()
    token = _current_incidents.set(incidents)
    try:
        yield incidents
    finally:
        _current_incidents.reset(token)


def note_incident(text: str) -> None:
    """Record an infrastructure failure for the example being run (no-op outside :func:`watching_incidents`)."""
    incidents = _current_incidents.get()
    if incidents is not None:
        incidents.add(text)


def given_up() -> bool:
    """Whether the example being run was given up for its timeout (False outside :func:`watching_incidents`)."""
    incidents = _current_incidents.get()
    return incidents is not None and incidents.given_up


def first_incident() -> str | None:
    """The first infrastructure failure of the example being run, if it met one."""
    incidents = _current_incidents.get()
    return incidents.failures[0] if incidents is not None and incidents.failures else None


@contextmanager
def waiting_on_provider() -> Iterator[None]:
    """Mark an LM request of the current example as in flight (a timeout then is the provider's, not the
    system's)."""
    incidents = _current_incidents.get()
    if incidents is None:
        yield
        return
    incidents.wait(1)
    try:
        yield
    finally:
        incidents.wait(-1)
