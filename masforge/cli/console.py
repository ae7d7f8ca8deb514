"""Shared terminal output: rich consoles and the one-red-line error convention of the CLI."""

from __future__ import annotations

import contextlib
import io
import os
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path

import typer
from rich.console import Console
from rich.markup import escape

from masforge.redact import redact
from masforge.terminal import SafeConsole

# Without a terminal (pipes, CI logs) rich would wrap tables at 80 columns; give them room.
console = SafeConsole() if Console().is_terminal else SafeConsole(width=140)
err_console = SafeConsole(stderr=True) if Console(stderr=True).is_terminal else SafeConsole(stderr=True, width=200)


def safe_output_streams() -> None:
    """Let stdout/stderr write any text: a file name or argument that is not valid UTF-8 (a lone surrogate from
    the command line) is shown escaped instead of crashing the output with UnicodeEncodeError."""
    for stream in (sys.stdout, sys.stderr):
        if isinstance(stream, io.TextIOWrapper) and stream.errors == "strict":
            with contextlib.suppress(ValueError, io.UnsupportedOperation):
                stream.reconfigure(errors="backslashreplace")


def _as_typed(path: str) -> str:
    """A path as the user can type it from here: relative below the working folder, else absolute."""
    full = os.path.abspath(path)
    rel = os.path.relpath(full)
    return full if rel.startswith("..") else (rel if os.sep in rel else f".{os.sep}{rel}")


def masforge_command() -> str:
    """The command that runs masforge again, as the user can type it here: ``masforge`` when that is on
    PATH (and is this one), else the path they used (``.venv/bin/masforge`` after ``make run``), or
    ``python -m masforge``. Printed hints use it, so they can be copied as they are."""
    argv0 = sys.argv[0] if sys.argv else ""
    name = Path(argv0).name
    if name == "masforge":
        on_path = shutil.which("masforge")
        if on_path and os.path.abspath(on_path) == os.path.abspath(argv0):
            return "masforge"
        return _as_typed(argv0)
    if name == "__main__.py":
        python = sys.executable
        on_path = shutil.which(Path(python).name)
        same = on_path is not None and os.path.abspath(on_path) == os.path.abspath(python)
        return f"{Path(python).name if same else _as_typed(python)} -m masforge"
    return "masforge"  # embedded (tests, notebooks): the installed command's name


def runnable(text: str) -> str:
    """``text`` with its `masforge ...` hints written as the command that works here."""
    command = masforge_command()
    return text if command == "masforge" else text.replace("`masforge ", f"`{command} ")


_errors_printed = 0
"""Error lines printed by this process (see :func:`exit_1_after_errors`)."""


def print_error(message: str) -> None:
    """One red line on stderr (hints in it name the command as the user can run it)."""
    global _errors_printed
    _errors_printed += 1
    text = redact(str(message)).strip()
    first = text.splitlines()[0] if text else "unknown error"
    err_console.print(f"[red]error:[/red] {escape(runnable(first))}", soft_wrap=True, highlight=False)


@contextlib.contextmanager
def exit_1_after_errors() -> Iterator[None]:
    """Exit with code 1 at the end of the block if it printed an error line: a command that says ``error:`` (say,
    that examples went unscored) must not report success to a script."""
    before = _errors_printed
    yield
    if _errors_printed > before:
        raise typer.Exit(1)


def os_error_line(exc: OSError) -> str:
    """An operating-system error (a path too long, a folder not writable, a disk full) as one line."""
    where = f"{exc.filename}: " if exc.filename else ""
    return f"{where}{exc.strerror or exc} (check the path, its permissions and free space)"


@contextlib.contextmanager
def user_errors() -> Iterator[None]:
    """Turn a MasforgeError (or an OSError about a path) into one red line and exit code 1 (never a traceback)."""
    from masforge.errors import MasforgeError

    try:
        yield
    except MasforgeError as exc:
        print_error(str(exc))
        raise typer.Exit(1) from None
    except OSError as exc:
        print_error(os_error_line(exc))
        raise typer.Exit(1) from None


def task_options(values: list[str] | None) -> dict[str, object]:
    """``--task-option NAME=VALUE`` values as task options (each value read as YAML: 1000, 0.4, true)."""
    import yaml

    from masforge.errors import ConfigError

    out: dict[str, object] = {}
    for item in values or []:
        name, sep, raw = item.partition("=")
        if not sep or not name.strip():
            raise ConfigError(f"--task-option '{item}' must look like NAME=VALUE")
        try:
            out[name.strip()] = yaml.safe_load(raw) if raw.strip() else None
        except yaml.YAMLError:
            out[name.strip()] = raw
    return out
