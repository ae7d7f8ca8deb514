"""The ``masforge`` command line (typer + rich).

Every user-facing failure is a :class:`~masforge.errors.MasforgeError` printed as one red line with exit
code 1; tracebacks are for bugs only.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape
from rich.panel import Panel
from rich.table import Table

from masforge.cli import archive as cli_archive
from masforge.cli import export as cli_export
from masforge.cli import models as cli_models
from masforge.cli import portfolio as cli_portfolio
from masforge.cli.console import (
    console,
    err_console,
    masforge_command,
    os_error_line,
    print_error,
    runnable,
    safe_output_streams,
    task_options,
    user_errors,
)
from masforge.errors import ConfigError, GenomeError, MasforgeError
from masforge.files import write_text_file
from masforge.redact import install_log_redaction, redact_data
from masforge.search.config import (
    DEFAULT_LIMIT,
    DEFAULT_MAX_CANDIDATES,
    DEFAULT_SEEDS,
    DEFAULT_SPLIT,
    MAX_TEST_LIMIT,
    MAX_TEST_TOP_K,
)
from masforge.seeds import resolve_genome
from masforge.text import distinct_names, shorten

app = typer.Typer(
    help="masforge: a self-evolving designer of multi-agent LLM systems.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)
def _show_version(value: bool) -> None:
    if value:
        from masforge import __version__

        print(f"masforge {__version__}")
        raise typer.Exit()


@app.callback()
def _every_command(
    version: Annotated[bool, typer.Option("--version", callback=_show_version, is_eager=True,
                                          help="Print masforge's version and exit.")] = False,
) -> None:
    """masforge: a self-evolving designer of multi-agent LLM systems."""
    safe_output_streams()


app.add_typer(cli_models.app, name="models")
app.add_typer(cli_archive.app, name="archive")
app.add_typer(cli_portfolio.app, name="portfolio")
genome_app = typer.Typer(help="Validate, inspect and compare genome files.", no_args_is_help=True)
app.add_typer(genome_app, name="genome")

LmOption = Annotated[
    str | None,
    typer.Option("--lm", help="Worker LM: a litellm model string (openai/gpt-4o-mini, ollama/llama3, ...), "
                 "'local' (default: the embedded model) or 'fake' (offline, deterministic)."),
]
MetaLmOption = Annotated[str | None, typer.Option("--meta-lm", help="Meta-agent LM (default: same as --lm).")]
ApiBaseOption = Annotated[
    str | None, typer.Option("--api-base", help="Endpoint for --lm (e.g. a vLLM or Ollama server).")
]
# the options of an evaluation (evaluate, compare)
# Help text is rich markup: a literal "[" is written escape()d, or rich takes "[default: all]" for a style tag and
# drops it (tests/test_first_hour.py checks every command's help for text lost this way).
LimitOption = Annotated[int | None, typer.Option(min=1, help=escape(
    "Only the first N examples [default: all]; more than the split holds is capped (and said so)."))]
ConcurrencyOption = Annotated[int, typer.Option(min=1, max=256, help="Examples evaluated at once.")]
BudgetUsdOption = Annotated[float | None, typer.Option("--budget-usd", min=0, help="Stop after this many dollars.")]
MaxCallsOption = Annotated[int | None, typer.Option("--max-calls", min=1, help="Stop after this many LM calls.")]
DataDirOption = Annotated[Path | None, typer.Option("--data-dir", help="Local benchmark data folder.")]
NoCacheOption = Annotated[bool, typer.Option("--no-cache", help="Do not reuse cached LM answers.")]
TaskOption = Annotated[list[str] | None, typer.Option(
    "--task-option", help="A task option as NAME=VALUE (e.g. size=1000 for rg: tasks, val_fraction=0.4 for a "
    ".jsonl file); repeat for more. Give the same ones to search, evaluate and compare: they change the split.")]


def make_client(lm: str | None, meta_lm: str | None = None, api_base: str | None = None,
                cache: bool = True) -> object:
    """An LMClient for the CLI's --lm/--meta-lm/--api-base options (credentials checked up front)."""
    from dataclasses import replace

    from masforge.lm.client import LMClient, check_credentials, parse_lm

    worker = parse_lm(lm)
    if api_base:
        worker = replace(worker, api_base=api_base)
    meta = parse_lm(meta_lm) if meta_lm else worker
    for cfg in (worker, meta):
        check_credentials(cfg)
    return LMClient({"worker": worker, "meta": meta}, cache=cache)


