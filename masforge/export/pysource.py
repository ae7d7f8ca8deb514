"""Writing Python source text for an export: literals of plain data that fit the line width, wrapped prose,
docstring escapes, constant names and sorted import lines (the way ruff/isort writes them)."""

from __future__ import annotations

import json
import re
import textwrap
from typing import Any

from masforge.text import escape_controls

WRAP = 108
"""The width of prose in an export's docstring."""
RULE = "# " + "=" * 110
"""The comment line that frames each part of an export."""


def lit(value: Any) -> str:
    """A Python literal for plain data (str, numbers, bools, None, lists, tuples, dicts), strings double-quoted."""
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)  # a JSON string is a valid Python literal of the same value
    if isinstance(value, bool) or value is None or isinstance(value, int | float):
        return repr(value)
    if isinstance(value, list):
        return "[" + ", ".join(lit(v) for v in value) + "]"
    if isinstance(value, tuple):
        return "(" + ", ".join(lit(v) for v in value) + ("," if len(value) == 1 else "") + ")"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{lit(k)}: {lit(v)}" for k, v in value.items()) + "}"
    raise TypeError(f"cannot write {type(value).__name__} as a literal")


def block(value: Any, indent: int, lead: int = 0, width: int = 118) -> str:
    """``lit(value)`` on one line if it fits after ``lead`` characters, else one element per line."""
    one = lit(value)
    if lead + len(one) <= width or not isinstance(value, list | tuple | dict) or not value:
        return one
    pad = " " * (indent + 4)
    if isinstance(value, dict):
        items = [f"{pad}{lit(k)}: {block(v, indent + 4, len(pad) + len(lit(k)) + 2)}," for k, v in value.items()]
        return "{\n" + "\n".join(items) + "\n" + " " * indent + "}"
    items = [f"{pad}{block(v, indent + 4, len(pad))}," for v in value]
    left, right = ("[", "]") if isinstance(value, list) else ("(", ")")
    return left + "\n" + "\n".join(items) + "\n" + " " * indent + right


def py_str(text: str, indent: int, lead: int = 0, width: int = 118) -> str:
    """A string literal: on one line if it fits, else implicitly concatenated chunks in parentheses."""
    literal = lit(text)
    if lead + len(literal) <= width or len(text) < 20:
        return literal
    pad = " " * (indent + 4)
    room = width - len(pad)
    chunks: list[str] = []
    current = ""
    for token in re.findall(r"\S*\s*", text):
        if not token:
            continue
        if current and len(lit(current + token)) > room:
            chunks.append(current)
            current = ""
        current += token
    if current:
        chunks.append(current)
    body = "\n".join(f"{pad}{lit(chunk)}" for chunk in chunks)
    return f"(\n{body}\n{' ' * indent})"


def docstring(text: str) -> str:
    """``text`` made safe inside a regular triple-quoted docstring (control characters as escapes, which the
    docstring reads as the same characters, so a file shown in a terminal carries none)."""
    return escape_controls(text.replace("\\", "\\\\").replace('"""', '\\"\\"\\"'))


def wrap(text: str, indent: str = "") -> str:
    """``text``'s paragraphs, each filled to :data:`WRAP` columns."""
    paragraphs = [p for p in re.split(r"\n\s*\n", text.strip()) if p.strip()]
    return "\n\n".join(textwrap.fill(" ".join(p.split()), WRAP, initial_indent=indent, subsequent_indent=indent)
                       for p in paragraphs)


def const_name(agent_id: str, taken: set[str]) -> str:
    """The constant holding an agent's instructions (``SOLVER_INSTRUCTIONS``), not yet in ``taken`` (added)."""
    base = re.sub(r"_+", "_", agent_id.upper()).strip("_") or "AGENT"
    name = f"{base}_INSTRUCTIONS"
    i = 2
    while name in taken:
        name = f"{base}_{i}_INSTRUCTIONS"
        i += 1
    taken.add(name)
    return name


def merge_imports(lines: set[str]) -> str:
    """Import lines merged by module and sorted the way ruff/isort does (plain ``import`` lines first)."""
    plain = sorted({x for x in lines if x.startswith("import ")}, key=lambda x: x.split()[1])
    froms: dict[str, set[str]] = {}
    for line in lines:
        if line.startswith("from "):
            module, _, names = line[5:].partition(" import ")
            froms.setdefault(module, set()).update(n.strip() for n in names.split(","))
    merged = [f"from {m} import {', '.join(sorted(froms[m]))}" for m in sorted(froms)]
    return "\n".join(plain + merged)
