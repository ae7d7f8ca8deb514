"""How long an LM takes per request on this machine: measured from the requests masforge sends, kept in the
masforge cache folder, and used to say up front how long an evaluation or a search will take.

Only requests that reached the LM count (an answer from the answer cache costs no time). The mean is kept per
model and endpoint; the recent past weighs most (a machine gets busier or quieter). A model never measured here
gets a stated guess. The embedded model's requests share its server's cores (its slots decode in one batch), so
its rate is each request's share of the server's time: n requests at once take n times the rate, whatever the
slots; a hosted model's rate is its latency, and n at once take the rate.
"""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path

from masforge.cache_root import cache_root
from masforge.lm.config import LMConfig

RATES_FILE = "lm_rates.json"
MEMORY = 50
"""Requests the stored mean stands for when new ones are merged in: older ones fade out."""
MAX_ENTRIES = 64
"""Models and endpoints kept, the most recently measured: every stub server of a test run has an endpoint of its
own, and an unbounded file (it had grown to 248 entries) cost every evaluation ~50 ms to rewrite."""
GUESSES = {"local": 10.0, "fake": 0.0, "hosted": 3.0}
"""Seconds per request before any was measured: the embedded model writes ~40 tokens/s on 2 cores (a few hundred
tokens per answer, bench/results/real_model.txt); hosted models answer in seconds; the fake LM at once."""

_lock = threading.Lock()
_pending: dict[str, list[float]] = {}


def rate_key(cfg: LMConfig) -> str:
    """What a rate is kept under: the model and, for a served model, where it is served. The embedded model's
    rate is its time per request on a server it shares with the requests beside it (``#shared``: its share of the
    server, see :class:`masforge.lm.client.ServerShare`; earlier files kept the bare latency under the model's
    name), per number of slots its server runs: llama-cpp-python's one slot and llama.cpp's several decode at
    different speeds."""
    if cfg.is_local:
        return f"{cfg.model}#shared/{max(1, cfg.max_concurrency)}"
    return cfg.model if cfg.is_fake else f"{cfg.model}@{cfg.api_base or ''}"


def _path() -> Path:
    return cache_root() / RATES_FILE


def record(cfg: LMConfig, seconds: float) -> None:
    """Note one request's time (kept in memory until :func:`save`)."""
    if seconds >= 0:
        with _lock:
            _pending.setdefault(rate_key(cfg), []).append(seconds)


def _read(path: Path) -> dict[str, dict[str, float]]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    if not isinstance(data, dict):
        return {}
    return {k: v for k, v in data.items() if isinstance(v, dict) and isinstance(v.get("seconds"), int | float)
            and isinstance(v.get("n"), int | float)}


def save() -> None:
    """Merge the requests noted since the last save into the rates file (a rate is a convenience: a file that
    cannot be written is left as it is)."""
    with _lock:
        pending = dict(_pending)
        _pending.clear()
    if not pending:
        return
    path = _path()
    now = time.time()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        rates = _read(path)
        for key, times in pending.items():
            old = rates.get(key, {"seconds": 0.0, "n": 0})
            n_old = min(float(old["n"]), MEMORY)
            n = n_old + len(times)
            rates[key] = {"seconds": (float(old["seconds"]) * n_old + sum(times)) / n, "n": int(n), "t": now}
        kept = sorted(rates, key=lambda k: float(rates[k].get("t", 0.0)), reverse=True)[:MAX_ENTRIES]
        tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}-{threading.get_ident()}")
        # compact: json's C encoder (an indented dump takes the pure-Python one)
        tmp.write_text(json.dumps({k: rates[k] for k in sorted(kept)}, separators=(",", ":")), encoding="utf-8")
        os.replace(tmp, path)
    except OSError:
        pass


def seconds_per_call(cfg: LMConfig) -> tuple[float, bool]:
    """(seconds per request, whether it was measured on this machine) for ``cfg``; unmeasured: a guess."""
    found = _read(_path()).get(rate_key(cfg))
    if found is not None:
        return float(found["seconds"]), True
    if cfg.is_fake:
        return GUESSES["fake"], False
    return (GUESSES["local"] if cfg.is_local else GUESSES["hosted"]), False
