"""Answers read as the model wrote them (issue 27). Each reading rule is checked on a real reply: the replies
below are the embedded Qwen2.5-Coder-0.5B model's own answers from the committed answer cache
(bench/cache/discovery_lm_cache.sqlite.gz; the key each was stored under is given), quoted whole or, where a
reply is long, from the paragraph its answer is read from. The issue's three lost answers are read correctly
end to end: a .jsonl task scored by exact match, a reasoning-gym task, and `masforge run cot` on a code request."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from masforge.evaluators.example import Example
from masforge.evaluators.metrics import METRICS, answer_readings, code_pass, extract_code
from masforge.evaluators.tasks import Task, get_task
from masforge.execution.compile import compile_genome
from masforge.lm.client import LMClient, LMConfig
from masforge.seeds import load_seed
from masforge.standalone.reading import asks_for_code, split_final_answer, unfenced_code
from masforge.testing import ScriptedResponder

# 293b2920e0ae658b...: the marker said twice, the second time inside a sentence.
HENCE = """4. Since all conditions are met, the function returns 'Yes'.

Hence, the final answer is: Final answer: Yes"""
# 12c2512d50a1ac3e...: a label repeated inside the label.
DOUBLE = """Therefore, the function should return `True` for all other cases.

Final answer: Final answer: True"""
# d49d26cd7b5382d0...: labels in a numbered list, the last one nesting the marker.
LISTED = """5. **Final Answer**: Based on the above analysis, the function `is_Sub_Array` returns `False` because \
`sublst` is not a subsequence of `lst`.

6. **Final Answer**: Final answer: False"""
# b671db680c3b8a5f...: a sentence that leads into the answer, given below it in display math.
LEAD_IN = r"""Since the number of animals cannot be negative, we interpret this as the owner having no animals left. \
Therefore, the final answer is:
\[
\boxed{-2}
\]"""
# 7fe011342fa0d790...: the answer boxed in inline math, with a full stop.
BOXED = r"""3. **Final answer:**
   - The final answer is \(280\).

So, the final answer is \(\boxed{280}\)."""
# 184985d0f479883b...: the answer stated in a list, then a closing sentence after it.
IN_A_LIST = """4. **Final Answer**:
   - The final answer is: "pYTHON"

Therefore, the function `toggle_string` correctly toggles the case of all characters in a string."""
# e2337941eec8d389...: the function, then a block holding only the marker and an example output.
CODE_THEN_EXAMPLE = """```python
def two_unique_nums(nums):
    # Convert the list to a set to remove duplicates
    unique_nums = set(nums)
    # Convert the set back to a list
    return list(unique_nums)
```

