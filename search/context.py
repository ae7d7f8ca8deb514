"""Everything a strategy needs during a search, behind one object: submit a genome and get back a scored
:class:`Candidate`, with validation, de-duplication, result reuse from the archive, evaluation, storage
and budget checks done in one place. Strategies never run an LLM system themselves.

Two duties of the context keep a search honest and resumable:

* An evaluation whose examples are too often unscored (the provider or the sandbox failed, see
  :mod:`masforge.evaluators.runner`) is *incomplete*: the genome is stored without a result, so nothing ever
  reuses it as a score, and it is evaluated again later. Several incomplete candidates in a row are an outage:
  the search stops and says so.
* A resumed run *replays* the stopped one: the same seed and strategies propose the same genomes, whose results
  come back from the archive and whose meta-agent answers come back from the LM cache, so the strategies' state
  (RNG, populations, studies) is rebuilt exactly and the run goes on as if never stopped. Every admitted
  candidate is logged with its position and a fingerprint of the RNG (:meth:`SearchContext.expect` takes that
  log back), so a replay that takes another path (a non-deterministic LM, changed options) is detected and said.
"""

from __future__ import annotations

import functools
import hashlib
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from masforge.archive.claims import Claim
from masforge.archive.protocol import ArchiveLike, ClaimingArchive
from masforge.archive.records import ResultRecord
from masforge.errors import BudgetExceeded, MasforgeError, RunHalted
from masforge.evaluators.estimate import estimate
from masforge.evaluators.one_example import refused_by_provider
from masforge.evaluators.racing import Race, RaceSettings
from masforge.evaluators.runner import EvalReport, Evaluator
from masforge.evaluators.stats import paired_difference
from masforge.evaluators.tasks import Task
from masforge.genome.schema import Genome
from masforge.genome.validate import problems
from masforge.lm.budget import Budget, Stop, Usage
from masforge.lm.client import LMClient
from masforge.search import events as ev
from masforge.search.costing import COSTS_FILE, CostProbe, cheapest_first
from masforge.search.credit import Credit
from masforge.search.events import Event, make_event
from masforge.search.fitness import Fitness
from masforge.search.population import Candidate, front, is_near_duplicate

EventFn = Callable[[Event], None]
"""A listener of the search's events (see :mod:`masforge.search.events`)."""
OUTAGE_AFTER = 3
"""Incomplete candidates in a row that mean the provider (or the sandbox) is down: the search stops."""
RETRIES_INCOMPLETE = 2
"""Times an incomplete candidate is evaluated again within a run (after that it waits for a resume)."""


def rng_fingerprint(rng: random.Random) -> str:
    """A short digest of an RNG's state (equal states, equal digests)."""
    return hashlib.sha256(repr(rng.getstate()).encode()).hexdigest()[:12]


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


def stored_by_failing_provider(rec: ResultRecord) -> bool:
    """A stored result whose failures are the provider refusing the run (kept by an earlier masforge as wrong
    answers): never reused as a score."""
    notes = rec.extra.get("failure_notes") or []
    return any(isinstance(n, dict) and refused_by_provider(str(n.get("error") or "")) for n in notes)


