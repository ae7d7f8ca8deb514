"""The Ray executor: the examples of every evaluation run on a pool of worker processes of a Ray cluster.

The driver (the ``masforge search`` process) keeps everything that decides: the archive, the strategy, the
evaluator's cascade and timeouts, and the run's budget, which lives in a :class:`~.hub.RunHub` actor on the
driver's machine together with the answer cache. Each worker is a threaded actor that compiles a candidate once
and answers many of its examples at the same time (LM calls are I/O); sandboxed code runs on the worker that
evaluates it. A worker that dies mid-example (process killed, node lost) is replaced and its examples are sent to
another worker; what the dead attempt paid is in the hub's ledger and its answers are in the shared cache, so the
retry pays nothing twice and the example reports what all attempts paid.
"""

from __future__ import annotations

import itertools
import os
import queue
import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any

from masforge.errors import BudgetExceeded, ConfigError, stop_error
from masforge.evaluators.example import Example
from masforge.evaluators.executors.base import EvalJob, ExampleBatch, Executor
from masforge.evaluators.executors.hub import CURRENT_WORK, RunHub, SharedCache, SharedLedger, ledger_state
from masforge.evaluators.one_example import ExampleResult, failed_example, run_example
from masforge.evaluators.tasks import Task
from masforge.execution.compile import compile_genome
from masforge.genome.schema import Genome
from masforge.lm.client import LMClient, LMConfig, Responder

INSTALL_HINT = "pip install 'masforge[ray]'"
_WARM_UP = """kind: config
name: warm-up
agents:
  - id: answerer
    module: predict
topology:
  edges: [input -> answerer, answerer -> output]
"""


def _ray() -> Any:
    try:
        import ray
    except ImportError:
        raise ConfigError(f"--executor ray needs Ray, which is not installed: {INSTALL_HINT}") from None
    return ray


@dataclass
class ClientSpec:
    """What a worker needs to build an LM client like the driver's (its ledger and cache are the hub's)."""

    id: str
    hub: Any
    """The run's :class:`RunHub` actor: its ledger and answer cache."""
    lms: dict[str, LMConfig]
    responder: Responder | None
    seed: int
    cache: bool


@dataclass
class WorkerJob:
    """One candidate's evaluation as a worker sees it."""

    genome: Any
    task: Task
    """The task without its examples (only its metric travels)."""
    mapping: dict[str, str]
    client: ClientSpec


@dataclass
class Stopped:
    """A worker's example ended by the run's budget (sent back as a value, raised on the driver)."""

    limit: str
    message: str


class EvalWorker:
    """A Ray actor answering examples in threads; compiled candidates are kept for their next examples."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._jobs: OrderedDict[str, tuple[Callable[..., Any], WorkerJob]] = OrderedDict()
        self._clients: dict[str, LMClient] = {}
        self._warm_up()

    @staticmethod
    def _warm_up() -> None:
        """Answer one question with a one-agent system on the offline fake LM: the first answer imports what
        dspy and the adapters load lazily (seconds), which must not happen on a real example's clock."""
        from masforge.genome.io import parse_genome_text

        genome = parse_genome_text(_WARM_UP, "warm-up", "yaml")
        try:
            compile_genome(genome, LMClient({"worker": "fake"}, cache=False))(question="1 + 1")
        except Exception:
            pass  # only a warm-up: a real example will report whatever fails

    def pid(self) -> int:
        return os.getpid()

    def _client(self, spec: ClientSpec) -> LMClient:
        client = self._clients.get(spec.id)
        if client is None:
            cache = SharedCache(spec.hub) if spec.cache else False
            client = LMClient(spec.lms, ledger=SharedLedger(spec.hub), cache=cache,  # type: ignore[arg-type]
                              responder=spec.responder, seed=spec.seed)
            self._clients[spec.id] = client
        return client

    def _job(self, refs: list[Any]) -> tuple[Callable[..., Any], WorkerJob]:
        import ray

        key = refs[0].hex()
        with self._lock:  # several threads may start the same new candidate: compile it once
            found = self._jobs.get(key)
            if found is None:
                job: WorkerJob = ray.get(refs[0])
                client = self._client(job.client)
                # the driver compiled (so validated) the genome before it sent the job
                system = (compile_genome(job.genome, client, validated=True) if isinstance(job.genome, Genome)
                          else job.genome(client))
                found = self._jobs[key] = (system, job)
                while len(self._jobs) > 8:
                    self._jobs.popitem(last=False)
            return found

    def run(self, refs: list[Any], example: Example, work: str) -> ExampleResult | Stopped:
        system, job = self._job(refs)
        token = CURRENT_WORK.set(work)
        try:
            return run_example(system, job.task, job.mapping, example)
        except BudgetExceeded as exc:
            return Stopped(exc.limit, str(exc))
        finally:
            CURRENT_WORK.reset(token)


