"""Bad input gets one line: the hostile files of issue 11 (20k nested brackets, a YAML billion-laughs bomb, a
recursive anchor, duplicate keys, 100k agents) and their run-config, task-file and meta-reply cousins are each
refused with one line that names the limit and how to raise it."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

from masforge.cli import app
from masforge.errors import ConfigError, DataError, GenomeError
from masforge.evaluators.tasks import Task
from masforge.genome.io import dump_genome, genome_from_data, load_genome, parse_genome_text
from masforge.genome.schema import Agent, Genome, Topology
from masforge.genome.validate import problems
from masforge.input_limits import current_limits
from masforge.search.config import RunConfig
from masforge.search.operators.proposal import ProposalParseError, extract_json, parse_proposal

BASE = "name: x\nagents: [{id: s}]\ntopology: {edges: ['input -> s', 's -> output']}\n"


def _laughs(levels: int = 9) -> str:
    text = BASE + "metadata:\n  a: &a ['lol', 'lol', 'lol', 'lol', 'lol', 'lol', 'lol', 'lol', 'lol']\n"
    prev = "a"
    for i in range(levels):
        name = f"l{i}"
        text += f"  {name}: &{name} [{', '.join(['*' + prev] * 9)}]\n"
        prev = name
    return text


def _one_line(exc: BaseException) -> str:
    text = str(exc)
    assert "\n" not in text and text.strip()
    return text


@pytest.mark.parametrize("name, text, expected", [
    ("deep.json", '{"name": "x", "metadata": {"a": ' + "[" * 20000 + "]" * 20000 + "}}",
     ": nested deeper than 64 levels; flatten it"),
    ("deep.yaml", "name: x\nmetadata:\n  a: " + "[" * 20000 + "]" * 20000 + "\n",
     ":3: nested deeper than 64 levels; flatten it"),
    ("bomb.yaml", _laughs(), ":5: YAML anchors (&a) are not allowed in genome files; write the value out in full"),
    ("recursive.yaml", BASE + "metadata: &m\n  self: *m\n", ":4: YAML anchors (&m) are not allowed in genome files"),
    ("dup.yaml", "name: a\nname: b\n" + BASE.split("\n", 1)[1], ":2: duplicate key 'name' (each key may appear once"),
    ("dup.json", '{"name": "a", "agents": [{"id": "s", "id": "t"}]}', ": duplicate key 'id' in a JSON object"),
    ("nested_dup.yaml", BASE + "metadata:\n  k: 1\n  k: 2\n", ":6: duplicate key 'k'"),
    ("two_docs.yaml", BASE + "---\nname: y\n", ":4: invalid YAML (more than one document"),
])
def test_hostile_genome_files_get_one_line(tmp_path: Path, name: str, text: str, expected: str) -> None:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    with pytest.raises(GenomeError) as err:
        load_genome(path)
    assert _one_line(err.value).startswith(f"{path}{expected}"), str(err.value)
    # The CLI says the same in one red line, exit code 1, no traceback.
    res = CliRunner().invoke(app, ["genome", "validate", str(path)])
    assert res.exit_code == 1 and "Traceback" not in res.output
    assert [line for line in res.output.splitlines() if line.startswith("error:")]


def test_size_limits_name_the_variable_that_raises_them(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    agents = [{"id": f"a{i}"} for i in range(100_000)]
    edges = ["input -> a0", *(f"a{i} -> a{i + 1}" for i in range(99_999)), "a99999 -> output"]
    path = tmp_path / "big.json"
    path.write_text(json.dumps({"name": "big", "agents": agents, "topology": {"edges": edges}}), encoding="utf-8")
    with pytest.raises(GenomeError, match=r"bytes is over the 1,048,576-byte limit .*\$MASFORGE_MAX_FILE_BYTES"):
        load_genome(path)
    monkeypatch.setenv("MASFORGE_MAX_FILE_BYTES", "100000000")
    with pytest.raises(GenomeError, match=r"agents: 100,000 agents is over the limit of 1,000 .*\$MASFORGE_MAX_AGENTS"):
        load_genome(path)
    # The same genome built in code gets the same answer (no 100k Agent objects are built first).
    with pytest.raises(GenomeError, match="100,000 agents is over the limit"):
        genome_from_data({"name": "big", "agents": agents, "topology": {"edges": edges}})
    monkeypatch.setenv("MASFORGE_MAX_STRING_CHARS", "50")
    with pytest.raises(GenomeError, match=r"agents\[0\]\.instructions: text of 60 characters is over the 50"):
        genome_from_data({"agents": [{"id": "s", "instructions": "x" * 60}]})
    monkeypatch.setenv("MASFORGE_MAX_AGENTS", "lots")
    with pytest.raises(ConfigError, match=r"\$MASFORGE_MAX_AGENTS='lots' is not a whole number"):
        current_limits()


def test_self_referencing_metadata_built_in_code_is_refused() -> None:
    meta: dict[str, object] = {}
    meta["self"] = meta
    with pytest.raises(GenomeError, match="nested deeper than 64 levels at metadata.self.self"):
        genome_from_data({"name": "loop", "metadata": meta})
    with pytest.raises(ValueError, match="or a value that contains itself"):
        Genome(name="loop", metadata=meta)


def test_validation_is_linear_and_still_exact_on_a_large_genome(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MASFORGE_MAX_AGENTS", "100000")
    monkeypatch.setenv("MASFORGE_MAX_EDGES", "100000")
    monkeypatch.setenv("MASFORGE_MAX_VALUES", "1000000")
    n = 20_000
    agents = [Agent(id=f"a{i}") for i in range(n)]
    edges = [("input", "a0"), *((f"a{i}", f"a{i + 1}") for i in range(n - 2)), (f"a{n - 2}", "output")]
    genome = Genome(name="chain", agents=agents, topology=Topology(edges=[*edges, (f"a{n - 1}", "a0")]))
    # The last agent feeds the chain but nothing leads to it: found, named, in one pass.
    assert problems(genome) == [f"agents[{n - 1}]: agent 'a{n - 1}' is unreachable from input; add an edge into it"]


def test_inputs_equal_to_outputs_is_a_problem_not_a_crash() -> None:
    genome = genome_from_data({"inputs": ["answer"], "outputs": ["answer"], "agents": [{"id": "s"}],
                               "topology": {"edges": ["input -> s", "s -> output"]}})
    assert problems(genome) == ["outputs: 'answer' is also an input; give the outputs names of their own"]


def test_shared_values_are_written_without_anchors() -> None:
    shared = ["x", "y"]
    genome = genome_from_data({**json.loads(json.dumps({"name": "g", "agents": [{"id": "s"}],
                                                         "topology": {"edges": ["input -> s", "s -> output"]}})),
                               "metadata": {"a": shared, "b": shared}})
    text = dump_genome(genome)
    assert "&" not in text and "*" not in text
    assert parse_genome_text(text).id == genome.id


@pytest.mark.parametrize("text", ["next\x85line", "\\N{BULLET} and \\x41", "a\r\nb\u2028c", "tab\there\n  indented"])
def test_stored_text_comes_back_exactly(text: str) -> None:
    """A meta-agent's role with a NEL (U+0085) came back changed, so the archive refused to store it."""
    config = genome_from_data({"name": text, "description": text, "metadata": {"k": text},
                               "agents": [{"id": "s", "role": text, "instructions": text}],
                               "topology": {"edges": ["input -> s", "s -> output"]}})
    code = genome_from_data({"kind": "code", "name": text, "description": text, "metadata": {"k": text},
                             "code": "def forward(inputs):\n    return {'answer': 'x'}\n"})
    for genome, fmt in ((config, "yaml"), (config, "json"), (code, "py")):
        again = parse_genome_text(dump_genome(genome, fmt), "round-trip", fmt)
        assert again.id == genome.id
        assert (again.name, again.description, again.metadata) == (text, text, {"k": text})
        assert [a.role for a in again.agents] == [a.role for a in genome.agents]


