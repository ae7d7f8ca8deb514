"""The candidate archive: every evaluated genome, its lineage and its results, kept forever in git.

Layout of an archive folder (a normal, non-bare git repository)::

    .masforge-archive          marker (format version), tracked
    .gitignore, README.md      tracked; the tree of every ``main`` commit is just these three files
    .masforge-index.sqlite     query index, git-ignored, rebuildable from git at any time
    .masforge-lock             flock target that serialises writers (also across processes)

Git history has two kinds of commits:

* **Candidate commits** hold ``candidates/<id>/genome.yaml`` (``genome.py`` for code genomes),
  ``candidates/<id>/meta.json`` and ``candidates/<id>/results/*.json``. The commit adding a genome has the
  commits that added its parents as git parents: a seed is a root commit, a mutation has one parent, a
  crossover is a merge. Results and status changes are further commits on the same candidate;
  ``refs/candidates/<id>`` points at the candidate's newest commit, so ``git log refs/candidates/<id>`` is its
  history and ``git log --graph --oneline --glob='refs/candidates/*'`` is the phylogeny.
* **Journal commits** on ``main``: one per event (add, result, promote, prune), a merge of the previous journal
  commit and the event's candidate commit. ``main`` therefore reaches every candidate (``git clone`` copies
  the whole archive), ``git log --first-parent main`` is the event log, and its tip identifies the exact state
  the SQLite index was built from.

Creation is atomic (:mod:`masforge.archive.creation`): the folder is built beside its destination and renamed into
place with the marker already inside, so a kill during creation leaves no archive or a whole one. Writes happen
under an exclusive ``flock``; objects are written first, refs after (candidate ref, tags,
``main`` last), and the index last of all. A kill at any moment leaves at worst unreachable objects and an
index whose recorded ``main`` sha is behind: the next access replays the missing journal entries (a missing,
corrupt or otherwise inconsistent index is rebuilt from git in full). Loose objects are packed every few
thousand, under the same lock.

Queries (``get``, ``list``, ``best``, ``front``, ``lineage``, ``log``, ``get_result``) read only the index.

Nothing secret is stored: results and rationales are redacted (:mod:`masforge.redact`) before they become git
objects or index rows, commit messages are redacted once more when written, and a genome that holds a key is
refused (redacting it would change the system and its id).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import math
import os
import re
import sqlite3
import subprocess
import threading
import time
import uuid
import zlib
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, NamedTuple, TypeVar

import git

from masforge.archive.claims import Claim, ClaimBook, StopFn, WaitFn
from masforge.archive.creation import create_atomically, half_made
from masforge.archive.pareto import pareto_front
from masforge.archive.records import STATUSES, CandidateRecord, ResultRecord
from masforge.errors import ArchiveError, MasforgeError
from masforge.genome.diff import diff_genomes, format_diff
from masforge.genome.io import dump_genome, parse_genome_text
from masforge.genome.schema import Genome
from masforge.genome.validate import name_problem
from masforge.redact import contains_secret, redact, redact_data
from masforge.text import shorten

T = TypeVar("T")

FORMAT_VERSION = 1
INDEX_SCHEMA = 2
"""2: results keep cache hits and per-example scores and dollars (paired comparisons, races)."""
MARKER = ".masforge-archive"
INDEX_FILE = ".masforge-index.sqlite"
LOCK_FILE = ".masforge-lock"
MAIN_REF = "refs/heads/main"
CANDIDATE_REFS = "refs/candidates/"
SORTS = ("score", "cost", "generation", "created")
EVENT_KINDS = ("add", "result", "promote", "prune")
SUBJECT_MAX = 72
MAINTAIN_EVERY = 500  # writes (of this process) between checks whether loose objects need packing
PACK_LOOSE_AT = 5000  # loose objects that trigger packing them (git's own gc.auto is 6700)
MAX_PACKS = 40  # more packs than this are consolidated into one

_MARKER_TEXT = json.dumps({"format": FORMAT_VERSION, "tool": "masforge"}) + "\n"
_GITIGNORE_TEXT = f"# local, rebuildable state of the masforge archive\n{INDEX_FILE}*\n{LOCK_FILE}\n"
_README_TEXT = """# masforge archive

Every candidate masforge evaluated, with its lineage and results. Browse with `masforge archive --help`, or
with git:

    git log --first-parent --oneline main               # events, newest first
    git log --graph --oneline --glob='refs/candidates/*' # the phylogeny
    git show refs/candidates/<genome id>                # one candidate's newest state

Candidate files live in the candidate commits, not in this tree: `candidates/<id>/genome.yaml` (or
`genome.py`), `candidates/<id>/meta.json` and `candidates/<id>/results/*.json`.
"""
_IDENTITY = "masforge <masforge@localhost>"
_TRAILER = re.compile(r"^Masforge-(Event|Genome): (\S+)\s*$", re.MULTILINE)
_HEX = re.compile(r"^[0-9a-f]{1,64}$")
_TREE_MODE = "40000"
_BLOB_MODE = "100644"

_SCHEMA = """
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
_CANDIDATE_COLUMNS = ("id", "name", "kind", "strategy", "operator", "rationale", "generation", "run", "created_at",
                      "tags", "status", "commit_sha")
_CANDIDATE_FIELDS = ("genome_id", "name", "kind", "strategy", "operator", "rationale", "generation", "run",
                     "created_at", "tags", "status", "commit")
_RESULT_COLUMNS = ("task", "split", "lm_key", "score", "ci_low", "ci_high", "n", "dollars", "tokens", "llm_calls",
                   "latency_s", "failures", "extra", "evaluated_at", "cache_hits", "example_scores", "example_dollars")
_RESULT_JSON_COLUMNS = ("failures", "extra", "example_scores", "example_dollars")


# --------------------------------------------------------------------------------------------------
# public value types


@dataclass(frozen=True)
class ArchiveEvent:
    """One entry of the archive's event log (a journal commit on ``main``)."""

    at: str
    kind: str
    genome_id: str
    name: str
    summary: str
    commit: str

    @property
    def short_id(self) -> str:
        """First 12 hex digits of the genome id."""
        return self.genome_id[:12]


@dataclass
class LineageNode:
    """A node of a lineage tree for display; ``repeated`` marks a node already expanded elsewhere (DAG)."""

    record: CandidateRecord
    children: list[LineageNode] = field(default_factory=list)
    repeated: bool = False


class Lineage(NamedTuple):
    """Ancestors and descendants of a candidate (oldest generation first), unpackable as a pair."""

    ancestors: list[CandidateRecord]
    descendants: list[CandidateRecord]

    def ancestor_tree(self, focus: CandidateRecord) -> LineageNode:
        """Tree rooted at ``focus`` whose children are parents (crossovers branch)."""
        known = {r.genome_id: r for r in self.ancestors}
        return _build_tree(focus, lambda rec: [known[p] for p in rec.parents if p in known])

    def descendant_tree(self, focus: CandidateRecord) -> LineageNode:
        """Tree rooted at ``focus`` whose children are the candidates bred from it."""
        children: dict[str, list[CandidateRecord]] = {}
        for rec in self.descendants:
            for p in dict.fromkeys(rec.parents):
                children.setdefault(p, []).append(rec)
        return _build_tree(focus, lambda rec: children.get(rec.genome_id, []))


