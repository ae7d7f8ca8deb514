"""Files the user named: writing one (``export -o``, ``report -o``, ``evaluate -o``) whole or not at all, and never
through a symlink; telling what a path to read is when it is not a file (a FIFO, a device), so that reading it
neither waits forever nor reads forever and its error names what is there.

A leaf module (it imports nothing from masforge), so every layer may use it.
"""

from __future__ import annotations

import os
import stat
import tempfile
from pathlib import Path

_KINDS = ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
          (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"))


def not_a_file(path: str | Path) -> str | None:
    """What is at ``path`` when it is there but is no regular file, following symlinks (a link to ``/dev/zero`` is
    "a character device"): "a directory", "a FIFO", "a character device", "a block device" or "a socket". None when
    it is a regular file, or nothing (or nothing this process may look at) is there."""
    try:
        mode = os.stat(path).st_mode
    except (OSError, ValueError):
        return None
    return next((what for test, what in _KINDS if test(mode)), None)


def write_text_file(path: str | Path, text: str) -> Path:
    """Write ``text`` (UTF-8) to ``path``, its folders created. The text goes to a new file beside it, which then
    takes the name: a symlink at ``path`` is replaced, its target never written (an export must not overwrite
    whatever a link planted in an output folder points at), and a reader never sees half a file."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)  # what an ordinary new file gets (mkstemp makes it private)
        os.replace(tmp, target)
    except BaseException:
        if os.path.lexists(tmp):
            os.unlink(tmp)
        raise
    return target
