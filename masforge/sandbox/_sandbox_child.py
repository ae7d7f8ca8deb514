"""Bootstrap of a sandbox child process (see `masforge.sandbox.runner` and `masforge.sandbox.isolation`).

This file is run as a script by a fresh interpreter
(``python -S -P -s _sandbox_child.py CHAN REPLY JOB LIFELINE``, all four file descriptors), usually
inside the namespaces of `masforge.sandbox.isolation`; it is never imported by the parent. It imports only
the standard library, so the child starts fast and shares nothing with the parent.

Two processes, so that the judged code never speaks for itself:

* the **judge** (this process): reads the job, sets the sandbox up, then forks the worker and never runs the code
  under test. It alone holds the channel to the parent; it relays the worker's RPC calls, and it reports the
  result. Whether the run succeeded is also its exit status (0: success, 1: the code failed, 70: the sandbox could
  not be set up), which the worker cannot set: the parent believes a success or a set-up failure only when the
  exit status agrees. For a test run (``job["tests"]``) the judge runs the test code itself, against functions
  of the worker: every call crosses the process boundary, and what comes back is plain data (numbers, strings,
  containers of them) rebuilt in the judge, or an opaque handle; so the comparisons of a test are made by the
  judge's own objects, and an answer can pass only by returning what the tests expect.
* the **worker** (forked by the judge after the set-up, with the channel to the parent closed): runs the code as
  module ``__sandbox__`` (then the ``entry`` function, if given) and answers the judge's calls.

Steps of the judge, in order:

1. read the job (JSON, from an in-memory file the parent filled);
2. when the parent asks for it (parent runs as root), drop to the run's uid/gid for good (which also makes this
   process non-dumpable: the worker cannot read or write its memory or open its descriptors through /proc; when
   not root, ``prctl(PR_SET_DUMPABLE, 0)`` does it). Directories on ``sys.path`` that this uid cannot reach (e.g.
   a Python installed under ``/root``) stay importable through directory descriptors opened before the drop
   (``/proc/self/fd/N`` paths);
3. create the private run directory (unless the parent did) and write the job's files into it, as that uid;
4. set resource limits (address space, CPU, file size, processes, core dumps, open files);
5. fork the worker; start the lifeline thread (kills the run when the parent dies); install the audit hook in
   both processes; the worker compiles and runs the code;
6. report one JSON result line on the channel, kill every other process of the sandbox uid (only when that uid
   is exclusive to this run) and ``os._exit`` with the status that matches the result.

Protocol on the channel (JSON lines, judge -> parent on CHAN, parent -> judge on REPLY):

* ``{"type": "started"}`` once the worker exists;
* ``{"type": "rpc", "method": m, "args": [...], "kwargs": {...}}`` answered by
  ``{"ok": true, "result": r}`` or ``{"ok": false, "error": "..."}``;
* ``{"type": "result", "ok": ..., "value": ..., "error": ..., "error_kind": ..., "traceback": ...}``;
* ``{"type": "fatal", "error": "..."}`` when the sandbox could not be set up (then exit status 70).

Between judge and worker (two pipes, JSON lines, at most ``job["max_message_bytes"]`` each): the judge sends
``{"op": "run"}``, ``{"op": "names", "want": [...]}``, ``{"op": "call", ...}``, ``{"op": "iter"|"next", "h": id}``
and ``{"rpc_reply": {...}}``; the worker answers each op with ``{"r": 1, "ok": ...}`` and may send
``{"rpc": m, "args": [...], "kwargs": {...}}`` while it works.
"""

from __future__ import annotations

import _posixsubprocess
import _thread
import base64
import builtins
import json
import os
import resource
import signal
import site
import sys
import types

TYPE_CHECKING = False  # not importing typing keeps the child's start-up fast
if TYPE_CHECKING:
    from collections.abc import Callable, Iterator
    from typing import Any