class SearchContext:
    """Shared state of one search run (possibly several strategies in a pipeline)."""

    def __init__(self, task: Task, evaluator: Evaluator, client: LMClient, archive: ArchiveLike, *, run_id: str,
                 budget: Budget | None = None, seed: int = 0, on_event: EventFn | None = None,
                 strategy: str = "seed", fitness: Fitness | None = None, run_dir: Path | None = None,
                 outage_after: int = OUTAGE_AFTER, race: RaceSettings | None = None) -> None:
        self.task = task
        self.evaluator = evaluator
        self.client = client
        self.archive = archive
        self.run_id = run_id
        self.run_dir = run_dir
        """The run folder, where strategies keep their own state (e.g. tune's optuna study); None: in memory."""
        self.budget = budget if budget is not None else Budget(max_candidates=20)
        """The run's limits: candidates and patience are checked here, spending by the LM ledger."""
        self.fitness = fitness or Fitness()
        """What selection maximises, the same for every kind of task."""
        self.rng = random.Random(seed)
        self.seed = seed
        self.on_event = on_event
        self.strategy = strategy
        self.population: list[Candidate] = []
        self.by_id: dict[str, Candidate] = {}
        self.by_structure: dict[str, Candidate] = {}
        """Candidates by structure id (the genome up to its agents' names): a renamed twin is a duplicate."""
        self.evaluated = 0
        """Candidates evaluated or restored in this run (what ``max_candidates`` counts)."""
        self.rejected = 0
        self.duplicates = 0
        self.reused = 0
        self.waited = 0
        """Evaluations this run waited for because another search sharing the archive was doing them."""
        self.generation = 0
        self.since_best = 0
        self.stopped: Stop | None = None
        """Why the search stops (set once; see :meth:`should_stop`)."""
        self.started = time.monotonic()
        self.candidate_cap: int | None = None
        """A strategy's own share of the candidates in a pipeline (set by the engine)."""
        self.outage_after = outage_after
        self.incomplete: list[tuple[Proposal, str]] = []
        """Proposals (with their strategy) whose evaluation was incomplete (too many unscored examples), owed
        another evaluation: after the next complete one (the provider works again) or at the end."""
        self._tries: dict[str, int] = {}
        self._retrying = False
        self.unscored_examples = 0
        self.incomplete_seen = 0
        """Evaluations that came out incomplete (a candidate evaluated again counts again)."""
        self.given_up: list[str] = []
        self.outage_errors: list[str] = []
        self._incomplete_streak = 0
        self.expected: list[dict[str, Any]] = []
        """The candidate log of the stopped run being replayed (see :meth:`expect`)."""
        self.restored = 0
        """Candidates of this run's earlier sessions taken back from the archive (a subset of ``reused``)."""
        self.diverged: int | None = None
        """Position at which a replay took another path than the stopped run, if it did."""
        self.race = race
        """How candidates race the incumbent (None: each is scored on the whole split, or by the cascade)."""
        self.incumbent: Candidate | None = None
        """The best system so far by a paired comparison over the whole selection set: it changes only when a
        candidate scored on the whole set beats it there (see :meth:`_consider`)."""
        self.race_drops = 0
        """Candidates a race stopped early because they were already worse than the incumbent."""
        self.costs = CostProbe(evaluator, run_dir / COSTS_FILE if run_dir is not None else None)
        """What proposals will cost before they run (dry runs on the answer cache)."""
        self.credit = Credit()
        """Which operators and agents made systems better (see :mod:`masforge.search.credit`)."""

    # ----------------------------------------------------------------------------- state

    @property
    def lm_key(self) -> str:
        return self.evaluator.lm_key

    def best(self, k: int = 1) -> list[Candidate]:
        """Top ``k`` by fitness (cheaper first on ties); candidates scored on the whole set come before those a race
        or cascade stopped early (a score over a few examples is not comparable), and the incumbent first."""

        def key(c: Candidate) -> tuple[bool, bool, float, float]:
            return (c is not self.incumbent, c.pruned, -c.fitness, c.dollars)

        return sorted(self.population, key=key)[:k]

    def front(self) -> list[Candidate]:
        return front(self.population)

    @property
    def stop_reason(self) -> str | None:
        """The name of the limit that stopped the search (``max_candidates``, ``llm_calls``, ``outage``, ...)."""
        return self.stopped.limit if self.stopped is not None else None

    @property
    def replaying(self) -> bool:
        """Still re-walking the candidates the stopped run had already admitted."""
        return len(self.population) < len(self.expected) and self.diverged is None

    def usage(self) -> Usage:
        return Usage(candidates=self.evaluated, since_best=self.since_best)

    def halt(self, stop: Stop) -> None:
        """Stop the search for ``stop`` (the first reason given is kept)."""
        if self.stopped is None:
            self.stopped = stop

    def should_stop(self) -> bool:
        """Whether the search (or, with a pipeline, the current strategy's share) must stop now. The reason a
        whole search stops is kept in :attr:`stopped` / :attr:`stop_reason`."""
        if self.stopped is not None:
            return True
        stop = self.budget.stop(self.usage(), progress_only=True)
        ledger = self.client.ledger
        if stop is None and ledger.halted is not None:  # the provider or the sandbox refuses the run
            stop = Stop(ledger.halted[0], "--lm", ledger.halted[1])
        # A replay re-walks points the stopped run had passed: its spend then was below the limits even if the
        # ledger, which continues from the stopped run's total, is not.
        if stop is None and not self.replaying:
            stop = ledger.budget.stop(ledger.usage(), spend_only=True)
        if stop is not None:
            self.halt(stop)
            return True
        return self.candidate_cap is not None and self.evaluated >= self.candidate_cap

    def expect(self, log: list[dict[str, Any]]) -> None:
        """Replay the stopped run whose candidate log (``seq``, ``id``, ``rng`` per admitted candidate) is
        ``log``: those candidates are checked as they come back and not reported as new."""
        self.expected = sorted((row for row in log if isinstance(row.get("seq"), int)), key=lambda r: r["seq"])

    def emit(self, event: Event | str, **data: Any) -> None:
        """Hand ``event`` (a :mod:`masforge.search.events` object) to the listener. A kind and its fields
        (``emit("note", strategy=..., message=...)``, as strategies written for older masforge do) build the event
        first; an unknown kind or field, or anything else than an event, is an error at once, listener or not."""
        if isinstance(event, str):
            event = make_event(event, **data)
        elif not isinstance(event, Event) or data:
            raise TypeError(f"emit() takes one search event (masforge.search.events), got {type(event).__name__}"
                            + (" and fields" if data else ""))
        if self.on_event:
            self.on_event(event)

    # ----------------------------------------------------------------------------- submit

    def known(self, genome: Genome) -> Candidate | None:
        return self.by_id.get(genome.id)

    def submit(self, proposal: Proposal | Genome, *, strategy: str | None = None) -> Candidate | None:
        """Validate, de-duplicate, evaluate (or reuse) and store one proposal.

        Returns the scored candidate, the existing one for a duplicate, or None for an invalid genome.
        Raises :class:`BudgetExceeded` when the search must stop (a limit, an outage; nothing finished is lost).
        """
        p = proposal if isinstance(proposal, Proposal) else Proposal(proposal)
        strategy = strategy or self.strategy
        found = problems(p.genome)
        if found:
            self.rejected += 1
            self.emit(ev.Rejected(name=p.genome.name, reason=found[0], operator=p.operator))
            return None
        existing = self.by_id.get(p.genome.id) or self.by_structure.get(p.genome.structure_id)
        if existing is not None:  # the same design, maybe under other agent names: nothing to pay for
            self.duplicates += 1
            self.emit(ev.Duplicate(candidate=existing, operator=p.operator))
            return existing
        if p.operator != "seed":
            p = self._as_library_seed(p)
            existing = self.by_id.get(p.genome.id)
            if existing is not None:
                self.duplicates += 1
                self.emit(ev.Duplicate(candidate=existing, operator=p.operator))
                return existing
        restored = self._restore(p, strategy)
        if restored is not None:
            return restored
        self._check_stop()
        claim = self.claim(p.genome, self.evaluator.split)
        try:
            restored = self._restore(p, strategy)  # another search sharing the archive finished it meanwhile
            if restored is not None:
                return restored
            cand = self._evaluate(p, strategy)
        finally:
            claim.release()
        self.retry_incomplete()  # a complete evaluation: the provider works, the candidates it failed may go again
        return cand

    def _as_library_seed(self, p: Proposal) -> Proposal:
        """A proposal that rebuilds a shipped seed under other agent names becomes that seed, marked as
        rediscovered: its answers are usually in the answer cache already, it can be a parent, and no report calls
        it new."""
        seed = library_twin(p.genome)
        if seed is None:
            return p
        genome = seed.model_copy(deep=True)
        genome.metadata = {**genome.metadata, "rediscovers": seed.name}
        return Proposal(genome, list(p.parents), p.operator, f"rediscovered {seed.name}: {p.rationale}".strip(),
                        info={**p.info, "rediscovers": seed.name})

    def _check_stop(self) -> None:
        """Raise :class:`BudgetExceeded` if the search (or the current strategy's share) must stop: it unwinds
        the strategy, whatever the reason (a limit, an outage)."""
        if self.should_stop():
            stop = self.stopped
            if stop is None:  # the current strategy's share is used up
                raise BudgetExceeded("stage_done", "search stopped: stage_done")
            raise BudgetExceeded(stop.limit, stop.message)

    def claim(self, genome: Genome, split: str) -> Claim:
        """Claim (genome, task, split, LM) in the archive before paying, so searches sharing the archive never
        evaluate the same thing twice; waits while another search holds it."""
        if not isinstance(self.archive, ClaimingArchive):
            return Claim(lambda: None)  # an archive nobody else writes to

        def waiting(holder: dict[str, Any]) -> None:
            self.waited += 1
            self.emit(ev.Waiting(name=genome.name, holder=holder))

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
        if rec is None or stored_by_failing_provider(rec):
            return None
        self.reused += 1
        ours = rec.extra.get("run") == self.run_id  # an earlier session of this run evaluated it
        if ours:
            self.restored += 1
        cand = self._candidate_from(p, strategy, rec.score, rec.dollars / max(rec.n, 1),
                                    rec.tokens / max(rec.n, 1), rec.latency_s, (rec.ci_low or 0.0, rec.ci_high or 0.0),
                                    rec.failures, bool(rec.extra.get("pruned")), rec.extra.get("failure_notes", []))
        cand.example_values = self._values(rec.example_scores, rec.example_dollars)
        cand.reused, cand.n = True, rec.n
        if ours:  # this run paid for these answers: a resumed run's summary still counts them
            cand.llm_calls, cand.cache_hits = rec.llm_calls, rec.cache_hits
        cand.wrong_reasons = dict(rec.extra.get("wrong_reasons") or {})
        self.archive.add(p.genome, parents=p.parents, strategy=strategy, operator=p.operator,
                         rationale=p.rationale, generation=self.generation, run=self.run_id)
        self._consider(cand)
        self._admit(cand, reused=True)
        return cand

    def _values(self, scores: dict[str, float], dollars: dict[str, float]) -> dict[str, float]:
        """Per-example fitness from per-example scores and dollars."""
        return {k: self.fitness(v, dollars.get(k, 0.0)) for k, v in scores.items()}

    def _race(self) -> Race | None:
        """The race a new candidate runs against the incumbent (None: no race configured, or no incumbent with
        per-example results yet, as for the first seed)."""
        inc = self.incumbent
        if self.race is None or inc is None or not inc.example_values:
            return None
        fit = self.fitness
        return self.race.against(inc.example_values, inc.genome.name,
                                 value=lambda ex: fit(ex.score, ex.dollars))

    def _consider(self, cand: Candidate) -> None:
        """Make ``cand`` the incumbent if it was scored on the whole selection set and beats the incumbent in the
        paired comparison over the examples both have (mean per-example fitness higher; ties keep the incumbent)."""
        if cand.pruned:
            return
        inc = self.incumbent
        if inc is None:
            self.incumbent = cand
            return
        common = sorted(set(cand.example_values) & set(inc.example_values))
        if common:
            diff, low, high = paired_difference([cand.example_values[k] for k in common],
                                                [inc.example_values[k] for k in common])
        else:  # results stored before per-example scores were kept: their means are all there is
            diff, low, high = cand.fitness - inc.fitness, 0.0, 0.0
        # A tie that costs fewer tokens replaces the incumbent too: that is how an agent that adds nothing is pruned.
        if diff > 0 or (diff == 0 and common and cand.tokens < inc.tokens):
            self.incumbent = cand
            self.emit(ev.NewIncumbent(candidate=cand, previous=inc, diff=diff, low=low, high=high, n=len(common)))

    def _evaluate(self, p: Proposal, strategy: str) -> Candidate:
        best = self.best(1)
        threshold = best[0].score if best else None
        race = self._race()
        progress = self.announce(p.genome, self.evaluator, operator=p.operator)
        try:
            report = self.evaluator.evaluate(p.genome, threshold=threshold, race=race, progress=progress)
        except MasforgeError as exc:
            if isinstance(exc, RunHalted):
                self.halt(Stop(exc.limit, "--lm", str(exc)))
            if isinstance(exc, BudgetExceeded):
                raise
            # A genome the runtime rejects (e.g. dspy refuses a signature) is an invalid proposal.
            self.rejected += 1
            self.emit(ev.Rejected(name=p.genome.name, reason=str(exc), operator=p.operator))
            raise _Rejected(str(exc)) from exc
        if report.stopped:
            # Partial evaluations are not stored as results: a resumed run evaluates it again.
            ledger = self.client.ledger
            stop = ledger.budget.stop(ledger.usage(), spend_only=True)
            self.halt(stop or Stop(report.stopped, report.stopped, f"budget reached: {report.stopped}"))
            raise BudgetExceeded(report.stopped, f"budget reached while evaluating {p.genome.name}")
        if report.incomplete:
            self._incomplete(p, strategy, report)
            raise _Rejected(f"incomplete: {report.unscored} of {report.attempted} examples unscored")
        self._incomplete_streak = 0
        self.unscored_examples += report.unscored
        if report.unscored:
            self.outage_errors.append(report.outage)
        n = max(report.n, 1)
        notes = _failure_notes(report)
        cand = self._candidate_from(p, strategy, report.score, report.dollars / n, report.tokens / n,
                                    report.latency_s, report.ci, report.failures, report.pruned, notes)
        summary = report.summary()
        cand.example_values = self._values(summary["example_scores"], summary["example_dollars"])
        cand.llm_calls, cand.cache_hits, cand.n = report.llm_calls, report.cache_hits, report.n
        cand.wrong_reasons = report.wrong_reasons
        self.archive.add(p.genome, parents=p.parents, strategy=strategy, operator=p.operator,
                         rationale=p.rationale, generation=self.generation, run=self.run_id)
        extra: dict[str, Any] = {"unscored": report.unscored} if report.unscored else {}
        if cand.wrong_reasons:
            extra["wrong_reasons"] = cand.wrong_reasons
        if race is not None:
            extra["race"] = {"incumbent": race.incumbent_name, "looks": summary["race"]}
            self.race_drops += int(report.pruned)
        self.archive.add_result(p.genome.id, ResultRecord.from_summary(
            summary, pruned=report.pruned, failure_notes=notes, run=self.run_id, **extra))
        self._consider(cand)
        self._admit(cand, reused=False)
        return cand

    def announce(self, genome: Genome, evaluator: Evaluator, *, operator: str | None = None
                 ) -> Callable[[int, int, EvalReport], None]:
        """Say that the evaluation of ``genome`` with ``evaluator`` starts, with its examples, LM calls and seconds
        (an ``Evaluating`` event for a candidate made by ``operator``; without one, a finalist's ``HeldOutTest``),
        and return its progress callback: each example that ends is an ``ExampleDone``."""
        planned = len(evaluator.examples)
        guess = estimate([genome], planned, self.client.config("worker"), evaluator.concurrency,
                         code=self.task.metric_name == "code")
        cost = {"planned": planned, "calls": guess.calls, "seconds": guess.seconds}
        self.emit(ev.Evaluating(name=genome.name, operator=operator, **cost) if operator is not None else
                  ev.HeldOutTest(name=genome.name, **cost))
        name = genome.name
        return lambda done, total, _report: self.emit(ev.ExampleDone(name=name, done=done, planned=total))

    def _incomplete(self, p: Proposal, strategy: str, report: EvalReport) -> None:
        """Keep the genome (and its lineage) without a result, to evaluate again; stop on an outage."""
        self.archive.add(p.genome, parents=p.parents, strategy=strategy, operator=p.operator,
                         rationale=p.rationale, generation=self.generation, run=self.run_id)
        tries = self._tries[p.genome.id] = self._tries.get(p.genome.id, 0) + 1
        if tries <= RETRIES_INCOMPLETE and all(q.genome.id != p.genome.id for q, _ in self.incomplete):
            self.incomplete.append((p, strategy))
        self.given_up = sorted({*self.given_up, p.genome.id}) if tries > RETRIES_INCOMPLETE else self.given_up
        self.unscored_examples += report.unscored
        self.outage_errors.append(report.outage)
        self.incomplete_seen += 1
        self._incomplete_streak += 1
        self.emit(ev.Incomplete(name=p.genome.name, id=p.genome.id, unscored=report.unscored,
                                attempted=report.attempted, planned=report.planned, error=report.outage))
        if self._incomplete_streak >= self.outage_after:
            self.halt(Stop("outage", "--lm", (
                f"provider outage: {self._incomplete_streak} candidates in a row had more than "
                f"{report.max_unscored:.0%} of their examples unscored ({report.outage[:200]}); none was stored as "
                "a score; continue with --resume when the provider is back")))

    def retry_incomplete(self) -> int:
        """Evaluate once more the candidates whose evaluation was incomplete (each at most
        :data:`RETRIES_INCOMPLETE` times in a run); returns how many now have a score."""
        if self._retrying or not self.incomplete:
            return 0
        self._retrying = True
        done = 0
        try:
            for item in list(self.incomplete):
                if self.should_stop():
                    break
                self.incomplete.remove(item)
                p, strategy = item
                if self.try_submit(p, strategy=strategy) is not None:
                    done += 1
        finally:
            self._retrying = False
        return done

    @property
    def unscored_candidates(self) -> list[str]:
        """Genomes left without a score in this run because their evaluations were incomplete."""
        return sorted({*(p.genome.id for p, _ in self.incomplete), *self.given_up})

    def _candidate_from(self, p: Proposal, strategy: str, score: float, dollars: float, tokens: float,
                        latency: float, ci: tuple[float, float], failures: dict[str, int], pruned: bool,
                        notes: list[dict[str, Any]]) -> Candidate:
        fitness = self.fitness(score, dollars)
        return Candidate(genome=p.genome, score=score, fitness=fitness, dollars=dollars, tokens=tokens,
                         latency_s=latency, ci=ci, failures=failures, parents=list(p.parents), operator=p.operator,
                         strategy=strategy, rationale=p.rationale, generation=self.generation, pruned=pruned,
                         failure_notes=notes, rediscovers=str(p.info.get("rediscovers") or ""))

    def _admit(self, cand: Candidate, *, reused: bool) -> None:
        seq = len(self.population)
        rng = rng_fingerprint(self.rng)
        replayed = self.replaying
        if replayed:
            want = self.expected[seq]
            if want.get("id") != cand.id or want.get("rng", rng) != rng:
                self.diverged = seq
                replayed = False
                self.emit(ev.Diverged(seq=seq, expected=str(want.get("id", ""))[:12], got=cand.short_id))
        prev = self.best(1)
        self.population.append(cand)
        self.by_id[cand.id] = cand
        self.by_structure.setdefault(cand.genome.structure_id, cand)
        self.evaluated += 1
        improved = not prev or cand.fitness > prev[0].fitness
        self.since_best = 0 if improved else self.since_best + 1
        self.emit(ev.Admitted(candidate=cand, reused=reused, improved=improved, seq=seq, rng=rng, replayed=replayed))

    def cheapest_first(self, proposals: list[Proposal]) -> list[Proposal]:
        """``proposals`` in the order to try them: free ones (every answer already in the answer cache) first,
        then by the answers they still need (see :mod:`masforge.search.costing`). Proposals this run already
        holds, and any when the run keeps no cache, keep their order."""
        if len(proposals) < 2 or not self.costs.usable():
            return proposals
        fresh = [p for p in proposals if p.genome.id not in self.by_id]
        if len(fresh) < 2:
            return proposals
        order = cheapest_first([p.genome for p in fresh], self.costs)
        known = [p for p in proposals if p.genome.id in self.by_id]
        return known + [fresh[i] for i in order]

    def is_near_duplicate(self, genome: Genome) -> bool:
        """Already tried in substance (same structure and wording), so not worth paying for."""
        return genome.id in self.by_id or is_near_duplicate(genome, [c.genome for c in self.population])

    def try_submit(self, proposal: Proposal, *, strategy: str | None = None) -> Candidate | None:
        """Like :meth:`submit` but an invalid/rejected proposal is None instead of an error. Every proposal with
        parents is credited to its operator (``proposal.info["arm"]``, else its operator name)."""
        before = len(self.population)
        try:
            cand = self.submit(proposal, strategy=strategy)
        except _Rejected:
            cand = None
        self._credit(proposal, cand, new=len(self.population) > before)
        return cand

    def _credit(self, p: Proposal, cand: Candidate | None, *, new: bool) -> None:
        """Credit the operator that made ``p`` (a win: a new child, scored on the whole set, fitter than its
        parents), and an ablation's agent."""
        parents = [self.by_id[i] for i in p.parents if i in self.by_id]
        if not parents:
            return
        won = bool(new and cand is not None and not cand.pruned
                   and cand.fitness > max(c.fitness for c in parents))
        fresh = new and cand is not None and not cand.reused
        self.credit.observe(str(p.info.get("arm") or p.operator), won,
                            new_calls=cand.llm_calls if fresh and cand else 0,
                            cached_calls=cand.cache_hits if fresh and cand else 0)
        ablated = p.info.get("ablated")
        if ablated and cand is not None:
            system = parents[0]
            common = sorted(set(system.example_values) & set(cand.example_values))
            if common:
                loss = sum(system.example_values[k] - cand.example_values[k] for k in common) / len(common)
                self.credit.record_ablation(system.id, str(ablated), loss)

    def edit_chooser(self, parent: Candidate) -> Callable[[list[str]], str]:
        """How an adaptive strategy picks a structural edit for ``parent``: the operator bandit, with a prior from
        the parent's failure kinds (see :mod:`masforge.search.credit`)."""
        return self.credit.chooser(self.rng, parent.wrong_reasons)

    def ablations(self) -> list[Proposal]:
        """Once per incumbent with several agents: the incumbent without each of its agents (an ablation study).
        What each loses is the agent's credit; an ablation that loses nothing and costs less replaces the
        incumbent (pruning). Answers of the agents kept are mostly in the answer cache already."""
        from masforge.search.operators.structural import without_agent

        inc = self.incumbent
        if inc is None or inc.genome.kind != "config" or len(inc.genome.agents) < 2 or inc.id in self.credit.ablated:
            return []
        self.credit.ablated.add(inc.id)
        out = []
        for agent in inc.genome.agents:
            child = without_agent(inc.genome, agent.id)
            if child is not None:
                out.append(Proposal(child, [inc.id], "ablate", f"{inc.genome.name} without {agent.id}",
                                    info={"arm": "ablate", "ablated": agent.id}))
        return out


@functools.cache
def _library() -> dict[str, Genome]:
    """The shipped seeds by structure id."""
    from masforge.seeds import load_seeds

    return {g.structure_id: g for g in load_seeds()}


def library_twin(genome: Genome) -> Genome | None:
    """The shipped seed ``genome`` is, up to the names of its agents (None: no seed has its design)."""
    return _library().get(genome.structure_id)


class _Rejected(MasforgeError):
    """A proposal the runtime could not build (counted as rejected)."""
