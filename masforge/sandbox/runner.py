"""Run untrusted Python (code written by an LLM) in an isolated child process: :func:`run_python` and
:func:`run_tests`, their limits (:class:`SandboxLimits`) and the parent's side of the child's channel (RPC, output,
verdict). How it works and what it enforces is told in :mod:`masforge.sandbox`."""

from __future__ import annotations

import contextvars
import json
import os
import secrets
import selectors
import signal
import subprocess
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from masforge.errors import BudgetExceeded, SandboxError
from masforge.sandbox.isolation import (
    SAFE_PATH,
    Isolation,
    _kill_uid,
    _UidLease,
    child_command,
    host_run_dir,
    isolation,
    remove_tree,
    sandbox_status,
)
from masforge.sandbox.job import (
    MAX_MESSAGE_BYTES,
    RpcHandler,
    SandboxLimits,
    checked_arguments,
    judge_job,
)
from masforge.sandbox.job import job as make_job

__all__ = ["RpcHandler", "SandboxLimits", "SandboxResult", "network_namespace_available", "run_python",
           "run_tests", "sandbox_status"]

_PARENT_MESSAGE_BYTES = MAX_MESSAGE_BYTES + 64 * 1024  # the judge's envelope around a message of the code
_EXIT_OK, _EXIT_FATAL = 0, 70  # the judge's exit statuses for success and a failed set-up (see child/wire.py)
_OUTPUT_KILL_BYTES = 64 * 1024 * 1024
"""Printing more than this (or 4x ``max_output_bytes``, whichever is larger) kills the run ("output")."""
_DRAIN_GRACE_S = 2.0
_READ_CHUNK = 65536


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


