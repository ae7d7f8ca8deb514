"""Every registered strategy is deterministic: the same seed gives the same candidates with the same scores.

A resume replays the stopped run from its start and checks each candidate it meets again, so a strategy that
draws from an unseeded source (the clock, ``random`` without the run's seed, set order, a thread race) would
only show up at a user's resume, as a replay that leaves the path. Here it fails at once, for a new strategy too.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

import masforge
from masforge.lm import fake as fake_lm
from masforge.search.strategies import STRATEGIES

_FAKE_REPLY = fake_lm.fake_reply


def _meta_spec(prompt: str) -> dict[str, Any]:
    """A valid system that depends on the prompt alone (so on what the meta-agent was shown)."""
    i = int(hashlib.sha256(prompt.encode()).hexdigest(), 16) % 7
    agents = [{"id": "solver", "role": "solver", "module": "chain_of_thought", "instructions": f"Solve. Style {i}."}]
    edges = ["input -> solver", "solver -> output"]
    if i % 2:
        agents.append({"id": "checker", "role": "checker", "module": "predict",
                       "instructions": f"Verify the draft answer and correct it. Variant {i}."})
        edges = ["input -> solver", "solver -> checker", "input -> checker", "checker -> output"]
    return {"rationale": f"variant {i}", "name": f"variant-{i}", "agents": agents, "edges": edges}


def _reply(messages: Sequence[dict[str, Any]], info: dict[str, Any] | None = None) -> str:
    """The fake LM for systems; for the meta-agent, valid proposals (the fake LM alone writes none)."""
    if (info or {}).get("model") == "fake:meta":
        return json.dumps(_meta_spec(str(messages[-1].get("content", ""))))
    return _FAKE_REPLY(messages, info)


def _run(tmp_path: Path, strategy: str, name: str, monkeypatch: pytest.MonkeyPatch) -> list[tuple[Any, ...]]:
    monkeypatch.setenv("MASFORGE_CACHE", str(tmp_path / f"cache-{name}"))  # no answers shared between the runs
    result = masforge.optimize("rg:basic_arithmetic", strategy=strategy, budget=6, lm="fake", meta_lm="fake:meta",
                               seeds=["cot", "io"], limit=2, test_top_k=0, seed=7, output=tmp_path / name,
                               progress=False)
    return [(c.id, c.score, c.operator, c.parents) for c in result.candidates]


@pytest.mark.parametrize("strategy", sorted(STRATEGIES))
def test_the_same_seed_gives_the_same_candidates(strategy: str, tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(fake_lm, "fake_reply", _reply)
    first = _run(tmp_path, strategy, "a", monkeypatch)
    assert len(first) > 2, f"{strategy} proposed nothing beyond the seeds; the check would be empty"
    assert _run(tmp_path, strategy, "b", monkeypatch) == first
