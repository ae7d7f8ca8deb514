"""What a sandbox run asks of its child: the limits (:class:`SandboxLimits`), the run's arguments checked with one
clear error each, the job the child reads from its in-memory file (:func:`job`) and, apart from it, what only its
judge may know (:func:`judge_job`: the tests)."""

from __future__ import annotations

import ast
import json
import math
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from masforge.errors import SandboxError
from masforge.sandbox.isolation import _UidLease

RpcHandler = Callable[[str, dict[str, Any]], Any]
"""``(method, {"args": [...], "kwargs": {...}}) -> JSON-able result``; raising sends the error back
to the child, where it is raised as ``RuntimeError("<ExceptionType>: <message>")``."""

_MAX_OPEN_FILES = 256
MAX_MESSAGE_BYTES = 4 * 1024 * 1024
"""Largest message between sandboxed code and masforge (an ``llm()`` prompt, a return value): a larger one is
refused with a one-line error (no model reads a million tokens, and parsing or pricing it would cost the parent)."""


@dataclass(frozen=True)
class SandboxLimits:
    """Limits of one sandboxed run."""

    timeout_s: float = 30.0
    """Wall clock (excluding time the parent spends serving RPC); then SIGKILL to the process group."""
    memory_mb: int = 1024
    """Address space of the child (RLIMIT_AS)."""
    cpu_s: int | None = None
    """CPU seconds (RLIMIT_CPU); default ``ceil(timeout_s) + 1``."""
    file_size_mb: int = 16
    """Largest file the child may write (RLIMIT_FSIZE)."""
    max_processes: int = 32
    """Processes and threads of the sandbox uid (RLIMIT_NPROC); per run when the parent is root."""
    max_output_bytes: int = 1_000_000
    """Captured stdout and stderr (each) are truncated beyond this; far beyond it the run is killed."""
    disk_mb: int = 256
    """Size of the private /tmp that holds the run directory (with bubblewrap; else no disk quota)."""
    network: bool = False
    """Allow network access (no network namespace, the audit hook lets sockets through)."""

    def effective_cpu_s(self) -> int:
        """The CPU limit actually applied."""
        return self.cpu_s if self.cpu_s is not None else math.ceil(self.timeout_s) + 1

    def validate(self) -> None:
        """Raise ValueError for a limit that cannot work."""
        if not self.timeout_s > 0:
            raise ValueError(f"SandboxLimits.timeout_s must be > 0, got {self.timeout_s!r}")
        for name in ("memory_mb", "file_size_mb", "max_processes", "max_output_bytes", "disk_mb"):
            value = getattr(self, name)
            if not isinstance(value, int) or value <= 0:
                raise ValueError(f"SandboxLimits.{name} must be a positive int, got {value!r}")
        if self.cpu_s is not None and (not isinstance(self.cpu_s, int) or self.cpu_s <= 0):
            raise ValueError(f"SandboxLimits.cpu_s must be a positive int or None, got {self.cpu_s!r}")


def _check_json(name: str, value: Any) -> None:
    try:
        json.dumps(value)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"run_python: {name} must be JSON-serializable: {exc}") from None


def _check_files(files: dict[str, str]) -> None:
    for name, text in files.items():
        rel = Path(name)
        if not isinstance(name, str) or rel.is_absolute() or not rel.parts or ".." in rel.parts:
            raise ValueError(f"run_python: file name {name!r} must be a plain relative path")
        if not isinstance(text, str):
            raise TypeError(f"run_python: file {name!r} must be text (str), got {type(text).__name__}")


