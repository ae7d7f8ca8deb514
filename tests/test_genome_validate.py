"""Malformed genomes: each is rejected with ONE line that names the place of the problem and the fix."""

from __future__ import annotations

import json
import os
import re
import textwrap

import pytest
import yaml

from masforge.errors import GenomeError
from masforge.genome.io import load_genome, parse_genome_text
from masforge.genome.schema import Genome
from masforge.genome.signature import parse_signature
from masforge.genome.validate import problems, validate

# A valid two-agent genome that the cases below break one field at a time.
BASE = {
    "name": "base",
    "agents": [
        {"id": "solver", "module": "chain_of_thought"},
        {"id": "critic", "module": "predict"},
    ],
    "topology": {"edges": ["input -> solver", "solver -> critic", "critic -> output"]},
}


def variant(*, agents=None, edges=None, **top) -> dict:
    data = json.loads(json.dumps(BASE))
    if agents is not None:
        data["agents"] = agents
    if edges is not None:
        data["topology"]["edges"] = edges
    for key, value in top.items():
        if key in ("rounds", "aggregation", "judge", "message_passing"):
            data["topology"][key] = value
        else:
            data[key] = value
    return data


def agent(aid: str, **fields) -> dict:
    return {"id": aid, **fields}


CHAIN = ["input -> a", "a -> b", "b -> output"]

