"""Creating an archive folder so that a kill at any moment leaves either no archive or a whole one.

The archive is built in a private folder beside its destination (``.<name>.creating-<pid>-<random>``) and then
renamed into place in one step (``rename(2)`` replaces a missing or empty folder atomically); the masforge marker
is already inside when the folder appears. A builder killed half-way leaves only its private folder, which the
next creation removes once its owner is gone (a ``git`` child the kill orphaned may still be writing there,
never in the archive). When two processes create the same archive at once, the first rename wins and the other
finds a complete archive.

Folders left half-made by masforge versions that initialised in place (``.git`` and the lock file, no marker,
no candidate in git) are recognised and rebuilt the same way; anything else without a marker is refused.
"""

from __future__ import annotations

import errno
import fcntl
import os
import shutil
import uuid
import zlib
from collections.abc import Callable
from pathlib import Path

from masforge.errors import ArchiveError
from masforge.processes import pid_alive

# Names of what an interrupted in-place initialisation could leave (see archive.store for their meaning).
_HALF_MADE_NAMES = {".git", ".gitignore", "README.md", ".masforge-lock", ".masforge-index.sqlite",
                    ".masforge-index.sqlite-journal"}
_BUILD_TAG = ".creating-"
_DISCARD_TAG = ".discarded-"


def sweep_stale_builds(dest: Path) -> int:
    """Remove private build folders of ``dest`` whose creating process is gone; returns how many."""
    removed = 0
    try:
        siblings = list(dest.parent.iterdir())
    except OSError:
        return 0
    for entry in siblings:
        for tag in (_BUILD_TAG, _DISCARD_TAG):
            prefix = f".{dest.name}{tag}"
            if not entry.name.startswith(prefix):
                continue
            pid_text = entry.name[len(prefix):].split("-", 1)[0]
            if pid_text.isdigit() and (int(pid_text) == os.getpid() or pid_alive(int(pid_text))):
                continue  # a live (or our own, other-thread) builder's folder
            shutil.rmtree(entry, ignore_errors=True)
            removed += 1
    return removed


def _read_loose_commit(git_dir: Path, sha: str) -> bytes | None:
    try:
        raw = zlib.decompress((git_dir / "objects" / sha[:2] / sha[2:]).read_bytes())
    except (OSError, zlib.error, ValueError):
        return None
    header, _, body = raw.partition(b"\0")
    return body if header.startswith(b"commit ") else None


def half_made(path: Path, marker: str) -> str | None:
    """Why ``path`` is an archive whose creation was interrupted (so it holds no candidate and may be rebuilt),
    or None if it is not one (no such folder, a finished archive, or someone else's folder)."""
    if not path.is_dir() or (path / marker).exists():
        return None
    names = {e.name for e in path.iterdir()}
    if not names:
        return None
    if not all(n in _HALF_MADE_NAMES or ".tmp-" in n for n in names):
        return None
    git_dir = path / ".git"
    if ".masforge-lock" not in names and not (git_dir / "masforge").is_file():
        return None  # our first two steps leave one of these; without both it is not ours
    refs = git_dir / "refs" / "candidates"
    if refs.is_dir() and any(refs.iterdir()):
        return None
    packed = git_dir / "packed-refs"
    if packed.is_file() and "refs/candidates/" in packed.read_text(encoding="utf-8", errors="replace"):
        return None
    main = git_dir / "refs" / "heads" / "main"
    if main.is_file():
        sha = main.read_text(encoding="ascii", errors="replace").strip()
        commit = _read_loose_commit(git_dir, sha) if len(sha) == 40 else None
        if commit is not None and (b"\nparent " in commit or b"init masforge archive" not in commit):
            return None  # history beyond the init commit: real data, never thrown away
    return "archive creation was interrupted (no marker, no candidates yet)"


def _discard_half_made(dest: Path, marker: str) -> None:
    """Move a half-made archive aside and delete it (rename() only replaces an empty folder). Under the folder's
    own lock and re-checked there, so a process that lost a race never moves a finished archive. A kill between
    this and the final rename leaves no archive and a finished build folder, both swept by the next creation."""
    aside = dest.parent / f".{dest.name}{_DISCARD_TAG}{os.getpid()}-{uuid.uuid4().hex[:8]}"
    try:
        fd = os.open(dest / ".masforge-lock", os.O_RDWR | os.O_CREAT, 0o644)
    except OSError:
        return  # gone already (another process discarded it)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        if half_made(dest, marker) is None:
            return
        os.rename(dest, aside)
    finally:
        os.close(fd)
    shutil.rmtree(aside, ignore_errors=True)


def create_atomically(dest: Path, build: Callable[[Path], None], marker: str) -> None:
    """Make ``dest`` an archive with ``build(folder)`` so that it appears complete or not at all.

    ``dest`` may be missing, an empty folder, or a half-made archive (rebuilt). Raises ArchiveError for a folder
    that holds anything else."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    sweep_stale_builds(dest)
    stale = half_made(dest, marker)
    if dest.exists() and stale is None and any(dest.iterdir()):
        if (dest / marker).exists():
            return
        names = sorted(e.name for e in dest.iterdir())
        what = ".git (an existing git repository)" if ".git" in names else names[0]
        raise ArchiveError(f"{dest}: folder holds {what} and is not a masforge archive; choose an empty or new folder")
    build_dir = dest.parent / f".{dest.name}{_BUILD_TAG}{os.getpid()}-{uuid.uuid4().hex[:8]}"
    try:
        build_dir.mkdir()
    except OSError as exc:
        raise ArchiveError(f"{dest}: cannot create the archive beside it ({exc.strerror}); "
                           "make its parent folder writable") from None
    try:
        build(build_dir)
        if stale is not None:
            _discard_half_made(dest, marker)
        try:
            os.rename(build_dir, dest)
        except OSError as exc:
            if exc.errno not in (errno.ENOTEMPTY, errno.EEXIST, errno.ENOTDIR):
                raise ArchiveError(f"{dest}: cannot move the new archive into place ({exc.strerror})") from None
            if not (dest / marker).exists():  # someone else's data appeared there meanwhile
                raise ArchiveError(f"{dest}: folder filled up while the archive was being created and is not a "
                                   "masforge archive; choose an empty or new folder") from None
            # Another process created the same archive first: use theirs.
    finally:
        shutil.rmtree(build_dir, ignore_errors=True)
