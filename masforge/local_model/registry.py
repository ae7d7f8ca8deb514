"""The machine-wide record of the embedded model's shared server, in the cache folder beside the weights.

For each model, ``<cache>/servers/`` holds:

- ``<model>.json``: the record of the one running server (where it listens, the sha256 of the weights it serves,
  its slots, its kind, the process owning it), written and read only under the lock;
- ``<model>.lock``: an ``flock`` every masforge process takes to read, start, replace or retire that server;
- ``<model>.users/<server id>/<pid>.lease``: one lease per process using the server. Its process holds an
  ``flock`` on it for as long as it lives, so a user that died, even by SIGKILL, leaves a lease nobody holds.

Files only: which process starts or stops a server is :mod:`.shared`'s and :mod:`.supervisor`'s business.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shlex
import shutil
import sys
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, fields
from pathlib import Path

from masforge.cache_root import CACHE_ENV, cache_root
from masforge.errors import LocalModelError
from masforge.processes import process_start_time, same_process_alive

FORMAT = 1
"""Version of the record's fields; a record of another version is treated as stale."""


@dataclass(frozen=True)
class ServerRecord:
    """A running shared server: what a later process needs to find it, check it and use it."""

    id: str
    """Random name of this server (its users' leases live in a folder of that name)."""
    model: str
    alias: str
    api_base: str
    sha256: str
    """The weights it serves."""
    slots: int
    """Requests it decodes at once; each process sends it at most that many."""
    kind: str
    """``llama.cpp`` (its own server, parallel slots) or ``llama-cpp-python``."""
    owner_pid: int
    """The supervisor process: it started the server (which dies with it) and stops it when no user is left."""
    owner_started: int | None
    server_pid: int
    server_started: int | None
    started_by: int
    """The masforge process that asked for it first."""
    started_at: float
    idle_s: float
    """How long it runs on with no live user (the last one killed) before its owner stops it."""
    log: str
    format: int = FORMAT

    @classmethod
    def from_json(cls, text: str) -> ServerRecord | None:
        """The record in ``text``, or None if it is not one of this format (a torn or foreign file)."""
        try:
            data = json.loads(text)
            if not isinstance(data, dict) or data.get("format") != FORMAT:
                return None
            return cls(**{f.name: data[f.name] for f in fields(cls)})
        except (ValueError, KeyError, TypeError):
            return None

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=1)

    @property
    def owner_alive(self) -> bool:
        return same_process_alive(self.owner_pid, self.owner_started)

    @property
    def server_alive(self) -> bool:
        return same_process_alive(self.server_pid, self.server_started)


@dataclass(frozen=True)
class User:
    """A process using a shared server, as its lease says."""

    pid: int
    since: float
    command: str


def _this_command() -> str:
    """How this process was started, short (``masforge evaluate io --task humaneval ...``), for ``models status``."""
    argv = list(getattr(sys, "orig_argv", None) or sys.argv) or ["?"]
    argv[0] = Path(argv[0]).name
    text = shlex.join(argv)
    return text if len(text) <= 160 else text[:157] + "..."


class Lease:
    """This process's registration as a user of one server: a file it holds an ``flock`` on while it lives."""

    def __init__(self, path: Path, fd: int) -> None:
        self.path = path
        self._fd: int | None = fd

    def release(self) -> None:
        """Remove the lease (safe to call twice)."""
        if self._fd is None:
            return
        with contextlib.suppress(OSError):
            self.path.unlink()
        os.close(self._fd)
        self._fd = None