def _parse_fields(values: list[str]) -> dict[str, str]:
    fields: dict[str, str] = {}
    for item in values:
        name, sep, value = item.partition("=")
        if not sep or not name.strip():
            raise GenomeError(f"--field '{item}' must look like name=value")
        fields[name.strip()] = value
    return fields


@app.command()
def run(
    genome: Annotated[str, typer.Argument(help="Genome file (.yaml/.json/.py) or seed name.")],
    input: Annotated[str | None, typer.Option("--input", "-i", help="Text for the genome's first input.")] = None,
    field: Annotated[list[str] | None, typer.Option("--field", "-f", help="Other inputs as name=value.")] = None,
    lm: LmOption = None,
    api_base: ApiBaseOption = None,
    no_cache: Annotated[bool, typer.Option("--no-cache", help="Do not reuse cached LM answers.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the outputs and trace as JSON.")] = False,
) -> None:
    """Run one system on one input: print its answer and a table of every agent call."""
    from masforge.execution.compile import compile_genome
    from masforge.lm.client import LMClient

    with user_errors():
        g = resolve_genome(genome)
        inputs = _parse_fields(field or [])
        if input is not None:
            inputs.setdefault(g.inputs[0], input)
        missing = [f for f in g.inputs if f not in inputs]
        if missing:
            raise GenomeError(f"genome '{g.name}' needs input '{missing[0]}': pass --input TEXT or "
                              f"--field {missing[0]}=TEXT")
        client = make_client(lm, api_base=api_base, cache=not no_cache)
        assert isinstance(client, LMClient)
        system = compile_genome(g, client)
        with console.status(f"running {escape(g.name)} on {escape(client.config('worker').model)} ..."):
            try:
                result = system(**inputs)
            except MasforgeError:
                raise
            except Exception as exc:  # e.g. the model's reply could not be parsed: one line, not a traceback
                from masforge.evaluators.runner import classify

                first = (str(exc).strip().splitlines() or [""])[0][:300]
                raise MasforgeError(f"{g.name} failed ({classify(exc)}): {type(exc).__name__}: {first}; "
                                    "try another --lm or a larger max_tokens") from None
        if as_json:
            print(json.dumps(redact_data({"outputs": result.outputs, "trace": result.trace.to_dict(),
                                          "usage": client.ledger.snapshot()}), default=str, indent=2))
            return
        table = Table(title=f"trace of {g.name} ({g.short_id})", show_lines=False)
        for col in ("#", "agent", "copy", "round", "module", "tokens", "cost $", "latency s", "output"):
            table.add_column(col, justify="right" if col in ("#", "tokens", "cost $", "latency s") else "left")
        for i, call in enumerate(result.trace.calls, 1):
            out = call.error or "; ".join(f"{k}: {v}" for k, v in call.outputs.items() if k != "reasoning")
            table.add_row(str(i), call.agent, str(call.copy), str(call.round), call.module, str(call.tokens),
                          f"{call.cost:.5f}", f"{call.latency_s:.2f}", shorten(out, 70))
        console.print(table)
        snap = client.ledger.snapshot()
        console.print(f"LM calls {snap['llm_calls']} (+{snap['cache_hits']} cached), tokens {snap['tokens']}, "
                      f"${snap['dollars']:.5f}")
        body = "\n".join(f"[bold]{escape(str(k))}[/bold]: {escape(str(v))}" if len(g.outputs) > 1 else escape(str(v))
                         for k, v in result.outputs.items())
        console.print(Panel(body, title="answer", border_style="green"))


def eval_progress() -> object:
    """A rich progress bar for evaluations (examples, score so far, tokens, dollars, ETA)."""
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    return Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                    TextColumn("{task.fields[stats]}"), TimeElapsedColumn(), TextColumn("ETA"),
                    TimeRemainingColumn(), console=console, transient=False)