_BOOTSTRAP_FILE = os.path.abspath(__file__)
_CODE_FILENAME = "<code>"
_TESTS_FILENAME = "<tests>"
# Not "__main__": `if __name__ == "__main__":` blocks (demo code, reading stdin) do not run, as in
# the official HumanEval harness. sys.modules["__main__"] is aliased to the module all the same.
_MODULE_NAME = "__sandbox__"
_MAX_TRACEBACK_CHARS = 6000
_MAX_ERROR_CHARS = 500
_EXCLUSIVE_UID_MIN = 1_000_000  # never kill(-1) as a uid below this (could be a real user)
_ALLOWED_WRITE_PATHS = frozenset({"/dev/null", "/dev/stdout", "/dev/stderr"})
_EXIT_OK = 0
_EXIT_FAILED = 1
_EXIT_FATAL = 70
_EXIT_PARENT_GONE = 75
_MAX_DEPTH = 100  # nesting of a value crossing between judge and worker
_MAX_HANDLES = 100_000
_READ_CHUNK = 65536
_PR_SET_DUMPABLE = 4


class SandboxBlocked(PermissionError):
    """Raised by the audit hook for a forbidden operation (shown as ``PermissionError``)."""


class SandboxBlockedImport(ImportError):
    """Raised by the audit hook for a forbidden import (shown as ``ImportError``)."""


# Show the hook's errors under the familiar builtin names in tracebacks and error lines.
for _cls, _name in ((SandboxBlocked, "PermissionError"), (SandboxBlockedImport, "ImportError")):
    _cls.__name__ = _cls.__qualname__ = _name
    _cls.__module__ = "builtins"


class _WorkerFailed(BaseException):
    """The worker died, broke the protocol or sent too much (a BaseException: test code cannot catch it)."""

    def __init__(self, error: str, kind: str) -> None:
        super().__init__(error)
        self.error, self.kind = error, kind


def _dumps(message: Any) -> bytes:
    return (json.dumps(message) + "\n").encode("utf-8")


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def _too_big(what: str, size: int, limit: int) -> str:
    return f"{what} is {size / 2**20:.1f} MB, over the {limit / 2**20:g} MB limit of the sandbox channel"


class _Lines:
    """JSON lines from a pipe, each at most ``limit`` bytes (a longer one raises ValueError, unread)."""

    def __init__(self, fd: int, limit: int) -> None:
        self.fd, self.limit = fd, limit
        self._buf = bytearray()

    def read(self) -> Any:
        """The next message; None at end of file; ValueError for a line too long or not JSON."""
        while True:
            newline = self._buf.find(b"\n")
            if newline >= 0:
                line = bytes(self._buf[:newline])
                del self._buf[: newline + 1]
                try:
                    return json.loads(line)
                except (ValueError, RecursionError):
                    raise ValueError("a message that is not JSON (or nested too deeply)") from None
            if len(self._buf) > self.limit:
                raise ValueError(_too_big("a message", len(self._buf), self.limit))
            chunk = os.read(self.fd, _READ_CHUNK)
            if not chunk:
                return None
            self._buf += chunk


class _Channel:
    """The judge's line to the parent: RPC requests and the result."""

    def __init__(self, out_fd: int, in_fd: int) -> None:
        self._out = out_fd
        self._in = os.fdopen(in_fd, "rb")

    def send(self, message: dict[str, Any]) -> None:
        """Send one message (raises TypeError/ValueError if it is not JSON-serializable)."""
        _write_all(self._out, _dumps(message))

    def request(self, method: str, args: Any, kwargs: Any) -> Any:
        """Send an RPC request for the worker and return the parent's reply (a dict); exits if the parent is gone."""
        self.send({"type": "rpc", "method": method, "args": args, "kwargs": kwargs})
        line = self._in.readline()
        if not line:
            os._exit(_EXIT_PARENT_GONE)
        return json.loads(line)


# --------------------------------------------------------------------------------------------------
# values between worker and judge: plain data, else an opaque handle


def _exact(value: Any) -> Any:
    """``value`` as its exact built-in type (an int, float or str subclass may override comparisons)."""
    if isinstance(value, bool):
        return bool(value)
    if isinstance(value, int):
        return int.__add__(value, 0)
    if isinstance(value, float):
        return float.__mul__(value, 1.0)  # keeps -0.0 and nan
    return str.__getitem__(value, slice(None))


