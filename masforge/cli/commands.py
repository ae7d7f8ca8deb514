"""The ``masforge`` command line (typer + rich): the app, its commands in the order ``--help`` lists them, and
the entry point.

The commands live by kind: :mod:`.evaluate` (run, evaluate, compare), :mod:`.search`, :mod:`.listings` (tasks,
strategies, seeds), :mod:`.genome`, :mod:`.export` (export, report) and the sub-apps :mod:`.models`,
:mod:`.archive` and :mod:`.portfolio`; :mod:`.options` holds what they share. Every user-facing failure is a
:class:`~masforge.errors.MasforgeError` printed as one red line with exit code 1; tracebacks are for bugs only.
"""

from __future__ import annotations

import sys
from typing import Annotated

import typer

from masforge.cli import archive as cli_archive
from masforge.cli import export as cli_export
from masforge.cli import models as cli_models
from masforge.cli import portfolio as cli_portfolio
from masforge.cli.console import err_console, os_error_line, print_error, safe_output_streams
from masforge.cli.evaluate import compare, eval_progress, evaluate, report_table, run
from masforge.cli.genome import genome_app
from masforge.cli.listings import seeds, strategies, tasks
from masforge.cli.options import STOP_REASONS, make_client
from masforge.cli.search import SEARCH_FLAGS, print_search_result, search, strategy_option_flags
from masforge.errors import MasforgeError
from masforge.redact import install_log_redaction
from masforge.sandbox.isolation import sweep_leftover_run_dirs

__all__ = ["SEARCH_FLAGS", "STOP_REASONS", "app", "eval_progress", "main", "make_client", "print_search_result",
           "report_table", "strategy_option_flags"]

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
app.add_typer(genome_app, name="genome")
# top-level commands, in the order --help lists them
for command in (run, evaluate, compare, tasks, search, strategies, seeds):
    app.command()(command)
app.command("export")(cli_export.export)
app.command("report")(cli_export.report)


def main() -> None:
    """Console-script entry point: MasforgeError → one red line, Ctrl-C → exit 130, no tracebacks. Every command
    first removes the run folders a killed masforge left behind (in a weaker sandbox mode, hundreds of MB each)."""
    install_log_redaction()
    try:
        sweep_leftover_run_dirs()
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
    local_model = sys.modules.get("masforge.local_model")
    if local_model is not None:
        local_model.shutdown_local_servers(timeout=2.0)