def report_table(report: object, title: str) -> Table:
    """The end-of-evaluation table: score with CI, dollars, tokens, latency, failures by kind (and why the wrong
    answers were wrong, as the metric says it: syntax, no_code, exception, ...)."""
    s = report.summary()  # type: ignore[attr-defined]
    table = Table(title=title)
    for col in ("task", "split", "n", "score", "95% CI", "$", "tokens", "LM calls", "cached", "latency s",
                "failures"):
        table.add_column(col, justify="left" if col in ("task", "split", "failures") else "right")
    reasons = ", ".join(f"{k} {v}" for k, v in sorted(report.wrong_reasons.items(),  # type: ignore[attr-defined]
                                                      key=lambda kv: -kv[1]))
    fails = ", ".join(f"{k}: {v}" + (f" ({reasons})" if k == "wrong" and reasons else "")
                      for k, v in sorted(s["failures"].items())) or "-"
    n = f"{s['n']}/{s['planned']}" if s["n"] != s["planned"] else str(s["n"])
    table.add_row(s["task"], s["split"], n, f"{s['score']:.3f}", f"[{s['ci_low']:.3f}, {s['ci_high']:.3f}]",
                  f"{s['dollars']:.4f}", str(s["tokens"]), str(s["llm_calls"]), str(s["cache_hits"]),
                  f"{s['latency_s']:.2f}", fails)
    return table


@app.command()
def evaluate(
    genome: Annotated[str, typer.Argument(help="Genome file, seed name or exported module.")],
    task: Annotated[str, typer.Option("--task", "-t", help="Task name (masforge tasks) or a .jsonl file.")],
    split: Annotated[str, typer.Option(help="train, validation or test.")] = "validation",
    limit: LimitOption = None,
    lm: LmOption = None,
    api_base: ApiBaseOption = None,
    concurrency: ConcurrencyOption = 4,
    budget_usd: BudgetUsdOption = None,
    max_calls: MaxCallsOption = None,
    data_dir: DataDirOption = None,
    task_option: TaskOption = None,
    no_cache: NoCacheOption = False,
    output: Annotated[Path | None, typer.Option("--output", "-o", help="Write the full report as JSON.")] = None,
) -> None:
    """Score a system on a task split: progress while it runs, then score with CI, cost and failures."""
    with user_errors():
        from masforge.evaluators.tasks import get_task

        g = _load_system(genome)
        t = get_task(task, data_dir=data_dir, **task_options(task_option))  # type: ignore[arg-type]
        client = _eval_client(lm, api_base, no_cache, budget_usd, max_calls)
        report = _evaluate_shown(g, t, client, split, limit, concurrency)
        if output:
            _write_json(output, report.to_dict())  # type: ignore[attr-defined]
            console.print(f"report written to {output}")
    if report.stopped == "interrupted":  # type: ignore[attr-defined]
        raise typer.Exit(130)


def _load_system(ref: str) -> object:
    """A genome from a file, seed name or exported module."""
    from masforge.export import is_exported, load_exported

    return load_exported(ref) if is_exported(ref) else resolve_genome(ref)


def _eval_client(lm: str | None, api_base: str | None, no_cache: bool, budget_usd: float | None,
                 max_calls: int | None) -> object:
    """The worker client of an evaluation, with its budget (and a warning when a paid LM has no limit)."""
    from masforge.lm.budget import Budget, free_lm_warning
    from masforge.lm.client import LMClient

    client = make_client(lm, api_base=api_base, cache=not no_cache)
    assert isinstance(client, LMClient)
    client.ledger.budget = Budget(max_dollars=budget_usd, max_calls=max_calls)
    cfg = client.config("worker")
    free = cfg.is_local or cfg.is_fake or (cfg.price_in_per_m == 0 and cfg.price_out_per_m == 0)
    warning = free_lm_warning(client.ledger.budget, {cfg.model: (free, True)})
    if warning:
        console.print(f"[yellow]{escape(warning)}[/yellow]")
    return client