def _encode(value: Any, handles: dict[int, Any] | None, depth: int = 0) -> Any:
    """``value`` as tagged JSON: plain data is copied, anything else becomes a handle (``handles`` is None: refuse
    it). Subclasses of built-in types are copied as their base type, read with the base type's own methods."""
    if depth > _MAX_DEPTH:
        raise ValueError(f"a value nested deeper than {_MAX_DEPTH} levels")
    kind = type(value)
    if value is None or kind is bool or kind is str:
        return value
    if isinstance(value, (bool, int, float, str)):
        value = _exact(value)
        kind = type(value)
    if kind is int:
        return value if -(2**63) <= value < 2**63 else {"$i": hex(value)}
    if kind is float:
        return value if value - value == 0.0 else {"$f": repr(value)}
    if kind is str:
        return value
    below = depth + 1
    if isinstance(value, complex):
        return {"$c": [_encode(complex.real.__get__(value), None, below),
                       _encode(complex.imag.__get__(value), None, below)]}
    if isinstance(value, (bytes, bytearray)):
        tag = "$b" if isinstance(value, bytes) else "$ba"
        return {tag: base64.b64encode(bytes(value)).decode("ascii")}
    if isinstance(value, list):
        return [_encode(v, handles, below) for v in list.__iter__(value)]
    if isinstance(value, tuple):
        return {"$t": [_encode(v, handles, below) for v in tuple.__iter__(value)]}
    if isinstance(value, dict):
        return {"$d": [[_encode(k, handles, below), _encode(v, handles, below)] for k, v in dict.items(value)]}
    if isinstance(value, frozenset):
        return {"$fs": [_encode(v, handles, below) for v in frozenset.__iter__(value)]}
    if isinstance(value, set):
        return {"$s": [_encode(v, handles, below) for v in set.__iter__(value)]}
    if kind is range:
        return {"$r": [value.start, value.stop, value.step]}
    if kind.__module__ == "numpy" and getattr(value, "shape", None) == () and hasattr(value, "item"):
        return _encode(value.item(), handles, below)  # a numpy scalar: the Python number it holds
    if handles is None:
        raise TypeError(f"a {kind.__name__} object is not plain data")
    if len(handles) >= _MAX_HANDLES:
        raise ValueError(f"more than {_MAX_HANDLES} objects handed out")
    handles[id(value)] = value
    return {"$h": [id(value), kind.__name__[:80]]}


def _decode(data: Any, handle: Callable[[Any], Any], depth: int = 0) -> Any:
    """The value of tagged JSON (ValueError/TypeError for anything malformed); ``handle(tag)`` resolves handles."""
    if depth > _MAX_DEPTH:
        raise ValueError(f"a value nested deeper than {_MAX_DEPTH} levels")
    if data is None or type(data) in (bool, int, float, str):
        return data
    below = depth + 1
    if type(data) is list:
        return [_decode(v, handle, below) for v in data]
    if type(data) is not dict or len(data) != 1:
        raise ValueError("a malformed value")
    ((tag, body),) = data.items()
    if tag == "$i" and type(body) is str:
        return int(body, 16)
    if tag == "$f" and body in ("nan", "inf", "-inf"):
        return float(body)
    if tag == "$c" and type(body) is list and len(body) == 2:
        return complex(*(float(_decode(v, handle, below)) for v in body))
    if tag in ("$b", "$ba") and type(body) is str:
        raw = base64.b64decode(body.encode("ascii"), validate=True)
        return raw if tag == "$b" else bytearray(raw)
    if tag == "$r" and type(body) is list and len(body) == 3 and all(type(v) is int for v in body):
        return range(*body)
    if tag == "$h":
        return handle(body)
    if type(body) is not list:
        raise ValueError("a malformed value")
    if tag == "$t":
        return tuple(_decode(v, handle, below) for v in body)
    if tag == "$s":
        return {_decode(v, handle, below) for v in body}
    if tag == "$fs":
        return frozenset(_decode(v, handle, below) for v in body)
    if tag == "$d" and all(type(p) is list and len(p) == 2 for p in body):
        return {_decode(k, handle, below): _decode(v, handle, below) for k, v in body}
    raise ValueError("a malformed value")


# --------------------------------------------------------------------------------------------------
# setup: limits, privileges, import paths


def _apply_limits(limits: dict[str, int]) -> None:
    mb = 1024 * 1024
    wanted = [
        (resource.RLIMIT_AS, limits["memory_mb"] * mb, limits["memory_mb"] * mb),
        (resource.RLIMIT_CPU, limits["cpu_s"], limits["cpu_s"] + 1),
        (resource.RLIMIT_FSIZE, limits["file_size_mb"] * mb, limits["file_size_mb"] * mb),
        (resource.RLIMIT_NPROC, limits["max_processes"], limits["max_processes"]),
        (resource.RLIMIT_CORE, 0, 0),
        (resource.RLIMIT_NOFILE, limits["max_open_files"], limits["max_open_files"]),
    ]
    for res, soft, hard in wanted:
        _, current_hard = resource.getrlimit(res)
        if current_hard != resource.RLIM_INFINITY:  # only ever lower a limit
            hard = min(hard, current_hard)
            soft = min(soft, hard)
        resource.setrlimit(res, (soft, hard))


