"""Reading the scored answer out of a system's outputs: the answer itself, the answer as text, and the ways to read
the one answer a reply states (its final answer, without bold, LaTeX or quotes). Shared by every kind of metric and
by the reasoning-gym tasks."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from masforge.standalone.reading import split_final_answer


def answer_of(outputs: Any) -> Any:
    """The scored output: `outputs["answer"]` for a mapping, the object itself otherwise."""
    if isinstance(outputs, Mapping):
        return outputs.get("answer")
    return outputs


def as_text(value: Any) -> str | None:
    """The answer as text for a text metric: bytes decoded, lists and mappings as JSON, None kept."""
    if value is None:
        return None
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    if isinstance(value, str):
        return value
    if isinstance(value, list | dict | tuple):
        try:
            return json.dumps(value)
        except (TypeError, ValueError):
            return str(value)
    return str(value)


_WRAPPED = [re.compile(p, re.DOTALL) for p in (
    r"\\boxed\s*\{(.*)\}", r"\$\$?(.*?)\$?\$", r"\\\((.*)\\\)", r"\\\[(.*)\\\]", r"\*\*(.*)\*\*", r"__(.*)__",
    r"`+(.*?)`+", r'"(.*)"', r"'(.*)'", r"\\text(?:bf)?\s*\{(.*)\}")]
_VALUE_AFTER = re.compile(r"(?:\bis|=|:)[ \t]*([^\s=:][^=:\n]{0,40}?)[ \t]*[.;]?$")


def _unwrapped(text: str) -> str:
    """``text`` without the layout around a short answer: ``**-4**``, ``$-4$``, ``\\(\\boxed{-4}\\)``, ``"Paris"``,
    a closing full stop."""
    while True:
        before = text
        text = text.strip().rstrip(".;,。").strip()
        for wrapper in _WRAPPED:
            m = wrapper.fullmatch(text)
            if m:
                text = m.group(1)
                break
        if text == before:
            return text


def answer_readings(text: Any) -> list[str]:
    """The ways to read the one answer a reply states, as written first: the whole text, the final answer it
    states (after "Final answer:" however marked, see :func:`split_final_answer`), each without layout (bold,
    LaTeX, \\boxed{}, quotes, a full stop) and the short value a sentence ends on ("The result is -4", "x = -4").
    A metric that compares text takes the best reading: the answer as written, not its typography."""
    readings: list[str] = []

    def add(value: str) -> None:
        value = value.strip()
        if value and value not in readings:
            readings.append(value)

    raw = "" if text is None else str(text)
    add(raw)
    add(split_final_answer(raw, stated=True)[1])
    for reading in list(readings):
        plain = _unwrapped(reading)
        add(plain)
        value = _VALUE_AFTER.search(plain)
        if value:
            add(_unwrapped(value.group(1)))
    return readings
