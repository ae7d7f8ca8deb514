"""Run a whole search: set up the run folder, archive, LMs, task and evaluator; evaluate the seeds; run
the strategy pipeline within the budget; re-score the finalists on the held-out test split; write a
summary. A stopped run (budget, Ctrl-C, crash, kill) resumes from its archive without paying twice.

The run folder keeps what a resume needs beside the archive: ``config.yaml``, ``events.jsonl`` (every admitted
candidate with its position and RNG fingerprint: the log a resume replays and checks against, see
:mod:`masforge.search.replay`) and ``ledger.jsonl`` (every request sent to a provider: a resumed run continues
the same totals, so its budget is the whole run's).
"""

from __future__ import annotations

import json
import os
import re
import signal
import statistics
import threading
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field, replace
from datetime import datetime
from pathlib import Path
from typing import Any, TextIO

from masforge.archive.protocol import ArchiveLike
from masforge.errors import BudgetExceeded, ConfigError, MasforgeError, RunHalted
from masforge.evaluators.compare import Side
from masforge.evaluators.executors import Executor, make_executor
from masforge.evaluators.racing import RaceSettings
from masforge.evaluators.runner import Cascade, Evaluator
from masforge.evaluators.tasks import Task, get_task
from masforge.genome.io import save_genome
from masforge.genome.schema import Genome
from masforge.lm.budget import Stop, free_lm_warning
from masforge.lm.client import Ledger, LMCache, LMClient, LMConfig, check_credentials, parse_lm
from masforge.lm.endpoint import catalog_price
from masforge.redact import install_log_redaction, redact_data
from masforge.sandbox.isolation import sandbox_status
from masforge.search import events as ev
from masforge.search.budget import SearchBudget
from masforge.search.config import RunConfig
from masforge.search.context import SearchContext
from masforge.search.events import LoggedCandidate
from masforge.search.fitness import Fitness
from masforge.search.pipeline import stored_by_failing_provider
from masforge.search.plan import SearchPlan, make_plan, plan_lines
from masforge.search.population import Candidate, front, merit
from masforge.search.progress import SearchProgress
from masforge.search.proposal import Proposal
from masforge.search.racing import RaceTheIncumbent
from masforge.search.references import (
    LIBRARY,
    References,
    check_fits,
    check_references,
    given_references,
    library_seeds,
)
from masforge.search.replay import Replay, read_log
from masforge.search.strategies import Strategy, get_strategy
from masforge.search.strategies.tune import STUDY_FILE
from masforge.search.verdict import SearchVerdict, TestScore, held_out_side, search_verdict


