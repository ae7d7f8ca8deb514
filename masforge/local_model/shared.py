"""One embedded model server per machine, shared by every masforge process of the user (any clone, any virtual
environment), so two runs on one machine share the cores instead of fighting over them.

The first process that needs the model starts a supervisor (:mod:`.supervisor`), which starts the server, and
records it in the cache folder under a lock (:mod:`.registry`): address, weights' sha256, slots, kind, owner. A
later process finds the record, checks that its owner lives, that it serves the same weights and that it answers,
and takes a lease instead of starting another. A record that fails a check is stale: it is removed (its server
stopped, unless it serves other weights to users of its own) and a new server is started.

The server outlives no one: the last user to leave stops it, and its supervisor stops it once no user has lived for
the idle time (``$MASFORGE_LOCAL_IDLE_S``, a user killed by SIGKILL holds no lease). Every process sends it at most
its slot count of requests at once (:func:`masforge.local_model.llama_server.local_slots` reads the record).
"""

from __future__ import annotations

import atexit
import contextlib
import json
import logging
import math
import os
import secrets
import selectors
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.parse
from dataclasses import dataclass
from typing import Any

from masforge.errors import LocalModelError
from masforge.local_model.catalog import (
    DEFAULT_LOCAL_MODEL,
    EXTERNAL_API_BASE_ENV,
    LocalModelSpec,
    get_spec,
)
from masforge.local_model.registry import Lease, Registry, ServerRecord, User, records
from masforge.local_model.server import LocalEndpoint, _owns_listener, _served_models, answers, preflight
from masforge.local_model.weights import logs_dir
from masforge.processes import process_start_time

log = logging.getLogger(__name__)

IDLE_ENV = "MASFORGE_LOCAL_IDLE_S"
DEFAULT_IDLE_S = 10.0
"""Seconds a shared server runs on with no live user (its last one killed) before its supervisor stops it."""
LOCK_WAIT_S = 300.0
"""Longest wait for the registry lock: a process starting the server holds it until the server answers."""
LEAVE_LOCK_WAIT_S = 10.0
ANSWER_WAITS_S = (5.0, 15.0)
"""A live server that does not answer in these times (one try each) is taken for hung and replaced: patient, since
its users would lose it, on a machine whose cores it may be keeping busy."""
START_WAIT_S = 180.0
"""Longest wait for the supervisor's word (the server's own startup timeout is 120 s)."""


def idle_seconds() -> float:
    """``$MASFORGE_LOCAL_IDLE_S`` (0 or more), else :data:`DEFAULT_IDLE_S`; LocalModelError names a bad value."""
    raw = os.environ.get(IDLE_ENV, "").strip()
    if not raw:
        return DEFAULT_IDLE_S
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not (math.isfinite(value) and value >= 0):
        raise LocalModelError(f"{IDLE_ENV}={raw}: give the seconds a shared model server runs on without users, "
                              f"0 or more (or unset it for {DEFAULT_IDLE_S:g})")
    return value


@dataclass
class _Use:
    """This process's use of a shared server."""

    record: ServerRecord
    registry: Registry
    lease: Lease
    supervisor: subprocess.Popen[bytes] | None = None
    """The supervisor, when this process started it (reaped once it ends)."""

    def endpoint(self) -> LocalEndpoint:
        return LocalEndpoint(api_base=self.record.api_base, model=f"openai/{self.record.alias}",
                             alias=self.record.alias)


_USES: dict[str, _Use] = {}
_EXTERNAL: dict[tuple[str, str], LocalEndpoint] = {}
_REGISTRY_LOCK = threading.Lock()


def _external_endpoint(spec: LocalModelSpec, api_base: str) -> LocalEndpoint:
    """Health-check a server the user started and pick the model id it serves."""
    api_base = api_base.rstrip("/")
    try:
        ids = _served_models(api_base, timeout=5.0)
    except (urllib.error.URLError, OSError, ValueError) as exc:
        reason = getattr(exc, "reason", exc)
        raise LocalModelError(
            f"{EXTERNAL_API_BASE_ENV}={api_base} does not answer GET /models ({reason}): start that server"
            f" or unset {EXTERNAL_API_BASE_ENV}"
        ) from exc
    alias = spec.alias if (spec.alias in ids or not ids) else ids[0]
    return LocalEndpoint(api_base=api_base, model=f"openai/{alias}", alias=alias)