class _Worker:
    def __init__(self, handle: Any) -> None:
        self.handle = handle
        self.inflight = 0
        self.alive = True


class RayBatch(ExampleBatch):
    """One evaluation's examples spread over the executor's workers (the least busy first)."""

    def __init__(self, executor: RayExecutor, job: EvalJob) -> None:
        ray = _ray()
        self.executor = executor
        self.job = job
        self.id = uuid.uuid4().hex[:12]
        spec = executor.client_spec(job.client)
        self.hub = spec.hub
        self._refs = [ray.put(WorkerJob(job.genome, job.task.without_examples(), job.mapping, spec))]
        self._closed = False
        self._work: dict[Future[ExampleResult], str] = {}

    def submit(self, example: Example) -> Future[ExampleResult]:
        outer: Future[ExampleResult] = Future()
        outer.set_running_or_notify_cancel()
        self._work[outer] = self._work_id(example)
        outer.add_done_callback(lambda f: self._work.pop(f, None))
        self._send(outer, example, 1)
        return outer

    def _work_id(self, example: Example) -> str:
        """The hub's name for one example of this batch (its spend, and whether it was given up)."""
        return f"{self.id}/{example.id}"

    def abandon(self, future: Future[ExampleResult]) -> None:
        work = self._work.get(future)
        if work is not None and not future.done():
            self.hub.give_up.remote(work)  # the worker's requests still to come are refused by the hub

    def _send(self, outer: Future[ExampleResult], example: Example, attempt: int) -> None:
        worker = self.executor.pick()
        worker.inflight += 1
        ref = worker.handle.run.remote(self._refs, example, self._work_id(example))
        # Ray completes the future on its own thread: the outcome is handled on the executor's settle thread.
        ref.future().add_done_callback(lambda f: self.executor.settle(self, outer, example, worker, attempt, f))

    def outcome(self, outer: Future[ExampleResult], example: Example, worker: _Worker, attempt: int,
                done: Future[Any]) -> None:
        """Turn a worker's answer (or its death) into the example's result; runs on the settle thread."""
        ray = _ray()
        worker.inflight -= 1
        try:
            value = done.result()
        except (ray.exceptions.RayActorError, ray.exceptions.RaySystemError) as exc:
            self.executor.lost(worker)
            if attempt < self.executor.max_attempts and not self._closed:
                self.executor.retried += 1
                self._send(outer, example, attempt + 1)
                return
            first = str(exc).strip().splitlines()[0][:200] if str(exc).strip() else type(exc).__name__
            outer.set_result(failed_example(example, self.job.mapping,
                                            f"Ray worker lost {attempt} times: {first}", "worker"))
            return
        except Exception as exc:  # a worker that cannot run masforge at all (e.g. another version installed)
            first = str(exc).strip().splitlines()[-1][:300] if str(exc).strip() else type(exc).__name__
            outer.set_result(failed_example(example, self.job.mapping, f"Ray worker failed: {first}", "worker"))
            return
        if isinstance(value, Stopped):
            outer.set_exception(stop_error(value.limit, value.message))
            return
        if attempt > 1:
            # The dead attempts' paid calls are in the hub's ledger and their answers in the cache, where this
            # attempt found them as cache hits: the example reports every call its attempts paid, once.
            paid = ray.get(self.hub.work_calls.remote(self._work_id(example)))
            total = value.llm_calls + value.cache_hits
            value.llm_calls, value.cache_hits = paid, max(0, total - paid)
        outer.set_result(value)

    def close(self, *, interrupted: bool = False) -> None:
        self._closed = True
        self.hub.forget.remote(self.id + "/")


