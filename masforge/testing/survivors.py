"""Which processes of a sandboxed run are still alive: a program prints who it is first (`IDENTIFY`), and
`survivors` finds the host processes of its run after it ended (target: none). A test and benchmark helper."""

from __future__ import annotations

import os
import re
import time

from masforge.sandbox.isolation import _process_uids, isolation

IDENTIFY = (
    "import os as _os\n"
    "print(f\"SANDBOX-ID pid={_os.getpid()} ns={_os.readlink('/proc/self/ns/pid')} uid={_os.getuid()} "
    "token=@TOKEN@\", flush=True)\n"
)
"""Code that prints who the sandboxed process is, for `survivors` (put it first in a program)."""

_ID = re.compile(r"SANDBOX-ID pid=(\d+) ns=(\S+) uid=(\d+)")


def is_alive(pid: int) -> bool:
    """Whether process ``pid`` exists and is not a zombie."""
    try:
        _, zombie = _process_uids(str(pid))
    except (OSError, ValueError):
        return False
    return not zombie


def _pgid(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            return int(fh.read().rsplit(b")", 1)[1].split()[2])
    except (OSError, ValueError, IndexError):
        return None


def _find_survivors(pid: int, ns: str, uid: int) -> list[int]:
    iso = isolation()
    root = os.geteuid() == 0
    found = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        other = int(entry.name)
        if other == os.getpid() or not is_alive(other):
            continue
        try:
            uids, _ = _process_uids(entry.name)
        except (OSError, ValueError):
            continue
        if iso.pid_namespace:
            try:
                same = os.readlink(f"/proc/{other}/ns/pid") == ns
            except OSError:
                continue
            if same and (not root or uid in uids):
                found.append(other)
        elif (root and uid in uids) or other == pid or _pgid(other) == pid:
            found.append(other)
    return found


def survivors(printed: str, grace_s: float = 3.0) -> list[int]:
    """Host pids of processes of the run that printed `IDENTIFY`, still alive after ``grace_s``.

    With a PID namespace a process belongs to the run when it is in that namespace (and, as root,
    runs as the run's uid, so a recycled namespace number does not count); without one, when it is
    the run's process, in its process group or (as root) runs as its uid.
    """
    match = _ID.search(printed)
    if match is None:
        raise ValueError("the program did not print its SANDBOX-ID line (put IDENTIFY first)")
    pid, ns, uid = int(match.group(1)), match.group(2), int(match.group(3))
    deadline = time.monotonic() + grace_s
    while True:  # a SIGKILLed namespace takes a moment to be torn down
        found = _find_survivors(pid, ns, uid)
        if not found or time.monotonic() >= deadline:
            return found
        time.sleep(0.05)