@dataclass
class SearchResult:
    """What :func:`run_search` and :func:`masforge.optimize` return."""

    run_dir: Path
    archive_path: Path
    config: RunConfig
    candidates: list[Candidate]
    test_scores: list[TestScore]
    spend: dict[str, Any]
    stop_reason: str | None
    stats: dict[str, Any] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    """One-line warnings of the run (e.g. a dollar budget that cannot bind)."""
    outage: dict[str, Any] | None = None
    """Infrastructure failures of the run: unscored examples, incomplete candidates, the first error."""
    budget: dict[str, Any] = field(default_factory=dict)
    """The limits, the search's share of them and how far spending went past them (overshoot)."""
    references: References | None = None
    """The best new system against each reference system on the held-out split (None: none was named)."""

    seed_ids: set[str] = field(default_factory=set)
    """Ids of the seeds the run started from (every other candidate is new: the search made it)."""

    @property
    def best(self) -> Candidate | None:
        """The best system overall by selection fitness, seeds included: a seed when the search found nothing
        better (see :attr:`best_new` for the best system the search made)."""
        return max(self.candidates, key=merit, default=None)

    @property
    def best_new(self) -> Candidate | None:
        """The best system the search made (no seed), by selection fitness; None when it proposed nothing new."""
        return max((c for c in self.candidates if self.is_new(c)), key=merit, default=None)

    def is_new(self, candidate: Candidate) -> bool:
        """Whether the search made ``candidate``: not a seed, nor a shipped seed it rebuilt (``rediscovers``)."""
        return candidate.id not in self.seed_ids and not candidate.rediscovers

    @property
    def best_genome(self) -> Genome | None:
        """The genome of :attr:`best` (None without candidates)."""
        return self.best.genome if self.best else None

    @property
    def front(self) -> list[Candidate]:
        """The quality-against-cost Pareto front of the candidates."""
        return front(self.candidates)

    def top(self, k: int = 5) -> list[Candidate]:
        """The ``k`` best candidates by selection fitness (seeds included), cheapest first among equals."""
        return sorted(self.candidates, key=merit, reverse=True)[:k]  # stable: equals keep their order

    def held_out(self) -> tuple[TestScore | None, TestScore | None]:
        """The held-out scores of (the best new system, the best seed), each chosen by selection score: what a
        search is for is the first beating the second on data it never saw. None where not re-scored."""
        found = [t for t in self.test_scores if not t.is_seed]
        seeds = [t for t in self.test_scores if t.is_seed]
        best = max(found, key=lambda t: t.validation, default=None)
        seed = max(seeds, key=lambda t: t.validation, default=None)
        return best, seed

    def versus_seeds(self) -> tuple[TestScore | None, TestScore | None]:
        """Deprecated: :meth:`held_out`."""
        warnings.warn("SearchResult.versus_seeds() is deprecated: use held_out()", DeprecationWarning, stacklevel=2)
        return self.held_out()

    @property
    def verdict(self) -> SearchVerdict:
        """The best new system against the best seed on the same held-out examples, paired: the mean difference
        with its 95% interval and what it supports (``.outcome``, ``.sentence``), or why there is no comparison
        (nothing new was proposed, not re-scored). Never None."""
        found, seed = self.held_out()
        new = sum(1 for c in self.candidates if self.is_new(c))
        return search_verdict(found, seed, new_systems=new, task=self.config.task, split=self.config.test_split,
                              split_size=int(self.stats.get("test_split_size") or 0))

    def open_archive(self) -> Any:
        """The run's archive, opened (use it in a ``with`` block, or close it)."""
        from masforge.archive.store import Archive

        return Archive.open(self.archive_path)


@contextmanager
def _ctrl_c_stops(ctx: SearchContext) -> Iterator[None]:
    """While the search runs, Ctrl-C also halts the search context before raising KeyboardInterrupt, so the
    search stops at its next check even where a library below us catches the interrupt. A SIGINT the user
    set to be ignored (a background job) stays ignored."""
    if threading.current_thread() is not threading.main_thread() or \
            signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
        yield
        return

    def on_sigint(signum: int, frame: Any) -> None:
        ctx.halt(Stop("interrupted", "Ctrl-C", "interrupted (Ctrl-C)"))
        signal.default_int_handler(signum, frame)

    signal.signal(signal.SIGINT, on_sigint)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, signal.default_int_handler)


HALTS = ("outage", "provider", "sandbox")
"""Stops for which the run cannot go on (nothing is re-scored, the command exits non-zero)."""
_RESUME_OVERRIDES = ("budget", "concurrency", "executor", "ray_address", "ray_workers", "references")
"""Run configuration fields a resumed run may change."""


def _folder_name(text: str) -> str:
    """A safe, short folder name (task names and strategies may hold paths, spaces or anything)."""
    return re.sub(r"[^A-Za-z0-9_.+-]+", "_", text).strip("._")[:80] or "run"


def _new_run_dir(cfg: RunConfig) -> Path:
    stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
    task = Path(cfg.task).stem if cfg.task.endswith(".jsonl") else cfg.task
    name = _folder_name(cfg.name or f"{stamp}-{task}-{'+'.join(cfg.strategy)}")
    root = Path(cfg.output)
    run_dir = root / name
    i = 1
    while run_dir.exists():
        run_dir = root / f"{name}-{i}"
        i += 1
    try:
        run_dir.mkdir(parents=True)
    except OSError as exc:
        raise ConfigError(f"{run_dir}: cannot create the run folder ({exc.strerror}); choose another --output") \
            from None
    latest = root / "latest"
    try:
        if latest.is_symlink() or latest.exists():
            latest.unlink()
        latest.symlink_to(run_dir.name)
    except OSError:
        pass  # a convenience only
    return run_dir