# (case id, genome data, substrings the one-line message must contain: the place first)
CASES = [
    # ---- shapes (pydantic) ----
    ("temperature_not_a_number", variant(agents=[agent("solver", temperature="hot"), agent("critic")]),
     ["agents[0].temperature", "valid number"]),
    ("temperature_too_high", variant(agents=[agent("solver"), agent("critic", temperature=3)]),
     ["agents[1].temperature", "less than or equal to 2"]),
    ("copies_zero", variant(agents=[agent("solver", copies=0), agent("critic")]),
     ["agents[0].copies", "greater than or equal to 1"]),
    ("copies_too_many", variant(agents=[agent("solver", copies=100), agent("critic")]),
     ["agents[0].copies", "less than or equal to 16"]),
    ("max_iters_zero", variant(agents=[agent("solver", max_iters=0), agent("critic")]),
     ["agents[0].max_iters", "greater than or equal to 1"]),
    ("unknown_agent_field", variant(agents=[agent("solver", instruction="typo"), agent("critic")]),
     ["agents[0].instruction", "unknown field"]),
    ("unknown_top_field", variant(topologyy={}), ["topologyy", "unknown field"]),
    ("unknown_topology_field", variant() | {"topology": {"edges": BASE["topology"]["edges"], "round": 2}},
     ["topology.round", "unknown field"]),
    ("unknown_module", variant(agents=[agent("solver", module="tree_of_thoughts"), agent("critic")]),
     ["agents[0].module", "'predict', 'chain_of_thought', 'react', 'program_of_thought', 'refine' or 'execute'"]),
    ("bad_agent_id", variant(agents=[agent("solver"), agent("my critic")]), ["agents[1].id", "should match pattern"]),
    ("missing_agent_id", variant(agents=[agent("solver"), {"role": "critic"}]),
     ["agents[1].id", "required field is missing"]),
    ("bad_lm_alias", variant(agents=[agent("solver", lm="gpt 4"), agent("critic")]), ["agents[0].lm"]),
    ("tools_not_a_list", variant(agents=[agent("solver", tools="calculator"), agent("critic")]),
     ["agents[0].tools", "valid list"]),
    ("rounds_zero", variant(rounds=0), ["topology.rounds", "greater than or equal to 1"]),
    ("unknown_aggregation", variant(aggregation="mean"),
     ["topology.aggregation", "'last', 'majority_vote', 'run_examples' or 'judge'"]),
    ("unknown_message_passing", variant(message_passing="async"), ["topology.message_passing"]),
    ("unknown_kind", variant(kind="graph"), ["kind", "'config', 'code' or 'portfolio'"]),
    ("edge_without_arrow", variant(edges=["input -> solver", "solver critic", "critic -> output"]),
     ["topology.edges", "edge 1 'solver critic' is not an edge", "'a -> b' or [a, b]"]),
    ("edge_two_arrows", variant(edges=["input -> solver -> critic", "critic -> output"]),
     ["topology.edges", "edge 0"]),
    ("edge_three_ends", variant(edges=[["input", "solver", "critic"], "critic -> output"]),
     ["topology.edges", "must join exactly two nodes"]),
    ("bad_input_name", variant(inputs=["the question"]), ["inputs", "'the question' is not a valid field name"]),
    ("duplicate_output_name", variant(outputs=["answer", "answer"]), ["outputs", "must be unique"]),
    ("no_outputs", variant(outputs=[]), ["outputs", "at least 1 item"]),
    ("agents_not_a_list", variant(agents={"solver": {}}), ["agents", "valid list"]),
    ("metadata_not_a_mapping", variant(metadata=["x"]), ["metadata", "valid dictionary"]),
    # ---- agents ----
    ("no_agents", variant(agents=[], edges=[]), ["agents", "a config genome needs at least one agent"]),
    ("unknown_tool", variant(agents=[agent("solver"),
                                     agent("critic", module="react", tools=["calculator", "browser"])]),
     ["agents[1].tools", "unknown tool 'browser'", "known: calculator, python"]),
    ("react_without_tools", variant(agents=[agent("solver", module="react"), agent("critic")]),
     ["agents[0]", "module 'react' needs at least one tool"]),
    ("duplicate_ids", variant(agents=[agent("solver"), agent("solver")]),
     ["agents[1].id", "duplicate agent id 'solver'"]),
    ("reserved_id_output", variant(agents=[agent("output"), agent("critic")]),
     ["agents[0].id", "'output' is reserved"]),
    ("reserved_id_input", variant(agents=[agent("solver"), agent("input")]), ["agents[1].id", "'input' is reserved"]),
    ("code_on_config_genome", variant(code="def forward(inputs):\n    return {}\n"),
     ["code", "only code genomes carry code"]),
    # ---- signatures ----
    ("signature_two_arrows", variant(agents=[agent("solver", signature="question -> plan -> answer"), agent("critic")]),
     ["agents[0].signature", "exactly one '->'"]),
    ("signature_no_arrow", variant(agents=[agent("solver", signature="question, answer"), agent("critic")]),
     ["agents[0].signature", "exactly one '->'"]),
    ("signature_no_outputs", variant(agents=[agent("solver", signature="question ->"), agent("critic")]),
     ["agents[0].signature", "no output fields after '->'"]),
    ("signature_bad_field", variant(agents=[agent("solver", signature="question? -> answer"), agent("critic")]),
     ["agents[0].signature", "'question?' is not a field name"]),
    ("signature_unknown_type", variant(agents=[agent("solver"), agent("critic", signature="messages -> answer: dict")]),
     ["agents[1].signature", "unknown type 'dict'"]),
    ("signature_repeated_field", variant(agents=[agent("solver", signature="question, question -> answer"),
                                                 agent("critic")]),
     ["agents[0].signature", "repeated inputs field"]),
    ("signature_in_and_out", variant(agents=[agent("solver", signature="question -> question"), agent("critic")]),
     ["agents[0].signature", "'question' is both an input and an output"]),
    ("signature_no_inputs", variant(agents=[agent("solver", signature=" -> answer"), agent("critic")]),
     ["agents[0].signature", "agent 'solver' has no input fields"]),
    ("input_field_not_wired", variant(agents=[agent("solver"), agent("critic", signature="question -> answer")]),
     ["agents[1].signature", "input 'question' never reaches agent 'critic'", "add edge 'input -> critic'"]),
    ("unknown_input_field", variant(agents=[agent("solver"), agent("critic", signature="messages, plan -> answer")]),
     ["agents[1].signature", "input 'plan' never reaches agent 'critic'", "available: messages, answer"]),
    ("feeder_lacks_output", variant(agents=[agent("solver"), agent("critic", signature="messages -> feedback")]),
     ["agents[1].signature", "feeds output but does not produce 'answer'"]),
    # ---- topology ----
    ("unknown_agent_in_edge", variant(edges=["input -> solver", "solver -> critc", "critic -> output"]),
     ["topology.edges[1]", "unknown agent 'critc'", "agents: solver, critic"]),
    ("edge_into_input", variant(edges=["input -> solver", "solver -> critic", "critic -> output", "critic -> input"]),
     ["topology.edges[3]", "nothing can flow into 'input'"]),
    ("edge_out_of_output", variant(edges=["input -> solver", "solver -> critic", "critic -> output",
                                          "output -> solver"]),
     ["topology.edges[3]", "nothing flows out of 'output'"]),
    ("input_to_output", variant(edges=["input -> solver", "solver -> critic", "critic -> output", "input -> output"]),
     ["topology.edges[3]", "'input -> output' bypasses every agent"]),
    ("nothing_reaches_output", variant(edges=["input -> solver", "solver -> critic"]),
     ["topology.edges", "nothing reaches 'output'"]),
    ("nothing_reads_input", variant(edges=["solver -> critic", "critic -> output"]),
     ["topology.edges", "nothing reads 'input'"]),
    ("agent_in_no_edge", variant(edges=["input -> solver", "solver -> output"]),
     ["agents[1]", "agent 'critic' is in no edge"]),
    ("agent_unreachable", variant(edges=["input -> solver", "solver -> output", "critic -> solver"]),
     ["agents[1]", "agent 'critic' is unreachable from input"]),
    ("agent_not_reaching_output", variant(edges=["input -> solver", "input -> critic", "critic -> output",
                                                 "solver -> solver"], rounds=2),
     ["agents[0]", "agent 'solver' never reaches output"]),
    ("cycle_without_rounds", variant(edges=["input -> solver", "solver -> critic", "critic -> solver",
                                            "critic -> output"]),
     ["topology.rounds", "cycle solver -> critic -> solver needs rounds >= 2"]),
    ("self_loop_without_rounds", variant(edges=["input -> solver", "solver -> solver", "solver -> critic",
                                                "critic -> output"]),
     ["topology.rounds", "cycle solver -> solver needs rounds >= 2"]),
    # ---- judge ----
    ("judge_missing", variant(aggregation="judge"), ["topology.judge", "aggregation 'judge' needs topology.judge"]),
    ("judge_unknown", variant(aggregation="judge", judge="referee"), ["topology.judge", "unknown agent 'referee'"]),
    ("judge_in_edges", variant(aggregation="judge", judge="critic"),
     ["topology.judge", "judge 'critic' must not appear in edges"]),
    ("judge_without_judge_aggregation", variant(judge="critic"),
     ["topology.judge", "set to 'critic' but aggregation is 'last'"]),
    ("judge_lacks_output", variant(agents=[agent("solver"), agent("critic", signature="question, candidates -> best")],
                                   edges=["input -> solver", "solver -> output"], aggregation="judge", judge="critic"),
     ["agents[1].signature", "agent 'critic' feeds output but does not produce 'answer'"]),
    ("judge_reads_messages", variant(agents=[agent("solver"), agent("critic", signature="messages -> answer")],
                                     edges=["input -> solver", "solver -> output"], aggregation="judge",
                                     judge="critic"),
     ["agents[1].signature", "input 'messages' never reaches agent 'critic'", "available: question, candidates"]),
    # ---- code genomes ----
    ("code_without_forward", {"kind": "code", "code": "def solve(inputs):\n    return {}\n"},
     ["code", "define a top-level function forward(inputs)"]),
    ("code_empty", {"kind": "code", "code": "  \n"}, ["code", "needs Python source defining forward(inputs)"]),
    ("code_missing", {"kind": "code"}, ["code", "needs Python source"]),
    ("code_syntax_error", {"kind": "code", "code": "def forward(inputs):\n    return {'answer': (1 +}\n"},
     ["code:2", "Python syntax error"]),
    ("code_forward_without_args", {"kind": "code", "code": "def forward():\n    return {}\n"},
     ["code", "forward must take one argument"]),
    ("code_with_agents", {"kind": "code", "code": "def forward(inputs):\n    return {}\n", "agents": [{"id": "a"}]},
     ["agents", "a code genome takes no agents"]),
]


