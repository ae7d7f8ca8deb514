"""Run a whole search: set up the run folder, archive, LMs, task and evaluator; evaluate the seeds; run
the strategy pipeline within the budget; re-score the finalists on the held-out test split; write a
summary. A stopped run (budget, Ctrl-C, crash) resumes from its archive without paying twice."""

from __future__ import annotations

import json
import os
import re
import statistics
import time
from dataclasses import dataclass, field, replace
from datetime import datetime
from pathlib import Path
from typing import Any

from masforge.archive.protocol import ArchiveLike, ResumableArchive
from masforge.archive.records import ResultRecord
from masforge.errors import BudgetExceeded, ConfigError, MasforgeError
from masforge.evaluators.executors import Executor, make_executor
from masforge.evaluators.runner import Cascade, Evaluator
from masforge.evaluators.tasks import Task, get_task
from masforge.genome.io import save_genome
from masforge.genome.schema import Genome
from masforge.redact import install_log_redaction, redact_data
from masforge.runtime.isolation import sandbox_status
from masforge.runtime.lm import Budget, Ledger, LMClient, LMConfig, check_credentials, parse_lm
from masforge.search.config import RunConfig
from masforge.search.context import Proposal, SearchContext, SearchLimits
from masforge.search.fitness import Fitness
from masforge.search.population import Candidate, front
from masforge.search.progress import SearchProgress
from masforge.search.strategies import Strategy, get_strategy


@dataclass
class TestScore:
    """A finalist re-scored on the held-out split (never seen by the search)."""

    genome_id: str
    name: str
    validation: float
    test: float
    ci: tuple[float, float]
    dollars_per_example: float
    is_seed: bool
    n: int = 0
    """Held-out examples scored."""


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

    @property
    def best(self) -> Candidate | None:
        """Best candidate by validation fitness."""
        return max(self.candidates, key=lambda c: (c.fitness, -c.dollars), default=None)

    @property
    def best_genome(self) -> Genome | None:
        return self.best.genome if self.best else None

    @property
    def front(self) -> list[Candidate]:
        return front(self.candidates)

    def top(self, k: int = 5) -> list[Candidate]:
        return sorted(self.candidates, key=lambda c: (-c.fitness, c.dollars))[:k]

    def versus_seeds(self) -> tuple[TestScore | None, TestScore | None]:
        """(best system the search found, best seed), by validation, each with its held-out test score: what
        a search is for is the first beating the second on data it never saw. None where not re-scored."""
        found = [t for t in self.test_scores if not t.is_seed]
        seeds = [t for t in self.test_scores if t.is_seed]
        best = max(found, key=lambda t: t.validation, default=None)
        seed = max(seeds, key=lambda t: t.validation, default=None)
        return best, seed

    def open_archive(self) -> Any:
        from masforge.archive.store import Archive

        return Archive.open(self.archive_path)


_RESUME_OVERRIDES = ("budget", "concurrency", "executor", "ray_address", "ray_workers")
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
    """Refuse, in one line, what would fail later: the strategy pipeline and its options, the LMs."""
    build_pipeline(cfg)
    build_lms(cfg)


def _spent_in_run(archive: ResumableArchive, run_id: str, task: str, split: str,
                  lm_key: str) -> tuple[float, int, int]:
    dollars, tokens, calls = 0.0, 0, 0
    for rec in archive.list(run=run_id, include_pruned=True):
        r = archive.get_result(rec.genome_id, task, split, lm_key)
        if r is not None and r.extra.get("run") == run_id:
            dollars, tokens, calls = dollars + r.dollars, tokens + r.tokens, calls + r.llm_calls
    return dollars, tokens, calls