def build_task(cfg: RunConfig) -> Task:
    """The task a configuration names (built-in name or .jsonl path)."""
    return get_task(cfg.task, data_dir=cfg.data_dir, seed=cfg.seed, **cfg.task_options)


def build_lms(cfg: RunConfig) -> dict[str, LMConfig]:
    """The run's LM aliases (``worker``, ``meta``), each checked (provider known, API key present)."""
    worker = parse_lm(cfg.lm)
    if cfg.api_base:
        worker = replace(worker, api_base=cfg.api_base)
    if cfg.api_key_env:
        worker = replace(worker, api_key_env=cfg.api_key_env)
    meta = parse_lm(cfg.meta_lm) if cfg.meta_lm else worker
    for c in (worker, meta):
        check_credentials(c)
    return {"worker": worker, "meta": meta}


def build_pipeline(cfg: RunConfig) -> list[Strategy]:
    """Every strategy of the pipeline, built with its options checked: done before anything is paid for, so a
    bad name or option is one line at the start, not a traceback after the seeds were evaluated."""
    stray = [k for k in cfg.strategy_options if k not in cfg.strategy]
    if stray:
        raise ConfigError(f"strategy_options: '{stray[0]}' is not in the pipeline ({', '.join(cfg.strategy)}); "
                          "add it to strategy or remove its options")
    return [get_strategy(name, **cfg.strategy_options.get(name, {})) for name in cfg.strategy]


def build_executor(cfg: RunConfig) -> Executor:
    """Where the run's evaluations happen (``local`` threads, or a Ray cluster)."""
    if cfg.executor == "ray":
        return make_executor("ray", address=cfg.ray_address, workers=cfg.ray_workers,
                             worker_concurrency=cfg.concurrency)
    return make_executor(cfg.executor)


def check_run(cfg: RunConfig) -> None:
    """Refuse, in one line, what would fail later: the strategy pipeline and its options, the LMs, the references."""
    build_pipeline(cfg)
    build_lms(cfg)
    given_references(cfg.references)


def _lm_prices(client: LMClient) -> dict[str, tuple[bool, bool]]:
    """For each LM of the run: (free, price known)."""
    out: dict[str, tuple[bool, bool]] = {}
    for alias in ("worker", "meta"):
        cfg: LMConfig = client.config(alias)
        priced = cfg.price_in_per_m is not None or cfg.price_out_per_m is not None
        if priced:
            out[cfg.model] = (not (cfg.price_in_per_m or cfg.price_out_per_m), True)
        elif cfg.is_local or cfg.is_fake:
            out[cfg.model] = (True, True)
        else:
            out[cfg.model] = (False, catalog_price(cfg.model) != (0.0, 0.0))
    return out


