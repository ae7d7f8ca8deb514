"""Canonical identity (same system, same id; any behavioural change, new id), file round trips and diffs."""

from __future__ import annotations

import copy
import json

import pytest
import yaml

from masforge.genome.diff import Change, diff_genomes, format_diff
from masforge.genome.hashing import canonical_dict, canonical_json, genome_hash
from masforge.genome.io import dump_genome, load_genome, parse_genome_text, save_genome
from masforge.genome.schema import Genome
from masforge.seeds import load_seed, seed_names

BASE_YAML = """
kind: config
name: solve-and-check
description: A solver and a checker.
source: a test
inputs: [question]
outputs: [answer]
agents:
  - id: solver
    role: solver
    instructions: Think step by step, then answer.
    module: chain_of_thought
    temperature: 0.7
    tools: [calculator, python]
  - id: checker
    role: checker
    instructions: Check the answer in messages and correct it if needed.
    module: predict
    signature: question, messages -> answer
topology:
  edges: [input -> solver, input -> checker, solver -> checker, checker -> output]
  rounds: 1
  aggregation: last
"""

# The same system written differently: key order, spacing, edge order and form, duplicate edges,
# surrounding whitespace of texts, tool order, signature spacing, explicit defaults, documentation.
SAME_YAML = """
topology:
  aggregation: last
  edges:
    - [solver, checker]
    - checker->output
    - input -> checker
    - "  input   ->   solver "
    - [input, solver]
  message_passing: sequential
agents:
  - module: chain_of_thought
    temperature: 0.70
    instructions: |
        Think step by step, then answer.
    tools: [python, calculator, calculator]
    id: solver
    role: "  solver "
    lm: worker
    copies: 1
  - id: checker
    signature: "question,messages->answer: str"
    role: checker
    module: predict
    instructions: >
      Check the answer in messages and correct it if needed.
outputs: [answer]
name: a completely different name
description: Different words, same system.
source: elsewhere
metadata: {parent: abc, note: lineage is not identity}
"""


def base() -> Genome:
    return parse_genome_text(BASE_YAML)


def mutated(change) -> Genome:
    data = base().model_dump(mode="json")
    change(data)
    return Genome.model_validate(data)


def test_id_is_a_sha256_of_the_canonical_json():
    g = base()
    assert len(g.id) == 64 and all(c in "0123456789abcdef" for c in g.id)
    assert g.short_id == g.id[:12]
    assert g.id == genome_hash(g)
    canon = canonical_json(g)
    assert json.loads(canon) == canonical_dict(g)
    for doc in ("name", "description", "source", "metadata"):
        assert f'"{doc}"' not in canon


def test_golden_id_guards_the_canonical_form():
    # If this changes, every archived genome changes id: only change it on purpose (and say so).
    assert base().id == GOLDEN_ID


GOLDEN_ID = "f620bbc465700509b77da005a485a97ec8955b24aab49243d26f586065d37b05"


def test_same_system_written_differently_has_the_same_id():
    a, b = base(), parse_genome_text(SAME_YAML)
    assert a.name != b.name and a.description != b.description and b.metadata
    assert a.id == b.id
    assert canonical_json(a) == canonical_json(b)
    assert format_diff(a.model_copy(update={"name": b.name}), b) == "no change"


@pytest.mark.parametrize("change", [
    pytest.param(lambda d: d.update(name="renamed"), id="name"),
    pytest.param(lambda d: d.update(description="new words"), id="description"),
    pytest.param(lambda d: d.update(source="another paper"), id="source"),
    pytest.param(lambda d: d.update(metadata={"parents": ["x"], "score": 0.5}), id="metadata"),
    pytest.param(lambda d: d["topology"]["edges"].reverse(), id="edge-order"),
    pytest.param(lambda d: d["topology"]["edges"].append(["input", "solver"]), id="duplicate-edge"),
    pytest.param(lambda d: d["agents"][0]["tools"].reverse(), id="tool-order"),
    pytest.param(lambda d: d["agents"][0].update(instructions="  Think step by step, then answer.\n"),
                 id="surrounding-whitespace"),
    pytest.param(lambda d: d["agents"][1].update(signature="question ,messages->  answer"), id="signature-spacing"),
    pytest.param(lambda d: d["topology"].update(judge="checker"), id="judge-without-judge-aggregation"),
])
def test_documentation_and_notation_do_not_change_the_id(change):
    assert mutated(change).id == base().id


