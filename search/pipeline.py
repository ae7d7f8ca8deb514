"""The evaluation pipeline: one proposal in, one typed result out.

validate once -> find it in the population (a duplicate) -> restore it from the archive, or claim it, evaluate it
and store it. The evaluator's report becomes the archive's :class:`ResultRecord` directly (``report.result()``), and
the candidate is built from that one record, whether it was just stored or restored, so a restored candidate is the
candidate its first evaluation made. A strategy never runs an LLM system itself; the pipeline asks the evaluator.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from masforge.archive.claims import Claim
from masforge.archive.protocol import ArchiveLike, ClaimingArchive
from masforge.archive.records import ResultRecord
from masforge.errors import BudgetExceeded, MasforgeError, RunHalted
from masforge.evaluators.estimate import estimate
from masforge.evaluators.one_example import refused_by_provider
from masforge.evaluators.runner import EvalReport, Evaluator, ProgressFn
from masforge.genome.schema import Genome
from masforge.genome.validate import problems
from masforge.lm.budget import Stop
from masforge.lm.ledger import Ledger
from masforge.search import events as ev
from masforge.search.fitness import Fitness
from masforge.search.population import Candidate, Population
from masforge.search.proposal import Proposal, as_library_seed
from masforge.search.racing import Racing
from masforge.search.retries import Retries

Status = Literal["invalid", "duplicate", "restored", "evaluated"]


class NotScored(MasforgeError):
    """A proposal the runtime could not build (counted as rejected), or whose evaluation was incomplete."""


@dataclass(frozen=True)
class Evaluation:
    """What the pipeline made of one proposal: ``invalid`` (no candidate), a ``duplicate`` (the candidate the
    population holds already), ``restored`` from the archive or ``evaluated`` now (the candidate built from
    ``record``, the result as the archive holds it)."""

    status: Status
    candidate: Candidate | None = None
    record: ResultRecord | None = None


@dataclass
class Tally:
    """What the pipeline did with the run's proposals."""

    rejected: int = 0
    duplicates: int = 0
    reused: int = 0
    """Results taken from the archive instead of evaluated."""
    restored: int = 0
    """Results of this run's earlier sessions taken back (a subset of ``reused``)."""
    waited: int = 0
    """Evaluations this run waited for because another search sharing the archive was doing them."""
    race_drops: int = 0
    """Candidates a race stopped early because they were already worse than the incumbent."""


def stored_by_failing_provider(rec: ResultRecord) -> bool:
    """A stored result whose failures are the provider refusing the run (kept by an earlier masforge as wrong
    answers): never reused as a score."""
    notes = rec.extra.get("failure_notes") or []
    return any(isinstance(n, dict) and refused_by_provider(str(n.get("error") or "")) for n in notes)


def failure_notes(report: EvalReport, k: int = 4) -> list[dict[str, Any]]:
    """A few failed examples (input, expected, got, error, trace summary) for feedback-driven operators."""
    notes = []
    for ex in report.failure_examples(k):
        first_in = next(iter(ex.inputs.values()), "")
        got = next((v for key, v in ex.outputs.items() if key != "reasoning"), "")
        notes.append({"input": str(first_in)[:600], "expected": ex.target[:200], "got": str(got)[:300],
                      "error": ex.error or "", "trace": ex.trace_summary[:800]})
    return notes


