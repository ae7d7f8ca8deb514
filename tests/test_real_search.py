"""A short real search on the embedded local model (the integration test of issue 'search'), plus a second
seed (self-consistency's multi-sample path) end to end on it. Skipped cleanly without llama-cpp-python or
the pulled weights."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

import masforge
from masforge.execution.compile import compile_genome
from masforge.lm.client import LMClient, LMConfig
from masforge.local_model import is_pulled
from masforge.seeds import load_seed

pytestmark = [
    pytest.mark.local_model,
    pytest.mark.slow,
    pytest.mark.skipif(importlib.util.find_spec("llama_cpp") is None or not is_pulled("qwen"),
                       reason="needs llama-cpp-python and `masforge models pull` (qwen)"),
]


def test_short_real_search(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MASFORGE_LM_CACHE", str(tmp_path / "lm_cache.sqlite"))
    result = masforge.optimize(
        "rg:basic_arithmetic", strategy="evolve", budget=3, lm={"model": "local", "max_tokens": 256,
                                                               "max_concurrency": 1},
        seeds=["io"], limit=2, test_limit=2, test_top_k=1, concurrency=1, output=tmp_path / "runs",
        # structural edits only: the meta-agent's long JSON proposals take minutes at ~40 tokens/s
        strategy_options={"evolve": {"structural_rate": 1.0}},
    )
    assert result.stop_reason in ("max_candidates", "strategies finished")
    assert len(result.candidates) >= 2          # the seed and at least one proposal were scored
    assert result.spend["llm_calls"] > 0 and result.spend["tokens"] > 0
    assert result.test_scores and (result.run_dir / "summary.json").is_file()
    archive = result.open_archive()
    assert len(archive.list()) == len(result.candidates)


def test_self_consistency_seed_on_the_local_model(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MASFORGE_LM_CACHE", str(tmp_path / "lm_cache.sqlite"))
    client = LMClient({"worker": LMConfig(model="local", max_tokens=96, max_concurrency=1)})
    genome = load_seed("self_consistency")
    result = compile_genome(genome, client)(question="What is 12 + 30? Answer with the number only.")
    assert str(result.outputs["answer"]).strip()
    assert len(result.candidates) == 5            # five independent samples were voted on
    assert client.ledger.calls >= 5
