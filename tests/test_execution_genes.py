"""Execution and control genes at run time: execute nodes (checks, pick, verdict, report, run in the sandbox),
conditional edges (routing, skipping, the early end of a repair loop), validation, hashing, the seeds that use
them and their export; all on scripted fake LMs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from masforge.errors import GenomeError
from masforge.execution.compile import compile_genome, system_spec
from masforge.export.writer import export_genome
from masforge.genome.diff import format_diff
from masforge.genome.io import parse_genome_text
from masforge.genome.outline import outline
from masforge.genome.schema import Genome
from masforge.genome.validate import problems, validate
from masforge.lm.client import LMClient
from masforge.lm.dspy_lm import MasforgeLM
from masforge.sandbox.tools import run_python_tool
from masforge.search.features import llm_calls_estimate
from masforge.search.operators.prompting import genome_brief
from masforge.seeds import load_seed, seed_names
from masforge.standalone.execute import gather_checks, written_tests
from masforge.standalone.python_tool import run_python
from masforge.standalone.system import GraphRunner
from masforge.testing import chat_reply

QUESTION = """Write a python function to add two numbers.
Your code should pass these tests:
assert add(2, 3) == 5
assert add(0, 0) == 0"""

RIGHT = "```python\ndef add(a, b):\n    return a + b\n```"
WRONG = "```python\ndef add(a, b):\n    return a - b\n```"  # passes add(0, 0) == 0 only
OFF_BY_ONE = "```python\ndef add(a, b):\n    return a + b + 1\n```"  # passes nothing
CRASH = "```python\nraise ValueError('boom')\n```"

GATED = """
agents:
  - {id: coder, copies: 3}
  - {id: check, module: execute}
topology:
  edges: [input -> coder, coder -> check, check -> output]
