"""bench/discovery.py end to end on the deterministic fake LM: every stage runs and is reported, a second run goes
on from the finished run folders without evaluating again, and the verdict weighs the whole test split above
its first part."""
from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path
from types import ModuleType, SimpleNamespace

import pytest

BENCH = Path(__file__).resolve().parents[1] / "bench"
SCRIPT = BENCH / "discovery.py"


def _load(name: str, path: Path) -> ModuleType:
    """A bench script as a module (bench/ is not a package; its scripts import their neighbours by name)."""
    sys.path.insert(0, str(BENCH))
    try:
        spec = importlib.util.spec_from_file_location(name, path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module
    finally:
        sys.path.remove(str(BENCH))


NOTES_MARKER: str = _load("bench_common", BENCH / "common.py").NOTES_MARKER


def _run(tmp_path: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "MASFORGE_LOCAL_API_BASE"}
    env.update(LITELLM_LOCAL_MODEL_COST_MAP="True", MASFORGE_LM_CACHE=str(tmp_path / "answers.sqlite"))
    cmd = [sys.executable, str(SCRIPT), "--lm", "fake", "--strategies", "random", "evolve", "--candidates", "8",
           "--limit", "3", "--cascade", "2", "--top-k", "2", "--test-limit", "3", "--final-test-limit", "5",
           "--transfer", "mbpp", "--transfer-limit", "3", "--runs", str(tmp_path / "runs"),
           "--out", str(tmp_path / "discovery.md")]
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)


def _candidates(tmp_path: Path) -> int:
    return sum(line.count('"event": "candidate"')
               for events in (tmp_path / "runs").glob("discovery-*/events.jsonl")
               for line in events.read_text().splitlines())


def test_discovery_reports_every_stage_and_goes_on_from_finished_runs(tmp_path: Path) -> None:
    first = _run(tmp_path)
    assert first.returncode == 0, first.stderr[-2000:]
    md = (tmp_path / "discovery.md").read_text()
    rows = [line for line in md.splitlines() if line.startswith(("| random |", "| evolve |"))]
    assert len(rows) == 2 and all(len(r.split("|")) == 11 for r in rows)  # one row per strategy, every column
    assert "top-2 found, test" in md
    # (the test data here may hold fewer held-out problems than asked for)
    decisive = re.search(r"^Decisive check on the first part of the humaneval test split, found by (random|evolve) "
                         r"\((\d+) examples\): best found overall `[^`]+` [0-9.]+ vs best seed `io`", md, re.M)
    assert decisive and 1 <= int(decisive[2]) <= 5
    transfer = re.search(r"^Transfer to mbpp test \((\d+) examples\): best found overall", md, re.M)
    assert transfer and 1 <= int(transfer[1]) <= 3
    assert "**Result:**" in md and "**Status: not finished.**" not in md
    assert str(tmp_path) not in md  # the command line keeps no path of the machine that ran it
    assert "--runs" not in md and "--out" not in md
    svg = (tmp_path / "discovery.svg").read_text()
    assert svg.startswith("<svg") and svg.count("<polyline") == 2
    evaluated = _candidates(tmp_path)
    assert evaluated >= 16  # 8 per strategy (a shared seed may be reused rather than evaluated twice)

    # a reading written below the marker survives; the finished runs are read back, nothing evaluated again
    (tmp_path / "discovery.md").write_text(md + f"\n{NOTES_MARKER}\nA person's reading.\n")
    second = _run(tmp_path)
    assert second.returncode == 0, second.stderr[-2000:]
    again = (tmp_path / "discovery.md").read_text()
    assert _candidates(tmp_path) == evaluated
    assert [line for line in again.splitlines() if line.startswith(("| random |", "| evolve |"))] == rows
    assert again.rstrip().endswith("A person's reading.")


@pytest.fixture(scope="module")
def discovery() -> ModuleType:
    return _load("bench_discovery", SCRIPT)


def _row(diff: tuple[float, float, float]) -> dict:
    genome = SimpleNamespace(name="io")
    cand = SimpleNamespace(genome=genome, score=0.5)
    return {"strategy": "coevolve", "best_seed": (cand, 0.6), "top": [(cand, 0.7)], "diff": diff,
            "valid_share": 1.0, "duplicates": 0, "calls": 10, "minutes": 1.0, "operators": "-"}


def _check(diff: tuple[float, float, float]) -> dict:
    return {"found": SimpleNamespace(name="io~b"), "seed": SimpleNamespace(name="io"), "found_scores": [1.0, 0.0],
            "seed_scores": [0.0, 0.0], "diff": diff, "strategy": "coevolve"}


@pytest.mark.parametrize(("first_part", "whole", "found"), [
    ((0.1, 0.02, 0.2), (0.05, -0.01, 0.1), False),  # above 0 on the first 40, not on all 100: not found
    ((0.05, -0.01, 0.1), (0.1, 0.02, 0.2), True),  # the whole split clears it: found
    ((0.1, 0.02, 0.2), (0.1, 0.03, 0.2), True),
])
def test_the_whole_test_split_decides(discovery: ModuleType, tmp_path: Path, first_part: tuple,
                                      whole: tuple, found: bool, capsys: pytest.CaptureFixture[str]) -> None:
    args = discovery.argparse.Namespace(lm="fake", task="humaneval", limit=20, cascade=5, candidates=20,
                                        test_limit=40, final_test_limit=None, top_k=3, transfer=None,
                                        strategies=["coevolve"], argv=[], out=str(tmp_path / "d.md"))
    discovery.write(args, [_row(first_part)], None, _check(whole))
    result = [line for line in (tmp_path / "d.md").read_text().splitlines() if line.startswith("**Result")]
    assert result == [("**Result:** coevolve found a system whose held-out CI of (found - best seed) lies above 0."
                       if found else "**Result:** no strategy found a system whose held-out CI of (found - best "
                       "seed) lies above 0 at this budget; see the operators line for where improvements came from.")]
    capsys.readouterr()


def test_command_line_drops_the_machines_paths(discovery: ModuleType) -> None:
    argv = ["--lm", "local", "--runs", "/x/runs", "--out=/x/d.md", "--limit", "20", "--out", "/y/d.md", "--runs=r"]
    kept = list(argv)
    assert discovery._command_args(argv) == "--lm local --limit 20"
    assert argv == kept


def test_calls_say_what_came_from_the_cache(discovery: ModuleType) -> None:
    assert discovery._calls({"calls": 734}) == "734"
    assert discovery._calls({"calls": 0, "cached": 2050}) == "0 + 2050 cached"  # a search replayed from the cache
