"""Examples shown in prose count as stated checks (HumanEval states a fifth of its examples this way)."""

from __future__ import annotations

import pytest

from masforge.standalone.examples import check_program, examples_passed, stated_examples
from masforge.standalone.prose_examples import defined_functions, literal_prefix, prose_examples


def _question(body: str, signature: str = "def f(s, c):") -> str:
    return f'```python\n{signature}\n    """Do the thing.\n{body}\n    """\n```'


def _run(code: str, checks: list[str]) -> int:
    """How many checks ``code`` passes, run in this process (test code, not a candidate's)."""
    import contextlib
    import io

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(check_program(code, checks, []), {})  # noqa: S102 - the program is built from this test's own text
    return examples_passed(out.getvalue(), len(checks))


@pytest.mark.parametrize("line, call, value", [
    ("    encrypt('hi') returns 'lm'", "encrypt('hi')", "'lm'"),
    ("    encrypt('gf') should return 'kj'.", "encrypt('gf')", "'kj'"),
    ("    * encrypt('et') -> 'ix'", "encrypt('et')", "'ix'"),
    ("    for encrypt('ab') == 'ef'", "encrypt('ab')", "'ef'"),
    ('    encrypt("x.y") # => \'No\' (the name should start with a letter)', 'encrypt("x.y")', "'No'"),
])
def test_a_shown_call_of_the_defined_function_is_a_check(line: str, call: str, value: str) -> None:
    checks = prose_examples(_question(line, "def encrypt(s):"))
    assert checks == [(call, f"assert __masforge_same({call}, {value!r})")]


def test_inputs_by_parameter_name_with_the_result_on_the_same_line_or_the_next() -> None:
    q = _question('    For s = "abcde", c = "ae", the result should be (\'bcd\',False)\n'
                  "    Input: s = 'ab', c = 'b'\n    Output: ('a', False) # b removed")
    assert [call for call, _ in prose_examples(q)] == ["f(s='abcde', c='ae')", "f(s='ab', c='b')"]
    assert [check.rsplit("), ", 1)[1] for _, check in prose_examples(q)] == ['"(\'bcd\', False)")', '"(\'a\', False)")']


def test_a_bare_input_fits_a_function_of_one_parameter() -> None:
    q = _question("    Example 1:\n        Input: [4,2,3]\n        Output: [2, 1]", "def pluck(arr):")
    assert prose_examples(q) == [("pluck([4, 2, 3])", "assert __masforge_same(pluck([4, 2, 3]), '[2, 1]')")]


def test_what_cannot_be_read_as_a_literal_example_is_left_out() -> None:
    q = _question("    helper(3) returns 4\n"  # not a function the question defines
                  "    f(x) returns the sum\n"  # the argument is no literal
                  "    f(1, 2) returns something big\n"  # no literal value
                  "    Input: s = 'a'\n    Output: see above")  # a parameter missing, and no value
    assert prose_examples(q) == []


def test_the_checks_pass_a_right_answer_and_fail_a_wrong_one() -> None:
    q = _question("    count_upper('aBCdEf') returns 1\n    count_upper('dBBE') returns 0", "def count_upper(s):")
    checks = stated_examples(q)
    assert len(checks) == 2
    right = "def count_upper(s):\n    return sum(1 for i, ch in enumerate(s) if i % 2 == 0 and ch in 'AEIOU')"
    wrong = "def count_upper(s):\n    return sum(ch.isupper() for ch in s)"
    assert (_run(right, checks), _run(wrong, checks)) == (2, 0)


def test_a_doctest_with_a_comment_after_the_call_is_read() -> None:
    q = '```python\ndef g(xs):\n    """\n    >>> round(g([1, 2]), 2) # f(x) = 1 + 2x\n    -0.5\n    """\n```'
    assert stated_examples(q) == ["assert __masforge_same(round(g([1, 2]), 2), '-0.5')"]


def test_a_call_the_older_forms_already_read_is_not_checked_twice() -> None:
    q = _question("    >>> f('a', 'b')\n    'x'\n\n    f('a', 'b') returns 'x'")
    assert stated_examples(q) == ["assert __masforge_same(f('a', 'b'), \"'x'\")"]


def test_helpers() -> None:
    assert defined_functions("def a(x, y=1, *, z):\n    pass\ndef b():") == {"a": ["x", "y", "z"], "b": []}
    assert literal_prefix("16.") == "16"
    assert literal_prefix("[1, 2] since 1 < 2") == "[1, 2]"
    assert literal_prefix("24 # sum of 21 + 3") == "24"
    assert literal_prefix("the sum") is None


def test_a_boolean_written_in_lower_case_is_the_boolean() -> None:
    checks = stated_examples(_question("    is_power(8, 2) => true\n    is_power(3, 2) => false",
                                       "def is_power(x, n):"))
    right = "def is_power(x, n):\n    return x in [n ** k for k in range(x + 1)]"
    assert len(checks) == 2 and _run(right, checks) == 2
    assert _run("def is_power(x, n):\n    return x not in [n ** k for k in range(x + 1)]", checks) == 0


def test_a_rule_or_an_unquoted_argument_is_not_read_as_an_example() -> None:
    """Read as checks, these fail every answer, right ones too, and a test gate never lets a right answer pass."""
    rule = stated_examples(_question("    fib4(n) -> fib4(n-1) + fib4(n-2)\n    fib4(5) -> 4", "def fib4(n):"))
    assert rule == ["assert __masforge_same(fib4(5), '4')"]
    assert stated_examples(_question("    is_happy(abcd) => True\n    is_happy(aa) => False", "def is_happy(s):")) == []
    typo = stated_examples(_question('    find_max(["a", "bb"]) == ""bb"', "def find_max(words):"))
    assert typo == []


def test_a_worked_value_is_the_one_after_the_last_equals_sign() -> None:
    checks = prose_examples(_question("    tri(2) = 1 + (2 / 2) = 2", "def tri(n):"))
    assert checks == [("tri(2)", "assert __masforge_same(tri(2), '2')")]


def test_an_unquoted_word_is_still_compared_as_text() -> None:
    checks = stated_examples(_question("    swap('ab') => ba", "def swap(s):"))
    assert checks == ["assert __masforge_same(swap('ab'), 'ba')"]
    assert _run("def swap(s):\n    return s[::-1]", checks) == 1