"""


def _text(messages: list[dict[str, Any]]) -> str:
    return "\n".join(str(m.get("content", "")) for m in messages)


class Script:
    """A fake LM for code tasks. The debugger and the test engineer (told apart by their role line) get their own
    scripted replies, one per call in turn (the last one repeats); every other call is answered by its sample
    index (greedy and sampled calls apart). Every call is recorded with its messages, sample and temperature."""

    def __init__(self, greedy: str = RIGHT, samples: dict[int, str] | None = None, repairs: list[str] | None = None,
                 tests: str = "") -> None:
        self.greedy = greedy
        self.samples = samples or {}
        self.repairs = list(repairs or [RIGHT])
        self.tests = tests
        self.calls: list[dict[str, Any]] = []
        self.debugged = 0

    def __call__(self, messages: list[dict[str, Any]], info: dict[str, Any]) -> str:
        text = _text(messages)
        self.calls.append({"messages": messages, "sample": info.get("sample", 0),
                           "temperature": info.get("temperature")})
        if "test engineer" in text:
            return chat_reply(tests=self.tests)
        if "debugger" in text:
            self.debugged += 1
            return chat_reply(answer=self.repairs[min(self.debugged, len(self.repairs)) - 1])
        if info.get("temperature"):
            return chat_reply(answer=self.samples.get(info.get("sample", 0), self.greedy))
        return chat_reply(answer=self.greedy)


def _run(genome: Genome | str, script: Script, question: str = QUESTION):
    g = parse_genome_text(genome) if isinstance(genome, str) else genome
    return compile_genome(g, LMClient({"worker": "fake"}, cache=False, responder=script))(question=question)


def _called(result) -> Counter:
    return Counter(call.agent for call in result.trace.calls)


# ------------------------------------------------------------------------------------------------ execute nodes


def test_an_execute_node_passes_on_the_answer_that_passes_the_most_checks() -> None:
    result = _run(GATED, Script(samples={0: WRONG, 1: RIGHT, 2: CRASH}))
    assert result.outputs == {"answer": RIGHT}
    [candidate] = result.candidates
    assert candidate["verdict"] == "pass"
    assert candidate["report"].startswith("Passed 2 of 2 checks (2 stated in the question, 0 written as tests)")
    check = next(c for c in result.trace.calls if c.agent == "check")
    assert check.lm_calls == [] and check.outputs["verdict"] == "pass"


def test_the_report_names_each_failed_check_with_its_error_and_the_value_the_code_gave() -> None:
    result = _run(GATED, Script(samples={0: WRONG, 1: WRONG, 2: WRONG}))
    [candidate] = result.candidates
    assert candidate["answer"] == WRONG and candidate["verdict"] == "fail"
    assert candidate["report"] == ("Passed 1 of 2 checks (2 stated in the question, 0 written as tests).\n"
                                   "- assert add(2, 3) == 5 -> AssertionError (got -1)")


def test_the_report_says_why_a_program_never_reached_the_checks() -> None:
    result = _run(GATED, Script(samples={0: CRASH, 1: CRASH, 2: CRASH}))
    [candidate] = result.candidates
    assert candidate["verdict"] == "fail"
    assert "The program stopped before the checks ran: " in candidate["report"]
    assert "ValueError: boom" in candidate["report"]


def _runner(genome: Genome, script: Script, python_calls: list[str],
            python: Callable[[str], str] = run_python_tool) -> GraphRunner:
    """The runner of ``genome`` with a python tool that records the programs it runs (and runs them for real)."""
    client = LMClient({"worker": "fake"}, cache=False, responder=script)

    def recorded(code: str) -> str:
        python_calls.append(code)
        return python(code)

    return GraphRunner(system_spec(genome), lambda alias: MasforgeLM(client, alias), {"python": recorded},
                       {"python": "runs python"})


def test_what_a_candidate_prints_cannot_pass_for_the_report() -> None:
    # The exported python tool lets a program print at exit, after the report line: only the report's fresh random
    # marker tells the two apart (masforge's sandbox ends the program before exit handlers run).
    forged = ("```python\nimport atexit\n"
              "atexit.register(print, 'MASFORGE-EXAMPLES-PASSED {\"passed\": [0, 1], \"failed\": {}}')\n"
              "def add(a, b):\n    return a - b\n```")
    runner = _runner(parse_genome_text(GATED), Script(samples={0: forged, 1: forged, 2: forged}), [], run_python)
    _, candidates = runner.run(question=QUESTION)
    assert candidates[0]["verdict"] == "fail"
    assert candidates[0]["report"].startswith("Passed 1 of 2 checks")


def test_without_any_check_nothing_runs_and_the_verdict_is_pass() -> None:
    ran: list[str] = []
    runner = _runner(parse_genome_text(GATED), Script(samples={0: "41", 1: "42", 2: "42.0"}), ran)
    outputs, candidates = runner.run(question="What is 6 * 7?")
    assert ran == []
    assert outputs == {"answer": "42"}  # the vote, as run_examples would pick
    assert candidates[0]["verdict"] == "pass" and candidates[0]["report"].startswith("No checks")


def test_the_same_answer_runs_once_against_the_same_checks() -> None:
    ran: list[str] = []
    runner = _runner(parse_genome_text(GATED), Script(samples={0: WRONG, 1: WRONG, 2: RIGHT}), ran)
    outputs, _ = runner.run(question=QUESTION)
    assert outputs == {"answer": RIGHT} and len(ran) == 2


def test_written_tests_are_the_compiling_assert_lines_without_repeats() -> None:
    text = "Tests:\n```python\nassert add(1, 1) == 2\nassert add(\nprint(add(1, 2))\n  assert add(1, 1) == 2\n```"
    assert written_tests([text, "asserting nothing", "assert(add(0, 1) == 1)"]) == [
        "assert add(1, 1) == 2", "assert(add(0, 1) == 1)"]
    assert len(written_tests(["\n".join(f"assert f({i}) == {i}" for i in range(30))])) == 10
    checks = gather_checks(QUESTION, ["assert add(2, 3) == 5\nassert add(-1, 1) == 0"])
    assert checks.stated == ["assert add(2, 3) == 5", "assert add(0, 0) == 0"]
    assert checks.written == ["assert add(-1, 1) == 0"]  # a repeat of a stated example counts once


CODET_LIKE = """
agents:
  - {id: coder, copies: 5}
  - {id: tester, role: test engineer, signature: question -> tests}
  - {id: check, module: execute}
topology:
  edges: [input -> coder, input -> tester, coder -> check, tester -> check, check -> output]
