"""What confines the sandbox child before any untrusted code runs: resource limits, the privilege drop, import
paths, the audit hook, and a judge its worker cannot reach into nor end with a signal."""

from __future__ import annotations

import _thread
import os
import resource
import signal
import site
import sys
import types

from .errors import SandboxBlocked, SandboxBlockedImport

TYPE_CHECKING = False  # not importing typing keeps the child's start-up fast
if TYPE_CHECKING:
    from collections.abc import Callable

_ALLOWED_WRITE_PATHS = frozenset({"/dev/null", "/dev/stdout", "/dev/stderr"})
_PR_SET_DUMPABLE = 4


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


def _undumpable() -> None:
    """Make the judge non-dumpable when it kept the parent's uid (a uid change already did it): the worker, which
    has the same uid, can then neither read nor write its memory nor reopen its descriptors through /proc."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0)
    except Exception:  # no ctypes here: the parent checks results against the exit status all the same
        pass


def _guarded_signals() -> set[int]:
    """The signals a process could send the judge to end it: every catchable one whose default action ends a process,
    but the faults of its own code (SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGTRAP, SIGSYS) and the two Python ignores
    (SIGPIPE, SIGXFSZ)."""
    names = ("SIGHUP", "SIGINT", "SIGQUIT", "SIGABRT", "SIGUSR1", "SIGUSR2", "SIGALRM", "SIGTERM", "SIGXCPU",
             "SIGVTALRM", "SIGPROF", "SIGIO", "SIGPWR", "SIGSTKFLT")
    found = {int(getattr(signal, name)) for name in names if hasattr(signal, name)}
    return found | set(range(signal.SIGRTMIN, signal.SIGRTMAX + 1))


def _guard_signals(on_sent: Callable[[int], None]) -> None:
    """Handle the judge's `_guarded_signals` (call it in its main thread), so that no process can end the judge with
    one (SIGKILL and SIGSTOP cannot be handled; they end or stop it, and the run fails all the same). A SIGXCPU at the
    CPU limit (this process's CPU time reached it) ends it as it would have; any other is ``on_sent(signal)``, once:
    the worker, the only other process in the sandbox, sent it.

    The handler runs in the main thread (Python's rule), before it reads whatever the worker wrote after sending the
    signal: the kernel delivers a pending signal before a read returns, and no other thread of the judge takes one
    (`_start_quiet_thread`). While the main thread computes in C (a huge power in a test), a handler waits; at the
    CPU limit, the hard limit's SIGKILL then ends the judge a second later."""
    told = [False]
    cpu_signal, getrlimit, getrusage = signal.SIGXCPU, resource.getrlimit, resource.getrusage

    def handle(signum: int, frame: object) -> None:
        if signum == cpu_signal:
            soft = getrlimit(resource.RLIMIT_CPU)[0]
            usage = getrusage(resource.RUSAGE_SELF)
            if soft != resource.RLIM_INFINITY and usage.ru_utime + usage.ru_stime + 0.05 >= soft:
                signal.signal(cpu_signal, signal.SIG_DFL)
                signal.raise_signal(cpu_signal)  # the default action: the process ends, as it would have
        if not told[0]:
            told[0] = True
            on_sent(signum)

    for signum in _guarded_signals():
        signal.signal(signum, handle)


def _start_quiet_thread(function: Callable[[], None]) -> None:
    """Start ``function`` in a thread that takes none of the `_guarded_signals` (they are the main thread's) and has
    a small stack (the address-space limit counts thread stacks)."""
    guarded = _guarded_signals()
    signal.pthread_sigmask(signal.SIG_BLOCK, guarded)  # a new thread blocks what the thread that starts it blocks
    previous = _thread.stack_size(256 * 1024)
    try:
        _thread.start_new_thread(function, ())
    finally:
        _thread.stack_size(previous)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, guarded)


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