def _reachable_by_others(path: str) -> bool:
    """Whether a process with an unrelated uid/gid can list and read ``path`` (a directory)."""
    try:
        st = os.stat(path)
    except OSError:
        return True  # missing entries (e.g. pythonXY.zip) do no harm either way
    if st.st_mode & 0o005 != 0o005:
        return False
    parent = os.path.dirname(path)
    while True:
        try:
            if os.stat(parent).st_mode & 0o001 == 0:
                return False
        except OSError:
            return False
        if parent == os.path.dirname(parent):
            return True
        parent = os.path.dirname(parent)


def _drop_privileges(uid: int, gid: int) -> None:
    """Become uid/gid for good, keeping unreachable ``sys.path`` directories importable."""
    remap: dict[str, str] = {}
    for entry in dict.fromkeys(sys.path):
        if entry and os.path.isabs(entry) and not _reachable_by_others(entry):
            fd = os.open(entry, os.O_RDONLY | os.O_DIRECTORY)
            remap[entry] = f"/proc/self/fd/{fd}"
    os.setgroups([])
    os.setgid(gid)
    os.setuid(uid)
    if os.getuid() != uid or os.geteuid() != uid or os.getgid() != gid:
        raise OSError("the privilege drop did not take effect")
    try:
        os.setuid(0)
    except OSError:
        pass
    else:
        raise OSError("the privilege drop can be undone")
    if not remap:
        return
    ordered = sorted(remap.items(), key=lambda item: -len(item[0]))

    def mapped(path: str) -> str:
        for real, alias in ordered:
            if path == real or path.startswith(real + os.sep):
                return alias + path[len(real) :]
        return path

    sys.path[:] = [mapped(p) for p in sys.path]
    for module in list(sys.modules.values()):
        for holder in (module, getattr(module, "__spec__", None)):
            name = "__path__" if holder is module else "submodule_search_locations"
            locations = getattr(holder, name, None)
            if isinstance(locations, list):
                locations[:] = [mapped(p) for p in locations]
    sys.path_importer_cache.clear()


def _setup_paths(tmp: str) -> None:
    """sys.path = [private dir, stdlib..., site-packages] (no .pth processing)."""
    extra = [p for p in site.getsitepackages([sys.prefix]) if os.path.isdir(p) and p not in sys.path]
    sys.path[:] = [tmp, *sys.path, *extra]
    sys.dont_write_bytecode = True
    site.setquit()
    site.sethelper()


# --------------------------------------------------------------------------------------------------
# the audit hook