def first_problem(data: dict) -> str:
    """The one-line message a user sees for ``data`` (shape errors first, then validation)."""
    with pytest.raises(GenomeError) as info:
        validate(parse_genome_text(json.dumps(data), "genome.json", fmt="json"))
    return str(info.value)


def test_there_are_many_cases():
    assert len(CASES) >= 25
    assert len({c[0] for c in CASES}) == len(CASES)


def test_base_genome_is_valid():
    assert problems(Genome.model_validate(BASE)) == []


@pytest.mark.parametrize(("data", "expected"), [pytest.param(d, e, id=i) for i, d, e in CASES])
def test_malformed_genome_gives_one_located_line(data, expected):
    message = first_problem(data)
    assert "\n" not in message and "\r" not in message, message
    assert len(message) < 400, message
    for part in expected:
        assert part in message, f"{part!r} not in {message!r}"
    place = expected[0]
    assert re.search(rf"(^|: ){re.escape(place)}[:\s]", message), f"place {place!r} not named in {message!r}"


def test_problems_lists_all_and_validate_counts_the_rest():
    data = variant(agents=[agent("solver", tools=["browser"]), agent("critic", module="react"), agent("critic")])
    genome = Genome.model_validate(data)
    found = problems(genome)
    assert len(found) == 3
    assert found[0].startswith("agents[0].tools") and found[1].startswith("agents[1]:")
    assert found[2].startswith("agents[2].id")
    with pytest.raises(GenomeError, match=r"^genome 'base': agents\[0\]\.tools: .* \(and 2 more\)$"):
        validate(genome)