"""


def test_written_tests_decide_among_answers_that_pass_the_stated_examples() -> None:
    abs_sum = "```python\ndef add(a, b):\n    return abs(a) + b\n```"  # right on every stated example
    script = Script(samples={0: abs_sum, 1: abs_sum, 2: RIGHT, 3: abs_sum, 4: WRONG},
                    tests="assert add(2, 3) == 5\nassert add(-1, 1) == 0")
    result = _run(CODET_LIKE, script)
    assert result.outputs == {"answer": RIGHT}  # the vote alone would take abs_sum (3 of 5)
    assert result.candidates[0]["report"].startswith(
        "Passed 3 of 3 checks (2 stated in the question, 1 written as tests)")


def test_the_question_s_own_examples_count_before_written_tests() -> None:
    script = Script(samples={0: OFF_BY_ONE, 1: OFF_BY_ONE, 2: RIGHT, 3: OFF_BY_ONE, 4: OFF_BY_ONE},
                    tests="assert add(1, 1) == 3\nassert add(2, 2) == 5")  # wrong tests OFF_BY_ONE passes
    result = _run(CODET_LIKE, script)
    assert result.outputs == {"answer": RIGHT}
    assert result.candidates[0]["verdict"] == "fail"  # it fails the (wrong) written tests


# ------------------------------------------------------------------------------------------------ routing


def test_escalation_samples_only_when_the_greedy_answer_fails() -> None:
    passing = _run(load_seed("escalate"), Script(greedy=RIGHT))
    assert _called(passing) == Counter({"answerer": 1, "first_check": 1, "final_check": 1})
    assert passing.outputs == {"answer": RIGHT}

    failing = _run(load_seed("escalate"), Script(greedy=WRONG, samples={0: WRONG, 1: OFF_BY_ONE, 2: RIGHT}))
    assert _called(failing) == Counter({"answerer": 1, "first_check": 1, "sampler": 5, "final_check": 1})
    assert failing.outputs == {"answer": RIGHT}
    assert [c["verdict"] for c in failing.candidates] == ["pass"]  # first_check's pass edge carries nothing


def _requests(script: Script) -> Counter:
    return Counter(json.dumps(c, sort_keys=True) for c in script.calls)


def test_escalation_and_repair_seeds_send_the_prompts_of_io_and_sample_and_test() -> None:
    """Same messages, sample indices and temperatures: the same keys in the answer cache."""
    escalate = Script(greedy=WRONG, samples={i: WRONG for i in range(5)})
    _run(load_seed("escalate"), escalate)
    io, sampled = Script(greedy=WRONG), Script(samples={i: WRONG for i in range(5)})
    _run(load_seed("io"), io)
    _run(load_seed("sample_and_test"), sampled)
    assert _requests(escalate) == _requests(io) + _requests(sampled)
    assert len(escalate.calls) == 6

    codet = Script(samples={i: WRONG for i in range(5)})
    _run(load_seed("codet"), codet)
    assert _requests(sampled) <= _requests(codet)

    debug = Script(greedy=WRONG, repairs=[RIGHT])
    _run(load_seed("self_debug"), debug)
    assert debug.calls[0] == io.calls[0]


def test_a_repair_loop_ends_when_the_check_passes() -> None:
    right_away = _run(load_seed("self_debug"), Script(greedy=RIGHT))
    assert _called(right_away) == Counter({"coder": 1, "check": 1})

    script = Script(greedy=WRONG, repairs=[RIGHT])
    repaired = _run(load_seed("self_debug"), script)
    assert _called(repaired) == Counter({"coder": 1, "check": 2, "debugger": 1})
    assert repaired.outputs == {"answer": RIGHT}
    debugger_prompt = _text(script.calls[1]["messages"])
    assert "verdict: fail" in debugger_prompt and "assert add(2, 3) == 5 -> AssertionError (got -1)" in debugger_prompt


def test_a_repair_loop_keeps_to_its_rounds_and_never_loses_a_better_answer() -> None:
    fixed_half = "```python\ndef add(a, b):\n    return a * b if a else 0\n```"  # passes add(0, 0) == 0 only
    script = Script(greedy=OFF_BY_ONE, repairs=[fixed_half, CRASH])
    result = _run(load_seed("self_debug"), script)  # rounds: 3 -> three checks, two repairs
    assert _called(result) == Counter({"coder": 1, "check": 3, "debugger": 2})
    assert result.outputs == {"answer": fixed_half}  # the crashing second repair does not replace it
    assert result.candidates[0]["verdict"] == "fail"


LOOP_CHECK_FIRST = """
agents:
  - {id: coder}
  - {id: check, module: execute}
  - {id: fixer, role: debugger}