@dataclass
class EvaluationPipeline:
    """Evaluates a run's proposals on ``evaluator``'s split and stores them in ``archive`` under ``run_id``.

    ``check_stop`` raises :class:`BudgetExceeded` when the search must stop (it runs before anything is paid),
    ``halt`` records why the search stops, ``emit`` hands the pipeline's events on."""

    evaluator: Evaluator
    archive: ArchiveLike
    population: Population
    run_id: str
    fitness: Fitness
    emit: Callable[[ev.Event], None]
    halt: Callable[[Stop], None]
    check_stop: Callable[[], None]
    racing: Racing | None = None
    retries: Retries = field(default_factory=Retries)
    tally: Tally = field(default_factory=Tally)

    @property
    def ledger(self) -> Ledger:
        """The run's ledger, read when needed (a Ray executor puts a shared one in the client)."""
        return self.evaluator.client.ledger

    def run(self, p: Proposal, strategy: str, generation: int) -> Evaluation:
        """Validate ``p`` once, then find, restore or evaluate it. Raises :class:`NotScored` when the runtime
        refuses it or its evaluation is incomplete, :class:`BudgetExceeded` when the search must stop."""
        found = problems(p.genome)
        if found:
            self.tally.rejected += 1
            self.emit(ev.Rejected(name=p.genome.name, reason=found[0], operator=p.operator))
            return Evaluation("invalid")
        twin = self.population.twin(p.genome)  # the same design, maybe under other agent names
        if twin is None and p.operator != "seed":
            p = as_library_seed(p, self.population.auto_adapters)
            twin = self.population.by_id.get(p.genome.id)
        if twin is not None:
            self.tally.duplicates += 1
            self.emit(ev.Duplicate(candidate=twin, operator=p.operator))
            return Evaluation("duplicate", twin)
        restored = self._restore(p, strategy, generation)
        if restored is not None:
            return restored
        self.check_stop()
        with self.claim(p.genome, self.evaluator.split):
            # another search sharing the archive may have finished it meanwhile
            return self._restore(p, strategy, generation) or self._evaluate(p, strategy, generation)

    def claim(self, genome: Genome, split: str) -> Claim:
        """Claim (genome, task, split, LM) in the archive before paying, so searches sharing the archive never
        evaluate the same thing twice; waits while another search holds it."""
        if not isinstance(self.archive, ClaimingArchive):
            return Claim(lambda: None)  # an archive nobody else writes to

        def waiting(holder: dict[str, Any]) -> None:
            self.tally.waited += 1
            self.emit(ev.Waiting(name=genome.name, holder=holder))

        held = self.archive.claim(genome.id, self.evaluator.task.name, split, self.evaluator.lm_key,
                                  run=self.run_id, stop=self.ledger.exceeded, on_wait=waiting)
        if held is None:
            reason = self.ledger.exceeded() or "stopped"
            raise BudgetExceeded(reason, f"search stopped while waiting for another search to evaluate "
                                         f"{genome.name}: {reason}")
        return held

    def _restore(self, p: Proposal, strategy: str, generation: int) -> Evaluation | None:
        """A result already in the archive for this task, split and LM: reuse it, pay nothing."""
        rec = self.archive.get_result(p.genome.id, self.evaluator.task.name, self.evaluator.split,
                                      self.evaluator.lm_key)
        if rec is None or stored_by_failing_provider(rec):
            return None
        self.tally.reused += 1
        ours = rec.extra.get("run") == self.run_id  # an earlier session of this run evaluated it
        self.tally.restored += int(ours)
        self._store(p, strategy, generation)
        # this run paid for these answers if an earlier session of it did: a resumed run's summary still counts them
        return Evaluation("restored", self._candidate(rec, p, strategy, generation, reused=True, paid=ours), rec)

    def _evaluate(self, p: Proposal, strategy: str, generation: int) -> Evaluation:
        best = self.population.best(1)
        race = self.racing.race(self.population.incumbent, self.fitness) if self.racing is not None else None
        progress = self.announce(p.genome, self.evaluator, operator=p.operator)
        try:
            report = self.evaluator.evaluate(p.genome, threshold=best[0].score if best else None, race=race,
                                             progress=progress, validated=True)
        except MasforgeError as exc:
            if isinstance(exc, RunHalted):
                self.halt(Stop(exc.limit, "--lm", str(exc)))
            if isinstance(exc, BudgetExceeded):
                raise
            # A genome the runtime rejects (e.g. dspy refuses a signature) is an invalid proposal.
            self.tally.rejected += 1
            self.emit(ev.Rejected(name=p.genome.name, reason=str(exc), operator=p.operator))
            raise NotScored(str(exc)) from exc
        if report.stopped:
            # Partial evaluations are not stored as results: a resumed run evaluates it again.
            stop = self.ledger.budget.stop(self.ledger.usage(), spend_only=True)
            self.halt(stop or Stop(report.stopped, report.stopped, f"budget reached: {report.stopped}"))
            raise BudgetExceeded(report.stopped, f"budget reached while evaluating {p.genome.name}")
        self._store(p, strategy, generation)  # an incomplete one too: its lineage is kept, without a result
        if report.incomplete:
            outage = self.retries.incomplete(p, strategy, report)
            self.emit(ev.Incomplete(name=p.genome.name, id=p.genome.id, unscored=report.unscored,
                                    attempted=report.attempted, planned=report.planned, error=report.outage))
            if outage is not None:
                self.halt(outage)
            raise NotScored(f"incomplete: {report.unscored} of {report.attempted} examples unscored")
        self.retries.complete(report)
        extra: dict[str, Any] = {"unscored": report.unscored} if report.unscored else {}
        wrong = report.wrong_reasons
        if wrong:
            extra["wrong_reasons"] = wrong
        if race is not None:
            extra["race"] = {"incumbent": race.incumbent_name, "looks": [look.to_dict() for look in report.looks]}
            self.tally.race_drops += int(report.pruned)
        record = report.result(pruned=report.pruned, failure_notes=failure_notes(report), run=self.run_id, **extra)
        self.archive.add_result(p.genome.id, record)
        return Evaluation("evaluated", self._candidate(record, p, strategy, generation, reused=False, paid=True),
                          record)

    def announce(self, genome: Genome, evaluator: Evaluator, *, operator: str | None = None) -> ProgressFn:
        """Say that the evaluation of ``genome`` with ``evaluator`` starts, with its examples, LM calls and seconds
        (an ``Evaluating`` event for a candidate made by ``operator``; without one, a finalist's ``HeldOutTest``),
        and return its progress callback: each example that ends is an ``ExampleDone``."""
        planned = len(evaluator.examples)
        guess = estimate([genome], planned, evaluator.client.config("worker"), evaluator.concurrency,
                         code=evaluator.task.metric_name == "code")
        cost = {"planned": planned, "calls": guess.calls, "seconds": guess.seconds}
        self.emit(ev.Evaluating(name=genome.name, operator=operator, **cost) if operator is not None else
                  ev.HeldOutTest(name=genome.name, **cost))
        name = genome.name
        return lambda done, total, _report: self.emit(ev.ExampleDone(name=name, done=done, planned=total))

    def _store(self, p: Proposal, strategy: str, generation: int) -> None:
        self.archive.add(p.genome, parents=p.parents, strategy=strategy, operator=p.operator,
                         rationale=p.rationale, generation=generation, run=self.run_id)

    def _candidate(self, rec: ResultRecord, p: Proposal, strategy: str, generation: int, *, reused: bool,
                   paid: bool) -> Candidate:
        """The candidate ``rec`` scores (``paid``: its LM calls count as this run's)."""
        n = max(rec.n, 1)
        dollars = rec.dollars / n
        return Candidate(
            genome=p.genome, score=rec.score, fitness=self.fitness(rec.score, dollars), dollars=dollars,
            tokens=rec.tokens / n, latency_s=rec.latency_s, ci=(rec.ci_low or 0.0, rec.ci_high or 0.0),
            failures=rec.failures, parents=list(p.parents), operator=p.operator, strategy=strategy,
            rationale=p.rationale, generation=generation, pruned=bool(rec.extra.get("pruned")),
            failure_notes=rec.extra.get("failure_notes", []),
            example_values={k: self.fitness(v, rec.example_dollars.get(k, 0.0)) for k, v in rec.example_scores.items()},
            llm_calls=rec.llm_calls if paid else 0, cache_hits=rec.cache_hits if paid else 0, reused=reused,
            n=rec.n, rediscovers=str(p.info.get("rediscovers") or ""),
            wrong_reasons=dict(rec.extra.get("wrong_reasons") or {}))
