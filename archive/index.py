"""The archive's SQLite index: a cache of its git history that every query reads.

It is rebuilt from git whenever it is missing, corrupt or built by another schema; after a killed writer it
catches up with only the journal entries it misses. Durability across power loss is not needed (a torn index is
detected and rebuilt), while SQLite's rollback journal still makes every transaction atomic against a kill.
"""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

import git

from masforge.archive.git_store import FORMAT_VERSION, INDEX_FILE, MAIN_REF, GitStore
from masforge.archive.ids import HEX, normalised, unknown_candidate, unresolved
from masforge.archive.locking import WriteLock
from masforge.archive.records import CandidateRecord, ResultRecord
from masforge.errors import ArchiveError

T = TypeVar("T")
INDEX_SCHEMA = 2

SCHEMA = """
CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE candidates(
    seq INTEGER PRIMARY KEY, id TEXT NOT NULL UNIQUE, name TEXT NOT NULL, kind TEXT NOT NULL,
    strategy TEXT NOT NULL, operator TEXT NOT NULL, rationale TEXT NOT NULL, generation INTEGER NOT NULL,
    run TEXT NOT NULL, created_at TEXT NOT NULL, tags TEXT NOT NULL, status TEXT NOT NULL,
    commit_sha TEXT NOT NULL, tip_sha TEXT NOT NULL);
CREATE TABLE edges(child TEXT NOT NULL, parent TEXT NOT NULL, pos INTEGER NOT NULL, PRIMARY KEY(child, pos));
CREATE INDEX edges_parent ON edges(parent);
CREATE TABLE results(
    genome_id TEXT NOT NULL, task TEXT NOT NULL, split TEXT NOT NULL, lm_key TEXT NOT NULL, score REAL NOT NULL,
    ci_low REAL, ci_high REAL, n INTEGER NOT NULL, dollars REAL NOT NULL, tokens INTEGER NOT NULL,
    llm_calls INTEGER NOT NULL, latency_s REAL NOT NULL, failures TEXT NOT NULL, extra TEXT NOT NULL,
    evaluated_at TEXT NOT NULL, cache_hits INTEGER NOT NULL, example_scores TEXT NOT NULL,
    example_dollars TEXT NOT NULL, PRIMARY KEY(genome_id, task, split, lm_key));
CREATE INDEX results_task ON results(task, split, score DESC);
CREATE TABLE events(
    seq INTEGER PRIMARY KEY, at TEXT NOT NULL, kind TEXT NOT NULL, genome_id TEXT NOT NULL,
    summary TEXT NOT NULL, commit_sha TEXT NOT NULL);
"""
# Index columns of the candidates table in CandidateRecord field order (minus parents and results).
CANDIDATE_COLUMNS = ("id", "name", "kind", "strategy", "operator", "rationale", "generation", "run", "created_at",
                      "tags", "status", "commit_sha")
CANDIDATE_FIELDS = ("genome_id", "name", "kind", "strategy", "operator", "rationale", "generation", "run",
                     "created_at", "tags", "status", "commit")
RESULT_COLUMNS = ("task", "split", "lm_key", "score", "ci_low", "ci_high", "n", "dollars", "tokens", "llm_calls",
                   "latency_s", "failures", "extra", "evaluated_at", "cache_hits", "example_scores", "example_dollars")
RESULT_JSON_COLUMNS = ("failures", "extra", "example_scores", "example_dollars")


SCORE_ORDER = "b.score IS NULL, b.score DESC, b.dollars ASC, b.tokens_each ASC, c.seq ASC"
"""Best first: highest best score, then cheapest (in dollars, then in tokens per example: on a free local model
every system costs $0), then oldest (``archive list``'s order and the ``best`` alias's)."""
BEST_RESULT = "SELECT genome_id, MAX(score) AS score, dollars, tokens * 1.0 / MAX(n, 1) AS tokens_each FROM results"
"""Each candidate's best result (SQLite takes the bare columns from the row holding MAX(score)); GROUP BY to add."""