class RayExecutor(Executor):
    """Examples on a pool of Ray worker processes; the run's ledger and answer cache in one hub actor."""

    name = "ray"

    def __init__(self, address: str | None = None, workers: int | None = None, worker_concurrency: int = 64,
                 max_attempts: int = 3) -> None:
        ray = _ray()
        if workers is not None and workers < 1:
            raise ConfigError(f"ray workers must be at least 1, got {workers}")
        self.address = address
        self._started = False
        if not ray.is_initialized():
            try:
                ray.init(address=address, include_dashboard=False, log_to_driver=False)
            except (ConnectionError, RuntimeError, ValueError) as exc:
                where = f"at {address}" if address else "on this machine"
                first = str(exc).strip().splitlines()[0][:200] if str(exc).strip() else type(exc).__name__
                raise ConfigError(f"cannot connect to a Ray cluster {where} ({first}); start one with "
                                  "`ray start --head` or check --ray-address") from None
            self._started = True
        self.node = ray.get_runtime_context().get_node_id()
        # Each worker reserves a CPU (it runs metrics and sandboxed code); more workers than free CPUs would wait
        # forever to be scheduled.
        free = int(ray.available_resources().get("CPU", 0))
        deadline = time.monotonic() + 10  # workers of a run that just ended may still be giving their CPUs back
        while free < (workers or 1) and time.monotonic() < deadline:
            time.sleep(0.2)
            free = int(ray.available_resources().get("CPU", 0))
        if free < (workers or 1):
            total = int(ray.cluster_resources().get("CPU", 0))
            if self._started:
                ray.shutdown()
            raise ConfigError(f"the Ray cluster has {free} free CPUs of {total} and each evaluation worker needs "
                              f"one: ask for fewer (--ray-workers) or add nodes (ray start --address ...)")
        self.n_workers = workers or free
        self.worker_concurrency = max(1, worker_concurrency)
        self.max_attempts = max(1, max_attempts)
        self.retried = 0
        """Examples sent to another worker because theirs died."""
        self.lost_workers = 0
        self._workers: list[_Worker] = []
        self._lock = threading.Lock()
        self._specs: dict[int, ClientSpec] = {}
        self._attached: list[tuple[LMClient, Any]] = []
        self._settle: queue.Queue[tuple[Any, ...] | None] = queue.Queue()
        self._settler = threading.Thread(target=self._settle_loop, name="masforge-ray-settle", daemon=True)
        self._settler.start()
        self._counter = itertools.count()
        self._closed = False

    # ------------------------------------------------------------------ driver-side state

    def attach(self, client: LMClient) -> LMClient:
        self.client_spec(client)
        return client

    def client_spec(self, client: LMClient) -> ClientSpec:
        """How workers rebuild ``client``; the first time, its ledger and cache move into a new hub actor."""
        ray = _ray()
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        with self._lock:
            spec = self._specs.get(id(client))
            if spec is not None:
                return spec
            if isinstance(client.ledger, SharedLedger):
                raise ConfigError("this LM client is attached to another Ray executor already")
            cache_path = client.cache.path if client.cache is not None else None
            # On the driver's machine: the cache file is there, and the driver's own calls stay local.
            hub = ray.remote(RunHub).options(
                num_cpus=0, max_concurrency=32,
                scheduling_strategy=NodeAffinitySchedulingStrategy(node_id=self.node, soft=False),
            ).remote(ledger_state(client.ledger), str(cache_path) if cache_path else None)
            ray.get(hub.ping.remote())  # up before any worker or the driver needs its budget
            client.ledger = SharedLedger(hub)  # type: ignore[assignment]
            if client.cache is not None:
                client.cache = SharedCache(hub, cache_path)  # type: ignore[assignment]
            self._attached.append((client, hub))
            spec = self._specs[id(client)] = ClientSpec(uuid.uuid4().hex, hub, dict(client.lms), client.responder,
                                                        client.seed, client.cache is not None)
            return spec

    # ------------------------------------------------------------------ workers

    def _spawn(self) -> _Worker:
        ray = _ray()
        handle = ray.remote(EvalWorker).options(num_cpus=1, max_concurrency=self.worker_concurrency,
                                                max_restarts=0, max_task_retries=0).remote()
        return _Worker(handle)

    def start_workers(self) -> list[int]:
        """Start the worker processes now (else on the first example) and return their process ids."""
        ray = _ray()
        with self._lock:
            while len([w for w in self._workers if w.alive]) < self.n_workers:
                self._workers.append(self._spawn())
            live = [w for w in self._workers if w.alive]
        return list(ray.get([w.handle.pid.remote() for w in live]))

    def pick(self) -> _Worker:
        with self._lock:
            live = [w for w in self._workers if w.alive]
            while len(live) < self.n_workers:
                w = self._spawn()
                self._workers.append(w)
                live.append(w)
            start = next(self._counter) % len(live)  # round robin among the least busy
            order = live[start:] + live[:start]
            return min(order, key=lambda w: w.inflight)

    def lost(self, worker: _Worker) -> None:
        """``worker`` died: forget it (a replacement starts with the next example sent)."""
        ray = _ray()
        with self._lock:
            if worker.alive:
                worker.alive = False
                self.lost_workers += 1
                self._workers = [w for w in self._workers if w.alive]
        try:
            ray.kill(worker.handle, no_restart=True)
        except Exception:
            pass  # already gone

    def settle(self, batch: RayBatch, outer: Future[ExampleResult], example: Example, worker: _Worker,
               attempt: int, done: Future[Any]) -> None:
        self._settle.put((batch, outer, example, worker, attempt, done))

    def _settle_loop(self) -> None:
        while True:
            item = self._settle.get()
            if item is None:
                return
            batch, outer, example, worker, attempt, done = item
            try:
                batch.outcome(outer, example, worker, attempt, done)
            except BaseException as exc:  # never leave the evaluator waiting on a future nobody completes
                if not outer.done():
                    outer.set_exception(exc)

    # ------------------------------------------------------------------ executor

    def batch(self, job: EvalJob, concurrency: int) -> ExampleBatch:
        if self._closed:
            raise ConfigError("this Ray executor is closed; make a new one")
        return RayBatch(self, job)

    def describe(self) -> dict[str, Any]:
        ray = _ray()
        nodes = [n for n in ray.nodes() if n.get("Alive")] if ray.is_initialized() else []
        return {"executor": self.name, "address": self.address, "workers": self.n_workers, "nodes": len(nodes),
                "retried_examples": self.retried, "lost_workers": self.lost_workers}

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        ray = _ray()
        for client, _hub in self._attached:  # the driver keeps the final totals and its cache file
            if isinstance(client.ledger, SharedLedger):
                client.ledger.detach()
            if isinstance(client.cache, SharedCache):
                client.cache.detach()
        self._settle.put(None)
        if ray.is_initialized():
            for w in self._workers:
                try:
                    ray.kill(w.handle, no_restart=True)
                except Exception:
                    pass
            for _client, hub in self._attached:
                try:
                    ray.kill(hub, no_restart=True)
                except Exception:
                    pass
            if self._started:
                ray.shutdown()
        self._workers = []
