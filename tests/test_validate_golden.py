"""Validation finds the same problems in the same order: several hundred malformed genomes, made by seeded random
edits of three small genomes, get the problem lists recorded in ``tests/fixtures/validate/problems.json`` (made by
the checks before they were split into named stages, issue 25). After an intended change of a check, rewrite the
fixture with ``MASFORGE_UPDATE_GOLDEN=1 pytest tests/test_validate_golden.py`` and review its diff.
"""

from __future__ import annotations

import copy
import hashlib
import json
import os
import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from masforge.genome.schema import Genome
from masforge.genome.validate import problems

GOLDEN = Path(__file__).resolve().parent / "fixtures" / "validate" / "problems.json"
UPDATE = os.environ.get("MASFORGE_UPDATE_GOLDEN") == "1"
TOOLS = ["calculator", "python"]  # fixed, so a tool registered later changes no message

BASES = [yaml.safe_load(text) for text in (
    """
    name: gate
    inputs: [question]
    outputs: [answer]
    agents:
      - {id: coder, role: coder, instructions: Write the code.}
      - {id: tester, role: tester, signature: "question -> tests"}
      - {id: exec, module: execute}
      - {id: fixer, role: fixer, instructions: Fix it.}
    topology:
      edges: [input -> coder, input -> tester, coder -> exec, tester -> exec, exec -> fixer, exec -> output,
              fixer -> output]
      conditions: {exec -> fixer: fail, exec -> output: pass}
    """,
    """
    name: debate
    agents:
      - {id: a, role: first, module: chain_of_thought}
      - {id: b, role: second, module: chain_of_thought}
      - {id: judge, role: judge}
    topology: {edges: [input -> a, input -> b, a -> b, b -> a, a -> output, b -> output], rounds: 2,
               aggregation: judge, judge: judge}
    """,
    """
    name: tools
    agents:
      - {id: solver, role: solver, module: react, tools: [calculator]}
      - {id: checker, role: checker, copies: 3}
    topology: {edges: [input -> solver, solver -> checker, checker -> output], aggregation: majority_vote}
    """)]
NAMES = ["input", "output", "a", "b", "judge", "exec", "coder", "ghost", "x y"]


def _ids(d: dict[str, Any]) -> list[str]:
    return [a["id"] for a in d.get("agents") or []]


EDITS: list[Callable[[dict[str, Any], random.Random], None]] = [
    lambda d, r: r.choice(d["agents"]).update(id=r.choice(NAMES + _ids(d))),
    lambda d, r: d["agents"].append(copy.deepcopy(r.choice(d["agents"]))),
    lambda d, r: d["topology"]["edges"].pop(r.randrange(len(d["topology"]["edges"]))),
    lambda d, r: d["topology"]["edges"].append(f"{r.choice(NAMES + _ids(d))} -> {r.choice(NAMES + _ids(d))}"),
    lambda d, r: r.choice(d["agents"]).update(module=r.choice(["execute", "react", "predict"])),
    lambda d, r: r.choice(d["agents"]).update(tools=r.choice([["calculator"], ["nope"], ["python", "x"]])),
    lambda d, r: d["topology"].update(aggregation=r.choice(["judge", "majority_vote", "last", "run_examples"])),
    lambda d, r: d["topology"].update(judge=r.choice([*NAMES, *_ids(d), None])),
    lambda d, r: d["topology"].setdefault("conditions", {}).update(
        {r.choice([*d["topology"]["edges"], "a -> b"]): r.choice(["pass", "fail"])}),
    lambda d, r: d["topology"].update(rounds=r.choice([1, 2])),
    lambda d, r: d.update(outputs=r.choice([["answer", "verdict"], ["question"], ["report"], ["answer"]])),
    lambda d, r: r.choice(d["agents"]).update(signature=r.choice(
        ["question -> answer", "foo -> bar", "messages -> answer", "-> x", "question, candidates -> answer",
         "question -> tests", "bad sig"])),
    lambda d, r: d.update(agents=[]),
    lambda d, r: d.update(code="def forward(x): return x"),
    lambda d, r: d.update(name="bad\x00name"),
    lambda d, r: d.update(kind="code", code=r.choice(["", "def f(: pass", "x = 1", "def forward(): pass"])),
    lambda d, r: r.choice(d["agents"]).update(r.choice([{"module": "execute", "copies": 3}, {"temperature": 0.5},
                                                        {"module": "execute", "lm": "meta"}])),
    lambda d, r: d["topology"]["edges"].append("input -> output"),
    lambda d, r: d["agents"].pop(r.randrange(len(d["agents"]))),
    lambda d, r: d["agents"].append({"id": "lonely", "role": "lonely"}),
    lambda d, r: d.update(inputs=["answer"]),
    lambda d, r: d["topology"].update(edges=[e for e in d["topology"]["edges"] if not e.endswith("-> output")]),
    lambda d, r: d["topology"].update(edges=[e for e in d["topology"]["edges"] if not e.startswith("input ->")]),
]


def _cases() -> list[tuple[str, list[str]]]:
    """(the genome as JSON, its problems) for every edited genome that parses."""
    rng = random.Random(25)
    cases = []
    for _ in range(600):
        data = copy.deepcopy(rng.choice(BASES))
        for _ in range(rng.choice([1, 1, 2, 3])):
            try:
                rng.choice(EDITS)(data, rng)
            except (IndexError, KeyError, ValueError):
                continue  # an edit that does not apply to what earlier edits left
        try:
            genome = Genome.model_validate(data)
        except (ValidationError, ValueError):
            continue
        cases.append((genome.model_dump_json(exclude_defaults=True), problems(genome, TOOLS)))
    return cases


def test_every_malformed_genome_gets_the_recorded_problems() -> None:
    # each genome is recorded by a digest of its JSON (the fixture stays small); its problems in full
    found = [{"genome": hashlib.sha256(g.encode()).hexdigest()[:16], "problems": p} for g, p in _cases()]
    if UPDATE:
        GOLDEN.parent.mkdir(parents=True, exist_ok=True)
        GOLDEN.write_text(json.dumps(found, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    assert GOLDEN.is_file(), f"{GOLDEN.name}: no recorded problems; write them with MASFORGE_UPDATE_GOLDEN=1"
    recorded = json.loads(GOLDEN.read_text(encoding="utf-8"))
    assert [r["genome"] for r in recorded] == [f["genome"] for f in found]  # the same genomes were made
    for (genome, _), mine, theirs in zip(_cases(), found, recorded, strict=True):
        assert mine["problems"] == theirs["problems"], genome


def test_the_recorded_genomes_reach_every_stage_of_the_checks() -> None:
    recorded = json.loads(GOLDEN.read_text(encoding="utf-8"))
    firsts = {r["problems"][0].split(":")[0].split("[")[0] for r in recorded if r["problems"]}
    assert firsts >= {"agents", "topology.edges", "topology.judge", "topology.conditions", "topology.rounds",
                      "outputs", "code", "name"}
    assert sum(not r["problems"] for r in recorded) > 20  # valid ones too
    assert len(recorded) > 400