def run_search(cfg: RunConfig | None = None, *, resume: str | Path | None = None, progress: bool = True,
               task: Task | None = None, archive: ArchiveLike | None = None, console: Any = None,
               executor: Executor | None = None) -> SearchResult:
    """Run (or resume) a search. ``task``/``archive``/``executor`` objects may be passed instead of names (API
    use; an executor passed in is left open for the caller).

    Everything that can be checked is checked before a run folder is made or an LM is called: the
    strategy pipeline and its options, the LMs (provider and key), the seeds and the task."""
    from masforge.seeds import resolve_genome

    install_log_redaction()  # provider errors that libraries log must not carry keys into the run's logs
    cfg, run_dir = _run_config(cfg, resume)
    pipeline = build_pipeline(cfg)
    lms = build_lms(cfg)
    seeds = [resolve_genome(ref) for ref in cfg.seeds]
    references = given_references(cfg.references)
    task_obj = task or build_task(cfg)
    check_fits(references, task_obj)
    if run_dir is None:
        run_dir = _new_run_dir(cfg)
        cfg.dump(run_dir / "config.yaml")
    run = _open_run(cfg, run_dir, task_obj, lms, resumed=resume is not None, archive=archive, executor=executor)

    ui = SearchProgress(console=console, enabled=progress)
    # which sandbox layers hold here (and stale sandbox processes killed at start-up) belong to the run's record
    (run_dir / "sandbox.json").write_text(json.dumps(redact_data(sandbox_status()), indent=2), encoding="utf-8")
    events = (run_dir / "events.jsonl").open("a", encoding="utf-8")
    # (prices only matter for a dollar limit; looking them up imports litellm, seconds of start-up)
    prices = _lm_prices(run.client) if cfg.budget.max_dollars is not None else {}
    warnings = [w for w in [free_lm_warning(cfg.budget, prices)] if w]
    plan = make_plan(cfg, task_obj, seeds)  # the real counts, after the split
    plan_text, plan_warnings = plan_lines(cfg, task_obj, plan, run.search_budget, lms, seeds, pipeline)
    warnings += plan_warnings
    ctx = SearchContext(task_obj, run.evaluator, run.client, run.archive, run_id=run_dir.name, budget=cfg.budget,
                        seed=cfg.seed, on_event=_listener(ui, events, run.ledger), fitness=Fitness(cfg.cost_weight),
                        run_dir=run_dir, racing=RaceTheIncumbent(run.race) if run.race else None,
                        replay=Replay(run.log))
    ui.attach(ctx)
    notices = [ev.Notice(text=line, warning=line in warnings) for line in [*plan_text, *warnings]]
    if run.log:
        notices.append(ev.Notice(text=f"resuming: replaying the {len(run.log)} candidates of the stopped run from "
                                      "the archive and the LM cache (nothing is paid twice)", warning=False))
    seed_ids: set[str] = set()
    with ui:  # one display from the first seed to the last held-out score (the stages below re-enter it)
        try:
            stop_reason = _run_strategies(ctx, ui, notices, seeds, seed_ids, pipeline, cfg.budget)
        finally:
            events.close()
        if stop_reason == "interrupted":
            run.client.abandon()  # requests still in flight are cut, not awaited, and not booked as failures
        return _finish(run, ctx, stop_reason, seed_ids, warnings, plan, ui, references)


def _run_config(cfg: RunConfig | None, resume: str | Path | None) -> tuple[RunConfig, Path | None]:
    """The run's configuration and, for a resume, its folder: the saved ``config.yaml``, with the limits ``cfg``
    names (and how the run goes, :data:`_RESUME_OVERRIDES`) put over it and saved back."""
    if resume is None:
        if cfg is None:
            raise ConfigError("run_search needs a RunConfig or resume=RUN_FOLDER")
        return cfg, None
    run_dir = Path(resume)
    if not (run_dir / "config.yaml").is_file():
        raise ConfigError(f"{run_dir}: not a masforge run folder (no config.yaml); give the folder "
                          "that `masforge search` printed")
    saved = RunConfig.load(run_dir / "config.yaml")
    if cfg is None:
        return saved, run_dir
    # a resume may raise limits (only those it names) and change how it runs
    given, merged = cfg.model_dump(exclude_unset=True), saved.model_dump()
    merged.update({k: v for k, v in given.items() if k in _RESUME_OVERRIDES and k != "budget"})
    merged["budget"] = {**merged["budget"], **given.get("budget", {})}
    cfg = RunConfig.from_data(merged)
    cfg.dump(run_dir / "config.yaml")  # a later plain resume keeps the raised limits
    return cfg, run_dir


@dataclass
class _Run:
    """What a search session works with besides the search context."""

    cfg: RunConfig
    run_dir: Path
    archive: ArchiveLike
    archive_path: Path
    search_budget: SearchBudget
    """The search's share of the budget (the rest is kept for the held-out re-scoring)."""
    ledger: Ledger
    log: list[LoggedCandidate]
    """The candidate log of the stopped run a resume replays (empty for a new run)."""
    client: LMClient
    executor: Executor
    own_executor: bool
    evaluator: Evaluator
    race: RaceSettings | None


