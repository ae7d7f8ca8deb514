"""The ``run_examples`` aggregation: keep the candidate program that passes the examples its task states.

A coding task usually shows how its function behaves: an ``assert`` line ("Your code should pass this test:
assert f(3) == 15"), doctest lines (">>> f(3)" then "15") or an example in prose ("f(3) ==> 15", "f(3) returns 15",
"Input: n = 3" then "Output: 15": :mod:`.prose_examples`). Those are part of the question every candidate
sees, not hidden tests, so a system may run them, as a programmer would before handing in code. Each candidate's
code runs with the stated examples in the ``python`` tool (masforge's sandbox; the child process of an exported
module), one ``try`` per example, and counts the examples it passes. Candidates that pass the most examples win;
the vote among them (or among all, when the task states none) picks the answer.
"""

from __future__ import annotations

import ast
import io
import json
import re
import tokenize
from collections.abc import Callable

from masforge.standalone.prose_examples import literal_args, literal_prefix, prose_examples, worked_value

EXAMPLE_PASSED = "MASFORGE-EXAMPLES-PASSED"
"""What the check program's last line starts with, followed by the numbers of the examples the candidate passed."""

_ASSERT = re.compile(r"^\s*(assert\s+.+?)\s*$")
_DOCTEST = re.compile(r"^\s*>>>\s?(.*)$")
# "f(3) ==> 15", "f(3) ➞ 15", "f(3) == 15", "f(3)   # returns 15": how docstrings show examples in prose.
_SHOWN = re.compile(r"^\s*(?:assert\s+)?([A-Za-z_][\w.]*\(.*\))\s*(?:==>|=>|➞|->|==|=|#\s*returns?)\s*(\S.*?)\s*$")
_IMPORT = re.compile(r"^\s*(from\s+[\w.]+\s+import\s+[^#]+|import\s+[\w., ]+)\s*$")
_PYTHON_BLOCK = re.compile(r"```[ \t]*(?:python|py|python3)?[ \t]*\n(.*?)(?:```|$)", re.DOTALL | re.IGNORECASE)

# A doctest's expected output compared the way a reader would: the value's repr or str, or the value the
# expected text evaluates to (so "[1, 2]" and "(1, 2)" stay different but "1.50" equals 1.5). Prose writes
# booleans in lower case too ("f(8, 2) => true"): True is "true" there.
_SAME = '''
def __masforge_same(value, expected):
    if repr(value) == expected or str(value) == expected:
        return True
    if isinstance(value, bool) and expected in ("true", "false"):
        return str(value).lower() == expected
    try:
        return value == eval(expected, {})
    except Exception:
        return False
'''


def stated_examples(question: str) -> list[str]:
    """The checks a question states, as Python statements: its ``assert`` lines, doctests and prose examples."""
    checks: list[str] = []
    lines = question.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        doctest = _DOCTEST.match(line)
        if doctest:
            call = _without_comment(doctest.group(1)).strip()
            expected: list[str] = []
            i += 1
            while i < len(lines) and not _output_ends(lines[i]):
                expected.append(lines[i].strip())
                i += 1
            if call and expected:
                checks.append(f"assert __masforge_same({call}, {' '.join(expected)!r})")
            elif call and " == " in call:
                checks.append(f"assert {call}")  # ">>> f(x) == y" shown without its "True"
            elif call and not call.startswith(("print(", "import ", "from ")):
                checks.append(call)  # a call shown without output returns None; it must at least run
            continue
        plain = _ASSERT.match(line)
        shown = _SHOWN.match(line)
        if plain and _compiles(plain.group(1)):
            checks.append(plain.group(1))  # the task's own assert, exactly as written
        elif shown and _compiles(shown.group(1)) and literal_args(shown.group(1)):  # "f(abc) => 1": quotes lost
            value = worked_value(shown.group(2))  # "f(x) == 1 + 9 = 10" shows 10
            if _readable_value(value, shown.group(1)):
                checks.append(f"assert __masforge_same({shown.group(1)}, {value!r})")
        i += 1
    shown = " ".join(checks)
    checks += [check for call, check in prose_examples(question) if call not in shown]
    return [c for c in dict.fromkeys(checks) if _compiles(c)]


