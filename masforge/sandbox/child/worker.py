"""The worker process of the sandbox child: runs the code as module ``__sandbox__`` and answers the judge."""

from __future__ import annotations

import _thread
import builtins
import json
import os
import sys
import types

from .confine import _make_audit_hook
from .errors import _CODE_FILENAME, _SOURCE, _error_kind, _error_line, _format_syntax_error, _format_traceback
from .wire import _decode, _dumps, _encode, _too_big, _write_all

TYPE_CHECKING = False  # not importing typing keeps the child's start-up fast
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

# Not "__main__": `if __name__ == "__main__":` blocks (demo code, reading stdin) do not run, as in
# the official HumanEval harness. sys.modules["__main__"] is aliased to the module all the same.
_MODULE_NAME = "__sandbox__"


class _ToJudge:
    """The worker's end of its two pipes to the judge."""

    def __init__(self, out_fd: int, in_fd: int, limit: int) -> None:
        self._out = out_fd
        self._in = os.fdopen(in_fd, "rb")
        self._limit = limit
        self._lock = _thread.allocate_lock()

    def next_op(self) -> dict[str, Any]:
        """The judge's next request; the worker ends when the judge is gone."""
        line = self._in.readline()
        if not line:
            os._exit(0)
        return json.loads(line)

    def reply(self, message: dict[str, Any]) -> None:
        data = _dumps({"r": 1, **message})
        if len(data) > self._limit:
            error = "ValueError: " + _too_big("the answer", len(data), self._limit)
            data = _dumps({"r": 1, "ok": False, "error": error, "error_kind": "output", "exc": "ValueError",
                           "traceback": None})
        with self._lock:
            _write_all(self._out, data)

    def call(self, method: str, args: list[Any], kwargs: dict[str, Any]) -> Any:
        """An RPC call to the parent, through the judge; blocks for the reply."""
        try:
            data = _dumps({"rpc": method, "args": args, "kwargs": kwargs})
        except (TypeError, ValueError, RecursionError) as exc:
            raise TypeError(f"arguments of {method}() must be JSON-serializable: {exc}") from None
        if len(data) > self._limit:
            raise ValueError(f"{method}(): " + _too_big("the request", len(data), self._limit))
        with self._lock:
            _write_all(self._out, data)
            line = self._in.readline()
        if not line:
            raise RuntimeError(f"{method}(): the sandbox RPC channel is closed")
        reply = json.loads(line).get("rpc_reply") or {}
        if reply.get("ok"):
            return reply.get("result")
        raise RuntimeError(str(reply.get("error") or f"{method}() failed"))

    def make_function(self, name: str) -> Callable[..., Any]:
        """A module-level function ``name(*args, **kwargs)`` that calls the parent."""

        def rpc_function(*args: Any, **kwargs: Any) -> Any:
            return self.call(name, list(args), kwargs)

        rpc_function.__name__ = rpc_function.__qualname__ = name
        rpc_function.__doc__ = f"Call {name!r} in the parent process (RPC)."
        return rpc_function


def _failure(exc: BaseException, kind: str | None = None) -> dict[str, Any]:
    return {"ok": False, "error": _error_line(exc), "error_kind": kind or _error_kind(exc),
            "exc": type(exc).__name__, "traceback": _format_traceback(exc, _CODE_FILENAME)}


async def _await(awaitable: Any) -> Any:
    return await awaitable


def _run_code(job: dict[str, Any], namespace: dict[str, Any]) -> dict[str, Any]:
    """Compile and run the code as module ``__sandbox__`` (then the entry function); the answer to ``run``."""
    code: str = job["code"]
    entry: str | None = job["entry"]
    try:
        compiled = compile(code, _CODE_FILENAME, "exec", dont_inherit=True)
    except (SyntaxError, ValueError) as exc:
        return {"ok": False, "error": _error_line(exc), "error_kind": "syntax", "exc": type(exc).__name__,
                "traceback": _format_syntax_error(exc)}
    _SOURCE[_CODE_FILENAME] = code
    reserve: bytearray | None = bytearray(4 << 20)  # freed on MemoryError so reporting still works
    try:
        exec(compiled, namespace)
        value = None
        if entry is not None:
            function = namespace.get(entry)
            if not callable(function):
                raise NameError(f"entry function {entry!r} is not defined by the code")
            value = function(*job["args"], **job["kwargs"])
            if hasattr(type(value), "__await__"):
                import asyncio

                value = asyncio.run(_await(value))
    except BaseException as exc:  # everything the code raises is a result
        reserve = None
        if _error_kind(exc) == "memory":
            namespace.clear()
        out = _failure(exc)
        exc.__traceback__ = None
        return out
    del reserve
    try:
        json.dumps(value)
    except (TypeError, ValueError, RecursionError) as exc:
        what = f"the return value of {entry}()" if entry else "the return value"
        return {"ok": False, "error": f"{type(exc).__name__}: {what} is not JSON-serializable: {exc}",
                "error_kind": "output", "exc": type(exc).__name__, "traceback": None}
    return {"ok": True, "value": value}