def _open_run(cfg: RunConfig, run_dir: Path, task: Task, lms: dict[str, LMConfig], *, resumed: bool,
              archive: ArchiveLike | None, executor: Executor | None) -> _Run:
    """The archive, the ledger (continued on a resume), the LM client, the executor and the evaluator."""
    if archive is None:
        from masforge.archive.store import Archive

        archive_path = Path(cfg.archive) if cfg.archive else run_dir / "archive"
        archive = Archive.open(archive_path, create=True)
    else:
        archive_path = Path(getattr(archive, "path", run_dir / "archive"))
    search_budget = cfg.budget.for_search() if cfg.test_top_k else cfg.budget
    ledger = Ledger(search_budget, journal=run_dir / "ledger.jsonl")
    log = _resume_ledger(ledger, run_dir) if resumed else []
    cache = True if cfg.cache else LMCache(run_dir / "lm_cache.sqlite")  # --no-cache: answers of this run only
    client = LMClient(lms, ledger=ledger, seed=cfg.seed, cache=cache)
    own_executor = executor is None
    executor = executor or build_executor(cfg)
    ledger = executor.attach(client).ledger  # on a cluster, every worker spends from (and stops on) this ledger
    cascade = Cascade(first_n=cfg.cascade_first) if cfg.cascade_first and not cfg.race else None
    race = RaceSettings(cfg.race_first, cfg.race_batch, cfg.race_confidence) if cfg.race else None
    evaluator = Evaluator(task, client, split=cfg.split, limit=cfg.limit, concurrency=cfg.concurrency,
                          cascade=cascade, executor=executor, max_unscored=cfg.max_unscored)
    return _Run(cfg, run_dir, archive, archive_path, search_budget, ledger, log, client, executor, own_executor,
                evaluator, race)


def _resume_ledger(ledger: Ledger, run_dir: Path) -> list[LoggedCandidate]:
    """Continue the stopped run's spending in ``ledger``; returns its candidate log (what the replay checks)."""
    log = read_log(run_dir / "events.jsonl")
    if (run_dir / "ledger.jsonl").is_file():
        ledger.resume()  # the same ledger: what the earlier sessions spent counts
    elif log:
        spent = log[-1].spent  # a run from before the ledger journal: its last known totals
        ledger.calls, ledger.dollars = int(spent.get("llm_calls", 0)), float(spent.get("dollars", 0.0))
        ledger.prompt_tokens = int(spent.get("prompt_tokens", 0))
        ledger.completion_tokens = int(spent.get("completion_tokens", 0))
    # The replay rebuilds the tune strategy's study trial by trial; the stopped run's study, continued, would
    # seed the sampler with its trial count and lead the replay off the stopped run's path.
    (run_dir / STUDY_FILE).unlink(missing_ok=True)
    return log


def _listener(ui: SearchProgress, events: TextIO, ledger: Ledger) -> Callable[[ev.Event], None]:
    """The run's event listener: every event to the live view; each admitted candidate (not one a resume replays)
    to ``events.jsonl`` with the ledger's totals, the log a later resume replays."""

    def on_event(event: ev.Event) -> None:
        ui(event)
        if isinstance(event, ev.Admitted) and not event.replayed:
            events.write(json.dumps(redact_data(event.logged(ledger.snapshot()).row()), default=str) + "\n")
            events.flush()
            ledger.mark()

    return on_event


def _run_strategies(ctx: SearchContext, ui: SearchProgress, notices: list[ev.Notice], seeds: list[Genome],
                    seed_ids: set[str], pipeline: list[Strategy], budget: SearchBudget) -> str:
    """Evaluate the seeds (their ids go into ``seed_ids``), then run the pipeline, each strategy within its share
    of the candidates; returns why the search stopped (``interrupted`` for Ctrl-C)."""
    try:
        with ui, _ctrl_c_stops(ctx):
            for notice in notices:
                ctx.emit(notice)
            try:
                for g in seeds:
                    seed_ids.add(g.id)
                    if ctx.known(g) is None:
                        ctx.try_submit(Proposal(g, [], "seed", "hand-designed seed"), strategy="seed")
                _run_pipeline(ctx, pipeline, budget)
                owed = ctx.pipeline.retries.owed
                if owed and not ctx.should_stop():
                    ctx.emit(ev.Notice(text=f"evaluating again {len(owed)} candidates whose examples "
                                            "were too often unscored", warning=False))
                    ctx.retry_incomplete()
                ctx.should_stop()
                stop_reason = ctx.stop_reason or "strategies finished"
            except BudgetExceeded as exc:
                if isinstance(exc, RunHalted):
                    ctx.halt(Stop(exc.limit, "--lm", str(exc)))
                stop_reason = ctx.stop_reason or exc.limit
            if ctx.stopped is not None and ctx.stopped.limit == "interrupted":
                stop_reason = "interrupted"  # the Ctrl-C itself was swallowed by code below us: the flag stands
    except KeyboardInterrupt:
        stop_reason = "interrupted"
    return stop_reason


