"""Bootstrap of a sandbox child process (see `masforge.runtime.sandbox` and `masforge.runtime.isolation`).

This file is run as a script by a fresh interpreter
(``python -S -P -s _sandbox_child.py CHAN REPLY JOB LIFELINE``, all four file descriptors), usually
inside the namespaces of `masforge.runtime.isolation`; it is never imported by the parent. It imports only
the standard library, so the child starts fast and shares nothing with the parent.

Steps, in order:

1. read the job (JSON, from an in-memory file the parent filled);
2. when the parent asks for it (parent runs as root), drop to the run's uid/gid for good. Directories
   on ``sys.path`` that this uid cannot reach (e.g. a Python installed under ``/root``) stay
   importable through directory descriptors opened before the drop (``/proc/self/fd/N`` paths);
3. create the private run directory (unless the parent did) and write the job's files into it, as
   that uid;
4. set resource limits (address space, CPU, file size, processes, core dumps, open files) and start
   the lifeline thread (kills the run when the parent dies);
5. compile the code, install the audit hook, run the code as module ``__sandbox__`` (and the entry
   function, if any);
6. report one JSON result line on the channel, kill every other process of the sandbox uid (only
   when that uid is exclusive to this run) and ``os._exit``.

Protocol on the channel (JSON lines, child -> parent on CHAN, parent -> child on REPLY):

* ``{"type": "rpc", "method": m, "args": [...], "kwargs": {...}}`` answered by
  ``{"ok": true, "result": r}`` or ``{"ok": false, "error": "..."}``;
* ``{"type": "result", "ok": ..., "value": ..., "error": ..., "error_kind": ..., "traceback": ...}``;
* ``{"type": "fatal", "error": "..."}`` when the sandbox could not be set up.
"""

from __future__ import annotations

import _posixsubprocess
import _thread
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
    from collections.abc import Callable
    from typing import Any

_BOOTSTRAP_FILE = os.path.abspath(__file__)
_CODE_FILENAME = "<code>"
# Not "__main__": `if __name__ == "__main__":` blocks (demo code, reading stdin) do not run, as in
# the official HumanEval harness. sys.modules["__main__"] is aliased to the module all the same.
_MODULE_NAME = "__sandbox__"
_MAX_TRACEBACK_CHARS = 6000
_MAX_ERROR_CHARS = 500
_EXCLUSIVE_UID_MIN = 1_000_000  # never kill(-1) as a uid below this (could be a real user)
_ALLOWED_WRITE_PATHS = frozenset({"/dev/null", "/dev/stdout", "/dev/stderr"})
_EXIT_FATAL = 70
_EXIT_PARENT_GONE = 75


class SandboxBlocked(PermissionError):
    """Raised by the audit hook for a forbidden operation (shown as ``PermissionError``)."""


class SandboxBlockedImport(ImportError):
    """Raised by the audit hook for a forbidden import (shown as ``ImportError``)."""


# Show the hook's errors under the familiar builtin names in tracebacks and error lines.
for _cls, _name in ((SandboxBlocked, "PermissionError"), (SandboxBlockedImport, "ImportError")):
    _cls.__name__ = _cls.__qualname__ = _name
    _cls.__module__ = "builtins"


