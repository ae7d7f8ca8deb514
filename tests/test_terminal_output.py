"""Text from genomes and models cannot drive the terminal: control characters and escape sequences (issue 37: a
genome named with ``ESC ]0;...`` retitled the terminal through piped search output) are printed escaped on every
output path, on a terminal or piped, while the console's own colours still reach a terminal."""

from __future__ import annotations

import ast
import io
import json
import re
from pathlib import Path

import pytest
from rich.table import Table
from typer.testing import CliRunner

import masforge.cli.console
from masforge.cli import app
from masforge.errors import GenomeError
from masforge.export.pysource import docstring
from masforge.search import events as ev
from masforge.search.progress import SearchProgress
from masforge.seeds import load_seed
from masforge.terminal import SafeConsole
from masforge.text import escape_controls

HOSTILE = "evil\x1b]0;PWNED\x1b\\\x1b[2J\x9b31m\u202ename\x00"
"""A window title (OSC), a screen clear (CSI), the one-byte CSI of C1, a right-to-left override and a NUL."""
RAW = ("\x1b", "\x9b", "\u202e", "\x00")


SGR = re.compile(r"\x1b\[[0-9;]*m")
"""A colour or font code, the console's own (the hostile text's, escaped, no longer starts with ESC)."""


def _clean(shown: str) -> None:
    shown = SGR.sub("", shown)
    assert not any(c in shown for c in RAW), repr(shown)
    assert "evil\\x1b]0;PWNED" in shown and "\\x9b31m\\u202ename" in shown, repr(shown)


def test_escape_controls_keeps_text_tabs_and_line_breaks() -> None:
    assert escape_controls("plain\ttext\nnext line, ünïcode, 中文") == "plain\ttext\nnext line, ünïcode, 中文"
    assert escape_controls("a\x1b[31mb\x07c\x7fd\u2028e") == "a\\x1b[31mb\\x07c\\x7fd\\u2028e"


@pytest.mark.parametrize("terminal", [True, False], ids=["on a terminal", "piped"])
def test_the_console_escapes_what_it_prints_and_keeps_its_own_colours(terminal: bool) -> None:
    out = io.StringIO()
    console = SafeConsole(file=out, force_terminal=terminal, width=300)
    console.print(f"[red]rejected[/red] {HOSTILE}")
    table = Table(title=HOSTILE)
    table.add_column("name")
    table.add_row(HOSTILE)
    console.print(table)
    ui = SearchProgress(console=console, enabled=True)
    ui(ev.Notice(text=f"note on {HOSTILE}", warning=True))
    shown = out.getvalue()
    _clean(shown)
    assert ("\x1b[31m" in shown) is terminal  # rich's own colour codes: on a terminal only


def test_a_search_progress_made_without_a_console_escapes_too() -> None:
    assert isinstance(SearchProgress(enabled=False).console, SafeConsole)


@pytest.mark.parametrize("terminal", [True, False], ids=["on a terminal", "piped"])
def test_an_error_line_is_escaped(terminal: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    out = io.StringIO()
    monkeypatch.setattr(masforge.cli.console, "err_console",
                        SafeConsole(file=out, force_terminal=terminal, width=300, stderr=True))
    masforge.cli.console.print_error(f"genome {HOSTILE} failed")
    assert str(GenomeError(f"x {HOSTILE}")).count("\\x1b") == 3  # errors escape their messages when made
    _clean(out.getvalue())


def test_piped_search_output_carries_no_escape_sequence(tmp_path: Path) -> None:
    genome = load_seed("cot").model_dump(mode="json")
    genome["name"] = HOSTILE
    (tmp_path / "evil.json").write_text(json.dumps(genome), encoding="utf-8")
    res = CliRunner().invoke(app, ["search", "--task", "rg:basic_arithmetic", "--lm", "fake", "--seeds",
                                   str(tmp_path / "evil.json"), "-n", "2", "--limit", "2", "--test-top-k", "0",
                                   "-o", str(tmp_path / "runs")])
    assert "rejected" in res.output or "evil" in res.output, res.output  # the name was shown, escaped
    _clean(res.output)


def test_an_exported_docstring_holds_no_control_character_and_reads_the_same() -> None:
    written = docstring(HOSTILE + ' with """ and \\ ')
    assert not any(c in written for c in RAW)
    assert ast.literal_eval(f'"""{written}"""') == HOSTILE + ' with """ and \\ '