class Registry:
    """The record, lock and leases of one model's shared server in one cache folder."""

    def __init__(self, model: str, cache: Path | None = None) -> None:
        self.model = model
        self.root = (Path(cache) if cache is not None else cache_root()) / "servers"
        self.record_path = self.root / f"{model}.json"
        self.lock_path = self.root / f"{model}.lock"

    def users_dir(self, server_id: str) -> Path:
        return self.root / f"{self.model}.users" / server_id

    # -- the lock ----------------------------------------------------------------------------------

    def _open_lock(self) -> int:
        try:
            self.root.mkdir(parents=True, exist_ok=True)
            return os.open(self.lock_path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:
            raise LocalModelError(f"cannot use the local model's server folder {self.root}: {exc}; "
                                  f"make it writable or point {CACHE_ENV} at a writable folder") from exc

    @contextlib.contextmanager
    def locked(self, timeout: float | None = None) -> Iterator[None]:
        """Hold the model's lock (blocking; ``timeout`` s at most, then LocalModelError). Closing the descriptor
        releases it, also when the process dies."""
        fd = self._open_lock()
        try:
            if timeout is None:
                fcntl.flock(fd, fcntl.LOCK_EX)
            elif not _flock_within(fd, timeout):
                raise LocalModelError(f"another masforge process has held {self.lock_path} for over {timeout:.0f} s "
                                      "(starting the local model's server): try again, or end that process")
            yield
        finally:
            os.close(fd)

    @contextlib.contextmanager
    def try_locked(self, timeout: float = 0.0) -> Iterator[bool]:
        """Hold the lock if it is free now (or within ``timeout`` s); yields whether it was taken."""
        fd = self._open_lock()
        try:
            yield _flock_within(fd, timeout)
        finally:
            os.close(fd)

    # -- the record (call these under the lock) ----------------------------------------------------

    def read(self) -> ServerRecord | None:
        """The recorded server, or None (no record, or one that cannot be read as this format)."""
        try:
            text = self.record_path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            return None
        return ServerRecord.from_json(text)

    def write(self, record: ServerRecord) -> None:
        """Record ``record`` atomically (a reader never sees half a file)."""
        tmp = self.record_path.with_name(f".{self.record_path.name}.{os.getpid()}.tmp")
        tmp.write_text(record.to_json(), encoding="utf-8")
        os.replace(tmp, self.record_path)

    def remove(self, server_id: str | None = None) -> bool:
        """Delete the record if it names ``server_id`` (any record if None); whether one was deleted."""
        if server_id is not None:
            current = self.read()
            if current is None or current.id != server_id:
                return False
        with contextlib.suppress(FileNotFoundError):
            self.record_path.unlink()
            return True
        return False

    def forget_users(self, server_id: str) -> None:
        """Delete a stopped server's lease folder."""
        shutil.rmtree(self.users_dir(server_id), ignore_errors=True)

    # -- leases --------------------------------------------------------------------------------------

    def lease(self, server_id: str) -> Lease:
        """Register this process as a user of ``server_id`` (under the lock, so the server cannot be stopping)."""
        folder = self.users_dir(server_id)
        folder.mkdir(parents=True, exist_ok=True)
        pid = os.getpid()
        tmp = folder / f".{pid}.{time.monotonic_ns()}.tmp"
        fd = os.open(tmp, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)  # held before the name appears: no one sees an unheld lease
            note = {"pid": pid, "started": process_start_time(pid), "since": time.time(), "command": _this_command()}
            os.write(fd, json.dumps(note).encode("utf-8"))
            path = folder / f"{pid}.lease"
            os.replace(tmp, path)
        except BaseException:
            os.close(fd)
            with contextlib.suppress(OSError):
                tmp.unlink()
            raise
        return Lease(path, fd)

    def users(self, server_id: str, prune: bool = False) -> list[User]:
        """The live users of ``server_id``, oldest first; ``prune`` deletes the leases of users that are gone."""
        found: list[User] = []
        folder = self.users_dir(server_id)
        for path in sorted(folder.glob("*.lease")) if folder.is_dir() else []:
            user = _live_user(path)
            if user is not None:
                found.append(user)
            elif prune:
                with contextlib.suppress(OSError):
                    path.unlink()
        return sorted(found, key=lambda u: u.since)


def _flock_within(fd: int, timeout: float) -> bool:
    """Take an exclusive ``flock`` on ``fd``, trying for ``timeout`` s; whether it was taken."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.05)


def _live_user(path: Path) -> User | None:
    """The user a lease names if that process lives and still holds the lease, else None."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return None
    try:
        note = json.loads(os.read(fd, 65536).decode("utf-8"))
        pid = int(note["pid"])
        if not same_process_alive(pid, note.get("started")):
            return None  # gone (a child it forked may still hold the descriptor: that is no user)
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return User(pid=pid, since=float(note.get("since", 0.0)), command=str(note.get("command", "")))
        return None  # nobody holds it: its process let go without deleting it
    except (OSError, ValueError, KeyError, TypeError):
        return None
    finally:
        os.close(fd)


def recorded_slots(model: str, cache: Path | None = None) -> int | None:
    """The slots of the shared server recorded for ``model``, if its owner lives (read without the lock: a record
    is replaced atomically)."""
    record = Registry(model, cache).read()
    return record.slots if record is not None and record.owner_alive else None


def records(cache: Path | None = None) -> list[ServerRecord]:
    """Every readable record in the cache folder (live or stale), by model name."""
    root = Registry("-", cache).root
    found = [Registry(path.stem, cache).read() for path in sorted(root.glob("*.json"))] if root.is_dir() else []
    return [r for r in found if r is not None]