# Over 100 lines on purpose (allowed in tests/test_layout.py): the hook may call no helper of its own and read no
# global (see the docstring), so its checks cannot be split into named functions without becoming patchable.
def _make_audit_hook(tmp: str, network: bool, exclusive_uid: bool, child_pid: int = 0) -> Callable[[str, tuple], None]:
    """The defense-in-depth hook: no processes, no network, no writes outside ``tmp``, no ctypes; signals only to
    this process, ``child_pid`` (the judge ends its worker) and, with an exclusive uid, ``kill(-1)``.

    Everything it uses is bound here, before any untrusted code runs, and is immutable or a C function:
    the hook has no switch, reads no module global, no builtin by name and no ``os.path`` function
    (which the code could patch), calls no helper function of its own (its frame, which a traceback of
    a blocked call exposes, holds nothing that changes its decisions) and only looks at exact
    ``str``/``int`` copies of the arguments. Walking frames or rebinding globals and builtins therefore
    does not turn it off. It is still not a security boundary (PEP 578): the OS layers are.
    """
    _type, _issubclass, _range, _int = type, issubclass, range, int
    _str, _bytes = str, bytes
    str_copy, every = str.__getitem__, slice(None)  # exact str copy of a str subclass
    decode = bytes.decode
    int_copy = int.__add__
    lstat, readlink, getcwd, fspath = os.lstat, os.readlink, os.getcwd, os.fspath
    getpid, getpgid = os.getpid, os.getpgid
    blocked_error, blocked_import_error = SandboxBlocked, SandboxBlockedImport
    s_ifmt, s_iflnk = 0o170000, 0o120000
    allowed_write_paths = _ALLOWED_WRITE_PATHS
    write_flags = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND
    tmp_prefix = tmp.rstrip("/") + "/"
    only_tmp = "only the sandbox directory is writable"
    process_events = frozenset({"subprocess.Popen", "os.system", "os.exec", "os.spawn", "os.posix_spawn",
                                "os.posix_spawnp", "os.fork", "os.forkpty", "pty.spawn"})
    network_events = frozenset({"socket.connect", "socket.bind", "socket.getaddrinfo", "socket.gethostbyname",
                                "socket.gethostbyaddr", "socket.getnameinfo", "socket.sendto", "socket.sendmsg"})
    # modules that call C directly, load native code or create interpreters without this hook
    blocked_imports = frozenset({"ctypes", "_ctypes", "_posixsubprocess", "_xxsubinterpreters",
                                 "_xxinterpchannels", "_testcapi", "_testinternalcapi", "_testmultiphase"})
    # object introspection that could reach the hook's own function object (and its closure cells)
    introspection_events = frozenset({"gc.get_objects", "gc.get_referrers", "gc.get_referents",
                                      "cpython.PyInterpreterState_New", "ctypes.dlopen"})
    # event -> (index of path argument(s), index of dir_fd argument or None, follow the final symlink)
    path_events = types.MappingProxyType({
        "os.remove": ((0,), 1, False),
        "os.rmdir": ((0,), 1, False),
        "os.mkdir": ((0,), 2, False),
        "os.chmod": ((0,), 2, True),
        "os.chown": ((0,), 3, True),
        "os.utime": ((0,), 3, True),
        "os.truncate": ((0,), None, True),
        "os.rename": ((0, 1), 2, False),
        "os.link": ((0, 1), 2, True),
        "os.symlink": ((1,), 2, False),
        "os.setxattr": ((0,), None, True),
        "os.removexattr": ((0,), None, True),
        "shutil.rmtree": ((0,), 1, False),
    })
    watched = (process_events | network_events | introspection_events | frozenset(path_events)
               | frozenset({"open", "import", "os.kill", "os.killpg", "resource.prlimit", "sqlite3.connect"}))

    def hook(event: str, args: tuple) -> None:
        if event not in watched:
            return
        # paths to check: (argument, follow the final symlink, True: must be inside tmp / False: /proc rule)
        todo: list = []
        relative_to_fd = False
        if event == "open":
            path, mode, flags = args
            writing = False
            if _issubclass(_type(mode), _str):
                mode = str_copy(mode, every)
                writing = "w" in mode or "a" in mode or "x" in mode or "+" in mode
            if _issubclass(_type(flags), _int) and int_copy(flags, 0) & write_flags:
                writing = True
            if writing:
                todo.append((path, True, True))
            todo.append((path, True, False))
        elif event == "import":
            name = args[0]
            if _issubclass(_type(name), _str) and str_copy(name, every) in blocked_imports:
                raise blocked_import_error(f"blocked by the sandbox: import {str_copy(name, every)} (not allowed)")
            return
        elif event in process_events:
            raise blocked_error(f"blocked by the sandbox: {event} (starting processes is not allowed)")
        elif event in network_events:
            if not network:
                raise blocked_error(f"blocked by the sandbox: {event} (network access is not allowed)")
            return
        elif event in introspection_events:
            raise blocked_error(f"blocked by the sandbox: {event} (not allowed in the sandbox)")
        elif event == "sqlite3.connect":
            todo.append((args[0], True, True))
        elif event == "os.kill":
            pid = int_copy(args[0], 0)
            if pid != 0 and pid != getpid() and pid != child_pid and not (pid == -1 and exclusive_uid):
                raise blocked_error(f"blocked by the sandbox: os.kill({pid}) (signalling other processes "
                                    "is not allowed)")
            return
        elif event == "os.killpg":
            pgid = int_copy(args[0], 0)
            if pgid != 0 and pgid != getpgid(0):
                raise blocked_error(f"blocked by the sandbox: os.killpg({pgid}) (signalling other processes "
                                    "is not allowed)")
            return
        elif event == "resource.prlimit":
            pid = int_copy(args[0], 0)
            if pid != 0 and pid != getpid():
                raise blocked_error(f"blocked by the sandbox: resource.prlimit({pid}) (changing other "
                                    "processes is not allowed)")
            return
        else:
            indexes, dir_fd_index, follow = path_events[event]
            dir_fd = args[dir_fd_index] if dir_fd_index is not None else None
            relative_to_fd = dir_fd is not None and dir_fd != -1
            for i in indexes:
                todo.append((args[i], follow, True))
        for obj, follow_last, must_be_inside in todo:
            text = None
            for _ in _range(3):  # a path-like object's __fspath__ returns str or bytes
                kind = _type(obj)
                if kind is _str:
                    text = obj
                elif _issubclass(kind, _str):
                    text = str_copy(obj, every)
                elif _issubclass(kind, _bytes):
                    text = decode(obj, "utf-8", "surrogateescape")
                elif not _issubclass(kind, _int):
                    obj = fspath(obj)
                    continue
                break
            if text is None:  # a file descriptor
                continue
            shown = text
            if relative_to_fd and not text.startswith("/"):
                raise blocked_error(f"blocked by the sandbox: {event} relative to a dir_fd ({only_tmp})")
            if must_be_inside:
                if text in allowed_write_paths or (event == "sqlite3.connect" and text in ("", ":memory:")):
                    continue
            elif "proc" not in text and text.startswith("/"):
                continue
            # resolve like realpath: absolute, every symlink followed (the final one if follow_last)
            if not text.startswith("/"):
                text = getcwd() + "/" + text
            pending = text.split("/")[::-1]
            parts: list = []
            hops = 0
            while pending:
                name = pending.pop()
                if name == "" or name == ".":
                    continue
                if name == "..":
                    if parts:
                        parts.pop()
                    continue
                parts.append(name)
                if not pending and not follow_last:
                    break
                try:
                    if lstat("/" + "/".join(parts)).st_mode & s_ifmt != s_iflnk:
                        continue
                    target = readlink("/" + "/".join(parts))
                except (OSError, ValueError):
                    continue
                hops += 1
                if hops > 40:  # the kernel gives up here too (ELOOP); never call such a path inside
                    parts = ["\0symlink-loop"]
                    break
                parts.pop()
                if target.startswith("/"):
                    parts = []
                pending += target.split("/")[::-1]
            resolved = "/" + "/".join(parts)
            if must_be_inside:
                if resolved + "/" != tmp_prefix and not resolved.startswith(tmp_prefix):
                    what = f"writing {shown!r}" if event == "open" else f"{event} {shown!r}"
                    raise blocked_error(f"blocked by the sandbox: {what} ({only_tmp})")
            elif resolved.startswith("/proc/"):
                first = resolved[6:].split("/", 1)[0]
                if first.isdigit() and _int(first) != getpid():
                    raise blocked_error(f"blocked by the sandbox: opening {shown!r} (other processes' /proc files "
                                        "are off limits)")

    return hook


