"""A machine where the embedded model is "installed" with no model at all: a cache folder holding placeholder
weights and an executable that runs :mod:`masforge.testing.stub_server` with llama.cpp's server's flags, named by
``$MASFORGE_LLAMA_SERVER`` (the testing seam of :mod:`masforge.local_model.llama_server`). masforge then
starts, shares and stops "the embedded model's server" as it would the real one; tests and benchmark dry runs use it.
"""

from __future__ import annotations

import shlex
import stat
import sys
from pathlib import Path

from masforge.cache_root import CACHE_ENV
from masforge.local_model.catalog import DEFAULT_LOCAL_MODEL, get_spec
from masforge.local_model.llama_server import SERVER_ENV
from masforge.local_model.weights import models_dir


def fake_llama_env(folder: Path, *, latency_s: float = 0.0, model: str = DEFAULT_LOCAL_MODEL) -> dict[str, str]:
    """Set up ``folder`` (a cache with placeholder weights for ``model`` and the stand-in server) and return the
    environment variables that point masforge at it. ``latency_s``: how long each chat request takes."""
    cache = folder / "cache"
    weights = models_dir(cache) / get_spec(model).filename
    weights.parent.mkdir(parents=True, exist_ok=True)
    weights.write_bytes(b"placeholder: the stand-in server loads nothing")
    server = folder / "fake-llama-server"
    server.write_text(f"#!/bin/sh\nexec {shlex.quote(sys.executable)} -m masforge.testing.stub_server "
                      f"--latency {latency_s!r} \"$@\"\n", encoding="utf-8")
    server.chmod(server.stat().st_mode | stat.S_IXUSR)
    return {CACHE_ENV: str(cache), SERVER_ENV: str(server)}