# ----------------------------------------------------------------------------------------- run configurations


def test_run_config_limits(tmp_path: Path) -> None:
    good = tmp_path / "good.yaml"
    good.write_text("task: gsm8k\nbudget: &b {max_candidates: 3}\nstrategy_options:\n  evolve: {}\n", "utf-8")
    assert RunConfig.load(good).budget.max_candidates == 3  # an ordinary anchor is fine in a run config
    cases = {
        "dup.yaml": ("task: a\ntask: b\n", "dup.yaml:2: duplicate key 'task'"),
        "rec.yaml": ("task: a\ntask_options: &o\n  again: *o\n", "rec.yaml:3: YAML alias *o refers to a value that"),
        "bomb.yaml": ("task: a\ntask_options:\n" + _laughs(7).split("metadata:\n", 1)[1],
                      "more than 200,000 values (or aliases that expand to that many)"),
        "deep.yaml": ("task: a\ntask_options: {k: " + "[" * 5000 + "]" * 5000 + "}\n", "nested deeper than 64"),
        "list.yaml": ("- task\n", "a run configuration must be a mapping"),
    }
    for name, (text, expected) in cases.items():
        path = tmp_path / name
        path.write_text(text, encoding="utf-8")
        with pytest.raises(ConfigError) as err:
            RunConfig.load(path)
        assert expected in _one_line(err.value), (name, str(err.value))