# --------------------------------------------------------------------------------------------------
# the worker: runs the code, answers the judge


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
            elif kind == "names":
                reply = {"ok": True, "names": _describe(namespace, op.get("want"))}
            elif kind == "call":
                target = namespace[op["name"]] if "name" in op else resolve(op.get("h"))
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


# --------------------------------------------------------------------------------------------------
# the judge: relays, runs the tests, reports


class _Worker:
    """The judge's view of the worker process: requests answered over the pipes, its RPC calls relayed."""

    def __init__(self, pid: int, out_fd: int, in_fd: int, limit: int, parent: _Channel,
                 rpc_names: frozenset[str]) -> None:
        self.pid = pid
        self._out = out_fd
        self._lines = _Lines(in_fd, limit)
        self._parent = parent
        self._rpc_names = rpc_names
        self._handles: dict[int, _Handle] = {}
        self.failed: _WorkerFailed | None = None
        """Set once the worker died or broke the protocol: nothing it says counts any more."""

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
            _, status = os.waitpid(self.pid, 0)
        except ChildProcessError:
            status = 0
        sig = os.WTERMSIG(status) if os.WIFSIGNALED(status) else None
        if sig == signal.SIGXCPU:
            self.failed = _WorkerFailed("TimeoutError: CPU time limit exceeded", "cpu")
        elif sig is not None:
            try:
                name = signal.Signals(sig).name
            except ValueError:
                name = f"signal {sig}"
            self.failed = _WorkerFailed(f"Killed: the sandboxed process died from {name}", "killed")
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


