"""bench/fidelity.py on the deterministic fake LM: besides the code and math tasks it measures a reasoning-gym family
and a .jsonl file scored by exact match (issue 27), each row against plain chat with the same target."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[1] / "bench"


def test_fidelity_measures_a_reasoning_gym_family_and_a_jsonl_task(tmp_path: Path) -> None:
    out = tmp_path / "fidelity.txt"
    env = {k: v for k, v in os.environ.items() if k != "MASFORGE_LOCAL_API_BASE"}
    env.update(LITELLM_LOCAL_MODEL_COST_MAP="True", MASFORGE_CACHE=str(tmp_path / "cache"))
    run = subprocess.run([sys.executable, str(BENCH / "fidelity.py"), "--lm", "fake", "--tasks", "rg:basic_arithmetic",
                          "jsonl", "--n", "1", "--out", str(out)], env=env, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-2000:]
    text = out.read_text()
    for task in ("rg:basic_arithmetic", "gsm8k.jsonl"):
        for system in ("plain chat", "io", "cot", "io (ChatAdapter)"):
            assert any(line.startswith(task) and f" {system} " in line for line in text.splitlines()), (task, system)
        assert any(line.startswith(task) and "io - plain chat" in line and "target met" in line
                   for line in text.splitlines()), task


def test_the_jsonl_row_is_a_users_kind_of_file(tmp_path: Path) -> None:
    sys.path.insert(0, str(BENCH))
    try:
        import fidelity  # type: ignore[import-not-found]
    finally:
        sys.path.remove(str(BENCH))
    path = fidelity.numbers_jsonl(1, tmp_path)
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert lines and all(set(line) == {"question", "answer"} for line in lines)
    assert all(line["answer"].lstrip("-").replace(".", "").isdigit() for line in lines)
    task, label = fidelity.resolve_task("jsonl", 1, tmp_path)
    assert label == "gsm8k.jsonl" and task.metric_name == "exact_match" and task.split("validation")
