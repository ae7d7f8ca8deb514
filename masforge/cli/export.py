"""``masforge export`` and ``masforge report``: take a system out of masforge, and summarise a run.

The main CLI registers these as ``app.command("export")(cli_export.export)`` and
``app.command("report")(cli_export.report)``. Failures are one red line on stderr and exit code 1.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

from masforge.cli.console import console, err_console, user_errors
from masforge.errors import ConfigError
from masforge.redact import redact

DEFAULT_ARCHIVE = Path("runs/latest/archive")


def export(
    ref: Annotated[str, typer.Argument(metavar="ID", help="Genome id (prefix) in the archive, best, best-new, "
                                       "seed:<name>, a genome file or a seed name.")],
    fmt: Annotated[str, typer.Option("--format", "-f", help="python (standalone module), yaml or json.")] = "python",
    archive: Annotated[Path, typer.Option("--archive", "-a", help="Archive to look ids up in (a run's archive is "
                                          "<run folder>/archive).")] = DEFAULT_ARCHIVE,
    output: Annotated[Path | None, typer.Option("--output", "-o", help="File to write (default: standard output).")]
    = None,
    lm: Annotated[str | None, typer.Option("--lm", help="Default LM of a Python export (default: the LM the system "
                                           "was found with in the archive; a seed or file: $MASFORGE_LM or the "
                                           "embedded model 'local').")] = None,
    api_base: Annotated[str | None, typer.Option("--api-base", help="Endpoint of --lm (an OpenAI-compatible "
                                                 "server).")] = None,
) -> None:
    """Export a system: a standalone Python module (needs only dspy and litellm) or its genome as YAML/JSON."""
    from dataclasses import replace

    from masforge.export import EXPORT_FORMATS, export_genome, resolve_export, write_export
    from masforge.lm.config import parse_lm

    with user_errors():
        fmt = fmt.lower()
        if fmt not in EXPORT_FORMATS:
            raise ConfigError(f"unknown --format '{fmt}' (use {', '.join(EXPORT_FORMATS)})")
        if api_base and not lm:
            raise ConfigError("--api-base needs --lm (e.g. --lm openai/<model> --api-base http://HOST:PORT/v1)")
        if output is not None and output.is_dir():
            example = output / {"python": "system.py", "yaml": "genome.yaml", "json": "genome.json"}[fmt]
            raise ConfigError(f"-o {output} is a folder: give the file to write, e.g. -o {example}")
        genome, found = resolve_export(ref, archive)
        cfg = parse_lm(lm) if lm else (found or parse_lm(None))
        if api_base:
            cfg = replace(cfg, api_base=api_base)
        text = export_genome(genome, fmt, filename=output.name if output and fmt == "python" else None, lm=cfg)
        if output is None:
            sys.stdout.write(redact(text))
            return
        write_export(text, output)
        what = {"python": "standalone Python module", "yaml": "genome (YAML)", "json": "genome (JSON)"}[fmt]
        err_console.print(f"wrote {what} of {escape(genome.name)} ({genome.short_id}) to {escape(str(output))}")
        if fmt == "python":
            how = "the one it was found with" if found is not None and not lm else "its default"
            hint = f'run it: python {output} "your question"   (LM: {cfg.model}, {how}; --model to change)'
            if genome.kind == "code":
                hint += "; it is machine-written code: run it only in a sandbox"
            err_console.print(hint, highlight=False, soft_wrap=True)


def report(
    run: Annotated[Path, typer.Argument(help="Run folder (the one `masforge search` printed).")],
    output: Annotated[Path | None, typer.Option("--output", "-o", help="HTML file (default: <run>/report.html).")]
    = None,
) -> None:
    """Write a self-contained HTML report of a run (opens offline) and print its key numbers."""
    from masforge.cli.report_summary import print_summary
    from masforge.report import build_report, write_report

    with user_errors():
        data = build_report(run)
        path = write_report(data, output or Path(run) / "report.html")
        print_summary(data, console)
        console.print(f"report: {path}")
