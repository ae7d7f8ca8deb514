"""The run's shared state on a Ray cluster: one actor (on the driver's machine) holds the run's ledger and
answer cache, and small proxies make every worker's LM client, and the driver's own, use them.

So spending from every worker is accounted in one place as it happens (a call is counted before its answer is
cached, so a worker that dies after paying is never paid for twice: the retry finds the answer in the cache),
every budget check on every worker sees the same totals (a stop reaches them all at their next LM call), and
an answer paid for on one node is a cache hit on every other. The actor also counts the calls paid per
example (``work``), so an example retried after its worker died reports what all its attempts paid.

Nothing here imports Ray: the executor turns :class:`RunHub` into an actor and hands its handle to the proxies.
"""

from __future__ import annotations

import contextvars
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from masforge.errors import BudgetExceeded, MasforgeError, stop_error
from masforge.lm.cache import LMCache
from masforge.lm.ledger import Completion, Ledger

CURRENT_WORK: contextvars.ContextVar[str | None] = contextvars.ContextVar("masforge_work", default=None)
"""The example (work item) an LM call on a worker is made for."""


def ledger_state(ledger: Ledger) -> dict[str, Any]:
    """A ledger's totals and budget, without its lock (what travels to the hub)."""
    return {k: v for k, v in vars(ledger).items() if not k.startswith("_")}


class RunHub:
    """The state every process of a run shares (an actor; its methods are called concurrently)."""

    def __init__(self, ledger: dict[str, Any], cache_path: str | None) -> None:
        self.ledger = Ledger()
        self.ledger.__dict__.update(ledger)
        self.cache = LMCache(cache_path) if cache_path else None
        self._work: dict[str, int] = {}
        self._given_up: set[str] = set()
        self._lock = threading.Lock()

    # ledger
    def ledger_call(self, name: str, args: tuple[Any, ...], kwargs: dict[str, Any],
                    work: str | None = None) -> tuple[Any, ...]:
        if name == "reserve" and work is not None and work in self._given_up:
            return ("given_up", "not sent: the example was given up for its timeout")
        try:
            return ("ok", getattr(self.ledger, name)(*args, **kwargs))
        except BudgetExceeded as exc:
            return ("budget", exc.limit, str(exc))
        except Exception as exc:  # sent back as text: the caller raises it as one line
            return ("error", f"{type(exc).__name__}: {exc}")

    def ledger_get(self, name: str) -> Any:
        return getattr(self.ledger, name)

    def ledger_set(self, name: str, value: Any) -> None:
        setattr(self.ledger, name, value)

    def state(self) -> dict[str, Any]:
        return ledger_state(self.ledger)

    def add(self, work: str | None, completion: Completion) -> None:
        self.ledger.add(completion)
        if work is not None and not completion.cached:
            self._count(work)

    def settle(self, work: str | None, completion: Completion, note: str | None = None,
               worst_dollars: float = 0.0, uncounted: float | None = None) -> None:
        """A request a worker reserved got its answer (see :meth:`Ledger.settle`)."""
        self.ledger.settle(completion, note, worst_dollars, uncounted)
        if work is not None:
            self._count(work)

    def _count(self, work: str) -> None:
        with self._lock:
            self._work[work] = self._work.get(work, 0) + 1

    # per-example spend
    def work_calls(self, work: str) -> int:
        with self._lock:
            return self._work.get(work, 0)

    def give_up(self, work: str) -> None:
        """The driver stopped waiting for this example (its timeout): a worker's thread cannot be killed, but its
        further requests are refused, so it does not go on spending the run's budget. Kept after the batch is
        forgotten: the worker may still be asking then (a few ids a run, one per timed-out example)."""
        with self._lock:
            self._given_up.add(work)

    def forget(self, prefix: str) -> None:
        with self._lock:
            for key in [k for k in self._work if k.startswith(prefix)]:
                del self._work[key]

    # answer cache
    def cache_get(self, key: str) -> dict[str, Any] | None:
        return self.cache.get(key) if self.cache is not None else None

    def cache_put(self, key: str, value: dict[str, Any]) -> None:
        if self.cache is not None:
            self.cache.put(key, value)

    def ping(self) -> bool:
        return True


