"""Run a genome over a task split and measure it: score with a bootstrap CI, dollars, tokens, latency,
failures by kind, and every example's output and trace (failures are kept for the meta-agent).

Where the examples run is the executor's business (threads of this process by default, or the worker
processes of a Ray cluster, see :mod:`masforge.evaluators.executors`); this module decides what runs and when
to stop. Concurrency is bounded per evaluation (and per model by the LM client); each example has a timeout;
LM answers come from the answer cache when the same call was made before; a budget stop ends the run
cleanly, keeping every finished example. Cascade evaluation scores a small first batch and continues
only if the candidate can still beat a threshold.

An example that met an infrastructure failure (the provider failed after its retries, timed out or is out of
reach; the sandbox itself broke) is *unscored*, not wrong: it is kept with its error but left out of the score.
When more than ``max_unscored`` of the examples are unscored, the report is *incomplete*: its score says
nothing about the system, and the evaluation stops early.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import asdict, dataclass, field
from queue import Empty, SimpleQueue
from typing import Any

from masforge.archive.records import ResultRecord
from masforge.errors import BudgetExceeded, GenomeError, MasforgeError, RunHalted
from masforge.evaluators.example import Example
from masforge.evaluators.executors import EvalJob, Executor, LocalExecutor
from masforge.evaluators.one_example import ExampleResult, classify, failed_example
from masforge.evaluators.racing import Look, Race
from masforge.evaluators.stats import bootstrap_ci
from masforge.evaluators.tasks import Task
from masforge.execution.compile import compile_genome
from masforge.genome.schema import Genome
from masforge.lm import rates as lm_rates
from masforge.lm.client import LMClient
from masforge.lm.config import LMConfig

READING_REVISION = 7
"""Bumped whenever the way replies are read or scored changes (an adapter's parsing, a metric). Archived results
carry it in their key (:func:`results_key`), so a result read the old way is evaluated again (its answers come
from the answer cache) instead of being reused. 1: results made before revisions were kept; 2: "Final answer"
lines taken out of code blocks (plain adapter); 3: an unmarked answer is the last line with a letter or digit;
4: final-answer markers found however repeated or nested (in a sentence, a list, a lead-in), code found wherever
written (the block defining the entry point, a program without a fence), exact match and reasoning-gym scored on
the best reading of the answer as written (without bold, LaTeX, \\boxed{}, a full stop); 5: a chain-of-thought answer
to a question that asks for a program keeps the code its reasoning wrote (plain adapter); 6: an answer written as an
output block (```output, text, console) is its content, lines that repeat masforge's own instructions are no answer,
and exact match compares a number with a gold number by value ("6.0" is "6"); 7: code answers judged by a sandbox
whose judged process never holds the tests and whose tests call the prompt's own helpers (a pass an answer forged
under an earlier revision is not reused)."""


def results_key(lm: LMConfig) -> str:
    """The key an evaluation's results are stored under: the LM's key and the reading revision."""
    return f"{lm.key()}#read{READING_REVISION}"

__all__ = ["Cascade", "EvalReport", "EvaluationInterrupted", "Evaluator", "ExampleResult", "classify", "evaluate",
           "input_mapping"]

ProgressFn = Callable[[int, int, "EvalReport"], None]


TIMEOUT_SCAN_S = 0.25
"""How often the examples in flight are checked against their timeouts (at most)."""


class EvaluationInterrupted(KeyboardInterrupt):
    """Ctrl-C during an evaluation; ``report`` holds the examples finished before it (``stopped`` is
    ``interrupted``). A KeyboardInterrupt, so whatever stops on Ctrl-C still does."""

    def __init__(self, report: EvalReport) -> None:
        super().__init__()
        self.report = report


@dataclass
class Cascade:
    """Score ``first_n`` examples first; stop if even the CI's upper end cannot reach the threshold."""

    first_n: int = 5
    margin: float = 0.0


@dataclass
class EvalReport:
    """The measured worth of one genome on one task split with one LM configuration."""

    genome_id: str
    genome_name: str
    task: str
    split: str
    lm_key: str
    planned: int
    examples: list[ExampleResult] = field(default_factory=list)
    stopped: str | None = None
    """The budget limit that stopped the run early, if any."""
    pruned: bool = False
    """True if the cascade or the race stopped early (the score covers the batches run only)."""
    looks: list[Look] = field(default_factory=list)
    """The race's paired tests against the incumbent, one per batch (empty without a race)."""
    wall_s: float = 0.0
    max_unscored: float = 0.2
    """Largest share of unscored examples the score may leave out; above it the report is incomplete."""
    split_size: int = 0
    """Examples the split holds, beyond a limit (0: not known): whether more of them could be scored."""

    @property
    def scored(self) -> list[ExampleResult]:
        """The examples the score covers (not unscored)."""
        return [e for e in self.examples if not e.unscored]

    @property
    def n(self) -> int:
        """Examples the score covers."""
        return len(self.scored)

    @property
    def attempted(self) -> int:
        """Examples run, scored or not."""
        return len(self.examples)

    @property
    def unscored(self) -> int:
        """Examples left out because the provider or the sandbox failed (not counted as wrong)."""
        return self.attempted - self.n

    @property
    def incomplete(self) -> bool:
        """Too many examples unscored (share above ``max_unscored``, or none scored): not a score at all."""
        if not self.unscored:
            return False
        return self.n == 0 or self.unscored > self.max_unscored * self.planned

    @property
    def too_many_unscored(self) -> bool:
        """More examples unscored than the share allows: the rest cannot make this a score any more."""
        return self.unscored > self.max_unscored * self.planned

    @property
    def complete(self) -> bool:
        """Every planned example ran, no budget stop, and the unscored share is within the limit."""
        return self.attempted == self.planned and not self.stopped and not self.incomplete

    @property
    def outage(self) -> str:
        """The first infrastructure error met (empty if none)."""
        return next((e.error or "" for e in self.examples if e.unscored), "")

    @property
    def scores(self) -> list[float]:
        """The score of each scored example, in order."""
        return [e.score for e in self.scored]

    @property
    def score(self) -> float:
        """Mean score over the scored examples (0.0 with none)."""
        return sum(self.scores) / self.n if self.n else 0.0

    @property
    def ci(self) -> tuple[float, float]:
        """Bootstrap 95% interval of :attr:`score`."""
        return bootstrap_ci(self.scores)

    @property
    def dollars(self) -> float:
        """Dollars spent on every example, failed ones included."""
        return sum(e.dollars for e in self.examples)

    @property
    def tokens(self) -> int:
        """Tokens spent on every example, failed ones included."""
        return sum(e.tokens for e in self.examples)

    @property
    def llm_calls(self) -> int:
        """LM calls sent to the provider (answers from the cache not counted)."""
        return sum(e.llm_calls for e in self.examples)

    @property
    def cache_hits(self) -> int:
        """LM answers taken from the answer cache."""
        return sum(e.cache_hits for e in self.examples)

    @property
    def latency_s(self) -> float:
        """Mean seconds per scored example."""
        return sum(e.latency_s for e in self.examples) / self.n if self.n else 0.0

    @property
    def failures(self) -> dict[str, int]:
        """Count of examples per failure kind (``wrong`` = answered but scored below 1; ``unscored`` = left out
        of the score because the provider or the sandbox failed)."""
        kinds = Counter("unscored" if e.unscored else e.error_kind or ("wrong" if e.score < 1.0 else "ok")
                        for e in self.examples)
        kinds.pop("ok", None)
        return dict(kinds)

    @property
    def wrong_reasons(self) -> dict[str, int]:
        """Why the ``wrong`` examples scored below 1, as the metric says it (e.g. a code metric's ``syntax``,
        ``no_code``, ``exception``, ``timeout``); ``unstated`` where the metric gives no reason."""
        return dict(Counter(str(e.details.get("error_kind") or "unstated") for e in self.examples
                            if not e.unscored and not e.error_kind and e.score < 1.0))

    def failure_examples(self, k: int = 3) -> list[ExampleResult]:
        """The ``k`` most instructive failures of the system (unscored ones are not its failures): errors
        first, then the lowest scores."""
        bad = [e for e in self.scored if e.error or e.score < 1.0]
        return sorted(bad, key=lambda e: (e.error is None, e.score))[:k]

    def summary(self) -> dict[str, Any]:
        """JSON-ready numbers, the run's own (``planned``, ``stopped``, ``wall_s``, ...) included; what the archive
        stores is :meth:`result`."""
        lo, hi = self.ci
        return {"task": self.task, "split": self.split, "lm_key": self.lm_key, "score": self.score,
                "ci_low": lo, "ci_high": hi, "n": self.n, "planned": self.planned, "split_size": self.split_size,
                "dollars": self.dollars,
                "tokens": self.tokens, "llm_calls": self.llm_calls, "cache_hits": self.cache_hits,
                "latency_s": self.latency_s, "failures": self.failures, "stopped": self.stopped,
                "pruned": self.pruned, "wall_s": self.wall_s, "unscored": self.unscored,
                "incomplete": self.incomplete, "example_scores": self.example_scores(),
                "example_dollars": self.example_dollars(),
                "race": [look.to_dict() for look in self.looks]}

    def example_scores(self) -> dict[str, float]:
        """Score of each scored example by id: what paired comparisons and races are made of."""
        return {e.example_id: e.score for e in self.scored}

    def example_dollars(self) -> dict[str, float]:
        """Dollars of each scored example by id (examples that cost nothing left out)."""
        return {e.example_id: e.dollars for e in self.scored if e.dollars}

    def result(self, **extra: Any) -> ResultRecord:
        """This evaluation as the archive stores it: the record's fields from the report's, ``extra`` (what the
        caller keeps beside them: the run, failure notes, ...) stored as given."""
        lo, hi = self.ci
        return ResultRecord(task=self.task, split=self.split, lm_key=self.lm_key, score=self.score, ci_low=lo,
                            ci_high=hi, n=self.n, dollars=self.dollars, tokens=self.tokens, llm_calls=self.llm_calls,
                            cache_hits=self.cache_hits, latency_s=self.latency_s, failures=self.failures,
                            example_scores=self.example_scores(), example_dollars=self.example_dollars(),
                            extra=dict(extra))

    def to_dict(self) -> dict[str, Any]:
        """The report as ``masforge evaluate -o`` writes it: the summary and every example."""
        return {"genome_id": self.genome_id, "genome_name": self.genome_name, **self.summary(),
                "examples": [asdict(e) for e in self.examples]}


def input_mapping(genome: Genome, task: Task) -> dict[str, str]:
    """genome input field -> task input field (same names, or the single field of each)."""
    task_fields = list(task.input_fields)
    if all(f in task_fields for f in genome.inputs):
        return {f: f for f in genome.inputs}
    if len(genome.inputs) == 1 and len(task_fields) == 1:
        return {genome.inputs[0]: task_fields[0]}
    raise GenomeError(f"genome '{genome.name}' inputs {genome.inputs} do not match task '{task.name}' inputs "
                      f"{task_fields}: rename the genome inputs to the task's fields")


class Evaluator:
    """Scores genomes on one task split with one LM client (reuse it for many genomes)."""

    def __init__(self, task: Task, client: LMClient, *, split: str = "validation", limit: int | None = None,
                 concurrency: int = 4, example_timeout_s: float = 300.0, cascade: Cascade | None = None,
                 executor: Executor | None = None, max_unscored: float = 0.2,
                 provider_wait_s: float | None = None) -> None:
        if concurrency < 1:
            raise MasforgeError(f"concurrency must be at least 1, got {concurrency}")
        if not 0 <= max_unscored < 1:
            raise MasforgeError(f"max_unscored must be a share in [0, 1), got {max_unscored}")
        self.max_unscored = max_unscored
        self.task = task
        self.client = client
        self.split = split
        self.examples = task.split(split, limit=limit)
        if not self.examples:
            raise MasforgeError(f"task '{task.name}' split '{split}' has no examples (limit={limit})")
        self.split_size = len(task.split(split)) if limit is not None and len(self.examples) == limit else \
            len(self.examples)
        """Examples the split holds (the evaluation scores the first ``limit`` of them)."""
        self.concurrency = concurrency
        self.example_timeout_s = example_timeout_s
        self.provider_wait_s = 3 * example_timeout_s if provider_wait_s is None else provider_wait_s
        """Time an example may spend waiting on LM requests on top of its own timeout: a busy shared local
        server answers a five-copy system slowly without anything being stuck."""
        self.cascade = cascade
        self.executor = executor or LocalExecutor()
        """Where the examples run (the driver keeps the decisions: cascade, budget stop, timeouts)."""

    @property
    def lm_key(self) -> str:
        """What archived results of this evaluator are keyed by (see :func:`results_key`)."""
        return results_key(self.client.config("worker"))

    def evaluate(self, genome: Genome | Any, *, threshold: float | None = None, race: Race | None = None,
                 progress: ProgressFn | None = None, validated: bool = False) -> EvalReport:
        """Score ``genome``; ``threshold`` (e.g. the best score so far) enables the cascade's early stop, and a
        ``race`` against an incumbent (which replaces the cascade) stops as soon as the paired test says the
        candidate is worse (see :mod:`masforge.evaluators.racing`). ``validated``: the caller has validated the
        genome already (a search does, once per evaluation).

        Instead of a Genome, ``genome`` may be a *system factory*: an object with ``id``, ``name`` and ``inputs``
        that, called with the LM client, returns a system like :func:`compile_genome` does (e.g. an exported
        module loaded with :func:`masforge.export.load_exported`)."""
        mapping = input_mapping(genome, self.task)
        system = (compile_genome(genome, self.client, validated=validated) if isinstance(genome, Genome)
                  else genome(self.client))
        report = EvalReport(genome.id, genome.name, self.task.name, self.split, self.lm_key, len(self.examples),
                            max_unscored=self.max_unscored, split_size=self.split_size)
        job = EvalJob(genome, self.task, mapping, system, self.client)
        started = time.perf_counter()
        batches = [self.examples]
        if race is not None:
            batches = race.batches(self.examples)
        elif self.cascade and threshold is not None and len(self.examples) > self.cascade.first_n:
            batches = [self.examples[: self.cascade.first_n], self.examples[self.cascade.first_n:]]
        try:
            for b, batch in enumerate(batches):
                self._run_batch(job, batch, report, progress)
                if report.stopped or report.too_many_unscored:
                    break
                last = b == len(batches) - 1
                if race is not None:
                    look = race.look(report.examples)
                    if look is not None:
                        report.looks.append(look)
                        if look.behind and not last:
                            report.pruned = True
                            break
                elif b == 0 and not last and self.cascade is not None and threshold is not None:
                    if report.ci[1] < threshold - self.cascade.margin:
                        report.pruned = True
                        break
        finally:
            order = {ex.id: i for i, ex in enumerate(self.examples)}
            report.examples.sort(key=lambda e: order.get(e.example_id, 0))
            report.wall_s = time.perf_counter() - started
            lm_rates.save()  # the measured seconds per LM call, for the next estimate
        return report

    def _run_batch(self, job: EvalJob, batch: list[Example], report: EvalReport,
                   progress: ProgressFn | None) -> None:
        runner = self.executor.batch(job, min(self.concurrency, len(batch)))
        pending: dict[Future[ExampleResult], tuple[Example, float]] = {}
        queue = list(batch)
        scanned = 0.0
        # Finished futures arrive here (each adds itself when done): O(1) per completion, where waiting on all
        # the futures in flight installed and removed a waiter on each of them at every wake-up.
        finished: SimpleQueue[Future[ExampleResult]] = SimpleQueue()
        interrupted = False
        try:
            while queue or pending:
                while queue and len(pending) < self.concurrency and not report.stopped:
                    ex = queue.pop(0)
                    fut = runner.submit(ex)
                    pending[fut] = (ex, time.monotonic())
                    fut.add_done_callback(finished.put)
                if not pending:
                    break
                done = _drain(finished, timeout=1.0)
                before = len(report.examples)
                for fut in done:
                    if fut not in pending:
                        continue  # an example given up for its timeout that ended afterwards
                    ex, _t0 = pending.pop(fut)
                    try:
                        report.examples.append(fut.result())
                    except RunHalted:
                        interrupted = True  # the provider or the sandbox refuses the run: nothing more to wait for
                        raise
                    except BudgetExceeded as exc:
                        report.stopped = exc.limit
                        queue.clear()
                    if progress:
                        progress(report.attempted, report.planned, report)
                now = time.monotonic()
                # Timeouts are minutes long: the examples in flight are checked at most every TIMEOUT_SCAN_S, not at
                # every completion (with 64 in flight that scan was a twentieth of the evaluation's CPU).
                due = now - scanned >= TIMEOUT_SCAN_S
                if due:
                    scanned = now
                for fut, (ex, t0) in list(pending.items()) if due else []:
                    own_s = now - t0 - runner.provider_seconds(fut)
                    limit_s = self.example_timeout_s + self.provider_wait_s
                    if own_s > self.example_timeout_s or now - t0 > limit_s:
                        # The example is recorded as a timeout and abandoned (a thread cannot be killed). Stuck
                        # waiting on a provider, the timeout is the provider's: the example is unscored.
                        pending.pop(fut)
                        on_provider = runner.waiting_on_provider(fut)
                        over = self.example_timeout_s if own_s > self.example_timeout_s else limit_s
                        error = f"example took longer than {over:g}s"
                        report.examples.append(failed_example(
                            ex, job.mapping, error + (" waiting on the LM provider" if on_provider else ""),
                            "timeout", now - t0, unscored=on_provider))
                        if progress:
                            progress(report.attempted, report.planned, report)
                        runner.abandon(fut)
                # Only a new unscored example can tip the share (counting them all at every wake-up was quadratic)
                new_unscored = any(e.unscored for e in report.examples[before:])
                if new_unscored and queue and report.too_many_unscored:
                    queue.clear()  # too much is unscored already: the rest cannot make this a score
        except KeyboardInterrupt as exc:
            report.stopped = "interrupted"
            interrupted = True
            self.client.abandon()  # the examples still running end at once, their requests cut, not awaited
            raise EvaluationInterrupted(report) from exc
        finally:
            runner.close(interrupted=interrupted)


def _drain(finished: SimpleQueue[Future[ExampleResult]], timeout: float) -> list[Future[ExampleResult]]:
    """The futures finished so far, waiting up to ``timeout`` s for the first (none: an empty list)."""
    try:
        done = [finished.get(timeout=timeout)]
    except Empty:
        return []
    while True:
        try:
            done.append(finished.get_nowait())
        except Empty:
            return done


def evaluate(genome: Genome, task: Task | str, *, lm: str | None = None, client: LMClient | None = None,
             split: str = "validation", limit: int | None = None, concurrency: int = 4,
             progress: ProgressFn | None = None) -> EvalReport:
    """Score ``genome`` on ``task`` (a Task or a built-in name) — the one-call API."""
    from masforge.evaluators.tasks import get_task

    t = get_task(task) if isinstance(task, str) else task
    c = client or LMClient({"worker": lm} if lm else None)
    return Evaluator(t, c, split=split, limit=limit, concurrency=concurrency).evaluate(genome, progress=progress)
