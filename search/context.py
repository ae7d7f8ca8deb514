"""Everything a strategy needs during a search, behind one object: submit a genome and get back a scored
:class:`Candidate`. The context only wires the search's parts, each a module of its own: the evaluation
:mod:`~masforge.search.pipeline` (one typed result), the :mod:`~masforge.search.population` and its incumbent, the
policies the engine gives it (:mod:`~masforge.search.acceptance`, :mod:`~masforge.search.racing`), credit, costs,
the :mod:`~masforge.search.replay` of a resumed run, :mod:`~masforge.search.retries` and its stopping."""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path

from masforge.archive.protocol import ArchiveLike
from masforge.evaluators.runner import Evaluator
from masforge.evaluators.tasks import Task
from masforge.genome.schema import Genome
from masforge.lm.budget import Stop
from masforge.lm.client import LMClient
from masforge.search import events as ev
from masforge.search.acceptance import Acceptance, PairedWin
from masforge.search.budget import SearchBudget, SearchUsage
from masforge.search.costing import COSTS_FILE, CostProbe, cheapest_first
from masforge.search.credit import Credit
from masforge.search.fitness import Fitness
from masforge.search.pipeline import EvaluationPipeline, NotScored
from masforge.search.population import Candidate, Population, front, is_near_duplicate
from masforge.search.proposal import Proposal, library_twin
from masforge.search.racing import Racing
from masforge.search.replay import Replay, rng_fingerprint
from masforge.search.retries import OUTAGE_AFTER, Retries
from masforge.search.stopping import limit_reached, unwinding

__all__ = ["Proposal", "SearchContext", "library_twin"]


