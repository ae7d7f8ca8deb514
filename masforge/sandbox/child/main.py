"""The run of the sandbox child (`main`): read the job, confine the process, fork the worker, judge and report
(the steps are listed in the package's docstring)."""

from __future__ import annotations

import _posixsubprocess
import json
import os
import signal
import sys

from .confine import (
    _apply_limits,
    _drop_privileges,
    _guard_signals,
    _make_audit_hook,
    _setup_paths,
    _start_quiet_thread,
    _undumpable,
)
from .errors import _error_line
from .judge import _judge, _Worker
from .wire import _EXIT_FAILED, _EXIT_FATAL, _EXIT_OK, _EXIT_PARENT_GONE, _Channel
from .worker import _ToJudge, _worker

TYPE_CHECKING = False  # not importing typing keeps the child's start-up fast
if TYPE_CHECKING:
    from typing import Any

_EXCLUSIVE_UID_MIN = 1_000_000  # never kill(-1) as a uid below this (could be a real user)


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

    _start_quiet_thread(watch)


def _flush_std_streams() -> None:
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except BaseException:  # the code may have closed or replaced them
            pass


def main() -> None:
    """Entry point: ``sys.argv[1:6]`` are ``CHAN_FD REPLY_FD JOB_FD JUDGE_FD LIFELINE_FD`` (the launcher took the last
    one, the code's). JUDGE_FD holds the tests: only the judge reads it, after the worker was forked without it."""
    chan_fd, reply_fd, job_fd, judge_fd, life_fd = (int(a) for a in sys.argv[1:6])
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
    if pid == 0:  # the worker: nothing of the judge's line to the parent, nor of the tests, stays open here
        try:
            for fd in (chan_fd, reply_fd, judge_fd, life_fd, to_worker_w, to_judge_r):
                os.close(fd)
            _worker(job, _ToJudge(to_judge_w, to_worker_r, job["max_message_bytes"]))
        finally:
            os._exit(0)
    status = _EXIT_FATAL
    try:
        os.close(to_worker_r)
        os.close(to_judge_w)
        worker = _Worker(pid, to_worker_w, to_judge_r, job["max_message_bytes"], parent,
                         frozenset(job["rpc_names"]), job["limits"]["cpu_s"])
        _guard_signals(worker.signalled_by)
        _start_lifeline(life_fd, _exclusive_uid(job))
        if job["uid"] is None:
            _undumpable()
        judging = _read_job(judge_fd)  # the tests: read only now that the worker is a process apart
        sys.path[:] = [p for p in sys.path if p != job["tmp"]]  # the worker writes there: never import from it
        sys.path_importer_cache.clear()
        sys.addaudithook(_make_audit_hook(job["tmp"], job["network"], _exclusive_uid(job), pid))
        parent.send({"type": "started"})
    except BaseException as exc:
        parent.send({"type": "fatal", "error": _error_line(exc)})
        os._exit(_EXIT_FATAL)
    try:
        result = _judge(judging, worker)
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
