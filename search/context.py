"""Everything a strategy needs during a search, behind one object: submit a genome and get back a scored
:class:`Candidate`, with validation, de-duplication, result reuse from the archive, evaluation, storage
and budget checks done in one place. Strategies never run an LLM system themselves."""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from masforge.archive.claims import Claim
from masforge.archive.protocol import ArchiveLike, ClaimingArchive
from masforge.archive.records import ResultRecord
from masforge.errors import BudgetExceeded, MasforgeError
from masforge.evaluators.runner import EvalReport, Evaluator
from masforge.evaluators.tasks import Task
from masforge.genome.schema import Genome
from masforge.genome.validate import problems
from masforge.runtime.lm import LMClient
from masforge.search.fitness import Fitness
from masforge.search.population import Candidate, front, is_near_duplicate

EventFn = Callable[[str, dict[str, Any]], None]


@dataclass
class SearchLimits:
    """When a search stops (None: no limit). Dollar/token/call/time limits live in the LM ledger."""

    max_candidates: int | None = 20
    patience: int | None = None
    """Stop after this many evaluated candidates without a new best."""


@dataclass
class Proposal:
    """A genome a strategy wants evaluated, with where it came from."""

    genome: Genome
    parents: list[str] = field(default_factory=list)
    operator: str = "seed"
    rationale: str = ""
    info: dict[str, Any] = field(default_factory=dict)
    """What the proposing strategy needs back when the proposal is observed (its parent, the edit, an optuna
    trial, ...): a proposal carries its own bookkeeping. Never stored in the archive."""


def _failure_notes(report: EvalReport, k: int = 4) -> list[dict[str, Any]]:
    notes = []
    for ex in report.failure_examples(k):
        first_in = next(iter(ex.inputs.values()), "")
        got = next((v for key, v in ex.outputs.items() if key != "reasoning"), "")
        notes.append({"input": str(first_in)[:600], "expected": ex.target[:200], "got": str(got)[:300],
                      "error": ex.error or "", "trace": ex.trace_summary[:800]})
    return notes


