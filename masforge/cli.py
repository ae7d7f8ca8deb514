"""The ``masforge`` command line (typer + rich).

Every user-facing failure is a :class:`~masforge.errors.MasforgeError` printed as one red line with exit
code 1; tracebacks are for bugs only.
"""

from __future__ import annotations

import typer

from masforge import cli_models

app = typer.Typer(
    help="masforge: a self-evolving designer of multi-agent LLM systems.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)
app.add_typer(cli_models.app, name="models")


def main() -> None:
    """Console-script entry point."""
    app()
