"""Run untrusted Python (code written by an LLM) in an isolated child process.

Everything untrusted that masforge executes goes through `run_python`: code genomes (a generated
``forward(...)`` whose LLM calls come back to the parent over a narrow RPC channel), benchmark metrics
(a code answer run against its unit tests, see `run_tests`) and the agents' ``python`` tool. The code
never runs in the parent process; the parent keeps the API keys, counts cost and enforces budgets.

How a call works: a fresh interpreter (``sys.executable -S -P -s``) runs the stdlib-only bootstrap
``masforge/_sandbox_child.py`` in a new private directory. The bootstrap sets the limits, drops
privileges, installs an audit hook and runs the code as module ``__sandbox__`` (then the ``entry``
function, if given). The module is not named ``__main__``, so ``if __name__ == "__main__":`` blocks
do not run (as in the official HumanEval harness: a solution's demo code or ``input()`` cannot
break its tests, an entry call does not run demo code); ``sys.modules["__main__"]`` is aliased to it.
The child's result and its RPC requests travel as JSON lines over a dedicated pipe pair
(passed with ``pass_fds``), separate from the captured stdout/stderr. The parent serves RPC requests
with the caller's handler and watches the wall clock; time spent serving RPC does not count.

Enforced (Linux):

* **Private directory**: a fresh temporary directory is the working directory, ``HOME`` and
  ``TMPDIR``; it is removed afterwards. ``files`` are written into it before the code runs.
* **Scrubbed environment**: built from an allow-list, not filtered: ``PATH`` (fixed system value),
  ``LANG=C.UTF-8``, ``PYTHONHASHSEED=0``, ``HOME`` and ``TMPDIR``. No API keys or tokens reach the
  child. (``-E`` is not used so that ``PYTHONHASHSEED`` takes effect; the environment holds no other
  ``PYTHON*`` variable, so this is equivalent to ``-I`` plus a fixed hash seed.)
* **Fresh interpreter**: ``-S`` (no ``site``: no ``.pth`` files, so not even masforge's editable
  install is importable by default), ``-P`` (the bootstrap's directory is not on ``sys.path``),
  ``-s`` (no user site). ``sys.path`` is the private directory, the stdlib and the interpreter's
  site-packages (plain directory only, ``.pth`` files are not processed). Parent fds are closed.
* **Process group**: the child starts a new session; on wall timeout the whole group gets SIGKILL,
  and when the child exits any remaining group member gets SIGKILL too.
* **Resource limits** (set by the bootstrap before any untrusted code runs, see below why not in a
  ``preexec_fn``): ``RLIMIT_AS`` (memory_mb), ``RLIMIT_CPU`` (cpu_s soft, +1 s hard),
  ``RLIMIT_FSIZE`` (file_size_mb), ``RLIMIT_NPROC`` (max_processes; counts threads too),
  ``RLIMIT_CORE=0``, ``RLIMIT_NOFILE=256``. A limit is never raised above the parent's hard limit.
* **Unprivileged uid (when the parent is root)**: root ignores ``RLIMIT_NPROC`` and file
  permissions, so the child drops to an unprivileged uid/gid before running the code. Each run gets
  its *own* uid (``1_500_000_000 + slot``, slots claimed with ``flock`` on lock files, so also
  exclusive across processes) rather than the shared ``nobody``: concurrent sandboxes then cannot
  signal, ``prlimit`` or read each other, and ``max_processes`` is per run instead of a quota shared
  by all concurrent runs. The private directory is owned by that uid (mode 0700). Because the uid
  is exclusive, the bootstrap kills every other process of its uid before exiting, and after an
  abnormal end (timeout, signal, no result) the parent finds that uid's processes in ``/proc`` and
  kills them, so even processes that escaped the process group die. When the parent is not root
  the uid is kept (``RLIMIT_NPROC`` then counts all processes of that user, and files readable by
  that user are readable by the code).
  Directories of ``sys.path`` that the unprivileged uid cannot reach (e.g. a Python under
  ``/root``) stay importable read-only through directory fds opened before the drop.
* **No network**: when ``unshare`` can create a network namespace (probed once and cached:
  ``unshare --net true`` as root, ``unshare --net --map-root-user true`` otherwise), the child runs
  in a fresh one (loopback down: no network at all, not even ``127.0.0.1``). Unless
  ``limits.network`` is true, of course.
* **Audit hook** (defense in depth, always installed after the bootstrap's own imports and before
  the code runs): raises ``PermissionError`` on ``socket.connect/bind/getaddrinfo/gethostbyname/
  gethostbyaddr/getnameinfo/sendto/sendmsg`` (unless ``limits.network``), ``subprocess.Popen``,
  ``os.system``, ``os.exec*``, ``os.spawn*``, ``os.posix_spawn*``, ``os.fork``, ``os.forkpty``,
  ``pty.spawn``, ``ctypes.dlopen``, signalling or ``prlimit``-ing other processes, opening a file for
  writing and ``remove/rename/mkdir/rmdir/chmod/chown/utime/truncate/link/symlink/xattr`` outside the
  private directory (``/dev/null``, ``/dev/stdout``, ``/dev/stderr`` are allowed), an sqlite
  database file outside it, opening
  ``/proc/<pid>/...`` of another process (e.g. the parent's ``environ``). Importing ``ctypes`` (or
  re-importing ``_posixsubprocess``) raises ``ImportError``; the bootstrap's own
  ``_posixsubprocess.fork_exec`` is removed. These are reported with ``error_kind="blocked"``.
* **Classification**: ``MemoryError`` -> ``"memory"``, SIGXCPU / CPU limit -> ``"cpu"``, wall clock ->
  ``"timeout"``, blocked operation -> ``"blocked"``, ``SyntaxError`` of the code -> ``"syntax"``,
  non-JSON return value -> ``"output"``, other exception (including ``SystemExit``, so a solution
  cannot skip its tests with ``sys.exit(0)``) -> ``"exception"``, death by another signal or exit
  without a result -> ``"killed"``.

Not enforced / limits of this design:

* The audit hook is not a security boundary (PEP 578): code that sets out to defeat it (e.g. with
  an unaudited C-level function or interpreter-memory tricks) may manage. What then still holds
  is the process boundary, the unprivileged uid, the rlimits, the network namespace and the
  scrubbed environment; without root and without ``unshare`` only the process boundary, the rlimits
  and the environment hold.
* Reading is not restricted: files readable by everyone (e.g. a world-readable ``.env`` in the
  project or the source tree) are readable from the sandbox. Keep secrets in the environment or in
  files that are not world-readable.
* No disk quota: ``RLIMIT_FSIZE`` caps each file, not the number of files in the private directory.
* No filesystem namespace, seccomp or cgroup: the child sees the host's filesystem (read-only for
  it where permissions say so), ``/proc`` and the host's pids. ``RLIMIT_AS`` limits address space,
  not resident memory of the machine as a whole.
* The child's result is reported by the child: code that deliberately forges the protocol (writing
  to the channel fd itself) can fake its own result. The sandbox protects the host, not the
  integrity of a score against adversarial code.
* ``os.open(..., dir_fd=...)`` is audited without its ``dir_fd``, and some C-level file creation is
  not audited at all (``os.mkfifo``, ``os.mknod``, some extension modules): such writes are limited
  by file permissions only (with root: the unprivileged uid can still create entries in
  world-writable directories such as ``/tmp``).
* POSIX/Linux only (``pidfd_open``, ``unshare``, rlimits).

Why the limits are not set in a ``preexec_fn``: ``preexec_fn`` runs Python code between ``fork`` and
``exec`` and is documented as unsafe in a multi-threaded parent (possible deadlock), and evaluations
call `run_python` from many threads. The bootstrap sets them instead, before any untrusted code runs,
which is equivalent for the code under test; `subprocess.Popen` then needs no Python code in the
forked child.
"""