def run_search(cfg: RunConfig | None = None, *, resume: str | Path | None = None, progress: bool = True,
               task: Task | None = None, archive: ArchiveLike | None = None, console: Any = None,
               executor: Executor | None = None) -> SearchResult:
    """Run (or resume) a search. ``task``/``archive``/``executor`` objects may be passed instead of names (API
    use; an executor passed in is left open for the caller).

    Everything that can be checked is checked before a run folder is made or an LM is called: the
    strategy pipeline and its options, the LMs (provider and key), the seeds and the task."""
    from masforge.seeds import resolve_genome

    install_log_redaction()  # provider errors that libraries log must not carry keys into the run's logs
    run_dir: Path | None = None
    if resume is not None:
        run_dir = Path(resume)
        if not (run_dir / "config.yaml").is_file():
            raise ConfigError(f"{run_dir}: not a masforge run folder (no config.yaml); give the folder "
                              "that `masforge search` printed")
        saved = RunConfig.load(run_dir / "config.yaml")
        cfg = saved if cfg is None else RunConfig.from_data({**saved.model_dump(), **{
            k: v for k, v in cfg.model_dump(exclude_unset=True).items() if k in _RESUME_OVERRIDES}})
    elif cfg is None:
        raise ConfigError("run_search needs a RunConfig or resume=RUN_FOLDER")
    pipeline = build_pipeline(cfg)
    lms = build_lms(cfg)
    seeds = [resolve_genome(ref) for ref in cfg.seeds]
    task_obj = task or build_task(cfg)
    if run_dir is None:
        run_dir = _new_run_dir(cfg)
        cfg.dump(run_dir / "config.yaml")
    run_id = run_dir.name

    if archive is None:
        from masforge.archive.store import Archive

        archive_path = Path(cfg.archive) if cfg.archive else run_dir / "archive"
        archive = Archive.open(archive_path, create=True)
    else:
        archive_path = Path(getattr(archive, "path", run_dir / "archive"))

    b = cfg.budget
    spent = (0.0, 0, 0)
    if resume is not None:
        if not isinstance(archive, ResumableArchive):
            raise ConfigError(f"resume needs an archive that lists its runs ({type(archive).__name__} does not)")
        spent = _spent_in_run(archive, run_id, task_obj.name, cfg.split, lms["worker"].key())
    ledger = Ledger(Budget(max_dollars=b.max_dollars, max_tokens=b.max_tokens, max_calls=b.max_calls,
                           max_seconds=b.max_seconds), spent_dollars=spent[0], spent_tokens=spent[1],
                    spent_calls=spent[2])
    client = LMClient(lms, ledger=ledger, seed=cfg.seed)
    own_executor = executor is None
    executor = executor or build_executor(cfg)
    ledger = executor.attach(client).ledger  # on a cluster, every worker spends from (and stops on) this ledger
    cascade = Cascade(first_n=cfg.cascade_first) if cfg.cascade_first else None
    evaluator = Evaluator(task_obj, client, split=cfg.split, limit=cfg.limit, concurrency=cfg.concurrency,
                          cascade=cascade, executor=executor)

    ui = SearchProgress(console=console, enabled=progress)
    # which sandbox layers hold here (and stale sandbox processes killed at start-up) belong to the run's record
    (run_dir / "sandbox.json").write_text(json.dumps(redact_data(sandbox_status()), indent=2), encoding="utf-8")
    events = (run_dir / "events.jsonl").open("a", encoding="utf-8")

    def on_event(kind: str, data: dict[str, Any]) -> None:
        ui(kind, data)
        if kind == "candidate":
            cand = data["candidate"]
            row = {"t": time.time(), "event": kind, "id": cand.id, "name": cand.genome.name, "score": cand.score,
                   "dollars": cand.dollars, "operator": cand.operator, "strategy": cand.strategy,
                   "reused": data.get("reused", False), "spent": ledger.snapshot()}
            events.write(json.dumps(redact_data(row), default=str) + "\n")
            events.flush()

    ctx = SearchContext(task_obj, evaluator, client, archive, run_id=run_id,
                        limits=SearchLimits(max_candidates=b.max_candidates, patience=b.patience), seed=cfg.seed,
                        on_event=on_event, fitness=Fitness(cfg.cost_weight), run_dir=run_dir)
    ui.attach(ctx)
    stop_reason: str | None = None
    seed_ids: set[str] = set()
    try:
        with ui:
            try:
                if resume is not None:
                    assert isinstance(archive, ResumableArchive)
                    _restore_run(ctx, archive, run_id)
                for g in seeds:
                    seed_ids.add(g.id)
                    if ctx.known(g) is None:
                        ctx.try_submit(Proposal(g, [], "seed", "hand-designed seed"), strategy="seed")
                n_stages = len(pipeline)
                for i, strategy in enumerate(pipeline):
                    if b.max_candidates is not None and i < n_stages - 1:
                        remaining = b.max_candidates - ctx.evaluated
                        ctx.candidate_cap = ctx.evaluated + max(1, remaining // (n_stages - i))
                    else:
                        ctx.candidate_cap = None
                    ctx.emit("stage", strategy=strategy.name, index=i + 1, of=n_stages)
                    strategy.run(ctx)
                    ctx.candidate_cap = None
                stop_reason = ctx.should_stop() or "strategies finished"
            except BudgetExceeded as exc:
                stop_reason = exc.limit
    except KeyboardInterrupt:
        stop_reason = "interrupted"
    finally:
        events.close()

    test_scores: list[TestScore] = []
    if stop_reason != "interrupted" and cfg.test_top_k and ctx.population:
        test_scores = _rescore_on_test(cfg, ctx, task_obj, client, archive, seed_ids)
    stats = {"evaluated": ctx.evaluated, "rejected": ctx.rejected, "duplicates": ctx.duplicates,
             "reused": ctx.reused, "generations": ctx.generation, "waited": ctx.waited}
    if executor.name != "local":
        stats["executor"] = executor.describe()
    if own_executor:
        executor.close()  # the ledger keeps the final totals
    result = SearchResult(run_dir=run_dir, archive_path=archive_path, config=cfg, candidates=list(ctx.population),
                          test_scores=test_scores, spend=ledger.snapshot(), stop_reason=stop_reason, stats=stats)
    _write_summary(result, seed_ids)
    return result


def _restore_run(ctx: SearchContext, archive: ResumableArchive, run_id: str) -> None:
    """Put this run's stored candidates back into the population (their results are reused, not paid)."""
    records = sorted(archive.list(run=run_id, include_pruned=True), key=lambda r: r.created_at)
    for rec in records:
        genome = archive.genome(rec.genome_id)
        if archive.get_result(rec.genome_id, ctx.task.name, ctx.evaluator.split, ctx.lm_key) is None:
            continue  # its evaluation never finished: a strategy may propose it again
        ctx.try_submit(Proposal(genome, list(rec.parents), rec.operator, rec.rationale), strategy=rec.strategy)
    ctx.emit("stage", strategy="resume", restored=len(ctx.population))


def _rescore_on_test(cfg: RunConfig, ctx: SearchContext, task: Task, client: LMClient, archive: ArchiveLike,
                     seed_ids: set[str]) -> list[TestScore]:
    """Finalists (top-k by validation, plus the best seed) on the held-out split, outside the budget."""
    client.ledger.lift_limits()  # the search budget is spent; the final check is bounded by test_limit
    finalists = ctx.best(cfg.test_top_k)
    ranked = ctx.best(len(ctx.population))
    seeds = [c for c in ranked if c.id in seed_ids]
    found = [c for c in ranked if c.id not in seed_ids and not c.pruned]
    # The best seed and the best new system always: the comparison the search is for.
    for extra in (seeds[:1] + found[:1]):
        if extra not in finalists:
            finalists.append(extra)
    try:
        tester = Evaluator(task, client, split=cfg.test_split, limit=cfg.test_limit, concurrency=cfg.concurrency,
                           executor=ctx.evaluator.executor)
    except MasforgeError:
        return []
    out = []
    for cand in finalists:
        prev = archive.get_result(cand.id, task.name, cfg.test_split, tester.lm_key)
        if prev is None or prev.n != len(tester.examples):
            with ctx.claim(cand.genome, cfg.test_split):  # a search sharing the archive may be scoring it
                prev = archive.get_result(cand.id, task.name, cfg.test_split, tester.lm_key)
                if prev is None or prev.n != len(tester.examples):
                    ctx.emit("test", name=cand.genome.name)
                    prev = ResultRecord.from_summary(tester.evaluate(cand.genome).summary(), run=ctx.run_id)
                    archive.add_result(cand.id, prev)
        out.append(TestScore(cand.id, cand.genome.name, cand.score, prev.score,
                             (prev.ci_low or 0.0, prev.ci_high or 0.0), prev.dollars / max(prev.n, 1),
                             cand.id in seed_ids, prev.n))
    return out


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
        "archive": os.path.relpath(result.archive_path, run_dir),
        "best": {"id": best.id, "name": best.genome.name, "score": best.score, "dollars_per_example": best.dollars}
        if best else None,
        "median_score": statistics.median(scores) if scores else None,
        "front": [{"id": c.id, "name": c.genome.name, "score": c.score, "dollars_per_example": c.dollars}
                  for c in result.front],
        "test": [t.__dict__ | {"ci": list(t.ci)} for t in result.test_scores],
        "candidates": [{"id": c.id, "name": c.genome.name, "score": c.score, "fitness": c.fitness,
                        "dollars_per_example": c.dollars, "tokens_per_example": c.tokens, "operator": c.operator,
                        "strategy": c.strategy, "generation": c.generation, "parents": c.parents,
                        "seed": c.id in seed_ids, "ci": list(c.ci)} for c in result.candidates],
    }
    (run_dir / "summary.json").write_text(json.dumps(redact_data(summary), indent=2, default=str), encoding="utf-8")
