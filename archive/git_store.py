"""The archive's git object store: the one place that writes git objects and refs, and reads them back.

Objects are written one way only, in Python (zlib, a temp file, an atomic rename): a ``git hash-object`` process
per object would cost more than the whole write. Refs follow git's own lock-and-rename protocol. The git command
is used only where git must do the work itself: packing loose objects, dropping a packed ref, walking the
journal and listing refs. Every method here runs under the archive's write lock when it writes (see
:mod:`masforge.archive.locking`); nothing here knows SQLite.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import time
import uuid
import zlib
from collections.abc import Iterable, Sequence
from pathlib import Path

import git

from masforge.archive.records import CandidateRecord, ResultRecord
from masforge.errors import ArchiveError
from masforge.redact import redact

FORMAT_VERSION = 1
MARKER = ".masforge-archive"
INDEX_FILE = ".masforge-index.sqlite"
LOCK_FILE = ".masforge-lock"
MAIN_REF = "refs/heads/main"
CANDIDATE_REFS = "refs/candidates/"
EVENT_KINDS = ("add", "result", "promote", "prune")
PACK_LOOSE_AT = 5000  # loose objects that trigger packing them (git's own gc.auto is 6700)
MAX_PACKS = 40  # more packs than this are consolidated into one
TREE_MODE = "40000"
BLOB_MODE = "100644"

MARKER_TEXT = json.dumps({"format": FORMAT_VERSION, "tool": "masforge"}) + "\n"
GITIGNORE_TEXT = f"# local, rebuildable state of the masforge archive\n{INDEX_FILE}*\n{LOCK_FILE}\n"
README_TEXT = """# masforge archive

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
_OBJECT_CACHE = 4096

Entries = dict[str, tuple[str, str]]
"""A git tree's entries: name -> (mode, sha)."""
JournalEntry = tuple[str, str, str, int, str]
"""One journal event: (kind, genome id, event commit, time, subject)."""


