"""The README and the documentation site cannot rot (issue 39): the site builds with ``mkdocs build --strict`` (a
broken link or a missing docstring fails it), every ``python`` block of the README and of the site runs as written
on the offline fake LM, and so do the cheap ``masforge`` commands of the ``bash`` blocks. A block that needs a
provider's key or a service is marked with ``<!-- skip: why -->`` on the line before it and is reported as skipped,
by name."""

from __future__ import annotations

import importlib.util
import os
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from typer.testing import CliRunner

from masforge.cli import app

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
SKIP = re.compile(r"^<!-- skip: (.+?) -->$")
FENCE = re.compile(r"^```(\w*)\s*$")
CHEAP = ("masforge seeds", "masforge tasks", "masforge strategies", "masforge genome schema", "masforge run ",
         "masforge export io ", "masforge --version")
"""Commands of ``bash`` blocks cheap enough to run here on the fake LM (the tour's longer ones run in
test_readme.py)."""


@dataclass(frozen=True)
class Block:
    page: Path
    line: int
    lang: str
    text: str
    skip: str | None

    @property
    def name(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"


def blocks(page: Path) -> list[Block]:
    """The fenced code blocks of a Markdown page (top-level fences only), each with the skip reason before it."""
    out: list[Block] = []
    lines = page.read_text(encoding="utf-8").splitlines()
    i = 0
    while i < len(lines):
        opened = FENCE.match(lines[i])
        if not opened:
            i += 1
            continue
        end = next(j for j in range(i + 1, len(lines)) if lines[j].startswith("```"))
        before = next((lines[j].strip() for j in range(i - 1, -1, -1) if lines[j].strip()), "")
        marked = SKIP.match(before)
        out.append(Block(page, i + 1, opened.group(1), "\n".join(lines[i + 1:end]) + "\n",
                         marked.group(1) if marked else None))
        i = end + 1
    return out


ALL = [b for page in PAGES for b in blocks(page)]
PYTHON_PAGES = sorted({b.page for b in ALL if b.lang == "python" and b.skip is None})
MARKED = [b for b in ALL if b.skip is not None]


def _env(tmp_path: Path, fixture_data_dir: Path) -> dict[str, str]:
    env = {**os.environ, "MASFORGE_LM": "fake", "MASFORGE_CACHE": str(tmp_path / "cache"),
           "MASFORGE_DATA_DIR": str(fixture_data_dir), "COLUMNS": "200"}
    env.pop("MASFORGE_SANDBOX", None)
    return env


def _run_python(source: str, tmp_path: Path, env: dict[str, str]) -> str:
    script = tmp_path / "blocks.py"
    script.write_text(source, encoding="utf-8")
    proc = subprocess.run([sys.executable, str(script)], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=600, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout


def test_the_pages_have_code_to_run() -> None:
    assert ROOT / "README.md" in PYTHON_PAGES and len(PYTHON_PAGES) >= 5
    assert all(b.skip.strip() for b in MARKED)


@pytest.mark.parametrize("page", PYTHON_PAGES, ids=[str(p.relative_to(ROOT)) for p in PYTHON_PAGES])
def test_every_python_block_runs_as_written(page: Path, tmp_path: Path, fixture_data_dir: Path) -> None:
    # a page's blocks run in order in one fresh interpreter, like a reader pasting them into one script
    source = "\n".join(b.text for b in blocks(page) if b.lang == "python" and b.skip is None)
    _run_python(source, tmp_path, _env(tmp_path, fixture_data_dir))


@pytest.mark.parametrize("block", MARKED, ids=[b.name for b in MARKED])
def test_marked_blocks_are_skipped_by_name(block: Block) -> None:
    pytest.skip(f"{block.name}: {block.skip}")


def _cheap_commands() -> list[tuple[str, str]]:
    out = []
    for b in ALL:
        if b.lang != "bash" or b.skip is not None:
            continue
        for line in b.text.splitlines():
            command = line.split("  #", 1)[0].strip()
            if command.startswith(CHEAP):
                out.append((b.name, command))
    return out


CHEAP_COMMANDS = _cheap_commands()


@pytest.mark.parametrize(("where", "command"), CHEAP_COMMANDS, ids=[f"{w}:{c}" for w, c in CHEAP_COMMANDS])
def test_cheap_bash_commands_run(where: str, command: str, tmp_path: Path, fixture_data_dir: Path,
                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(app, shlex.split(command)[1:], env=_env(tmp_path, fixture_data_dir))
    assert result.exit_code == 0, f"{where}: {command}\n{result.output}"


def _readme_python() -> Block:
    found = [b for b in blocks(ROOT / "README.md") if b.lang == "python" and b.skip is None]
    assert len(found) == 1, "the README has one Python example"
    return found[0]


def test_the_readme_example_runs_with_a_budget_too_small_to_propose_anything(tmp_path: Path,
                                                                              fixture_data_dir: Path) -> None:
    # 4 candidates and the 5 default seeds: the search evaluates seeds only; the example must still run
    source, changed = re.subn(r'"max_candidates": \d+', '"max_candidates": 4', _readme_python().text)
    assert changed == 1
    out = _run_python(source, tmp_path, _env(tmp_path, fixture_data_dir))
    assert "best new: None" in out and "nothing_new | nothing new was proposed" in out


def test_the_readme_is_short_and_its_first_screen_says_what_how_and_the_two_commands() -> None:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    lines = text.splitlines()
    assert len(lines) < 150
    first_screen = "\n".join(lines[:20])
    assert "designs multi-agent LLM systems" in first_screen and "## Install" in first_screen
    assert "make run" in first_screen and "make test" in first_screen
    prose = re.sub(r"```.*?```", "", text, flags=re.S)
    prose = "\n".join(line for line in prose.splitlines() if not line.startswith("|"))
    prose = re.sub(r"\]\([^)]*\)", "]", prose)  # a link counts by its words, not its address
    for sentence in re.split(r"(?<=[.!?:])\s+(?=[A-Z`])|\n\n|\n- ", prose):
        words = sentence.split()
        assert len(words) <= 35, f"{len(words)} words: {sentence}"


def test_the_site_builds_strictly_offline(tmp_path: Path) -> None:
    pytest.importorskip("mkdocs", reason="the docs extra is not installed (pip install -e '.[docs]')")
    site = tmp_path / "site"
    proc = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(ROOT / "mkdocs.yml"),
                           "-d", str(site)], cwd=ROOT, capture_output=True, text=True, timeout=600, check=False,
                          env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    cli = (site / "reference" / "cli" / "index.html").read_text(encoding="utf-8")
    assert "masforge archive lineage" in cli and "--test-limit" in cli and "best-new" in cli
    api = (site / "reference" / "api" / "index.html").read_text(encoding="utf-8")
    assert "SearchVerdict" in api and "best_new" in api and "open_archive" in api
    # offline: no page loads a script, style sheet or font from the network
    for page in site.rglob("*.html"):
        assert not re.search(r'<(link|script)[^>]+(href|src)="https?://', page.read_text(encoding="utf-8")), page


def _hooks() -> object:
    spec = importlib.util.spec_from_file_location("masforge_docs_hooks", ROOT / "docs" / "hooks" /
                                                  "masforge_docs.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_docstring_check_finds_what_is_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    import types

    hooks = _hooks()
    fake = types.ModuleType("masforge_docs_probe")

    class Documented:
        """Has a docstring."""

        def said(self) -> None:
            """Says what it does."""

        def unsaid(self) -> None:
            pass

        @property
        def bare(self) -> int:
            return 1

    def undocumented_function() -> None:
        pass

    fake.Documented = Documented  # type: ignore[attr-defined]
    fake.undocumented_function = undocumented_function  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "masforge_docs_probe", fake)
    assert hooks.undocumented("masforge_docs_probe.Documented") == [  # type: ignore[attr-defined]
        "masforge_docs_probe.Documented.unsaid", "masforge_docs_probe.Documented.bare"]
    assert hooks.undocumented("masforge_docs_probe.undocumented_function") == [  # type: ignore[attr-defined]
        "masforge_docs_probe.undocumented_function"]
    assert hooks.undocumented("search.verdict.SearchVerdict") == []  # type: ignore[attr-defined]


def test_the_cli_reference_holds_every_command_and_option() -> None:
    from masforge.cli.reference import cli_reference

    text = cli_reference()
    for command in ("masforge search", "masforge archive lineage", "masforge tasks", "masforge models status",
                    "masforge genome validate", "masforge portfolio build"):
        assert f"`{command}`" in text, command
    search = text.split("## `masforge search`", 1)[1].split("\n## ", 1)[0]
    help_text = CliRunner().invoke(app, ["search", "--help"], env={**os.environ, "COLUMNS": "250"}).output
    for flag in set(re.findall(r"(--[a-z][a-z-]+)", help_text)) - {"--help"}:
        assert f"`{flag}`" in search, flag
    assert "| `best-new` |" in text and "| `seed:<name>` |" in text