def test_known_tools_can_be_given():
    data = variant(agents=[agent("solver", module="react", tools=["search"]), agent("critic")])
    genome = Genome.model_validate(data)
    assert problems(genome, known_tools=["search"]) == []
    assert "unknown tool 'search'" in problems(genome)[0]


def test_validation_knows_the_builtin_tools_without_the_runtime():
    """The genome names the built-in tools itself (it imports no runtime), and they are the runtime's own."""
    code = ("import sys\n"
            "from masforge.genome import Genome, problems\n"
            "g = Genome.model_validate({'name': 'g', 'agents': [{'id': 'a', 'module': 'react',"
            " 'tools': ['calculator', 'python']}], 'topology': {'edges': ['input -> a', 'a -> output']}})\n"
            "assert problems(g) == [], problems(g)\n"
            "assert 'masforge.sandbox.tools' not in sys.modules\n")
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    from masforge.genome.tools import BUILTIN_TOOLS
    from masforge.sandbox import tools as runtime_tools

    builtins = {n for n, t in runtime_tools._REGISTRY.items() if t.fn.__module__ == runtime_tools.__name__}
    assert builtins == set(BUILTIN_TOOLS)


def test_a_tool_registered_in_the_runtime_is_known_to_validation(monkeypatch: pytest.MonkeyPatch):
    from masforge.genome import tools as genome_tools
    from masforge.sandbox import tools as runtime_tools

    monkeypatch.setattr(runtime_tools, "_REGISTRY", dict(runtime_tools._REGISTRY))
    monkeypatch.setattr(genome_tools, "_NAMES", set(genome_tools._NAMES))
    genome = Genome.model_validate(variant(agents=[agent("solver", module="react", tools=["lookup"]), agent("critic")]))
    assert "unknown tool 'lookup'" in problems(genome)[0]
    runtime_tools.register_tool("lookup", "Looks a word up.")(lambda arg: arg)
    assert problems(genome) == []


