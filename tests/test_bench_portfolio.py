"""bench/portfolio.py end to end on the deterministic fake LM: a portfolio is built from an archive's selection
results, it and the single best answer the same test examples, and the results file says members, the router's
choices, the oracle bound, both scores, the paired difference with its CI and the LM calls per question."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from masforge.archive.store import Archive
from masforge.evaluators.runner import Evaluator
from masforge.evaluators.tasks import get_task
from masforge.genome.io import parse_genome_text
from masforge.lm.client import LMCache, LMClient
from masforge.seeds import load_seed

BENCH = Path(__file__).resolve().parents[1] / "bench"


def _task_file(tmp_path: Path) -> Path:
    lines = []
    for i in range(160):
        if i % 2:
            lines.append({"question": f"What is {i} + {i * 3}?", "answer": str(4 * i)})
        else:
            answer = "red" if i % 4 == 0 else "blue"
            lines.append({"question": f"Name the colour number {i} of the rainbow.", "answer": answer})
    path = tmp_path / "mixed.jsonl"
    path.write_text("".join(json.dumps(x) + "\n" for x in lines), encoding="utf-8")
    return path


COLOUR = '''"""
name: colour
"""


def forward(inputs):
    return {"answer": "red"}
'''  # a code genome that knows one colour and calls no LM: half the questions io cannot solve


def test_bench_portfolio_builds_compares_and_writes_its_results(tmp_path: Path) -> None:
    data = _task_file(tmp_path)
    task = get_task(str(data))
    cache = tmp_path / "answers.sqlite"
    client = LMClient({"worker": "fake"}, cache=LMCache(cache))
    evaluator = Evaluator(task, client, split="validation+train")
    with Archive.open(tmp_path / "archive", create=True) as archive:
        for genome in (load_seed("io"), load_seed("self_consistency"), parse_genome_text(COLOUR, "colour.py", "py")):
            archive.add(genome)
            archive.add_result(genome.id, evaluator.evaluate(genome).result())
    env = {k: v for k, v in os.environ.items() if k != "MASFORGE_LOCAL_API_BASE"}
    env.update(LITELLM_LOCAL_MODEL_COST_MAP="True", MASFORGE_LM_CACHE=str(cache))
    out = tmp_path / "results" / "portfolio.md"
    proc = subprocess.run([sys.executable, str(BENCH / "portfolio.py"), "--lm", "fake", "--task", str(data),
                           "--archive", str(tmp_path / "archive"), "--out", str(out)],
                          env=env, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    text = out.read_text(encoding="utf-8")
    [state_file] = (out.parent / "portfolio").glob("*.json")
    state = json.loads(state_file.read_text())
    n_test = len(task.split("test"))
    t = state["test"]
    assert state["candidates"] == 3 and state["selection_n"] == len(task.split("validation+train"))
    assert [m["name"] for m in state["members"]] == ["io", "colour"]  # self_consistency: same answers, 5x calls
    io, colour = (m["test_score"] for m in state["members"])
    assert t["single_best"] == io and t["routed"] == t["oracle"] == io + colour and t["outcome"] == "better"
    assert t["routed_calls"] < 1.0 and t["single_best_calls"] == 1.0
    assert t["goal"] == "met: better than the single best at no more LM calls per question"
    assert t["n"] == n_test and sum(m["test_sends"] for m in state["members"]) == n_test
    assert sum(m["selection_sends"] for m in state["members"]) == state["selection_n"]
    assert all("test_score" in m for m in state["members"])  # every member ran on test: the oracle bound
    assert t["oracle"] >= max(t["routed"], t["single_best"]) - 1e-9
    assert t["single_best_calls"] > 0 and t["routed_calls"] > 0
    assert t["wins"] + t["losses"] + t["ties"] == n_test
    for part in ("| member | id | selection score", "router sends (test)", "Oracle bound (best member per question)",
                 f"Test ({n_test} paired examples): routed", "95% paired bootstrap CI", "LM calls/q", "Goal: "):
        assert part in text, part
    assert state["members"][0]["name"] in text
    assert state["archives"] == [f"{tmp_path.name}/archive"] and str(tmp_path) not in text  # no machine's paths