def checked_arguments(entry: str | None, args: list[Any] | None, kwargs: dict[str, Any] | None,
                       rpc: RpcHandler | None, rpc_names: Sequence[str], timed_rpc_names: Sequence[str],
                       files: dict[str, str] | None, tests: str | None, task_code: str | None,
                       answer_names: Sequence[str] | None,
                       ) -> tuple[list[Any], dict[str, Any], dict[str, str], tuple[str, ...], frozenset[str]]:
    """:func:`run_python`'s arguments checked (one clear error each) and copied: (args, kwargs, files, RPC names,
    timed RPC names)."""
    args = list(args) if args is not None else []
    kwargs = dict(kwargs) if kwargs is not None else {}
    files = dict(files) if files is not None else {}
    names = tuple(rpc_names)
    for name in names:
        if not isinstance(name, str) or not name.isidentifier():
            raise ValueError(f"run_python: RPC name {name!r} is not a Python identifier")
    timed = frozenset(timed_rpc_names)
    if not timed <= set(names):
        raise ValueError(f"run_python: timed_rpc_names {sorted(timed - set(names))} are not among rpc_names")
    if names and rpc is None:
        raise ValueError("run_python: rpc_names given without an rpc handler")
    if entry is not None and not entry.isidentifier():
        raise ValueError(f"run_python: entry {entry!r} is not a Python identifier")
    if tests is not None and entry is not None:
        raise ValueError("run_python: give either entry or tests, not both")
    if tests is None and (task_code is not None or answer_names is not None):
        raise ValueError("run_python: task_code and answer_names are for a test run: give tests too")
    if task_code is not None and not isinstance(task_code, str):
        raise TypeError(f"run_python: task_code must be text (str), got {type(task_code).__name__}")
    for name in answer_names or ():
        if not isinstance(name, str) or not name.isidentifier():
            raise ValueError(f"run_python: answer name {name!r} is not a Python identifier")
    _check_json("args", args)
    _check_json("kwargs", kwargs)
    _check_files(files)
    if not sys.executable:
        raise SandboxError("sys.executable is unknown: cannot start a sandbox interpreter")
    return args, kwargs, files, names, timed


def job(code: str, entry: str | None, args: list[Any], kwargs: dict[str, Any], names: tuple[str, ...],
         files: dict[str, str], tmp: str, limits: SandboxLimits, lease: _UidLease | None) -> dict[str, Any]:
    """What the child reads from its job file before it forks its worker: the code, how to call it, where it runs and
    its limits. Never the tests (:func:`judge_job`): the worker is a copy of this process."""
    return {
        "code": code,
        "entry": entry,
        "args": args,
        "kwargs": kwargs,
        "rpc_names": list(names),
        "files": files,
        "max_message_bytes": MAX_MESSAGE_BYTES,
        "tmp": tmp,
        "network": limits.network,
        "uid": lease.uid if lease is not None else None,
        "gid": lease.gid if lease is not None else None,
        "exclusive_uid": lease is not None,
        "limits": {
            "memory_mb": limits.memory_mb,
            "cpu_s": limits.effective_cpu_s(),
            "file_size_mb": limits.file_size_mb,
            "max_processes": limits.max_processes,
            "max_open_files": _MAX_OPEN_FILES,
        },
    }


def judge_job(tests: str | None, task_code: str | None, answer_names: Sequence[str] | None) -> dict[str, Any]:
    """What the child's judge reads from a file of its own once the worker exists (so no memory of the worker ever
    holds it): the tests; the task's own code the tests rely on (run in the judge, so that an answer cannot redefine
    it), sent only when the tests use a name it defines other than the answer's; and the only names the tests take
    from the answer (None: any the answer defines and the task does not)."""
    if tests is None:
        return {}
    if task_code is not None and not _tests_need(tests, task_code, answer_names or ()):
        task_code = None  # running it would cost the judge its imports (e.g. typing) for nothing
    return {"tests": tests, "task_code": task_code,
            "answer_names": list(answer_names) if answer_names is not None else None}


def _tests_need(tests: str, task_code: str, answer_names: Sequence[str]) -> bool:
    """Whether the tests read a name the task's code binds, besides the answer's (True when either does not parse:
    the judge then reports it)."""
    try:
        used = {node.id for node in ast.walk(ast.parse(tests)) if isinstance(node, ast.Name)}
        task = ast.parse(task_code)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return True
    bound: set[str] = set()
    for node in ast.walk(task):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            bound.add(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bound.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            if any(alias.name == "*" for alias in node.names):
                return True  # names it cannot list
            bound |= {(alias.asname or alias.name).split(".")[0] for alias in node.names}
    return bool((used - set(answer_names)) & bound)
