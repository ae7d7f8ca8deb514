"""``ast.parse`` made safe to call from several threads at once.

CPython 3.11 converts a parsed tree into Python objects with one depth counter per interpreter, not per thread
(gh-106905): when two threads parse at once and the interpreter switches between them mid-conversion (a garbage
collection runs Python code), one of them fails with ``SystemError: AST constructor recursion depth mismatch``.
masforge parses in many threads (the calculator tool and the fake LM in every example, answer normalisation, dspy's
own parsing of signatures and values), and a parse that fails at random turned into a different answer, cached for
good. :func:`install` (run on ``import masforge``) serialises ``ast.parse``, which ``ast.literal_eval`` and every
library calling ``ast.parse`` go through; parses are short, so the lock costs nothing measurable.
"""

from __future__ import annotations

import ast
import threading
from typing import Any

__all__ = ["install"]

_lock = threading.RLock()  # re-entrant: a finalizer that parses may run inside a parse of the same thread


def install() -> None:
    """Replace ``ast.parse`` by a serialised version (idempotent)."""
    if getattr(ast.parse, "__masforge_serialised__", False):
        return
    original = ast.parse

    def parse(*args: Any, **kwargs: Any) -> Any:
        with _lock:
            return original(*args, **kwargs)

    parse.__doc__ = original.__doc__
    parse.__wrapped__ = original  # type: ignore[attr-defined]
    parse.__masforge_serialised__ = True  # type: ignore[attr-defined]
    ast.parse = parse
