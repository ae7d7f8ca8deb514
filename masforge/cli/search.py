"""``masforge search``: its options, the run configuration they make (with a configuration file's), and the
tables printed when a search ends."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape
from rich.table import Table

from masforge.cli.console import console, masforge_command, print_error, runnable, task_options, user_errors
from masforge.cli.listings import strategies
from masforge.cli.options import (
    STOP_REASONS,
    ApiBaseOption,
    ApiKeyEnvOption,
    DataDirOption,
    LmOption,
    MetaLmOption,
    TaskOption,
    limit_options,
)
from masforge.errors import ConfigError, MasforgeError
from masforge.search.budget import BUDGET_LIMITS, MaxCandidates
from masforge.search.config import (
    DEFAULT_LIMIT,
    DEFAULT_MAX_CANDIDATES,
    DEFAULT_SEEDS,
    DEFAULT_SPLIT,
    MAX_TEST_LIMIT,
    MAX_TEST_TOP_K,
)
from masforge.text import distinct_names, shorten

# The run-configuration fields the search flags set, by the flag the user typed (for error messages).
SEARCH_FLAGS = {
    "task": "--task", "strategy": "--strategy", "lm": "--lm", "meta_lm": "--meta-lm", "api_base": "--api-base",
    "api_key_env": "--api-key-env",
    "seeds": "--seeds", "limit": "--limit", "test_limit": "--test-limit", "test_top_k": "--test-top-k",
    "concurrency": "--concurrency", "output": "--output", "seed": "--seed",
    **{f"budget.{limit.field}": limit.flag for limit in BUDGET_LIMITS.values()}, "split": "--split",
    "data_dir": "--data-dir", "cost_weight": "--cost-weight", "cache": "--no-cache", "task_options": "--task-option",
    "race": "--no-race", "references": "--reference",
}


# every budget limit, after --seeds, in the order a budget checks them
@limit_options(tuple(BUDGET_LIMITS), after="seeds", show_defaults={MaxCandidates.field: str(DEFAULT_MAX_CANDIDATES)})
def search(
    task: Annotated[str | None, typer.Option("--task", "-t", help="Task name or .jsonl file.")] = None,
    strategy: Annotated[str | None, typer.Option(
        "--strategy", "-s", show_default="evolve",
        help="Strategy or pipeline, e.g. 'evolve' or 'knapsack,evolve,tune'; 'list' describes them.")] = None,
    config: Annotated[Path | None, typer.Option("--config", "-c", help="Run configuration YAML.")] = None,
    resume: Annotated[Path | None, typer.Option("--resume", help="Continue a stopped run folder.")] = None,
    lm: LmOption = None,
    meta_lm: MetaLmOption = None,
    api_base: ApiBaseOption = None,
    api_key_env: ApiKeyEnvOption = None,
    seeds: Annotated[str | None, typer.Option(help="Comma-separated seed names or genome files.",
                                              show_default=",".join(DEFAULT_SEEDS))] = None,
    reference: Annotated[str | None, typer.Option(
        "--reference", help="Comma-separated systems the best new system is compared with on the held-out split "
        "when the search ends: seed names, genome files, or 'library' (every shipped seed that runs on the task, "
        "raced on the selection set first; the best two are re-scored).")] = None,
    limit: Annotated[int | None, typer.Option(
        min=1, help="Selection examples each candidate is scored on, at most (a raced candidate that is clearly "
        "worse than the incumbent stops earlier).", show_default=str(DEFAULT_LIMIT))] = None,
    test_limit: Annotated[int | None, typer.Option(
        "--test-limit", min=1, help="Held-out test examples per finalist.",
        show_default=f"3 x --limit, at most {MAX_TEST_LIMIT}")] = None,
    test_top_k: Annotated[int | None, typer.Option(
        "--test-top-k", min=0, show_default=f"-n / 5, from 1 to {MAX_TEST_TOP_K}",
        help="Finalists re-scored on the held-out test split, besides the best seed and the best new system "
        "(0: none).")] = None,
    concurrency: Annotated[int | None, typer.Option(min=1, max=256, help="Examples evaluated at once.",
                                                    show_default="4")] = None,
    output: Annotated[str | None, typer.Option("--output", "-o", help="Folder for run folders.",
                                               show_default="runs")] = None,
    seed: Annotated[int | None, typer.Option(help="Random seed.", show_default="0")] = None,
    archive: Annotated[str | None, typer.Option("--archive", help="Archive folder (several searches may share "
                                                 "one; none pays for an evaluation another did).",
                                                 show_default="<run folder>/archive")] = None,
    executor: Annotated[str | None, typer.Option("--executor", help="Where evaluations run: 'local' (threads) "
                                                  "or 'ray' (a Ray cluster; pip install 'masforge\\[ray]').",
                                                  show_default="local")] = None,
    ray_address: Annotated[str | None, typer.Option("--ray-address", help="Ray cluster: 'auto' (started here "
                                                     "with `ray start`) or HOST:PORT of its head.",
                                                     show_default="a new local cluster")] = None,
    ray_workers: Annotated[int | None, typer.Option("--ray-workers", min=1, help="Evaluation worker processes on "
                                                     "the Ray cluster.", show_default="one per free CPU")] = None,
    tune_storage: Annotated[str | None, typer.Option("--tune-storage", help="optuna storage URL of the tune "
                                                      "strategy's study: sqlite:///FILE or postgresql://...; "
                                                      "searches given the same URL work one study.",
                                                      show_default="<run folder>/optuna.sqlite3")] = None,
    tune_study: Annotated[str | None, typer.Option("--tune-study", help="Name of the tune study.",
                                                    show_default="tune-<task>")] = None,
    split: Annotated[str | None, typer.Option(help="The selection set candidates are scored on: train, validation "
                                              "or both joined with + (the held-out test split is kept for the "
                                              "finalists).", show_default=DEFAULT_SPLIT)] = None,
    no_race: Annotated[bool, typer.Option("--no-race", help="Score every candidate on every selection example "
                                          "instead of racing it against the incumbent in batches.")] = False,
    data_dir: DataDirOption = None,
    task_option: TaskOption = None,
    no_cache: Annotated[bool, typer.Option("--no-cache", help="Reuse no LM answer cached by other runs (this run "
                                           "keeps its own answers in its folder, so --resume pays nothing twice).")]
    = False,
    cost_weight: Annotated[float | None, typer.Option("--cost-weight", min=0, help="Maximise score minus this "
                                                      "many times dollars per example.", show_default="0")] = None,
    option: Annotated[list[str] | None, typer.Option(
        "--option", "-O", help="A strategy option as NAME=VALUE or STRATEGY.NAME=VALUE (e.g. population_size=8); "
        "`masforge strategies` lists them. Repeat for more.")] = None,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No live progress.")] = False,
    limits: dict[str, float] | None = None,
) -> None:
    """Search for better multi-agent systems; live progress; Ctrl-C stops cleanly (resume with --resume)."""
    from masforge.search.engine import run_search

    if strategy is not None and strategy.strip() == "list":
        strategies()
        return
    with user_errors():
        flags = {"task": task, "strategy": strategy, "lm": lm, "meta_lm": meta_lm, "api_base": api_base,
                 "api_key_env": api_key_env,
                 "seeds": seeds, "references": reference, "limit": limit, "test_limit": test_limit,
                 "test_top_k": test_top_k, "concurrency": concurrency, "output": output, "seed": seed,
                 "archive": archive,
                 "executor": executor, "ray_address": ray_address, "ray_workers": ray_workers, "split": split,
                 "data_dir": str(data_dir) if data_dir is not None else None, "cost_weight": cost_weight,
                 "cache": False if no_cache else None, "race": False if no_race else None}
        tune = {"storage": tune_storage, "study_name": tune_study}
        data = _run_data(config, flags, tune, task_option or [], option or [], limits or {})
        cfg = _run_config(data, resume)
        _announce(cfg, resume)
        result = run_search(cfg, resume=resume, progress=not quiet, console=console)
        _print_ending(result)


def _run_data(config: Path | None, flags: dict[str, object], tune: dict[str, str | None], task_option: list[str],
              option: list[str], limits: dict[str, float]) -> dict[str, object]:
    """The run configuration the flags ask for, as data: a configuration file's (if given) with the flags set on
    top (``tune``: the tune strategy's storage options; ``limits``: the budget limits, by field)."""
    from masforge.search.config import RunConfig

    data: dict[str, object] = {}
    if config is not None:
        data = RunConfig.load(config).model_dump(exclude_unset=True)
    data.update({k: v for k, v in flags.items() if v is not None})
    tune = {k: v for k, v in tune.items() if v is not None}
    if tune:
        options = dict(data.get("strategy_options") or {})  # type: ignore[call-overload]
        options["tune"] = {**options.get("tune", {}), **tune}
        data["strategy_options"] = options
    if task_option:
        data["task_options"] = {**dict(data.get("task_options") or {}),  # type: ignore[call-overload]
                                **task_options(task_option)}
    if option:
        data["strategy_options"] = strategy_option_flags(
            option, data.get("strategy") or ["evolve"], dict(data.get("strategy_options") or {}))  # type: ignore[arg-type, call-overload]
    budget = {**dict(data.get("budget") or {}), **limits}  # type: ignore[call-overload]
    if budget:
        data["budget"] = budget
    return data


def _run_config(data: dict[str, object], resume: Path | None) -> object:
    """The checked run configuration of ``data`` (errors name the flags), or None to resume a run unchanged. A
    new search's strategy, options and LM are checked here: one line before anything is printed or paid."""
    from masforge.search.config import RunConfig
    from masforge.search.engine import check_run

    if resume is not None:
        return RunConfig.from_data({"task": "resume", **data}, "command line", SEARCH_FLAGS) if data else None
    if "task" not in data:
        raise MasforgeError("give --task NAME (see `masforge tasks`) or --config run.yaml")
    cfg = RunConfig.from_data(data, "command line", SEARCH_FLAGS)
    check_run(cfg)
    return cfg


def _announce(cfg: object, resume: Path | None) -> None:
    """Say which run starts: the folder resumed, or the task, strategies and worker LM of a new search."""
    if resume is not None:
        console.print(f"resuming {resume} ...")
        return
    console.print(f"searching {escape(cfg.task)} with {'+'.join(cfg.strategy)} (worker LM: "  # type: ignore[attr-defined]
                  f"{escape(str(cfg.lm or 'local'))}) ...")  # type: ignore[attr-defined]


def _print_ending(result: object) -> None:
    """The search's result tables, then how it ended: after Ctrl-C how to go on (exit 130), else the HTML report's
    path, and exit 1 when the provider or the sandbox ended the run."""
    print_search_result(result)
    if result.stop_reason == "interrupted":  # type: ignore[attr-defined]
        console.print(runnable(f"[yellow]stopped (Ctrl-C): nothing finished is lost; continue with "
                               f"`masforge search --resume {result.run_dir}`[/yellow]"), soft_wrap=True)  # type: ignore[attr-defined]
        raise typer.Exit(130)
    from masforge.report import build_report, write_report

    try:
        path = write_report(build_report(result.run_dir), Path(result.run_dir) / "report.html")  # type: ignore[attr-defined]
        console.print(f"report: {path}")
    except MasforgeError as exc:  # the search result stands even if the report cannot be drawn
        print_error(f"report not written: {exc}")
    if result.stop_reason in ("outage", "provider", "sandbox"):  # type: ignore[attr-defined]
        raise typer.Exit(1)


def strategy_option_flags(values: list[str], pipeline: str | list[str],
                          options: dict[str, dict[str, object]]) -> dict[str, dict[str, object]]:
    """``--option`` values (``NAME=VALUE`` or ``STRATEGY.NAME=VALUE``; the value read as YAML: 8, 0.5, true, [a, b])
    merged into ``options``. A bare NAME goes to every strategy of the pipeline that has the option."""
    import yaml

    from masforge.search.config import RunConfig
    from masforge.search.strategies.base import STRATEGIES, strategy_options

    names = RunConfig.model_validate({"task": "-", "strategy": pipeline}).strategy
    merged = {k: dict(v) for k, v in options.items()}
    for item in values:
        key, sep, raw = item.partition("=")
        key = key.strip()
        if not sep or not key:
            raise ConfigError(f"--option '{item}' must look like NAME=VALUE or STRATEGY.NAME=VALUE")
        try:
            value = yaml.safe_load(raw) if raw.strip() else None
        except yaml.YAMLError:
            value = raw
        where, _, name = key.rpartition(".")
        targets = [where] if where else [s for s in names if s in STRATEGIES and name in strategy_options(
            STRATEGIES[s])]
        if where and where not in names:
            raise ConfigError(f"--option {key}: '{where}' is not in the pipeline ({', '.join(names)})")
        if not targets:
            raise ConfigError(f"--option {key}: no strategy of the pipeline ({', '.join(names)}) has an option "
                              f"'{name}' (`masforge strategies` lists them)")
        for target in targets:
            merged.setdefault(target, {})[name] = value
    return merged


def print_search_result(result: object) -> None:
    """Tables after a search: top systems, the front, held-out test scores, spend and where things are."""
    r = result  # SearchResult
    top = Table(title=f"top systems ({r.config.split})")  # type: ignore[attr-defined]
    for col in ("id", "name", "score", "95% CI", "$/example", "tokens/ex", "made by"):
        top.add_column(col, justify="right" if col in ("score", "$/example", "tokens/ex") else "left")
    ranked = r.top(8)  # type: ignore[attr-defined]
    names = distinct_names([c.genome.name for c in ranked], 40, [c.id for c in ranked])
    for c, name in zip(ranked, names, strict=True):
        top.add_row(c.short_id, name, f"{c.score:.3f}", f"[{c.ci[0]:.2f}, {c.ci[1]:.2f}]",
                    f"{c.dollars:.5f}", f"{c.tokens:.0f}", f"{c.strategy}/{c.operator}")
    console.print(top)
    if r.test_scores:  # type: ignore[attr-defined]
        test = Table(title="held-out test split (never seen by the search)")
        for col in ("name", "selection", "test", "95% CI", "gap", "$/example", "seed?"):
            test.add_column(col)
        tests = r.test_scores  # type: ignore[attr-defined]
        for t, name in zip(tests, distinct_names([t.name for t in tests], 40, [t.genome_id for t in tests]),
                           strict=True):
            cut = f" (n={t.n}, cut: {t.stopped})" if t.stopped else f" ({t.unscored} unscored)" if t.unscored else ""
            test.add_row(name, f"{t.validation:.3f}", f"{t.test:.3f}{cut}",
                         f"[{t.ci[0]:.2f}, {t.ci[1]:.2f}]", f"{t.gap:+.3f}", f"{t.dollars_per_example:.5f}",
                         "seed" if t.is_seed else "")
        console.print(test)
    spend = r.spend  # type: ignore[attr-defined]
    why = STOP_REASONS.get(r.stop_reason, r.stop_reason)  # type: ignore[attr-defined]
    kinds = ", ".join(f"{k} {v}" for k, v in sorted((spend.get("failures") or {}).items()))
    failed = f", {spend['errors']} of them failed ({kinds})" if spend.get("errors") else ""
    if spend.get("abandoned"):
        failed += f", {spend['abandoned']} abandoned in flight at a stop (not failures)"
    console.print(f"stopped: {why}; spent ${spend['dollars']:.4f}, {spend['tokens']} tokens, "
                  f"{spend['llm_calls']} LM calls (+{spend['cache_hits']} cached){failed} in {spend['elapsed_s']:.0f}s")
    over = {k: v for k, v in (r.budget.get("overshoot") or {}).items() if v}  # type: ignore[attr-defined]
    if spend.get("overruns"):
        console.print(f"[yellow]the provider overran its bill on {spend['overruns']} answers: "
                      f"${spend['uncounted_dollars']:.4f} billed beyond what was counted (see below)[/yellow]")
    if over:
        why = ("the provider's overrun" if spend.get("overruns") else
               "requests already in flight when the limit was reached")
        console.print(f"budget overshoot ({why}): " + ", ".join(f"{k} +{v:g}" for k, v in over.items()))
    for line in r.warnings:  # type: ignore[attr-defined]
        console.print(f"[yellow]{escape(line)}[/yellow]")
    outage = r.outage  # type: ignore[attr-defined]
    if outage:
        incomplete = len(outage["incomplete_candidates"])
        print_error(outage["message"] or (
            f"{outage['unscored_examples']} examples unscored and {incomplete} candidates left without a score "
            f"because the provider or the sandbox failed ({shorten(outage['error'], 160)}); they are evaluated "
            "again on --resume"))
    found, seed = r.held_out()  # type: ignore[attr-defined]
    rebuilt = {c.id: c.rediscovers for c in r.candidates if c.rediscovers}  # type: ignore[attr-defined]
    seed_label = escape(seed.name) if seed is not None else ""
    if seed is not None and rebuilt.get(seed.genome_id):  # not a seed of this run: the library's, rebuilt
        seed_label += " (rediscovered: a shipped seed the search rebuilt)"
    n_val = r.stats.get("selection_examples") or r.config.limit  # type: ignore[attr-defined]
    verdict = r.verdict  # type: ignore[attr-defined]
    comparison = verdict.comparison
    if found is not None and seed is not None and comparison is not None:
        colour = {"better": "green", "worse": "red"}.get(verdict.outcome, "yellow")
        console.print(f"held-out test, the same {verdict.n} examples for both: best new system "
                      f"[bold]{escape(found.name)}[/bold] {verdict.found_score:.3f} vs best seed "
                      f"[bold]{seed_label}[/bold] {verdict.seed_score:.3f}, difference "
                      f"{verdict.diff:+.3f} [{verdict.ci_low:+.3f}, {verdict.ci_high:+.3f}] (paired 95% CI): "
                      f"[{colour}]{escape(verdict.sentence)}[/{colour}]", soft_wrap=True)
        console.print(f"  {r.config.split} ({n_val} examples): best new system {found.validation:.3f}, "  # type: ignore[attr-defined]
                      f"best seed {seed.validation:.3f}")
    elif found is not None and seed is not None and verdict.outcome == "unpaired":
        console.print(f"held-out test: best new system [bold]{escape(found.name)}[/bold] {found.test:.3f} "
                      f"({found.n} examples) vs best seed [bold]{seed_label}[/bold] {seed.test:.3f} "
                      f"({seed.n} examples): not scored on the same examples, so no verdict")
    else:
        console.print(f"[yellow]{escape(verdict.sentence)}[/yellow]")
    best = r.best  # type: ignore[attr-defined]
    if best is not None:
        if best.rediscovers:
            seed_note = (f" (rediscovered: the search rebuilt the shipped seed {escape(best.rediscovers)} from its "
                         "own seeds, and found nothing better)")
        else:
            seed_note = " (a seed: the search found nothing better)" if not r.is_new(best) else ""  # type: ignore[attr-defined]
        console.print(f"best system overall: [bold]{escape(best.genome.name)}[/bold] ({best.short_id}) selection "
                      f"score {best.score:.3f} on {n_val} examples{seed_note}")
    if r.references is not None:  # type: ignore[attr-defined]
        for line in r.references.lines():  # type: ignore[attr-defined]
            console.print(escape(line), soft_wrap=True)
    console.print(f"run folder: {r.run_dir}   archive: {r.archive_path}")  # type: ignore[attr-defined]
    console.print(f"browse: {masforge_command()} archive list --archive {r.archive_path}")  # type: ignore[attr-defined]

