"""bench/headroom.py on a scripted fake LM and a tiny code task: every draft of every system is scored in the sandbox,
the main system's misses are told apart (a wrong pick, no right draft of its own, none anywhere), and a second run
answers from the answer cache without sending anything."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from masforge.errors import MasforgeError
from masforge.evaluators.example import Example
from masforge.evaluators.tasks import Task
from masforge.genome.io import parse_genome_text
from masforge.lm.cache import LMCache
from masforge.lm.client import LMClient
from masforge.seeds import load_seed
from masforge.testing import chat_reply

BENCH = Path(__file__).resolve().parents[1] / "bench"
sys.path.insert(0, str(BENCH))
try:
    import headroom  # type: ignore[import-not-found]
finally:
    sys.path.remove(str(BENCH))

RIGHT = "```python\ndef add(a, b):\n    return a + b\n```"
WRONG = "```python\ndef add(a, b):\n    return a - b\n```"  # right on add(0, 0) only
OFF_BY_ONE = "```python\ndef add(a, b):\n    return a + b + 1\n```"
HIDDEN = "assert add(2, 3) == 5\nassert add(-4, 4) == 0"

GATED = parse_genome_text("""
name: gated
agents:
  - {id: coder, copies: 3}
  - {id: check, module: execute}
topology:
  edges: [input -> coder, coder -> check, check -> output]
""")

# Per problem: the greedy answer (io) and the three sampled copies (the gated system). The gated system's check only
# sees the stated example; the metric runs the hidden tests.
SCRIPT = {
    # stated add(0, 0) == 0 passes WRONG too: the vote picks WRONG although a copy wrote RIGHT
    "A": ("add(0, 0) == 0", RIGHT, [WRONG, WRONG, RIGHT]),
    # no copy is right, but io's greedy answer is
    "B": ("add(2, 3) == 5", RIGHT, [WRONG, OFF_BY_ONE, WRONG]),
    # nobody is right
    "C": ("add(2, 3) == 5", WRONG, [OFF_BY_ONE, WRONG, OFF_BY_ONE]),
    # the gated system is right, io is not
    "D": ("add(2, 3) == 5", WRONG, [OFF_BY_ONE, RIGHT, WRONG]),
}


def _task() -> Task:
    examples = [Example(f"tiny/{tag}", {"question": f"[{tag}] Write a python function add(a, b) returning the sum.\n"
                                                    f"Your code should pass these tests:\nassert {stated}"},
                        "", {"test": HIDDEN})
                for tag, (stated, _, _) in SCRIPT.items()]
    return Task("tiny", {"test": examples}, "code")


def _responder(calls: list[str]):
    def respond(messages: list[dict[str, Any]], info: dict[str, Any]) -> str:
        text = "\n".join(str(m.get("content", "")) for m in messages)
        tag = next(t for t in SCRIPT if f"[{t}]" in text)
        calls.append(tag)
        _, greedy, samples = SCRIPT[tag]
        sample = int(info.get("sample", 0))
        return chat_reply(answer=samples[sample % 3] if info.get("temperature") else greedy)

    return respond


def _client(cache: Path, calls: list[str]) -> LMClient:
    return LMClient({"worker": "fake"}, cache=LMCache(cache), responder=_responder(calls))


def test_headroom_tells_a_wrong_pick_from_no_right_draft_and_replays_from_the_cache(tmp_path: Path) -> None:
    sent: list[str] = []
    genomes = [load_seed("io"), GATED]
    first = headroom.measure(_task(), _client(tmp_path / "answers.sqlite", sent), genomes, concurrency=2)
    assert first["examples"] == 4 and first["left_out"] == 0
    assert first["pool_solves"] == 3  # A, B and D: some draft passes the hidden tests
    rows = {r["name"]: r for r in first["genomes"]}
    assert rows["io"]["solves"] == 2 and rows["io"]["own_pool"] == 2 and rows["io"]["drafts"] == 4
    assert rows["gated"]["solves"] == 1  # only D
    assert rows["gated"]["own_pool"] == 2  # A (a copy wrote RIGHT) and D
    assert rows["gated"]["drafts"] == 2 + 2 + 2 + 3  # distinct copies per problem
    assert first["main"] == {"name": "gated", "id": GATED.id, "solves": 1, "lost_by_picking": 1,
                             "lost_to_others": 1, "never_right": 1}
    # each distinct draft of a problem is scored once, whoever wrote it
    assert first["drafts_scored"] == 2 + 3 + 2 + 3
    by_id = {e["id"]: e for e in first["per_example"]}
    assert by_id["tiny/A"]["own"] == {"io": True, "gated": True}
    assert by_id["tiny/A"]["final"] == {"io": True, "gated": False}
    assert sent  # the first run generated its answers

    again: list[str] = []
    second = headroom.measure(_task(), _client(tmp_path / "answers.sqlite", again), genomes, concurrency=2)
    assert again == []  # every answer came from the cache
    assert second == first  # and the measurement is the same

    lines = "\n".join(headroom.headroom_lines(first))
    assert "| io | 2 | 2 | 4 |" in lines and "| **pool** (any draft of any system) | - | 3 | - |" in lines
    assert ("`gated` solves 1 of 4; of the 3 it misses, 1 were lost by picking a failing answer while one of its own "
            "drafts passed, 1 because none of its own drafts passed but another system's did, and 1 had no passing "
            "draft anywhere.") in lines


def test_the_main_system_can_be_any_of_the_genomes_and_must_be_one(tmp_path: Path) -> None:
    client = _client(tmp_path / "answers.sqlite", [])
    io = load_seed("io")
    result = headroom.measure(_task(), client, [io, GATED], main=io, concurrency=2)
    assert result["main"] == {"name": "io", "id": io.id, "solves": 2, "lost_by_picking": 0, "lost_to_others": 1,
                              "never_right": 1}
    with pytest.raises(MasforgeError, match="the main system chain-of-thought is not among the genomes given"):
        headroom.measure(_task(), client, [io], main=load_seed("cot"))


def test_the_script_prints_the_table_and_sends_nothing_once_the_answers_are_cached(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "MASFORGE_LOCAL_API_BASE"}
    env.update(LITELLM_LOCAL_MODEL_COST_MAP="True", MASFORGE_LM_CACHE=str(tmp_path / "answers.sqlite"))
    cmd = [sys.executable, str(BENCH / "headroom.py"), "--lm", "fake", "--task", "humaneval", "--limit", "2",
           "--genomes", "io", "sample_and_test", "--json", str(tmp_path / "h.json")]
    first = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
    assert first.returncode == 0, first.stderr[-3000:]
    assert "Headroom on humaneval (test, 2 problems" in first.stdout and "| sample-and-test |" in first.stdout
    assert "LM calls sent: 0" not in first.stderr
    second = subprocess.run([*cmd, "--cache-only"], env=env, capture_output=True, text=True, timeout=600)
    assert second.returncode == 0, second.stderr[-3000:]
    assert "LM calls sent: 0" in second.stderr and second.stdout == first.stdout
    assert json.loads((tmp_path / "h.json").read_text())["main"]["name"] == "sample-and-test"