class ArchiveIndex:
    """The index of one archive: built from ``store``, written under ``lock`` (shared with the archive's writes)."""

    def __init__(self, path: Path, store: GitStore, lock: WriteLock) -> None:
        self.path = path
        self.store = store
        self.lock = lock
        self._db: sqlite3.Connection | None = None
        self._ino: int | None = None

    def close(self) -> None:
        if self._db is not None:
            self._db.close()
            self._db = None

    def connect(self) -> None:
        if self._db is not None:
            self._db.close()
            self._db = None
        db = sqlite3.connect(self.path, timeout=60, isolation_level=None, check_same_thread=False)
        db.row_factory = sqlite3.Row
        # The index is a cache of git: durability across power loss is not needed (a torn index is detected
        # and rebuilt), while the rollback journal still makes every transaction atomic against a kill.
        db.execute("PRAGMA synchronous=OFF")
        self._db = db
        self._ino = os.stat(self.path).st_ino

    def state(self) -> str:
        """``ok``, ``missing``, ``corrupt`` or ``stale`` (built from another main commit than the current one)."""
        try:
            ino = os.stat(self.path).st_ino
        except FileNotFoundError:
            return "missing"
        try:
            if self._db is None or ino != self._ino:
                self.connect()
            assert self._db is not None
            meta = {row[0]: row[1] for row in self._db.execute("SELECT key, value FROM meta")}
        except sqlite3.DatabaseError as exc:
            if _is_busy(exc):
                raise ArchiveError(f"{self.path}: index busy for over a minute; retry") from None
            return "corrupt"
        if meta.get("schema") != str(INDEX_SCHEMA):
            return "corrupt"
        return "ok" if meta.get("head") == self.store.read_ref(MAIN_REF) else "stale"

    def open(self, check_integrity: bool = False) -> None:
        with self.lock.mutex:
            state = self.state()
            if state == "ok" and check_integrity:
                try:
                    assert self._db is not None
                    if self._db.execute("PRAGMA quick_check").fetchone()[0] != "ok":
                        state = "corrupt"
                except sqlite3.DatabaseError as exc:
                    if _is_busy(exc):
                        raise ArchiveError(f"{self.path}: index busy for over a minute; retry") from None
                    state = "corrupt"
            if state != "ok":
                self.rebuild(force=state == "corrupt")

    def fresh(self) -> sqlite3.Connection:
        self.open()
        assert self._db is not None
        return self._db

    def query(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """Run a read against a fresh index; a corrupt index found mid-query is rebuilt and the read retried."""
        with self.lock.mutex:
            try:
                return fn(self.fresh())
            except sqlite3.DatabaseError as exc:
                if _is_busy(exc):
                    raise ArchiveError(f"{self.path}: index busy for over a minute; retry") from None
                self.rebuild(force=True)
                return fn(self.fresh())

    def rebuild(self, force: bool = False) -> None:
        with self.lock.hold():
            state = self.state()
            if not force and state == "ok":
                return  # another process rebuilt it while we waited for the lock
            self.store.sweep()  # a stale index usually means a killed writer: tidy up after it first
            head = self.store.main()
            if state == "stale" and not force and self.catch_up(head):
                return
            journal, _ = self.store.read_journal(head)
            first_commit: dict[str, str] = {}
            tips: dict[str, str] = {}
            for kind, gid, event, _, _ in journal:
                if kind == "add":
                    first_commit.setdefault(gid, event)
                tips[gid] = event
            tmp = self.path.with_name(f"{INDEX_FILE}.tmp-{os.getpid()}")
            tmp.unlink(missing_ok=True)
            db = sqlite3.connect(tmp, isolation_level=None)
            try:
                db.execute("PRAGMA synchronous=OFF")
                db.execute("PRAGMA journal_mode=OFF")  # a temp file nobody else sees yet
                db.executescript(SCHEMA)
                db.execute("BEGIN")
                names: dict[str, str] = {}
                statuses: dict[str, str] = {}
                for gid, commit in first_commit.items():
                    record = self.store.read_candidate(gid, tips[gid])
                    names[gid] = record.name
                    statuses[gid] = record.status
                    self.add_candidate(db, record, commit, tips[gid])
                    for result in record.results:
                        self.add_result(db, gid, result)
                db.executemany(
                    "INSERT INTO events(at, kind, genome_id, summary, commit_sha) VALUES (?, ?, ?, ?, ?)",
                    [(_iso(when), kind, gid, subject, event) for kind, gid, event, when, subject in journal
                     if gid in names],
                )
                db.executemany("INSERT INTO meta(key, value) VALUES (?, ?)",
                               [("schema", str(INDEX_SCHEMA)), ("head", head), ("format", str(FORMAT_VERSION))])
                db.execute("COMMIT")
            finally:
                db.close()
            if self._db is not None:
                self._db.close()
                self._db = None
            # A hot journal of the old index must not be rolled back into the new file.
            Path(str(self.path) + "-journal").unlink(missing_ok=True)
            os.replace(tmp, self.path)
            self.connect()
            self.store.repair_refs(tips, statuses)

    def catch_up(self, head: str) -> bool:
        """Apply only the journal entries the index misses (the usual case after a killed writer: a few events,
        not the whole history). False if the index's commit is not on main's first-parent chain."""
        assert self._db is not None
        db = self._db
        row = db.execute("SELECT value FROM meta WHERE key = 'head'").fetchone()
        if row is None or not HEX.match(row[0]):
            return False
        try:
            entries, base = self.store.read_journal(f"{row[0]}..{head}")
        except git.GitCommandError:
            return False  # the index names a commit this repository does not have
        if base != row[0]:
            return False
        tips: dict[str, str] = {}
        statuses: dict[str, str] = {}
        try:
            db.execute("BEGIN IMMEDIATE")
            for kind, gid, event, when, subject in entries:
                record = self.store.read_candidate(gid, event)
                known = db.execute("SELECT 1 FROM candidates WHERE id = ?", (gid,)).fetchone() is not None
                if known == (kind == "add"):
                    raise ArchiveError(f"journal entry {event[:12]} does not fit the index")
                if kind == "add":
                    self.add_candidate(db, record, event, event)
                else:
                    db.execute("UPDATE candidates SET status = ?, tags = ?, tip_sha = ? WHERE id = ?",
                               (record.status, json.dumps(record.tags), event, gid))
                db.execute("DELETE FROM results WHERE genome_id = ?", (gid,))
                for result in record.results:
                    self.add_result(db, gid, result)
                db.execute("INSERT INTO events(at, kind, genome_id, summary, commit_sha) VALUES (?, ?, ?, ?, ?)",
                           (_iso(when), kind, gid, subject, event))
                tips[gid], statuses[gid] = event, record.status
            db.execute("UPDATE meta SET value = ? WHERE key = 'head'", (head,))
            db.execute("COMMIT")
        except (ArchiveError, sqlite3.DatabaseError):
            with contextlib.suppress(sqlite3.DatabaseError):
                db.execute("ROLLBACK")
            return False
        self.store.repair_refs(tips, statuses)
        return True

    @staticmethod
    def add_candidate(db: sqlite3.Connection, record: CandidateRecord, commit: str, tip: str) -> None:
        db.execute(
            "INSERT INTO candidates(id, name, kind, strategy, operator, rationale, generation, run, created_at, "
            "tags, status, commit_sha, tip_sha) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (record.genome_id, record.name, record.kind, record.strategy, record.operator, record.rationale,
             record.generation, record.run, record.created_at, json.dumps(record.tags), record.status, commit, tip),
        )
        db.executemany("INSERT INTO edges(child, parent, pos) VALUES (?, ?, ?)",
                       [(record.genome_id, p, i) for i, p in enumerate(record.parents)])

    @staticmethod
    def add_result(db: sqlite3.Connection, gid: str, r: ResultRecord) -> None:
        db.execute(
            f"INSERT OR REPLACE INTO results(genome_id, {', '.join(RESULT_COLUMNS)}) "
            f"VALUES ({', '.join('?' * (len(RESULT_COLUMNS) + 1))})",
            (gid, r.task, r.split, r.lm_key, r.score, r.ci_low, r.ci_high, r.n, r.dollars, r.tokens, r.llm_calls,
             r.latency_s, json.dumps(r.failures, sort_keys=True), json.dumps(r.extra, sort_keys=True),
             r.evaluated_at, r.cache_hits, json.dumps(r.example_scores, sort_keys=True),
             json.dumps(r.example_dollars, sort_keys=True)),
        )

    @staticmethod
    def move_tip(db: sqlite3.Connection, gid: str, tip: str, *, status: str | None = None) -> None:
        """A new commit ``tip`` on candidate ``gid`` (a result, or a new ``status``)."""
        if status is None:
            db.execute("UPDATE candidates SET tip_sha = ? WHERE id = ?", (tip, gid))
        else:
            db.execute("UPDATE candidates SET status = ?, tip_sha = ? WHERE id = ?", (status, tip, gid))

    def count(self) -> int:
        """Candidates in the index."""
        return int(self.query(lambda db: db.execute("SELECT COUNT(*) FROM candidates").fetchone()[0]))

    def commit(self, db: sqlite3.Connection, journal: str, event: tuple[int, str, str, str, str],
               writes: Callable[[sqlite3.Connection], None]) -> None:
        """Apply one event to the index in a single transaction; if that fails, git is still the truth."""
        when, kind, gid, summary, commit = event
        try:
            db.execute("BEGIN IMMEDIATE")
            try:
                writes(db)
                db.execute("INSERT INTO events(at, kind, genome_id, summary, commit_sha) VALUES (?, ?, ?, ?, ?)",
                           (_iso(when), kind, gid, summary, commit))
                db.execute("UPDATE meta SET value = ? WHERE key = 'head'", (journal,))
                db.execute("COMMIT")
            except BaseException:
                db.execute("ROLLBACK")
                raise
        except sqlite3.DatabaseError:
            self.rebuild(force=True)  # the write is in git already; the rebuilt index will contain it

    # ---------------------------------------------------------------- reading records

    @staticmethod
    def load(db: sqlite3.Connection, ids: Sequence[str]) -> list[CandidateRecord]:
        """Records for ``ids`` (same order; unknown ids skipped), results and parents included."""
        unique = list(dict.fromkeys(ids))
        if not unique:
            return []
        # One query per table with the ids as a JSON array (no variable limit, no chunking); plain tuples and
        # trusted constructors, because lineage and list may load thousands of records at once.
        cur = db.cursor()
        cur.row_factory = None
        # Few ids: index lookups. Many (a seed's descendants, a full list): one scan filtered in Python is faster.
        if len(unique) < 1000:
            where, params = " WHERE {} IN (SELECT value FROM json_each(?))", (json.dumps(unique),)
        else:
            where, params = "", ()
        keep = set(unique)
        rows = {r[0]: r for r in cur.execute(
            f"SELECT {', '.join(CANDIDATE_COLUMNS)} FROM candidates" + where.format("id"), params) if r[0] in keep}
        parents: dict[str, list[str]] = {}
        for child, parent in cur.execute("SELECT child, parent FROM edges" + where.format("child")
                                         + " ORDER BY child, pos", params):
            if child in keep:
                parents.setdefault(child, []).append(parent)
        results: dict[str, list[ResultRecord]] = {}
        for r in cur.execute(f"SELECT genome_id, {', '.join(RESULT_COLUMNS)} FROM results"
                             + where.format("genome_id") + " ORDER BY genome_id, task, split, lm_key", params):
            if r[0] in keep:
                results.setdefault(r[0], []).append(result_from_values(r[1:]))
        out: list[CandidateRecord] = []
        for gid in unique:
            row = rows.get(gid)
            if row is None:
                continue
            record = object.__new__(CandidateRecord)  # the index only ever holds validated records
            record.__dict__.update(zip(CANDIDATE_FIELDS, row, strict=True))
            record.tags = _json(record.tags)  # type: ignore[arg-type]
            record.parents = parents.get(gid, [])
            record.results = results.get(gid, [])
            out.append(record)
        return out

    @staticmethod
    def resolve(db: sqlite3.Connection, id_or_prefix: str) -> str:
        """The full genome id of an id, a unique prefix of one, or an alias (:data:`ALIASES`)."""
        if is_alias(str(id_or_prefix)):
            return _alias(db, str(id_or_prefix).strip().lower())
        text = normalised(id_or_prefix)
        # 'g' sorts after every hex digit, so [text, text + 'g') is exactly the ids starting with text.
        rows = db.execute("SELECT id FROM candidates WHERE id >= ? AND id < ? LIMIT 2", (text, text + "g")).fetchall()
        if len(rows) == 1:
            return str(rows[0][0])
        count = db.execute("SELECT COUNT(*) FROM candidates WHERE id >= ? AND id < ?", (text, text + "g")).fetchone()
        raise unresolved(text, count[0])

    def row(self, db: sqlite3.Connection, gid: str) -> sqlite3.Row:
        row = db.execute("SELECT * FROM candidates WHERE id = ?", (gid,)).fetchone()
        if row is None:
            raise unknown_candidate(gid)
        return row


    def ranked(self, task: str | None, split: str | None, strategy: str | None, kind: str | None,
                run: str | None, include_pruned: bool, sort: str, limit: int | None
                ) -> list[tuple[str, float | None, float | None]]:
        rwhere, rparams = [], []
        if task is not None:
            rwhere.append("task = ?")
            rparams.append(task)
        if split is not None:
            rwhere.append("split = ?")
            rparams.append(split)
        cwhere: list[str] = []
        cparams: list[Any] = []
        for column, value in (("strategy", strategy), ("kind", kind), ("run", run)):
            if value is not None:
                cwhere.append(f"c.{column} = ?")
                cparams.append(value)
        if not include_pruned:
            cwhere.append("c.status != 'pruned'")
        order = {
            "score": SCORE_ORDER,
            "cost": "b.dollars IS NULL, b.dollars ASC, b.tokens_each ASC, b.score DESC, c.seq ASC",
            "generation": "c.generation DESC, c.seq DESC",
            "created": "c.seq DESC",
        }[sort]
        # Each candidate's best result, computed once as a grouped sub-query and joined, never re-evaluated per
        # candidate row (that was O(N^2)).
        best = (BEST_RESULT + (" WHERE " + " AND ".join(rwhere) if rwhere else "") + " GROUP BY genome_id")
        where = " WHERE " + " AND ".join(cwhere) if cwhere else ""
        if task is not None or split is not None:
            sql = f"SELECT c.id, b.score, b.dollars FROM ({best}) b JOIN candidates c ON c.id = b.genome_id{where}"
        elif sort in ("generation", "created"):
            sql = f"SELECT c.id, NULL, NULL FROM candidates c{where}"
        else:
            sql = f"SELECT c.id, b.score, b.dollars FROM candidates c LEFT JOIN ({best}) b ON b.genome_id = c.id{where}"
        sql += f" ORDER BY {order} LIMIT ?"
        params = [*rparams, *cparams, -1 if limit is None else max(0, int(limit))]
        return self.query(lambda db: [(r[0], r[1], r[2]) for r in db.execute(sql, params)])


    # ---------------------------------------------------------------- lineage, events, counts

    @staticmethod
    def known(db: sqlite3.Connection, gid: str) -> bool:
        return db.execute("SELECT 1 FROM candidates WHERE id = ?", (gid,)).fetchone() is not None

    @staticmethod
    def relatives(db: sqlite3.Connection, gid: str, upward: bool, depth: int | None) -> list[str]:
        """Ids of ``gid``'s ancestors (``upward``) or descendants, all or up to ``depth`` generations away."""
        near, far = ("child", "parent") if upward else ("parent", "child")
        if depth is None:
            sql = (f"WITH RECURSIVE walk(id) AS (SELECT {far} FROM edges WHERE {near} = ? UNION "
                   f"SELECT e.{far} FROM edges e JOIN walk ON e.{near} = walk.id) SELECT id FROM walk")
            params: list[Any] = [gid]
        else:
            sql = (f"WITH RECURSIVE walk(id, d) AS (SELECT {far}, 1 FROM edges WHERE {near} = ? UNION "
                   f"SELECT e.{far}, walk.d + 1 FROM edges e JOIN walk ON e.{near} = walk.id "
                   "WHERE walk.d < ?) SELECT DISTINCT id FROM walk")
            params = [gid, depth]
        return [r[0] for r in db.execute(sql, params) if r[0] != gid]

    @staticmethod
    def events(db: sqlite3.Connection, limit: int | None) -> list[tuple[str, str, str, str, str, str]]:
        """The newest ``limit`` events (all if None): (at, kind, genome id, name, summary, commit)."""
        rows = db.execute(
            "SELECT e.at, e.kind, e.genome_id, c.name, e.summary, e.commit_sha FROM events e "
            "LEFT JOIN candidates c ON c.id = e.genome_id ORDER BY e.seq DESC LIMIT ?",
            (-1 if limit is None else max(0, int(limit)),),
        )
        return [(r[0], r[1], r[2], r[3] or "", r[4], r[5]) for r in rows]

    def stats(self, db: sqlite3.Connection) -> dict[str, int]:
        """Counts of candidates, results and events, and the index size in bytes."""
        return {
            "candidates": db.execute("SELECT COUNT(*) FROM candidates").fetchone()[0],
            "results": db.execute("SELECT COUNT(*) FROM results").fetchone()[0],
            "events": db.execute("SELECT COUNT(*) FROM events").fetchone()[0],
            "index_bytes": self.path.stat().st_size,
        }

    @staticmethod
    def result(db: sqlite3.Connection, gid: str, task: str, split: str, lm_key: str) -> ResultRecord | None:
        row = db.execute("SELECT * FROM results WHERE genome_id = ? AND task = ? AND split = ? AND lm_key = ?",
                         (gid, task, split, lm_key)).fetchone()
        return result_from_row(row) if row is not None else None