def _build_tree(focus: CandidateRecord, next_of: Callable[[CandidateRecord], list[CandidateRecord]]) -> LineageNode:
    # Lineage is a DAG (crossovers share ancestors): expand each node only at its first place in display
    # (pre-order) and mark later places as repeated, so the tree stays linear in size. Iterative, because
    # long runs have lineages deeper than Python's recursion limit.
    root = LineageNode(focus)
    seen: set[str] = set()
    stack = [root]
    while stack:
        node = stack.pop()
        if node.record.genome_id in seen:
            node.repeated = True
            continue
        seen.add(node.record.genome_id)
        node.children = [LineageNode(rec) for rec in next_of(node.record)]
        stack.extend(reversed(node.children))
    return root


# --------------------------------------------------------------------------------------------------
# small helpers


def _iso(when: int) -> str:
    return datetime.fromtimestamp(when, UTC).isoformat()


def _safe_name(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "-", text).strip("-.")[:48] or "_"


def result_filename(result: ResultRecord) -> str:
    """``<task>__<split>__<hash>.json``; the hash covers task, split and lm_key, so sanitised names never clash."""
    digest = hashlib.sha256("\0".join(result.key).encode("utf-8")).hexdigest()[:12]
    return f"{_safe_name(result.task)}__{_safe_name(result.split)}__{digest}.json"


def _tree_bytes(entries: dict[str, tuple[str, str]]) -> bytes:
    # git orders tree entries by name, comparing sub-trees as if their name ended in "/".
    def order(item: tuple[str, tuple[str, str]]) -> bytes:
        name, (mode, _) = item
        return name.encode("utf-8") + (b"/" if mode == _TREE_MODE else b"")

    return b"".join(
        f"{mode} {name}".encode() + b"\0" + bytes.fromhex(sha)
        for name, (mode, sha) in sorted(entries.items(), key=order)
    )


def _parse_tree(data: bytes) -> dict[str, tuple[str, str]]:
    entries: dict[str, tuple[str, str]] = {}
    pos = 0
    while pos < len(data):
        space = data.index(b" ", pos)
        nul = data.index(b"\0", space)
        entries[data[space + 1 : nul].decode("utf-8")] = (data[pos:space].decode(), data[nul + 1 : nul + 21].hex())
        pos = nul + 21
    return entries


def _trailers(message: str) -> dict[str, str]:
    return {m.group(1).lower(): m.group(2) for m in _TRAILER.finditer(message)}


def _is_busy(exc: sqlite3.Error) -> bool:
    text = str(exc).lower()
    return "locked" in text or "busy" in text


@contextlib.contextmanager
def _flock(path: Path) -> Iterator[None]:
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing the descriptor releases the lock, also when the process dies


