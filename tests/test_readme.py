"""Every README command that can run offline is executed here (with the deterministic fake LM), so the
documentation cannot rot."""

from __future__ import annotations

import os
import re
import shlex
from pathlib import Path

import pytest
from typer.testing import CliRunner

from masforge.cli import app

ROOT = Path(__file__).resolve().parents[1]


def _tour_commands() -> list[str]:
    text = (ROOT / "README.md").read_text()
    section = text.split("## A tour", 1)[1]
    block = re.search(r"```bash\n(.*?)```", section, re.S)
    assert block, "the tour needs a bash block"
    commands = []
    for line in block.group(1).splitlines():
        line = line.split("  #", 1)[0].strip()
        if line.startswith("masforge "):
            commands.append(line)
    return commands


def test_readme_has_the_two_commands() -> None:
    text = (ROOT / "README.md").read_text()
    assert "make run" in text and "make test" in text
    ci = (ROOT / ".ci" / "run").read_text()
    assert "make test" in ci


def test_tour_commands_run_offline(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fixture_data_dir: Path) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("MASFORGE_DATA_DIR", str(fixture_data_dir))  # benchmark tasks read the small fixtures
    monkeypatch.setenv("MASFORGE_LM", "fake")
    monkeypatch.setenv("MASFORGE_CACHE", str(tmp_path / "cache"))
    commands = _tour_commands()
    assert len(commands) >= 7
    runner = CliRunner()
    for command in commands:
        assert "<id>" not in command, "the tour names candidates by alias (best, best-new), never by a placeholder"
        args = shlex.split(command)[1:]
        if args[0] == "search":
            args += ["-q"]
        result = runner.invoke(app, args, env={**os.environ})
        assert result.exit_code == 0, f"{command}\n{result.output}"
    assert (tmp_path / "my_system.py").is_file()
    assert (tmp_path / "runs" / "latest" / "report.html").is_file()


def test_scale_out_commands_use_real_options() -> None:
    """The cluster and shared-study commands of the scale-out page cannot run here (no cluster, no hosted LM), but
    every option they give must be one `masforge search` has, and each configuration field they name must exist."""
    from masforge.search.config import RunConfig

    section = (ROOT / "docs" / "how-to" / "scale-out.md").read_text()
    lines = " ".join(block for block in re.findall(r"```bash\n(.*?)```", section, re.S)).replace("\\\n", " ")
    commands = [c.split("#", 1)[0] for c in lines.splitlines() if c.strip().startswith("masforge search")]
    assert len(commands) == 2
    help_text = CliRunner().invoke(app, ["search", "--help"], env={**os.environ, "COLUMNS": "200"}).output
    for command in commands:
        for flag in re.findall(r"(--[a-z][a-z-]+|-n)\b", command):
            assert flag in help_text, flag
    for field in re.findall(r"`(executor|ray_address|ray_workers): ", section):
        assert field in RunConfig.model_fields


def test_the_tour_states_each_commands_time_and_make_run_warns_of_a_busy_machine() -> None:
    text = (ROOT / "README.md").read_text()
    section = text.split("## A tour", 1)[1]
    block = re.search(r"```bash\n(.*?)```", section, re.S)
    assert block is not None
    for line in block.group(1).splitlines():
        command = line.split("  #", 1)[0].strip()
        if command.split()[1:2] and command.split()[1] in ("run", "evaluate", "compare", "search", "seeds",
                                                            "strategies", "report"):
            assert re.search(r"#\s*\((instant|under a minute|about \d+ min)\)", line), line
    recipe = (ROOT / "Makefile").read_text().split("\nrun:", 1)[1].split("\n\n", 1)[0]
    assert "quiet 2-core machine" in recipe and "slows it" in recipe
    assert recipe.index("slows it") < recipe.index("masforge search")  # said before it starts
