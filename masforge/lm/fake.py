"""The fake LM behind ``--lm fake``: a deterministic offline stand-in for a language model.

:func:`fake_reply` answers any dspy ChatAdapter or plain-chat prompt in the right format without a model: it
finds the requested output fields and fills them deterministically (arithmetic questions get computed
answers, so small end-to-end checks are meaningful). Scripted replies for tests are in
:mod:`masforge.testing`.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Sequence
from typing import Any

_OUTPUT_SECTION = re.compile(r"Your output fields are:\n(.*?)(?:\n(?:All interactions|In adhering)|\Z)", re.S)
_FIELD_LINE = re.compile(r"^\d+\.\s+`(\w+)`\s*\(([^)]*)\)", re.M)
_INPUT_BLOCK = re.compile(r"\[\[ ## (\w+) ## \]\]\n(.*?)(?=\n\n\[\[ ## |\n\nRespond with|\Z)", re.S)
_ARITH = re.compile(r"(-?\d+(?:\.\d+)?\s*(?:[-+*/]\s*-?\d+(?:\.\d+)?\s*)+)")


def output_fields(messages: Sequence[dict[str, Any]]) -> list[tuple[str, str]]:
    """(name, type) of the output fields a ChatAdapter prompt asks for."""
    system = next((str(m.get("content", "")) for m in messages if m.get("role") == "system"), "")
    m = _OUTPUT_SECTION.search(system)
    if not m:
        return []
    return [(name, typ.strip()) for name, typ in _FIELD_LINE.findall(m.group(1))]


def input_values(messages: Sequence[dict[str, Any]]) -> dict[str, str]:
    """Field values of the last user message."""
    user = next((str(m.get("content", "")) for m in reversed(messages) if m.get("role") == "user"), "")
    return {k: v.strip() for k, v in _INPUT_BLOCK.findall(user)}


def arithmetic_answer(text: str) -> str | None:
    """The value of the first arithmetic expression in ``text`` that computes, or None."""
    from masforge.sandbox.tools import calculate

    for expr in _ARITH.findall(text):
        try:
            return calculate(expr)
        except (ArithmeticError, ValueError, SyntaxError):  # not an expression it computes: try the next
            continue
    return None  # anything else is a fault, raised: a fake that answered otherwise would be cached for good


def fake_reply(messages: Sequence[dict[str, Any]], info: dict[str, Any] | None = None) -> str:
    """A well-formed ChatAdapter reply: deterministic in the prompt and the sample index."""
    info = info or {}
    fields = output_fields(messages)
    inputs = input_values(messages)
    first = next(iter(inputs.values()), "")
    digest = hashlib.sha256((first + str(info.get("sample", 0))).encode()).hexdigest()[:6]
    if not fields:
        return _plain_reply(messages, digest)
    parts = []
    # ReAct steps: call the first tool once, then finish (so react agents run end to end offline).
    user = next((str(m.get("content", "")) for m in reversed(messages) if m.get("role") == "user"), "")
    acted = "## observation_" in user
    tool_choice = "finish"
    for name, typ in fields:
        if name == "next_tool_name":
            options = re.findall(r"'([^']+)'", typ)
            tool_choice = "finish" if acted else next((o for o in options if o != "finish"), "finish")
    for name, typ in fields:
        if name == "next_tool_name":
            value = tool_choice
        elif name == "next_tool_args":
            arg = _ARITH.findall(first)[0].strip() if _ARITH.findall(first) else first[:200]
            value = "{}" if tool_choice == "finish" else json.dumps({"arg": arg})
        elif name in ("reasoning", "rationale", "critique", "feedback", "plan", "next_thought"):
            value = f"Considering the task step by step ({digest})."
        elif typ.startswith(("int", "float")):
            value = arithmetic_answer(first) or "0"
        elif typ.startswith("bool"):
            value = "True"
        elif name in ("code", "program", "python_code", "solution_code"):
            value = "```python\nprint(1)\n```"
        else:
            value = arithmetic_answer(first) or f"{name} to: {first[:60]}"
        parts.append(f"[[ ## {name} ## ]]\n{value}")
    return "\n\n".join(parts) + "\n\n[[ ## completed ## ]]"


_PLAIN_SECTION = re.compile(r"^([A-Z][\w ]*?): ?(.*)$", re.M)


def _plain_reply(messages: Sequence[dict[str, Any]], digest: str) -> str:
    """A reply to a plain-chat prompt (the ``plain`` adapter or a raw ``llm()`` call)."""
    user = next((str(m.get("content", "")) for m in reversed(messages) if m.get("role") == "user"), "")
    answer = arithmetic_answer(user) or f"fake answer {digest}"
    if "Reply with these parts" in user:
        form = user.rsplit("Reply with these parts", 1)[1].split("\n", 1)[-1]
        lines = []
        for name, hint in _PLAIN_SECTION.findall(form):
            if hint.startswith("(one of:"):
                options = [o.strip() for o in hint[len("(one of:"):].rstrip(")").split(",")]
                acted = "observation" in user.lower() and "Trajectory:\n\n" not in user
                value = "finish" if acted or "finish" not in options else next(o for o in options if o != "finish")
            elif hint.startswith("(yes or no)"):
                value = "yes"
            elif hint.startswith("(a JSON object)"):
                value = "{}"
            else:
                value = answer
            lines.append(f"{name}: {value}")
        return "\n".join(lines)
    if "Final answer:" in user:
        return f"Considering the task step by step ({digest}).\nFinal answer: {answer}"
    return f"fake reply {digest}"  # a bare prompt: the reply's length is what tests of accounting rely on
