"""The commands that run systems: ``run`` (one input), ``evaluate`` (a task split) and ``compare`` (two systems on
the same examples, paired), with their progress and result tables."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape
from rich.panel import Panel
from rich.table import Table

from masforge.cli.console import console, exit_1_after_errors, print_error, task_options, user_errors
from masforge.cli.options import (
    STOP_REASONS,
    ApiBaseOption,
    ApiKeyEnvOption,
    EvalOptions,
    LmOption,
    evaluation_options,
    make_client,
)
from masforge.errors import ConfigError, GenomeError, MasforgeError
from masforge.files import write_text_file
from masforge.redact import redact_data
from masforge.seeds import resolve_genome
from masforge.text import shorten

# the budget limits an evaluation takes (the others are about a search)
EVAL_LIMITS = ("max_dollars", "max_calls")


def _parse_fields(values: list[str]) -> dict[str, str]:
    fields: dict[str, str] = {}
    for item in values:
        name, sep, value = item.partition("=")
        if not sep or not name.strip():
            raise GenomeError(f"--field '{item}' must look like name=value")
        fields[name.strip()] = value
    return fields


def run(
    genome: Annotated[str, typer.Argument(help="Genome file (.yaml/.json/.py) or seed name.")],
    input: Annotated[str | None, typer.Option("--input", "-i", help="Text for the genome's first input.")] = None,
    field: Annotated[list[str] | None, typer.Option("--field", "-f", help="Other inputs as name=value.")] = None,
    lm: LmOption = None,
    api_base: ApiBaseOption = None,
    api_key_env: ApiKeyEnvOption = None,
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
        client = make_client(lm, api_base=api_base, cache=not no_cache, api_key_env=api_key_env)
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


@evaluation_options(EVAL_LIMITS, after="split")
def evaluate(
    genome: Annotated[str, typer.Argument(help="Genome file, seed name or exported module.")],
    task: Annotated[str, typer.Option("--task", "-t", help="Task name (masforge tasks) or a .jsonl file.")],
    split: Annotated[str, typer.Option(help="train, validation or test.")] = "validation",
    output: Annotated[Path | None, typer.Option("--output", "-o", help="Write the full report as JSON.")] = None,
    options: EvalOptions = EvalOptions(),
) -> None:
    """Score a system on a task split: progress while it runs, then score with CI, cost and failures."""
    with user_errors(), exit_1_after_errors():
        g = _load_system(genome)
        client = _eval_client(options)
        report = _evaluate_shown(g, _eval_task(task, options), client, split, options.limit, options.concurrency)
        if output:
            _write_json(output, report.to_dict())  # type: ignore[attr-defined]
            console.print(f"report written to {output}")
        if report.stopped == "interrupted":  # type: ignore[attr-defined]
            raise typer.Exit(130)


def _load_system(ref: str) -> object:
    """A genome from a file, seed name or exported module."""
    from masforge.export import is_exported, load_exported

    return load_exported(ref) if is_exported(ref) else resolve_genome(ref)


def _eval_task(name: str, options: EvalOptions) -> object:
    from masforge.evaluators.tasks import get_task

    return get_task(name, data_dir=options.data_dir, **task_options(options.task_option))  # type: ignore[arg-type]


def _eval_client(options: EvalOptions) -> object:
    """The worker client of an evaluation, with its budget (the limits the options set) and a warning when a
    dollar limit cannot bind."""
    from masforge.lm.budget import Budget, free_lm_warning
    from masforge.lm.client import LMClient

    client = make_client(options.lm, api_base=options.api_base, cache=not options.no_cache,
                         api_key_env=options.api_key_env)
    assert isinstance(client, LMClient)
    client.ledger.budget = Budget(**options.limits)
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
    with eval_progress() as bar, _LogLines(name, n) as log:  # type: ignore[attr-defined]
        job = bar.add_task(name, total=n, stats="")

        def tick(done: int, total: int, rep: object) -> None:
            snap = client.ledger.snapshot()  # type: ignore[attr-defined]
            stats = f"score {rep.score:.3f}  {snap['tokens']} tok  ${snap['dollars']:.4f}"  # type: ignore[attr-defined]
            bar.update(job, completed=done, stats=stats)
            log.update(done, stats)

        try:
            report = ev.evaluate(g, progress=tick)
        except EvaluationInterrupted as stop:
            report = stop.report
    console.print(report_table(report, f"{g.name} ({g.short_id}) on {worker.model}"))  # type: ignore[attr-defined]
    if report.stopped == "interrupted":
        console.print(f"[yellow]stopped (Ctrl-C) after {report.attempted} of {report.planned} examples: the table "
                      f"covers the {report.n} finished; requests in flight were abandoned[/yellow]")
    elif report.stopped:  # a limit the user set: said, not an error (a search stopped so ends with 0 too)
        console.print(f"[yellow]stopped early: {escape(STOP_REASONS.get(report.stopped, report.stopped))}; the "
                      f"table covers {report.n} finished examples[/yellow]", highlight=False, soft_wrap=True)
    if report.unscored:
        what = "not a score" if report.incomplete else f"the score covers the other {report.n}"
        print_error(f"{report.unscored} of {report.attempted} examples unscored (the provider or the sandbox "
                    f"failed: {shorten(report.outage, 160)}): {what}")
    return report


class _LogLines:
    """Piped to a log, the progress bar shows nothing until the end: a line instead at least every
    ``HEARTBEAT_S`` (a minute), whether or not an example finished meanwhile (one can take minutes on a small
    server). Does nothing on a terminal."""

    def __init__(self, name: str, total: int) -> None:
        from masforge.search.progress import HEARTBEAT_S, Heartbeat

        self.name, self.total, self.every = name, total, HEARTBEAT_S
        self.done, self.stats = 0, "no example finished yet"
        self.started = self.last = time.monotonic()
        self._lock = threading.Lock()
        self._beat = Heartbeat(self._maybe_print, "masforge-eval-log")

    def __enter__(self) -> _LogLines:
        if not console.is_terminal:
            self._beat.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._beat.stop()

    def update(self, done: int, stats: str) -> None:
        with self._lock:
            self.done, self.stats = done, stats
        self._maybe_print()

    def _maybe_print(self) -> None:
        if not self._beat.running:
            return
        with self._lock:
            now = time.monotonic()
            if now - self.last < self.every or self.done >= self.total:
                return
            self.last = now
            line = f"{now - self.started:.0f}s: {escape(self.name)} {self.done}/{self.total} examples, {self.stats}"
        console.print(line, highlight=False, soft_wrap=True)


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


@evaluation_options(EVAL_LIMITS, after="split")
def compare(
    system_a: Annotated[str, typer.Argument(metavar="A", help="The reference: genome file, seed name, exported "
                                            "module, or a report written by 'masforge evaluate -o'.")],
    system_b: Annotated[str, typer.Argument(metavar="B", help="The challenger (same kinds as A).")],
    task: Annotated[str | None, typer.Option("--task", "-t", help=escape(
        "Task to evaluate on [default: the task of a report given as A or B]."))] = None,
    split: Annotated[str | None, typer.Option(help=escape(
        "train, validation or test [default: a report's split, else validation]."))] = None,
    output: Annotated[Path | None, typer.Option("--output", "-o", help="Write the comparison as JSON.")] = None,
    options: EvalOptions = EvalOptions(),
) -> None:
    """Is B better than A? Both on the same examples, paired: the difference with its 95% CI, wins and losses."""
    from masforge.evaluators.compare import Side, report_side
    from masforge.evaluators.compare import compare as paired_comparison

    with user_errors(), exit_1_after_errors():
        given = {ref: side for ref in (system_a, system_b) if (side := report_side(ref)) is not None}
        known = next(iter(given.values()), None)
        task_name = task or (known.task if known else None)
        if task_name is None:
            raise ConfigError("compare needs --task (or a report from 'masforge evaluate -o' as A or B)")
        split_name = split or (known.split if known else "validation")
        # the same examples as the report's (the first N of the split), unless asked otherwise
        limit = options.limit or (max(side.planned for side in given.values()) if given else None)
        sides: list[Side] = []
        client = None
        interrupted = False
        for ref in (system_a, system_b):
            if ref in given:
                sides.append(given[ref])
                continue
            g = _load_system(ref)
            client = client or _eval_client(options)
            report = _evaluate_shown(g, _eval_task(task_name, options), client, split_name, limit,
                                     options.concurrency)
            sides.append(Side.of(report))  # type: ignore[arg-type]
            if report.stopped == "interrupted":  # type: ignore[attr-defined]
                interrupted = True
                break
        if len(sides) < 2:
            console.print("[yellow]B was not evaluated: no comparison[/yellow]")
            raise typer.Exit(130)
        if not set(sides[0].scores) & set(sides[1].scores):
            if interrupted:
                console.print("[yellow]stopped before A and B shared a finished example: no comparison[/yellow]")
                raise typer.Exit(130)
            print_error("A and B share no scored example: no comparison")
            raise typer.Exit(1)
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
