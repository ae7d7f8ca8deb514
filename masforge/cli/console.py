"""Shared terminal output: rich consoles and the one-red-line error convention of the CLI."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import typer
from rich.console import Console
from rich.markup import escape

from masforge.text import shorten

# Without a terminal (pipes, CI logs) rich would wrap tables at 80 columns; give them room.
console = Console() if Console().is_terminal else Console(width=140)
err_console = Console(stderr=True) if Console(stderr=True).is_terminal else Console(stderr=True, width=200)


def print_error(message: str) -> None:
    """One red line on stderr."""
    first = str(message).strip().splitlines()[0] if str(message).strip() else "unknown error"
    err_console.print(f"[red]error:[/red] {escape(first)}", soft_wrap=True, highlight=False)


@contextlib.contextmanager
def user_errors() -> Iterator[None]:
    """Turn a MasforgeError into one red line and exit code 1 (never a traceback)."""
    from masforge.errors import MasforgeError

    try:
        yield
    except MasforgeError as exc:
        print_error(str(exc))
        raise typer.Exit(1) from None


def short(text: object, limit: int = 80) -> str:
    """One-line preview of a value for tables (a cut one ends in a single-character ellipsis)."""
    return shorten(text, limit, mark="…")
