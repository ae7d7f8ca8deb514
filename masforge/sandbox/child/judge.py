"""The judge's side of the sandbox child: its view of the worker (requests, relayed RPC calls), the code's
functions and objects as the tests see them, the test run and the result."""

from __future__ import annotations

import builtins
import os
import signal
import sys
import types

from .errors import (
    _MAX_ERROR_CHARS,
    _MAX_TRACEBACK_CHARS,
    _SOURCE,
    _TASK_FILENAME,
    _TESTS_FILENAME,
    _error_kind,
    _error_line,
    _format_traceback,
)
from .wire import _MAX_DEPTH, _decode, _dumps, _encode, _Lines, _write_all

TYPE_CHECKING = False  # not importing typing keeps the child's start-up fast
if TYPE_CHECKING:
    from collections.abc import Iterator
    from typing import Any

    from .wire import _Channel


class _WorkerFailed(BaseException):
    """The worker died, broke the protocol or sent too much (a BaseException: test code cannot catch it)."""

    def __init__(self, error: str, kind: str) -> None:
        super().__init__(error)
        self.error, self.kind = error, kind


# --------------------------------------------------------------------------------------------------
# the judge: relays, runs the tests, reports


class _Worker:
    """The judge's view of the worker process: requests answered over the pipes, its RPC calls relayed."""

    def __init__(self, pid: int, out_fd: int, in_fd: int, limit: int, parent: _Channel,
                 rpc_names: frozenset[str], cpu_s: int) -> None:
        self.pid = pid
        self._out = out_fd
        self._lines = _Lines(in_fd, limit)
        self._parent = parent
        self._rpc_names = rpc_names
        self._cpu_s = cpu_s
        self._handles: dict[int, _Handle] = {}
        self.failed: _WorkerFailed | None = None
        """Set once the worker died or broke the protocol: nothing it says counts any more."""
        self.signalled: _WorkerFailed | None = None
        """Set (by the judge's signal handler) once a process sent it a signal meant to end it: the run has failed."""

    def signalled_by(self, signum: int) -> None:
        """A process sent the judge ``signum``: the code under test failed (its worker ends, which wakes the judge
        if it waits for it)."""
        self.signalled = _WorkerFailed(f"Killed: the code under test sent {_signal_name(signum)} to the sandbox's "
                                       "judge", "killed")
        pid = self.pid
        if pid:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass

    def ask(self, request: dict[str, Any]) -> dict[str, Any]:
        """Send ``request`` and return the worker's answer, relaying its RPC calls meanwhile."""
        if self.failed is not None:
            raise self.failed
        try:
            _write_all(self._out, _dumps(request))
        except OSError:
            self._gone()
        while True:
            try:
                message = self._lines.read()
            except ValueError as exc:
                self.broke(str(exc))
            if message is None:
                self._gone()
            if type(message) is not dict:
                self.broke("a message that is not a JSON object")
            if "rpc" in message:
                self._relay(message)
            elif message.get("r") == 1 and type(message.get("ok")) is bool:
                return message
            else:
                self.broke("a message the judge did not ask for")

    def _relay(self, message: dict[str, Any]) -> None:
        method, args, kwargs = message.get("rpc"), message.get("args"), message.get("kwargs")
        if method not in self._rpc_names or type(args) is not list or type(kwargs) is not dict:
            reply = {"ok": False, "error": f"LookupError: unknown RPC method {str(method)[:80]!r}"}
        else:
            reply = self._parent.request(method, args, kwargs)
        try:
            _write_all(self._out, _dumps({"rpc_reply": reply}))
        except OSError:
            self._gone()

    def broke(self, why: str) -> Any:
        self.kill()
        self.failed = _WorkerFailed(f"ValueError: the sandboxed code broke the protocol: {why}", "output")
        raise self.failed

    def _gone(self) -> Any:
        """The worker ended without answering: how it ended is the failure."""
        try:
            _, status, usage = os.wait4(self.pid, 0)
            cpu_s = usage.ru_utime + usage.ru_stime
        except ChildProcessError:
            status, cpu_s = 0, 0.0
        sig = os.WTERMSIG(status) if os.WIFSIGNALED(status) else None
        if self.signalled is not None:
            self.failed = self.signalled
        elif sig == signal.SIGXCPU and cpu_s + 0.5 >= self._cpu_s:
            self.failed = _WorkerFailed("TimeoutError: CPU time limit exceeded", "cpu")
        elif sig == signal.SIGXCPU:  # the kernel sends it at the limit only: the code sent it to itself
            self.failed = _WorkerFailed(f"Killed: the code under test sent itself SIGXCPU after {cpu_s:.1f} s of "
                                        f"CPU time (the limit is {self._cpu_s} s)", "killed")
        elif sig is not None:
            self.failed = _WorkerFailed(f"Killed: the sandboxed process died from {_signal_name(sig)}", "killed")
        else:
            code = os.WEXITSTATUS(status) if os.WIFEXITED(status) else status
            self.failed = _WorkerFailed(f"SystemExit: the sandboxed process exited with status {code} before "
                                        "reporting a result", "killed")
        self.pid = 0
        raise self.failed

    def kill(self) -> None:
        """End the worker and wait for it (so its CPU time is counted with the judge's)."""
        if self.pid:
            try:
                os.kill(self.pid, signal.SIGKILL)
                os.waitpid(self.pid, 0)
            except (OSError, ChildProcessError):
                pass
            self.pid = 0

    # values

    def value(self, answer: dict[str, Any]) -> Any:
        """The decoded value of an answer, or the code's exception raised here (with its kind attached)."""
        if answer["ok"]:
            try:
                return _decode(answer.get("value"), self._handle)
            except (TypeError, ValueError, RecursionError) as exc:
                self.broke(f"a malformed value ({exc})")
        raise _candidate_exception(answer)

    def _handle(self, tag: Any) -> _Handle:
        if type(tag) is not list or len(tag) != 2 or type(tag[0]) is not int or type(tag[1]) is not str:
            raise ValueError("a malformed handle")
        found = self._handles.get(tag[0])
        if found is None:
            found = self._handles[tag[0]] = _Handle(self, tag[0], tag[1])
        return found