topology:
  edges: [input -> coder, coder -> check, check -> output, check -> fixer, input -> fixer, fixer -> check]
  conditions: {check -> fixer: fail}
  rounds: 2
"""


def test_a_repair_no_check_would_see_is_not_made() -> None:
    # check is listed before fixer: in the last round a repair would come after the last check
    result = _run(LOOP_CHECK_FIRST, Script(greedy=WRONG, repairs=[OFF_BY_ONE]))
    assert _called(result) == Counter({"coder": 1, "check": 2, "fixer": 1})


def test_agents_behind_a_skipped_agent_are_skipped_and_give_no_candidate() -> None:
    genome = """
agents:
  - {id: answerer}
  - {id: check, module: execute}
  - {id: helper, role: helper}
  - {id: finisher, role: finisher}
topology:
  edges: [input -> answerer, answerer -> check, check -> output, check -> helper, helper -> finisher,
          input -> finisher, finisher -> output]
  conditions: {check -> helper: fail, check -> output: pass}
"""
    passing = _run(genome, Script(greedy=RIGHT))
    assert _called(passing) == Counter({"answerer": 1, "check": 1})
    assert passing.outputs == {"answer": RIGHT} and len(passing.candidates) == 1
    failing = _run(genome, Script(greedy=WRONG))
    assert _called(failing) == Counter({"answerer": 1, "check": 1, "helper": 1, "finisher": 1})
    assert len(failing.candidates) == 1  # check's pass edge carries nothing


def test_systems_without_the_genes_are_not_controlled() -> None:
    for name in seed_names():
        genome = load_seed(name)
        if genome.kind != "config":
            continue
        runner = GraphRunner(system_spec(genome), lambda alias: None, {"python": str, "calculator": str},
                             {"python": "", "calculator": ""})
        uses = name in ("self_debug", "codet", "escalate")
        assert runner.controlled is uses, name


# ------------------------------------------------------------------------------------------------ validation


def _problems(text: str) -> list[str]:
    return problems(parse_genome_text(text))


@pytest.mark.parametrize(("setting", "field"), [
    ("copies: 2", "copies"), ("tools: [python]", "tools"), ("instructions: run the tests", "instructions"),
    ("temperature: 0.5", "temperature"), ("lm: meta", "lm"), ("adapter: plain", "adapter"),
    ("signature: 'question -> answer'", "signature")])
def test_an_execute_node_refuses_lm_settings(setting: str, field: str) -> None:
    found = _problems(GATED.replace("{id: check, module: execute}", f"{{id: check, module: execute, {setting}}}"))
    assert found and found[0].startswith(f"agents[1].{field}: execute node 'check' takes no {field} (")
    assert found[0].endswith("; remove it")


@pytest.mark.parametrize(("edit", "expected"), [
    (("coder -> check, check -> output", "coder -> output, input -> check, check -> output"),
     "agents[1]: execute node 'check' has no agent before it (it runs their code); add an edge like "
     "'coder -> check'"),
    (("{id: coder, copies: 3}", "{id: coder, copies: 3, signature: 'question -> tests'}"),
     "agents[1]: no agent before execute node 'check' writes 'answer' (the code it runs); add an edge from an "
     "agent that answers"),
])
def test_an_execute_node_needs_an_answer_before_it(edit: tuple[str, str], expected: str) -> None:
    assert expected in _problems(GATED.replace(*edit))


def test_an_execute_node_needs_a_writer_its_own_verdict_does_not_gate() -> None:
    """A repair loop whose first coder was removed: the repairer runs only when the check fails, and the check has
    nothing to run until the repairer has written something, so the system would never answer."""
    loop = """
kind: config
name: orphan_loop
agents:
  - {id: repairer, role: debugger}
  - {id: check, module: execute}
topology:
  edges: [input -> repairer, input -> check, check -> repairer, repairer -> check, check -> output]
  rounds: 3
  conditions: {check -> repairer: fail}