def test_more_problems_than_one_are_counted_for_shape_errors():
    with pytest.raises(GenomeError, match=r"\(and 1 more problem\)$"):
        parse_genome_text(json.dumps(variant(agents=[agent("solver", copies=0, temperature=9), agent("critic")])),
                          fmt="json")


@pytest.mark.parametrize(("raw", "reason"), [
    ("a -> b -> c", "exactly one '->'"),
    ("a, b", "exactly one '->'"),
    ("a ->", "no output fields"),
    ("a, -> b", "'' is not a field name"),
    ("a b -> c", "'a b' is not a field name"),
    ("a -> b: tuple", "unknown type 'tuple'"),
    ("a -> b, b", "repeated outputs field"),
    ("a -> a", "both an input and an output"),
])
def test_bad_signatures(raw, reason):
    with pytest.raises(ValueError, match=re.escape(reason)) as info:
        parse_signature(raw)
    assert str(info.value).startswith(f"bad signature '{raw}'")


def test_good_signatures():
    sig = parse_signature(" question,messages ->reasoning_hint ,  score: float, ok: bool, items: list[str]")
    assert sig.input_names == ["question", "messages"]
    assert [(f.name, f.type) for f in sig.outputs] == [("reasoning_hint", "str"), ("score", "float"),
                                                       ("ok", "bool"), ("items", "list[str]")]
    assert str(sig) == "question, messages -> reasoning_hint, score: float, ok: bool, items: list[str]"
    assert parse_signature("-> answer").inputs == ()


def test_valid_special_cases():
    # a judge may be listed anywhere; default signatures adapt to the wiring; a cycle with rounds is fine
    data = variant(agents=[agent("judge"), agent("solver", copies=3), agent("critic")],
                   edges=["input -> solver", "solver -> critic", "critic -> solver", "critic -> output"],
                   rounds=2, aggregation="judge", judge="judge")
    assert problems(Genome.model_validate(data)) == []
    # named fields of predecessors are readable
    data = variant(agents=[agent("solver", signature="question -> plan"),
                           agent("critic", signature="question, plan, messages -> answer")],
                   edges=["input -> solver", "input -> critic", "solver -> critic", "critic -> output"])
    assert problems(Genome.model_validate(data)) == []


# --------------------------------------------------------------------------------------------------
# files


def _write(tmp_path, name: str, text: str):
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return path


FILE_CASES = [
    ("broken.yaml", "name: x\nagents:\n  - id: a\n    role: [unclosed\ntopology: {}\n", [":5: invalid YAML"]),
    ("tabs.yaml", "name: x\nagents:\n\t- id: a\n", [":3: invalid YAML"]),
    ("broken.json", '{\n  "name": "x",\n  "agents": [\n}\n', [":4: invalid JSON"]),
    ("list.json", "[1, 2]", ["a genome must be a mapping of fields, got list"]),
    ("empty.yaml", "", ["the genome is empty"]),
    ("scalar.yml", "just words", ["a genome must be a mapping of fields, got str"]),
    ("shape.yaml", "agents:\n  - id: a\n    copies: 0\n", ["agents[0].copies", "greater than or equal to 1"]),
    ("syntax.py", '"""\nname: s\n"""\n\ndef forward(inputs)\n    return {}\n',
     [":5: Python syntax error in code genome"]),
    ("wrong.txt", "name: x\n", ["unknown genome file type '.txt'", "use .yaml, .yml, .json or .py"]),
    ("noext", "name: x\n", ["unknown genome file type ''"]),
]


