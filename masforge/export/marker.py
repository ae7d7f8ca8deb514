"""The marker that identifies a module written by ``masforge export --format python``: a literal
``MASFORGE_EXPORT = {...}`` dict (format version, genome id, kind), read without importing the module."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

MARKER_NAME = "MASFORGE_EXPORT"
EXPORT_FORMAT_VERSION = 1


def read_marker(path: str | Path) -> dict[str, Any] | None:
    """The ``MASFORGE_EXPORT`` dict of an exported module (read without importing it), or None."""
    p = Path(path)
    if p.suffix.lower() != ".py" or not p.is_file():
        return None
    try:
        text = p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None
    if MARKER_NAME not in text:
        return None
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return None
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == MARKER_NAME for t in node.targets):
            try:
                value = ast.literal_eval(node.value)
            except ValueError:
                return None
            return value if isinstance(value, dict) else None
    return None


def is_exported(path: str | Path) -> bool:
    """True if ``path`` is a module written by ``masforge export --format python``."""
    return read_marker(path) is not None