def ensure_local_server(name: str | LocalModelSpec = DEFAULT_LOCAL_MODEL) -> LocalEndpoint:
    """The endpoint of the local model: the machine's shared server for it, started on first use (thread-safe).

    If ``$MASFORGE_LOCAL_API_BASE`` is set, that already-running server is health-checked and used instead
    and nothing is started; its model id is the spec's alias if served, else the first id it lists.
    """
    spec = get_spec(name)
    external = os.environ.get(EXTERNAL_API_BASE_ENV, "").strip()
    with _REGISTRY_LOCK:
        if external:
            key = (spec.name, external)
            if key not in _EXTERNAL:
                _EXTERNAL[key] = _external_endpoint(spec, external)
            return _EXTERNAL[key]
        use = _USES.get(spec.name)
        if use is not None and use.record.server_alive:
            return use.endpoint()
        if use is not None:  # its server died under us: take whichever the machine has now
            del _USES[spec.name]
            _leave(use, timeout=2.0)
        use = _join_or_start(spec)
        _USES[spec.name] = use
        return use.endpoint()


def _join_or_start(spec: LocalModelSpec) -> _Use:
    """Under the registry lock: take a lease on the recorded server if it is usable, else start one."""
    registry = Registry(spec.name)
    retired: list[ServerRecord] = []
    with registry.locked(LOCK_WAIT_S):
        record = registry.read()
        if record is not None:
            problem = _unusable(record, spec)
            if problem is None:
                return _Use(record, registry, registry.lease(record.id))
            log.info("not using the %s server at %s: %s; starting another", spec.name, record.api_base, problem)
            if _retire(registry, record, other_weights=_other_weights(record, spec)):
                retired.append(record)
        use = _start(spec, registry)
    for old in retired:  # outside the lock: a hung owner must not hold up everyone
        _stop(old, timeout=5.0)
    return use


def _other_weights(record: ServerRecord, spec: LocalModelSpec) -> bool:
    return record.sha256 != spec.sha256 or record.alias != spec.alias


def _unusable(record: ServerRecord, spec: LocalModelSpec) -> str | None:
    """Why the recorded server cannot serve ``spec`` (None: it can)."""
    if _other_weights(record, spec):
        return (f"it serves other weights (sha256 {record.sha256[:12]}... as {record.alias}; this masforge's "
                f"{spec.name} is {spec.sha256[:12]}... as {spec.alias})")
    if not record.owner_alive:
        return f"its owner (pid {record.owner_pid}) is gone"
    if not record.server_alive:
        return f"its server (pid {record.server_pid}) is gone"
    port = urllib.parse.urlsplit(record.api_base).port or 0
    if _owns_listener(record.server_pid, port) is False:
        return f"its server (pid {record.server_pid}) no longer listens on port {port}"
    if not any(answers(record.api_base, timeout) for timeout in ANSWER_WAITS_S):
        return f"it does not answer at {record.api_base}"
    return None


def _retire(registry: Registry, record: ServerRecord, other_weights: bool) -> bool:
    """Remove a stale record (under the lock); whether its server is to be stopped. A server of other weights
    that still has users of its own keeps running for them (its supervisor stops it when they are gone)."""
    users = registry.users(record.id, prune=True)
    registry.remove(record.id)
    if not record.owner_alive:
        registry.forget_users(record.id)
    return not (other_weights and users and record.owner_alive)


def _start(spec: LocalModelSpec, registry: Registry) -> _Use:
    """Start a supervisor and its server, record it and take the first lease (under the registry lock)."""
    cache = registry.root.parent
    preflight(spec, cache)  # llama-cpp-python or llama.cpp's server, the weights: one-line errors, nothing started
    idle = idle_seconds()
    server_id = secrets.token_hex(6)
    logs = logs_dir(cache)
    logs.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, "-m", "masforge.local_model.supervisor", "--spec", spec.to_json(),
           "--id", server_id, "--cache", str(cache), "--idle", repr(idle)]
    with (logs / f"supervisor-{spec.name}.log").open("ab") as err:
        # A session of its own: the user's Ctrl-C or exit must not reach a server other processes use.
        proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=err,
                                start_new_session=True, close_fds=True)
    try:
        message = _first_line(proc, START_WAIT_S)
        if "ready" not in message:
            try:
                state = f"ended with code {proc.wait(5)} before its server was up"
            except subprocess.TimeoutExpired:
                state = f"did not report a server within {START_WAIT_S:.0f} s"
            raise LocalModelError(str(message.get("error") or f"the local model's supervisor {state} "
                                      f"(log: {logs / f'supervisor-{spec.name}.log'})"))
        ready = message["ready"]
        record = ServerRecord(
            id=server_id, model=spec.name, alias=spec.alias, api_base=str(ready["api_base"]), sha256=spec.sha256,
            slots=int(ready["slots"]), kind=str(ready["kind"]), owner_pid=proc.pid,
            owner_started=process_start_time(proc.pid), server_pid=int(ready["server_pid"]),
            server_started=ready.get("server_started"), started_by=os.getpid(), started_at=time.time(),
            idle_s=idle, log=str(ready["log"]))
        registry.write(record)
        return _Use(record, registry, registry.lease(server_id), proc)
    except BaseException:  # Ctrl-C while it loads, or no server: nobody else knows this supervisor
        _end_supervisor(proc)
        raise