"""
    assert _problems(loop) == [
        "agents[1]: every agent writing the code execute node 'check' runs is gated by its own verdict, so none "
        "ever runs; add an edge from an agent that answers first, like 'coder -> check'"]
    fixed = loop.replace("{id: repairer, role: debugger}", "{id: coder}\n  - {id: repairer, role: debugger}")
    assert _problems(fixed.replace("[input -> repairer,", "[input -> coder, coder -> check, input -> repairer,")) == []


def test_a_fixer_written_as_an_execute_node_is_refused() -> None:
    """The 0.5B meta-agent's repair loop (HumanEval meta row): its "fixer" runs code instead of writing it, so the
    loop re-runs the check's own pick and repairs nothing; the one-line error says how to make it repair."""
    loop = """
kind: config
name: careful-solver-fixer-check
agents:
  - {id: solver, module: chain_of_thought}
  - {id: fixer, module: execute}
  - {id: check, module: execute}
topology:
  edges: [input -> solver, solver -> check, check -> output, check -> fixer, input -> fixer, fixer -> check]
  rounds: 3
  conditions: {check -> fixer: fail}
"""
    assert _problems(loop) == [
        "agents[1]: execute node 'fixer' gets code only from execute nodes (check), so it re-runs answers already "
        "run and changes none; to repair them make it an LM agent (e.g. module: predict, with instructions), else "
        "remove it"]
    assert _problems(loop.replace("{id: fixer, module: execute}", "{id: fixer, instructions: fix the code}")) == []
    # a second check that runs the first one's pick against tests of its own is a real check
    tested = loop.replace("  - {id: check, module: execute}", "  - {id: check, module: execute}\n"
                          "  - {id: tester, signature: 'question -> tests'}").replace(
        "fixer -> check]", "fixer -> check, input -> tester, tester -> fixer]")
    assert _problems(tested) == []


def test_conditions_must_name_an_edge_out_of_an_execute_node() -> None:
    assert _problems(GATED + "  conditions: {check -> coder: fail}") == [
        "topology.conditions: 'check -> coder' is not an edge in topology.edges; add the edge or remove its "
        "condition"]
    assert _problems(GATED + "  conditions: {coder -> check: pass}")[0].startswith(
        "topology.conditions: 'coder -> check' starts at 'coder', which is not an execute node")
    with pytest.raises(GenomeError, match="conditions.check -> output: Input should be 'pass' or 'fail'"):
        validate(parse_genome_text(GATED + "  conditions: {check -> output: maybe}"))
    with pytest.raises(GenomeError, match="condition 'check' does not name an edge"):
        parse_genome_text(GATED + "  conditions: {check: fail}")


def test_the_judge_and_the_verdict_fields_stay_apart() -> None:
    judged = GATED.replace("check -> output]", "check -> output]\n  aggregation: judge\n  judge: referee").replace(
        "{id: check, module: execute}", "{id: check, module: execute}\n  - {id: referee, module: execute}")
    assert _problems(judged) == ["topology.judge: 'referee' is an execute node; a judge must be an LM agent"]
    assert _problems("outputs: [verdict]\n" + GATED) == [
        "outputs: 'verdict' is what execute node 'check' writes beside the answer; give the genome output another "
        "name"]


def test_the_new_seeds_are_valid_and_use_the_genes() -> None:
    for name in ("self_debug", "codet", "escalate"):
        genome = validate(load_seed(name))
        assert any(a.module == "execute" for a in genome.agents)
        assert "python" in system_spec(genome).needed_tools()
    assert load_seed("self_debug").topology.conditions == {"check -> debugger": "fail"}


# ------------------------------------------------------------------------------------------------ identity


# The ids of the seeds that existed before execution genes, computed by the code before them: unchanged.
OLD_SEED_IDS = {
    "cot": "59da9192604f3600d372fafb770fa9304e81cf1c46a80added579e13dcde51a3",
    "debate": "bb4504470eae1a5193f28035c3b5684c42246863c7d9c4fc05f802095d42dbdb",
    "expert_routing": "f5c08f0f2fc15a4749022aa8d89b36ae20339cae943ebe2f95d7109a0b855cf2",
    "io": "f88928e932ad9596edd577d72c46af134f56dcbbb76b66328aa5a0dfba797bf9",
    "plan_and_solve": "f99de589cd519e984bec217b25849a877ead5e5a5d1a98fd631c8a8ad0bfcfd5",
    "program_of_thought": "f47c794c753f8724ed52c3ed729277c62e2940f487efcaf8db148c5ac994c90a",
    "quality_diversity": "560ddbca4db637915ca2e5b802149e66f7a929cbd4ec42e18f781d609ddb50f2",
    "react_calculator": "24229eefb8d5e59c4aed182935fb5596184da92bcd3171954020adb568b6567b",
    "reflexion_code": "69aff61d86b66ea254ad9038b16848c01637482c2e872ac83642432e5a0d43a5",
    "sample_and_test": "e4004c659dcac5bb9823cf78179868afd71e94bd6a712901060c4fc65d0c7aa3",
    "self_consistency": "ed5af510410104b68cfaa344fdf4ca762d4f795cc0a7a71704e6b611098bbc66",
    "self_refine": "22d9a247a871f904cf4c9289759c00064c7ae4116e68e13f315c9528165b09eb",
    "step_back": "5f10a36196176b96baebad6e0a5b852c3cac46d55cf3abaa83d33a2b7cafdb44",
    "take_a_deep_breath": "5ff3cdc4c3c07d8ce26e37c9c2b678598540fc0561ee7624ccaff62cb0c759d9",
}


