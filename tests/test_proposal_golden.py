"""A proposal is read leniently the same way: several hundred messy proposals, made at random from the slips small
models make (agents as a dict, module and aggregation names in other spellings, edges as one string, pairs,
objects or with their condition written on them, a wrapper object, a topology object, values out of range), are
normalised to the designs recorded in ``tests/fixtures/proposal/normalised.json`` (made by _normalise_spec before
it was split into named steps, issue 25). After an intended change, rewrite the fixture with
``MASFORGE_UPDATE_GOLDEN=1 pytest tests/test_proposal_golden.py`` and review its diff.
"""

from __future__ import annotations

import copy
import hashlib
import json
import os
import random
from pathlib import Path
from typing import Any

from masforge.search.operators.proposal import _normalise_spec

GOLDEN = Path(__file__).resolve().parent / "fixtures" / "proposal" / "normalised.json"
UPDATE = os.environ.get("MASFORGE_UPDATE_GOLDEN") == "1"

AGENT_FIELDS: dict[str, list[Any]] = {
    "id": ["a0", "Agent 1", "", None, "solver", "1x"], "name": ["n1", None], "role": ["r", " spaced ", None],
    "module": ["Chain of Thought", "predict", "react", "execute", "program-of-thought", 5, None],
    "tools": ["calculator, python", ["python", "python"], None, "x"],
    "temperature": ["0.5", 9, -1, "hot", True, None], "copies": [0, 3.6, "40", None],
    "adapter": ["JSON", "weird", None], "instructions": [" do it ", None, 5], "signature": ["question -> tests", None],
}
SETTINGS: dict[str, list[Any]] = {
    "rounds": [1, "3", 40, None, "x"], "aggregation": ["Majority Vote", "judge", "vote", None, 3],
    "judge": ["a0", "Agent 1", None], "name": ["n", None], "rationale": ["why", None, 5],
}
CONDITIONS: list[Any] = [{"a0 -> output": "fail"}, [{"edge": "a0 -> output", "when": "pass"}],
                         [["a0", "output", "failed"]], [{"from": "a0", "to": "a1", "if": False}], [1, 2]]


def _edge(rng: random.Random, ids: list[str]) -> Any:
    a, b = rng.choice(ids), rng.choice(ids)
    return rng.choice([f"{a} -> {b}", f"{a} => {b}", f"{a} → {b}", [a, b], f"{a} -(fail)-> {b}",
                       {"from": a, "to": b, "when": rng.choice(["failed", "on_pass", None, True])},
                       f"{a} -> {b} (if pass)", f"{a} -> {b} on fail", 7, a])


def _proposal(rng: random.Random) -> dict[str, Any]:
    agents = [{k: rng.choice(v) for k, v in AGENT_FIELDS.items() if rng.random() < 0.6}
              for _ in range(rng.randrange(5))]
    ids = ["input", "output", "INPUT", "ghost", *(str(a.get("id") or a.get("name") or a.get("role") or "")
                                                   for a in agents)]
    data: dict[str, Any] = {"agents": {str(a.get("id")): a for a in agents} if rng.random() < 0.25 else agents}
    edges: Any = [_edge(rng, ids) for _ in range(rng.randrange(6))]
    data["edges"] = ", ".join(e for e in edges if isinstance(e, str)) if rng.random() < 0.2 else edges
    if rng.random() < 0.3:
        data["conditions"] = copy.deepcopy(rng.choice(CONDITIONS))
    data.update({k: rng.choice(v) for k, v in SETTINGS.items() if rng.random() < 0.5})
    if rng.random() < 0.2:
        data = {"topology": {"edges": data.pop("edges"), "rounds": data.pop("rounds", None)}, **data}
    return {"proposal": data, "rationale": "outer"} if rng.random() < 0.15 else data


def _proposals() -> list[dict[str, Any]]:
    rng = random.Random(25)
    # through JSON, as a reply is: each proposal is one the model could have written
    return [json.loads(json.dumps(_proposal(rng))) for _ in range(300)]


def _digest(proposal: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(proposal).encode()).hexdigest()[:16]


def test_every_messy_proposal_is_read_as_recorded() -> None:
    proposals = _proposals()
    # each proposal is recorded by a digest (the fixture stays small), what it is read as in full
    found = [{"proposal": _digest(p), "normalised": _normalise_spec(copy.deepcopy(p))} for p in proposals]
    if UPDATE:
        GOLDEN.parent.mkdir(parents=True, exist_ok=True)
        GOLDEN.write_text("[\n" + ",\n".join(json.dumps(f, ensure_ascii=False) for f in found) + "\n]\n",
                          encoding="utf-8")
    assert GOLDEN.is_file(), f"{GOLDEN.name}: no recorded proposals; write them with MASFORGE_UPDATE_GOLDEN=1"
    recorded = json.loads(GOLDEN.read_text(encoding="utf-8"))
    assert [r["proposal"] for r in recorded] == [f["proposal"] for f in found]  # the same proposals were made
    for proposal, mine, theirs in zip(proposals, found, recorded, strict=True):
        # compared as JSON text, so the order of the keys counts too
        assert json.dumps(mine["normalised"]) == json.dumps(theirs["normalised"]), proposal


def test_the_proposals_hold_every_slip() -> None:
    proposals = _proposals()
    results = [_normalise_spec(copy.deepcopy(p)) for p in proposals]
    assert any(r.get("conditions") for r in results) and any(r.get("aggregation") == "majority_vote" for r in results)
    assert any(isinstance(p.get("agents"), dict) for p in proposals) and any(isinstance(p.get("edges"), str)
                                                                           for p in proposals)
    assert any("topology" in p for p in proposals) and any("proposal" in p for p in proposals)
    assert any(a.get("module") == "chain_of_thought" for r in results for a in r.get("agents", [])
               if isinstance(a, dict))