from __future__ import annotations

import fcntl
import json
import math
import os
import selectors
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from masforge.errors import BudgetExceeded, SandboxError

__all__ = ["RpcHandler", "SandboxLimits", "SandboxResult", "run_python", "run_tests"]

RpcHandler = Callable[[str, dict[str, Any]], Any]
"""``(method, {"args": [...], "kwargs": {...}}) -> JSON-able result``; raising sends the error back
to the child, where it is raised as ``RuntimeError("<ExceptionType>: <message>")``."""

_CHILD_SCRIPT = str(Path(__file__).resolve().with_name("_sandbox_child.py"))
_JOB_FILE = ".masforge-sandbox-job.json"
_SAFE_PATH = "/usr/local/bin:/usr/bin:/bin"
_MAX_OPEN_FILES = 256
_MAX_MESSAGE_BYTES = 64 * 1024 * 1024
_DRAIN_GRACE_S = 2.0
_READ_CHUNK = 65536
_UID_BASE = 1_500_000_000
_UID_SLOTS = 65536
_EXIT_FATAL = 70


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
    """Captured stdout and stderr (each) are truncated beyond this."""
    network: bool = False
    """Allow network access (no network namespace, the audit hook lets sockets through)."""

    def effective_cpu_s(self) -> int:
        """The CPU limit actually applied."""
        return self.cpu_s if self.cpu_s is not None else math.ceil(self.timeout_s) + 1

    def validate(self) -> None:
        """Raise ValueError for a limit that cannot work."""
        if not self.timeout_s > 0:
            raise ValueError(f"SandboxLimits.timeout_s must be > 0, got {self.timeout_s!r}")
        for name in ("memory_mb", "file_size_mb", "max_processes", "max_output_bytes"):
            value = getattr(self, name)
            if not isinstance(value, int) or value <= 0:
                raise ValueError(f"SandboxLimits.{name} must be a positive int, got {value!r}")
        if self.cpu_s is not None and (not isinstance(self.cpu_s, int) or self.cpu_s <= 0):
            raise ValueError(f"SandboxLimits.cpu_s must be a positive int or None, got {self.cpu_s!r}")