Final answer:
```python
Final answer: [1, 4, 5]
```"""
# ffc0672ca04621d3...: a function written without a fence, between format markers.
UNFENCED = """[[ ## answer ## ]]
def flip_case(string: str) -> str:
    \"\"\" For a given string, flip lowercase characters to uppercase and uppercase to lowercase.
    >>> flip_case('Hello')
    'hELLO'
    \"\"\"
[[ ## completed ## ]]"""


def test_a_label_repeated_or_nested_inside_the_label_reads_the_value() -> None:
    assert split_final_answer(DOUBLE, stated=True)[1] == "True"
    assert split_final_answer(DOUBLE)[1] == "Final answer: True"  # what a system passes on, as before
    assert "True" in answer_readings(split_final_answer(DOUBLE)[1])
    nested = "5 times 10 is 50.\nFinal answer: Therefore, the final answer is: 50"
    assert split_final_answer(nested, stated=True)[1] == "50"
    assert split_final_answer("Final answer: **Final answer:** 7", stated=True)[1] == "7"


@pytest.mark.parametrize(("reply", "answer", "before"), [
    (HENCE, "Yes", "Hence, the final answer is: Final answer: Yes"),
    (LISTED, "False", "6. **Final Answer**: Final answer: False"),
    (IN_A_LIST, '"pYTHON"', "Therefore, the function `toggle_string` correctly toggles the case of all characters "
                            "in a string."),
])
def test_an_answer_stated_without_a_label_is_found_for_scoring(reply: str, answer: str, before: str) -> None:
    """A reply with no line-start label and no code still states its answer: in a sentence, in a list. A metric
    reads it there; the answer a system passes on stays the reply's last line (``before``), so that copies voting
    on a code task are not outvoted by copies that agree on a short stated answer instead of writing the code."""
    assert split_final_answer(reply, stated=True)[1] == answer
    assert split_final_answer(reply)[1] == before
    assert answer.strip('"') in answer_readings(reply)


def test_copies_that_state_a_short_answer_do_not_outvote_the_code() -> None:
    """The measured case: self_consistency on MBPP, two of five copies answered "False" (in a list, after a
    sentence) instead of writing the function; the vote must still go to the code."""
    code = "```python\ndef is_sub_array(a, b):\n    return any(a[i:i + len(b)] == b for i in range(len(a)))\n```"
    replies = [code.replace("is_sub_array", f"is_sub_array{i}") if i else code for i in range(3)]
    replies += [LISTED, "Final answer: The final answer is `False`."]  # two copies that agree on False, as written
    client = LMClient({"worker": LMConfig(model="fake", adapter="plain")}, cache=False,
                      responder=ScriptedResponder(replies))
    answer = compile_genome(load_seed("self_consistency"), client)(question="Check for a sub-array.").outputs
    assert answer["answer"].startswith("```python\ndef is_sub_array")


def test_a_lead_in_sentence_takes_the_answer_below_it() -> None:
    answer = split_final_answer(LEAD_IN, stated=True)[1]
    assert "\\boxed{-2}" in answer
    ex = Example("x", {"question": "q"}, "-2", {})
    assert METRICS["numeric"](ex, {"answer": answer}).value == 1.0
    assert "-2" in answer_readings(answer)


def test_an_answer_is_compared_without_its_layout() -> None:
    answer = split_final_answer(BOXED)[1]
    assert answer == r"So, the final answer is \(\boxed{280}\)."
    assert split_final_answer(BOXED, stated=True)[1] == r"\(\boxed{280}\)."
    assert answer_readings(answer)[-1] == "280"
    ex = Example("x", {"question": "q"}, "280", {})
    assert METRICS["exact_match"](ex, {"answer": answer}).value == 1.0
    for written in ("**-4**", "$-4$", r"\(-4\)", "-4.", "`-4`", "The result of the calculation is -4.",
                    "5 - 3 - 6 = -4"):
        assert "-4" in answer_readings(written), written
    wrong = METRICS["exact_match"](Example("y", {"question": "q"}, "4", {}), {"answer": "The answer is not 4."})
    assert wrong.value == 0.0 and wrong.details["error_kind"] == "extra_text"
    other = METRICS["exact_match"](Example("z", {"question": "q"}, "5", {}), {"answer": "**6**"})
    assert other.value == 0.0 and other.details["error_kind"] == "mismatch"


def test_the_code_is_taken_from_the_block_that_defines_the_function() -> None:
    code = extract_code(CODE_THEN_EXAMPLE, "two_unique_nums")
    assert code.startswith("def two_unique_nums(nums):")
    assert extract_code(CODE_THEN_EXAMPLE).startswith("Final answer")  # without the entry point: the last block
    tests = "def check(f):\n    assert sorted(f([1, 2, 2, 3])) == [1, 2, 3]\n"
    assert code_pass(CODE_THEN_EXAMPLE, tests, entry_point="two_unique_nums").value == 1.0


def test_code_written_without_a_fence_is_found_in_the_prose() -> None:
    code = unfenced_code(UNFENCED)
    assert code is not None and code.startswith("def flip_case(string: str) -> str:")
    assert "[[ ##" not in code
    assert extract_code(UNFENCED) == code
    program = "Here it is:\ndef add(a, b):\n    return a + b\n\nprint(add(1, 2))\nThis prints 3."
    assert extract_code(program) == "def add(a, b):\n    return a + b\n\nprint(add(1, 2))"
    assert extract_code("def f():\n    return 1\n") == "def f():\n    return 1"  # a whole program stays whole


# -- the three lost answers, end to end --------------------------------------------------------


def _client(reply: str) -> LMClient:
    return LMClient({"worker": LMConfig(model="fake", adapter="plain")}, cache=False,
                    responder=ScriptedResponder([reply] * 8))


def test_a_jsonl_answer_repeated_after_the_marker_is_read(tmp_path: Path) -> None:
    data = tmp_path / "my12lines.jsonl"
    data.write_text("".join(json.dumps({"question": f"What is {i} * 10?", "answer": str(10 * i)}) + "\n"
                            for i in range(12)))
    task = Task.from_jsonl(data)
    example = next(e for split in ("train", "validation", "test") for e in task.split(split) if e.target == "50")
    system = compile_genome(load_seed("cot"), _client("5 times 10 is 50.\nTherefore, the final answer is: "
                                                      "Final answer: 50"))
    outputs = system(question=example.inputs["question"]).outputs
    assert outputs["answer"] == "Therefore, the final answer is: Final answer: 50"  # the system passes it on as is
    assert task.score(example, outputs).value == 1.0  # and it is scored as the answer it states
    assert task.score(example, {"answer": "Therefore, the final answer is: Final answer: 50"}).value == 1.0


@pytest.mark.parametrize("reply", [
    "Adding the terms step by step gives {g}.\nFinal answer: **{g}**",
    "First the left part, then the rest: {g}.\nFinal answer: {g}.",
    "So, the final answer is \\(\\boxed{{{g}}}\\).",
    "Step by step, the terms add up to {g}.\nFinal answer: The result of the calculation is {g}.",
])
def test_a_reasoning_gym_answer_is_scored_as_written(reply: str) -> None:
    task = get_task("rg:basic_arithmetic")
    example = task.split("validation", limit=1)[0]
    system = compile_genome(load_seed("cot"), _client(reply.format(g=example.target)))
    outputs = system(question=example.inputs["question"]).outputs
    assert task.score(example, outputs).value == 1.0, outputs


def test_run_cot_keeps_the_code_when_its_final_answer_only_leads_into_it() -> None:
    reply = ("To reverse a string in Python, slice it with a step of -1.\n\n```python\ndef reverse_string(s):\n"
             "    return s[::-1]\n```\n\nFinal answer: The final answer to the task of reversing a string in Python "
             "is:")
    system = compile_genome(load_seed("cot"), _client(reply))
    answer = system(question="Write a Python function that reverses a string").outputs["answer"]
    assert answer == "```python\ndef reverse_string(s):\n    return s[::-1]\n```"
    unfenced = ("def reverse_string(s):\n    return s[::-1]\n\nThis slices the string backwards.\n\n"
                "The final answer to the task of reversing a string in Python is:")
    assert split_final_answer(unfenced)[1] == "```python\ndef reverse_string(s):\n    return s[::-1]\n```"


# The embedded model's reply to the tour's `masforge run cot --input "Write a Python function that reverses a
# string"` (2026-11-28): the function in the reasoning, then the output of its own example as the final answer.
_TOUR_REPLY = (
    "To reverse a string in Python, you can use slicing. Here's a step-by-step explanation of how to do it:\n\n"
    "1. **Understand the Task**: The task is to reverse a given string.\n\n"
    "2. **Use Slicing**: The syntax is `string[::-1]`.\n\n"
    "3. **Write the Function**: Here's how you can implement this in Python:\n\n"
    "```python\ndef reverse_string(input_string):\n    # Use slicing to reverse the string\n"
    "    reversed_string = input_string[::-1]\n    return reversed_string\n\n# Example usage\n"
    "input_str = \"Hello, World!\"\nreversed_str = reverse_string(input_str)\nprint(\"Final answer:\", reversed_str)\n"
    "```\n\n### Explanation of the Code:\n\n- **Slicing**: `input_string[::-1]` creates the reversed string.\n\n"
    "### Final Answer:\n\nFinal answer: The reversed string of \"Hello, World!\" is \"!dlroW ,olleH\".")


def test_run_cot_keeps_the_code_when_its_final_answer_states_the_example_output() -> None:
    system = compile_genome(load_seed("cot"), _client(_TOUR_REPLY))
    answer = system(question="Write a Python function that reverses a string").outputs["answer"]
    assert answer.startswith("The reversed string of \"Hello, World!\" is \"!dlroW ,olleH\".")
    assert "```python\ndef reverse_string(input_string):" in answer and answer.endswith("```")


def test_a_question_that_asks_for_no_code_keeps_its_stated_answer() -> None:
    reply = ("Let me check with a quick program.\n\n```python\ndef total(a, b):\n    return a + b\n```\n\n"
             "Final answer: 12")
    system = compile_genome(load_seed("cot"), _client(reply))
    assert system(question="Tom has 5 apples and buys 7 more. How many has he?").outputs["answer"] == "12"


@pytest.mark.parametrize(("question", "wanted"), [
    ("Write a Python function that reverses a string", True),
    ("Implement a class Stack with push and pop.", True),
    ("Write a python program to find the sum of a list.", True),
    ("Natalia sold clips to 48 of her friends in April. How many clips did she sell?", False),
    ("Write the answer as a fraction: what is 3/4 + 1/8?", False),
    ("A teacher wants to create a class of 24 students. How many groups of 6?", False),
    ("Define the function f(x) = 3x + 2. What is f(4)?", False),
    ("The gym will complete its 12-week program in May. How many days is that?", False),
    ("Class 1: 25 students. Class 2: 30 students. How many in all?", False),
    ("Find the shortest path in this maze:\n```\n#####\n#S..#\n#..G#\n#####\n```", False),
    ("What does this print?\ndef f(x):\n    return x * 2\nprint(f(3))", False),
])
def test_asks_for_code(question: str, wanted: bool) -> None:
    assert asks_for_code(question) is wanted


def test_a_word_problem_about_a_program_or_a_class_is_not_a_code_question() -> None:
    assert not asks_for_code("The after-school program costs $5 per class. How much do 4 classes cost?")


def test_code_in_the_reasoning_is_kept_out_of_a_value_answer_and_of_an_answer_with_its_own_code() -> None:
    from masforge.standalone.reading import keep_written_code

    draft = "```python\ndef bfs(grid):\n    return 5\n```"
    script = "```python\nprint(sum(int(x) for x in input().split()))\n```"
    assert keep_written_code(f"Try a search first.\n\n{draft}", script) == script
    assert keep_written_code(draft, "f = lambda s: s[::-1]") == "f = lambda s: s[::-1]"
    # a value question whose reasoning sketches code keeps its value (rg:maze, measured: 5 became 5 + the code)
    system = compile_genome(load_seed("cot"), _client(f"Let me think with a search.\n\n{draft}\n\nFinal answer: 5"))
    maze = "Navigate from 'S' to 'G' in the fewest steps:\n```\n#####\n#S..#\n#..G#\n#####\n```"
    assert system(question=maze).outputs["answer"] == "5"


# -- issue 39: answers lost when read, on a user's own .jsonl (cot on a unit-conversion file) -------------------
# The issue quotes how each reply ended; the run's answer cache was not kept, so each reply below is that ending as
# quoted, after working of the kind the model wrote before it.

# Ended in an output block: read as "output\n17" (target 17).
OUTPUT_BLOCK = ("To convert 1.7 centimetres to millimetres, multiply by 10, since 1 cm is 10 mm.\n\n"
                "1.7 x 10 = 17\n\nFinal answer:\n```output\n17\n```")
# The same without a label, the value printed as 6.0 (target 6).
OUTPUT_UNLABELLED = ("There are 1000 grams in a kilogram, so 6000 g is 6000 / 1000 kilograms.\n\n"
                     "```output\n6.0\n```")
# The number, then masforge's own instruction repeated: read as the instruction (target 180).
ECHOED = ("One minute has 60 seconds, so 3 minutes have 3 x 60 seconds.\n\n180\n"
          "On a new line, write \"Final answer:\" followed by the final answer in the form the task asks for.")


@pytest.mark.parametrize(("reply", "answer"), [(OUTPUT_BLOCK, "17"), (OUTPUT_UNLABELLED, "6.0"), (ECHOED, "180")])
def test_an_output_block_or_an_echoed_instruction_is_read_as_the_answer(reply: str, answer: str) -> None:
    assert split_final_answer(reply)[1] == answer  # what the system passes on
    assert split_final_answer(reply, stated=True)[1] == answer  # what a metric reads
    assert answer_readings(reply)[1] == answer


def test_the_three_misread_replies_score_as_meant_on_a_jsonl_file(tmp_path: Path) -> None:
    data = tmp_path / "units.jsonl"
    rows = [("Convert 1.7 cm to mm.", "17"), ("Convert 6000 g to kg.", "6"), ("Convert 3 minutes to seconds.", "180")]
    data.write_text("".join(json.dumps({"question": q, "answer": a}) + "\n" for q, a in rows * 4))
    task = Task.from_jsonl(data)
    for (question, target), reply in zip(rows, (OUTPUT_BLOCK, OUTPUT_UNLABELLED, ECHOED), strict=True):
        example = next(e for split in ("train", "validation", "test") for e in task.split(split)
                       if e.inputs["question"] == question)
        outputs = compile_genome(load_seed("cot"), _client(reply))(question=question).outputs
        assert task.score(example, outputs).value == 1.0, outputs
        assert outputs["answer"] in (target, "6.0")


@pytest.mark.parametrize("info", ["output", "text", "plaintext", "console", "OUTPUT"])
def test_output_blocks_with_an_info_string_are_read_as_their_content(info: str) -> None:
    assert split_final_answer(f"Working.\n\nFinal answer:\n```{info}\n42\n```")[1] == "42"
    console = "Running it:\n\n```console\n$ python convert.py\n2.5\n```"
    assert split_final_answer(console)[1] == "2.5"  # the command typed is not what it printed


@pytest.mark.parametrize("echo", [
    'On a new line, write "Final answer:" ...',
    'Then, on a new line, write "Final answer:" followed by the final answer in the form the task asks for. '
    "(a whole number)",
    "Think it through step by step.",
    "Final answer: followed by the final answer in the form the task asks for.",
])
def test_echoed_instruction_lines_of_the_templates_are_no_answer(echo: str) -> None:
    assert split_final_answer(f"3 x 60 = 180\n180\n{echo}", stated=True)[1] == "180"
    assert split_final_answer(f"Final answer: 180\n{echo}", stated=True)[1] == "180"


def test_lines_that_only_share_words_with_the_instructions_are_kept() -> None:
    for line in ("In the form the task asks for: 180", "Step by step, 180", "a new line"):
        assert split_final_answer(f"Working.\n{line}")[1] == line
    # an instruction quoted inside a code block is code, not an echo
    code = '```python\nprint("Think it through step by step.")\n```'
    assert split_final_answer(code)[1] == code


def test_code_answers_stay_code() -> None:
    function = "```python\ndef to_mm(cm):\n    return cm * 10\n```"
    assert split_final_answer(f"Here is the function.\n\n{function}")[1] == function
    assert split_final_answer(f"Final answer:\n{function}")[1] == function
    # a code question whose reply ends on the output of its own example keeps the function (plain adapter)
    reply = f"Here is the function.\n\n{function}\n\nRunning to_mm(1.7):\n```output\n17.0\n```"
    system = compile_genome(load_seed("cot"), _client(reply))
    answer = system(question="Write a Python function that converts centimetres to millimetres").outputs["answer"]
    assert answer.startswith("17.0") and answer.endswith(function)
    assert extract_code(answer, "to_mm").startswith("def to_mm(cm):")


def test_exact_match_compares_numbers_by_value() -> None:
    from masforge.evaluators.text_metrics import exact_match

    assert exact_match("6.0", "6") == 1.0 and exact_match("1,500", "1500") == 1.0 and exact_match("-4", "-4.0") == 1.0
    assert exact_match("6.0", "60") == 0.0  # dropping the full stop as punctuation made these equal
    assert exact_match("Paris", ["Rome", "paris"]) == 1.0 and exact_match("6 apples", "6") == 0.0