class GitStore:
    """Objects, refs and the journal of one archive's git repository."""

    def __init__(self, path: Path, repo: git.Repo) -> None:
        self.path = path
        self.repo = repo
        self.git_dir = Path(repo.git_dir)
        self._objects = self.git_dir / "objects"
        self._objcache: dict[str, bytes] = {}  # recent trees and commits (insertion-ordered, bounded)
        self._packed_refs: dict[str, str] = {}
        self._packed_signature: tuple[int, int, int] | None = None

    @classmethod
    def initialise(cls, p: Path) -> None:
        """Make ``p`` (an empty private folder) a complete archive repository: a ``main`` whose tree holds the
        marker, .gitignore and README, checked out (see :mod:`masforge.archive.creation`)."""
        repo = git.Repo.init(p, initial_branch="main")
        try:
            store = cls(p, repo)
            (store.git_dir / "masforge").write_text("archive\n", encoding="utf-8")  # ours, even before the marker
            tree = store.write_tree({
                MARKER: (BLOB_MODE, store.write("blob", MARKER_TEXT.encode())),
                ".gitignore": (BLOB_MODE, store.write("blob", GITIGNORE_TEXT.encode())),
                "README.md": (BLOB_MODE, store.write("blob", README_TEXT.encode())),
            })
            init = store.write_commit(tree, [], f"init masforge archive (format {FORMAT_VERSION})\n", int(time.time()))
            store.write_ref(MAIN_REF, init)
            atomic_write(p / ".gitignore", GITIGNORE_TEXT)
            atomic_write(p / "README.md", README_TEXT)
            repo.git.read_tree("HEAD")  # git's own index matches the (constant) main tree: `git status` is clean
            atomic_write(p / MARKER, MARKER_TEXT)
        finally:
            repo.close()

    def close(self) -> None:
        self.repo.close()

    # ---------------------------------------------------------------- objects

    def write(self, kind: str, data: bytes) -> str:
        """Store one object (``blob``, ``tree`` or ``commit``) as a loose object; returns its sha."""
        if kind == "commit":
            # Last line of defence for messages (the records and genomes are made secret-free before this).
            text = data.decode("utf-8", "surrogateescape")
            clean = redact(text)
            if clean != text:
                data = clean.encode("utf-8", "surrogateescape")
        sha = hashlib.sha1(f"{kind} {len(data)}\0".encode() + data).hexdigest()
        if kind != "blob":
            self.remember(sha, data)
        target = self._objects / sha[:2] / sha[2:]
        if not target.exists():
            # Temp file in objects/ (which `git fsck` ignores), then an atomic rename, so a reader or a kill never
            # leaves half an object under its real name.
            target.parent.mkdir(exist_ok=True)
            tmp = self._objects / f"tmp_obj_masforge_{uuid.uuid4().hex}"
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o444)
            with os.fdopen(fd, "wb") as fh:
                fh.write(zlib.compress(f"{kind} {len(data)}\0".encode() + data, 1))
            os.replace(tmp, target)
        return sha

    def write_blob(self, text: str) -> tuple[str, str]:
        """A tree entry (mode, sha) for a new blob holding ``text``."""
        return BLOB_MODE, self.write("blob", text.encode("utf-8"))

    def remember(self, key: str, data: bytes) -> None:
        """Keep ``data`` for ``key`` (an object sha or ``<commit>:<path>``: both name immutable content, so the
        cache is never stale). It saves the `git cat-file` round trips of add_result right after add and of
        every journal write."""
        self._objcache.pop(key, None)
        self._objcache[key] = data
        while len(self._objcache) > _OBJECT_CACHE:
            del self._objcache[next(iter(self._objcache))]

    def write_tree(self, entries: Entries) -> str:
        return self.write("tree", tree_bytes(entries))

    def write_commit(self, tree: str, parents: Sequence[str], message: str, when: int) -> str:
        lines = [f"tree {tree}", *(f"parent {p}" for p in parents),
                 f"author {_IDENTITY} {when} +0000", f"committer {_IDENTITY} {when} +0000", "",
                 message.rstrip("\n") + "\n"]
        return self.write("commit", "\n".join(lines).encode("utf-8"))

    def cat(self, rev: str, cache: bool = True) -> bytes:
        """The content of object ``rev`` (a sha or ``<commit>:<path>``)."""
        if rev in self._objcache:
            return self._objcache[rev]
        try:
            data = self.repo.git.get_object_data(rev)[3]
        except ValueError:
            raise ArchiveError(f"{self.path}: git object {rev} is missing (archive damaged; run `git fsck`)") from None
        if cache:
            self.remember(rev, data)
        return data

    # ---------------------------------------------------------------- refs

    def read_ref(self, name: str) -> str | None:
        try:
            text = (self.git_dir / name).read_text(encoding="ascii").strip()
        except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
            text = ""
        if text:
            return text
        # After `git gc` / `git pack-refs` refs live in packed-refs (10,000+ lines here): parse it once per change.
        packed = self.git_dir / "packed-refs"
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

    def main(self) -> str:
        """The sha ``main`` points at (ArchiveError if the archive has none)."""
        head = self.read_ref(MAIN_REF)
        if head is None:
            raise ArchiveError(f"{self.path}: the archive has no main branch (damaged; restore it from a clone)")
        return head

    def write_ref(self, name: str, sha: str) -> None:
        path = self.git_dir / name
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

    def delete_ref(self, name: str) -> None:
        if self.read_ref(name) is None:
            return
        for stale in (self.git_dir / (name + ".lock"), self.git_dir / "packed-refs.lock"):
            stale.unlink(missing_ok=True)
        self.repo.git.update_ref("-d", name)  # rare; git knows how to drop a packed ref too

    def repair_refs(self, tips: dict[str, str], statuses: dict[str, str]) -> None:
        """Make refs/candidates/* and the promoted/pruned tags agree with the journal (a kill can leave a ref
        written whose journal entry never was)."""
        out = self.repo.git.for_each_ref("--format=%(refname) %(objectname)", CANDIDATE_REFS,
                                         "refs/tags/promoted/", "refs/tags/pruned/")
        current = dict(line.split(" ", 1) for line in out.splitlines() if line)
        wanted = {CANDIDATE_REFS + gid: tip for gid, tip in tips.items()}
        wanted |= {f"refs/tags/{status}/{gid[:12]}": tips[gid] for gid, status in statuses.items()
                   if status != "active"}
        for ref, sha in wanted.items():
            if current.get(ref) != sha:
                self.write_ref(ref, sha)
        shorts = {gid[:12] for gid in statuses}
        for ref in current:
            if ref.startswith("refs/tags/") and ref not in wanted and ref.rsplit("/", 1)[1] in shorts:
                self.delete_ref(ref)

    # ---------------------------------------------------------------- candidates and the journal

    def candidate_tree(self, gid: str, tip: str) -> Entries:
        return parse_tree(self.cat(f"{tip}:candidates/{gid}"))

    def record_event(self, kind: str, gid: str, files: Entries, parents: Sequence[str], message: str,
                     extra_refs: Iterable[str] = (), drop_refs: Iterable[str] = ()) -> tuple[str, str, int]:
        """Commit ``files`` as the candidate's new state and journal it on main; returns (event, journal, time)."""
        when = int(time.time())
        trailers = f"Masforge-Event: {kind}\nMasforge-Genome: {gid}\n"
        subject = message.strip().splitlines()[0]
        id_tree = self.write_tree(files)
        root = self.write_tree({"candidates": (TREE_MODE, self.write_tree({gid: (TREE_MODE, id_tree)}))})
        event = self.write_commit(root, parents, f"{message.strip()}\n\n{trailers}", when)
        self.remember(f"{event}:candidates/{gid}", self._objcache[id_tree])
        head = self.main()
        journal_tree = self.cat(head).split(b"\n", 1)[0].split(b" ")[1].decode()
        journal = self.write_commit(journal_tree, [head, event], f"{subject}\n\n{trailers}", when)
        # Refs last, main very last: a kill before this point leaves only unreachable objects behind.
        self.write_ref(CANDIDATE_REFS + gid, event)
        for ref in extra_refs:
            self.write_ref(ref, event)
        for ref in drop_refs:
            self.delete_ref(ref)
        self.write_ref(MAIN_REF, journal)
        return event, journal, when

    def read_journal(self, revs: str) -> tuple[list[JournalEntry], str | None]:
        """Events of the journal commits in ``revs`` (first-parent walk), oldest first, and the first parent of
        the oldest commit walked."""
        out = self.repo.git.log("--first-parent", "--reverse", "--format=%P%x1f%ct%x1f%B%x1e", revs)
        events: list[JournalEntry] = []
        base: str | None = None
        for number, chunk in enumerate(out.split("\x1e")):
            chunk = chunk.strip("\n")
            if not chunk:
                continue
            parents, when, body = chunk.split("\x1f", 2)
            parent_list = parents.split()
            if number == 0:
                base = parent_list[0] if parent_list else None
            tr = trailers(body)
            if len(parent_list) < 2 or tr.get("event") not in EVENT_KINDS or "genome" not in tr:
                continue  # the init commit, or someone's manual commit on main
            events.append((tr["event"], tr["genome"], parent_list[1], int(when), body.strip().splitlines()[0]))
        return events, base

    def read_candidate(self, gid: str, tip: str) -> CandidateRecord:
        """The candidate's record (meta.json and its results) as of commit ``tip``."""
        tree = self.candidate_tree(gid, tip)
        origin = f"{self.path.name}:candidates/{gid[:12]}"
        if "meta.json" not in tree:
            raise ArchiveError(f"{origin}: meta.json is missing (archive damaged; run `git fsck`)")
        record = CandidateRecord.from_json(self.cat(tree["meta.json"][1], cache=False).decode("utf-8"), origin)
        if "results" in tree:
            for name, (_, sha) in sorted(parse_tree(self.cat(tree["results"][1])).items()):
                text = self.cat(sha, cache=False).decode("utf-8")
                record.results.append(ResultRecord.from_json(text, f"{origin}/{name}"))
        return record

    # ---------------------------------------------------------------- housekeeping

    def maintain(self) -> None:
        """Pack loose objects once there are many of them (each costs a disk block and a file lookup).

        Not `git gc --auto`: that walks all history (repack, prune, commit-graph) on every run, which grows with
        the archive. Here `git pack-objects` packs exactly the loose objects (O(new objects)); `prune-packed`
        removes the loose copies; packs are consolidated only when there are many. Runs under our flock, so no
        masforge writer races it; every step is crash-safe in git itself (temp files, then renames)."""
        self.sweep()
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

    def sweep(self) -> None:
        """Remove what killed writers left behind: ref lock files (they would block `git pack-refs`) and our
        temporary object files. Only called under the flock, when no masforge writer can be mid-write
        (a git command a person runs in the archive at that very moment is not protected)."""
        for lock in [*(self.git_dir / "refs").rglob("*.lock"), self.git_dir / "packed-refs.lock"]:
            lock.unlink(missing_ok=True)
        for tmp in self._objects.glob("tmp_obj_masforge_*"):
            tmp.unlink(missing_ok=True)