class SearchContext:
    """Shared state of one search run (possibly several strategies in a pipeline)."""

    def __init__(self, task: Task, evaluator: Evaluator, client: LMClient, archive: ArchiveLike, *, run_id: str,
                 budget: SearchBudget | None = None, seed: int = 0, on_event: Callable[[ev.Event], None] | None = None,
                 strategy: str = "seed", fitness: Fitness | None = None, run_dir: Path | None = None,
                 outage_after: int = OUTAGE_AFTER, racing: Racing | None = None,
                 acceptance: Acceptance | None = None, replay: Replay | None = None) -> None:
        self.task, self.evaluator, self.client, self.archive = task, evaluator, client, archive
        self.run_id, self.run_dir = run_id, run_dir
        """The run folder, where strategies keep their own state (e.g. tune's optuna study); None: in memory."""
        self.budget = budget if budget is not None else SearchBudget(max_candidates=20)
        self.fitness = fitness or Fitness()
        """What selection maximises, the same for every kind of task."""
        self.rng, self.seed = random.Random(seed), seed
        self.on_event = on_event
        self.strategy, self.generation = strategy, 0
        self.evaluated = 0
        """Candidates evaluated or restored in this run (what ``max_candidates`` counts)."""
        self.candidate_cap: int | None = None
        """A strategy's own share of the candidates in a pipeline (set by the engine)."""
        self.stopped: Stop | None = None
        """Why the search stops (set once; see :meth:`should_stop`)."""
        self.state = Population({alias: cfg.resolved_adapter for alias, cfg in client.lms.items()})
        """The admitted candidates and the incumbent (``population``, ``by_id`` and ``incumbent`` read it)."""
        self.acceptance = acceptance or PairedWin()
        self.replay = replay or Replay()
        self.costs = CostProbe(evaluator, run_dir / COSTS_FILE if run_dir is not None else None)
        self.credit = Credit()
        self.pipeline = EvaluationPipeline(
            evaluator=evaluator, archive=archive, population=self.state, run_id=run_id, fitness=self.fitness,
            emit=self.emit, halt=self.halt, check_stop=self._check_stop, racing=racing, retries=Retries(outage_after))

    @property
    def population(self) -> list[Candidate]:
        """The candidates admitted, in order."""
        return self.state.members

    @property
    def by_id(self) -> dict[str, Candidate]:
        return self.state.by_id

    @property
    def incumbent(self) -> Candidate | None:
        """The best system so far by a paired comparison over the whole selection set (see the acceptance)."""
        return self.state.incumbent

    @property
    def rejected(self) -> int:
        return self.pipeline.tally.rejected

    @property
    def duplicates(self) -> int:
        return self.pipeline.tally.duplicates

    @property
    def reused(self) -> int:
        return self.pipeline.tally.reused

    def best(self, k: int = 1) -> list[Candidate]:
        """Top ``k`` by fitness, the incumbent first (see :meth:`Population.best`)."""
        return self.state.best(k)

    def front(self) -> list[Candidate]:
        return front(self.population)

    def known(self, genome: Genome) -> Candidate | None:
        return self.by_id.get(genome.id)

    def is_near_duplicate(self, genome: Genome) -> bool:
        """Already tried in substance (same structure and wording), so not worth paying for."""
        return genome.id in self.by_id or is_near_duplicate(genome, [c.genome for c in self.population])

    @property
    def stop_reason(self) -> str | None:
        """The name of the limit that stopped the search (``max_candidates``, ``llm_calls``, ``outage``, ...)."""
        return self.stopped.limit if self.stopped is not None else None

    def halt(self, stop: Stop) -> None:
        """Stop the search for ``stop`` (the first reason given is kept)."""
        if self.stopped is None:
            self.stopped = stop

    def should_stop(self) -> bool:
        """Whether the search (or, with a pipeline, the current strategy's share) must stop now. The reason a
        whole search stops is kept in :attr:`stopped` / :attr:`stop_reason`."""
        if self.stopped is None:
            usage = SearchUsage(candidates=self.evaluated, since_best=self.state.since_best)
            self.stopped = limit_reached(self.budget, usage, self.client.ledger,
                                         replaying=self.replay.replaying(len(self.population)))
        return self.stopped is not None or (self.candidate_cap is not None and self.evaluated >= self.candidate_cap)

    def _check_stop(self) -> None:
        """Raise :class:`BudgetExceeded` to unwind the strategy if the search (or its share) must stop."""
        if self.should_stop():
            raise unwinding(self.stopped)

    def emit(self, event: ev.Event) -> None:
        """Hand ``event`` to the listener; anything but a search event is an error at once, listener or not."""
        if not isinstance(event, ev.Event):
            raise TypeError(f"emit() takes a search event object, e.g. Note(strategy=..., message=...) from "
                            f"masforge.search.events, not the {type(event).__name__} {event!r:.60}")
        if self.on_event:
            self.on_event(event)

    def submit(self, proposal: Proposal | Genome, *, strategy: str | None = None) -> Candidate | None:
        """Validate, de-duplicate, evaluate (or reuse) and store one proposal: the scored candidate, the existing
        one for a duplicate, or None for an invalid genome. Raises :class:`BudgetExceeded` when the search must
        stop (a limit, an outage; nothing finished is lost)."""
        p = proposal if isinstance(proposal, Proposal) else Proposal(proposal)
        result = self.pipeline.run(p, strategy or self.strategy, self.generation)
        if result.candidate is not None and result.status in ("restored", "evaluated"):
            self._admit(result.candidate, reused=result.status == "restored")
        if result.status == "evaluated":
            self.retry_incomplete()  # the provider works: the candidates it failed may go again
        return result.candidate

    def try_submit(self, proposal: Proposal, *, strategy: str | None = None) -> Candidate | None:
        """Like :meth:`submit` but an invalid/rejected proposal is None instead of an error. Every proposal with
        parents is credited to its operator (``proposal.info["arm"]``, else its operator name)."""
        before = len(self.population)
        try:
            cand = self.submit(proposal, strategy=strategy)
        except NotScored:
            cand = None
        parents = [self.by_id[i] for i in proposal.parents if i in self.by_id]
        self.credit.credit_proposal(proposal, parents, cand, new=len(self.population) > before)
        return cand

    def retry_incomplete(self) -> int:
        """Evaluate again what was evaluated incompletely (:mod:`~masforge.search.retries`); how many now score."""
        return self.pipeline.retries.retry(lambda p, strategy: self.try_submit(p, strategy=strategy),
                                           self.should_stop)

    def _admit(self, cand: Candidate, *, reused: bool) -> None:
        """The acceptance has its say, the replay checks ``cand``, the population takes it, the listener hears."""
        previous = self.state.incumbent
        win = self.acceptance.accepts(cand, previous)
        if win is not None:
            self.state.incumbent = cand
            if previous is not None:
                self.emit(ev.NewIncumbent(candidate=cand, previous=previous, **asdict(win)))
        seq, rng = len(self.population), rng_fingerprint(self.rng)
        replayed, diverged = self.replay.admit(seq, cand.id, rng)
        if diverged is not None:
            self.emit(diverged)
        improved = self.state.add(cand)
        self.evaluated += 1
        self.emit(ev.Admitted(candidate=cand, reused=reused, improved=improved, seq=seq, rng=rng, replayed=replayed))

    def calls_share(self, share: float | None) -> float | None:
        """``share`` of the LM calls the search may spend (None: no share given, or no limit on calls). Of the whole
        budget, not of what is left, so a resumed run decides as the stopped one did."""
        limit = self.budget.for_search().get("llm_calls")
        return None if share is None or limit is None else share * limit

    def cheapest_first(self, proposals: list[Proposal]) -> list[Proposal]:
        """``proposals`` in the order to try them: free ones first (:func:`masforge.search.costing.cheapest_first`)."""
        return cheapest_first(proposals, self.costs, self.by_id)

    def edit_chooser(self, parent: Candidate) -> Callable[[list[str]], str]:
        """How an adaptive strategy picks a structural edit for ``parent``: the operator bandit, with a prior from
        the parent's failure kinds (see :mod:`masforge.search.credit`)."""
        return self.credit.chooser(self.rng, parent.wrong_reasons)

    def ablations(self) -> list[Proposal]:
        """Once per incumbent with several agents: it without each of its agents (see :meth:`Credit.ablations`)."""
        return self.credit.ablations(self.incumbent)