def test_genomes_without_conditions_keep_their_ids() -> None:
    assert {name: load_seed(name).id for name in OLD_SEED_IDS} == OLD_SEED_IDS
    io = load_seed("io")
    explicit = io.model_copy(deep=True)
    explicit.topology.conditions = {}
    assert explicit.id == io.id


def test_conditions_count_in_the_id_in_one_spelling() -> None:
    base = parse_genome_text(GATED.replace("check -> output]", "check -> output, check -> coder]\n  rounds: 2"))
    spellings = ["{check -> coder: fail}", "{'check->coder': fail}", "{'  check  ->  coder ': FAIL}",
                 "[[check, coder, fail]]", "[['check -> coder', fail]]"]
    ids = {parse_genome_text(GATED.replace("check -> output]", "check -> output, check -> coder]\n  rounds: 2")
                             + f"  conditions: {s}").id for s in spellings}
    assert len(ids) == 1 and base.id not in ids
    passing = parse_genome_text(GATED.replace("check -> output]", "check -> output, check -> coder]\n  rounds: 2")
                                + "  conditions: {check -> coder: pass}")
    assert passing.id not in ids


def test_outline_diff_and_brief_describe_the_genes() -> None:
    genome = load_seed("self_debug")
    text = outline(genome)
    assert "check runs the code of coder, debugger against the stated examples (no LM)" in text
    assert "if check fails, debugger runs" in text
    assert "the tests of tester" in outline(load_seed("codet"))
    changed = genome.model_copy(deep=True)
    changed.topology.conditions = {"check -> debugger": "pass"}
    assert format_diff(genome, changed) == "~ condition check -> debugger: fail -> pass"
    changed.topology.conditions = {}
    assert format_diff(genome, changed) == "- condition: check -> debugger if fail"
    assert "conditions: {check -> debugger: fail}" in genome_brief(genome)
    assert llm_calls_estimate(load_seed("escalate")) == 6.0


# ------------------------------------------------------------------------------------------------ export

EXPORT_HARNESS = r'''
import importlib.util, json, sys
from types import SimpleNamespace

import dspy

job = json.loads(open(sys.argv[1], encoding="utf-8").read())
RIGHT, WRONG, CRASH = job["right"], job["wrong"], job["crash"]


def reply(**fields):
    return "\n\n".join("[[ ## %s ## ]]\n%s" % kv for kv in fields.items()) + "\n\n[[ ## completed ## ]]"


class ScriptLM(dspy.BaseLM):
    def __init__(self, calls):
        super().__init__(model="test/script", temperature=0.0, max_tokens=1024, cache=False, num_retries=0)
        self.calls = calls

    def forward(self, prompt=None, messages=None, **kwargs):
        merged = {**self.kwargs, **kwargs}
        text = "\n".join(str(m["content"]) for m in messages)
        sample, temperature = int(merged.get("rollout_id") or 0), merged.get("temperature")
        self.calls.append(json.dumps({"messages": messages, "sample": sample, "temperature": temperature},
                                     sort_keys=True))
        if "test engineer" in text:
            answer = reply(tests="assert add(2, 3) == 5\nassert add(-1, 1) == 0")
        elif "debugger" in text:
            answer = reply(answer=RIGHT)
        elif temperature:
            answer = reply(answer=[WRONG, CRASH, RIGHT, WRONG, RIGHT][sample % 5])
        else:
            answer = reply(answer=WRONG)
        message = SimpleNamespace(content=answer, tool_calls=None, reasoning_content=None)
        return SimpleNamespace(choices=[SimpleNamespace(message=message, finish_reason="stop", logprobs=None)],
                               usage={"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0},
                               model="test/script")


results = {}
for name, path in job["modules"].items():
    spec = importlib.util.spec_from_file_location("exported_" + name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    calls = []
    outputs, candidates = module.build(lm=ScriptLM(calls)).run(question=job["question"])
    results[name] = {"outputs": outputs, "candidates": candidates, "calls": calls}
standalone = not any(m == "masforge" or m.startswith("masforge.") for m in sys.modules)
json.dump({"standalone": standalone, "results": results}, open(sys.argv[2], "w", encoding="utf-8"))
'''


