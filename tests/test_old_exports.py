"""Exported files already in users' hands keep running after masforge's layout changes.

``fixtures/old_exports/cot_embedded_model.py.txt`` is the cot seed exported on the embedded model by masforge
before the standalone runtime left ``masforge/execution/`` and the embedded model left ``masforge/runtime/``: its
inlined runtime starts the model through ``masforge.runtime.local_model``. It must still run as a script (reaching
the model through the old path, which warns) and still load into ``masforge evaluate``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from masforge.cli import app
from masforge.lm.fake import fake_reply
from masforge.local_model import EXTERNAL_API_BASE_ENV
from masforge.testing.stub_server import StubServer

OLD_EXPORT = Path(__file__).resolve().parent / "fixtures" / "old_exports" / "cot_embedded_model.py.txt"
QUESTION = "What is 6 * 7 + 1?"


@pytest.fixture
def old_export(tmp_path: Path) -> Path:
    path = tmp_path / "cot_export.py"
    path.write_text(OLD_EXPORT.read_text(encoding="utf-8"), encoding="utf-8")
    return path


def _fake_lm(messages: list[dict[str, Any]], body: dict[str, Any]) -> str:
    """The embedded model's stand-in: masforge's fake LM behind an OpenAI-compatible server."""
    return fake_reply(messages, {"sample": body.get("seed", 0)})


def test_the_fixture_is_of_the_old_layout() -> None:
    text = OLD_EXPORT.read_text(encoding="utf-8")
    assert "from masforge.runtime.local_model import ensure_local_server" in text
    assert "# ---- from masforge/execution/standalone/system.py" in text
    assert "masforge.local_model" not in text


def test_an_old_export_runs_on_the_embedded_model_through_the_old_path(old_export: Path, tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """Run as a script with no --model, the old file starts the LM it was found with (the embedded model, here a
    stand-in server answering as the fake LM) through masforge.runtime.local_model, says that path is deprecated,
    and answers what masforge answers on the same model."""
    with StubServer(responder=_fake_lm) as stub:
        env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True", "MASFORGE_CACHE": str(tmp_path / "cache"),
               EXTERNAL_API_BASE_ENV: stub.api_base}
        proc = subprocess.run([sys.executable, str(old_export), QUESTION, "--json"], capture_output=True, text=True,
                              env=env, timeout=300)
        assert proc.returncode == 0, proc.stderr[-3000:]
        assert "DeprecationWarning: masforge.runtime.local_model is deprecated" in proc.stderr
        requests = stub.requests
        monkeypatch.setenv(EXTERNAL_API_BASE_ENV, stub.api_base)
        monkeypatch.setenv("MASFORGE_CACHE", str(tmp_path / "cache"))
        ours = CliRunner().invoke(app, ["run", "cot", "-i", QUESTION, "--lm", "local", "--json", "--no-cache"])
    assert ours.exit_code == 0, ours.output
    assert requests > 0 and json.loads(proc.stdout) == json.loads(ours.stdout)["outputs"]


def test_an_old_export_still_evaluates_like_its_genome(old_export: Path, tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """``masforge evaluate`` loads the old file (its own inlined runtime, masforge's LM client) and scores it as
    it scores the seed it was exported from, on the fake LM."""
    monkeypatch.setenv("MASFORGE_CACHE", str(tmp_path / "cache"))
    scores = []
    for ref, out in ((str(old_export), tmp_path / "old.json"), ("cot", tmp_path / "seed.json")):
        res = CliRunner().invoke(app, ["evaluate", ref, "--task", "rg:basic_arithmetic", "--lm", "fake", "--limit",
                                       "3", "--no-cache", "-o", str(out)])
        assert res.exit_code == 0, res.output
        data = json.loads(out.read_text(encoding="utf-8"))
        scores.append((data["score"], data["genome_id"], data["tokens"], data["llm_calls"],
                       [e["outputs"] for e in data["examples"]]))
    assert scores[0] == scores[1]
