"""Errors in the sandbox child: the audit hook's exception types, an exception as one line and a kind, and its
traceback without the bootstrap's frames."""

from __future__ import annotations

import os

_CODE_FILENAME = "<code>"
_TESTS_FILENAME = "<tests>"
_TASK_FILENAME = "<task>"
_MAX_TRACEBACK_CHARS = 6000
_MAX_ERROR_CHARS = 500
# Every part of the bootstrap is a file of this folder: the frames of those files that lead a traceback are trimmed.
_BOOTSTRAP_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep


class SandboxBlocked(PermissionError):
    """Raised by the audit hook for a forbidden operation (shown as ``PermissionError``)."""


class SandboxBlockedImport(ImportError):
    """Raised by the audit hook for a forbidden import (shown as ``ImportError``)."""


# Show the hook's errors under the familiar builtin names in tracebacks and error lines.
for _cls, _name in ((SandboxBlocked, "PermissionError"), (SandboxBlockedImport, "ImportError")):
    _cls.__name__ = _cls.__qualname__ = _name
    _cls.__module__ = "builtins"


# --------------------------------------------------------------------------------------------------
# errors as one line, a kind and a trimmed traceback


def _error_line(exc: BaseException) -> str:
    name = type(exc).__name__
    try:
        text = str(exc)
    except BaseException:  # a user exception whose __str__ fails
        text = "<exception str() failed>"
    line = f"{name}: {text}" if text else name
    line = line.strip().splitlines()[0] if line.strip() else name
    if len(line) > _MAX_ERROR_CHARS:
        line = line[: _MAX_ERROR_CHARS - 3] + "..."
    return line


def _error_kind(exc: BaseException) -> str:
    """Nearest telling exception in the chain decides: blocked / memory / exception."""
    queue: list[BaseException] = [exc]
    seen: set[int] = set()
    while queue:
        current = queue.pop(0)
        if id(current) in seen:
            continue
        seen.add(id(current))
        if isinstance(current, (SandboxBlocked, SandboxBlockedImport)):
            return "blocked"
        if isinstance(current, MemoryError):
            return "memory"
        queue.extend(e for e in (current.__cause__, current.__context__) if e is not None)
    return "exception"


_SOURCE: dict[str, str] = {}  # code and tests, registered with linecache when a traceback is formatted


def _format_syntax_error(exc: BaseException) -> str:
    import traceback

    return "".join(traceback.format_exception_only(type(exc), exc))


def _format_traceback(exc: BaseException, filename: str) -> str | None:
    try:
        import linecache

        for name, source in _SOURCE.items():
            linecache.cache[name] = (len(source), None, source.splitlines(True), name)
        tb = exc.__traceback__
        while tb is not None and tb.tb_frame.f_code.co_filename.startswith(_BOOTSTRAP_DIR):
            tb = tb.tb_next
        import traceback  # imported lazily: start-up time matters more than this path

        text = "".join(traceback.format_exception(type(exc), exc, tb))
    except BaseException:  # e.g. MemoryError while formatting: report without it
        return None
    if len(text) > _MAX_TRACEBACK_CHARS:
        text = "[... traceback trimmed ...]\n" + text[-_MAX_TRACEBACK_CHARS:]
    return text