def test_components_order_and_duplicates_do_not_change_the_id():
    one = mutated(lambda d: d.update(components=["critic", "python"]))
    two = mutated(lambda d: d.update(components=["python", "critic", "critic"]))
    assert one.id == two.id != base().id


def _set_agent(i, **fields):
    return lambda d: d["agents"][i].update(fields)


def _set_topo(**fields):
    return lambda d: d["topology"].update(fields)


BEHAVIOURAL = [
    ("instructions", _set_agent(0, instructions="Answer immediately.")),
    ("instructions-inner-word", _set_agent(0, instructions="Think step by step, then reply.")),
    ("role", _set_agent(1, role="referee")),
    ("temperature", _set_agent(0, temperature=0.2)),
    ("temperature-unset", _set_agent(0, temperature=None)),
    ("module", _set_agent(0, module="predict")),
    ("copies", _set_agent(0, copies=3)),
    ("max_iters", _set_agent(0, max_iters=5)),
    ("lm", _set_agent(0, lm="strong")),
    ("tools-removed", _set_agent(0, tools=["calculator"])),
    ("signature", _set_agent(1, signature="question, messages -> answer: int")),
    ("signature-unset", _set_agent(1, signature=None)),
    ("agent-id", lambda d: (d["agents"][1].update(id="verifier"),
                            d["topology"].update(edges=[["input", "solver"], ["input", "verifier"],
                                                        ["solver", "verifier"], ["verifier", "output"]]))),
    ("agent-order", lambda d: d["agents"].reverse()),
    ("agent-added", lambda d: d["agents"].append({"id": "extra"})),
    ("edge-added", lambda d: d["topology"]["edges"].append(["checker", "solver"])),
    ("edge-removed", lambda d: d["topology"]["edges"].remove(["input", "checker"])),
    ("edge-reversed", lambda d: d["topology"].update(edges=[["input", "solver"], ["input", "checker"],
                                                           ["checker", "solver"], ["checker", "output"]])),
    ("rounds", lambda d: (d["topology"].update(rounds=2), d["topology"]["edges"].append(["checker", "solver"]))),
    ("message_passing", lambda d: (d["topology"].update(rounds=2, message_passing="synchronous"),
                                   d["topology"]["edges"].append(["checker", "solver"]))),
    ("aggregation", lambda d: (d["topology"].update(aggregation="majority_vote"),
                               d["agents"][1].update(copies=2))),
    ("judge", lambda d: d["topology"].update(aggregation="judge", judge="solver")),
    ("inputs", lambda d: d.update(inputs=["question", "context"])),
    ("outputs", lambda d: d.update(outputs=["answer", "confidence"])),
    ("components", lambda d: d.update(components=["critic"])),
]


@pytest.mark.parametrize("change", [c for _, c in BEHAVIOURAL], ids=[n for n, _ in BEHAVIOURAL])
def test_behavioural_changes_change_the_id(change):
    assert mutated(change).id != base().id


def test_all_behavioural_variants_are_distinct():
    ids = {mutated(c).id for _, c in BEHAVIOURAL}
    assert len(ids) == len(BEHAVIOURAL)


def test_a_vote_over_one_answer_is_the_system_without_the_vote():
    one_voter = mutated(_set_topo(aggregation="majority_vote"))  # checker, one copy, is the only voter
    assert one_voter.id == base().id
    two_voters = mutated(lambda d: d["topology"].update(
        aggregation="majority_vote", edges=[*d["topology"]["edges"], ["solver", "output"]]))
    assert two_voters.id != mutated(lambda d: d["topology"]["edges"].append(["solver", "output"])).id


def test_rounds_without_a_cycle_are_the_system_without_them():
    assert mutated(_set_topo(rounds=3, message_passing="synchronous")).id == base().id  # no cycle to repeat
    looped = mutated(lambda d: d["topology"]["edges"].append(["checker", "solver"]))
    assert mutated(lambda d: (d["topology"]["edges"].append(["checker", "solver"]),
                              d["topology"].update(rounds=3))).id != looped.id


def test_judge_choice_matters_under_judge_aggregation():
    a = mutated(lambda d: d["topology"].update(aggregation="judge", judge="solver"))
    b = mutated(lambda d: d["topology"].update(aggregation="judge", judge="checker"))
    assert a.id != b.id


# --------------------------------------------------------------------------------------------------
# code genomes

CODE_PY = '''"""
name: one-call
description: Asks once.
inputs: [question]
outputs: [answer]
"""


def forward(inputs):
    return {"answer": llm(inputs["question"])}
'''


