"""The search -> archive seam: what a search needs from an archive, as Protocols. The git archive
(:class:`masforge.archive.store.Archive`) and :class:`masforge.archive.memory.MemoryArchive` declare every one of
them, and one contract suite runs over both (``tests/test_archive_contract.py``). The contract:

* **add**: a candidate is stored once, by genome id; adding it again returns the stored record and changes
  nothing. Its parents must be stored first (by id, unique id prefix or genome), none of them is the candidate
  itself, a parent named twice counts once, and their order is kept.
* **results**: a result is found by exactly (candidate, task, split, LM key) and comes back as it was stored;
  storing one for the same key replaces it; a result for a candidate not stored is refused.
* **lineage**: a candidate's ancestors and descendants, all or up to a depth, oldest generation first.
* **claims**: a claimed evaluation key is held until released; a second claimant waits (told once who holds it)
  or gives up when its ``stop()`` says so; other keys are free.
* **queries**: ``list`` filters and ranks candidates (best score, cheapest, newest generation, newest), ``get``
  and ``genome`` read one back by id or unique prefix; an unknown or ambiguous id is one ``ArchiveError``.
* **resume**: a run resumed with the archive it was given finds everything its earlier sessions stored, so it
  pays for nothing twice. The git archive lives in its folder: any process that opens the folder again resumes,
  after a kill too. An in-memory archive lives in its object: a run resumes from it only when handed that same
  object in the same process (after a budget stop, Ctrl-C or an error); a killed process takes it along.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from masforge.archive.claims import Claim, StopFn, WaitFn
from masforge.archive.lineage import Lineage
from masforge.archive.records import CandidateRecord, ResultRecord
from masforge.genome.schema import Genome


@runtime_checkable
class ArchiveLike(Protocol):
    """Store a candidate and its results, and find a stored result so nothing is paid twice."""

    def add(self, genome: Genome, parents: Sequence[str | Genome] = (), strategy: str = "seed",
            operator: str = "seed", rationale: str = "", generation: int = 0, run: str = "") -> CandidateRecord:
        """Store a candidate with its lineage and provenance (idempotent by genome id)."""

    def add_result(self, genome_id: str, result: ResultRecord) -> CandidateRecord:
        """Store one evaluation result of a stored candidate."""

    def get_result(self, genome_id: str, task: str, split: str, lm_key: str) -> ResultRecord | None:
        """The result for exactly this candidate, task, split and LM configuration, or None."""


@runtime_checkable
class ResumableArchive(ArchiveLike, Protocol):
    """An archive a stopped run resumes from: it also lists a run's candidates and gives their genomes."""

    def list(self, task: str | None = None, split: str | None = None, strategy: str | None = None,
             kind: str | None = None, run: str | None = None, sort: str = "score", limit: int | None = None,
             include_pruned: bool = False) -> list[CandidateRecord]:
        """Stored candidate records matching the filters."""

    def genome(self, id_or_prefix: str) -> Genome:
        """The genome stored under an id (or unique id prefix)."""


@runtime_checkable
class LineageArchive(ArchiveLike, Protocol):
    """An archive that says where a candidate came from: its record (parents, provenance, results) and its
    relatives."""

    def get(self, id_or_prefix: str) -> CandidateRecord:
        """The record of one candidate, by id or unique id prefix."""

    def lineage(self, id_or_prefix: str, depth: int | None = None) -> Lineage:
        """Ancestors and descendants (all, or up to ``depth`` generations away), oldest generation first."""


@runtime_checkable
class ClaimingArchive(ArchiveLike, Protocol):
    """An archive several searches may share: evaluation keys are claimed before they are paid for."""

    def claim(self, genome_id: str, task: str, split: str, lm_key: str, *, run: str = "",
              stop: StopFn | None = None, on_wait: WaitFn | None = None) -> Claim | None:
        """Hold (genome, task, split, LM) while evaluating it, waiting while another process holds it; None if
        ``stop()`` gives a reason to give up first."""
