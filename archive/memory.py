"""An archive kept in memory: what the git archive (:class:`masforge.archive.store.Archive`) does for a search,
without git or SQLite, for tests and for searches whose candidates need not outlive the process. It meets the same
contract (:mod:`masforge.archive.protocol`); a run resumes from it only when handed the same object in the same
process."""

from __future__ import annotations

import copy
import threading
from collections.abc import Sequence
from dataclasses import replace

from masforge.archive import ids
from masforge.archive.claims import Claim, MemoryClaims, StopFn, WaitFn
from masforge.archive.lineage import Lineage
from masforge.archive.protocol import ClaimingArchive, LineageArchive, ResumableArchive
from masforge.archive.records import CandidateRecord, ResultRecord, check_sort
from masforge.genome.schema import Genome

ResultKey = tuple[str, str, str]  # (task, split, lm_key)


class MemoryArchive(ResumableArchive, LineageArchive, ClaimingArchive):
    """Candidates, their genomes, lineage and results in dicts; idempotent by genome id like the git archive.
    Records and genomes handed out are copies: changing one changes nothing stored."""

    def __init__(self) -> None:
        self._records: dict[str, CandidateRecord] = {}  # in the order they were added (the git archive's seq)
        self._genomes: dict[str, Genome] = {}
        self._results: dict[str, dict[ResultKey, ResultRecord]] = {}
        self._children: dict[str, list[str]] = {}
        self._lock = threading.RLock()
        self._claims = MemoryClaims()

    def __len__(self) -> int:
        return len(self._records)

    def __contains__(self, item: object) -> bool:
        return (item.id if isinstance(item, Genome) else str(item)) in self._records

    # ---------------------------------------------------------------- writing

    def add(self, genome: Genome, parents: Sequence[str | Genome] = (), strategy: str = "seed",
            operator: str = "seed", rationale: str = "", generation: int = 0, run: str = "",
            tags: Sequence[str] = ()) -> CandidateRecord:
        """Store a candidate whose parents are stored already; idempotent by genome id."""
        gid = genome.id
        with self._lock:
            if gid not in self._records:
                parent_ids = ids.parent_ids(gid, parents, self.__contains__, self.resolve)
                self._records[gid] = CandidateRecord(
                    genome_id=gid, name=genome.name, kind=genome.kind, parents=parent_ids, strategy=strategy,
                    operator=operator, rationale=rationale, generation=generation, run=run, tags=list(tags))
                self._genomes[gid] = genome.model_copy(deep=True)
                self._results[gid] = {}
                for pid in parent_ids:
                    self._children.setdefault(pid, []).append(gid)
            return self._record(gid)

    def add_result(self, genome_id: str | Genome, result: ResultRecord) -> CandidateRecord:
        """Store or replace the result for (task, split, lm_key) of a stored candidate."""
        gid = genome_id.id if isinstance(genome_id, Genome) else self.resolve(genome_id)
        with self._lock:
            if gid not in self._records:
                raise ids.unknown_candidate(gid)
            self._results[gid][result.key] = copy.deepcopy(result)
            return self._record(gid)

    def claim(self, genome_id: str | Genome, task: str, split: str, lm_key: str, *, run: str = "",
              stop: StopFn | None = None, on_wait: WaitFn | None = None) -> Claim | None:
        """Claim an evaluation key (searches in this process sharing this archive wait for each other)."""
        gid = genome_id.id if isinstance(genome_id, Genome) else genome_id
        return self._claims.claim((gid, task, split, lm_key), run, stop=stop, on_wait=on_wait)

    # ---------------------------------------------------------------- reading

    def resolve(self, id_or_prefix: str) -> str:
        """Full genome id for a unique prefix (ArchiveError if unknown or ambiguous)."""
        text = ids.normalised(id_or_prefix)
        with self._lock:
            if text in self._records:
                return text
            matches = [gid for gid in self._records if gid.startswith(text)]
        if len(matches) == 1:
            return matches[0]
        raise ids.unresolved(text, len(matches))

    def get_result(self, genome_id: str | Genome, task: str, split: str, lm_key: str) -> ResultRecord | None:
        """The stored result for exactly this (candidate, task, split, lm_key), or None."""
        gid = genome_id.id if isinstance(genome_id, Genome) else genome_id
        with self._lock:
            found = self._results.get(gid, {}).get((task, split, lm_key))
            return copy.deepcopy(found) if found is not None else None

    def get(self, id_or_prefix: str) -> CandidateRecord:
        """The record of one candidate (its results included), by full id or unique prefix."""
        return self._record(self.resolve(id_or_prefix))

    def genome(self, id_or_prefix: str) -> Genome:
        """The stored genome, by full id or unique prefix."""
        gid = self.resolve(id_or_prefix)
        with self._lock:
            return self._genomes[gid].model_copy(deep=True)

    def _record(self, gid: str) -> CandidateRecord:
        with self._lock:
            record = self._records[gid]
            results = [copy.deepcopy(r) for _, r in sorted(self._results[gid].items())]
            return replace(record, parents=list(record.parents), tags=list(record.tags), results=results)

    def list(self, task: str | None = None, split: str | None = None, strategy: str | None = None,
             kind: str | None = None, run: str | None = None, sort: str = "score", limit: int | None = None,
             include_pruned: bool = False) -> list[CandidateRecord]:
        """Candidates matching the filters, in the git archive's orders: best first (``score``), cheapest first
        (``cost``), newest generation first (``generation``) or newest first (``created``). With ``task``/``split``
        only candidates evaluated there are listed and ranked by their best result there."""
        check_sort(sort)
        rows = []  # (seq, record, best score, its dollars)
        with self._lock:
            for seq, record in enumerate(self._records.values()):
                wanted = {"strategy": strategy, "kind": kind, "run": run}
                if any(value is not None and getattr(record, name) != value for name, value in wanted.items()) \
                        or (not include_pruned and record.status == "pruned"):
                    continue
                matching = [r for key, r in sorted(self._results[record.genome_id].items())
                            if (task is None or key[0] == task) and (split is None or key[1] == split)]
                if not matching and (task is not None or split is not None):
                    continue
                best = max(matching, key=lambda r: r.score, default=None)
                rows.append((seq, record.genome_id, best.score if best else None, best.dollars if best else None))
        order = {
            "score": lambda row: (row[2] is None, -(row[2] or 0.0), row[3] or 0.0, row[0]),
            "cost": lambda row: (row[3] is None, row[3] or 0.0, -(row[2] or 0.0), row[0]),
            "generation": lambda row: (-self._records[row[1]].generation, -row[0]),
            "created": lambda row: -row[0],
        }[sort]
        rows.sort(key=order)
        chosen = rows if limit is None else rows[:max(0, int(limit))]
        return [self._record(gid) for _, gid, _, _ in chosen]

    def lineage(self, id_or_prefix: str, depth: int | None = None) -> Lineage:
        """Ancestors and descendants (all, or up to ``depth`` generations away), oldest first."""
        gid = self.resolve(id_or_prefix)
        found = []
        with self._lock:
            for step in (lambda g: self._records[g].parents, lambda g: self._children.get(g, [])):
                seen: dict[str, None] = {}
                frontier, distance = [gid], 0
                while frontier and (depth is None or distance < depth):
                    frontier = list(dict.fromkeys(n for g in frontier for n in step(g) if n not in seen and n != gid))
                    seen.update(dict.fromkeys(frontier))
                    distance += 1
                records = [self._record(g) for g in seen]
                records.sort(key=lambda r: (r.generation, r.created_at))
                found.append(records)
        return Lineage(found[0], found[1])