def _evaluate_shown(g: object, t: object, client: object, split: str, limit: int | None,
                    concurrency: int) -> object:
    """Say what the evaluation will do and about how long it takes, evaluate with live progress, then print the
    result table and any early stop or unscored examples. Ctrl-C ends it at once with the finished examples'
    result (``stopped`` is ``interrupted``)."""
    from masforge.evaluators.estimate import estimate
    from masforge.evaluators.runner import EvaluationInterrupted, Evaluator

    ev = Evaluator(t, client, split=split, limit=limit, concurrency=concurrency)  # type: ignore[arg-type]
    name = f"{g.name} on {t.name}"  # type: ignore[attr-defined]
    n = len(ev.examples)
    worker = client.config("worker")  # type: ignore[attr-defined]
    where = f"{t.name}/{split}"  # type: ignore[attr-defined]
    if getattr(t, "split_note", ""):
        console.print(escape(t.split_note), highlight=False, soft_wrap=True)  # type: ignore[attr-defined]
    console.print(f"evaluating {escape(g.name)} on {escape(where)}: {n} examples"  # type: ignore[attr-defined]
                  f"{escape(capped_words(limit, n, where))}; {estimate([g], n, worker, concurrency).words()}",
                  highlight=False, soft_wrap=True)
    with eval_progress() as bar:  # type: ignore[attr-defined]
        job = bar.add_task(name, total=n, stats="")

        def tick(done: int, total: int, rep: object) -> None:
            snap = client.ledger.snapshot()  # type: ignore[attr-defined]
            bar.update(job, completed=done, stats=f"score {rep.score:.3f}  "  # type: ignore[attr-defined]
                       f"{snap['tokens']} tok  ${snap['dollars']:.4f}")

        try:
            report = ev.evaluate(g, progress=tick)
        except EvaluationInterrupted as stop:
            report = stop.report
    console.print(report_table(report, f"{g.name} ({g.short_id}) on {worker.model}"))  # type: ignore[attr-defined]
    if report.stopped == "interrupted":
        console.print(f"[yellow]stopped (Ctrl-C) after {report.attempted} of {report.planned} examples: the table "
                      f"covers the {report.n} finished; requests in flight were abandoned[/yellow]")
    elif report.stopped:
        print_error(f"stopped early: {STOP_REASONS.get(report.stopped, report.stopped)}; the table covers "
                    f"{report.n} finished examples")
    if report.unscored:
        what = "not a score" if report.incomplete else f"the score covers the other {report.n}"
        print_error(f"{report.unscored} of {report.attempted} examples unscored (the provider or the sandbox "
                    f"failed: {shorten(report.outage, 160)}): {what}")
    return report


def capped_words(limit: int | None, n: int, where: str) -> str:
    """What a ``--limit`` came to: `` (--limit 500 is more than the 100 that x/validation holds: all of them)``
    when it was capped, `` (all of x/validation)`` without one, else nothing."""
    if limit is not None and limit > n:
        return f" (--limit {limit} is more than the {n} that {where} holds: all of them)"
    if limit is None:
        return f" (all of {where})"
    return ""


def _write_json(path: Path, data: object) -> None:
    write_text_file(path, json.dumps(redact_data(data), indent=2, default=str))


@app.command()
def compare(
    system_a: Annotated[str, typer.Argument(metavar="A", help="The reference: genome file, seed name, exported "
                                            "module, or a report written by 'masforge evaluate -o'.")],
    system_b: Annotated[str, typer.Argument(metavar="B", help="The challenger (same kinds as A).")],
    task: Annotated[str | None, typer.Option("--task", "-t", help=escape(
        "Task to evaluate on [default: the task of a report given as A or B]."))] = None,
    split: Annotated[str | None, typer.Option(help=escape(
        "train, validation or test [default: a report's split, else validation]."))] = None,
    limit: LimitOption = None,
    lm: LmOption = None,
    api_base: ApiBaseOption = None,
    concurrency: ConcurrencyOption = 4,
    budget_usd: BudgetUsdOption = None,
    max_calls: MaxCallsOption = None,
    data_dir: DataDirOption = None,
    task_option: TaskOption = None,
    no_cache: NoCacheOption = False,
    output: Annotated[Path | None, typer.Option("--output", "-o", help="Write the comparison as JSON.")] = None,
) -> None:
    """Is B better than A? Both on the same examples, paired: the difference with its 95% CI, wins and losses."""
    from masforge.evaluators.compare import Side, report_side
    from masforge.evaluators.compare import compare as paired_comparison

    with user_errors():
        given = {ref: side for ref in (system_a, system_b) if (side := report_side(ref)) is not None}
        known = next(iter(given.values()), None)
        task_name = task or (known.task if known else None)
        if task_name is None:
            raise ConfigError("compare needs --task (or a report from 'masforge evaluate -o' as A or B)")
        split_name = split or (known.split if known else "validation")
        # the same examples as the report's (the first N of the split), unless asked otherwise
        limit = limit or (max(side.planned for side in given.values()) if given else None)
        sides: list[Side] = []
        client = None
        interrupted = False
        for ref in (system_a, system_b):
            if ref in given:
                sides.append(given[ref])
                continue
            from masforge.evaluators.tasks import get_task

            g = _load_system(ref)
            t = get_task(task_name, data_dir=data_dir, **task_options(task_option))  # type: ignore[arg-type]
            client = client or _eval_client(lm, api_base, no_cache, budget_usd, max_calls)
            report = _evaluate_shown(g, t, client, split_name, limit, concurrency)
            sides.append(Side.of(report))  # type: ignore[arg-type]
            if report.stopped == "interrupted":  # type: ignore[attr-defined]
                interrupted = True
                break
        if len(sides) < 2:
            console.print("[yellow]B was not evaluated: no comparison[/yellow]")
            raise typer.Exit(130)
        if not set(sides[0].scores) & set(sides[1].scores):
            console.print("[yellow]stopped before A and B shared a finished example: no comparison[/yellow]")
            raise typer.Exit(130)
        result = paired_comparison(sides[0], sides[1])
        console.print(comparison_table(result))
        for what, ids in zip(("B won on", "B lost on"), result.differing(), strict=True):
            if ids:
                more = f" and {len(ids) - 8} more" if len(ids) > 8 else ""
                console.print(f"{what}: {escape(', '.join(ids[:8]))}{more}", highlight=False, soft_wrap=True)
        colour = {"better": "green", "worse": "red"}.get(result.outcome, "yellow")
        console.print(f"[{colour}]{escape(result.verdict)}[/{colour}]")
        if interrupted:
            console.print(f"[yellow]stopped (Ctrl-C): the comparison covers the {result.n} examples both finished"
                          "[/yellow]")
        if output:
            _write_json(output, result.to_dict())
            console.print(f"comparison written to {output}")
    if interrupted:
        raise typer.Exit(130)


