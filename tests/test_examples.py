"""Every script in examples/ runs on the deterministic offline LM (so the examples cannot rot)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"


def _run(args: list[str], cwd: Path) -> str:
    env = {**os.environ, "MASFORGE_CACHE": str(cwd / "cache"), "MASFORGE_LM": "fake"}
    proc = subprocess.run([sys.executable, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout


def test_examples_run_offline(tmp_path: Path) -> None:
    out = _run([str(EXAMPLES / "optimize_objective.py"), "--lm", "fake", "--output", str(tmp_path / "runs")],
               tmp_path)
    assert "best system:" in out and "run folder:" in out
    out = _run([str(EXAMPLES / "build_and_run_genome.py"), "--lm", "fake"], tmp_path)
    assert "answer: 51" in out and "score" in out
    out = _run([str(EXAMPLES / "browse_archive.py"), str(tmp_path / "runs" / "latest")], tmp_path)
    assert "candidates; task sums" in out and "front:" in out


def test_every_example_is_tested() -> None:
    tested = {"optimize_objective.py", "build_and_run_genome.py", "browse_archive.py"}
    assert {p.name for p in EXAMPLES.glob("*.py")} == tested