def _masforge_script(calls: list[str]):
    def respond(messages: list[dict[str, Any]], info: dict[str, Any]) -> str:
        text = _text(messages)
        sample, temperature = info.get("sample", 0), info.get("temperature")
        calls.append(json.dumps({"messages": messages, "sample": sample, "temperature": temperature},
                                sort_keys=True))
        if "test engineer" in text:
            return chat_reply(tests="assert add(2, 3) == 5\nassert add(-1, 1) == 0")
        if "debugger" in text:
            return chat_reply(answer=RIGHT)
        if temperature:
            return chat_reply(answer=[WRONG, CRASH, RIGHT, WRONG, RIGHT][sample % 5])
        return chat_reply(answer=WRONG)

    return respond


def test_exported_seeds_run_the_genes_like_masforge(tmp_path: Path) -> None:
    names = ("self_debug", "codet", "escalate")
    modules = {}
    for name in names:
        path = tmp_path / f"{name}.py"
        path.write_text(export_genome(load_seed(name), "python", path.name), encoding="utf-8")
        modules[name] = str(path)
    job, harness, out = tmp_path / "job.json", tmp_path / "harness.py", tmp_path / "out.json"
    job.write_text(json.dumps({"modules": modules, "question": QUESTION, "right": RIGHT, "wrong": WRONG,
                               "crash": CRASH}))
    harness.write_text(EXPORT_HARNESS)
    proc = subprocess.run([sys.executable, str(harness), str(job), str(out)], cwd=tmp_path, capture_output=True,
                          text=True, timeout=600, env={**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    exported = json.loads(out.read_text())
    assert exported["standalone"]
    for name in names:
        calls: list[str] = []
        client = LMClient({"worker": "fake"}, cache=False, responder=_masforge_script(calls))
        result = compile_genome(load_seed(name), client)(question=QUESTION)
        theirs = exported["results"][name]
        assert theirs["outputs"] == result.outputs == {"answer": RIGHT}, name
        assert theirs["candidates"] == result.candidates, name
        assert Counter(theirs["calls"]) == Counter(calls), name


def test_an_escalation_tier_samples_again_only_where_every_answer_so_far_fails() -> None:
    import random

    from masforge.search.operators.execution import add_escalation_tier

    genome = load_seed("escalate")
    assert add_escalation_tier(genome, random.Random(0)) is not None
    more = next(a for a in genome.agents if a.id == "sampler_more")
    assert more.temperature not in (None, 0.7)  # another temperature: other answers than the first tier's

    passing = _run(genome, Script(greedy=WRONG, samples={0: RIGHT}))
    assert "sampler_more" not in _called(passing) and passing.outputs == {"answer": RIGHT}

    script = Script(greedy=WRONG, samples={i: OFF_BY_ONE for i in range(5)})
    failing = _run(genome, script)
    assert _called(failing)["sampler_more"] == more.copies
    assert {c["temperature"] for c in script.calls if c["temperature"]} == {0.7, more.temperature}
    assert failing.outputs == {"answer": WRONG}  # the best so far (1 of 2 checks) stays: no sample beat it

    first_tiers = Script(greedy=WRONG, samples={i: OFF_BY_ONE for i in range(5)})

    def second_tier_right(messages, info):
        if info.get("temperature") == more.temperature:
            return chat_reply(answer=RIGHT)
        return first_tiers(messages, info)

    out = compile_genome(genome, LMClient({"worker": "fake"}, cache=False, responder=second_tier_right))(
        question=QUESTION)
    assert out.outputs == {"answer": RIGHT}


# ------------------------------------------------------------------------------------------------ unchecked verdict

NO_EXAMPLES = "Write a python function add(a, b) that adds two numbers."


def _distrusting(gates: tuple[str, ...] = ("first_check",)) -> Genome:
    genome = load_seed("escalate")
    for gate in gates:
        genome.agent(gate).unchecked = "fail"
    return genome


def test_a_gate_that_distrusts_the_unchecked_escalates_when_the_question_states_no_example() -> None:
    trusting = _run(load_seed("escalate"), Script(greedy=WRONG, samples={i: RIGHT for i in range(5)}), NO_EXAMPLES)
    assert "sampler" not in _called(trusting) and trusting.outputs == {"answer": WRONG}

    script = Script(greedy=WRONG, samples={i: RIGHT for i in range(5)})
    distrusting = _run(_distrusting(), script, NO_EXAMPLES)
    assert _called(distrusting)["sampler"] == 5
    assert distrusting.outputs == {"answer": RIGHT}  # nothing to run: the most common of the six answers

    with_examples = _run(_distrusting(), Script(greedy=RIGHT), QUESTION)  # the examples decide, as before
    assert _called(with_examples) == Counter({"answerer": 1, "first_check": 1, "final_check": 1})


def test_the_unchecked_verdict_counts_in_the_id_only_where_it_is_not_the_default() -> None:
    escalate = load_seed("escalate")
    explicit = escalate.model_copy(deep=True)
    explicit.agent("first_check").unchecked = "pass"
    assert explicit.id == escalate.id == "f40ca6a2fa9595b24dcdfa70f37d866ad8c24456af63d53fd00e8be9ea79a95b"
    assert _distrusting().id != escalate.id
    assert "with nothing to run it fails" in outline(_distrusting())
    assert format_diff(escalate, _distrusting()) == "~ agent first_check.unchecked: pass -> fail"


def test_only_an_execute_node_takes_an_unchecked_verdict() -> None:
    genome = load_seed("escalate")
    genome.agent("answerer").unchecked = "fail"
    assert problems(genome) == ["agents[0].unchecked: only an execute node has a verdict; remove it from "
                                "'answerer'"]
    with pytest.raises(GenomeError, match="agents\\[1\\].unchecked: Input should be 'pass' or 'fail'"):
        parse_genome_text(GATED.replace("module: execute}", "module: execute, unchecked: maybe}"))


def test_tuning_an_execution_gene_can_flip_a_routing_gate_s_unchecked_verdict() -> None:
    import random

    from masforge.search.operators.execution import tune_execution

    flips = set()
    for seed in range(40):
        genome = load_seed("escalate")
        what = tune_execution(genome, random.Random(seed))
        if what is not None and "unchecked" in what:
            flips.add(what)
            assert not problems(genome)
    assert flips == {"first_check.unchecked -> fail"}  # final_check routes nothing: its verdict would change nothing


def test_an_exported_system_keeps_the_unchecked_verdict(tmp_path: Path) -> None:
    genome = _distrusting()
    path = tmp_path / "distrusting.py"
    path.write_text(export_genome(genome, "python", path.name), encoding="utf-8")
    job, harness, out = tmp_path / "job.json", tmp_path / "harness.py", tmp_path / "out.json"
    job.write_text(json.dumps({"modules": {"distrusting": str(path)}, "question": NO_EXAMPLES, "right": RIGHT,
                               "wrong": WRONG, "crash": CRASH}))
    harness.write_text(EXPORT_HARNESS)
    proc = subprocess.run([sys.executable, str(harness), str(job), str(out)], cwd=tmp_path, capture_output=True,
                          text=True, timeout=600, env={**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    theirs = json.loads(out.read_text())["results"]["distrusting"]
    calls: list[str] = []
    client = LMClient({"worker": "fake"}, cache=False, responder=_masforge_script(calls))
    ours = compile_genome(genome, client)(question=NO_EXAMPLES)
    assert theirs["outputs"] == ours.outputs and theirs["candidates"] == ours.candidates
    assert Counter(theirs["calls"]) == Counter(calls) and len(calls) == 6  # the greedy answer and 5 samples


def test_a_setting_back_to_its_default_shows_in_the_diff() -> None:
    plain = load_seed("escalate")
    plain.agent("answerer").adapter = "plain"
    assert format_diff(plain, load_seed("escalate")) == "~ agent answerer.adapter: plain -> auto"
    assert format_diff(_distrusting(), load_seed("escalate")) == "~ agent first_check.unchecked: fail -> pass"