class SearchContext:
    """Shared state of one search run (possibly several strategies in a pipeline)."""

    def __init__(self, task: Task, evaluator: Evaluator, client: LMClient, archive: ArchiveLike, *, run_id: str,
                 limits: SearchLimits | None = None, seed: int = 0, on_event: EventFn | None = None,
                 strategy: str = "seed", fitness: Fitness | None = None, run_dir: Path | None = None) -> None:
        self.task = task
        self.evaluator = evaluator
        self.client = client
        self.archive = archive
        self.run_id = run_id
        self.run_dir = run_dir
        """The run folder, where strategies keep their own state (e.g. tune's optuna study); None: in memory."""
        self.limits = limits or SearchLimits()
        self.fitness = fitness or Fitness()
        """What selection maximises, the same for every kind of task."""
        self.rng = random.Random(seed)
        self.seed = seed
        self.on_event = on_event
        self.strategy = strategy
        self.population: list[Candidate] = []
        self.by_id: dict[str, Candidate] = {}
        self.evaluated = 0
        """Candidates evaluated or restored in this run (what ``max_candidates`` counts)."""
        self.rejected = 0
        self.duplicates = 0
        self.reused = 0
        self.waited = 0
        """Evaluations this run waited for because another search sharing the archive was doing them."""
        self.generation = 0
        self.since_best = 0
        self.stop_reason: str | None = None
        self.started = time.monotonic()
        self.candidate_cap: int | None = None
        """A strategy's own share of the candidates in a pipeline (set by the engine)."""

    # ----------------------------------------------------------------------------- state

    @property
    def lm_key(self) -> str:
        return self.evaluator.lm_key

    def best(self, k: int = 1) -> list[Candidate]:
        """Top ``k`` by fitness (cheaper first on ties)."""
        return sorted(self.population, key=lambda c: (-c.fitness, c.dollars))[:k]

    def front(self) -> list[Candidate]:
        return front(self.population)

    def should_stop(self) -> str | None:
        """Why the search must stop now, or None."""
        if self.stop_reason:
            return self.stop_reason
        lim = self.limits
        if lim.max_candidates is not None and self.evaluated >= lim.max_candidates:
            return "max_candidates"
        if self.candidate_cap is not None and self.evaluated >= self.candidate_cap:
            return "stage_done"
        if lim.patience is not None and self.since_best >= lim.patience:
            return "patience"
        limit = self.client.ledger.exceeded()
        return limit

    def emit(self, kind: str, **data: Any) -> None:
        if self.on_event:
            self.on_event(kind, data)

    # ----------------------------------------------------------------------------- submit

    def known(self, genome: Genome) -> Candidate | None:
        return self.by_id.get(genome.id)

    def submit(self, proposal: Proposal | Genome, *, strategy: str | None = None) -> Candidate | None:
        """Validate, de-duplicate, evaluate (or reuse) and store one proposal.

        Returns the scored candidate, the existing one for a duplicate, or None for an invalid genome.
        Raises :class:`BudgetExceeded` when the budget ends the search (nothing finished is lost).
        """
        p = proposal if isinstance(proposal, Proposal) else Proposal(proposal)
        strategy = strategy or self.strategy
        found = problems(p.genome)
        if found:
            self.rejected += 1
            self.emit("rejected", name=p.genome.name, reason=found[0], operator=p.operator)
            return None
        existing = self.by_id.get(p.genome.id)
        if existing is not None:
            self.duplicates += 1
            self.emit("duplicate", candidate=existing, operator=p.operator)
            return existing
        restored = self._restore(p, strategy)
        if restored is not None:
            return restored
        reason = self.should_stop()
        if reason:
            raise BudgetExceeded(reason, f"search stopped: {reason}")
        claim = self.claim(p.genome, self.evaluator.split)
        try:
            restored = self._restore(p, strategy)  # another search sharing the archive finished it meanwhile
            if restored is not None:
                return restored
            return self._evaluate(p, strategy)
        finally:
            claim.release()

    def claim(self, genome: Genome, split: str) -> Claim:
        """Claim (genome, task, split, LM) in the archive before paying, so searches sharing the archive never
        evaluate the same thing twice; waits while another search holds it."""
        if not isinstance(self.archive, ClaimingArchive):
            return Claim(lambda: None)  # an archive nobody else writes to

        def waiting(holder: dict[str, Any]) -> None:
            self.waited += 1
            self.emit("waiting", name=genome.name, holder=holder)

        held = self.archive.claim(genome.id, self.task.name, split, self.lm_key, run=self.run_id,
                                  stop=self.client.ledger.exceeded, on_wait=waiting)
        if held is None:
            reason = self.client.ledger.exceeded() or "stopped"
            raise BudgetExceeded(reason, f"search stopped while waiting for another search to evaluate "
                                         f"{genome.name}: {reason}")
        return held

    def _restore(self, p: Proposal, strategy: str) -> Candidate | None:
        """A result already in the archive for this task, split and LM: reuse it, pay nothing."""
        rec = self.archive.get_result(p.genome.id, self.task.name, self.evaluator.split, self.lm_key)
        if rec is None:
            return None
        self.reused += 1
        cand = self._candidate_from(p, strategy, rec.score, rec.dollars / max(rec.n, 1),
                                    rec.tokens / max(rec.n, 1), rec.latency_s, (rec.ci_low or 0.0, rec.ci_high or 0.0),
                                    rec.failures, bool(rec.extra.get("pruned")), rec.extra.get("failure_notes", []))
        self.archive.add(p.genome, parents=p.parents, strategy=strategy, operator=p.operator,
                         rationale=p.rationale, generation=self.generation, run=self.run_id)
        self._admit(cand, reused=True)
        return cand

    def _evaluate(self, p: Proposal, strategy: str) -> Candidate:
        best = self.best(1)
        threshold = best[0].score if best else None
        self.emit("evaluating", name=p.genome.name, operator=p.operator)
        try:
            report = self.evaluator.evaluate(p.genome, threshold=threshold)
        except MasforgeError as exc:
            if isinstance(exc, BudgetExceeded):
                raise
            # A genome the runtime rejects (e.g. dspy refuses a signature) is an invalid proposal.
            self.rejected += 1
            self.emit("rejected", name=p.genome.name, reason=str(exc), operator=p.operator)
            raise _Rejected(str(exc)) from exc
        if report.stopped:
            # Partial evaluations are not stored as results: a resumed run evaluates it again.
            self.stop_reason = report.stopped
            raise BudgetExceeded(report.stopped, f"budget reached while evaluating {p.genome.name}")
        n = max(report.n, 1)
        notes = _failure_notes(report)
        cand = self._candidate_from(p, strategy, report.score, report.dollars / n, report.tokens / n,
                                    report.latency_s, report.ci, report.failures, report.pruned, notes)
        self.archive.add(p.genome, parents=p.parents, strategy=strategy, operator=p.operator,
                         rationale=p.rationale, generation=self.generation, run=self.run_id)
        self.archive.add_result(p.genome.id, ResultRecord.from_summary(
            report.summary(), pruned=report.pruned, failure_notes=notes, run=self.run_id))
        self._admit(cand, reused=False)
        return cand

    def _candidate_from(self, p: Proposal, strategy: str, score: float, dollars: float, tokens: float,
                        latency: float, ci: tuple[float, float], failures: dict[str, int], pruned: bool,
                        notes: list[dict[str, Any]]) -> Candidate:
        fitness = self.fitness(score, dollars)
        return Candidate(genome=p.genome, score=score, fitness=fitness, dollars=dollars, tokens=tokens,
                         latency_s=latency, ci=ci, failures=failures, parents=list(p.parents), operator=p.operator,
                         strategy=strategy, rationale=p.rationale, generation=self.generation, pruned=pruned,
                         failure_notes=notes)

    def _admit(self, cand: Candidate, *, reused: bool) -> None:
        prev = self.best(1)
        self.population.append(cand)
        self.by_id[cand.id] = cand
        self.evaluated += 1
        improved = not prev or cand.fitness > prev[0].fitness
        self.since_best = 0 if improved else self.since_best + 1
        self.emit("candidate", candidate=cand, reused=reused, improved=improved)

    def is_near_duplicate(self, genome: Genome) -> bool:
        """Already tried in substance (same structure and wording), so not worth paying for."""
        return genome.id in self.by_id or is_near_duplicate(genome, [c.genome for c in self.population])

    def try_submit(self, proposal: Proposal, *, strategy: str | None = None) -> Candidate | None:
        """Like :meth:`submit` but an invalid/rejected proposal is None instead of an error."""
        try:
            return self.submit(proposal, strategy=strategy)
        except _Rejected:
            return None


class _Rejected(MasforgeError):
    """A proposal the runtime could not build (counted as rejected)."""
