"""The operating-system layers that confine a sandboxed process (used by `masforge.sandbox.runner`).

One job: decide, once per process, how a sandbox child is confined, build the command prefix that
does it, and own the per-run unprivileged uids. Layers, in order of preference:

* ``bwrap`` (bubblewrap, Debian package ``bubblewrap``): new PID, mount, IPC and UTS namespaces and
  a network namespace unless network access is allowed; ``--die-with-parent``, so the whole
  namespace dies with masforge, even when masforge is SIGKILLed (when the command exits, bubblewrap's
  PID 1 exits and the kernel kills every process left in the namespace). The file system is a
  read-only view of the system directories, the Python installation and the bootstrap script only
  (the project folder, home directories and other data are not there; an interpreter or virtual environment
  under the system temp folder is bound into the private ``/tmp`` after it is mounted); ``/tmp`` and ``/dev/shm``
  are private, size-limited tmpfs mounts, and the run directory is a fresh folder in that ``/tmp``;
  ``/proc`` shows the namespace's processes only. As root all capabilities but setuid/setgid are
  dropped (the bootstrap needs those two to switch to the run's uid, which then drops them as well).
* ``unshare`` (util-linux): PID namespace (``--kill-child``), fresh ``/proc``, IPC, UTS and network
  namespaces. The host file system stays visible (writable where the uid's permissions allow).
* ``process``: no namespaces: a process group, the per-run uid and rlimits only.

In every mode the child also holds a *lifeline* pipe whose write end only the parent holds: when the
parent dies, the bootstrap kills the run's processes and exits (covers ``unshare``, which does not
follow its parent, and ``process``).

When the parent runs as root each run gets its own uid (``_UidLease``); a lease is never handed out
while a process of that uid lives: a slot whose last holder died mid-run is swept before reuse, and
the first use in a process sweeps every free slot (`startup_sweep`), and run folders left in the host's temp folder
by a masforge that was killed (named after their process) are removed (`sweep_run_dirs`) when the next masforge
command starts (`sweep_leftover_run_dirs`).

``MASFORGE_SANDBOX`` (``auto``, ``bwrap``, ``unshare``, ``process``) forces a mode. ``auto`` (the default) runs
generated code only with bubblewrap's file-system layer: where it cannot work, the probe's own error is named and
code refuses to run (`Isolation.require_file_system_layer`); choosing ``unshare`` or ``process`` accepts less.
"""

from __future__ import annotations

import fcntl
import logging
import marshal
import os
import re
import shutil
import signal
import site
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from masforge.errors import SandboxError, SandboxUnavailable
from masforge.sandbox.child import PARTS

__all__ = ["Isolation", "child_command", "host_run_dir", "isolation", "remove_tree", "sandbox_status", "startup_sweep",
           "sweep_leftover_run_dirs", "sweep_run_dirs"]

log = logging.getLogger("masforge.sandbox.runner")

