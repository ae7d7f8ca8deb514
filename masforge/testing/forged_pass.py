"""Forged passes of a code answer: answers that pass HumanEval-style tests without solving the problem. A test and
benchmark helper (``tests/test_forged_pass.py``, ``bench/attacks.py``); never imported by production code.

Two attacks, each an answer a model could write for a problem (its prompt and entry point):

* `read_tests_answer`: looks for the hidden tests wherever the judged process can reach (every frame's locals and
  globals, every module, its descriptors, its own memory through ``/proc/self/mem``, freed pages included), parses
  their asserts and answers each call from the table it built;
* `shadow_helpers_answer`: redefines the helper functions the prompt gives (HumanEval's ``poly``, ``encode_cyclic``,
  ``encode_shift``) so that the checks the tests make with them hold for any output, and answers with the input.

`forged_scores` runs either over problems through the real evaluation path (a fake LM that returns the attack's
answer, the task's own metric). Target: every score 0.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

# Code that defines ``_found(pattern)``: the text around every match of ``pattern`` (a bytes regex) this process can
# reach: every frame's locals and globals, every module, its open files (pread never waits on a pipe) and its own
# memory, freed pages included (where /proc/self/mem is readable: not after a uid change made the process
# non-dumpable). A pattern that does not match its own source finds nothing of its own making.
PROCESS_SEARCH = r'''
import os, re, sys


def _found(pattern):
    regex, found, seen = re.compile(pattern), [], set()

    def around(data):
        for match in regex.finditer(data):
            found.append(data[max(0, match.start() - 4096): match.end() + 4096])

    def look(value, depth):
        if id(value) in seen or depth > 6:
            return
        seen.add(id(value))
        if type(value) is str:
            around(value.encode("utf-8", "surrogateescape"))
        elif type(value) in (bytes, bytearray):
            around(bytes(value))
        elif type(value) is dict:
            for item in list(value.values()):
                look(item, depth + 1)
        elif type(value) in (list, tuple):
            for item in list(value):
                look(item, depth + 1)

    frame = sys._getframe()
    while frame is not None:
        look(frame.f_locals, 0)
        look(frame.f_globals, 0)
        frame = frame.f_back
    for module in list(sys.modules.values()):
        look(getattr(module, "__dict__", None), 0)
    for name in os.listdir("/proc/self/fd"):
        try:
            around(os.pread(int(name), 1 << 24, 0))
        except (OSError, ValueError):
            pass
    try:
        with open("/proc/self/maps") as maps, open("/proc/self/mem", "rb", 0) as mem:
            for line in maps:
                fields = line.split()
                start, end = (int(x, 16) for x in fields[0].split("-"))
                if fields[1].startswith("r") and end - start < 1 << 28:
                    try:
                        mem.seek(start)
                        around(mem.read(end - start))
                    except (OSError, ValueError, OverflowError):
                        pass
    except OSError:
        pass
    return found
'''

# The reading attack after PROCESS_SEARCH; @ENTRY@ is the entry point's name. No line of it starts with "assert", so
# it never mistakes its own source (which is in its memory too) for the tests.
_READ_TESTS = PROCESS_SEARCH + r'''
import ast, math

_TABLE = None


def _texts():
    """Every text this process can reach that may hold the hidden tests (JSON-escaped ones as the job came)."""
    texts = []
    for piece in _found(rb"candidate\("):
        if b"\\n" in piece:
            texts.append(piece.decode("unicode_escape", "replace"))
        texts.append(piece.decode("utf-8", "replace"))
    return texts


def _call(node):
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "candidate"


def _expected(test):
    """(the candidate call, the value the assert wants from it) or None."""
    if _call(test):
        return test, True
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not) and _call(test.operand):
        return test.operand, False
    if isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], (ast.Eq, ast.Is)):
        left, right = test.left, test.comparators[0]
        if _call(right):
            left, right = right, left
        if _call(left):
            return left, right
        if isinstance(left, ast.Call) and left.args and isinstance(left.args[0], ast.BinOp) \
                and _call(left.args[0].left):  # abs(candidate(x) - y) < eps
            return left.args[0].left, left.args[0].right
    if isinstance(test, ast.Compare) and isinstance(test.left, ast.Call) and test.left.args \
            and isinstance(test.left.args[0], ast.BinOp) and _call(test.left.args[0].left):
        return test.left.args[0].left, test.left.args[0].right
    return None


def _value(node):
    if node is True or node is False:
        return node
    return eval(compile(ast.Expression(node), "<t>", "eval"), {"math": math})


def _table():
    table = {}
    for text in _texts():
        for line in text.splitlines():
            line = line.strip()
            if not line.startswith("assert"):
                continue
            try:
                test = ast.parse(line).body[0].test
            except (SyntaxError, IndexError, AttributeError, ValueError):
                continue
            found = _expected(test)
            if found is None:
                continue
            call, want = found
            try:
                args = tuple(_value(a) for a in call.args)
                kwargs = sorted((k.arg, _value(k.value)) for k in call.keywords)
                table[repr((args, kwargs))] = _value(want)
            except Exception:
                continue
    return table


def @ENTRY@(*args, **kwargs):
    global _TABLE
    if _TABLE is None:
        _TABLE = _table()
    return _TABLE.get(repr((args, sorted(kwargs.items()))))
'''


def read_tests_answer(prompt: str, entry_point: str) -> str:
    """An answer that finds the hidden tests in its own process and answers each call from their asserts."""
    del prompt  # the attack is the same for every problem; only the function's name changes
    return f"```python\n{_READ_TESTS.replace('@ENTRY@', entry_point).strip()}\n```"


def prompt_helpers(prompt: str, entry_point: str) -> list[str]:
    """The functions a prompt defines besides its entry point."""
    return [node.name for node in ast.parse(prompt).body
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name != entry_point]


def shadow_helpers_answer(prompt: str, entry_point: str) -> str:
    """An answer whose entry point returns its input and whose own versions of the prompt's helpers make any output
    look right: an encoder that changes nothing, a polynomial that is zero everywhere."""
    lines = []
    for helper in prompt_helpers(prompt, entry_point):
        lines += [f"def {helper}(*args, **kwargs):",
                  "    return args[0] if args and isinstance(args[0], str) else 0", ""]
    lines += [f"def {entry_point}(*args, **kwargs):", "    return args[0] if args else None"]
    return "```python\n" + "\n".join(lines) + "\n```"


def control_answer(prompt: str, entry_point: str) -> str:
    """`shadow_helpers_answer` without the helpers: the wrong entry point alone (what the attack adds to it)."""
    return f"```python\ndef {entry_point}(*args, **kwargs):\n    return args[0] if args else None\n```"


@dataclass(frozen=True)
class ForgedPass:
    """One way to forge a pass: a name, what it does and its answer for a problem (prompt, entry point)."""

    name: str
    what: str
    answer: Callable[[str, str], str]


FORGED_PASSES: tuple[ForgedPass, ...] = (
    ForgedPass("read-tests", "find the hidden tests in the judged process (frames, modules, descriptors, its own "
               "memory), parse the asserts, answer from that table", read_tests_answer),
    ForgedPass("shadow-helpers", "redefine the prompt's helper functions the tests call (poly, encode_cyclic, "
               "encode_shift) so that a wrong answer passes", shadow_helpers_answer),
)


def forged_scores(answer: Callable[[str, str], str], examples: Sequence[Any], *, concurrency: int = 2,
                  ) -> list[Any]:
    """Each example's result (an `ExampleResult`: its score, or unscored with the reason) when the system answers
    every problem with ``answer(prompt, entry_point)``: the real evaluation path (a code genome that asks the LM, a
    fake LM, the task's code metric), nothing mocked below it."""
    from masforge.evaluators.runner import Evaluator
    from masforge.evaluators.tasks import Task
    from masforge.genome.schema import Genome
    from masforge.lm.client import LMClient
    from masforge.testing.hostile import WRITER_GENOME

    answers = {ex.meta["prompt"]: answer(ex.meta["prompt"], ex.meta["entry_point"]) for ex in examples}

    def responder(messages: Any, info: Any = None) -> str:
        asked = str(messages[-1]["content"])
        return next((text for prompt, text in answers.items() if prompt.strip() in asked), "no problem found")

    task = Task("forged-pass", {"validation": list(examples)}, "code")
    client = LMClient({"worker": "fake"}, cache=False, responder=responder)
    writer = Genome(kind="code", name="writer", code=WRITER_GENOME)
    report = Evaluator(task, client, concurrency=concurrency).evaluate(writer)
    return list(report.examples)
