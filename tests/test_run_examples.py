"""The ``run_examples`` aggregation: which checks a question states, how candidates are run against them (in the
sandbox), which candidate wins, and how the gene reaches search (mutation, proposals, tune, hashing, names)."""

from __future__ import annotations

import random

import pytest

from masforge.execution.compile import compile_genome
from masforge.genome.hashing import genome_hash
from masforge.genome.io import parse_genome_text
from masforge.genome.outline import outline
from masforge.lm.client import LMClient
from masforge.sandbox.tools import run_python_tool
from masforge.search.operators.hygiene import structural_name
from masforge.search.operators.proposal import parse_proposal
from masforge.search.operators.structural import change_aggregation
from masforge.standalone.examples import (
    answer_code,
    check_program,
    examples_passed,
    passed_counts,
    question_imports,
    stated_examples,
)
from masforge.testing import chat_reply

MBPP_QUESTION = """Write a python function to add two numbers.
Your code should pass this test:
assert add(2, 3) == 5

Write the complete Python function in a ```python code block."""

HUMANEVAL_QUESTION = '''```python
from typing import List


def total(xs: List[int]) -> int:
    """Sum of xs.
    >>> total([1, 2])
    3
    >>> total([]) == 0
    Examples:
    total([5]) ==> 5
    total([2, 2])   # returns 4
    double([1, 3]) == 1 + 3 = 4
    """
```'''

RIGHT = "```python\ndef add(a, b):\n    return a + b\n```"
WRONG = "```python\ndef add(a, b):\n    return a - b\n```"


def test_asserts_doctests_and_prose_examples_become_checks() -> None:
    assert stated_examples(MBPP_QUESTION) == ["assert add(2, 3) == 5"]
    checks = stated_examples(HUMANEVAL_QUESTION)
    assert checks == [
        "assert __masforge_same(total([1, 2]), '3')",
        "assert total([]) == 0",  # a doctest comparison shown without its "True"
        "assert __masforge_same(total([5]), '5')",
        "assert __masforge_same(total([2, 2]), '4')",
        "assert __masforge_same(double([1, 3]), '4')",  # the value after the last "="
    ]
    assert question_imports(HUMANEVAL_QUESTION) == ["from typing import List"]


def test_a_question_without_examples_states_no_checks() -> None:
    assert stated_examples("What is 3 + 4?\nFor N = 1000 the output should be 1.") == []
    assert stated_examples("assert that it works well") == []
    assert passed_counts([RIGHT], "What is 3 + 4?", run_python_tool) is None


def test_the_code_of_an_answer_is_its_fenced_blocks_or_its_text() -> None:
    assert answer_code("Here:\n" + RIGHT + "\nDone.") == "def add(a, b):\n    return a + b"
    assert answer_code("def f():\n    return 1") == "def f():\n    return 1"


def test_candidates_run_in_the_sandbox_and_count_the_examples_they_pass() -> None:
    question = MBPP_QUESTION + "\nassert add(0, 0) == 0"
    crashing = "```python\nraise SystemExit(3)\n```"
    forging_the_report = "```python\nprint('MASFORGE-EXAMPLES-PASSED', 0, 1)\n```"
    noisy = "```python\ndef add(a, b):\n    print('x' * 3000)\n    return a + b\n```"
    counts = passed_counts([RIGHT, WRONG, crashing, forging_the_report, "no code at all", noisy], question,
                           run_python_tool)
    # a - b still gets add(0, 0) right; only the program's own last line counts, however long the output
    assert counts == [2, 1, 0, 0, 0, 2]


def test_a_check_program_keeps_going_after_a_failing_example() -> None:
    program = check_program("def f(x):\n    return x", ["assert f(1) == 2", "assert f(3) == 3"], [])
    assert examples_passed(run_python_tool(program), 2) == 1


def _tested_genome(copies: int = 3) -> str:
    return f"""
agents:
  - {{id: coder, role: programmer, copies: {copies}}}
topology:
  edges: [input -> coder, coder -> output]
  aggregation: run_examples
"""


def _client(answers: dict[int, str]) -> LMClient:
    return LMClient({"worker": "fake"}, cache=False,
                    responder=lambda messages, info: chat_reply(answer=answers[info["sample"]]))


def test_the_candidate_that_passes_the_stated_examples_wins_over_the_majority() -> None:
    genome = parse_genome_text(_tested_genome())
    result = compile_genome(genome, _client({0: WRONG, 1: RIGHT, 2: WRONG}))(question=MBPP_QUESTION)
    assert result.outputs == {"answer": RIGHT} and len(result.candidates) == 3


def test_without_stated_examples_it_is_a_majority_vote() -> None:
    genome = parse_genome_text(_tested_genome())
    result = compile_genome(genome, _client({0: "41", 1: "42", 2: "42.0"}))(question="What is 6 * 7?")
    assert result.outputs == {"answer": "42"}


def test_the_gene_reaches_mutation_proposals_names_and_the_outline() -> None:
    genome = parse_genome_text(_tested_genome())
    assert "passes most of the task's stated examples" in outline(genome)
    assert structural_name(genome).endswith("tested")
    # one answer at the output: nothing to pick from, the same system as "last"
    one = parse_genome_text(_tested_genome(copies=1))
    assert genome_hash(one) == genome_hash(parse_genome_text(_tested_genome(copies=1).replace("run_examples", "last")))
    seen = set()
    for seed in range(30):
        g = genome.model_copy(deep=True)
        change_aggregation(g, random.Random(seed))
        seen.add(g.topology.aggregation)
    assert {"last", "majority_vote"} <= seen
    voting = parse_genome_text(_tested_genome().replace("run_examples", "majority_vote"))
    after = set()
    for seed in range(30):
        g = voting.model_copy(deep=True)
        change_aggregation(g, random.Random(seed))
        after.add(g.topology.aggregation)
    assert "run_examples" in after


@pytest.mark.parametrize("word", ["run_examples", "tests"])
def test_a_meta_agent_proposal_may_ask_for_it(word: str) -> None:
    reply = ('{"rationale": "samples checked on the stated examples", "name": "coder-x3-tested", '
             '"agents": [{"id": "coder", "role": "programmer", "instructions": "Write the complete solution.", '
             '"module": "predict", "copies": 3}], "edges": ["input -> coder", "coder -> output"], '
             f'"aggregation": "{word}"}}')
    genome, _ = parse_proposal(reply, kind="config")
    assert genome.topology.aggregation == "run_examples"


def test_an_exported_system_runs_the_stated_examples_the_same_way(tmp_path) -> None:
    from masforge.export import export_genome
    from masforge.export.loader import load_exported
    from masforge.seeds import load_seed

    path = tmp_path / "sample_and_test.py"
    path.write_text(export_genome(load_seed("sample_and_test"), "python", path.name), encoding="utf-8")
    answers = {0: WRONG, 1: WRONG, 2: RIGHT, 3: WRONG, 4: RIGHT}
    exported = load_exported(path)(_client(answers))(question=MBPP_QUESTION)
    here = compile_genome(load_seed("sample_and_test"), _client(answers))(question=MBPP_QUESTION)
    assert exported.outputs == here.outputs == {"answer": RIGHT}  # not the majority: the one passing add(2, 3)
