"""bench/shared_server.py, run on a stub in place of the model (its logic, not the speed): two evaluations alone, then
together on one shared server, each one's rate as a fraction of its solo rate, and the results file it writes."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[1] / "bench" / "shared_server.py"


def test_the_pair_shares_one_server_and_each_rate_is_held_against_its_solo_rate(tmp_path: Path) -> None:
    out = tmp_path / "shared_server.txt"
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True", "MASFORGE_CACHE": str(tmp_path / "unused")}
    proc = subprocess.run([sys.executable, str(BENCH), "--stub", "--stub-latency", "1.5", "--limit", "2",
                           "--out", str(out)], env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    text = out.read_text()
    assert "STUB in place of the model" in text and "llama.cpp server, 4 slots" in text
    row = r"^(alone A|alone B|together A|together B)\s+(\w+)\s+(\d+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+(\S+)$"
    rows = {m.group(1): m.groups() for m in re.finditer(row, text, re.M)}
    assert set(rows) == {"alone A", "alone B", "together A", "together B"}
    assert rows["alone A"][1] == rows["together A"][1] == "validation" and rows["together B"][1] == "test"
    for label in ("A", "B"):  # the fraction is the pair's examples per minute over the solo run's
        solo, pair = float(rows[f"alone {label}"][4]), float(rows[f"together {label}"][4])
        assert abs(float(rows[f"together {label}"][6]) - pair / solo) <= 0.011  # from the rounded rates
        assert int(rows[f"together {label}"][2]) == 2
    assert "one server for both: yes (1 server seen, at most 2 users at once)" in text
    fractions = [float(rows[f"together {x}"][6]) for x in "AB"]
    verdict = "met" if min(fractions) >= 0.45 else "NOT met"
    assert f"target: each keeps at least 45% of its solo rate: {verdict}" in text