def _first_line(proc: subprocess.Popen[bytes], timeout: float) -> dict[str, Any]:
    """The supervisor's JSON line ({} if it ended or said nothing readable within ``timeout`` s)."""
    assert proc.stdout is not None
    data = b""
    deadline = time.monotonic() + timeout
    with selectors.DefaultSelector() as sel:
        sel.register(proc.stdout, selectors.EVENT_READ)
        while b"\n" not in data and time.monotonic() < deadline:
            if not sel.select(timeout=min(1.0, max(0.0, deadline - time.monotonic()))):
                continue
            chunk = os.read(proc.stdout.fileno(), 65536)
            if not chunk:
                break
            data += chunk
    proc.stdout.close()
    try:
        message = json.loads(data.split(b"\n", 1)[0] or b"{}")
    except ValueError:
        return {}
    return message if isinstance(message, dict) else {}


def _end_supervisor(proc: subprocess.Popen[bytes]) -> None:
    """Stop a supervisor this process started (it stops its server), SIGKILL if it takes over 5 s."""
    with contextlib.suppress(ProcessLookupError):
        proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(5)
    except subprocess.TimeoutExpired:
        proc.kill()  # its server dies with it (the kernel's parent-death signal)
        proc.wait(5)


def _stop(record: ServerRecord, timeout: float, supervisor: subprocess.Popen[bytes] | None = None) -> None:
    """Stop a recorded server: SIGTERM its supervisor (or, with no supervisor left, the server itself), and after
    ``timeout`` s SIGKILL whatever is left. A pid is signalled only while it names the process recorded (pids are
    reused)."""
    first = record.owner_pid if record.owner_alive else record.server_pid if record.server_alive else None
    if first is not None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(first, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while (record.owner_alive or record.server_alive) and time.monotonic() < deadline:
        if supervisor is not None:
            supervisor.poll()  # reap it, or it lingers as a zombie
        time.sleep(0.05)
    for pid, alive in ((record.owner_pid, record.owner_alive), (record.server_pid, record.server_alive)):
        if alive:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
    if supervisor is not None:
        with contextlib.suppress(subprocess.TimeoutExpired):
            supervisor.wait(1)


def _leave(use: _Use, timeout: float) -> None:
    """Give up this process's lease; the last user stops the server (after ``timeout`` s, SIGKILL)."""
    last = False
    try:
        with use.registry.locked(LEAVE_LOCK_WAIT_S):
            use.lease.release()
            if not use.registry.users(use.record.id, prune=True):
                use.registry.remove(use.record.id)
                last = True
    except LocalModelError:  # the lock is busy: without our lease, the supervisor stops it after its idle time
        use.lease.release()
    if last:
        _stop(use.record, timeout, use.supervisor)
    elif use.supervisor is not None:
        use.supervisor.poll()


def running_servers() -> list[ServerRecord]:
    """The shared servers this process uses (started here or by another process) that are still alive."""
    with _REGISTRY_LOCK:
        return [use.record for use in _USES.values() if use.record.server_alive]


def shutdown_local_servers(timeout: float = 10.0) -> None:
    """Stop using the local servers: give up this process's leases, and stop each server it was the last user of
    (it gets ``timeout`` s to end after SIGTERM, then SIGKILL). A server other processes use runs on for them."""
    with _REGISTRY_LOCK:
        uses = list(_USES.values())
        _USES.clear()
        _EXTERNAL.clear()
    for use in uses:
        _leave(use, timeout)


def shared_servers() -> list[tuple[ServerRecord, list[User]]]:
    """The shared servers recorded in the cache folder whose owner lives, each with its live users (read only)."""
    return [(record, Registry(record.model).users(record.id)) for record in records() if record.owner_alive]


def _forget_after_fork() -> None:
    """A forked child uses no server yet: the parent's leases are the parent's to give up."""
    global _REGISTRY_LOCK
    _REGISTRY_LOCK = threading.Lock()
    _USES.clear()
    _EXTERNAL.clear()


os.register_at_fork(after_in_child=_forget_after_fork)
atexit.register(shutdown_local_servers)
