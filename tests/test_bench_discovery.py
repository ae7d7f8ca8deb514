"""bench/discovery.py end to end on the deterministic fake LM: every stage runs and is reported (a row per
strategy, the decisive checks, the discovered genome), and a second run goes on from the finished run folders
without evaluating again, keeping a person's notes."""
from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType

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
    cmd = [sys.executable, str(SCRIPT), "--lm", "fake", "--task", "humaneval", "--strategies", "random", "evolve",
           "--calls", "400", "--candidates", "9", "--limit", "4", "--test-limit", "3", "--transfer", "mbpp",
           "--transfer-limit", "3", "--runs", str(tmp_path / "runs"), "--out", str(tmp_path / "discovery.md")]
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=900)


def _candidates(tmp_path: Path) -> int:
    return sum(line.count('"event": "candidate"')
               for events in (tmp_path / "runs").glob("humaneval-*/events.jsonl")
               for line in events.read_text().splitlines())


def state_best(tmp_path: Path) -> str:
    """The library's best seed as the state file names it."""
    state = json.loads((tmp_path / "discovery" / "humaneval.json").read_text())
    return f"Best: `{state['library']['best']['name']}`"


def test_discovery_reports_every_stage_and_goes_on_from_finished_runs(tmp_path: Path) -> None:
    first = _run(tmp_path)
    assert first.returncode == 0, first.stderr[-3000:]
    md = (tmp_path / "discovery.md").read_text()
    rows = [line for line in md.splitlines() if line.startswith(("| random |", "| evolve |"))]
    assert len(rows) == 2 and all(len(r.split("|")) == 11 for r in rows)  # one row per strategy, every column
    assert "## humaneval" in md and "calls to pass the library" in md and "operator credit" in md
    # the reference is the whole library: every applicable shipped seed raced, the best named
    assert "**The library.**" in md and "| escalate |" in md and "| io |" in md
    assert state_best(tmp_path) in md
    state = json.loads((tmp_path / "discovery" / "humaneval.json").read_text())
    assert [r["strategy"] for r in state["rows"]] == ["random", "evolve"]
    if state.get("overall"):  # the best found is checked and written even when it is not above the seed
        assert "Against the library's best on the whole humaneval test split" in md
        assert "Transfer to the mbpp test split" in md and "**Verdict (humaneval):**" in md
        assert (tmp_path / "discovered" / "humaneval.yaml").is_file()
    if state.get("overall", {}).get("kept_seed"):  # nothing above the best seed on selection: the seed stays
        assert "the search's answer stays that seed; the checks below are for the record" in md
        assert "**Verdict (humaneval):** no system found by the search beat the library's best seed" in md
    assert str(tmp_path) not in md  # the command line keeps no path of the machine that ran it
    assert "--runs" not in md and "--out" not in md
    svg = (tmp_path / "discovery_humaneval.svg").read_text()
    assert svg.startswith("<svg") and svg.count("<polyline") == 2
    evaluated = _candidates(tmp_path)
    assert evaluated >= 10

    # a reading written below the marker survives; the finished runs are read back, nothing evaluated again
    (tmp_path / "discovery.md").write_text(md + f"\n{NOTES_MARKER}\nA person's reading.\n")
    second = _run(tmp_path)
    assert second.returncode == 0, second.stderr[-3000:]
    again = (tmp_path / "discovery.md").read_text()
    assert _candidates(tmp_path) == evaluated
    assert [line for line in again.splitlines() if line.startswith(("| random |", "| evolve |"))] == rows
    assert again.rstrip().endswith("A person's reading.")


def test_a_found_system_tied_with_the_seed_on_selection_is_still_checked_for_the_record() -> None:
    bench = _load("bench_discovery", SCRIPT)
    check = {"n": 257, "found": 0.619, "seed": 0.603, "diff": 0.016, "low": 0.004, "high": 0.031, "won": 4, "lost": 0}
    state = {"task": "mbpp", "command": "--task mbpp", "date": "today", "settings": "", "rows": [],
             "strategies": ["evolve"],
             "overall": {"strategy": "evolve", "name": "found", "id": "x", "selection": 0.672, "stack": ["a"],
                         "kept_seed": "sample-and-test"},
             "decisive": check | {"seed_name": "sample-and-test", "limit": None},
             "versus_io": check | {"found": 0.619, "seed": 0.459, "diff": 0.160, "low": 0.113, "high": 0.206,
                                   "name": "io"}}
    md = "\n".join(bench.task_section(state))
    assert "the search's answer stays that seed; the checks below are for the record" in md
    assert "Against the library's best on the whole mbpp test split (257 examples)" in md
    assert ("**Verdict (mbpp):** no system found by the search beat the library's best seed on the selection set, so "
            "the search's answer stays that seed; on held-out data its best found is better than that seed (CI above "
            "0, 257 examples)") in md
    assert "better than io there (+0.160, CI above 0)" in md