CHILD_DIR = str(Path(__file__).resolve().with_name("child"))
"""The folder of the child's bootstrap (the package `masforge.sandbox.child`, compiled from here)."""
CHILD_PACKAGE = "_masforge_sandbox_child"
"""The private package name the bootstrap's parts run under in the child (only while the launcher loads them)."""
CHILD_MARKER = CHILD_PACKAGE
"""In the command line of every sandbox child (its launcher names the package): how to recognise one."""
# The bootstrap arrives compiled, in a sealed in-memory file (compiling its source anew cost every sandbox ~15 ms):
# a list of (module name, is a package, file, code) in import order. The launcher makes each a module (frames keep
# the file names, so tracebacks trim them), runs them, takes them out of sys.modules again and calls the last one's
# main().
_LAUNCHER = """import marshal,os,sys
f=int(sys.argv.pop());b=os.pread(f,os.fstat(f).st_size,0);os.close(f);m=sys.modules
for n,p,a,c in marshal.loads(b):
 d=m[n]=type(sys)(n);d.__file__=a;d.__package__=n if p else n.rpartition('.')[0]
 if p:d.__path__=[]
 exec(c,d.__dict__)
for n in [n for n in m if n.partition('.')[0]=={package!r}]:del m[n]
d.main()"""
SAFE_PATH = "/usr/local/bin:/usr/bin:/bin"
UID_BASE = 1_500_000_000
UID_SLOTS = 65536
MODES = ("bwrap", "unshare", "process")
_SYSTEM_DIRS = ("/usr", "/etc", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
_SHM_MB = 16
_PROBE_TIMEOUT_S = 20.0


@dataclass(frozen=True)
class Isolation:
    """How sandbox children are confined on this machine (probed once, see `isolation`)."""

    mode: str
    """``bwrap``, ``unshare`` or ``process``."""
    root: bool
    """The parent runs as root: each run gets its own unprivileged uid."""
    missing: tuple[str, ...] = ()
    """Layers that are not available here, each with the reason or the fix."""
    bwrap: str | None = None
    unshare: str | None = None
    accepted: bool = False
    """The user chose this mode (``MASFORGE_SANDBOX``): generated code may run without the layers it lacks."""

    @property
    def pid_namespace(self) -> bool:
        return self.mode in ("bwrap", "unshare")

    @property
    def private_fs(self) -> bool:
        return self.mode == "bwrap"

    def layers(self) -> list[str]:
        """The layers that hold, for the run record."""
        out = []
        if self.pid_namespace:
            out += ["pid namespace", "network namespace", "ipc namespace"]
        if self.private_fs:
            out += ["read-only file system view", "private /tmp"]
        if self.root:
            out.append("per-run uid")
        return [*out, "process group", "lifeline", "rlimits", "scrubbed environment", "audit hook"]

    def require_file_system_layer(self) -> None:
        """Raise :class:`SandboxUnavailable` if generated code would run without the read-only file system view
        and private /tmp while the user has not accepted that (by choosing a mode with ``MASFORGE_SANDBOX``)."""
        if self.private_fs or self.accepted:
            return
        cause = next((m[m.index("(") + 1:-1] for m in self.missing if m.startswith("read-only file system view")),
                     "bubblewrap is not available")
        # bubblewrap installed but failing is not fixed by installing it: the cause then says what stopped it
        fix = "make bubblewrap work here" if "bubblewrap failed" in cause else \
            "install bubblewrap (apt install bubblewrap, or `make bubblewrap`)"
        raise SandboxUnavailable(
            f"generated code would run without the sandbox's read-only file system view and private /tmp ({cause}): "
            f"{fix}, or set MASFORGE_SANDBOX=unshare to accept running it without that layer")

    def run_dir_on_host(self) -> bool:
        """Whether the run directory lives on the host (else: inside the sandbox's private /tmp)."""
        return not self.private_fs

    def command(self, inner: list[str], *, network: bool, disk_mb: int) -> list[str]:
        """``inner`` (the interpreter command) wrapped in this mode's namespaces."""
        if self.mode == "bwrap":
            assert self.bwrap is not None
            return [*_bwrap_prefix(self.bwrap, root=self.root, network=network, disk_mb=disk_mb), "--", *inner]
        if self.mode == "unshare":
            assert self.unshare is not None
            return [*_unshare_prefix(self.unshare, root=self.root, network=network), "--", *inner]
        return list(inner)

    def death_signal(self, returncode: int | None) -> int | None:
        """The signal that ended the sandboxed program, from the wrapper's exit status."""
        if returncode is None:
            return None
        if returncode < 0:
            return -returncode
        if self.mode == "bwrap" and 128 < returncode < 128 + 65:  # bubblewrap reports 128 + signal
            return returncode - 128
        return None


# --------------------------------------------------------------------------------------------------
# command prefixes


def interpreter() -> str:
    """This interpreter as the sandbox starts it: an absolute path through real folders. ``sys.executable`` keeps
    the path Python was started by (``../x/.venv/bin/python``, or ``/tmp/a/../x/...``), which the sandbox cannot
    follow: it starts in ``/`` with its own ``/tmp``. The file name itself is kept, not resolved: a virtual
    environment's ``python`` is a link whose place is how the interpreter finds its environment."""
    folder, name = os.path.split(os.path.abspath(sys.executable))
    return os.path.join(os.path.realpath(folder), name)


def _python_dirs() -> list[str]:
    """Directories the child interpreter reads: prefixes (stdlib, shared libpython, venv) and its binary."""
    dirs = {sys.prefix, sys.exec_prefix, sys.base_prefix, sys.base_exec_prefix}
    dirs.add(os.path.dirname(interpreter()))
    dirs.add(os.path.dirname(os.path.realpath(sys.executable)))
    dirs.update(p for p in site.getsitepackages([sys.prefix]) if os.path.isdir(p))
    out: set[str] = set()
    for d in dirs:
        if d and os.path.isabs(d) and os.path.exists(d):
            out.add(os.path.normpath(d))
            out.add(os.path.realpath(d))
    return sorted(out)


def _covered(path: str, by: list[str]) -> bool:
    return any(path == b or path.startswith(b.rstrip("/") + "/") for b in by)


def _bwrap_prefix(exe: str, *, root: bool, network: bool, disk_mb: int) -> list[str]:
    cmd = [exe, "--die-with-parent", "--unshare-pid", "--unshare-ipc", "--unshare-uts",
           "--hostname", "sandbox"]
    if not network:
        cmd.append("--unshare-net")
    if root:  # the bootstrap switches to the run's uid, which clears these two as well
        cmd += ["--cap-drop", "ALL", "--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID"]
    else:
        cmd.append("--unshare-user")
    bound: list[str] = []
    for d in _SYSTEM_DIRS:
        if os.path.islink(d):
            cmd += ["--symlink", os.readlink(d), d]
        elif os.path.isdir(d):
            cmd += ["--ro-bind", d, d]
            bound.append(d)
    cmd += ["--proc", "/proc", "--dev", "/dev",
            "--perms", "1777", "--size", str(disk_mb * 1024 * 1024), "--tmpfs", "/tmp",
            "--perms", "1777", "--size", str(_SHM_MB * 1024 * 1024), "--tmpfs", "/dev/shm"]
    # After the private /tmp is mounted: an interpreter or a clone under the system temp folder (a CI runner's
    # checkout, a clone in /tmp) is bound into it read-only, and only those directories of it.
    made: set[str] = set()
    for d in _python_dirs():
        if _covered(d, bound) or _covered(d, ["/proc", "/dev"]):
            continue
        # folders leading to it inside the private /tmp: traversable, like the host's (bubblewrap makes them 0700)
        parent = os.path.dirname(d)
        chain = []
        while _covered(parent, ["/tmp", "/dev/shm"]) and parent not in ("/tmp", "/dev/shm") and parent not in made:
            chain.append(parent)
            parent = os.path.dirname(parent)
        for folder in reversed(chain):
            cmd += ["--perms", "0755", "--dir", folder]
            made.add(folder)
        cmd += ["--ro-bind", d, d]
        bound.append(d)
    return [*cmd, "--chdir", "/"]


def _unshare_prefix(exe: str, *, root: bool, network: bool) -> list[str]:
    cmd = [exe]
    if not root:
        cmd += ["--user", "--map-root-user"]
    cmd += ["--pid", "--fork", "--kill-child", "--mount-proc", "--ipc", "--uts"]
    if not network:
        cmd.append("--net")
    return cmd


# --------------------------------------------------------------------------------------------------
# the bootstrap


def child_command(fds: list[int]) -> tuple[list[str], int]:
    """The interpreter command that runs the bootstrap with descriptors ``fds``, and the descriptor of its compiled
    code, which the caller must pass on too (one sealed in-memory file per process, read by each child)."""
    with _lock:
        code_fd = _state.get("child_code")
        if code_fd is None:
            data = marshal.dumps(_bootstrap_code())
            code_fd = os.memfd_create("masforge-sandbox-bootstrap", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
            os.write(code_fd, data)
            fcntl.fcntl(code_fd, fcntl.F_ADD_SEALS, fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW | fcntl.F_SEAL_WRITE
                        | fcntl.F_SEAL_SEAL)
            _state["child_code"] = code_fd
    launcher = _LAUNCHER.format(package=CHILD_PACKAGE)
    return [interpreter(), "-S", "-P", "-s", "-c", launcher, *(str(fd) for fd in fds), str(code_fd)], code_fd


def _bootstrap_code() -> list[tuple[str, bool, str, Any]]:
    """The bootstrap's package and its parts (`masforge.sandbox.child.PARTS`, in import order), each compiled from
    its file under `CHILD_DIR`: (module name, is a package, file, code), what the launcher runs."""
    modules = [(CHILD_PACKAGE, True, "__init__"), *((f"{CHILD_PACKAGE}.{part}", False, part) for part in PARTS)]
    out = []
    for name, package, stem in modules:
        path = os.path.join(CHILD_DIR, stem + ".py")
        source = Path(path).read_text(encoding="utf-8")
        out.append((name, package, path, compile(source, path, "exec", dont_inherit=True)))
    return out


# --------------------------------------------------------------------------------------------------
# probing (once per process)


def _works(command: list[str]) -> str | None:
    """None if ``command`` runs and exits 0 here, else why not (the tool's own last line of error output)."""
    try:
        probe = subprocess.run(command, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                               stderr=subprocess.PIPE, env={"PATH": SAFE_PATH}, timeout=_PROBE_TIMEOUT_S,
                               check=False, start_new_session=True)
    except subprocess.TimeoutExpired:
        return f"it did not start a Python within {_PROBE_TIMEOUT_S:g} s"
    except (OSError, subprocess.SubprocessError) as exc:
        return f"{type(exc).__name__}: {exc}"
    if probe.returncode == 0:
        return None
    lines = probe.stderr.decode("utf-8", "replace").strip().splitlines()
    return lines[-1].strip()[:300] if lines else f"exit status {probe.returncode}"


def _probe(forced: str) -> Isolation:
    root = os.geteuid() == 0
    python = [interpreter(), "-S", "-c", "pass"]
    bwrap, unshare = shutil.which("bwrap"), shutil.which("unshare")
    missing: list[str] = []
    if not root:
        missing.append("per-run uid (not root: sandboxed code runs as your user)")
    failed: str | None = None
    if forced in ("auto", "bwrap") and bwrap is not None:
        iso = Isolation("bwrap", root, tuple(missing), bwrap=bwrap)
        failed = _works(iso.command(python, network=False, disk_mb=64))
        if failed is None:
            return iso
    if forced == "bwrap":
        raise SandboxError(f"MASFORGE_SANDBOX=bwrap but bubblewrap cannot create a sandbox here ("
                           f"{failed or 'bubblewrap is not installed'}): install the Debian package bubblewrap "
                           "(and allow user namespaces when not root) or unset it")
    if forced in ("auto", "unshare"):
        why = "forced by MASFORGE_SANDBOX=unshare" if forced == "unshare" else \
            "bubblewrap not installed: apt install bubblewrap" if bwrap is None else \
            f"bubblewrap failed here: {failed}"
        missing.append(f"read-only file system view and private /tmp ({why})")
    unshare_failed: str | None = None
    if forced in ("auto", "unshare") and unshare is not None:
        iso = Isolation("unshare", root, tuple(missing), unshare=unshare, accepted=forced == "unshare")
        unshare_failed = _works(iso.command(python, network=False, disk_mb=64))
        if unshare_failed is None:
            return iso
    if forced == "unshare":
        raise SandboxError(f"MASFORGE_SANDBOX=unshare but unshare cannot create namespaces here ("
                           f"{unshare_failed or 'unshare is not installed'}): allow user namespaces or run as root, "
                           "or unset MASFORGE_SANDBOX")
    why = "forced by MASFORGE_SANDBOX=process" if forced == "process" else \
        f"unshare failed here: {unshare_failed}" if unshare_failed else "no bubblewrap and no unshare"
    if forced == "process":
        missing.append("read-only file system view and private /tmp (forced by MASFORGE_SANDBOX=process)")
    missing.append(f"pid and network namespaces ({why})")
    return Isolation("process", root, tuple(missing), accepted=forced == "process")


_lock = threading.Lock()
_state: dict[str, Any] = {}


def _forced_mode() -> str:
    mode = os.environ.get("MASFORGE_SANDBOX", "auto").strip().lower() or "auto"
    if mode not in ("auto", *MODES):
        raise SandboxError(f"MASFORGE_SANDBOX={mode!r} is not one of auto, {', '.join(MODES)}: fix or unset it")
    return mode


def isolation() -> Isolation:
    """This machine's isolation (probed on first use; says once, in one line, which layers are missing)."""
    forced = _forced_mode()
    with _lock:
        cached = _state.get(forced)
        if cached is None:
            cached = _state[forced] = _probe(forced)
            if cached.missing:
                log.warning("masforge sandbox (%s): missing %s", cached.mode, "; ".join(cached.missing))
            if cached.root and "swept" not in _state:
                _state["swept"] = startup_sweep()
            _sweep_run_dirs_once()
        return cached


def sweep_leftover_run_dirs() -> int:
    """Remove the run folders a killed masforge left in the host's temp folder (`sweep_run_dirs`), once per process:
    every masforge command does it as it starts, whether it runs code or not (else the first sandbox does); returns
    how many went."""
    with _lock:
        return _sweep_run_dirs_once()


def _sweep_run_dirs_once() -> int:
    if "swept_dirs" not in _state:  # the caller holds _lock
        _state["swept_dirs"] = sweep_run_dirs()
    return int(_state["swept_dirs"])


def sandbox_status() -> dict[str, Any]:
    """What a run records about its sandbox: mode, layers that hold, layers missing, stale processes killed and
    leftover run folders removed at start-up."""
    iso = isolation()
    return {"isolation": iso.mode, "layers": iso.layers(), "missing": list(iso.missing),
            "stale_processes_killed": _stale_killed[0], "leftover_run_dirs_removed": _state.get("swept_dirs", 0)}


# --------------------------------------------------------------------------------------------------
# run directories on the host (without bubblewrap's private /tmp)


_RUN_DIR_PREFIX = "masforge-sbx-"
_OWNED_RUN_DIR = re.compile(r"masforge-sbx-(\d+)-(\d+)-[A-Za-z0-9_]+")
_LEGACY_RUN_DIR = re.compile(r"masforge-sbx-[A-Za-z0-9_]{8,12}")
_LEGACY_AGE_S = 6 * 3600.0


def _start_time(pid: int) -> int | None:
    """When process ``pid`` started (clock ticks since boot; with the pid, it names one process for good)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            return int(fh.read().rsplit(b")", 1)[1].split()[19])
    except (OSError, ValueError, IndexError):
        return None


def host_run_dir() -> str:
    """A fresh private run directory in the host's temp folder, named after this process (pid and start time), so
    that the next start of masforge knows it for a leftover once this process is gone (see `sweep_run_dirs`)."""
    prefix = f"{_RUN_DIR_PREFIX}{os.getpid()}-{_start_time(os.getpid()) or 0}-"
    return os.path.realpath(tempfile.mkdtemp(prefix=prefix))


def remove_tree(path: str) -> None:
    """Remove a run directory whatever the sandboxed code did to its permissions."""
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


def sweep_run_dirs(directory: str | None = None) -> int:
    """Remove run directories left in the host's temp folder by a masforge that was killed (its process is gone);
    returns how many. Folders of an older masforge that do not name their process go once they are 6 hours old."""
    directory = directory or tempfile.gettempdir()
    removed = 0
    try:
        entries = list(os.scandir(directory))
    except OSError:
        return 0
    for entry in entries:
        try:
            if not entry.is_dir(follow_symlinks=False):
                continue
            owned = _OWNED_RUN_DIR.fullmatch(entry.name)
            if owned is not None:
                pid, started = int(owned.group(1)), int(owned.group(2))
                if _start_time(pid) == started and started:
                    continue  # its masforge still runs
            elif not _LEGACY_RUN_DIR.fullmatch(entry.name) or \
                    time.time() - entry.stat(follow_symlinks=False).st_mtime < _LEGACY_AGE_S:
                continue
        except OSError:
            continue
        remove_tree(entry.path)
        removed += not os.path.lexists(entry.path)
    if removed:
        log.warning("masforge sandbox: removed %d leftover run folder(s) of an earlier run from %s", removed,
                    directory)
    return removed


# --------------------------------------------------------------------------------------------------
# per-run uids


_stale_killed = [0]  # processes of a reused uid killed before its slot was handed out again


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


def _slot_fd(directory: str, slot: int) -> int:
    flags = os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC
    return os.open(os.path.join(directory, str(slot)), flags, 0o600)


class _UidLease:
    """An unprivileged uid/gid used by exactly one sandbox run at a time (flock on a lock file).

    While held, the lock file says who holds it; a clean release empties it. A non-empty file found
    by the next holder means the last run ended without cleaning up (its masforge was killed), so
    that uid's processes are killed before the uid is used again.
    """

    def __init__(self) -> None:
        directory = _uid_lock_dir()
        self._fd: int | None = None
        self.stale_killed = 0
        for slot in range(UID_SLOTS):
            fd = _slot_fd(directory, slot)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                continue
            self.uid = self.gid = UID_BASE + slot
            self._fd = fd
            if os.pread(fd, 1, 0):  # the previous holder died mid-run
                self.stale_killed = _kill_uid(self.uid)
                _stale_killed[0] += self.stale_killed
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
            return
        raise SandboxError("no free sandbox uid: too many concurrent sandbox runs")

    def release(self) -> None:
        """Give the uid back, marked clean (closing the fd drops the lock)."""
        if self._fd is not None:
            try:
                os.ftruncate(self._fd, 0)
            finally:
                os.close(self._fd)
                self._fd = None


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


def sandbox_processes(uids: range | None = None) -> dict[int, int]:
    """Live (non-zombie) processes running as a sandbox uid: pid -> uid."""
    wanted = uids if uids is not None else range(UID_BASE, UID_BASE + UID_SLOTS)
    found: dict[int, int] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            ids, zombie = _process_uids(entry.name)
        except (OSError, ValueError):
            continue
        hit = next((u for u in ids if u in wanted), None)
        if hit is not None and not zombie:
            found[int(entry.name)] = hit
    return found


def _kill_uid(uid: int) -> int:
    """SIGKILL every process running as ``uid`` (a sandbox uid only); returns how many were found.

    Processes are found in /proc and signalled through a pidfd after re-checking their uid, so a
    recycled pid is never hit. Repeats while it finds processes (a fork bomb re-spawning).
    """
    if not UID_BASE <= uid < UID_BASE + UID_SLOTS:  # never anything but a sandbox uid
        return 0
    killed: set[int] = set()
    for _ in range(50):
        found = False
        for pid in sandbox_processes(range(uid, uid + 1)):
            try:
                pidfd = os.pidfd_open(pid)
            except OSError:
                continue
            try:
                ids, _ = _process_uids(str(pid))
                if uid in ids:
                    signal.pidfd_send_signal(pidfd, signal.SIGKILL)
                    killed.add(pid)
                    found = True
            except (OSError, ValueError):
                pass
            finally:
                os.close(pidfd)
        if not found:
            break
        time.sleep(0.005)
    return len(killed)


def startup_sweep() -> int:
    """Kill processes of sandbox uids that no live run holds (orphans of a killed masforge); root only."""
    if os.geteuid() != 0:
        return 0
    stale = sandbox_processes()
    if not stale:
        return 0
    directory = _uid_lock_dir()
    killed = 0
    for uid in sorted(set(stale.values())):
        fd = _slot_fd(directory, uid - UID_BASE)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:  # a live run (maybe of another masforge) owns this uid
            os.close(fd)
            continue
        try:
            killed += _kill_uid(uid)
            os.ftruncate(fd, 0)
        finally:
            os.close(fd)
    if killed:
        log.warning("masforge sandbox: killed %d leftover sandbox process(es) of an earlier run", killed)
    _stale_killed[0] += killed
    return killed