def _atomic_write(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


# --------------------------------------------------------------------------------------------------
# the archive


class Archive:
    """A git-versioned store of candidates with an SQLite index; open with :meth:`Archive.open`."""

    def __init__(self, path: Path, repo: git.Repo) -> None:
        self.path = path
        self._repo = repo
        self._git_dir = Path(repo.git_dir)
        self._objects = self._git_dir / "objects"
        self._genome_cache: dict[str, Genome] = {}  # recent genomes: parents of the next children
        self._objcache: dict[str, bytes] = {}  # recent trees and commits (insertion-ordered, bounded)
        self._index_path = path / INDEX_FILE
        self._lock_path = path / LOCK_FILE
        self._mutex = threading.RLock()  # one archive object may be shared by evaluation threads
        self._lock_depth = 0
        self._db: sqlite3.Connection | None = None
        self._db_ino: int | None = None
        self._writes = 0
        self._packed_refs: dict[str, str] = {}
        self._packed_signature: tuple[int, int, int] | None = None
        self._claims = ClaimBook(self._git_dir / "masforge-claims")  # inside .git: never tracked

    # ---------------------------------------------------------------- opening

    @classmethod
    def open(cls, path: str | os.PathLike[str], create: bool = False) -> Archive:
        """Open the archive at ``path``; ``create=True`` initialises it first if it is absent (atomically: a kill
        during creation leaves no archive or a whole one, and a half-made one is rebuilt)."""
        p = Path(path).expanduser()
        if p.exists() and not p.is_dir():
            raise ArchiveError(f"{p}: is a file, not a masforge archive folder; give the archive's folder")
        if not (p / MARKER).is_file():
            if not create:
                if half_made(p, MARKER) is not None:
                    raise ArchiveError(f"{p}: the archive's creation was interrupted before it held anything; "
                                       "rerun or resume the search (or Archive.open(path, create=True)) to finish it")
                raise ArchiveError(
                    f"{p}: not a masforge archive (no {MARKER} marker); "
                    "create one with Archive.open(path, create=True)"
                )
            create_atomically(p, cls._build, MARKER)
        try:
            fmt = int(json.loads((p / MARKER).read_text(encoding="utf-8"))["format"])
        except (ValueError, KeyError, TypeError, OSError):
            raise ArchiveError(
                f"{p / MARKER}: unreadable archive marker; restore it with `git checkout main -- {MARKER}`"
            ) from None
        if fmt > FORMAT_VERSION:
            raise ArchiveError(f"{p}: archive format {fmt} is newer than this masforge supports ({FORMAT_VERSION}); "
                               "upgrade masforge")
        try:
            repo = git.Repo(p)
        except (git.InvalidGitRepositoryError, git.NoSuchPathError):
            raise ArchiveError(f"{p}: the archive's git repository is missing or broken (no usable .git)") from None
        archive = cls(p, repo)
        archive._open_index(check_integrity=True)
        return archive

    @classmethod
    def _build(cls, p: Path) -> None:
        """Initialise a complete archive in the empty private folder ``p`` (see archive.creation)."""
        repo = git.Repo.init(p, initial_branch="main")
        try:
            archive = cls(p, repo)
            (archive._git_dir / "masforge").write_text("archive\n", encoding="utf-8")  # ours, even before the marker
            tree = archive._write_tree({
                MARKER: (_BLOB_MODE, archive._store("blob", _MARKER_TEXT.encode())),
                ".gitignore": (_BLOB_MODE, archive._store("blob", _GITIGNORE_TEXT.encode())),
                "README.md": (_BLOB_MODE, archive._store("blob", _README_TEXT.encode())),
            })
            init = archive._write_commit(tree, [], f"init masforge archive (format {FORMAT_VERSION})\n",
                                         int(time.time()))
            archive._write_ref(MAIN_REF, init)
            _atomic_write(p / ".gitignore", _GITIGNORE_TEXT)
            _atomic_write(p / "README.md", _README_TEXT)
            repo.git.read_tree("HEAD")  # git's own index matches the (constant) main tree: `git status` is clean
            _atomic_write(p / MARKER, _MARKER_TEXT)
        finally:
            repo.close()

    def close(self) -> None:
        """Release the SQLite connection and git's helper processes."""
        with self._mutex:
            if self._db is not None:
                self._db.close()
                self._db = None
            self._repo.close()

    def __enter__(self) -> Archive:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Archive({str(self.path)!r})"

    # ---------------------------------------------------------------- git plumbing

    def _store(self, kind: str, data: bytes) -> str:
        if kind == "commit":
            # Last line of defence for messages (the records and genomes are made secret-free before this).
            text = data.decode("utf-8", "surrogateescape")
            clean = redact(text)
            if clean != text:
                data = clean.encode("utf-8", "surrogateescape")
        sha = hashlib.sha1(f"{kind} {len(data)}\0".encode() + data).hexdigest()
        if kind != "blob":
            self._remember_object(sha, data)
        target = self._objects / sha[:2] / sha[2:]
        if not target.exists():
            # A loose object written in Python (a `git hash-object` process per object would cost more than the
            # whole write): temp file in objects/ (which `git fsck` ignores), then an atomic rename, so a reader
            # or a kill never leaves half an object under its real name.
            target.parent.mkdir(exist_ok=True)
            tmp = self._objects / f"tmp_obj_masforge_{uuid.uuid4().hex}"
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o444)
            with os.fdopen(fd, "wb") as fh:
                fh.write(zlib.compress(f"{kind} {len(data)}\0".encode() + data, 1))
            os.replace(tmp, target)
        return sha

    def _remember_object(self, key: str, data: bytes) -> None:
        # Keys are object shas or "<commit>:<path>": both name immutable content, so the cache is never stale.
        # It saves the `git cat-file` round trips of add_result right after add and of every journal write.
        self._objcache.pop(key, None)
        self._objcache[key] = data
        while len(self._objcache) > 4096:
            del self._objcache[next(iter(self._objcache))]

    def _write_tree(self, entries: dict[str, tuple[str, str]]) -> str:
        return self._store("tree", _tree_bytes(entries))

    def _write_commit(self, tree: str, parents: Sequence[str], message: str, when: int) -> str:
        lines = [f"tree {tree}", *(f"parent {p}" for p in parents),
                 f"author {_IDENTITY} {when} +0000", f"committer {_IDENTITY} {when} +0000", "",
                 message.rstrip("\n") + "\n"]
        return self._store("commit", "\n".join(lines).encode("utf-8"))

    def _cat(self, rev: str, cache: bool = True) -> bytes:
        if rev in self._objcache:
            return self._objcache[rev]
        try:
            data = self._repo.git.get_object_data(rev)[3]
        except ValueError:
            raise ArchiveError(f"{self.path}: git object {rev} is missing (archive damaged; run `git fsck`)") from None
        if cache:
            self._remember_object(rev, data)
        return data

    def _read_ref(self, name: str) -> str | None:
        try:
            text = (self._git_dir / name).read_text(encoding="ascii").strip()
        except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
            text = ""
        if text:
            return text
        # After `git gc` / `git pack-refs` refs live in packed-refs (10,000+ lines here): parse it once per change.
        packed = self._git_dir / "packed-refs"
        try:
            st = packed.stat()
        except FileNotFoundError:
            return None
        signature = (st.st_ino, st.st_size, st.st_mtime_ns)
        if signature != self._packed_signature:
            refs: dict[str, str] = {}
            for line in packed.read_text(encoding="utf-8").splitlines():
                if line and not line.startswith(("#", "^")):
                    sha, _, ref = line.partition(" ")
                    refs[ref] = sha
            self._packed_refs, self._packed_signature = refs, signature
        return self._packed_refs.get(name)

    def _write_ref(self, name: str, sha: str) -> None:
        path = self._git_dir / name
        path.parent.mkdir(parents=True, exist_ok=True)
        lock = path.with_name(path.name + ".lock")
        try:
            fd = os.open(lock, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        except FileExistsError:
            # We hold the archive flock, so this is the leftover of a killed writer, not a live one.
            lock.unlink(missing_ok=True)
            fd = os.open(lock, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        with os.fdopen(fd, "w", encoding="ascii") as fh:
            fh.write(sha + "\n")
        os.replace(lock, path)  # git's own lock-and-rename protocol: the ref is always old or new, never torn

    def _delete_ref(self, name: str) -> None:
        if self._read_ref(name) is None:
            return
        for stale in (self._git_dir / (name + ".lock"), self._git_dir / "packed-refs.lock"):
            stale.unlink(missing_ok=True)
        self._repo.git.update_ref("-d", name)  # rare; git knows how to drop a packed ref too

    def _candidate_tree(self, gid: str, tip: str) -> dict[str, tuple[str, str]]:
        return _parse_tree(self._cat(f"{tip}:candidates/{gid}"))

    def _record_event(self, kind: str, gid: str, files: dict[str, tuple[str, str]], parents: Sequence[str],
                      message: str, extra_refs: Iterable[str] = (), drop_refs: Iterable[str] = ()
                      ) -> tuple[str, str, int]:
        """Commit ``files`` as the candidate's new state and journal it on main; returns (event, journal, time)."""
        when = int(time.time())
        trailers = f"Masforge-Event: {kind}\nMasforge-Genome: {gid}\n"
        subject = message.strip().splitlines()[0]
        id_tree = self._write_tree(files)
        root = self._write_tree({"candidates": (_TREE_MODE, self._write_tree({gid: (_TREE_MODE, id_tree)}))})
        event = self._write_commit(root, parents, f"{message.strip()}\n\n{trailers}", when)
        self._remember_object(f"{event}:candidates/{gid}", self._objcache[id_tree])
        head = self._read_ref(MAIN_REF)
        if head is None:
            raise ArchiveError(f"{self.path}: the archive has no main branch (damaged; restore it from a clone)")
        journal_tree = self._cat(head).split(b"\n", 1)[0].split(b" ")[1].decode()
        journal = self._write_commit(journal_tree, [head, event], f"{subject}\n\n{trailers}", when)
        # Refs last, main very last: a kill before this point leaves only unreachable objects behind.
        self._write_ref(CANDIDATE_REFS + gid, event)
        for ref in extra_refs:
            self._write_ref(ref, event)
        for ref in drop_refs:
            self._delete_ref(ref)
        self._write_ref(MAIN_REF, journal)
        return event, journal, when

    def _maintain(self) -> None:
        """Pack loose objects once there are many of them (each costs a disk block and a file lookup).

        Not `git gc --auto`: that walks all history (repack, prune, commit-graph) on every run, which grows with
        the archive. Here `git pack-objects` packs exactly the loose objects (O(new objects)); `prune-packed`
        removes the loose copies; packs are consolidated only when there are many. Runs under our flock, so no
        masforge writer races it; every step is crash-safe in git itself (temp files, then renames)."""
        self._sweep()
        loose: list[str] = []
        for folder in os.scandir(self._objects):
            if len(folder.name) == 2 and folder.is_dir():
                loose += [folder.name + entry.name for entry in os.scandir(folder.path) if len(entry.name) == 38]
        if len(loose) < PACK_LOOSE_AT:
            return
        git_cmd = ["git", "-C", str(self.path)]
        try:
            subprocess.run([*git_cmd, "pack-objects", "-q", str(self._objects / "pack" / "pack")], check=True,
                           input="\n".join(loose) + "\n", capture_output=True, text=True)
            subprocess.run([*git_cmd, "prune-packed", "-q"], check=True, capture_output=True)
            if len(list((self._objects / "pack").glob("pack-*.pack"))) > MAX_PACKS:
                subprocess.run([*git_cmd, "repack", "-a", "-d", "-q"], check=True, capture_output=True)
            subprocess.run([*git_cmd, "pack-refs", "--all", "--prune"], check=True, capture_output=True)
        except (OSError, subprocess.CalledProcessError):
            pass  # packing is an optimisation; the loose objects stay valid if it fails

    def _sweep(self) -> None:
        """Remove what killed writers left behind: ref lock files (they would block `git pack-refs`) and our
        temporary object files. Only called under the flock, when no masforge writer can be mid-write
        (a git command a person runs in the archive at that very moment is not protected)."""
        for lock in [*(self._git_dir / "refs").rglob("*.lock"), self._git_dir / "packed-refs.lock"]:
            lock.unlink(missing_ok=True)
        for tmp in self._objects.glob("tmp_obj_masforge_*"):
            tmp.unlink(missing_ok=True)

    # ---------------------------------------------------------------- locking and the index

    @contextlib.contextmanager
    def _write_lock(self) -> Iterator[None]:
        with self._mutex:
            if self._lock_depth:
                self._lock_depth += 1
                try:
                    yield
                finally:
                    self._lock_depth -= 1
                return
            with _flock(self._lock_path):
                self._lock_depth = 1
                try:
                    yield
                finally:
                    self._lock_depth = 0

    def _connect(self) -> None:
        if self._db is not None:
            self._db.close()
            self._db = None
        db = sqlite3.connect(self._index_path, timeout=60, isolation_level=None, check_same_thread=False)
        db.row_factory = sqlite3.Row
        # The index is a cache of git: durability across power loss is not needed (a torn index is detected
        # and rebuilt), while the rollback journal still makes every transaction atomic against a kill.
        db.execute("PRAGMA synchronous=OFF")
        self._db = db
        self._db_ino = os.stat(self._index_path).st_ino

    def _index_state(self) -> str:
        """``ok``, ``missing``, ``corrupt`` or ``stale`` (built from another main commit than the current one)."""
        try:
            ino = os.stat(self._index_path).st_ino
        except FileNotFoundError:
            return "missing"
        try:
            if self._db is None or ino != self._db_ino:
                self._connect()
            assert self._db is not None
            meta = {row[0]: row[1] for row in self._db.execute("SELECT key, value FROM meta")}
        except sqlite3.DatabaseError as exc:
            if _is_busy(exc):
                raise ArchiveError(f"{self._index_path}: index busy for over a minute; retry") from None
            return "corrupt"
        if meta.get("schema") != str(INDEX_SCHEMA):
            return "corrupt"
        return "ok" if meta.get("head") == self._read_ref(MAIN_REF) else "stale"

    def _open_index(self, check_integrity: bool = False) -> None:
        with self._mutex:
            state = self._index_state()
            if state == "ok" and check_integrity:
                try:
                    assert self._db is not None
                    if self._db.execute("PRAGMA quick_check").fetchone()[0] != "ok":
                        state = "corrupt"
                except sqlite3.DatabaseError as exc:
                    if _is_busy(exc):
                        raise ArchiveError(f"{self._index_path}: index busy for over a minute; retry") from None
                    state = "corrupt"
            if state != "ok":
                self._rebuild(force=state == "corrupt")

    def _fresh(self) -> sqlite3.Connection:
        self._open_index()
        assert self._db is not None
        return self._db

    def _query(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """Run a read against a fresh index; a corrupt index found mid-query is rebuilt and the read retried."""
        with self._mutex:
            try:
                return fn(self._fresh())
            except sqlite3.DatabaseError as exc:
                if _is_busy(exc):
                    raise ArchiveError(f"{self._index_path}: index busy for over a minute; retry") from None
                self._rebuild(force=True)
                return fn(self._fresh())

    def rebuild_index(self) -> int:
        """Rebuild the SQLite index from git history; returns the number of candidates indexed."""
        with self._mutex:
            self._rebuild(force=True)
            return self._query(lambda db: db.execute("SELECT COUNT(*) FROM candidates").fetchone()[0])

    def _read_journal(self, revs: str) -> tuple[list[tuple[str, str, str, int, str]], str | None]:
        """Events (kind, genome id, event commit, time, subject) of the journal commits in ``revs`` (first-parent
        walk), oldest first, and the first parent of the oldest commit walked."""
        out = self._repo.git.log("--first-parent", "--reverse", "--format=%P%x1f%ct%x1f%B%x1e", revs)
        events: list[tuple[str, str, str, int, str]] = []
        base: str | None = None
        for number, chunk in enumerate(out.split("\x1e")):
            chunk = chunk.strip("\n")
            if not chunk:
                continue
            parents, when, body = chunk.split("\x1f", 2)
            parent_list = parents.split()
            if number == 0:
                base = parent_list[0] if parent_list else None
            tr = _trailers(body)
            if len(parent_list) < 2 or tr.get("event") not in EVENT_KINDS or "genome" not in tr:
                continue  # the init commit, or someone's manual commit on main
            events.append((tr["event"], tr["genome"], parent_list[1], int(when), body.strip().splitlines()[0]))
        return events, base

    def _rebuild(self, force: bool = False) -> None:
        with self._write_lock():
            state = self._index_state()
            if not force and state == "ok":
                return  # another process rebuilt it while we waited for the lock
            self._sweep()  # a stale index usually means a killed writer: tidy up after it first
            head = self._read_ref(MAIN_REF)
            if head is None:
                raise ArchiveError(f"{self.path}: the archive has no main branch (damaged; restore it from a clone)")
            if state == "stale" and not force and self._catch_up(head):
                return
            journal, _ = self._read_journal(head)
            first_commit: dict[str, str] = {}
            tips: dict[str, str] = {}
            for kind, gid, event, _, _ in journal:
                if kind == "add":
                    first_commit.setdefault(gid, event)
                tips[gid] = event
            tmp = self._index_path.with_name(f"{INDEX_FILE}.tmp-{os.getpid()}")
            tmp.unlink(missing_ok=True)
            db = sqlite3.connect(tmp, isolation_level=None)
            try:
                db.execute("PRAGMA synchronous=OFF")
                db.execute("PRAGMA journal_mode=OFF")  # a temp file nobody else sees yet
                db.executescript(_SCHEMA)
                db.execute("BEGIN")
                names: dict[str, str] = {}
                statuses: dict[str, str] = {}
                for gid, commit in first_commit.items():
                    record = self._read_candidate(gid, tips[gid])
                    names[gid] = record.name
                    statuses[gid] = record.status
                    self._index_candidate(db, record, commit, tips[gid])
                    for result in record.results:
                        self._index_result(db, gid, result)
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
            Path(str(self._index_path) + "-journal").unlink(missing_ok=True)
            os.replace(tmp, self._index_path)
            self._connect()
            self._repair_refs(tips, statuses)

    def _catch_up(self, head: str) -> bool:
        """Apply only the journal entries the index misses (the usual case after a killed writer: a few events,
        not the whole history). False if the index's commit is not on main's first-parent chain."""
        assert self._db is not None
        db = self._db
        row = db.execute("SELECT value FROM meta WHERE key = 'head'").fetchone()
        if row is None or not _HEX.match(row[0]):
            return False
        try:
            entries, base = self._read_journal(f"{row[0]}..{head}")
        except git.GitCommandError:
            return False  # the index names a commit this repository does not have
        if base != row[0]:
            return False
        tips: dict[str, str] = {}
        statuses: dict[str, str] = {}
        try:
            db.execute("BEGIN IMMEDIATE")
            for kind, gid, event, when, subject in entries:
                record = self._read_candidate(gid, event)
                known = db.execute("SELECT 1 FROM candidates WHERE id = ?", (gid,)).fetchone() is not None
                if known == (kind == "add"):
                    raise ArchiveError(f"journal entry {event[:12]} does not fit the index")
                if kind == "add":
                    self._index_candidate(db, record, event, event)
                else:
                    db.execute("UPDATE candidates SET status = ?, tags = ?, tip_sha = ? WHERE id = ?",
                               (record.status, json.dumps(record.tags), event, gid))
                db.execute("DELETE FROM results WHERE genome_id = ?", (gid,))
                for result in record.results:
                    self._index_result(db, gid, result)
                db.execute("INSERT INTO events(at, kind, genome_id, summary, commit_sha) VALUES (?, ?, ?, ?, ?)",
                           (_iso(when), kind, gid, subject, event))
                tips[gid], statuses[gid] = event, record.status
            db.execute("UPDATE meta SET value = ? WHERE key = 'head'", (head,))
            db.execute("COMMIT")
        except (ArchiveError, sqlite3.DatabaseError):
            with contextlib.suppress(sqlite3.DatabaseError):
                db.execute("ROLLBACK")
            return False
        self._repair_refs(tips, statuses)
        return True

    def _read_candidate(self, gid: str, tip: str) -> CandidateRecord:
        tree = self._candidate_tree(gid, tip)
        origin = f"{self.path.name}:candidates/{gid[:12]}"
        if "meta.json" not in tree:
            raise ArchiveError(f"{origin}: meta.json is missing (archive damaged; run `git fsck`)")
        record = CandidateRecord.from_json(self._cat(tree["meta.json"][1], cache=False).decode("utf-8"), origin)
        if "results" in tree:
            for name, (_, sha) in sorted(_parse_tree(self._cat(tree["results"][1])).items()):
                text = self._cat(sha, cache=False).decode("utf-8")
                record.results.append(ResultRecord.from_json(text, f"{origin}/{name}"))
        return record

    def _repair_refs(self, tips: dict[str, str], statuses: dict[str, str]) -> None:
        """Make refs/candidates/* and the promoted/pruned tags agree with the journal (a kill can leave a ref
        written whose journal entry never was)."""
        out = self._repo.git.for_each_ref("--format=%(refname) %(objectname)", CANDIDATE_REFS,
                                          "refs/tags/promoted/", "refs/tags/pruned/")
        current = dict(line.split(" ", 1) for line in out.splitlines() if line)
        wanted = {CANDIDATE_REFS + gid: tip for gid, tip in tips.items()}
        wanted |= {f"refs/tags/{status}/{gid[:12]}": tips[gid] for gid, status in statuses.items()
                   if status != "active"}
        for ref, sha in wanted.items():
            if current.get(ref) != sha:
                self._write_ref(ref, sha)
        shorts = {gid[:12] for gid in statuses}
        for ref in current:
            if ref.startswith("refs/tags/") and ref not in wanted and ref.rsplit("/", 1)[1] in shorts:
                self._delete_ref(ref)

    @staticmethod
    def _index_candidate(db: sqlite3.Connection, record: CandidateRecord, commit: str, tip: str) -> None:
        db.execute(
            "INSERT INTO candidates(id, name, kind, strategy, operator, rationale, generation, run, created_at, "
            "tags, status, commit_sha, tip_sha) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (record.genome_id, record.name, record.kind, record.strategy, record.operator, record.rationale,
             record.generation, record.run, record.created_at, json.dumps(record.tags), record.status, commit, tip),
        )
        db.executemany("INSERT INTO edges(child, parent, pos) VALUES (?, ?, ?)",
                       [(record.genome_id, p, i) for i, p in enumerate(record.parents)])

    @staticmethod
    def _index_result(db: sqlite3.Connection, gid: str, r: ResultRecord) -> None:
        db.execute(
            f"INSERT OR REPLACE INTO results(genome_id, {', '.join(_RESULT_COLUMNS)}) "
            f"VALUES ({', '.join('?' * (len(_RESULT_COLUMNS) + 1))})",
            (gid, r.task, r.split, r.lm_key, r.score, r.ci_low, r.ci_high, r.n, r.dollars, r.tokens, r.llm_calls,
             r.latency_s, json.dumps(r.failures, sort_keys=True), json.dumps(r.extra, sort_keys=True),
             r.evaluated_at, r.cache_hits, json.dumps(r.example_scores, sort_keys=True),
             json.dumps(r.example_dollars, sort_keys=True)),
        )

    def _commit_index(self, db: sqlite3.Connection, journal: str, event: tuple[int, str, str, str, str],
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
            self._rebuild(force=True)  # the write is in git already; the rebuilt index will contain it
        self._writes += 1
        if self._writes % MAINTAIN_EVERY == 0:
            self._maintain()

    # ---------------------------------------------------------------- reading records

    @staticmethod
    def _load(db: sqlite3.Connection, ids: Sequence[str]) -> list[CandidateRecord]:
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
            f"SELECT {', '.join(_CANDIDATE_COLUMNS)} FROM candidates" + where.format("id"), params) if r[0] in keep}
        parents: dict[str, list[str]] = {}
        for child, parent in cur.execute("SELECT child, parent FROM edges" + where.format("child")
                                         + " ORDER BY child, pos", params):
            if child in keep:
                parents.setdefault(child, []).append(parent)
        results: dict[str, list[ResultRecord]] = {}
        for r in cur.execute(f"SELECT genome_id, {', '.join(_RESULT_COLUMNS)} FROM results"
                             + where.format("genome_id") + " ORDER BY genome_id, task, split, lm_key", params):
            if r[0] in keep:
                results.setdefault(r[0], []).append(_result_from_values(r[1:]))
        out: list[CandidateRecord] = []
        for gid in unique:
            row = rows.get(gid)
            if row is None:
                continue
            record = object.__new__(CandidateRecord)  # the index only ever holds validated records
            record.__dict__.update(zip(_CANDIDATE_FIELDS, row, strict=True))
            record.tags = _json(record.tags)  # type: ignore[arg-type]
            record.parents = parents.get(gid, [])
            record.results = results.get(gid, [])
            out.append(record)
        return out

    @staticmethod
    def _resolve(db: sqlite3.Connection, id_or_prefix: str) -> str:
        text = str(id_or_prefix).strip().lower()
        if not _HEX.match(text):
            raise ArchiveError(f"invalid candidate id '{id_or_prefix}' (a genome id is hex digits 0-9a-f)")
        # 'g' sorts after every hex digit, so [text, text + 'g') is exactly the ids starting with text.
        rows = db.execute("SELECT id FROM candidates WHERE id >= ? AND id < ? LIMIT 2", (text, text + "g")).fetchall()
        if len(rows) == 1:
            return str(rows[0][0])
        if not rows:
            raise ArchiveError(f"unknown candidate id '{text}' (no genome hash starts with it); "
                               "see `masforge archive list`")
        count = db.execute("SELECT COUNT(*) FROM candidates WHERE id >= ? AND id < ?", (text, text + "g")).fetchone()
        raise ArchiveError(f"ambiguous id '{text}': matches {count[0]} candidates, give more digits")

    def _row(self, db: sqlite3.Connection, gid: str) -> sqlite3.Row:
        row = db.execute("SELECT * FROM candidates WHERE id = ?", (gid,)).fetchone()
        if row is None:
            raise ArchiveError(f"unknown candidate id '{gid}' (no genome hash starts with it); add it first")
        return row

    def resolve(self, id_or_prefix: str) -> str:
        """Full genome id for a unique prefix (ArchiveError if unknown or ambiguous)."""
        return self._query(lambda db: self._resolve(db, id_or_prefix))

    def get(self, id_or_prefix: str) -> CandidateRecord:
        """The record of one candidate, by full id or unique prefix."""
        return self._query(lambda db: self._load(db, [self._resolve(db, id_or_prefix)])[0])

    def genome(self, id_or_prefix: str) -> Genome:
        """The stored genome, by full id or unique prefix."""
        def read(db: sqlite3.Connection) -> tuple[str, str, str]:
            gid = self._resolve(db, id_or_prefix)
            row = self._row(db, gid)
            return gid, row["tip_sha"], row["kind"]

        with self._mutex:
            gid, tip, kind = self._query(read)
            return self._genome_at(gid, tip, kind)

    def _genome_at(self, gid: str, tip: str, kind: str) -> Genome:
        cached = self._genome_cache.get(gid)
        if cached is not None:
            return cached.model_copy(deep=True)
        fmt = "py" if kind == "code" else "yaml"
        text = self._cat(f"{tip}:candidates/{gid}/genome.{fmt}", cache=False).decode("utf-8")
        try:
            genome = parse_genome_text(text, f"{self.path.name}:candidates/{gid[:12]}/genome.{fmt}", fmt)
        except MasforgeError as exc:
            raise ArchiveError(str(exc)) from None
        self._remember(gid, genome)
        return genome.model_copy(deep=True)

    def _remember(self, gid: str, genome: Genome) -> None:
        # Genomes never change once stored, so caching by id is safe; YAML parsing is the slow part of add().
        self._genome_cache.pop(gid, None)
        self._genome_cache[gid] = genome
        while len(self._genome_cache) > 512:
            del self._genome_cache[next(iter(self._genome_cache))]

    def __contains__(self, item: object) -> bool:
        gid = item.id if isinstance(item, Genome) else str(item)
        return bool(self._query(lambda db: db.execute("SELECT 1 FROM candidates WHERE id = ?", (gid,)).fetchone()))

    def __len__(self) -> int:
        return int(self._query(lambda db: db.execute("SELECT COUNT(*) FROM candidates").fetchone()[0]))

    def claim(self, genome_id: str | Genome, task: str, split: str, lm_key: str, *, run: str = "",
              stop: StopFn | None = None, on_wait: WaitFn | None = None) -> Claim | None:
        """Claim the evaluation of (candidate, task, split, lm_key) before paying for it, waiting while another
        process holds it (it is then usually stored when the claim comes free: check :meth:`get_result`).
        None if ``stop()`` says to give up first. A dead process's claim expires at once (see
        :mod:`masforge.archive.claims`)."""
        gid = genome_id.id if isinstance(genome_id, Genome) else genome_id
        return self._claims.claim((gid, task, split, lm_key), run, stop=stop, on_wait=on_wait)

    def get_result(self, genome_id: str | Genome, task: str, split: str, lm_key: str) -> ResultRecord | None:
        """The stored result for exactly this (candidate, task, split, lm_key), or None: never pay twice."""
        gid = genome_id.id if isinstance(genome_id, Genome) else genome_id

        def read(db: sqlite3.Connection) -> ResultRecord | None:
            row = db.execute("SELECT * FROM results WHERE genome_id = ? AND task = ? AND split = ? AND lm_key = ?",
                             (gid, task, split, lm_key)).fetchone()
            return _result_from_row(row) if row is not None else None

        return self._query(read)

    # ---------------------------------------------------------------- writing

    def add(self, genome: Genome, parents: Sequence[str | Genome] = (), strategy: str = "seed",
            operator: str = "seed", rationale: str = "", generation: int = 0, run: str = "",
            message: str | None = None, tags: Sequence[str] = ()) -> CandidateRecord:
        """Store a candidate (one commit whose git parents are its parents' commits); idempotent by genome id."""
        bad_name = name_problem(genome.name)
        if bad_name:  # a NUL would go into a git commit (fsck: nulInCommit), a line break into every table
            raise ArchiveError(f"genome {genome.name!r}: {bad_name}")
        gid = genome.id
        fmt = "py" if genome.kind == "code" else "yaml"
        text = dump_genome(genome, fmt)
        # What we store must come back as the same system, or the archive would silently lie about ids.
        stored = parse_genome_text(text, "archive", fmt)
        if stored.id != gid:
            raise ArchiveError(f"genome {genome.name}: its {fmt} text does not reproduce id {gid[:12]} "
                               "(a masforge bug; please report it with the genome)")
        if contains_secret(text):
            # Redacting would change the system (and its id), so a genome holding a key is refused instead.
            raise ArchiveError(f"genome {genome.name}: holds what looks like an API key or token; remove it "
                               "(masforge never stores secrets)")
        rationale = redact(rationale)
        message = redact(message) if message else message
        with self._write_lock():
            db = self._fresh()
            existing = self._load(db, [gid])
            if existing:
                return existing[0]
            parent_ids: list[str] = []
            for parent in parents:
                if isinstance(parent, Genome):
                    pid = parent.id
                    if db.execute("SELECT 1 FROM candidates WHERE id = ?", (pid,)).fetchone() is None:
                        raise ArchiveError(f"parent {pid[:12]} ({parent.name}) is not in the archive; add it first")
                else:
                    pid = self._resolve(db, parent)
                if pid == gid:
                    raise ArchiveError(f"genome {gid[:12]} cannot be its own parent")
                if pid not in parent_ids:
                    parent_ids.append(pid)
            parent_rows = [self._row(db, pid) for pid in parent_ids]
            record = CandidateRecord(
                genome_id=gid, name=genome.name, kind=genome.kind, parents=parent_ids, strategy=strategy,
                operator=operator, rationale=rationale, generation=generation, run=run, tags=list(tags),
            )
            if not message or not message.strip():
                first = (self._genome_at(parent_ids[0], parent_rows[0]["tip_sha"], parent_rows[0]["kind"])
                         if parent_ids else None)
                message = _add_message(record, genome, first)
            subject = message.strip().splitlines()[0]
            files = {
                f"genome.{fmt}": (_BLOB_MODE, self._store("blob", text.encode("utf-8"))),
                "meta.json": (_BLOB_MODE, self._store("blob", record.meta_json().encode("utf-8"))),
            }
            event, journal, when = self._record_event("add", gid, files, [r["commit_sha"] for r in parent_rows],
                                                      message)
            self._commit_index(db, journal, (when, "add", gid, subject, event),
                               lambda d: self._index_candidate(d, record, event, event))
            record.commit = event
            self._remember(gid, stored)
            return record

    def add_result(self, genome_id: str | Genome, result: ResultRecord) -> CandidateRecord:
        """Store or replace the result for (task, split, lm_key) as a commit on the candidate."""
        # Failure notes quote errors and model output; none of it may carry a key into git or the index.
        result = ResultRecord.from_dict(redact_data(result.to_dict()))
        with self._write_lock():
            db = self._fresh()
            gid = genome_id.id if isinstance(genome_id, Genome) else self._resolve(db, genome_id)
            row = self._row(db, gid)
            tree = self._candidate_tree(gid, row["tip_sha"])
            results = _parse_tree(self._cat(tree["results"][1])) if "results" in tree else {}
            fname = result_filename(result)
            blob = result.to_json().encode("utf-8")
            blob_sha = hashlib.sha1(f"blob {len(blob)}\0".encode() + blob).hexdigest()
            if results.get(fname, ("", ""))[1] == blob_sha:
                return self._load(db, [gid])[0]  # exactly this result is stored already
            results[fname] = (_BLOB_MODE, self._store("blob", blob))
            tree["results"] = (_TREE_MODE, self._write_tree(results))
            ci = f" [{result.ci_low:.3f}, {result.ci_high:.3f}]" if result.ci_low is not None and \
                result.ci_high is not None else ""
            subject = shorten(f"result {gid[:12]} {result.task}/{result.split}: {result.score:.3f}, "
                              f"${result.dollars:.4f}, n={result.n}", SUBJECT_MAX)
            body = (f"candidate: {row['name']}\nlm: {result.lm_key}\nscore: {result.score:.4f}{ci}\n"
                    f"dollars: {result.dollars:.6f}  tokens: {result.tokens}  llm calls: {result.llm_calls}  "
                    f"latency: {result.latency_s:.2f} s/example")
            if result.failures:
                body += "\nfailures: " + ", ".join(f"{k}={v}" for k, v in sorted(result.failures.items()))
            event, journal, when = self._record_event("result", gid, tree, [row["tip_sha"]], f"{subject}\n\n{body}")

            def writes(d: sqlite3.Connection) -> None:
                self._index_result(d, gid, result)
                d.execute("UPDATE candidates SET tip_sha = ? WHERE id = ?", (event, gid))

            self._commit_index(db, journal, (when, "result", gid, subject, event), writes)
            return self._load(self._fresh(), [gid])[0]

    def promote(self, id_or_prefix: str) -> CandidateRecord:
        """Mark a candidate promoted (meta.json, tag ``promoted/<short id>``, index)."""
        return self._set_status(id_or_prefix, "promoted")

    def prune(self, id_or_prefix: str) -> CandidateRecord:
        """Mark a candidate pruned: hidden from lists and fronts by default, but kept forever."""
        return self._set_status(id_or_prefix, "pruned")

    def _set_status(self, id_or_prefix: str, status: str) -> CandidateRecord:
        assert status in STATUSES
        with self._write_lock():
            db = self._fresh()
            gid = self._resolve(db, id_or_prefix)
            record = self._load(db, [gid])[0]
            if record.status == status:
                return record
            row = self._row(db, gid)
            record.status = status
            tree = self._candidate_tree(gid, row["tip_sha"])
            tree["meta.json"] = (_BLOB_MODE, self._store("blob", record.meta_json().encode("utf-8")))
            verb = {"promoted": "promote", "pruned": "prune"}[status]
            subject = shorten(f"{verb} {gid[:12]} ({record.name})", SUBJECT_MAX)
            tags = {s: f"refs/tags/{s}/{gid[:12]}" for s in ("promoted", "pruned")}
            event, journal, when = self._record_event(
                verb, gid, tree, [row["tip_sha"]], subject, extra_refs=[tags[status]],
                drop_refs=[ref for s, ref in tags.items() if s != status],
            )

            def writes(d: sqlite3.Connection) -> None:
                d.execute("UPDATE candidates SET status = ?, tip_sha = ? WHERE id = ?", (status, event, gid))

            self._commit_index(db, journal, (when, verb, gid, subject, event), writes)
            return record

    # ---------------------------------------------------------------- queries

    def list(self, task: str | None = None, split: str | None = None, strategy: str | None = None,
             kind: str | None = None, run: str | None = None, sort: str = "score", limit: int | None = None,
             include_pruned: bool = False) -> list[CandidateRecord]:
        """Candidates matching the filters, best first (``score``), cheapest first (``cost``), newest
        generation first (``generation``) or newest first (``created``). With ``task``/``split`` only
        candidates evaluated there are listed and ranked by their best result there."""
        if sort not in SORTS:
            raise ArchiveError(f"unknown sort '{sort}' (use one of: {', '.join(SORTS)})")
        ranked = self._ranked(task, split, strategy, kind, run, include_pruned, sort, limit)
        return self._query(lambda db: self._load(db, [gid for gid, _, _ in ranked]))

    def _ranked(self, task: str | None, split: str | None, strategy: str | None, kind: str | None,
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
            "score": "b.score IS NULL, b.score DESC, b.dollars ASC, c.seq ASC",
            "cost": "b.dollars IS NULL, b.dollars ASC, b.score DESC, c.seq ASC",
            "generation": "c.generation DESC, c.seq DESC",
            "created": "c.seq DESC",
        }[sort]
        # Each candidate's best result (SQLite takes the bare `dollars` from the row holding MAX(score)). It is
        # computed once as a grouped sub-query and joined, never re-evaluated per candidate row (that was O(N^2)).
        best = ("SELECT genome_id, MAX(score) AS score, dollars FROM results"
                + (" WHERE " + " AND ".join(rwhere) if rwhere else "") + " GROUP BY genome_id")
        where = " WHERE " + " AND ".join(cwhere) if cwhere else ""
        if task is not None or split is not None:
            sql = f"SELECT c.id, b.score, b.dollars FROM ({best}) b JOIN candidates c ON c.id = b.genome_id{where}"
        elif sort in ("generation", "created"):
            sql = f"SELECT c.id, NULL, NULL FROM candidates c{where}"
        else:
            sql = f"SELECT c.id, b.score, b.dollars FROM candidates c LEFT JOIN ({best}) b ON b.genome_id = c.id{where}"
        sql += f" ORDER BY {order} LIMIT ?"
        params = [*rparams, *cparams, -1 if limit is None else max(0, int(limit))]
        return self._query(lambda db: [(r[0], r[1], r[2]) for r in db.execute(sql, params)])

    def best(self, task: str, k: int = 1, split: str | None = None) -> list[CandidateRecord]:
        """The ``k`` best candidates on ``task`` (pruned ones excluded)."""
        return self.list(task=task, split=split, sort="score", limit=k)

    def front(self, task: str, split: str | None = None) -> list[CandidateRecord]:
        """Quality-vs-dollars Pareto front on ``task`` (max score, min dollars), cheapest first."""
        ranked = self._ranked(task, split, None, None, None, False, "cost", None)
        front = pareto_front(ranked, score=lambda r: r[1], cost=lambda r: math.inf if r[2] is None else r[2])
        chosen = [gid for gid, _, _ in front]
        return self._query(lambda db: self._load(db, chosen))

    def lineage(self, id_or_prefix: str, depth: int | None = None) -> Lineage:
        """Ancestors and descendants (all, or up to ``depth`` generations away), oldest first."""

        def read(db: sqlite3.Connection) -> Lineage:
            gid = self._resolve(db, id_or_prefix)
            found = []
            for near, far in (("child", "parent"), ("parent", "child")):
                if depth is None:
                    sql = (f"WITH RECURSIVE walk(id) AS (SELECT {far} FROM edges WHERE {near} = ? UNION "
                           f"SELECT e.{far} FROM edges e JOIN walk ON e.{near} = walk.id) SELECT id FROM walk")
                    params: list[Any] = [gid]
                else:
                    sql = (f"WITH RECURSIVE walk(id, d) AS (SELECT {far}, 1 FROM edges WHERE {near} = ? UNION "
                           f"SELECT e.{far}, walk.d + 1 FROM edges e JOIN walk ON e.{near} = walk.id "
                           "WHERE walk.d < ?) SELECT DISTINCT id FROM walk")
                    params = [gid, depth]
                ids = [r[0] for r in db.execute(sql, params) if r[0] != gid]
                records = self._load(db, ids)
                records.sort(key=lambda r: (r.generation, r.created_at))
                found.append(records)
            return Lineage(found[0], found[1])

        return self._query(read)

    def log(self, limit: int | None = 20) -> list[ArchiveEvent]:
        """Recent events (add, result, promote, prune), newest first."""

        def read(db: sqlite3.Connection) -> list[ArchiveEvent]:
            rows = db.execute(
                "SELECT e.at, e.kind, e.genome_id, c.name, e.summary, e.commit_sha FROM events e "
                "LEFT JOIN candidates c ON c.id = e.genome_id ORDER BY e.seq DESC LIMIT ?",
                (-1 if limit is None else max(0, int(limit)),),
            )
            return [ArchiveEvent(r[0], r[1], r[2], r[3] or "", r[4], r[5]) for r in rows]

        return self._query(read)

    def stats(self) -> dict[str, int]:
        """Counts of candidates, results and events, and the index size in bytes."""

        def read(db: sqlite3.Connection) -> dict[str, int]:
            return {
                "candidates": db.execute("SELECT COUNT(*) FROM candidates").fetchone()[0],
                "results": db.execute("SELECT COUNT(*) FROM results").fetchone()[0],
                "events": db.execute("SELECT COUNT(*) FROM events").fetchone()[0],
                "index_bytes": self._index_path.stat().st_size,
            }

        return self._query(read)


def _json(text: str) -> Any:
    # Most tags/failures/extra are empty; skipping the decoder for them matters when loading thousands.
    if text == "[]":
        return []
    if text == "{}":
        return {}
    return json.loads(text)


def _result_from_values(values: Sequence[Any]) -> ResultRecord:
    """A ResultRecord from index columns (in _RESULT_COLUMNS order), without re-validating trusted data."""
    record = object.__new__(ResultRecord)
    record.__dict__.update(zip(_RESULT_COLUMNS, values, strict=True))
    for name in _RESULT_JSON_COLUMNS:
        setattr(record, name, _json(getattr(record, name)))
    return record


def _result_from_row(row: sqlite3.Row) -> ResultRecord:
    return _result_from_values([row[c] for c in _RESULT_COLUMNS])


def _change_text(text: str) -> str:
    """Compact one diff line for a subject: ``~ agent a.temperature: 0.7 -> 0.2`` -> ``a.temperature 0.7 -> 0.2``."""
    op, _, rest = text.partition(" ")
    if op == "~":
        rest = re.sub(r"^(agent |topology\.)", "", rest)
        return rest.replace(": text -> ", " edit ", 1).replace(": ", " ", 1)
    return (op + rest).replace(": ", " ", 1)


def _add_message(record: CandidateRecord, genome: Genome, first_parent: Genome | None) -> str:
    """Short subject (<= 72 chars) saying what changed, then the full diff and the rationale."""
    child = record.genome_id[:12]
    body: list[str] = []
    if first_parent is None:
        subject = shorten(f"{record.operator} {child}: {genome.name}", SUBJECT_MAX)
        if genome.description:
            body.append(genome.description)
    else:
        # Renames are the least informative change; say what the system does differently first.
        changes = [str(c) for c in sorted(diff_genomes(first_parent, genome), key=lambda c: c.path == "name")]
        change = _change_text(changes[0]) if changes else "no change"
        more = f" (+{len(changes) - 1} more)" if len(changes) > 1 else ""
        if len(record.parents) == 1:
            head = f"{record.operator} {record.parents[0][:12]} -> {child}"
        else:
            head = f"{record.operator} {'+'.join(p[:8] for p in record.parents)} -> {record.genome_id[:8]}"
        room = SUBJECT_MAX - len(head) - 2 - len(more)
        subject = f"{head}: {shorten(change, max(room, 12))}{more}"
        subject = shorten(subject, SUBJECT_MAX)
        body.append(f"diff against {first_parent.name} ({record.parents[0][:12]}):\n"
                     + format_diff(first_parent, genome))
    if record.rationale:
        body.append("rationale: " + record.rationale.strip())
    return subject + ("\n\n" + "\n\n".join(body) if body else "")
