"""The archive's writer lock: one writer at a time, across threads (a mutex) and processes (an ``flock``)."""

from __future__ import annotations

import contextlib
import fcntl
import os
import threading
from collections.abc import Iterator
from pathlib import Path


class WriteLock:
    """Re-entrant: a write that rebuilds the index on its way holds the lock once, not twice."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.mutex = threading.RLock()  # one archive object may be shared by evaluation threads
        self._depth = 0

    @contextlib.contextmanager
    def hold(self) -> Iterator[None]:
        with self.mutex:
            if self._depth:
                self._depth += 1
                try:
                    yield
                finally:
                    self._depth -= 1
                return
            with _flock(self.path):
                self._depth = 1
                try:
                    yield
                finally:
                    self._depth = 0


@contextlib.contextmanager
def _flock(path: Path) -> Iterator[None]:
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing the descriptor releases the lock, also when the process dies
