"""Deterministic stand-ins for language models, used by tests, benchmarks and ``--lm fake``.

:func:`fake_reply` answers any dspy ChatAdapter prompt in the right format without a model: it finds the
requested output fields and fills them deterministically (arithmetic questions get computed answers, so
small end-to-end checks are meaningful). :class:`ScriptedResponder` replays given replies in order.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
from collections.abc import Callable, Sequence
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


def _arithmetic(text: str) -> str | None:
    from masforge.tools import calculate

    for expr in _ARITH.findall(text):
        try:
            return calculate(expr)
        except Exception:
            continue
    return None


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
            value = _arithmetic(first) or "0"
        elif typ.startswith("bool"):
            value = "True"
        elif name in ("code", "program", "python_code", "solution_code"):
            value = "```python\nprint(1)\n```"
        else:
            value = _arithmetic(first) or f"{name} to: {first[:60]}"
        parts.append(f"[[ ## {name} ## ]]\n{value}")
    return "\n\n".join(parts) + "\n\n[[ ## completed ## ]]"


_PLAIN_SECTION = re.compile(r"^([A-Z][\w ]*?): ?(.*)$", re.M)


def _plain_reply(messages: Sequence[dict[str, Any]], digest: str) -> str:
    """A reply to a plain-chat prompt (the ``plain`` adapter or a raw ``llm()`` call)."""
    user = next((str(m.get("content", "")) for m in reversed(messages) if m.get("role") == "user"), "")
    answer = _arithmetic(user) or f"fake answer {digest}"
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


class ScriptedResponder:
    """Returns ``replies`` in order (then repeats the last); a callable reply is called with the messages."""

    def __init__(self, replies: Sequence[str | Callable[[Sequence[dict[str, Any]]], str]]) -> None:
        if not replies:
            raise ValueError("ScriptedResponder needs at least one reply")
        self.replies = list(replies)
        self.calls: list[Sequence[dict[str, Any]]] = []
        self._lock = threading.Lock()

    def __call__(self, messages: Sequence[dict[str, Any]], info: dict[str, Any] | None = None) -> str:
        with self._lock:
            i = min(len(self.calls), len(self.replies) - 1)
            self.calls.append(messages)
        reply = self.replies[i]
        return reply(messages) if callable(reply) else reply


def chat_reply(**fields: Any) -> str:
    """Format ``fields`` as a ChatAdapter reply (for scripting fake LMs)."""
    body = "\n\n".join(f"[[ ## {k} ## ]]\n{v}" for k, v in fields.items())
    return body + "\n\n[[ ## completed ## ]]"


class MemoryArchive:
    """An in-memory stand-in for :class:`masforge.archive.store.Archive` (the calls a search makes)."""

    def __init__(self) -> None:
        self.genomes: dict[str, Any] = {}
        self.meta: dict[str, dict[str, Any]] = {}
        self.results: dict[tuple[str, str, str, str], Any] = {}

    def add(self, genome: Any, parents: Sequence[str] = (), **meta: Any) -> dict[str, Any]:
        if genome.id not in self.genomes:
            self.genomes[genome.id] = genome
            self.meta[genome.id] = {"parents": list(parents), **meta}
        return self.meta[genome.id]

    def add_result(self, genome_id: str, result: Any) -> None:
        self.results[(genome_id, result.task, result.split, result.lm_key)] = result

    def get_result(self, genome_id: str, task: str, split: str, lm_key: str) -> Any:
        return self.results.get((genome_id, task, split, lm_key))