def _json(text: str) -> Any:
    # Most tags/failures/extra are empty; skipping the decoder for them matters when loading thousands.
    if text == "[]":
        return []
    if text == "{}":
        return {}
    return json.loads(text)


def result_from_values(values: Sequence[Any]) -> ResultRecord:
    """A ResultRecord from index columns (in RESULT_COLUMNS order), without re-validating trusted data."""
    record = object.__new__(ResultRecord)
    record.__dict__.update(zip(RESULT_COLUMNS, values, strict=True))
    for name in RESULT_JSON_COLUMNS:
        setattr(record, name, _json(getattr(record, name)))
    return record


def result_from_row(row: sqlite3.Row) -> ResultRecord:
    return result_from_values([row[c] for c in RESULT_COLUMNS])


def _iso(when: int) -> str:
    return datetime.fromtimestamp(when, UTC).isoformat()


def _is_busy(exc: sqlite3.Error) -> bool:
    text = str(exc).lower()
    return "locked" in text or "busy" in text


ALIASES = {
    "best": "the best candidate: the first row of `masforge archive list` (best score, pruned ones left out)",
    "best-new": "the best candidate that is not a seed (the best system a search made)",
    "seed:<name>": "the seed of that name, as `masforge archive list` shows it (e.g. seed:io)",
}
"""Names accepted wherever a candidate id is, and what each stands for."""