def network_namespace_available() -> bool:
    """Whether sandboxed code runs in its own network namespace (no network at all)."""
    return isolation().pid_namespace


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
        timed_names: frozenset[str],
        iso: Isolation,
    ) -> None:
        self.proc = proc
        self.pgid = proc.pid  # start_new_session: the child leads its own group
        self.chan_r = chan_r
        self.reply_w = reply_w
        self.limits = limits
        self.rpc = rpc
        self.rpc_names = rpc_names
        self.timed_names = timed_names
        self.iso = iso
        self.output_kill_bytes = max(_OUTPUT_KILL_BYTES, 4 * limits.max_output_bytes)
        self.output_exceeded = False
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
        self.run_s = 0.0
        """Wall time the child ran, without the time spent serving its RPC (what its clock counted)."""
        self.returncode: int | None = None
        self.cpu_s_used = 0.0
        self._chan_buf = bytearray()
        self._reply_buf = bytearray()
        self._sel = selectors.DefaultSelector()
        self._pidfd: int | None = None
        # a timed RPC (e.g. a tool) runs in a thread while the clock runs; it wakes the loop via a pipe
        self._timed_lock = threading.Lock()
        self._timed_outcome: tuple[bool, Any] | None = None
        self._wake_r, self._wake_w = os.pipe()

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
        os.set_blocking(self._wake_r, False)
        sel.register(self._wake_r, selectors.EVENT_READ, "wake")
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
                self._on_exit(self.limits.timeout_s - (deadline - now))
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
                    exit_time = time.monotonic()
                    self._on_exit(self.limits.timeout_s - (deadline - exit_time))
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
                elif kind == "wake":
                    self._finish_timed_rpc()

    def _on_exit(self, run_s: float) -> None:
        self.exited = True
        self.run_s = run_s
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
        if capture.dropped + len(capture.data) > self.output_kill_bytes and not self.output_exceeded:
            self.output_exceeded = True  # draining gigabytes costs the parent CPU: stop the source
            self.kill_group()
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
        if len(self._chan_buf) > _PARENT_MESSAGE_BYTES:
            limit_mb = MAX_MESSAGE_BYTES // (1024 * 1024)
            self.protocol_error = f"ValueError: a message from the sandbox exceeds {limit_mb} MB"
            self._chan_buf.clear()
            self._sel.unregister(self.chan_r)
            self.kill_group()
            return spent, False
        return spent, True

    def _on_message(self, line: bytes) -> float:
        try:
            message = json.loads(line)
        except (ValueError, RecursionError):
            return 0.0  # only the judge writes here; a line it did not write well is ignored
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
        """Answer one RPC request; return the time that does not count against the wall clock."""
        self.rpc_calls += 1
        method = message.get("method")
        args = message.get("args")
        kwargs = message.get("kwargs")
        if self.rpc is None or method not in self.rpc_names:
            self._send_reply(_error_reply(LookupError(f"unknown RPC method {method!r}")))
            return 0.0
        if not isinstance(args, list) or not isinstance(kwargs, dict):
            self._send_reply(_error_reply(TypeError("malformed RPC request")))
            return 0.0
        payload = {"args": args, "kwargs": kwargs}
        if method in self.timed_names:
            self._start_timed_rpc(self.rpc, method, payload)
            return 0.0
        start, cpu_start = time.monotonic(), time.thread_time()
        try:
            result = self.rpc(method, payload)
        except BudgetExceeded:
            self.kill_group()  # a budget is a hard stop for the whole evaluation, not an RPC error
            raise
        except Exception as exc:
            self._send_reply(_error_reply(exc))
        else:
            self._send_reply(_ok_reply(result))
        # Waiting on a provider does not count against the code; the parent's own work for it does.
        return max(0.0, (time.monotonic() - start) - (time.thread_time() - cpu_start))

    def _start_timed_rpc(self, rpc: RpcHandler, method: str, payload: dict[str, Any]) -> None:
        """Serve ``method`` in a thread while the loop keeps the clock (and may kill the child)."""

        def work() -> None:
            try:
                outcome: tuple[bool, Any] = (True, rpc(method, payload))
            except BaseException as exc:  # handed to the loop, which decides
                outcome = (False, exc)
            with self._timed_lock:
                self._timed_outcome = outcome
                if self._wake_w >= 0:
                    os.write(self._wake_w, b"x")

        context = contextvars.copy_context()
        threading.Thread(target=context.run, args=(work,), name=f"masforge-sandbox-{method}", daemon=True).start()

    def _finish_timed_rpc(self) -> None:
        try:
            os.read(self._wake_r, 64)
        except BlockingIOError:
            pass
        with self._timed_lock:
            outcome, self._timed_outcome = self._timed_outcome, None
        if outcome is None or self.exited or self.timed_out:
            return
        ok, value = outcome
        if ok:
            self._send_reply(_ok_reply(value))
        elif isinstance(value, BudgetExceeded):
            self.kill_group()
            raise value
        elif isinstance(value, Exception):
            self._send_reply(_error_reply(value))
        else:
            raise value  # KeyboardInterrupt and the like are not the code's failure

    def _send_reply(self, reply: str) -> None:
        self._reply_buf += reply.encode("utf-8") + b"\n"
        self._flush_replies()

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
        """Release the selector, the pidfd and the wake-up pipe (a late timed RPC then writes nowhere)."""
        self._sel.close()
        with self._timed_lock:
            for fd in (self._wake_r, self._wake_w):
                if fd >= 0:
                    os.close(fd)
            self._wake_r = self._wake_w = -1
        if self._pidfd is not None:
            os.close(self._pidfd)
            self._pidfd = None

    # -- verdict ----------------------------------------------------------------------------------

    def verdict(self) -> tuple[bool, Any, str | None, str | None, str | None]:
        """(ok, value, error, error_kind, traceback) from what was observed."""
        limits = self.limits
        if self.output_exceeded:
            mb = self.output_kill_bytes // (1024 * 1024)
            return False, None, f"OutputLimitExceeded: printed more than {mb} MB; killed", "output", None
        # The judge's exit status confirms what it reported: a success is 0, a failed set-up 70. The code under test
        # runs in the judge's worker and cannot set that status, so whatever it writes cannot claim either.
        status = None if self.iso.death_signal(self.returncode) is not None else self.returncode
        if self.result is not None and (not self.result.get("ok") or status == _EXIT_OK):
            r = self.result
            ok = bool(r.get("ok"))
            error, kind = r.get("error"), r.get("error_kind")
            if kind == "memory" and error == "MemoryError":
                error = f"MemoryError: out of memory (limit {limits.memory_mb} MB)"
            return ok, r.get("value") if ok else None, error, kind, r.get("traceback")
        if self.protocol_error is not None:
            return False, None, self.protocol_error, "output", None
        if self.fatal is not None and status == _EXIT_FATAL:
            raise SandboxError(f"the sandbox could not be set up: {self.fatal}")
        if self.timed_out:
            return False, None, f"TimeoutError: killed after {float(limits.timeout_s)} s", "timeout", None
        if not self.started:
            tail = self.stderr.text().strip().splitlines()[-1:] or [f"exit status {self.returncode}"]
            raise SandboxError(f"the sandbox child failed to start: {tail[0]}")
        cpu_limit = limits.effective_cpu_s()
        sig = self.iso.death_signal(self.returncode)
        # The judge handles SIGXCPU in Python (see child/confine.py), which cannot run while it computes in C (a huge
        # power in a test): the hard limit's SIGKILL then ends it, a second after its soft limit. No sooner does its
        # CPU time reach the limit, and the parent's own SIGKILL (the wall clock) is told apart above.
        hard_cpu_limit = sig == signal.SIGKILL and self.run_s >= cpu_limit
        if sig == signal.SIGXCPU or self.cpu_s_used >= cpu_limit or hard_cpu_limit:
            return False, None, f"TimeoutError: CPU time limit of {cpu_limit} s exceeded", "cpu", None
        if sig is not None:
            try:
                name = signal.Signals(sig).name
            except ValueError:
                name = f"signal {sig}"
            return False, None, f"Killed: the sandboxed process died from {name}", "killed", None
        if "MemoryError" in self.stderr.text()[-2000:]:
            return False, None, f"MemoryError: out of memory (limit {limits.memory_mb} MB)", "memory", None
        error = f"SystemExit: the sandboxed process exited with status {self.returncode} before reporting a result"
        return False, None, error, "killed", None