def comparison_table(result: object) -> Table:
    """A and B side by side on the paired examples, then the paired difference."""
    r = result  # evaluators.compare.Comparison
    table = Table(title=f"B vs A on {r.a.task}/{r.a.split}, {r.n} paired examples")  # type: ignore[attr-defined]
    for col in ("", "system", "score", "$", "tokens", "LM calls"):
        table.add_column(col, justify="left" if col in ("", "system") else "right")
    for tag, side in (("A", r.a), ("B", r.b)):  # type: ignore[attr-defined]
        table.add_row(tag, f"{side.name} ({side.genome_id[:12]})", f"{r.mean(side):.3f}",  # type: ignore[attr-defined]
                      f"{side.dollars:.4f}", str(side.tokens), str(side.llm_calls))
    table.add_row("B - A", f"won {r.wins}, lost {r.losses}, tied {r.ties}",  # type: ignore[attr-defined]
                  f"{r.diff:+.3f} [{r.ci_low:+.3f}, {r.ci_high:+.3f}]", "", "", "")  # type: ignore[attr-defined]
    return table


@app.command()
def tasks() -> None:
    """List the built-in tasks with their split sizes and metrics."""
    from masforge.evaluators.tasks import describe_tasks

    table = Table(title="tasks (split sizes for --seed 0; --limit takes the first N of a split)")
    for col in ("name", "description", "train / validation / test"):
        table.add_column(col)
    for name, description, splits in describe_tasks():
        table.add_row(escape(name), escape(description), splits)
    table.add_row("FILE.jsonl", "your own data: question/answer lines, exact match",
                  "the rest / 20% / 20% of the lines (at least 1 each from 3 lines; val_fraction and "
                  "test_fraction in task_options change it)")
    console.print(table)


def _positive(value: float | None) -> float | None:
    if value is not None and value <= 0:
        raise typer.BadParameter(f"must be greater than 0, got {value}")
    return value


# The run-configuration fields the search flags set, by the flag the user typed (for error messages).
SEARCH_FLAGS = {
    "task": "--task", "strategy": "--strategy", "lm": "--lm", "meta_lm": "--meta-lm", "api_base": "--api-base",
    "seeds": "--seeds", "limit": "--limit", "test_limit": "--test-limit", "test_top_k": "--test-top-k",
    "concurrency": "--concurrency", "output": "--output", "seed": "--seed", "budget.max_candidates": "--max-candidates",
    "budget.max_dollars": "--budget-usd", "budget.max_calls": "--max-calls", "budget.max_seconds": "--max-minutes",
    "budget.max_tokens": "--max-tokens", "budget.patience": "--patience", "split": "--split",
    "data_dir": "--data-dir", "cost_weight": "--cost-weight", "cache": "--no-cache", "task_options": "--task-option",
    "race": "--no-race",
}


