"""``masforge export`` and ``masforge report``: take a system out of masforge, and summarise a run.

The main CLI registers these as ``app.command("export")(cli_export.export)`` and
``app.command("report")(cli_export.report)``. Failures are one red line on stderr and exit code 1.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from masforge.cli.console import console, err_console, user_errors
from masforge.errors import ConfigError

DEFAULT_ARCHIVE = Path("runs/latest/archive")


def export(
    ref: Annotated[str, typer.Argument(metavar="ID", help="Genome id (prefix) in the archive, genome file or "
                                       "seed name.")],
    fmt: Annotated[str, typer.Option("--format", "-f", help="python (standalone module), yaml or json.")] = "python",
    archive: Annotated[Path, typer.Option("--archive", "-a", help="Archive to look ids up in (a run's archive is "
                                          "<run folder>/archive).")] = DEFAULT_ARCHIVE,
    output: Annotated[Path | None, typer.Option("--output", "-o", help="File to write (default: standard output).")]
    = None,
) -> None:
    """Export a system: a standalone Python module (needs only dspy and litellm) or its genome as YAML/JSON."""
    from masforge.export import EXPORT_FORMATS, export_genome, resolve_genome, write_export

    with user_errors():
        fmt = fmt.lower()
        if fmt not in EXPORT_FORMATS:
            raise ConfigError(f"unknown --format '{fmt}' (use {', '.join(EXPORT_FORMATS)})")
        genome = resolve_genome(ref, archive)
        text = export_genome(genome, fmt, filename=output.name if output and fmt == "python" else None)
        if output is None:
            sys.stdout.write(text)
            return
        write_export(text, output)
        what = {"python": "standalone Python module", "yaml": "genome (YAML)", "json": "genome (JSON)"}[fmt]
        err_console.print(f"wrote {what} of {genome.name} ({genome.short_id}) to {output}")
        if fmt == "python":
            hint = (f'run it: python {output} "your question" --model openai/gpt-4o-mini' if genome.kind == "config"
                    else "it is machine-written code: run it only in a sandbox")
            err_console.print(hint, highlight=False)


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