def _signal_name(signum: int) -> str:
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"


_CONTAINER_TAGS = {tuple: "$t", set: "$s", frozenset: "$fs"}


def _encode_argument(value: Any, depth: int = 0) -> Any:
    """An argument of the tests for the worker: plain data, or a handle the worker gave out."""
    if isinstance(value, _Handle):
        return {"$h": [value.id, value.kind]}
    if depth > _MAX_DEPTH:
        raise ValueError(f"an argument nested deeper than {_MAX_DEPTH} levels")
    below = depth + 1
    if type(value) is list:
        return [_encode_argument(v, below) for v in value]
    if type(value) is dict:
        return {"$d": [[_encode_argument(k, below), _encode_argument(v, below)] for k, v in value.items()]}
    if type(value) in _CONTAINER_TAGS:
        return {_CONTAINER_TAGS[type(value)]: [_encode_argument(v, below) for v in value]}
    try:
        return _encode(value, None, depth)
    except TypeError:
        raise TypeError(f"cannot pass a {type(value).__name__} to the code under test (it runs in another "
                        "process; only plain data and values it returned can go there)") from None


def _candidate_exception(answer: dict[str, Any]) -> BaseException:
    """The exception the code raised, rebuilt here: a built-in type keeps its type (a test may expect it)."""
    name = str(answer.get("exc") or "")
    error = str(answer.get("error") or name or "error")
    message = error.split(": ", 1)[1] if ": " in error else ""
    found = getattr(builtins, name, None)
    if isinstance(found, type) and issubclass(found, Exception) and found.__module__ == "builtins":
        try:
            exc: BaseException = found(message)
        except Exception:
            exc = RuntimeError(error)
    else:
        exc = RuntimeError(error)
    exc.__dict__["_sandbox_answer"] = answer
    return exc


class _RemoteFunction:
    """A function (or class) of the code under test, called in the worker."""

    def __init__(self, worker: _Worker, name: str) -> None:
        self._worker, self.__name__ = worker, name

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        request = {"op": "call", "name": self.__name__, "args": _encode_argument(list(args)),
                   "kwargs": {"$d": [[k, _encode_argument(v)] for k, v in kwargs.items()]}}
        return self._worker.value(self._worker.ask(request))

    def __repr__(self) -> str:
        return f"<function {self.__name__} of the code under test>"


class _Handle:
    """An object of the code under test that is not plain data: it can be passed back, called or iterated; its
    comparisons are the judge's (identity), never the object's own."""

    def __init__(self, worker: _Worker, hid: int, kind: str) -> None:
        self._worker, self.id, self.kind = worker, hid, kind

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        request = {"op": "call", "h": [self.id, self.kind], "args": _encode_argument(list(args)),
                   "kwargs": {"$d": [[k, _encode_argument(v)] for k, v in kwargs.items()]}}
        return self._worker.value(self._worker.ask(request))

    def __iter__(self) -> Iterator[Any]:
        iterator = self._worker.value(self._worker.ask({"op": "iter", "h": [self.id, self.kind]}))
        if not isinstance(iterator, _Handle):
            raise TypeError(f"iter() of a {self.kind} did not give an iterator")
        while True:
            answer = self._worker.ask({"op": "next", "h": [iterator.id, iterator.kind]})
            if answer["ok"] and answer.get("stop") is True:
                return
            yield self._worker.value(answer)

    def __repr__(self) -> str:
        return f"<{self.kind} object of the code under test>"


def _names_used(code: types.CodeType) -> set[str]:
    """Every name ``code`` (and the functions it defines) may look up."""
    found = set(code.co_names)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            found |= _names_used(const)
    return found