def _ok_reply(result: Any) -> str:
    try:
        return json.dumps({"ok": True, "result": result})
    except (TypeError, ValueError, RecursionError) as exc:
        return _error_reply(TypeError(f"the RPC result is not JSON-serializable: {exc}"))


def _error_reply(exc: BaseException) -> str:
    text = str(exc)
    return json.dumps({"ok": False, "error": f"{type(exc).__name__}: {text}" if text else type(exc).__name__})


# --------------------------------------------------------------------------------------------------
# public API


def _clean_up(supervisor: _Supervisor | None, proc: subprocess.Popen[bytes] | None, parent_fds: list[int],
              lease: _UidLease | None, iso: Isolation, host_tmp: str | None) -> None:
    """After a run, however it ended: the child's process group killed and reaped, pipes and descriptors closed,
    the uid's processes killed and its lease returned, the run directory on the host removed."""
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
        # without a PID namespace nothing else guarantees that the run's processes are gone
        if proc is not None and (abnormal or not iso.pid_namespace):
            _kill_uid(lease.uid)
        lease.release()
    if host_tmp is not None:
        remove_tree(host_tmp)


def _job_file(name: str, job: dict[str, Any], parent_fds: list[int]) -> int:
    """An in-memory file holding ``job`` (JSON), read from its start."""
    fd = os.memfd_create(name, os.MFD_CLOEXEC)
    parent_fds.append(fd)
    data = json.dumps(job).encode("utf-8")
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]
    os.lseek(fd, 0, os.SEEK_SET)
    return fd


def _start_child(job: dict[str, Any], judging: dict[str, Any], limits: SandboxLimits, iso: Isolation, tmp: str,
                 host_dir: bool, parent_fds: list[int]) -> tuple[subprocess.Popen[bytes], int, int, tuple[int, ...]]:
    """The sandbox process started on ``job`` (and ``judging``, the tests, in a file its judge reads only after it
    forked the worker): (process, the channel's read end, the reply pipe's write end, the child's ends of the pipes,
    which the caller closes). Every descriptor the parent holds is in ``parent_fds`` (closed after the run, however
    it ends)."""
    job_fd = _job_file("masforge-sandbox-job", job, parent_fds)
    judge_fd = _job_file("masforge-sandbox-judge", judging, parent_fds)
    chan_r, chan_w = os.pipe()  # child -> parent: RPC requests, result
    parent_fds += [chan_r, chan_w]
    reply_r, reply_w = os.pipe()  # parent -> child: RPC replies
    parent_fds += [reply_r, reply_w]
    life_r, life_w = os.pipe()  # only the parent writes: EOF in the child means the parent is gone
    parent_fds += [life_r, life_w]
    child_fds = (chan_w, reply_r, job_fd, judge_fd, life_r)
    inner, code_fd = child_command(list(child_fds))
    command = iso.command(inner, network=limits.network, disk_mb=limits.disk_mb)
    env = {"PATH": SAFE_PATH, "LANG": "C.UTF-8", "PYTHONHASHSEED": "0", "HOME": tmp, "TMPDIR": tmp}
    try:
        proc = subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            pass_fds=(*child_fds, code_fd),
            cwd=tmp if host_dir else "/",
            env=env,
            start_new_session=True,
        )
    except OSError as exc:
        raise SandboxError(f"cannot start the sandbox ({command[0]}): {exc}") from exc
    return proc, chan_r, reply_w, child_fds