def _test_namespace(worker: _Worker, compiled: types.CodeType) -> dict[str, Any]:
    """Globals for the tests: the code's functions as calls into the worker, the standard modules it imported as
    the judge's own imports, its plain constants as copies. As when tests run in the code's own module, a name the
    code defines hides the built-in of that name (an MBPP answer is a function called ``sum``)."""
    wanted = sorted(n for n in _names_used(compiled) if not (n.startswith("__") and n.endswith("__")))
    namespace: dict[str, Any] = {"__builtins__": builtins, "__name__": "__tests__"}
    described = worker.ask({"op": "names", "want": wanted})
    names = described.get("names") if described["ok"] else None
    if type(names) is not dict:
        worker.broke("a malformed list of names")
    import importlib

    for name, entry in names.items():
        if name not in wanted or type(entry) is not dict:
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


def _run_tests(job: dict[str, Any], worker: _Worker) -> dict[str, Any]:
    """Run the code in the worker, then the tests here against it: ok only if every test passed."""
    answer = worker.ask({"op": "run"})
    if not answer["ok"]:
        return _answer_failure(answer)
    try:
        compiled = compile(job["tests"], _TESTS_FILENAME, "exec", dont_inherit=True)
    except (SyntaxError, ValueError) as exc:
        raise RuntimeError(f"the test code does not compile: {_error_line(exc)}") from None
    _SOURCE[_TESTS_FILENAME] = job["tests"]
    try:
        exec(compiled, _test_namespace(worker, compiled))
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


def _judge(job: dict[str, Any], worker: _Worker) -> dict[str, Any]:
    """The result of the run, as the judge establishes it."""
    try:
        if job.get("tests") is not None:
            return _run_tests(job, worker)
        answer = worker.ask({"op": "run"})
        if not answer["ok"]:
            return _answer_failure(answer)
        return {"ok": True, "value": answer.get("value")}
    except _WorkerFailed as exc:
        return {"ok": False, "error": exc.error, "error_kind": exc.kind, "traceback": None}