def is_alias(text: str) -> bool:
    """Whether ``text`` is one of :data:`ALIASES` rather than a genome id."""
    text = text.strip().lower()
    return text in ("best", "best-new") or text.startswith("seed:")


def _alias(db: sqlite3.Connection, alias: str) -> str:
    """The genome id an alias names (ArchiveError when the archive holds no such candidate)."""
    if alias.startswith("seed:"):
        name = alias.split(":", 1)[1].strip()
        # a seed's genome name, or its file's name where they differ only by - and _ (self_consistency)
        row = db.execute("SELECT id FROM candidates WHERE operator = 'seed' AND (lower(name) = ? OR "
                         "replace(lower(name), '-', '_') = ?) ORDER BY seq LIMIT 1", (name, name)).fetchone()
        if row is None:
            seeds = [r[0] for r in db.execute("SELECT DISTINCT name FROM candidates WHERE operator = 'seed' "
                                              "ORDER BY name")]
            raise ArchiveError(f"no seed named '{name}' in this archive; its seeds: {', '.join(seeds) or 'none'}")
        return str(row[0])
    new_only = " AND c.operator != 'seed'" if alias == "best-new" else ""
    row = db.execute(f"SELECT c.id FROM candidates c LEFT JOIN ({BEST_RESULT} GROUP BY genome_id) b ON b.genome_id = "
                     f"c.id WHERE c.status != 'pruned'{new_only} ORDER BY {SCORE_ORDER} LIMIT 1").fetchone()
    if row is None:
        raise ArchiveError(f"'{alias}': the archive holds no {'new ' if new_only else ''}candidate yet "
                           "(see `masforge archive list`)")
    return str(row[0])
