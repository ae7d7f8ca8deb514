"""Claims on evaluation work, so that several searches sharing one archive never pay for the same
(genome, task, split, LM) evaluation twice.

A search claims the key before it evaluates and releases it once the result is stored; a second search that
wants the same key waits for the claim, then finds the stored result and reuses it. A claim is an exclusive
``flock`` on a small file named after the key: the kernel drops it the moment its process dies (also on
SIGKILL), so a dead search's claim expires by itself and the next one takes the work over. The file holds who
claimed it (host, pid, run) for messages. The lock files live inside the archive's ``.git`` folder, next to
git's own state and never tracked.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import socket
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

StopFn = Callable[[], "str | None"]
WaitFn = Callable[[dict[str, Any]], None]


def key_digest(key: tuple[str, ...]) -> str:
    return hashlib.sha256("\0".join(key).encode("utf-8")).hexdigest()[:40]


def _owner(run: str) -> dict[str, Any]:
    return {"host": socket.gethostname(), "pid": os.getpid(), "run": run, "since": time.time()}


class Claim:
    """A held claim; :meth:`release` (or leaving the ``with`` block) gives it up."""

    def __init__(self, release: Callable[[], None]) -> None:
        self._release: Callable[[], None] | None = release

    def release(self) -> None:
        if self._release is not None:
            self._release()
            self._release = None

    def __enter__(self) -> Claim:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


class ClaimBook:
    """Claims as lock files in ``folder`` (shared by every process that opens the same archive)."""

    def __init__(self, folder: str | os.PathLike[str]) -> None:
        self.folder = Path(folder)

    def _path(self, key: tuple[str, ...]) -> Path:
        return self.folder / f"{key_digest(key)}.claim"

    def try_claim(self, key: tuple[str, ...], run: str = "") -> Claim | None:
        """The claim on ``key`` if nobody holds it, else None (never blocks)."""
        self.folder.mkdir(parents=True, exist_ok=True)
        path = self._path(key)
        while True:
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                return None
            # The holder may have released (and unlinked) the file between our open and our lock: then we hold
            # a lock on a file nobody else will ever look at. Only the file still at ``path`` counts.
            try:
                current = os.stat(path).st_ino
            except FileNotFoundError:
                current = None
            if current != os.fstat(fd).st_ino:
                os.close(fd)
                continue
            os.ftruncate(fd, 0)
            os.write(fd, json.dumps({"key": list(key), **_owner(run)}).encode("utf-8"))

            def release(fd: int = fd) -> None:
                with contextlib.suppress(FileNotFoundError):
                    path.unlink()  # while still locked, so a waiter re-checks and finds the key free
                os.close(fd)

            return Claim(release)

    def holder(self, key: tuple[str, ...]) -> dict[str, Any]:
        """Who holds ``key`` (as written by the holder; empty if unknown)."""
        try:
            return dict(json.loads(self._path(key).read_text(encoding="utf-8") or "{}"))
        except (OSError, ValueError):
            return {}

    def claim(self, key: tuple[str, ...], run: str = "", *, stop: StopFn | None = None,
              on_wait: WaitFn | None = None, poll_s: float = 0.2) -> Claim | None:
        """The claim on ``key``, waiting while another live process holds it; None if ``stop()`` gives a reason
        to give up first. ``on_wait(holder)`` is called once when the wait begins."""
        return _wait_for(lambda: self.try_claim(key, run), lambda: self.holder(key), stop, on_wait, poll_s)


class MemoryClaims:
    """Claims within one process (for the in-memory archive)."""

    def __init__(self) -> None:
        self._held: dict[tuple[str, ...], dict[str, Any]] = {}
        self._lock = threading.Lock()

    def try_claim(self, key: tuple[str, ...], run: str = "") -> Claim | None:
        with self._lock:
            if key in self._held:
                return None
            self._held[key] = _owner(run)

        def release() -> None:
            with self._lock:
                self._held.pop(key, None)

        return Claim(release)

    def holder(self, key: tuple[str, ...]) -> dict[str, Any]:
        with self._lock:
            return dict(self._held.get(key, {}))

    def claim(self, key: tuple[str, ...], run: str = "", *, stop: StopFn | None = None,
              on_wait: WaitFn | None = None, poll_s: float = 0.05) -> Claim | None:
        return _wait_for(lambda: self.try_claim(key, run), lambda: self.holder(key), stop, on_wait, poll_s)


def _wait_for(attempt: Callable[[], Claim | None], holder: Callable[[], dict[str, Any]], stop: StopFn | None,
              on_wait: WaitFn | None, poll_s: float) -> Claim | None:
    told = False
    while True:
        claim = attempt()
        if claim is not None:
            return claim
        if stop is not None and stop():
            return None
        if not told and on_wait is not None:
            on_wait(holder())
            told = True
        time.sleep(poll_s)