@dataclass
class SandboxResult:
    """What happened to one sandboxed run (a failing run is a result, not an exception)."""

    ok: bool
    """The code ran and the entry function (if any) returned without exception."""
    value: Any
    """JSON-decoded return value of the entry function (None without entry or on failure)."""
    error: str | None
    """One line, e.g. ``"ZeroDivisionError: division by zero"``; None when ok."""
    error_kind: str | None
    """timeout, memory, cpu, exception, syntax, killed, blocked or output; None when ok."""
    traceback: str | None
    """The child's traceback text without the bootstrap's frames, trimmed (for a meta-agent)."""
    stdout: str
    stderr: str
    duration_s: float
    """Wall time of the whole call, including time spent serving RPC."""
    rpc_calls: int


# --------------------------------------------------------------------------------------------------
# one-time probes and per-run uid leases


_probe_lock = threading.Lock()
_netns_prefix: list[str] | None = None


def _netns_command() -> list[str]:
    """The ``unshare`` prefix that puts the child in a fresh network namespace, or [] (cached)."""
    global _netns_prefix
    with _probe_lock:
        if _netns_prefix is None:
            _netns_prefix = _probe_netns()
        return _netns_prefix


def _probe_netns() -> list[str]:
    exe = shutil.which("unshare")
    true = shutil.which("true")
    if exe is None or true is None:
        return []
    prefix = [exe, "--net"] if os.geteuid() == 0 else [exe, "--net", "--map-root-user"]
    try:
        probe = subprocess.run(
            [*prefix, "--", true],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            env={"PATH": _SAFE_PATH},
            timeout=10,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return []
    return prefix if probe.returncode == 0 else []


def network_namespace_available() -> bool:
    """Whether sandboxed code runs in its own network namespace (no network at all)."""
    return bool(_netns_command())


def _uid_lock_dir() -> str:
    base = next((d for d in ("/run/lock", "/var/lock") if os.path.isdir(d)), tempfile.gettempdir())
    path = os.path.join(base, "masforge-sandbox-uids")
    try:
        os.mkdir(path, 0o700)
    except FileExistsError:
        pass
    st = os.lstat(path)
    if not os.path.isdir(path) or os.path.islink(path) or st.st_uid != 0 or st.st_mode & 0o077:
        raise SandboxError(f"{path} is not a root-owned private directory; remove it and retry")
    return path


class _UidLease:
    """An unprivileged uid/gid used by exactly one sandbox run at a time (flock on a lock file)."""

    def __init__(self) -> None:
        directory = _uid_lock_dir()
        for slot in range(_UID_SLOTS):
            flags = os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC
            fd = os.open(os.path.join(directory, str(slot)), flags, 0o600)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                continue
            self.uid = self.gid = _UID_BASE + slot
            self._fd: int | None = fd
            return
        raise SandboxError("no free sandbox uid: too many concurrent sandbox runs")

    def release(self) -> None:
        """Give the uid back (closing the fd drops the lock)."""
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


# --------------------------------------------------------------------------------------------------
# the parent side of one run


class _Capture:
    """stdout or stderr of the child, kept up to a byte limit."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.data = bytearray()
        self.dropped = 0

    def add(self, chunk: bytes) -> None:
        room = self.limit - len(self.data)
        if room > 0:
            self.data += chunk[:room]
        self.dropped += max(0, len(chunk) - max(room, 0))

    def text(self) -> str:
        text = self.data.decode("utf-8", errors="replace")
        if self.dropped:
            text += f"\n[... {self.dropped} more bytes truncated ...]"
        return text


class _Supervisor:
    """Pumps the child's pipes, serves RPC, enforces the wall clock; one instance per run."""

    def __init__(
        self,
        proc: subprocess.Popen[bytes],
        chan_r: int,
        reply_w: int,
        limits: SandboxLimits,
        rpc: RpcHandler | None,
        rpc_names: frozenset[str],
    ) -> None:
        self.proc = proc
        self.pgid = proc.pid  # start_new_session: the child leads its own group
        self.chan_r = chan_r
        self.reply_w = reply_w
        self.limits = limits
        self.rpc = rpc
        self.rpc_names = rpc_names
        self.stdout = _Capture(limits.max_output_bytes)
        self.stderr = _Capture(limits.max_output_bytes)
        self.result: dict[str, Any] | None = None
        self.fatal: str | None = None
        self.started = False
        self.protocol_error: str | None = None
        self.timed_out = False
        self.exited = False
        self.reaped = False
        self.rpc_calls = 0
        self.returncode: int | None = None
        self.cpu_s_used = 0.0
        self._chan_buf = bytearray()
        self._reply_buf = bytearray()
        self._sel = selectors.DefaultSelector()
        self._pidfd: int | None = None

    # -- process control --------------------------------------------------------------------------

    def kill_group(self) -> None:
        """SIGKILL the child's process group (safe until the child is reaped: the pgid is pinned)."""
        if self.reaped:
            return
        try:
            os.killpg(self.pgid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass

    def _has_exited(self) -> bool:
        try:
            info = os.waitid(os.P_PID, self.proc.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
        except ChildProcessError:
            return True
        return info is not None

    def reap(self) -> None:
        """Wait for the child (after it exited or was killed) and record status and CPU time."""
        if self.reaped:
            return
        try:
            _, status, usage = os.wait4(self.proc.pid, 0)
        except ChildProcessError:
            self.returncode = self.proc.returncode
        else:
            self.returncode = os.waitstatus_to_exitcode(status)
            self.cpu_s_used = usage.ru_utime + usage.ru_stime
            self.proc.returncode = self.returncode
        self.reaped = True

    # -- the loop ---------------------------------------------------------------------------------

    def run(self) -> None:
        """Pump until the child has exited and its pipes are drained (or the grace period ends)."""
        sel = self._sel
        assert self.proc.stdout is not None and self.proc.stderr is not None
        streams = {self.proc.stdout.fileno(): self.stdout, self.proc.stderr.fileno(): self.stderr}
        for fd in (*streams, self.chan_r, self.reply_w):
            os.set_blocking(fd, False)
        for fd in streams:
            sel.register(fd, selectors.EVENT_READ, "stream")
        sel.register(self.chan_r, selectors.EVENT_READ, "chan")
        try:
            self._pidfd = os.pidfd_open(self.proc.pid)
        except (AttributeError, OSError):
            self._pidfd = None
        else:
            sel.register(self._pidfd, selectors.EVENT_READ, "exit")
        open_inputs = len(streams) + 1
        deadline = time.monotonic() + self.limits.timeout_s
        exit_time = 0.0
        while True:
            now = time.monotonic()
            if not self.exited and self._pidfd is None and self._has_exited():
                self._on_exit()
                exit_time = now
            if self.exited:
                if open_inputs == 0 or now >= exit_time + _DRAIN_GRACE_S:
                    return
                wait = exit_time + _DRAIN_GRACE_S - now
            else:
                if now >= deadline and not self.timed_out:
                    self.timed_out = True
                    self.kill_group()
                if self.timed_out:
                    if now >= deadline + 10.0:  # SIGKILLed but not gone (uninterruptible sleep?)
                        return
                    wait = 0.1
                else:
                    wait = deadline - now
            if self._pidfd is None:
                wait = min(wait, 0.02)
            for key, _ in sel.select(max(wait, 0.0)):
                kind = key.data
                if kind == "exit":
                    sel.unregister(key.fd)
                    self._on_exit()
                    exit_time = time.monotonic()
                elif kind == "stream":
                    if not self._read_stream(key.fd, streams[key.fd]):
                        open_inputs -= 1
                elif kind == "chan":
                    spent, still_open = self._read_channel()
                    deadline += spent  # time spent serving RPC does not count
                    if not still_open:
                        open_inputs -= 1
                elif kind == "reply":
                    self._flush_replies()

    def _on_exit(self) -> None:
        self.exited = True
        self.kill_group()  # leftovers of the group; the zombie leader keeps the pgid pinned

    def _read_stream(self, fd: int, capture: _Capture) -> bool:
        try:
            chunk = os.read(fd, _READ_CHUNK)
        except BlockingIOError:
            return True
        if not chunk:
            self._sel.unregister(fd)
            return False
        capture.add(chunk)
        return True

    def _read_channel(self) -> tuple[float, bool]:
        """Read and handle channel messages; return (RPC time spent, channel still open)."""
        try:
            chunk = os.read(self.chan_r, _READ_CHUNK)
        except BlockingIOError:
            return 0.0, True
        if not chunk:
            self._sel.unregister(self.chan_r)
            return 0.0, False
        self._chan_buf += chunk
        spent = 0.0
        while True:
            newline = self._chan_buf.find(b"\n")
            if newline < 0:
                break
            line = bytes(self._chan_buf[:newline])
            del self._chan_buf[: newline + 1]
            spent += self._on_message(line)
        if len(self._chan_buf) > _MAX_MESSAGE_BYTES:
            limit_mb = _MAX_MESSAGE_BYTES // (1024 * 1024)
            self.protocol_error = f"ValueError: a message from the sandboxed code exceeds {limit_mb} MB"
            self._chan_buf.clear()
            self._sel.unregister(self.chan_r)
            self.kill_group()
            return spent, False
        return spent, True

    def _on_message(self, line: bytes) -> float:
        try:
            message = json.loads(line)
        except ValueError:
            return 0.0  # not ours (the code wrote to the channel fd); ignore
        if not isinstance(message, dict):
            return 0.0
        kind = message.get("type")
        if kind == "rpc":
            return self._serve_rpc(message)
        if kind == "result":
            self.result = message
        elif kind == "started":
            self.started = True
        elif kind == "fatal":
            self.fatal = str(message.get("error"))
        return 0.0

    def _serve_rpc(self, message: dict[str, Any]) -> float:
        self.rpc_calls += 1
        start = time.monotonic()
        method = message.get("method")
        args = message.get("args")
        kwargs = message.get("kwargs")
        try:
            if self.rpc is None or method not in self.rpc_names:
                raise LookupError(f"unknown RPC method {method!r}")
            if not isinstance(args, list) or not isinstance(kwargs, dict):
                raise TypeError("malformed RPC request")
            result = self.rpc(method, {"args": args, "kwargs": kwargs})
            reply = json.dumps({"ok": True, "result": result})
        except BudgetExceeded:
            self.kill_group()  # a budget is a hard stop for the whole evaluation, not an RPC error
            raise
        except Exception as exc:
            text = str(exc)
            error = f"{type(exc).__name__}: {text}" if text else type(exc).__name__
            reply = json.dumps({"ok": False, "error": error})
        self._reply_buf += reply.encode("utf-8") + b"\n"
        self._flush_replies()
        return time.monotonic() - start

    def _flush_replies(self) -> None:
        while self._reply_buf:
            try:
                written = os.write(self.reply_w, self._reply_buf)
            except BlockingIOError:
                break
            except (BrokenPipeError, OSError):
                self._reply_buf.clear()
                break
            del self._reply_buf[:written]
        registered = self.reply_w in self._sel.get_map()
        if self._reply_buf and not registered:
            self._sel.register(self.reply_w, selectors.EVENT_WRITE, "reply")
        elif not self._reply_buf and registered:
            self._sel.unregister(self.reply_w)

    def close(self) -> None:
        """Release the selector and the pidfd."""
        self._sel.close()
        if self._pidfd is not None:
            os.close(self._pidfd)
            self._pidfd = None

    # -- verdict ----------------------------------------------------------------------------------

    def verdict(self) -> tuple[bool, Any, str | None, str | None, str | None]:
        """(ok, value, error, error_kind, traceback) from what was observed."""
        limits = self.limits
        if self.result is not None:
            r = self.result
            ok = bool(r.get("ok"))
            error, kind = r.get("error"), r.get("error_kind")
            if kind == "memory" and error == "MemoryError":
                error = f"MemoryError: out of memory (limit {limits.memory_mb} MB)"
            return ok, r.get("value") if ok else None, error, kind, r.get("traceback")
        if self.protocol_error is not None:
            return False, None, self.protocol_error, "output", None
        if self.fatal is not None:
            raise SandboxError(f"the sandbox could not be set up: {self.fatal}")
        if self.timed_out:
            return False, None, f"TimeoutError: killed after {float(limits.timeout_s)} s", "timeout", None
        if not self.started:
            tail = self.stderr.text().strip().splitlines()[-1:] or [f"exit status {self.returncode}"]
            raise SandboxError(f"the sandbox child failed to start: {tail[0]}")
        code = self.returncode
        cpu_limit = limits.effective_cpu_s()
        if code is not None and code < 0:
            sig = -code
            if sig == signal.SIGXCPU or (sig == signal.SIGKILL and self.cpu_s_used >= cpu_limit):
                return False, None, f"TimeoutError: CPU time limit of {cpu_limit} s exceeded", "cpu", None
            try:
                name = signal.Signals(sig).name
            except ValueError:
                name = f"signal {sig}"
            return False, None, f"Killed: the sandboxed process died from {name}", "killed", None
        if "MemoryError" in self.stderr.text()[-2000:]:
            return False, None, f"MemoryError: out of memory (limit {limits.memory_mb} MB)", "memory", None
        error = f"SystemExit: the sandboxed process exited with status {code} before reporting a result"
        return False, None, error, "killed", None


# --------------------------------------------------------------------------------------------------
# public API


def _check_json(name: str, value: Any) -> None:
    try:
        json.dumps(value)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"run_python: {name} must be JSON-serializable: {exc}") from None


def _write_files(tmp: str, files: dict[str, str], owner: tuple[int, int] | None) -> None:
    root = Path(tmp)
    for name, text in files.items():
        rel = Path(name)
        if rel.is_absolute() or not rel.parts or ".." in rel.parts or name == _JOB_FILE:
            raise ValueError(f"run_python: file name {name!r} must be a plain relative path")
        target = root / rel
        created = [p for p in reversed(target.parents) if p != root and root in p.parents and not p.exists()]
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
        if owner is not None:
            for path in (*created, target):
                os.chown(path, *owner)


def _remove_tree(path: str) -> None:
    def make_writable(func: Callable[..., Any], failed: str, _exc: Any) -> None:
        try:
            os.chmod(os.path.dirname(failed), 0o700)
            if os.path.isdir(failed) and not os.path.islink(failed):
                os.chmod(failed, 0o700)
            func(failed)
        except OSError:
            pass

    shutil.rmtree(path, onerror=make_writable)
    if os.path.lexists(path):
        shutil.rmtree(path, ignore_errors=True)


def _process_uids(pid: str) -> tuple[list[int], bool]:
    """(real/effective/saved/fs uids, is a zombie) of a process, from /proc."""
    with open(f"/proc/{pid}/status", "rb") as fh:
        status = fh.read()
    uids: list[int] = []
    zombie = False
    for line in status.splitlines():
        if line.startswith(b"Uid:"):
            uids = [int(u) for u in line.split()[1:]]
        elif line.startswith(b"State:"):
            zombie = b"Z" in line.split()[1:2]
    return uids, zombie


def _kill_uid(lease: _UidLease) -> None:
    """SIGKILL every process running as the lease's uid (which no other run or user has).

    Processes are found in /proc and signalled through a pidfd after re-checking their uid, so a
    recycled pid is never hit. Repeats while it finds processes (a fork bomb re-spawning).
    """
    if lease.uid < _UID_BASE:  # never anything but a sandbox uid
        return
    for _ in range(20):
        found = False
        for entry in os.scandir("/proc"):
            if not entry.name.isdigit():
                continue
            try:
                uids, zombie = _process_uids(entry.name)
                if lease.uid not in uids or zombie:
                    continue
                pidfd = os.pidfd_open(int(entry.name))
            except (OSError, ValueError):
                continue
            try:
                uids, _ = _process_uids(entry.name)
                if lease.uid in uids:
                    signal.pidfd_send_signal(pidfd, signal.SIGKILL)
                    found = True
            except (OSError, ValueError):
                pass
            finally:
                os.close(pidfd)
        if not found:
            return
        time.sleep(0.005)


def run_python(
    code: str,
    *,
    entry: str | None = None,
    args: list[Any] | None = None,
    kwargs: dict[str, Any] | None = None,
    limits: SandboxLimits = SandboxLimits(),
    rpc: RpcHandler | None = None,
    rpc_names: Sequence[str] = (),
    files: dict[str, str] | None = None,
) -> SandboxResult:
    """Run ``code`` as a module in a fresh sandboxed process and report what happened.

    With ``entry``, the top-level function of that name is then called with ``args``/``kwargs``
    (JSON-able) and its JSON-encoded return value comes back as ``value``; without it the module
    just runs (e.g. a solution followed by its test asserts) and ``ok`` means no exception.

    ``rpc_names`` are injected as functions ``name(*args, **kwargs)`` into the module's globals;
    calling one blocks the child while the parent runs ``rpc(name, {"args": [...], "kwargs": {...}})``
    and sends back its result, or its exception as ``RuntimeError("<Type>: <message>")``. Time spent
    serving RPC does not count toward ``limits.timeout_s``. A `BudgetExceeded` raised by the handler
    kills the child and propagates to the caller. ``files`` (relative name -> text) are written into
    the child's private directory before the code runs.

    Failures of the code are results (``ok=False`` with ``error_kind``); `SandboxError` means the
    sandbox itself could not run. Thread-safe. See the module docstring for the isolation.
    """
    limits.validate()
    args = list(args) if args is not None else []
    kwargs = dict(kwargs) if kwargs is not None else {}
    files = dict(files) if files is not None else {}
    names = tuple(rpc_names)
    for name in names:
        if not isinstance(name, str) or not name.isidentifier():
            raise ValueError(f"run_python: RPC name {name!r} is not a Python identifier")
    if names and rpc is None:
        raise ValueError("run_python: rpc_names given without an rpc handler")
    if entry is not None and not entry.isidentifier():
        raise ValueError(f"run_python: entry {entry!r} is not a Python identifier")
    _check_json("args", args)
    _check_json("kwargs", kwargs)
    if not sys.executable:
        raise SandboxError("sys.executable is unknown: cannot start a sandbox interpreter")

    started_at = time.monotonic()
    lease: _UidLease | None = None
    tmp: str | None = None
    proc: subprocess.Popen[bytes] | None = None
    supervisor: _Supervisor | None = None
    parent_fds: list[int] = []
    try:
        if os.geteuid() == 0:
            lease = _UidLease()
        tmp = os.path.realpath(tempfile.mkdtemp(prefix="masforge-sbx-"))
        owner = (lease.uid, lease.gid) if lease is not None else None
        if owner is not None:
            os.chown(tmp, *owner)
        os.chmod(tmp, 0o700)
        _write_files(tmp, files, owner)
        job = {
            "code": code,
            "entry": entry,
            "args": args,
            "kwargs": kwargs,
            "rpc_names": list(names),
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
        job_path = os.path.join(tmp, _JOB_FILE)
        fd = os.open(job_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(job, fh)

        chan_r, chan_w = os.pipe()  # child -> parent: RPC requests, result
        parent_fds += [chan_r, chan_w]
        reply_r, reply_w = os.pipe()  # parent -> child: RPC replies
        parent_fds += [reply_r, reply_w]
        prefix = [] if limits.network else _netns_command()
        command = [sys.executable, "-S", "-P", "-s", _CHILD_SCRIPT, str(chan_w), str(reply_r), job_path]
        if prefix:
            command = [*prefix, "--", *command]
        env = {"PATH": _SAFE_PATH, "LANG": "C.UTF-8", "PYTHONHASHSEED": "0", "HOME": tmp, "TMPDIR": tmp}
        try:
            proc = subprocess.Popen(
                command,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                pass_fds=(chan_w, reply_r),
                cwd=tmp,
                env=env,
                start_new_session=True,
            )
        except OSError as exc:
            raise SandboxError(f"cannot start the sandbox interpreter {sys.executable}: {exc}") from exc
        for fd in (chan_w, reply_r):  # the child's ends: close ours so EOF means the child is gone
            os.close(fd)
            parent_fds.remove(fd)
        supervisor = _Supervisor(proc, chan_r, reply_w, limits, rpc, frozenset(names))
        supervisor.run()
        supervisor.kill_group()
        supervisor.reap()
        ok, value, error, error_kind, tb = supervisor.verdict()
        return SandboxResult(
            ok=ok,
            value=value,
            error=error,
            error_kind=error_kind,
            traceback=tb,
            stdout=supervisor.stdout.text(),
            stderr=supervisor.stderr.text(),
            duration_s=time.monotonic() - started_at,
            rpc_calls=supervisor.rpc_calls,
        )
    finally:
        if supervisor is not None:
            supervisor.kill_group()
            supervisor.reap()
            supervisor.close()
            abnormal = supervisor.result is None or supervisor.timed_out or supervisor.returncode != 0
        else:
            abnormal = True
            if proc is not None:
                try:
                    os.killpg(proc.pid, signal.SIGKILL)
                except OSError:
                    pass
                proc.wait()
        if proc is not None:
            for stream in (proc.stdout, proc.stderr):
                if stream is not None:
                    stream.close()
        for fd in parent_fds:
            os.close(fd)
        if lease is not None:
            if abnormal and proc is not None:
                _kill_uid(lease)
            lease.release()
        if tmp is not None:
            _remove_tree(tmp)


def run_tests(solution: str, test_code: str, *, timeout_s: float = 10.0) -> SandboxResult:
    """Run a code answer followed by its test code (asserts) in the sandbox; ok means all passed."""
    return run_python(f"{solution}\n\n{test_code}\n", limits=SandboxLimits(timeout_s=timeout_s))
