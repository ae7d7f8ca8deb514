"""Where masforge keeps what it downloads, builds and caches (model weights, the llama.cpp server, LM answers)."""

from __future__ import annotations

import os
from pathlib import Path

CACHE_ENV = "MASFORGE_CACHE"


def cache_root() -> Path:
    """``$MASFORGE_CACHE`` if set, else ``~/.cache/masforge``."""
    env = os.environ.get(CACHE_ENV)
    return Path(env).expanduser() if env else Path.home() / ".cache" / "masforge"