def _undumpable() -> None:
    """Make the judge non-dumpable when it kept the parent's uid (a uid change already did it): the worker, which
    has the same uid, can then neither read nor write its memory nor reopen its descriptors through /proc."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0)
    except Exception:  # no ctypes here: the parent checks results against the exit status all the same
        pass


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
        while tb is not None and tb.tb_frame.f_code.co_filename == _BOOTSTRAP_FILE:
            tb = tb.tb_next
        import traceback  # imported lazily: start-up time matters more than this path

        text = "".join(traceback.format_exception(type(exc), exc, tb))
    except BaseException:  # e.g. MemoryError while formatting: report without it
        return None
    if len(text) > _MAX_TRACEBACK_CHARS:
        text = "[... traceback trimmed ...]\n" + text[-_MAX_TRACEBACK_CHARS:]
    return text


# --------------------------------------------------------------------------------------------------
# the run


def _exclusive_uid(job: dict[str, Any]) -> bool:
    """The run has a uid of its own (so ``kill(-1)`` reaches only the run's processes)."""
    uid = os.getuid()
    return bool(job.get("exclusive_uid")) and uid == job["uid"] and uid >= _EXCLUSIVE_UID_MIN


def _read_job(fd: int) -> dict[str, Any]:
    chunks = []
    while True:
        chunk = os.read(fd, 1 << 20)
        if not chunk:
            break
        chunks.append(chunk)
    os.close(fd)
    return json.loads(b"".join(chunks))


def _make_run_dir(tmp: str, files: dict[str, str]) -> None:
    """Create the private directory (if the parent did not) and write the given files into it."""
    os.makedirs(tmp, mode=0o700, exist_ok=True)
    for name, text in files.items():
        path = os.path.join(tmp, name)
        os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
        with open(path, "w", encoding="utf-8") as fh:
            fh.write(text)


def _start_lifeline(fd: int, exclusive_uid: bool) -> None:
    """Kill the run when the parent dies: the parent alone holds the write end of pipe ``fd``.

    Reading gives EOF (or an error) only once that end is closed, i.e. the parent exited or was killed
    (a normal run ends with this process exiting first). Then every process of the run goes (all of
    the run's uid, else the process group) and this process exits; as the first process of a PID
    namespace, its exit ends the namespace as well.
    """
    read, kill, killpg, exit_now, sigkill = os.read, os.kill, os.killpg, os._exit, signal.SIGKILL

    def watch() -> None:
        try:
            while read(fd, 1):
                pass
        except BaseException:  # closed under us: the same as the parent being gone
            pass
        try:
            if exclusive_uid:
                kill(-1, sigkill)
            else:
                killpg(0, sigkill)
        finally:
            exit_now(_EXIT_PARENT_GONE)

    previous = _thread.stack_size(256 * 1024)  # the address-space limit counts thread stacks
    try:
        _thread.start_new_thread(watch, ())
    finally:
        _thread.stack_size(previous)


def _flush_std_streams() -> None:
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except BaseException:  # the code may have closed or replaced them
            pass


def main() -> None:
    """Entry point: ``_sandbox_child.py CHAN_FD REPLY_FD JOB_FD LIFELINE_FD``."""
    chan_fd, reply_fd, job_fd, life_fd = (int(a) for a in sys.argv[1:5])
    parent = _Channel(chan_fd, reply_fd)
    job: dict[str, Any] = {}
    try:
        job = _read_job(job_fd)
        _setup_paths(job["tmp"])
        if job["uid"] is not None:
            _drop_privileges(job["uid"], job["gid"])
        _make_run_dir(job["tmp"], job["files"])
        os.chdir(job["tmp"])
        os.environ.pop("PWD", None)  # set by bubblewrap (to "/"): the environment is the parent's allow-list
        _apply_limits(job["limits"])
        if hasattr(sys.stdout, "reconfigure"):
            sys.stdout.reconfigure(line_buffering=True)
        # the bootstrap's own fork_exec handle is gone: subprocess goes through the hook or fails
        _posixsubprocess.fork_exec = None
        to_worker_r, to_worker_w = os.pipe()
        to_judge_r, to_judge_w = os.pipe()
        pid = os.fork()
    except BaseException as exc:
        parent.send({"type": "fatal", "error": _error_line(exc)})
        os._exit(_EXIT_FATAL)
    if pid == 0:  # the worker: nothing of the judge's line to the parent stays open here
        try:
            for fd in (chan_fd, reply_fd, life_fd, to_worker_w, to_judge_r):
                os.close(fd)
            _worker(job, _ToJudge(to_judge_w, to_worker_r, job["max_message_bytes"]))
        finally:
            os._exit(0)
    status = _EXIT_FATAL
    try:
        os.close(to_worker_r)
        os.close(to_judge_w)
        _start_lifeline(life_fd, _exclusive_uid(job))
        if job["uid"] is None:
            _undumpable()
        sys.path[:] = [p for p in sys.path if p != job["tmp"]]  # the worker writes there: never import from it
        sys.path_importer_cache.clear()
        sys.addaudithook(_make_audit_hook(job["tmp"], job["network"], _exclusive_uid(job), pid))
        worker = _Worker(pid, to_worker_w, to_judge_r, job["max_message_bytes"], parent,
                         frozenset(job["rpc_names"]))
        parent.send({"type": "started"})
    except BaseException as exc:
        parent.send({"type": "fatal", "error": _error_line(exc)})
        os._exit(_EXIT_FATAL)
    try:
        result = _judge(job, worker)
        worker.kill()
        _flush_std_streams()
        try:
            parent.send({"type": "result", **result})
        except (TypeError, ValueError, RecursionError) as exc:  # e.g. a value json can't re-encode
            result = {"ok": False, "value": None, "error": _error_line(exc), "error_kind": "output"}
            parent.send({"type": "result", **result})
        status = _EXIT_OK if result["ok"] else _EXIT_FAILED
    except BaseException as exc:  # the judge itself failed: the sandbox, not the code
        try:
            parent.send({"type": "fatal", "error": f"the sandbox judge failed: {_error_line(exc)}"})
        except BaseException:
            pass
    finally:
        _flush_std_streams()
        if _exclusive_uid(job):
            try:
                os.kill(-1, signal.SIGKILL)  # every other process of this run's private uid
            except OSError:
                pass
        os._exit(status)


if __name__ == "__main__":
    main()