@dataclass
class _Detached:
    ledger: Ledger


class SharedLedger:
    """A ledger whose totals live in the hub: reads, writes and methods (``check``, ``add``, ``snapshot``, ...)
    go to the hub's :class:`Ledger`, so any process of the run sees the same numbers. After the run
    (:meth:`detach`) it is a plain local ledger holding the final totals."""

    def __init__(self, hub: Any) -> None:
        object.__setattr__(self, "_hub", hub)
        object.__setattr__(self, "_detached", None)

    def _get(self, ref: Any) -> Any:
        import ray

        return ray.get(ref)

    def _call(self, name: str, *args: Any, **kwargs: Any) -> Any:
        out = self._get(self._hub.ledger_call.remote(name, args, kwargs, CURRENT_WORK.get()))
        if out[0] == "ok":
            return out[1]
        if out[0] == "given_up":
            from masforge.lm.client import RequestAbandoned

            raise RequestAbandoned(out[1], infrastructure=True)
        if out[0] == "budget":
            raise stop_error(out[1], out[2])
        raise MasforgeError(f"the run's shared ledger failed: {out[1]}")

    def add(self, c: Completion) -> None:
        local = object.__getattribute__(self, "_detached")
        if local is not None:
            local.ledger.add(c)
            return
        self._get(self._hub.add.remote(CURRENT_WORK.get(), c))

    def settle(self, c: Completion, note: str | None = None, worst_dollars: float = 0.0,
               uncounted: float | None = None) -> None:
        local = object.__getattribute__(self, "_detached")
        if local is not None:
            local.ledger.settle(c, note, worst_dollars, uncounted)
            return
        self._get(self._hub.settle.remote(CURRENT_WORK.get(), c, note, worst_dollars, uncounted))

    def detach(self) -> Ledger:
        """Copy the hub's final totals here (before the hub goes away) and keep using them locally."""
        local = object.__getattribute__(self, "_detached")
        if local is None:
            ledger = Ledger()
            ledger.__dict__.update(self._get(self._hub.state.remote()))
            local = _Detached(ledger)
            object.__setattr__(self, "_detached", local)
        return local.ledger

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        local = object.__getattribute__(self, "_detached")
        if local is not None:
            return getattr(local.ledger, name)
        if callable(getattr(Ledger, name, None)):
            return lambda *args, **kwargs: self._call(name, *args, **kwargs)
        return self._get(self._hub.ledger_get.remote(name))

    def __setattr__(self, name: str, value: Any) -> None:
        local = object.__getattribute__(self, "_detached")
        if local is not None:
            setattr(local.ledger, name, value)
            return
        self._get(self._hub.ledger_set.remote(name, value))


class SharedCache:
    """The answer cache seen through the hub (the same entries from every node); after the run
    (:meth:`detach`) the driver reads the cache file directly again."""

    def __init__(self, hub: Any, path: str | Path | None = None) -> None:
        self._hub = hub
        self.path = Path(path) if path else None
        self._local: LMCache | None = None

    @staticmethod
    def make_key(payload: dict[str, Any]) -> str:
        return LMCache.make_key(payload)

    def get(self, key: str) -> dict[str, Any] | None:
        if self._local is not None:
            return self._local.get(key)
        import ray

        return ray.get(self._hub.cache_get.remote(key))

    def put(self, key: str, value: dict[str, Any]) -> None:
        if self._local is not None:
            self._local.put(key, value)
            return
        import ray

        ray.get(self._hub.cache_put.remote(key, value))  # waited for: a retry after a crash must find it

    def detach(self) -> None:
        if self.path is not None and self._local is None:
            self._local = LMCache(self.path)
