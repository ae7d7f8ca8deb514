"""The default executor: examples run in a thread pool of this process (LM calls are I/O; sandboxed code runs
in its own subprocess either way)."""

from __future__ import annotations

import contextvars
from concurrent.futures import Future, ThreadPoolExecutor

from masforge.evaluators.example import Example
from masforge.evaluators.executors.base import EvalJob, ExampleBatch, Executor
from masforge.evaluators.one_example import ExampleResult, run_example
from masforge.lm.trace import Incidents


class LocalBatch(ExampleBatch):
    """A thread pool sized for the batch; a thread stuck past its example's timeout is left behind."""

    def __init__(self, job: EvalJob, workers: int) -> None:
        self.job = job
        self.workers = workers
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="masforge-eval")
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
        # A thread cannot be killed. The stuck one keeps its worker: later examples get a fresh pool instead of
        # queueing behind it (and timing out in the queue); the old pool finishes what runs.
        self._pool.shutdown(wait=False)
        self._pool = ThreadPoolExecutor(max_workers=self.workers, thread_name_prefix="masforge-eval")
        self._abandoned = True

    def close(self, *, interrupted: bool = False) -> None:
        # Never wait for an abandoned (timed-out) example: its LM call may hang until the LM's own timeout.
        self._pool.shutdown(wait=not (self._abandoned or interrupted), cancel_futures=True)


class LocalExecutor(Executor):
    """Examples in threads of this process (today's behaviour, the default)."""

    name = "local"

    def batch(self, job: EvalJob, concurrency: int) -> ExampleBatch:
        return LocalBatch(job, max(1, concurrency))