@pytest.mark.parametrize(("name", "text", "expected"), FILE_CASES, ids=[c[0] for c in FILE_CASES])
def test_file_errors_name_the_file_and_line(tmp_path, name, text, expected):
    path = _write(tmp_path, name, text)
    with pytest.raises(GenomeError) as info:
        load_genome(path)
    message = str(info.value)
    assert message.startswith(str(path)), message
    assert "\n" not in message
    for part in expected:
        assert part in message, f"{part!r} not in {message!r}"


def test_missing_file(tmp_path):
    with pytest.raises(GenomeError, match="no such genome file") as info:
        load_genome(tmp_path / "nope.yaml")
    assert str(info.value).startswith(str(tmp_path / "nope.yaml"))
    with pytest.raises(GenomeError, match="is a directory, not a file"):
        load_genome(tmp_path)  # a directory is not a genome file


def test_special_files_are_refused_by_name(tmp_path):
    """A FIFO would block the read for good and a device never ends: neither is "no such genome file"."""
    fifo = tmp_path / "system.yaml"
    os.mkfifo(fifo)
    with pytest.raises(GenomeError) as info:
        load_genome(fifo)
    assert str(info.value) == f"{fifo} is a FIFO, not a file: give the path of a .yaml, .json or .py genome file"
    zero = tmp_path / "zero.py"
    zero.symlink_to("/dev/zero")
    with pytest.raises(GenomeError, match=r"zero\.py is a character device, not a file"):
        load_genome(zero)


def test_not_utf8(tmp_path):
    path = tmp_path / "latin.yaml"
    path.write_bytes("name: caf\xe9\n".encode("latin-1"))
    with pytest.raises(GenomeError, match="cannot read genome file"):
        load_genome(path)


def test_code_file_without_forward_fails_validation(tmp_path):
    path = _write(tmp_path, "solve.py", '''\
        """
        name: no-forward
        """

        def solve(inputs):
            return {"answer": "x"}
        ''')
    genome = load_genome(path)
    assert genome.kind == "code" and genome.name == "no-forward"
    with pytest.raises(GenomeError, match=r"genome 'no-forward': code: define a top-level function forward"):
        validate(genome)


def test_code_file_docstring_that_is_not_front_matter_becomes_the_description(tmp_path):
    path = _write(tmp_path, "plain.py", '''\
        """Answers with one call."""

        def forward(inputs):
            return llm(inputs["question"])
        ''')
    genome = validate(load_genome(path))
    assert genome.name == "plain" and genome.description == "Answers with one call."


def test_yaml_and_json_validation_errors_name_the_file(tmp_path):
    data = variant(agents=[agent("solver", temperature="hot"), agent("critic")])
    for name, text in (("g.yaml", yaml.safe_dump(data)), ("g.json", json.dumps(data))):
        path = _write(tmp_path, name, text)
        with pytest.raises(GenomeError, match=r"agents\[0\]\.temperature") as info:
            load_genome(path)
        assert str(info.value).startswith(f"{path}: agents[0].temperature: ")


# --------------------------------------------------------------------------------------------------
# CLI: `masforge genome validate | schema | diff` (one red line, exit code 1, never a traceback)


def _cli():
    from typer.testing import CliRunner

    from masforge.cli import app

    return CliRunner(), app


def _all_output(result) -> str:
    return result.output  # click >= 8.2: stdout and stderr as the terminal shows them


def test_cli_validate_bad_file_prints_one_red_line(tmp_path):
    runner, app = _cli()
    path = _write(tmp_path, "bad.yaml", yaml.safe_dump(variant(edges=["input -> solver", "solver -> critc",
                                                                      "critic -> output"])))
    result = runner.invoke(app, ["genome", "validate", str(path)])
    assert result.exit_code == 1
    text = _all_output(result).strip()
    assert "Traceback" not in text
    assert result.exception is None or isinstance(result.exception, SystemExit)
    lines = [line for line in text.splitlines() if line.strip()]
    assert len(lines) == 1, text
    assert "topology.edges[1]" in lines[0] and "unknown agent 'critc'" in lines[0]
    assert "error" in lines[0].lower()


