"""bench/router_signal.py: where one system wins the questions of one kind and another the rest, a router learns
it (cross-validated accuracy far above the base rate, a gain a small test split can show); where the wins fall at
random, it does not (no gain to tell). The kept scores replay to the same numbers."""
from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from pathlib import Path

from masforge.evaluators.tasks import get_task
from tests.test_bench_portfolio import _task_file  # arithmetic and colour questions, half each

BENCH = Path(__file__).resolve().parents[1] / "bench"


def _report(path: Path, scores: dict[str, float]) -> str:
    path.write_text(json.dumps({"examples": [{"example_id": e, "score": s} for e, s in scores.items()]}))
    return str(path)


def _run(tmp_path: Path, data: Path, *args: str) -> tuple[str, dict]:
    out = tmp_path / "signal.json"
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    proc = subprocess.run([sys.executable, str(BENCH / "router_signal.py"), "--task", str(data), *args,
                           "--out", str(out)], env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout, json.loads(out.read_text())


def test_a_router_learns_wins_the_question_shows_and_not_wins_that_fall_at_random(tmp_path: Path) -> None:
    data = _task_file(tmp_path)
    examples = get_task(str(data)).split("validation+train")
    arithmetic = {ex.id: 1.0 if "What is" in str(ex.inputs) else 0.0 for ex in examples}
    colour = {e: 1.0 - s for e, s in arithmetic.items()}
    rng = random.Random(0)
    coin_a = {ex.id: float(rng.random() < 0.5) for ex in examples}
    coin_b = {ex.id: float(rng.random() < 0.5) for ex in examples}

    text, kinds = _run(tmp_path, data, "--report", "arithmetic=" + _report(tmp_path / "a.json", arithmetic),
                       "--report", "colour=" + _report(tmp_path / "c.json", colour))
    assert kinds["room"] == len(examples) and abs(kinds["base_rate"] - 0.5) < 0.1
    learned = kinds["routers"][-1]
    assert learned["accuracy"] > 0.95 and learned["routed"] > 0.95 and kinds["oracle"] == 1.0
    assert learned["test_n_needed"] is not None and learned["test_n_needed"] < 20
    assert "arithmetic alone right on" in text and "perfect router (oracle) 1.000" in text

    _, coins = _run(tmp_path, data, "--report", "a=" + _report(tmp_path / "x.json", coin_a),
                    "--report", "b=" + _report(tmp_path / "y.json", coin_b))
    assert all(r["accuracy"] < coins["base_rate"] + 0.15 for r in coins["routers"])
    assert all(r["test_n_needed"] is None or r["test_n_needed"] > 100 for r in coins["routers"])

    kept = tmp_path / "kept.json"
    kept.write_text(json.dumps(kinds))
    _, again = _run(tmp_path, data, "--scores", str(kept))
    assert again["routers"] == kinds["routers"] and again["pairs"] == kinds["pairs"]