@app.command()
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
    seeds: Annotated[str | None, typer.Option(help="Comma-separated seed names or genome files.",
                                              show_default=",".join(DEFAULT_SEEDS))] = None,
    max_candidates: Annotated[int | None, typer.Option(
        "--max-candidates", "-n", min=1, help="Candidates to evaluate.", show_default=str(DEFAULT_MAX_CANDIDATES))]
    = None,
    budget_usd: Annotated[float | None, typer.Option("--budget-usd", min=0, help="Dollar budget.")] = None,
    max_calls: Annotated[int | None, typer.Option("--max-calls", min=1, help="LM-call budget (every request sent "
                                                  "counts, retries too).")] = None,
    max_tokens: Annotated[int | None, typer.Option("--max-tokens", min=1, help="Token budget.")] = None,
    max_minutes: Annotated[float | None, typer.Option("--max-minutes", callback=_positive,
                                                      help="Wall-time budget.")] = None,
    patience: Annotated[int | None, typer.Option("--patience", min=1, help="Stop after this many candidates "
                                                 "without a new best.")] = None,
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
) -> None:
    """Search for better multi-agent systems; live progress; Ctrl-C stops cleanly (resume with --resume)."""
    from masforge.search.config import RunConfig
    from masforge.search.engine import check_run, run_search

    if strategy is not None and strategy.strip() == "list":
        strategies()
        return
    with user_errors():
        data: dict[str, object] = {}
        if config is not None:
            data = RunConfig.load(config).model_dump(exclude_unset=True)
        flags = {"task": task, "strategy": strategy, "lm": lm, "meta_lm": meta_lm, "api_base": api_base,
                 "seeds": seeds, "limit": limit, "test_limit": test_limit, "test_top_k": test_top_k,
                 "concurrency": concurrency, "output": output, "seed": seed, "archive": archive,
                 "executor": executor, "ray_address": ray_address, "ray_workers": ray_workers, "split": split,
                 "data_dir": str(data_dir) if data_dir is not None else None, "cost_weight": cost_weight,
                 "cache": False if no_cache else None, "race": False if no_race else None}
        data.update({k: v for k, v in flags.items() if v is not None})
        tune = {k: v for k, v in (("storage", tune_storage), ("study_name", tune_study)) if v is not None}
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
        budget = dict(data.get("budget") or {})  # type: ignore[call-overload]
        for key, value in (("max_candidates", max_candidates), ("max_dollars", budget_usd),
                           ("max_calls", max_calls), ("max_tokens", max_tokens), ("patience", patience),
                           ("max_seconds", max_minutes * 60 if max_minutes else None)):
            if value is not None:
                budget[key] = value
        if budget:
            data["budget"] = budget
        if resume is not None:
            cfg = RunConfig.from_data({"task": "resume", **data}, "command line", SEARCH_FLAGS) if data else None
            console.print(f"resuming {resume} ...")
            result = run_search(cfg, resume=resume, progress=not quiet, console=console)
        else:
            if "task" not in data:
                raise MasforgeError("give --task NAME (see `masforge tasks`) or --config run.yaml")
            cfg = RunConfig.from_data(data, "command line", SEARCH_FLAGS)
            check_run(cfg)  # a bad strategy, option or LM is one line before anything is printed or paid
            console.print(f"searching {escape(cfg.task)} with {'+'.join(cfg.strategy)} (worker LM: "
                          f"{escape(str(cfg.lm or 'local'))}) ...")
            result = run_search(cfg, progress=not quiet, console=console)
        print_search_result(result)
        if result.stop_reason == "interrupted":
            console.print(runnable(f"[yellow]stopped (Ctrl-C): nothing finished is lost; continue with "
                                   f"`masforge search --resume {result.run_dir}`[/yellow]"), soft_wrap=True)
            raise typer.Exit(130)
        from masforge.report import build_report, write_report

        try:
            path = write_report(build_report(result.run_dir), Path(result.run_dir) / "report.html")
            console.print(f"report: {path}")
        except MasforgeError as exc:  # the search result stands even if the report cannot be drawn
            print_error(f"report not written: {exc}")
        if result.stop_reason in ("outage", "provider", "sandbox"):
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


