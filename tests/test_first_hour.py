"""The first hour of a new user, command by command: each trap found by trying masforge in a fresh clone is
a one-line answer now (bad LM, unknown strategy, seed names as listed, readable progress, flag names in
errors, hints that can be copied, defaults shown and scaled to the search's size)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from masforge.cli import app
from masforge.cli.console import masforge_command, runnable
from masforge.search.config import RunConfig
from masforge.search.progress import describe_event

TASK = "rg:basic_arithmetic"


@pytest.fixture(autouse=True)
def _private_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MASFORGE_CACHE", str(tmp_path / "cache"))
    monkeypatch.chdir(tmp_path)


def _invoke(*args: str) -> tuple[int, str]:
    res = CliRunner().invoke(app, list(args))
    return res.exit_code, res.output


@pytest.mark.parametrize("command", [
    ["evaluate", "cot", "--task", TASK, "--limit", "2"],
    ["search", "--task", TASK, "-n", "2", "-q"],
])
def test_an_unknown_provider_is_one_line_before_anything_starts(tmp_path: Path, command: list[str]) -> None:
    code, out = _invoke(*command, "--lm", "foobar/some-model")
    assert code == 1
    assert "litellm knows no provider 'foobar'" in out
    assert len(out.strip().splitlines()) == 1 and "Traceback" not in out
    assert not (tmp_path / "runs").exists()


@pytest.mark.parametrize("command", [["strategies"], ["search", "--strategy", "list"]])
def test_strategies_are_listed_and_described_without_a_search(tmp_path: Path, command: list[str]) -> None:
    code, out = _invoke(*command)
    assert code == 0, out
    for name in ("evolve", "knapsack", "tune", "coevolve", "swarm", "meta", "random"):
        assert name in out
    assert "population_size" in out and "surrogate" in out  # options with their defaults
    assert not (tmp_path / "runs").exists()


def test_seed_names_as_listed_work_in_evaluate() -> None:
    code, listed = _invoke("seeds")
    assert code == 0 and "reflexion-code" in listed
    for name in ("reflexion-code", "reflexion_code"):
        code, out = _invoke("evaluate", name, "--task", TASK, "--lm", "fake", "--limit", "1")
        assert code == 0, out


def test_live_progress_is_readable_text() -> None:
    lines = [describe_event("stage", {"strategy": "evolve", "index": 2, "of": 3}),
             describe_event("test", {"name": "self-refine"}),
             describe_event("stalled", {"strategy": "meta", "steps": 8}),
             describe_event("stage", {"strategy": "resume", "restored": 4})]
    assert lines == ["strategy evolve (stage 2 of 3) starts", "re-scoring self-refine on the held-out test split",
                     "meta stopped: 8 steps in a row found nothing new",
                     "resumed: 4 candidates of this run restored from the archive"]
    assert describe_event("evaluating", {"name": "x"}) is None
    code, out = _invoke("search", "--task", TASK, "--strategy", "random", "--lm", "fake", "-n", "3", "--limit", "2",
                        "--seeds", "cot", "-o", "runs")
    assert code == 0, out
    assert "strategy random starts" in out and "{'" not in out  # no raw dicts


@pytest.mark.parametrize(("args", "flag"), [
    (["--budget-usd", "-1"], "--budget-usd"),
    (["--max-minutes", "0"], "--max-minutes"),
    (["-n", "0"], "--max-candidates"),
    (["--test-limit", "0"], "--test-limit"),
])
def test_budget_errors_name_the_flag_the_user_typed(args: list[str], flag: str) -> None:
    code, out = _invoke("search", "--task", TASK, "--lm", "fake", *args)
    assert code != 0 and flag in out and "max_dollars" not in out and "max_seconds" not in out


def test_config_errors_from_flags_name_the_flag() -> None:
    from masforge.cli.commands import SEARCH_FLAGS
    from masforge.errors import ConfigError

    with pytest.raises(ConfigError, match="command line: --budget-usd: "):
        RunConfig.from_data({"task": TASK, "budget": {"max_dollars": -1}}, "command line", SEARCH_FLAGS)
    with pytest.raises(ConfigError, match="run.yaml: budget.max_dollars: "):  # in a file, the file's own name
        RunConfig.from_data({"task": TASK, "budget": {"max_dollars": -1}}, "run.yaml")


def test_hints_use_the_command_the_user_can_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    venv_bin = tmp_path / ".venv" / "bin"
    venv_bin.mkdir(parents=True)
    (venv_bin / "masforge").write_text("#!/bin/sh\n")
    (venv_bin / "masforge").chmod(0o755)
    monkeypatch.setenv("PATH", "/usr/bin:/bin")  # not on PATH, as after `make run`
    monkeypatch.setattr(sys, "argv", [str(venv_bin / "masforge"), "search"])
    assert masforge_command() == os.path.join(".venv", "bin", "masforge")
    assert runnable("see `masforge tasks`") == f"see `{os.path.join('.venv', 'bin', 'masforge')} tasks`"
    monkeypatch.setenv("PATH", f"{venv_bin}:/usr/bin:/bin")  # activated venv: the bare name works
    assert masforge_command() == "masforge" and runnable("see `masforge tasks`") == "see `masforge tasks`"
    monkeypatch.setattr(sys, "argv", ["/somewhere/masforge/__main__.py", "search"])
    assert masforge_command().endswith(" -m masforge")


def test_help_shows_the_defaults_and_they_scale_with_the_search() -> None:
    res = CliRunner().invoke(app, ["search", "--help"], env={"COLUMNS": "250"})
    assert res.exit_code == 0
    flat = " ".join(res.output.replace("│", " ").split())
    for text in ("3 x --limit, at most 50", "-n / 5, from 1 to 3", "Examples evaluated at once. [default: (4)]"):
        assert text in flat, text
    small = RunConfig.from_data({"task": TASK, "limit": 4, "budget": {"max_candidates": 6}})
    assert (small.test_limit, small.test_top_k) == (12, 1)  # the tour's small search stays small
    default = RunConfig.from_data({"task": TASK})
    assert (default.test_limit, default.test_top_k) == (50, 3)
    given = RunConfig.from_data({"task": TASK, "limit": 4, "test_limit": 40, "test_top_k": 2})
    assert (given.test_limit, given.test_top_k) == (40, 2)
    assert RunConfig.from_data({"task": TASK, "test_limit": None}).test_limit is None  # None: all examples