def _run_pipeline(ctx: SearchContext, pipeline: list[Strategy], budget: SearchBudget) -> None:
    """Each strategy in turn; with a candidate limit, each but the last gets its share of what is left."""
    n_stages = len(pipeline)
    for i, strategy in enumerate(pipeline):
        if budget.max_candidates is not None and i < n_stages - 1:
            remaining = budget.max_candidates - ctx.evaluated
            ctx.candidate_cap = ctx.evaluated + max(1, remaining // (n_stages - i))
        else:
            ctx.candidate_cap = None
        ctx.emit(ev.Stage(strategy=strategy.name, index=i + 1, of=n_stages))
        strategy.run(ctx)
        ctx.candidate_cap = None


def _finish(run: _Run, ctx: SearchContext, stop_reason: str, seed_ids: set[str], warnings: list[str],
            plan: SearchPlan, ui: SearchProgress | None = None, given: list[Genome] | None = None) -> SearchResult:
    """Re-score the finalists on the held-out split (unless the run was interrupted or halted) and compare the best
    new system with the reference systems (``given``, and the library's best when the run names ``library``),
    gather the run's numbers, close the executor (if ours) and the ledger, and write ``summary.json``."""
    cfg, ledger, executor = run.cfg, run.ledger, run.executor
    search_overshoot = ledger.overshoot()
    search_spent = {k: v for k, v in ledger.snapshot().items() if k in ("llm_calls", "tokens", "dollars")}
    test_scores: list[TestScore] = []
    references = None
    if stop_reason not in ("interrupted", *HALTS) and cfg.test_top_k and ctx.population:
        # the progress display goes on through the re-scoring (piped to a log: a line at least every minute)
        with ui if ui is not None else nullcontext():
            test_scores = _rescore_on_test(cfg, ctx, ctx.task, run.client, run.archive, seed_ids)
            if cfg.references:
                references = _check_references(run, ctx, given or [], test_scores)
    if cfg.references and references is None and stop_reason not in ("interrupted", *HALTS):
        references = References(None, None, note="no held-out stage ran (--test-top-k 0, or the task has no held-out "
                                                 "examples), so no reference was compared")
    outage = None
    retries, tally = ctx.pipeline.retries, ctx.pipeline.tally
    if retries.unscored_examples or retries.seen or stop_reason in HALTS:
        outage = {"unscored_examples": retries.unscored_examples,
                  "incomplete_candidates": retries.unscored_candidates,
                  "error": next((e for e in retries.errors if e), ""),
                  "failed_requests": dict(ledger.failures),
                  "message": ctx.stopped.message if ctx.stopped and ctx.stopped.limit in HALTS else ""}
    budget_info = {"limits": cfg.budget.model_dump(), "search": run.search_budget.model_dump(),
                   "spent_search": search_spent, "overshoot_search": search_overshoot, "overshoot": ledger.overshoot(),
                   "max_in_flight": ledger.max_in_flight}
    stats = {"evaluated": ctx.evaluated, "rejected": tally.rejected, "duplicates": tally.duplicates,
             "reused": tally.reused, "restored": tally.restored, "generations": ctx.generation, "waited": tally.waited,
             "incomplete": len(retries.unscored_candidates), "incomplete_seen": retries.seen,
             "unscored_examples": retries.unscored_examples, "replayed": min(len(run.log), len(ctx.population)),
             "diverged_at": ctx.replay.diverged, "race_drops": tally.race_drops,
             "incumbent": ctx.incumbent.id if ctx.incumbent else None, "credit": ctx.credit.summary(),
             # new systems scored with no new LM call (every answer they needed was in the answer cache)
             "free": sum(1 for c in ctx.population if c.id not in seed_ids and not c.reused and not c.llm_calls),
             "probed": len(ctx.costs.known),
             "selection_examples": plan.examples, "test_examples": plan.test_examples,
             "test_split_size": plan.test_size}
    if executor.name != "local":
        stats["executor"] = executor.describe()
    # Only examples given up for their timeout can still be running: cut their requests, so that exiting does not
    # wait for answers nobody reads (they are booked as abandoned, not failed).
    run.client.abandon()
    if run.own_executor:
        executor.close()  # the ledger keeps the final totals
    ledger.close()
    result = SearchResult(run_dir=run.run_dir, archive_path=run.archive_path, config=cfg,
                          candidates=list(ctx.population), test_scores=test_scores, spend=ledger.snapshot(),
                          stop_reason=stop_reason, stats=stats, warnings=warnings, outage=outage, budget=budget_info,
                          references=references, seed_ids=set(seed_ids))
    _write_summary(result, seed_ids)
    return result


def _rescore_on_test(cfg: RunConfig, ctx: SearchContext, task: Task, client: LMClient, archive: ArchiveLike,
                     seed_ids: set[str]) -> list[TestScore]:
    """Finalists (top-k by validation, plus the best seed) on the held-out split, within what is left of the
    whole budget (the search stopped at its share of it)."""
    client.ledger.budget = cfg.budget
    finalists = ctx.best(cfg.test_top_k)
    ranked = ctx.best(len(ctx.population))
    # A shipped seed the search rebuilt (under other agent names) counts as a seed: it is not a new system.
    seeds = [c for c in ranked if c.id in seed_ids or c.rediscovers]
    found = [c for c in ranked if c.id not in seed_ids and not c.rediscovers and not c.pruned]
    # The best seed and the best new system always: the comparison the search is for.
    for extra in (seeds[:1] + found[:1]):
        if extra not in finalists:
            finalists.append(extra)
    tester = _held_out_evaluator(cfg, ctx, task, client)
    if tester is None:
        return []
    out = []
    for cand in finalists:
        prev = archive.get_result(cand.id, task.name, cfg.test_split, tester.lm_key)
        unscored, stopped = 0, None
        if prev is None or prev.n != len(tester.examples) or stored_by_failing_provider(prev):
            with ctx.pipeline.claim(cand.genome, cfg.test_split):  # a search sharing the archive may be scoring it
                prev = archive.get_result(cand.id, task.name, cfg.test_split, tester.lm_key)
                if prev is None or prev.n != len(tester.examples) or stored_by_failing_provider(prev):
                    rep = tester.evaluate(cand.genome, progress=ctx.pipeline.announce(cand.genome, tester))
                    # per-example scores kept (example_scores): the verdict pairs the found system with the best seed
                    prev = rep.result(run=ctx.run_id)
                    unscored, stopped = rep.unscored, rep.stopped
                    if rep.stopped is None and not rep.incomplete:
                        archive.add_result(cand.id, prev)  # a cut or incomplete re-scoring is never a score
        out.append(TestScore(cand.id, cand.genome.name, cand.score, prev.score,
                             (prev.ci_low or 0.0, prev.ci_high or 0.0), prev.dollars / max(prev.n, 1),
                             cand.id in seed_ids or bool(cand.rediscovers), prev.n, unscored, stopped,
                             dict(prev.example_scores)))
        if stopped:
            break  # the budget is spent: the remaining finalists get no held-out score
    return out


def _held_out_evaluator(cfg: RunConfig, ctx: SearchContext, task: Task, client: LMClient) -> Evaluator | None:
    """The evaluator of the held-out split (None: the task has no such examples)."""
    try:
        return Evaluator(task, client, split=cfg.test_split, limit=cfg.test_limit, concurrency=cfg.concurrency,
                         executor=ctx.evaluator.executor, max_unscored=cfg.max_unscored)
    except MasforgeError:
        return None


def _check_references(run: _Run, ctx: SearchContext, given: list[Genome], test_scores: list[TestScore]
                      ) -> References | None:
    """The best new system against each reference on the held-out examples it was scored on, paired; a reference
    re-scored as a finalist (a seed of the run) is read back, a stored complete result too."""
    cfg, task = run.cfg, ctx.task
    tester = _held_out_evaluator(cfg, ctx, task, run.client)
    if tester is None:
        return None
    scored = {t.genome_id: t for t in test_scores if t.example_scores}
    found = max((t for t in scored.values() if not t.is_seed), key=lambda t: t.validation, default=None)

    def held_out(genome: Genome) -> Side:
        known = scored.get(genome.id)
        if known is not None:
            return held_out_side(known, cfg.task, cfg.test_split, tester.split_size)
        prev = run.archive.get_result(genome.id, task.name, cfg.test_split, tester.lm_key)
        if prev is not None and prev.n == len(tester.examples) and not stored_by_failing_provider(prev):
            scores, dollars = dict(prev.example_scores), prev.dollars
        else:
            rep = tester.evaluate(genome, progress=ctx.pipeline.announce(genome, tester))
            scores, dollars = rep.example_scores(), rep.dollars
        return Side(name=genome.name, genome_id=genome.id, task=cfg.task, split=cfg.test_split, lm_key="",
                    scores=scores, dollars=dollars, tokens=0, llm_calls=0, planned=len(tester.examples),
                    split_size=tester.split_size)

    library = library_seeds(task) if LIBRARY in cfg.references else None
    best_new = held_out_side(found, cfg.task, cfg.test_split, tester.split_size) if found else None
    announce = ctx.pipeline.announce
    return check_references(given, library, best_new, held_out, ctx.evaluator, run.archive, run.race, ctx.emit,
                            announce=lambda genome, evaluator: announce(genome, evaluator, operator="reference"))


def _brief(c: Candidate | None) -> dict[str, Any] | None:
    return {"id": c.id, "name": c.genome.name, "score": c.score, "dollars_per_example": c.dollars} if c else None


def _write_summary(result: SearchResult, seed_ids: set[str]) -> None:
    run_dir = result.run_dir
    best = result.best
    if best is not None:
        suffix = ".py" if best.genome.kind == "code" else ".yaml"
        save_genome(best.genome, run_dir / f"best{suffix}")
    scores = [c.score for c in result.candidates]
    summary = {
        "run": run_dir.name, "task": result.config.task, "strategy": result.config.strategy,
        "stop_reason": result.stop_reason, "spend": result.spend, "stats": result.stats,
        "budget": result.budget, "warnings": result.warnings, "outage": result.outage,
        "archive": os.path.relpath(result.archive_path, run_dir),
        "best": _brief(best),
        "median_score": statistics.median(scores) if scores else None,
        "front": [{"id": c.id, "name": c.genome.name, "score": c.score, "dollars_per_example": c.dollars}
                  for c in result.front],
        "test": [{k: v for k, v in t.__dict__.items() if k != "example_scores"} | {"ci": list(t.ci), "gap": t.gap}
                 for t in result.test_scores],
        "best_new": _brief(result.best_new),
        "verdict": result.verdict.to_dict(),
        "references": result.references.to_dict() if result.references else None,
        "candidates": [{"id": c.id, "name": c.genome.name, "score": c.score, "fitness": c.fitness,
                        "dollars_per_example": c.dollars, "tokens_per_example": c.tokens, "operator": c.operator,
                        "strategy": c.strategy, "generation": c.generation, "parents": c.parents,
                        "seed": c.id in seed_ids, "pruned": c.pruned, "ci": list(c.ci), "n": c.n,
                        "llm_calls": c.llm_calls, "cache_hits": c.cache_hits, "reused": c.reused,
                        "rediscovers": c.rediscovers}
                       for c in result.candidates],
        "incumbent": result.stats.get("incumbent"),
    }
    (run_dir / "summary.json").write_text(json.dumps(redact_data(summary), indent=2, default=str), encoding="utf-8")