def run_python(
    code: str,
    *,
    entry: str | None = None,
    args: list[Any] | None = None,
    kwargs: dict[str, Any] | None = None,
    limits: SandboxLimits = SandboxLimits(),
    rpc: RpcHandler | None = None,
    rpc_names: Sequence[str] = (),
    timed_rpc_names: Sequence[str] = (),
    files: dict[str, str] | None = None,
    tests: str | None = None,
    task_code: str | None = None,
    answer_names: Sequence[str] | None = None,
) -> SandboxResult:
    """Run ``code`` as a module in a fresh sandboxed process and report what happened.

    With ``entry``, the top-level function of that name is then called with ``args``/``kwargs``
    (JSON-able) and its JSON-encoded return value comes back as ``value``; without it the module
    just runs and ``ok`` means no exception. With ``tests`` (test code, e.g. asserts), the tests run in the
    sandbox's judge process against the module's functions, which run in its worker: ``ok`` means every test
    passed, and nothing the code does or writes can claim that it did (see `masforge.sandbox.child`). The tests
    reach the judge only after the worker exists, so the code can never read them. ``task_code`` (the task's own
    code, e.g. a HumanEval prompt's helpers and imports) runs in the judge before the tests: the names it defines are
    the task's, whatever the code redefines. ``answer_names`` are then the only names the tests take from the code
    (e.g. the entry point); without it, every name the tests use that the code defines and the task does not.

    ``rpc_names`` are injected as functions ``name(*args, **kwargs)`` into the module's globals;
    calling one blocks the child while the parent runs ``rpc(name, {"args": [...], "kwargs": {...}})``
    and sends back its result, or its exception as ``RuntimeError("<Type>: <message>")``. Time spent
    serving RPC does not count toward ``limits.timeout_s``, except for the names in
    ``timed_rpc_names`` (e.g. tools): those are served in a thread while the clock runs, so a slow one
    ends the run as a timeout. A `BudgetExceeded` raised by the handler kills the child and propagates
    to the caller. ``files`` (relative name -> text) are written into the child's private directory
    before the code runs.

    Failures of the code are results (``ok=False`` with ``error_kind``); `SandboxError` means the
    sandbox itself could not run. Thread-safe. See :mod:`masforge.sandbox` for the isolation.
    """
    limits.validate()
    args, kwargs, files, names, timed = checked_arguments(entry, args, kwargs, rpc, rpc_names, timed_rpc_names,
                                                           files, tests, task_code, answer_names)
    iso = isolation()
    iso.require_file_system_layer()

    started_at = time.monotonic()
    lease: _UidLease | None = None
    tmp: str | None = None
    host_dir = False
    proc: subprocess.Popen[bytes] | None = None
    supervisor: _Supervisor | None = None
    parent_fds: list[int] = []
    try:
        if iso.root:
            lease = _UidLease()
        if iso.run_dir_on_host():
            tmp = host_run_dir()
            host_dir = True
            if lease is not None:
                os.chown(tmp, lease.uid, lease.gid)
            os.chmod(tmp, 0o700)
        else:  # created by the child in the sandbox's own /tmp (a fresh tmpfs)
            tmp = f"/tmp/masforge-sbx-{secrets.token_hex(6)}"
        job = make_job(code, entry, args, kwargs, names, files, tmp, limits, lease)
        judging = judge_job(tests, task_code, answer_names)
        proc, chan_r, reply_w, child_fds = _start_child(job, judging, limits, iso, tmp, host_dir, parent_fds)
        for fd in child_fds:  # the child's ends: close ours so EOF means the child is gone
            os.close(fd)
            parent_fds.remove(fd)
        supervisor = _Supervisor(proc, chan_r, reply_w, limits, rpc, frozenset(names), timed, iso)
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
        _clean_up(supervisor, proc, parent_fds, lease, iso, tmp if host_dir else None)


def run_tests(solution: str, test_code: str, *, timeout_s: float = 10.0, task_code: str | None = None,
              answer_names: Sequence[str] | None = None) -> SandboxResult:
    """Run a code answer, then its test code (asserts) against it, in the sandbox; ok means every test passed.

    The tests run in the sandbox's judge, the answer in its worker: the tests call the answer's functions across
    the process boundary and compare what comes back (plain data) with their own objects. ``task_code`` and
    ``answer_names``: see :func:`run_python` (a HumanEval prompt, and its entry point)."""
    return run_python(solution, tests=test_code, task_code=task_code, answer_names=answer_names,
                      limits=SandboxLimits(timeout_s=timeout_s))
