"""Metrics of code answers: the code in a model reply, and its run against the task's tests.

Code is executed only through `masforge.sandbox.runner.run_tests` (an isolated, killable subprocess)."""

from __future__ import annotations

import ast
import re
from typing import Any

from masforge.errors import SandboxError
from masforge.evaluators.answer_reading import answer_of, as_text
from masforge.evaluators.example import Example
from masforge.evaluators.score import Score
from masforge.standalone.reading import unfenced_code

_FENCE = re.compile(r"```[ \t]*([\w+#.-]*)[^\n]*\n(.*?)(?:```|\Z)", re.DOTALL)


def extract_code(text: Any, entry_point: str | None = None) -> str:
    """The code in a model reply, wherever the model put it: the last ```python fenced block, else the last fenced
    block of any (or no) language; with ``entry_point``, the last block that defines it when the last one does
    not (a block of example calls after the function). Without a fence, the whole text if it is a program, else
    the program inside the prose (:func:`unfenced_code`). An unclosed final fence runs to the end."""
    if text is None:
        return ""
    text = str(text)
    blocks = [(lang.lower(), body) for lang, body in _FENCE.findall(text)]
    python = [body for lang, body in blocks if lang in ("python", "py", "python3", "py3")]
    chosen = python or [body for _, body in blocks]
    if chosen:
        if entry_point and not _defines(chosen[-1], entry_point):
            defining = [b for b in chosen if _defines(b, entry_point)]
            if defining:
                return defining[-1].strip("\n")
        return chosen[-1].strip("\n")
    try:
        ast.parse(text)
    except SyntaxError:
        return unfenced_code(text) or text.strip("\n")
    return text.strip("\n")


def _defines(code: str, name: str) -> bool:
    return re.search(rf"^\s*(?:async\s+)?def\s+{re.escape(name)}\s*\(", code, re.MULTILINE) is not None


def code_pass(
    answer: Any,
    test_code: str,
    *,
    entry_point: str | None = None,
    prompt: str | None = None,
    timeout_s: float = 10.0,
) -> Score:
    """Run the code in `answer` against `test_code` in the sandbox; 1.0 if every test passes.

    HumanEval style: with `entry_point` and `prompt`, an answer that does not define the entry
    point is treated as a completion and appended to the prompt; a full function is appended after
    the prompt (so the prompt's imports and helpers exist), and `check(entry_point)` is called when
    the tests define `check`. The tests take only the entry point from the answer: the prompt's
    helpers they call (HumanEval's ``poly``, ``encode_cyclic``) are the prompt's, run by the judge,
    whatever the answer redefines.
    """
    code = extract_code(answer, entry_point)
    if not code.strip():
        return Score(0.0, {"error": "no code found in the answer", "error_kind": "no_code"})
    try:
        from masforge.sandbox.runner import run_tests  # lazy: only code tasks need the sandbox
    except ImportError as exc:
        raise SandboxError(f"code metrics need masforge.sandbox.runner, which failed to import: {exc}") from exc
    program = code
    if prompt is not None and entry_point:
        if _defines(code, entry_point):
            program = prompt.rstrip("\n") + "\n\n\n" + code
        else:
            program = prompt + code
    tests = test_code
    if entry_point and re.search(r"^def check\(", test_code, re.MULTILINE):
        tests = f"{test_code}\n\ncheck({entry_point})\n"
    result = run_tests(program, tests, timeout_s=timeout_s, task_code=prompt if entry_point else None,
                       answer_names=[entry_point] if entry_point else None)
    if result.ok:
        return Score(1.0, {"passed": True})
    return Score(
        0.0,
        {
            "passed": False,
            "error": result.error,
            "error_kind": result.error_kind,
            "traceback": result.traceback,
        },
    )


def metric_code(example: Example, outputs: dict[str, Any]) -> Score:
    """Code: runs the answer against `example.meta["test"]` in the sandbox (see `code_pass`)."""
    return code_pass(
        as_text(answer_of(outputs)),
        example.meta["test"],
        entry_point=example.meta.get("entry_point"),
        prompt=example.meta.get("prompt"),
        timeout_s=float(example.meta.get("timeout_s", 10.0)),
    )
