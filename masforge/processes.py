"""Whether a process recorded by pid (in a lock file, a claim, a server's record) still lives."""

from __future__ import annotations

import os
from pathlib import Path


def pid_alive(pid: int) -> bool:
    """Whether ``pid`` is a live process: not gone and not a zombie (someone else's live process counts)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        return stat.rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return True


def process_start_time(pid: int) -> int | None:
    """When process ``pid`` started (clock ticks since boot), or None if /proc cannot tell: with the pid it names
    one process for good, even after the pid is reused."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            return int(fh.read().rsplit(b")", 1)[1].split()[19])
    except (OSError, ValueError, IndexError):
        return None


def same_process_alive(pid: int, started: int | None) -> bool:
    """Whether the process recorded as ``pid`` started at ``started`` still lives (not another that got its pid)."""
    if not pid_alive(pid):
        return False
    now = process_start_time(pid)
    return started is None or now is None or now == started