def test_code_genome_identity_is_its_source_and_fields():
    g = parse_genome_text(CODE_PY, "one.py", fmt="py")
    assert g.kind == "code" and g.name == "one-call"
    renamed = parse_genome_text(CODE_PY.replace("name: one-call", "name: other").replace("Asks once.", "Hi."),
                                "x.py", fmt="py")
    spaced = parse_genome_text(CODE_PY.replace('llm(inputs["question"])}', 'llm(inputs["question"])}   ') + "\n\n",
                               "one.py", fmt="py")
    assert renamed.id == spaced.id == g.id
    changed = parse_genome_text(CODE_PY.replace('llm(inputs["question"])', 'llm("Q: " + inputs["question"])'),
                                "one.py", fmt="py")
    assert changed.id != g.id
    more_outputs = parse_genome_text(CODE_PY.replace("outputs: [answer]", "outputs: [answer, why]"), "one.py",
                                     fmt="py")
    assert more_outputs.id != g.id
    assert set(canonical_dict(g)) == {"kind", "inputs", "outputs", "code"}


def test_code_and_config_genomes_never_share_an_id():
    assert len({load_seed(n).id for n in seed_names()}) == len(seed_names())


# --------------------------------------------------------------------------------------------------
# round trips


@pytest.mark.parametrize("name", seed_names())
def test_seed_round_trips_preserve_the_id(tmp_path, name):
    g = load_seed(name)
    formats = ["py"] if g.kind == "code" else ["yaml", "json"]
    for fmt in formats:
        text = dump_genome(g, fmt)
        again = parse_genome_text(text, f"x.{fmt}", fmt=fmt)
        assert again.id == g.id, fmt
        assert (again.name, again.description, again.source) == (g.name, g.description, g.source)
        path = save_genome(g, tmp_path / f"{name}.{fmt}")
        loaded = load_genome(path)
        assert loaded.id == g.id and loaded == again
        assert format_diff(g, loaded) == "no change"
    # a config genome also goes through JSON-as-YAML and a YAML that a person reformatted
    if g.kind == "config":
        assert parse_genome_text(dump_genome(g, "json")).id == g.id
        data = yaml.safe_load(dump_genome(g, "yaml"))
        shuffled = dict(reversed(list(data.items())))
        assert parse_genome_text(yaml.safe_dump(shuffled, sort_keys=True)).id == g.id


def test_yaml_dump_is_readable():
    text = dump_genome(parse_genome_text(SAME_YAML))
    data = yaml.safe_load(text)
    assert list(data)[:2] == ["kind", "name"]
    assert "input -> solver" in data["topology"]["edges"]
    assert "copies" not in text and "lm:" not in text  # defaults are left out
    assert text.count("[input, solver]") == 0


def test_save_genome_with_py_suffix_needs_a_code_genome(tmp_path):
    from masforge.errors import GenomeError

    with pytest.raises(GenomeError, match="only code genomes can be written as .py"):
        save_genome(base(), tmp_path / "x.py")
    assert not list(tmp_path.iterdir())


# --------------------------------------------------------------------------------------------------
# diffs


def test_no_change_for_the_same_system():
    assert diff_genomes(base(), base()) == []
    assert format_diff(base(), base()) == "no change"
    doc_only = mutated(lambda d: d.update(description="x", source="y", metadata={"a": 1}))
    assert format_diff(base(), doc_only) == "no change"


def test_rename_is_reported_but_is_not_a_new_system():
    renamed = mutated(lambda d: d.update(name="other"))
    assert renamed.id == base().id
    assert format_diff(base(), renamed) == "~ name: solve-and-check -> other"


def test_diff_added_and_removed_agents_and_edges():
    def change(d):
        d["agents"].append({"id": "critic", "role": "critic", "module": "predict"})
        d["topology"]["edges"] = [["input", "solver"], ["solver", "critic"], ["critic", "checker"],
                                  ["input", "checker"], ["checker", "output"]]

    new = mutated(change)
    lines = format_diff(base(), new).splitlines()
    assert "+ agent critic: predict 'critic'" in lines
    assert "- edge: solver -> checker" in lines
    assert "+ edge: solver -> critic" in lines and "+ edge: critic -> checker" in lines
    back = format_diff(new, base()).splitlines()
    assert "- agent critic: predict 'critic'" in back and "+ edge: solver -> checker" in back
    ops = {(c.op, c.path) for c in diff_genomes(base(), new)}
    assert ("+", "agent critic") in ops and ("-", "edge") in ops and ("+", "edge") in ops