def _test_namespace(worker: _Worker, compiled: types.CodeType, judging: dict[str, Any]) -> dict[str, Any]:
    """Globals for the tests. First the task's own code (a HumanEval prompt's helpers and imports), run here: what it
    defines is the task's, whatever the answer redefines. Then the answer's names as calls into the worker (its
    standard modules as the judge's own imports, its plain constants as copies): only ``answer_names`` when the task
    gives them (the entry point), else every name the tests use that the answer defines and the task does not. As
    when tests run in the code's own module, a name the answer defines hides the built-in of that name (an MBPP
    answer is a function called ``sum``). The worker learns no more of the tests than the names it is asked for."""
    namespace: dict[str, Any] = {"__builtins__": builtins, "__name__": "__tests__"}
    task_code = judging.get("task_code")
    if task_code is not None:
        _SOURCE[_TASK_FILENAME] = task_code
        try:
            exec(compile(task_code, _TASK_FILENAME, "exec", dont_inherit=True), namespace)
        except BaseException as exc:
            raise RuntimeError(f"the task's own code does not run: {_error_line(exc)}") from None
    answer_names = judging.get("answer_names")
    if answer_names is None:
        offered = worker.ask({"op": "globals"}).get("names")
        if type(offered) is not list:
            worker.broke("a malformed list of names")
        used = _names_used(compiled) - set(namespace)
        wanted = sorted(n for n in offered if type(n) is str and n in used and not (n[:2] == n[-2:] == "__"))
    else:
        wanted = list(answer_names)
    described = worker.ask({"op": "names", "want": wanted})
    names = described.get("names") if described["ok"] else None
    if type(names) is not dict:
        worker.broke("a malformed list of names")
    import importlib

    for name in wanted:
        entry = names.get(name)
        if type(entry) is not dict:  # an answer name the code lacks: calling it says so
            if answer_names is not None:
                namespace[name] = _RemoteFunction(worker, name)
            continue
        if "call" in entry:
            namespace[name] = _RemoteFunction(worker, name)
        elif "module" in entry and type(entry["module"]) is str:
            top = entry["module"].split(".", 1)[0]
            if top in sys.stdlib_module_names:  # never a module of the code's own directory
                try:
                    namespace[name] = importlib.import_module(entry["module"])
                except Exception:
                    continue
        elif "value" in entry:
            try:
                namespace[name] = _decode(entry["value"], _no_handle)
            except (TypeError, ValueError, RecursionError):
                continue
    return namespace


def _no_handle(tag: Any) -> Any:
    raise ValueError("a handle where plain data was expected")


def _run_tests(judging: dict[str, Any], worker: _Worker) -> dict[str, Any]:
    """Run the code in the worker, then the tests here against it: ok only if every test passed."""
    answer = worker.ask({"op": "run"})
    if not answer["ok"]:
        return _answer_failure(answer)
    try:
        compiled = compile(judging["tests"], _TESTS_FILENAME, "exec", dont_inherit=True)
    except (SyntaxError, ValueError) as exc:
        raise RuntimeError(f"the test code does not compile: {_error_line(exc)}") from None
    _SOURCE[_TESTS_FILENAME] = judging["tests"]
    namespace = _test_namespace(worker, compiled, judging)  # a task's code that fails is the sandbox's failure
    try:
        exec(compiled, namespace)
    except _WorkerFailed:
        raise
    except BaseException as exc:  # a test failed, or the code raised in a test
        answer = exc.__dict__.get("_sandbox_answer") if hasattr(exc, "__dict__") else None
        out = {"ok": False, "error": _error_line(exc), "error_kind": _error_kind(exc),
               "traceback": _format_traceback(exc, _TESTS_FILENAME)}
        if type(answer) is dict:
            # the code's own exception, as the code raised it: its line, its kind and where in the code it happened
            out["error"] = str(answer.get("error") or out["error"])[:_MAX_ERROR_CHARS]
            out["error_kind"] = str(answer.get("error_kind") or "exception")
            out["traceback"] = answer.get("traceback") or out["traceback"]
        exc.__traceback__ = None
        return out
    if worker.failed is not None:  # the tests swallowed the worker's end somehow: no pass without a worker
        raise worker.failed
    return {"ok": True, "value": None}


def _answer_failure(answer: dict[str, Any]) -> dict[str, Any]:
    return {"ok": False, "error": str(answer.get("error") or "error")[:_MAX_ERROR_CHARS],
            "error_kind": str(answer.get("error_kind") or "exception"),
            "traceback": str(answer["traceback"])[:_MAX_TRACEBACK_CHARS] if answer.get("traceback") else None}


def _judge(judging: dict[str, Any], worker: _Worker) -> dict[str, Any]:
    """The result of the run, as the judge establishes it (``judging``: the tests, if any, see `_run_tests`)."""
    try:
        if judging.get("tests") is not None:
            result = _run_tests(judging, worker)
        else:
            answer = worker.ask({"op": "run"})
            result = _answer_failure(answer) if not answer["ok"] else {"ok": True, "value": answer.get("value")}
    except _WorkerFailed as exc:
        result = {"ok": False, "error": exc.error, "error_kind": exc.kind, "traceback": None}
    if worker.signalled is not None:  # whatever the run came to, a signal sent to the judge fails it
        failed = worker.signalled
        result = {"ok": False, "error": failed.error, "error_kind": failed.kind, "traceback": None}
    return result