def _describe(namespace: dict[str, Any], wanted: Any) -> dict[str, Any]:
    """What the judge needs to know about the module's globals it asked for (modules, callables, plain values)."""
    out: dict[str, Any] = {}
    for name in wanted if type(wanted) is list else ():
        if type(name) is not str or name not in namespace:
            continue
        value = namespace[name]
        if isinstance(value, types.ModuleType):
            out[name] = {"module": str(value.__name__)}
        elif callable(value):
            out[name] = {"call": 1}
        else:
            try:
                out[name] = {"value": _encode(value, None)}
            except (TypeError, ValueError, RecursionError):
                continue
    return out


def _named(namespace: dict[str, Any], name: Any) -> Any:
    if type(name) is not str or name not in namespace:
        raise NameError(f"name {str(name)[:80]!r} is not defined by the code")
    return namespace[name]


def _worker(job: dict[str, Any], link: _ToJudge) -> None:
    """Answer the judge's requests until it is gone (never returns)."""
    module = types.ModuleType(_MODULE_NAME)
    namespace = module.__dict__
    namespace["__builtins__"] = builtins
    namespace["__file__"] = os.path.join(job["tmp"], _MODULE_NAME + ".py")
    for name in job["rpc_names"]:
        namespace[name] = link.make_function(name)
    sys.modules[_MODULE_NAME] = sys.modules["__main__"] = module
    handles: dict[int, Any] = {}

    def resolve(tag: Any) -> Any:
        if type(tag) is not list or not tag or tag[0] not in handles:
            raise ValueError("an unknown handle")
        return handles[tag[0]]

    # the worker may not signal the judge (or kill(-1) the run): only the judge ends the run
    sys.addaudithook(_make_audit_hook(job["tmp"], job["network"], False))
    while True:
        op = link.next_op()
        kind = op.get("op")
        try:
            if kind == "run":
                reply = _run_code(job, namespace)
            elif kind == "globals":  # what the code defines: the judge asks only for names its tests use
                reply = {"ok": True, "names": [n for n in namespace if not (n[:2] == n[-2:] == "__")]}
            elif kind == "names":
                reply = {"ok": True, "names": _describe(namespace, op.get("want"))}
            elif kind == "call":
                target = _named(namespace, op["name"]) if "name" in op else resolve(op.get("h"))
                args = _decode(op.get("args"), resolve)
                kwargs = _decode(op.get("kwargs"), resolve)
                reply = {"ok": True, "value": _encode(target(*args, **kwargs), handles)}
            elif kind == "iter":
                reply = {"ok": True, "value": _encode(iter(resolve(op.get("h"))), handles)}
            elif kind == "next":
                try:
                    reply = {"ok": True, "value": _encode(next(resolve(op.get("h"))), handles)}
                except StopIteration:
                    reply = {"ok": True, "stop": True}
            else:
                reply = {"ok": False, "error": f"ValueError: unknown request {kind!r}", "error_kind": "exception",
                         "exc": "ValueError", "traceback": None}
        except BaseException as exc:  # the code failed on this call: the judge decides what that means
            reply = _failure(exc)
            exc.__traceback__ = None
        try:
            link.reply(reply)
        except (TypeError, ValueError, RecursionError) as exc:
            link.reply({"ok": False, "error": f"{type(exc).__name__}: the answer is not plain data: {exc}",
                        "error_kind": "output", "exc": type(exc).__name__, "traceback": None})
