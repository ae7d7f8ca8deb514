"""The default executor: examples run in a thread pool of this process (LM calls are I/O; sandboxed code runs
in its own subprocess either way)."""

from __future__ import annotations

import contextvars
import threading
from concurrent.futures import Future, ThreadPoolExecutor

from masforge.evaluators.example import Example
from masforge.evaluators.executors.base import EvalJob, ExampleBatch, Executor
from masforge.evaluators.one_example import ExampleResult, run_example
from masforge.lm.trace import Incidents

SPARE_POOLS = 2
"""Finished batches' thread pools kept for the next batches (a search evaluates in many batches)."""

_spare: list[tuple[int, ThreadPoolExecutor]] = []
_spare_lock = threading.Lock()


def _take_pool(workers: int) -> tuple[int, ThreadPoolExecutor]:
    """A pool of at least ``workers`` threads (the evaluator, not the pool, caps how many examples run at once):
    the smallest a finished batch left idle, its threads started and their cache connections open, or a new one.
    Starting 64 threads inside a batch put a thread start before each of its first 64 requests."""
    with _spare_lock:
        fits = [entry for entry in _spare if entry[0] >= workers]
        if fits:
            entry = min(fits, key=lambda e: e[0])
            _spare.remove(entry)
            return entry
    return workers, ThreadPoolExecutor(max_workers=workers, thread_name_prefix="masforge-eval")


def _give_back(size: int, pool: ThreadPoolExecutor) -> None:
    """Keep an idle pool for later batches; past :data:`SPARE_POOLS`, the smallest kept is shut down."""
    with _spare_lock:
        _spare.append((size, pool))
        _spare.sort(key=lambda e: -e[0])
        dropped = _spare[SPARE_POOLS:]
        del _spare[SPARE_POOLS:]
    for _, old in dropped:
        old.shutdown(wait=False)


class LocalBatch(ExampleBatch):
    """A thread pool sized for the batch (reused from a finished batch when one is idle); a thread stuck past its
    example's timeout is left behind, and its pool is never reused."""

    def __init__(self, job: EvalJob, workers: int) -> None:
        self.job = job
        self.workers = workers
        self._size, self._pool = _take_pool(workers)
        self._abandoned = False
        self._incidents: dict[Future[ExampleResult], Incidents] = {}

    def submit(self, example: Example) -> Future[ExampleResult]:
        ctx = contextvars.copy_context()  # the caller's trace and budget context follow the example
        seen = Incidents()
        fut = self._pool.submit(ctx.run, run_example, self.job.system, self.job.task, self.job.mapping, example, seen)
        self._incidents[fut] = seen
        fut.add_done_callback(lambda f: self._incidents.pop(f, None))
        return fut

    def waiting_on_provider(self, future: Future[ExampleResult]) -> bool:
        seen = self._incidents.get(future)
        return seen is not None and (seen.waiting > 0 or bool(seen.failures))

    def provider_seconds(self, future: Future[ExampleResult]) -> float:
        seen = self._incidents.get(future)
        return seen.waited_s() if seen is not None else 0.0

    def abandon(self, future: Future[ExampleResult]) -> None:
        if future.done():
            return
        seen = self._incidents.get(future)
        if seen is not None:
            seen.give_up()  # its LM requests still to come are not sent
        # A thread cannot be killed. The stuck one keeps its worker: later examples get a fresh pool instead of
        # queueing behind it (and timing out in the queue) in another pool, idle or new; the old one finishes what
        # runs and is never reused.
        self._pool.shutdown(wait=False)
        self._size, self._pool = _take_pool(self.workers)
        self._abandoned = True

    def close(self, *, interrupted: bool = False) -> None:
        if not (self._abandoned or interrupted or self._incidents):  # every example ended: the threads are idle
            _give_back(self._size, self._pool)
            return
        # Never wait for an abandoned (timed-out) example: its LM call may hang until the LM's own timeout.
        self._pool.shutdown(wait=not (self._abandoned or interrupted), cancel_futures=True)


class LocalExecutor(Executor):
    """Examples in threads of this process (today's behaviour, the default)."""

    name = "local"

    def batch(self, job: EvalJob, concurrency: int) -> ExampleBatch:
        return LocalBatch(job, max(1, concurrency))