@app.command()
def strategies() -> None:
    """List the search strategies with what each does and its options (no search is run)."""
    from masforge.search.strategies import describe_strategies

    table = Table(title="strategies (use with --strategy NAME, or a pipeline such as knapsack,evolve,tune)",
                  show_lines=True)
    table.add_column("name", overflow="fold")
    table.add_column("what it does", overflow="fold", ratio=1)
    table.add_column("options: --option NAME=VALUE (or strategy_options in a run configuration)", overflow="fold",
                     ratio=2)
    for name, summary, options in describe_strategies():
        table.add_row(name, escape(summary), "\n".join(f"[bold]{o.name}[/bold]={escape(repr(o.default))}: "
                                                         f"{escape(o.help)}" for o in options))
    console.print(table)


# Why a search or evaluation stopped, in the words (and flags) the user knows.
STOP_REASONS = {
    "max_candidates": "all candidates evaluated (-n / --max-candidates)",
    "dollars": "dollar budget reached (--budget-usd)",
    "llm_calls": "LM-call budget reached (--max-calls)",
    "tokens": "token budget reached (--max-tokens)",
    "wall_time": "time budget reached (--max-minutes)",
    "patience": "no new best for --patience candidates",
    "interrupted": "interrupted (Ctrl-C)",
    "outage": "provider outage (see below)",
    "provider": "the LM provider refuses the run (see below)",
    "sandbox": "the sandbox misses a layer generated code needs (see below)",
}


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
    if over:
        console.print("budget overshoot (requests already in flight when the limit was reached): "
                      + ", ".join(f"{k} +{v:g}" for k, v in over.items()))
    for line in r.warnings:  # type: ignore[attr-defined]
        console.print(f"[yellow]{escape(line)}[/yellow]")
    outage = r.outage  # type: ignore[attr-defined]
    if outage:
        incomplete = len(outage["incomplete_candidates"])
        print_error(outage["message"] or (
            f"{outage['unscored_examples']} examples unscored and {incomplete} candidates left without a score "
            f"because the provider or the sandbox failed ({shorten(outage['error'], 160)}); they are evaluated "
            "again on --resume"))
    found, seed = r.versus_seeds()  # type: ignore[attr-defined]
    n_val = r.stats.get("selection_examples") or r.config.limit  # type: ignore[attr-defined]
    verdict = r.verdict  # type: ignore[attr-defined]
    if found is not None and seed is not None and verdict is not None:
        colour = {"better": "green", "worse": "red"}.get(verdict.outcome, "yellow")
        console.print(f"held-out test, the same {verdict.n} examples for both: best found "
                      f"[bold]{escape(found.name)}[/bold] {verdict.mean(verdict.b):.3f} vs best seed "
                      f"[bold]{escape(seed.name)}[/bold] {verdict.mean(verdict.a):.3f}, difference "
                      f"{verdict.diff:+.3f} [{verdict.ci_low:+.3f}, {verdict.ci_high:+.3f}] (paired 95% CI): "
                      f"[{colour}]{escape(verdict.versus_seeds())}[/{colour}]", soft_wrap=True)
        console.print(f"  {r.config.split} ({n_val} examples): best found {found.validation:.3f}, "  # type: ignore[attr-defined]
                      f"best seed {seed.validation:.3f}")
    elif found is not None and seed is not None:
        console.print(f"held-out test: best found [bold]{escape(found.name)}[/bold] {found.test:.3f} "
                      f"({found.n} examples) vs best seed [bold]{escape(seed.name)}[/bold] {seed.test:.3f} "
                      f"({seed.n} examples): not scored on the same examples, so no verdict")
    else:
        best = r.best  # type: ignore[attr-defined]
        if best is not None:
            console.print(f"best: [bold]{escape(best.genome.name)}[/bold] ({best.short_id}) validation score "
                          f"{best.score:.3f} on {n_val} examples")
    console.print(f"run folder: {r.run_dir}   archive: {r.archive_path}")  # type: ignore[attr-defined]
    console.print(f"browse: {masforge_command()} archive list --archive {r.archive_path}")  # type: ignore[attr-defined]


