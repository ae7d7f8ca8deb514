"""Writing a file the user named (``export -o``, ``report -o``, ``evaluate -o``): whole or not at all, and never
through a symlink.

A leaf module (it imports nothing from masforge), so every layer may use it.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


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
