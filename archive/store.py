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

Three parts, one job each: :mod:`masforge.archive.git_store` writes and reads git objects, refs and the journal;
:mod:`masforge.archive.index` keeps the SQLite index; :class:`Archive` (here) is the facade the search and the CLI
use, and the one place that decides what an event writes to each.

Nothing secret is stored: results and rationales are redacted (:mod:`masforge.redact`) before they become git
objects or index rows, commit messages are redacted once more when written, and a genome that holds a key is
refused (redacting it would change the system and its id).
"""

from __future__ import annotations

import json
import math
import os
import sqlite3
from collections.abc import Callable, Sequence
from pathlib import Path

import git

from masforge.archive import ids
from masforge.archive.claims import Claim, ClaimBook, StopFn, WaitFn
from masforge.archive.creation import create_atomically, half_made
from masforge.archive.git_store import (
    BLOB_MODE,
    FORMAT_VERSION,
    INDEX_FILE,
    LOCK_FILE,
    MARKER,
    TREE_MODE,
    GitStore,
    blob_sha,
    parse_tree,
)
from masforge.archive.index import ArchiveIndex
from masforge.archive.lineage import ArchiveEvent, Lineage, LineageNode
from masforge.archive.locking import WriteLock
from masforge.archive.messages import SUBJECT_MAX, add_message, result_filename
from masforge.archive.pareto import pareto_front
from masforge.archive.protocol import ClaimingArchive, LineageArchive, ResumableArchive
from masforge.archive.records import SORTS, STATUSES, CandidateRecord, ResultRecord, check_sort, redacted
from masforge.errors import ArchiveError, MasforgeError
from masforge.genome.io import dump_genome, parse_genome_text
from masforge.genome.schema import Genome
from masforge.genome.validate import name_problem
from masforge.redact import contains_secret, redact
from masforge.text import shorten

__all__ = ["INDEX_FILE", "LOCK_FILE", "MARKER", "SORTS", "Archive", "ArchiveEvent", "Lineage", "LineageNode",
           "result_filename"]

MAINTAIN_EVERY = 500  # writes (of this process) between checks whether loose objects need packing


class Archive(ResumableArchive, LineageArchive, ClaimingArchive):
    """A git-versioned store of candidates with an SQLite index; open with :meth:`Archive.open`. It meets every
    archive Protocol (:mod:`masforge.archive.protocol`)."""

    def __init__(self, path: Path, repo: git.Repo) -> None:
        self.path = path
        self._git = GitStore(path, repo)
        self._lock = WriteLock(path / LOCK_FILE)
        self._index = ArchiveIndex(path / INDEX_FILE, self._git, self._lock)
        self._genome_cache: dict[str, Genome] = {}  # recent genomes: parents of the next children
        self._writes = 0
        self._claims = ClaimBook(self._git.git_dir / "masforge-claims")  # inside .git: never tracked

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
            create_atomically(p, GitStore.initialise, MARKER)
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
        archive._index.open(check_integrity=True)
        return archive

    def close(self) -> None:
        """Release the SQLite connection and git's helper processes."""
        with self._lock.mutex:
            self._index.close()
            self._git.close()

    def __enter__(self) -> Archive:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Archive({str(self.path)!r})"

    def rebuild_index(self) -> int:
        """Rebuild the SQLite index from git history; returns the number of candidates indexed."""
        with self._lock.mutex:
            self._index.rebuild(force=True)
            return self._index.count()

    def _commit_index(self, db: sqlite3.Connection, journal: str, event: tuple[int, str, str, str, str],
                      writes: Callable[[sqlite3.Connection], None]) -> None:
        """Apply one event to the index (git holds it already), and pack git's loose objects now and then."""
        self._index.commit(db, journal, event, writes)
        self._writes += 1
        if self._writes % MAINTAIN_EVERY == 0:
            self._git.maintain()

    # ---------------------------------------------------------------- reading records

    def resolve(self, id_or_prefix: str) -> str:
        """Full genome id for a unique prefix (ArchiveError if unknown or ambiguous)."""
        return self._index.query(lambda db: self._index.resolve(db, id_or_prefix))

    def get(self, id_or_prefix: str) -> CandidateRecord:
        """The record of one candidate, by full id or unique prefix."""
        return self._index.query(lambda db: self._index.load(db, [self._index.resolve(db, id_or_prefix)])[0])

    def genome(self, id_or_prefix: str) -> Genome:
        """The stored genome, by full id or unique prefix."""
        def read(db: sqlite3.Connection) -> tuple[str, str, str]:
            gid = self._index.resolve(db, id_or_prefix)
            row = self._index.row(db, gid)
            return gid, row["tip_sha"], row["kind"]

        with self._lock.mutex:
            gid, tip, kind = self._index.query(read)
            return self._genome_at(gid, tip, kind)

    def _genome_at(self, gid: str, tip: str, kind: str) -> Genome:
        cached = self._genome_cache.get(gid)
        if cached is not None:
            return cached.model_copy(deep=True)
        fmt = "py" if kind == "code" else "yaml"
        text = self._git.cat(f"{tip}:candidates/{gid}/genome.{fmt}", cache=False).decode("utf-8")
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
        return self._index.query(lambda db: self._index.known(db, gid))

    def __len__(self) -> int:
        return self._index.count()

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

        return self._index.query(lambda db: self._index.result(db, gid, task, split, lm_key))

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
        with self._lock.hold():
            db = self._index.fresh()
            existing = self._index.load(db, [gid])
            if existing:
                return existing[0]
            parent_ids = ids.parent_ids(gid, parents, lambda pid: self._index.known(db, pid),
                                        lambda prefix: self._index.resolve(db, prefix))
            parent_rows = [self._index.row(db, pid) for pid in parent_ids]
            record = CandidateRecord(
                genome_id=gid, name=genome.name, kind=genome.kind, parents=parent_ids, strategy=strategy,
                operator=operator, rationale=rationale, generation=generation, run=run, tags=list(tags),
            )
            if not message or not message.strip():
                first = (self._genome_at(parent_ids[0], parent_rows[0]["tip_sha"], parent_rows[0]["kind"])
                         if parent_ids else None)
                message = add_message(record, genome, first)
            subject = message.strip().splitlines()[0]
            files = {
                f"genome.{fmt}": (BLOB_MODE, self._git.write("blob", text.encode("utf-8"))),
                "meta.json": self._git.write_blob(record.meta_json()),
            }
            event, journal, when = self._git.record_event("add", gid, files, [r["commit_sha"] for r in parent_rows],
                                                      message)
            self._commit_index(db, journal, (when, "add", gid, subject, event),
                               lambda d: self._index.add_candidate(d, record, event, event))
            record.commit = event
            self._remember(gid, stored)
            return record

    def add_result(self, genome_id: str | Genome, result: ResultRecord) -> CandidateRecord:
        """Store or replace the result for (task, split, lm_key) as a commit on the candidate."""
        # Failure notes quote errors and model output; none of it may carry a key into git or the index.
        result = redacted(result)
        with self._lock.hold():
            db = self._index.fresh()
            gid = genome_id.id if isinstance(genome_id, Genome) else self._index.resolve(db, genome_id)
            row = self._index.row(db, gid)
            tree = self._git.candidate_tree(gid, row["tip_sha"])
            results = parse_tree(self._git.cat(tree["results"][1])) if "results" in tree else {}
            fname = result_filename(result)
            blob = result.to_json().encode("utf-8")
            if results.get(fname, ("", ""))[1] == blob_sha(blob):
                return self._index.load(db, [gid])[0]  # exactly this result is stored already
            results[fname] = (BLOB_MODE, self._git.write("blob", blob))
            tree["results"] = (TREE_MODE, self._git.write_tree(results))
            ci = f" [{result.ci_low:.3f}, {result.ci_high:.3f}]" if result.ci_low is not None and \
                result.ci_high is not None else ""
            subject = shorten(f"result {gid[:12]} {result.task}/{result.split}: {result.score:.3f}, "
                              f"${result.dollars:.4f}, n={result.n}", SUBJECT_MAX)
            body = (f"candidate: {row['name']}\nlm: {result.lm_key}\nscore: {result.score:.4f}{ci}\n"
                    f"dollars: {result.dollars:.6f}  tokens: {result.tokens}  llm calls: {result.llm_calls}  "
                    f"latency: {result.latency_s:.2f} s/example")
            if result.failures:
                body += "\nfailures: " + ", ".join(f"{k}={v}" for k, v in sorted(result.failures.items()))
            event, journal, when = self._git.record_event("result", gid, tree, [row["tip_sha"]], f"{subject}\n\n{body}")

            def writes(d: sqlite3.Connection) -> None:
                self._index.add_result(d, gid, result)
                self._index.move_tip(d, gid, event)

            self._commit_index(db, journal, (when, "result", gid, subject, event), writes)
            return self._index.load(self._index.fresh(), [gid])[0]

    def promote(self, id_or_prefix: str) -> CandidateRecord:
        """Mark a candidate promoted (meta.json, tag ``promoted/<short id>``, index)."""
        return self._set_status(id_or_prefix, "promoted")

    def prune(self, id_or_prefix: str) -> CandidateRecord:
        """Mark a candidate pruned: hidden from lists and fronts by default, but kept forever."""
        return self._set_status(id_or_prefix, "pruned")

    def _set_status(self, id_or_prefix: str, status: str) -> CandidateRecord:
        assert status in STATUSES
        with self._lock.hold():
            db = self._index.fresh()
            gid = self._index.resolve(db, id_or_prefix)
            record = self._index.load(db, [gid])[0]
            if record.status == status:
                return record
            row = self._index.row(db, gid)
            record.status = status
            tree = self._git.candidate_tree(gid, row["tip_sha"])
            tree["meta.json"] = self._git.write_blob(record.meta_json())
            verb = {"promoted": "promote", "pruned": "prune"}[status]
            subject = shorten(f"{verb} {gid[:12]} ({record.name})", SUBJECT_MAX)
            tags = {s: f"refs/tags/{s}/{gid[:12]}" for s in ("promoted", "pruned")}
            event, journal, when = self._git.record_event(
                verb, gid, tree, [row["tip_sha"]], subject, extra_refs=[tags[status]],
                drop_refs=[ref for s, ref in tags.items() if s != status],
            )

            self._commit_index(db, journal, (when, verb, gid, subject, event),
                               lambda d: self._index.move_tip(d, gid, event, status=status))
            return record

    # ---------------------------------------------------------------- queries

    def list(self, task: str | None = None, split: str | None = None, strategy: str | None = None,
             kind: str | None = None, run: str | None = None, sort: str = "score", limit: int | None = None,
             include_pruned: bool = False) -> list[CandidateRecord]:
        """Candidates matching the filters, best first (``score``), cheapest first (``cost``), newest
        generation first (``generation``) or newest first (``created``). With ``task``/``split`` only
        candidates evaluated there are listed and ranked by their best result there."""
        check_sort(sort)
        ranked = self._index.ranked(task, split, strategy, kind, run, include_pruned, sort, limit)
        return self._index.query(lambda db: self._index.load(db, [gid for gid, _, _ in ranked]))

    def best(self, task: str, k: int = 1, split: str | None = None) -> list[CandidateRecord]:
        """The ``k`` best candidates on ``task`` (pruned ones excluded)."""
        return self.list(task=task, split=split, sort="score", limit=k)

    def front(self, task: str, split: str | None = None) -> list[CandidateRecord]:
        """Quality-vs-dollars Pareto front on ``task`` (max score, min dollars), cheapest first."""
        ranked = self._index.ranked(task, split, None, None, None, False, "cost", None)
        front = pareto_front(ranked, score=lambda r: r[1], cost=lambda r: math.inf if r[2] is None else r[2])
        chosen = [gid for gid, _, _ in front]
        return self._index.query(lambda db: self._index.load(db, chosen))

    def lineage(self, id_or_prefix: str, depth: int | None = None) -> Lineage:
        """Ancestors and descendants (all, or up to ``depth`` generations away), oldest first."""

        def read(db: sqlite3.Connection) -> Lineage:
            gid = self._index.resolve(db, id_or_prefix)
            found = []
            for upward in (True, False):
                records = self._index.load(db, self._index.relatives(db, gid, upward, depth))
                records.sort(key=lambda r: (r.generation, r.created_at))
                found.append(records)
            return Lineage(found[0], found[1])

        return self._index.query(read)

    def log(self, limit: int | None = 20) -> list[ArchiveEvent]:
        """Recent events (add, result, promote, prune), newest first."""
        return self._index.query(lambda db: [ArchiveEvent(*row) for row in self._index.events(db, limit)])

    def stats(self) -> dict[str, int]:
        """Counts of candidates, results and events, and the index size in bytes."""
        return self._index.query(self._index.stats)
