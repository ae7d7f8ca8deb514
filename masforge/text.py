"""Shortening text for prompts, tables, logs and commit subjects, and escaping what a terminal would obey: one rule
everywhere.

A leaf module (it imports nothing from masforge), so every layer may use it, like :mod:`masforge.errors`.
"""

from __future__ import annotations

import re

_CONTROLS = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")


def escape_controls(text: str) -> str:
    """``text`` with control characters written as ``\\xNN`` (``\\uNNNN`` above U+00FF), the way a Python
    string literal writes them: printed, an escape sequence from a genome's name or a model's answer cannot retitle
    the terminal, move its cursor, clear it or reorder what it shows (bidirectional overrides). Tabs and line
    breaks are kept."""
    if not _CONTROLS.search(text):
        return text
    return _CONTROLS.sub(_escaped, text)


def _escaped(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 256 else f"\\u{code:04x}"


def shorten(value: object, limit: int, *, flat: bool = True, mark: str = "...") -> str:
    """``value`` as text of at most ``limit`` characters. With ``flat`` (the default) runs of white space,
    line breaks included, become one space first; text that is cut ends in ``mark``."""
    text = " ".join(str(value).split()) if flat else str(value)
    if len(text) <= limit:
        return text
    return text[: max(0, limit - len(mark))].rstrip() + mark



def shorten_name(name: object, limit: int) -> str:
    """A system's name in at most ``limit`` characters, cut in the middle: the end of a name tells variants apart
    (``chain-of-thought~379381``, ``... System with Voting``), so it is kept."""
    text = " ".join(str(name).split())
    if len(text) <= limit:
        return text
    mark = "..."
    tail = max(1, (limit - len(mark)) // 2)
    head = max(0, limit - len(mark) - tail)
    return text[:head].rstrip() + mark + text[-tail:].lstrip()


def distinct_names(names: list[str], limit: int, ids: list[str] | None = None) -> list[str]:
    """Each name shortened with :func:`shorten_name`; two that still read the same get their id's first
    characters (``name (379381)``), so no two rows of a table or list look alike."""
    short = [shorten_name(n, limit) for n in names]
    seen: dict[str, int] = {}
    for s in short:
        seen[s] = seen.get(s, 0) + 1
    out = []
    for i, s in enumerate(short):
        if seen[s] > 1 and ids is not None:
            s = f"{shorten_name(names[i], max(8, limit - 9))} ({ids[i][:6]})"
        out.append(s)
    return out