def test_diff_changed_fields():
    def change(d):
        d["agents"][0].update(temperature=0.2, module="refine", copies=3, tools=["python"])
        d["agents"][1].update(copies=3)  # a vote needs more than one answer to be a change
        d["topology"].update(rounds=2, aggregation="majority_vote")  # and rounds need a cycle
        d["topology"]["edges"].append(["checker", "solver"])
        d["outputs"] = ["answer", "confidence"]

    changes = {c.path: c for c in diff_genomes(base(), mutated(change))}
    assert (changes["agent solver.temperature"].old, changes["agent solver.temperature"].new) == (0.7, 0.2)
    assert str(changes["agent solver.temperature"]) == "~ agent solver.temperature: 0.7 -> 0.2"
    assert str(changes["agent solver.module"]) == "~ agent solver.module: chain_of_thought -> refine"
    assert str(changes["agent solver.copies"]) == "~ agent solver.copies: 1 -> 3"
    assert str(changes["agent solver.tools"]) == "~ agent solver.tools: ['calculator', 'python'] -> ['python']"
    assert str(changes["topology.rounds"]) == "~ topology.rounds: 1 -> 2"
    assert str(changes["topology.aggregation"]) == "~ topology.aggregation: last -> majority_vote"
    assert changes["outputs"].new == ["answer", "confidence"]
    assert {p for p, c in changes.items() if c.op != "~"} == {"edge"}  # the loop rounds need


def test_diff_judge_and_agent_order():
    new = mutated(lambda d: (d["agents"].reverse(), d["topology"].update(aggregation="judge", judge="solver")))
    text = format_diff(base(), new)
    assert "~ agent order: ['solver', 'checker'] -> ['checker', 'solver']" in text
    assert "~ topology.judge: None -> solver" in text


def test_diff_short_instruction_change_shows_old_and_new():
    new = mutated(_set_agent(1, instructions="Check it."))
    assert format_diff(base(), new) == ("~ agent checker.instructions: Check the answer in messages and correct it "
                                        "if needed. -> Check it.")


def test_diff_long_instruction_change_shows_a_word_diff():
    long_old = "Solve the problem step by step. " * 4 + "Give the final answer as a number."
    long_new = "Solve the problem step by step. " * 4 + "Give the final answer as a fraction in lowest terms."
    old = mutated(_set_agent(0, instructions=long_old))
    new = mutated(_set_agent(0, instructions=long_new))
    (change,) = diff_genomes(old, new)
    assert change.old == long_old.strip() and change.new == long_new.strip()
    assert str(change) == "~ agent solver.instructions: edit [-number.-] {+fraction in lowest terms.+}"
    assert "\n" not in str(change)


def test_diff_code_genomes_shows_changed_lines():
    old = parse_genome_text(CODE_PY, "one.py", fmt="py")
    new = parse_genome_text(CODE_PY.replace('llm(inputs["question"])', 'llm("Q: " + inputs["question"])'),
                            "one.py", fmt="py")
    (change,) = diff_genomes(old, new)
    assert change.path == "code"
    text = str(change)
    assert text.startswith("~ code: 2 -> 2 lines\n")
    assert '    -    return {"answer": llm(inputs["question"])}' in text.splitlines()
    assert '    +    return {"answer": llm("Q: " + inputs["question"])}' in text.splitlines()
    assert format_diff(old, old) == "no change"


def test_diff_between_kinds_and_io_fields():
    code = parse_genome_text(CODE_PY, "one.py", fmt="py")
    text = format_diff(base(), code)
    assert "~ kind: config -> code" in text
    assert "~ name: solve-and-check -> one-call" in text
    wider = mutated(lambda d: d.update(inputs=["question", "context"]))
    assert format_diff(base(), wider) == "~ inputs: ['question'] -> ['question', 'context']"


def test_diff_of_seeds_and_a_realistic_mutation():
    old = load_seed("debate")
    data = copy.deepcopy(old.model_dump(mode="json"))
    data["agents"][2]["instructions"] = "Solve the problem with the simplest correct method."
    data["topology"]["rounds"] = 3
    new = Genome.model_validate(data)
    lines = format_diff(old, new).splitlines()
    assert lines[0].startswith("~ agent debater_c.instructions: edit ")
    assert lines[1] == "~ topology.rounds: 2 -> 3"
    assert isinstance(diff_genomes(old, new)[0], Change)
    assert format_diff(load_seed("cot"), load_seed("take_a_deep_breath")).startswith("~ name: ")