def test_cli_validate_colours_the_error_red(tmp_path, monkeypatch):
    import io

    from rich.console import Console

    import masforge.cli.console

    runner, app = _cli()
    buffer = io.StringIO()
    monkeypatch.setattr(masforge.cli.console, "err_console", Console(file=buffer, force_terminal=True, width=300))
    path = _write(tmp_path, "bad.yaml", "agents: [{id: a, temperature: hot}]\n")
    result = runner.invoke(app, ["genome", "validate", str(path)])
    assert result.exit_code == 1
    shown = buffer.getvalue()
    assert "\x1b[31m" in shown and "agents[0].temperature" in shown
    assert len(shown.strip().splitlines()) == 1


def test_cli_validate_yaml_syntax_error_and_missing_file(tmp_path):
    runner, app = _cli()
    path = _write(tmp_path, "broken.yaml", "agents:\n  - id: [a\n")
    result = runner.invoke(app, ["genome", "validate", str(path)])
    assert result.exit_code == 1 and "invalid YAML" in _all_output(result) and "Traceback" not in _all_output(result)
    result = runner.invoke(app, ["genome", "validate", str(tmp_path / "missing.yaml")])
    assert result.exit_code == 1 and "no such genome file" in _all_output(result)


def test_cli_validate_good_files(tmp_path):
    from masforge.seeds import seed_paths

    runner, app = _cli()
    result = runner.invoke(app, ["genome", "validate", *[str(p) for p in seed_paths()]])
    assert result.exit_code == 0, _all_output(result)


def test_cli_schema_is_the_genome_json_schema():
    runner, app = _cli()
    result = runner.invoke(app, ["genome", "schema"])
    assert result.exit_code == 0, _all_output(result)
    schema = json.loads(result.output)
    assert {"agents", "topology", "inputs", "outputs", "kind", "code"} <= set(schema["properties"])


def test_cli_diff(tmp_path):
    runner, app = _cli()
    old = variant()
    new = variant(agents=[agent("solver", module="chain_of_thought", temperature=0.2), agent("critic")])
    a = _write(tmp_path, "a.yaml", yaml.safe_dump(old))
    b = _write(tmp_path, "b.json", json.dumps(new))
    result = runner.invoke(app, ["genome", "diff", str(a), str(b)])
    assert result.exit_code == 0, _all_output(result)
    assert "agent solver.temperature" in result.output
    result = runner.invoke(app, ["genome", "diff", str(a), str(a)])
    assert result.exit_code == 0 and "no change" in result.output
    result = runner.invoke(app, ["genome", "diff", str(a), str(tmp_path / "missing.yaml")])
    assert result.exit_code == 1 and "no such genome file" in _all_output(result)
    assert "Traceback" not in _all_output(result)


@pytest.mark.parametrize("name", ["ab\x00cd", "two\nlines", "tab\there", "bell\x07", "del\x7f", "c1\x85"])
def test_a_name_with_a_control_character_is_refused_in_one_line(name: str, tmp_path) -> None:
    from typer.testing import CliRunner

    from masforge.archive.store import Archive
    from masforge.cli import app
    from masforge.errors import ArchiveError
    from masforge.seeds import load_seed

    genome = load_seed("io").model_copy(update={"name": name})
    found = problems(genome)
    assert len(found) == 1 and found[0].startswith("name: holds a control character (U+")
    assert "\n" not in found[0] and "\x00" not in found[0]
    with pytest.raises(GenomeError):
        validate(genome)
    with Archive.open(tmp_path / "archive", create=True) as archive:
        with pytest.raises(ArchiveError, match="control character"):
            archive.add(genome)
    path = tmp_path / "g.json"
    path.write_text(json.dumps({**json.loads(load_seed("io").model_dump_json()), "name": name}))
    res = CliRunner().invoke(app, ["genome", "validate", str(path)])
    assert res.exit_code == 1 and "control character" in res.output and "Traceback" not in res.output
