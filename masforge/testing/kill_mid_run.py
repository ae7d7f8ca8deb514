"""Killing masforge mid-run: SIGKILL a ``masforge evaluate`` while its sandboxes run (orphans: none may be left
alive) or while they fill the disk (leftovers: the next start removes what they wrote). A test and benchmark
helper (``tests/test_sandbox_hostile.py``, ``bench/attacks.py``)."""

from __future__ import annotations

import os
import sys
import tempfile
import time
from dataclasses import dataclass

from masforge.sandbox.isolation import CHILD_MARKER
from masforge.testing.survivors import is_alive

ORPHAN_GENOME = '''"""
name: orphan-maker
description: ignores SIGTERM, starts threads and sleeps forever (must not outlive a killed masforge)
inputs: [question]
outputs: [answer]
"""


def forward(inputs):
    import signal
    import threading
    import time

    for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(s, signal.SIG_IGN)
    for _ in range(4):
        threading.Thread(target=time.sleep, args=(1000,)).start()
    while True:
        time.sleep(0.05)
'''


def _children(pid: int) -> list[int]:
    out = []
    try:
        for tid in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{tid}/children", encoding="ascii") as fh:
                out += [int(c) for c in fh.read().split()]
    except OSError:
        pass
    return out


def descendants(pid: int) -> list[int]:
    """Every live process below ``pid``."""
    found, queue = [], [pid]
    while queue:
        for child in _children(queue.pop()):
            found.append(child)
            queue.append(child)
    return found


def _cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            return fh.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


@dataclass
class KillOutcome:
    """One SIGKILL of ``masforge evaluate`` while sandboxes ran."""

    processes: int
    """Processes below masforge at the moment of the kill."""
    sandboxes: int
    """Of those, sandbox interpreters."""
    survivors: list[int]
    """Pids of any of them (or of anything in their namespaces) still alive afterwards."""


def kill_masforge_mid_run(workdir: str, *, env: dict[str, str] | None = None, wait_s: float = 90.0) -> KillOutcome:
    """Start ``masforge evaluate`` on `ORPHAN_GENOME` (2 examples at once), SIGKILL it once both sandboxes
    run, and report which of its processes outlived it (after a grace period for teardown)."""
    import subprocess

    genome = os.path.join(workdir, "orphan_maker.py")
    with open(genome, "w", encoding="utf-8") as fh:
        fh.write(ORPHAN_GENOME)
    command = [sys.executable, "-m", "masforge", "evaluate", genome, "--task", "rg:basic_arithmetic",
               "--lm", "fake", "--limit", "2", "--concurrency", "2", "--no-cache"]
    proc = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            env={**os.environ, **(env or {})}, cwd=workdir, start_new_session=True)
    try:
        deadline = time.monotonic() + wait_s
        while True:
            tree = descendants(proc.pid)
            sandboxes = [p for p in tree if CHILD_MARKER in _cmdline(p) and not _children(p)]
            # running forward: the interpreter has its threads (lifeline + 4 sleepers)
            busy = [p for p in sandboxes if len(os.listdir(f"/proc/{p}/task")) >= 5] if sandboxes else []
            if len(busy) >= 2 or proc.poll() is not None or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        namespaces = set()
        for p in busy:
            try:
                namespaces.add(os.readlink(f"/proc/{p}/ns/pid"))
            except OSError:
                pass
        os.kill(proc.pid, 9)
        proc.wait()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    own_ns = os.readlink("/proc/self/ns/pid")
    namespaces.discard(own_ns)
    end = time.monotonic() + 5.0
    while True:
        alive = [p for p in tree if is_alive(p)]
        for entry in os.scandir("/proc"):
            if entry.name.isdigit() and namespaces and int(entry.name) not in alive:
                try:
                    if os.readlink(f"/proc/{entry.name}/ns/pid") in namespaces and is_alive(int(entry.name)):
                        alive.append(int(entry.name))
                except OSError:
                    pass
        if not alive or time.monotonic() > end:
            break
        time.sleep(0.1)
    return KillOutcome(len(tree), len(busy), alive)


FILLER_GENOME = '''"""
name: disk-filler
description: writes 48 MB into its run directory, then sleeps (its run directory must not outlive a killed masforge)
inputs: [question]
outputs: [answer]
"""


def forward(inputs):
    import time

    block = b"x" * (1 << 20)
    for i in range(48):
        with open(f"fill-{i}", "wb") as fh:
            fh.write(block)
    open("filled", "w").close()
    while True:
        time.sleep(0.05)
'''


def _run_dir_bytes(pid: int) -> int:
    """Bytes in host run folders named after masforge process ``pid``."""
    total = 0
    base = tempfile.gettempdir()
    for entry in os.scandir(base):
        if entry.name.startswith(f"masforge-sbx-{pid}-"):
            for root, _, files in os.walk(entry.path):
                for name in files:
                    try:
                        total += os.lstat(os.path.join(root, name)).st_size
                    except OSError:
                        pass
    return total


@dataclass
class LeftoverOutcome:
    """One SIGKILL of ``masforge evaluate`` while its sandbox filled its run directory."""

    written: int
    """Bytes the sandbox had written to folders of the host's temp folder when masforge was killed."""
    after_next_start: int
    """Of those, bytes still there after the next start of masforge."""


def leftover_after_kill(workdir: str, *, env: dict[str, str] | None = None, wait_s: float = 90.0) -> LeftoverOutcome:
    """Start ``masforge evaluate`` on `FILLER_GENOME`, SIGKILL it once the sandbox has written its 48 MB, start a
    masforge command that runs no code (``masforge tasks``) and measure what is left in the host's temp folder. With
    bubblewrap the run directory is in the sandbox's private /tmp: nothing reaches the host at all."""
    import subprocess

    genome = os.path.join(workdir, "disk_filler.py")
    with open(genome, "w", encoding="utf-8") as fh:
        fh.write(FILLER_GENOME)
    full_env = {**os.environ, **(env or {})}
    command = [sys.executable, "-m", "masforge", "evaluate", genome, "--task", "rg:basic_arithmetic", "--lm", "fake",
               "--limit", "1", "--no-cache"]
    proc = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            env=full_env, cwd=workdir, start_new_session=True)
    try:
        deadline = time.monotonic() + wait_s
        while proc.poll() is None and time.monotonic() < deadline:
            busy = [p for p in descendants(proc.pid) if CHILD_MARKER in _cmdline(p)]
            if busy and (_run_dir_bytes(proc.pid) >= 48 << 20 or time.monotonic() > deadline - wait_s / 2):
                time.sleep(0.5)  # the file system view of bubblewrap shows nothing here: give it time to write
                break
            time.sleep(0.1)
        written = _run_dir_bytes(proc.pid)
        os.kill(proc.pid, 9)
        proc.wait()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    time.sleep(1.0)  # the sandbox notices its parent is gone and exits
    subprocess.run([sys.executable, "-m", "masforge", "tasks"], env=full_env, cwd=workdir, capture_output=True,
                   timeout=120, check=False)
    return LeftoverOutcome(written, _run_dir_bytes(proc.pid))