# ----------------------------------------------------------------------------------------- task files


def test_task_file_limits(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "t.jsonl"
    ok = json.dumps({"question": "1+1", "answer": "2"})
    cases = [
        ('{"question": "a", "question": "b", "answer": 1}', "t.jsonl:2: duplicate key 'question'"),
        ('{"question": ' + "[" * 20000 + "]" * 20000 + ', "answer": 1}', "t.jsonl:2: nested deeper than 64 levels"),
        ('{"question": "\\ud800", "answer": 1}', "t.jsonl:2: question: text is not valid Unicode"),
        ('{"question": "x" "answer": 1}', "t.jsonl:2: invalid JSON (Expecting ',' delimiter at column 18)"),
    ]
    for line, expected in cases:
        path.write_text(f"{ok}\n{line}\n{ok}\n", encoding="utf-8")
        with pytest.raises(DataError) as err:
            Task.from_jsonl(path)
        assert expected in _one_line(err.value), str(err.value)
    monkeypatch.setenv("MASFORGE_MAX_LINE_BYTES", "100")
    path.write_text(f"{ok}\n" + json.dumps({"question": "x" * 200, "answer": 1}) + "\n", encoding="utf-8")
    with pytest.raises(DataError, match=r"t.jsonl:2: .* bytes is over the 100-byte limit for one line .*"
                                        r"MASFORGE_MAX_LINE_BYTES"):
        Task.from_jsonl(path)


def test_special_files_are_refused_by_name(tmp_path: Path) -> None:
    """A task or data file that is a FIFO (a read waits for good) or a link to a device (a read never ends) is named
    for what it is, not "missing"."""
    from masforge.evaluators.datasets import locate

    task = tmp_path / "task.jsonl"
    task.symlink_to("/dev/zero")
    with pytest.raises(DataError) as err:
        Task.from_jsonl(task)
    assert str(err.value) == f"{task} is a character device, not a data file: give the path of a JSON Lines file"
    (tmp_path / "gsm8k").mkdir()
    fifo = tmp_path / "gsm8k" / "test.jsonl"
    os.mkfifo(fifo)
    with pytest.raises(DataError) as err:
        locate("gsm8k", ["gsm8k/test.jsonl"], tmp_path)
    assert str(err.value) == f"{fifo} is a FIFO, not a data file: put the file itself there"


# ----------------------------------------------------------------------------------------- meta-agent replies


def test_meta_agent_replies_are_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ProposalParseError, match="over the 100,000-character limit for a proposal"):
        extract_json("{" + " " * 200_000 + "}")
    with pytest.raises(ProposalParseError, match="nested"):
        extract_json('{"agents": ' + "[" * 40_000 + "]" * 40_000 + "}")
    bomb = _laughs(9).replace("name: x", "agents: [{id: s}]\nname: x", 1)
    with pytest.raises(ProposalParseError):
        extract_json(bomb)  # YAML fallback: no anchors, so the bomb is not expanded
    design = '{"agents": [{"id": "s"}], "edges": ["input -> s", "s -> output"]}'
    genome, _ = parse_proposal("<think>" * 10_000 + "</think>" + design, "config")  # many tags: still linear
    assert [a.id for a in genome.agents] == ["s"]
    with pytest.raises(ProposalParseError, match="the reply is empty"):
        parse_proposal("<think>" * 10_000 + design, "config")  # an unclosed block runs to the end
    reply = json.dumps({"rationale": "r", "name": "n", "agents": [{"id": "s", "instructions": "go"}],
                        "edges": ["input -> s", "s -> output"], "topology": {}})
    assert parse_proposal(reply, "config")[0].agents[0].instructions == "go"  # an empty topology is no crash