@genome_app.command("validate")
def genome_validate(files: Annotated[list[Path], typer.Argument(help="Genome files to check.")]) -> None:
    """Check genome files; each problem is one line naming its place."""
    from masforge.genome import load_genome, validate

    failed = 0
    for path in files:
        try:
            g = validate(load_genome(path))
            console.print(f"[green]ok[/green] {escape(str(path))}: {escape(g.name)} ({g.kind}, id {g.short_id})")
        except MasforgeError as exc:
            print_error(str(exc))
            failed += 1
        except OSError as exc:
            print_error(os_error_line(exc))
            failed += 1
    if failed:
        raise typer.Exit(1)


@genome_app.command("schema")
def genome_schema() -> None:
    """Print the genome JSON Schema (what meta-agents are asked to produce)."""
    from masforge.genome.schema import Genome

    schema = Genome.model_json_schema()
    ref = schema.pop("$ref", None)
    if ref:  # a portfolio's members are genomes, so pydantic writes the genome as a definition: put it on top
        schema = {**schema["$defs"][ref.rsplit("/", 1)[-1]], "$defs": schema["$defs"]}
    print(json.dumps(schema, indent=2))


@genome_app.command("diff")
def genome_diff(a: Annotated[str, typer.Argument(help="Old genome (file or seed).")],
                b: Annotated[str, typer.Argument(help="New genome (file or seed).")]) -> None:
    """Show what changed between two genomes, agent by agent and edge by edge."""
    from masforge.genome.diff import diff_genomes

    with user_errors():
        ga, gb = resolve_genome(a), resolve_genome(b)
        changes = diff_genomes(ga, gb)
        console.print(f"{escape(ga.name)} ({ga.short_id}) -> {escape(gb.name)} ({gb.short_id})")
        if not changes:
            console.print("no change")
        colour = {"+": "green", "-": "red", "~": "yellow"}
        for c in changes:
            console.print(f"[{colour[c.op]}]{escape(str(c))}[/{colour[c.op]}]", highlight=False, soft_wrap=True)


@app.command()
def seeds() -> None:
    """List the shipped seed systems."""
    from masforge.seeds import seed_paths

    table = Table(title="seeds")
    for col in ("name", "file", "kind", "agents", "description"):
        table.add_column(col)
    with user_errors():
        from masforge.genome import load_genome

        for path in seed_paths():
            g = load_genome(path)
            table.add_row(g.name, path.name, g.kind, str(len(g.agents)), shorten(g.description, 70))
    console.print(table)


app.command("export")(cli_export.export)
app.command("report")(cli_export.report)


def main() -> None:
    """Console-script entry point: MasforgeError → one red line, Ctrl-C → exit 130, no tracebacks."""
    install_log_redaction()
    try:
        app()
    except MasforgeError as exc:
        print_error(str(exc))
        sys.exit(1)
    except OSError as exc:
        print_error(os_error_line(exc))
        sys.exit(1)
    except KeyboardInterrupt:  # the user's stop, not an error
        err_console.print("[yellow]stopped (Ctrl-C)[/yellow]")
        sys.exit(130)
    except SystemExit as exc:
        if exc.code == 130 and _ctrl_c_caused(exc):  # typer turned a Ctrl-C no command handled into exit 130
            err_console.print("[yellow]stopped (Ctrl-C)[/yellow]")
        raise
    finally:
        _stop_own_servers()


def _ctrl_c_caused(exc: BaseException) -> bool:
    """Whether a KeyboardInterrupt is behind ``exc`` (its chain of causes and contexts)."""
    seen: set[int] = set()
    cur: BaseException | None = exc
    while cur is not None and id(cur) not in seen:
        if isinstance(cur, KeyboardInterrupt):
            return True
        seen.add(id(cur))
        cur = cur.__cause__ or cur.__context__
    return False


def _stop_own_servers() -> None:
    """Before Python joins its worker threads at exit: give up the LM requests still in flight (after Ctrl-C, or
    of an abandoned, timed-out example; their connections are cut, so they end at once, booked as abandoned, not
    failed), then stop the local model servers this process started, without waiting for a generation to end
    (it takes minutes on 2 cores). Those evaluations were not finished, so nothing is lost."""
    lm = sys.modules.get("masforge.lm.client")
    if lm is not None:
        lm.abandon_requests()
    local_model = sys.modules.get("masforge.runtime.local_model")
    if local_model is not None:
        local_model.shutdown_local_servers(timeout=2.0)
