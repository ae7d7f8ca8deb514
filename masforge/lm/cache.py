"""LM answers on disk, so evaluating the same genome again makes no LM call."""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import threading
from pathlib import Path
from typing import Any

from masforge.cache_root import cache_root


def default_cache_path() -> Path:
    """``$MASFORGE_LM_CACHE``, else ``lm_cache.sqlite`` in the masforge cache folder (``$MASFORGE_CACHE``)."""
    if os.environ.get("MASFORGE_LM_CACHE"):
        return Path(os.environ["MASFORGE_LM_CACHE"])
    return cache_root() / "lm_cache.sqlite"


class LMCache:
    """Responses on disk (SQLite, WAL), keyed by model + messages + sampling + sample index.

    Evaluating the same genome again makes no LM call. One connection per thread."""

    def __init__(self, path: str | os.PathLike[str] | None = None) -> None:
        self.path = Path(path) if path else default_cache_path()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._local = threading.local()
        conn = self._conn()
        conn.execute("CREATE TABLE IF NOT EXISTS responses (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
        conn.commit()

    def _conn(self) -> sqlite3.Connection:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = sqlite3.connect(self.path, timeout=30, check_same_thread=False)
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=NORMAL")
            self._local.conn = conn
        return conn

    @staticmethod
    def make_key(payload: dict[str, Any]) -> str:
        return hashlib.sha256(json.dumps(payload, sort_keys=True, default=str).encode()).hexdigest()

    def get(self, key: str) -> dict[str, Any] | None:
        try:
            row = self._conn().execute("SELECT value FROM responses WHERE key = ?", (key,)).fetchone()
        except sqlite3.DatabaseError:
            return None  # a damaged cache costs money, never correctness
        return json.loads(row[0]) if row else None

    def put(self, key: str, value: dict[str, Any]) -> None:
        try:
            conn = self._conn()
            conn.execute("INSERT OR REPLACE INTO responses VALUES (?, ?)", (key, json.dumps(value)))
            conn.commit()
        except sqlite3.DatabaseError:
            pass