def _readable_value(value: str, call: str) -> bool:
    """Whether the value shown for ``call`` can be compared with an answer's: a literal, or text its ``str``
    may equal ("hello", "true"). Not a rule ("f(n) => f(n-1) + f(n-2)") nor a broken string ('""abc"'):
    read as checks, those fail every answer, right ones too, and a test gate would never let a right one pass."""
    if literal_prefix(value) is not None:
        return True
    name = call.split("(", 1)[0].split(".")[-1]
    return f"{name}(" not in value.replace(" (", "(") and not value.startswith(("'", '"'))


def _without_comment(source: str) -> str:
    """A line of code without its trailing ``# comment`` (a ``#`` inside a string stays)."""
    try:
        for tok in tokenize.generate_tokens(io.StringIO(source).readline):
            if tok.type == tokenize.COMMENT:
                return source[:tok.start[1]]
    except (tokenize.TokenError, SyntaxError):
        pass
    return source


def question_imports(question: str) -> list[str]:
    """Import lines the question's own code carries (HumanEval's ``from typing import List``)."""
    return [m.group(1).strip() for line in question.splitlines() if (m := _IMPORT.match(line))]


def answer_code(answer: str) -> str:
    """The program in an answer: its fenced code blocks joined, or the whole text when it has none."""
    blocks = [b.strip() for b in _PYTHON_BLOCK.findall(answer) if b.strip()]
    return "\n\n".join(blocks) if blocks else answer.strip()


def check_program(code: str, checks: list[str], imports: list[str], marker: str = EXAMPLE_PASSED,
                  explain: bool = False) -> str:
    """A program that runs ``code``, then each check in its own ``try``, and prints which ones passed on its last
    line (last, because the tool keeps only the end of a long output), after ``marker``.

    ``explain``: the last line is ``marker`` and a JSON object instead, ``{"passed": [...], "failed": {n: why}}``,
    where ``why`` is the exception's type and message and, for a failed comparison, the value the code gave (the
    first :data:`EXPLAINED_FAILURES` failures, each cut to a line; read it with :func:`read_check_report`)."""
    parts = [*imports, _SAME, _EXPLAIN if explain else "", code, "", "__masforge_passed = []",
             "__masforge_failed = {}"]
    for n, check in enumerate(checks):
        if explain:
            probe, test = _probed(check)
            body = "\n".join("    " + line for line in [f"__masforge_got = {probe}", test] if probe) or \
                "\n".join("    " + line for line in check.splitlines())
            parts.append(f"__masforge_got = __masforge_unset\ntry:\n{body}\n    __masforge_passed.append({n})\n"
                         f"except BaseException as __masforge_exc:\n"
                         f"    __masforge_failed[{n}] = __masforge_why(__masforge_exc, __masforge_got)")
        else:
            body = "\n".join("    " + line for line in check.splitlines())
            parts.append(f"try:\n{body}\n    __masforge_passed.append({n})\nexcept BaseException:\n    pass")
    if explain:
        parts.append(f"print()\nprint({marker!r}, __masforge_json.dumps({{'passed': __masforge_passed, "
                     f"'failed': __masforge_failed}}))")
    else:
        parts.append(f"print()\nprint({marker!r}, *__masforge_passed)")
    return "\n".join(parts)


EXPLAINED_FAILURES = 8
"""How many failed checks an explaining check program describes (the rest only count)."""