def tree_bytes(entries: Entries) -> bytes:
    """A git tree object's content; git orders entries by name, comparing sub-trees as if it ended in "/"."""
    def order(item: tuple[str, tuple[str, str]]) -> bytes:
        name, (mode, _) = item
        return name.encode("utf-8") + (b"/" if mode == TREE_MODE else b"")

    return b"".join(
        f"{mode} {name}".encode() + b"\0" + bytes.fromhex(sha)
        for name, (mode, sha) in sorted(entries.items(), key=order)
    )


def parse_tree(data: bytes) -> Entries:
    """The entries of a git tree object's content."""
    entries: Entries = {}
    pos = 0
    while pos < len(data):
        space = data.index(b" ", pos)
        nul = data.index(b"\0", space)
        entries[data[space + 1 : nul].decode("utf-8")] = (data[pos:space].decode(), data[nul + 1 : nul + 21].hex())
        pos = nul + 21
    return entries


def blob_sha(data: bytes) -> str:
    """The sha git gives a blob holding ``data`` (to tell whether it is stored already)."""
    return hashlib.sha1(f"blob {len(data)}\0".encode() + data).hexdigest()


def trailers(message: str) -> dict[str, str]:
    """The ``Masforge-Event`` and ``Masforge-Genome`` trailers of a journal commit's message, lower-cased keys."""
    return {m.group(1).lower(): m.group(2) for m in _TRAILER.finditer(message)}


def atomic_write(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)