class _Channel:
    """The child's end of the RPC / result channel."""

    def __init__(self, out_fd: int, in_fd: int) -> None:
        self._out = out_fd
        self._in = os.fdopen(in_fd, "rb")
        self._lock = _thread.allocate_lock()

    def _write(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            written = os.write(self._out, view)
            view = view[written:]

    def send(self, message: dict[str, Any]) -> None:
        """Send one message (raises TypeError/ValueError if it is not JSON-serializable)."""
        data = (json.dumps(message) + "\n").encode("utf-8")
        with self._lock:
            self._write(data)

    def call(self, method: str, args: list[Any], kwargs: dict[str, Any]) -> Any:
        """Send an RPC request and block for the parent's reply."""
        try:
            data = json.dumps({"type": "rpc", "method": method, "args": args, "kwargs": kwargs})
        except (TypeError, ValueError) as exc:
            raise TypeError(f"arguments of {method}() must be JSON-serializable: {exc}") from None
        with self._lock:
            self._write((data + "\n").encode("utf-8"))
            line = self._in.readline()
        if not line:
            raise RuntimeError(f"{method}(): the sandbox RPC channel is closed")
        reply = json.loads(line)
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


def _make_audit_hook(tmp: str, network: bool, exclusive_uid: bool) -> Callable[[str, tuple], None]:
    """The defense-in-depth hook: no processes, no network, no writes outside ``tmp``, no ctypes.

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
            if pid != 0 and pid != getpid() and not (pid == -1 and exclusive_uid):
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
# running the code and reporting


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


_SOURCE: list[str] = []  # the code, registered with linecache when a traceback is formatted


def _format_syntax_error(exc: BaseException) -> str:
    import traceback

    return "".join(traceback.format_exception_only(type(exc), exc))


def _format_traceback(exc: BaseException) -> str | None:
    try:
        import linecache

        if _SOURCE:
            lines = _SOURCE[0].splitlines(True)
            linecache.cache[_CODE_FILENAME] = (len(_SOURCE[0]), None, lines, _CODE_FILENAME)
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


async def _await(awaitable: Any) -> Any:
    return await awaitable


def _run(job: dict[str, Any], channel: _Channel) -> dict[str, Any]:
    """Compile and run the code; return the result message."""
    code: str = job["code"]
    entry: str | None = job["entry"]
    module = types.ModuleType(_MODULE_NAME)
    namespace = module.__dict__
    namespace["__builtins__"] = builtins
    namespace["__file__"] = os.path.join(job["tmp"], _MODULE_NAME + ".py")
    for name in job["rpc_names"]:
        namespace[name] = channel.make_function(name)
    sys.modules[_MODULE_NAME] = sys.modules["__main__"] = module
    try:
        compiled = compile(code, _CODE_FILENAME, "exec", dont_inherit=True)
    except (SyntaxError, ValueError) as exc:
        return {
            "type": "result",
            "ok": False,
            "value": None,
            "error": _error_line(exc),
            "error_kind": "syntax",
            "traceback": _format_syntax_error(exc),
        }
    _SOURCE.append(code)
    reserve: bytearray | None = bytearray(4 << 20)  # freed on MemoryError so reporting still works
    sys.addaudithook(_make_audit_hook(job["tmp"], job["network"], _exclusive_uid(job)))
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
        kind = _error_kind(exc)
        if kind == "memory":
            namespace.clear()
        result = {
            "type": "result",
            "ok": False,
            "value": None,
            "error": _error_line(exc),
            "error_kind": kind,
            "traceback": _format_traceback(exc),
        }
        exc.__traceback__ = None
        return result
    del reserve
    try:
        json.dumps(value)
    except (TypeError, ValueError, RecursionError) as exc:
        what = f"the return value of {entry}()" if entry else "the return value"
        return {
            "type": "result",
            "ok": False,
            "value": None,
            "error": f"{type(exc).__name__}: {what} is not JSON-serializable: {exc}",
            "error_kind": "output",
            "traceback": None,
        }
    return {
        "type": "result",
        "ok": True,
        "value": value,
        "error": None,
        "error_kind": None,
        "traceback": None,
    }


def _flush_std_streams() -> None:
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except BaseException:  # the code may have closed or replaced them
            pass


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


def main() -> None:
    """Entry point: ``_sandbox_child.py CHAN_FD REPLY_FD JOB_FD LIFELINE_FD``."""
    chan_fd, reply_fd, job_fd, life_fd = (int(a) for a in sys.argv[1:5])
    channel = _Channel(chan_fd, reply_fd)
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
        _start_lifeline(life_fd, _exclusive_uid(job))
        if hasattr(sys.stdout, "reconfigure"):
            sys.stdout.reconfigure(line_buffering=True)
        # the bootstrap's own fork_exec handle is gone: subprocess goes through the hook or fails
        _posixsubprocess.fork_exec = None
    except BaseException as exc:
        channel.send({"type": "fatal", "error": _error_line(exc)})
        os._exit(_EXIT_FATAL)
    channel.send({"type": "started"})
    try:
        result = _run(job, channel)
        _flush_std_streams()
        try:
            channel.send(result)
        except (TypeError, ValueError, RecursionError) as exc:  # e.g. a value json can't re-encode
            error = _error_line(exc)
            channel.send({**result, "ok": False, "value": None, "error": error, "error_kind": "output"})
    except BaseException as exc:  # a failure while reporting: report it as plainly as possible
        kind = "memory" if isinstance(exc, MemoryError) else "exception"
        result = {"type": "result", "ok": False, "value": None, "error": type(exc).__name__}
        try:
            channel.send({**result, "error_kind": kind, "traceback": None})
        except BaseException:
            pass
    finally:
        _flush_std_streams()
        if _exclusive_uid(job):
            try:
                os.kill(-1, signal.SIGKILL)  # every other process of this run's private uid
            except OSError:
                pass
        os._exit(0)


if __name__ == "__main__":
    main()