# Why a check failed, in one short line: the exception and, when a comparison failed, what the code returned.
_EXPLAIN = f'''
import json as __masforge_json

__masforge_unset = object()


def __masforge_why(exc, got):
    if len(__masforge_failed) >= {EXPLAINED_FAILURES}:
        return ""
    try:
        text = f"{{type(exc).__name__}}: {{exc}}" if str(exc) else type(exc).__name__
    except BaseException:
        text = type(exc).__name__
    if got is not __masforge_unset:
        try:
            shown = repr(got)
        except BaseException:
            shown = "<unprintable>"
        text += f" (got {{shown[:120]}})"
    text = " ".join(text.split())
    return text if len(text) <= 200 else text[:197] + "..."
'''


def _probed(check: str) -> tuple[str, str]:
    """``(value, test)`` for a check that compares one value, ``assert f(x) == y`` or a doctest's
    ``assert __masforge_same(f(x), 'y')``: the value alone and the check rewritten to compare
    ``__masforge_got``, so a failure can say what the code returned. ``("", "")`` for any other check."""
    try:
        tree = ast.parse(check)
    except (SyntaxError, ValueError):
        return "", ""
    if len(tree.body) != 1 or not isinstance(tree.body[0], ast.Assert) or tree.body[0].msg is not None:
        return "", ""
    test = tree.body[0].test
    if isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], ast.Eq):
        value, rest = test.left, test.comparators[0]
        rewritten = f"assert __masforge_got == ({ast.get_source_segment(check, rest)})"
    elif isinstance(test, ast.Call) and isinstance(test.func, ast.Name) and test.func.id == "__masforge_same" \
            and len(test.args) == 2 and not test.keywords:
        value = test.args[0]
        rewritten = f"assert __masforge_same(__masforge_got, {ast.get_source_segment(check, test.args[1])})"
    else:
        return "", ""
    source = ast.get_source_segment(check, value)
    return (f"({source})", rewritten) if source and "\n" not in source else ("", "")


def read_check_report(output: str, marker: str, checks: int) -> tuple[set[int], dict[int, str]] | None:
    """What an explaining check program's last ``marker`` line says: the numbers of the checks that passed and
    why others failed; None when the program never got there (it crashed, timed out or printed no report)."""
    lines = [line for line in output.splitlines() if line.startswith(marker + " ")]
    if not lines:
        return None
    try:
        data = json.loads(lines[-1][len(marker) + 1:])
        passed = {int(n) for n in data["passed"] if 0 <= int(n) < checks}
        failed = {int(n): str(why) for n, why in data["failed"].items() if 0 <= int(n) < checks}
    except (ValueError, KeyError, TypeError, AttributeError):
        return None
    return passed, failed


def examples_passed(output: str, checks: int) -> int:
    """How many distinct checks the program's last report line says passed (0 when it never got there)."""
    lines = [line for line in output.splitlines() if line.startswith(EXAMPLE_PASSED)]
    if not lines:
        return 0
    numbers = {int(n) for n in re.findall(r"\d+", lines[-1][len(EXAMPLE_PASSED):])}
    return len({n for n in numbers if n < checks})


def passed_counts(answers: list[str], question: str, run_python: Callable[[str], str]) -> list[int] | None:
    """Examples each answer passes (None when the question states none: there is nothing to run)."""
    checks = stated_examples(question)
    if not checks:
        return None
    imports = question_imports(question)
    counts = []
    for answer in answers:
        code = answer_code(answer)
        counts.append(examples_passed(run_python(check_program(code, checks, imports)), len(checks)) if code else 0)
    return counts


def _output_ends(line: str) -> bool:
    """A doctest's output runs to a blank line, the next example, a heading ("Examples:") or the docstring's end."""
    text = line.strip()
    return (not text or bool(_DOCTEST.match(line) or _SHOWN.match(line)) or text.endswith(":")
            or text.startswith(('"""', "'''")))


def _compiles(source: str) -> bool:
    try:
        compile(source, "<example>", "exec")
    except (SyntaxError, ValueError):
        return False
    return True
