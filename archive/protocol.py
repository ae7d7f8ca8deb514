"""The search -> archive seam: what a search needs from an archive, as a Protocol both the git archive
(:class:`masforge.archive.store.Archive`) and :class:`masforge.archive.memory.MemoryArchive` satisfy."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

from masforge.archive.claims import Claim, StopFn, WaitFn
from masforge.archive.records import ResultRecord
from masforge.genome.schema import Genome


@runtime_checkable
class ArchiveLike(Protocol):
    """Store a candidate and its results, and find a stored result so nothing is paid twice."""

    def add(self, genome: Genome, parents: Sequence[str] = (), strategy: str = "seed", operator: str = "seed",
            rationale: str = "", generation: int = 0, run: str = "") -> Any:
        """Store a candidate with its lineage and provenance (idempotent by genome id)."""

    def add_result(self, genome_id: str, result: ResultRecord) -> Any:
        """Store one evaluation result of a stored candidate."""

    def get_result(self, genome_id: str, task: str, split: str, lm_key: str) -> ResultRecord | None:
        """The result for exactly this candidate, task, split and LM configuration, or None."""


@runtime_checkable
class ResumableArchive(ArchiveLike, Protocol):
    """An archive a stopped run resumes from: it also lists a run's candidates and gives their genomes."""

    def list(self, task: str | None = None, split: str | None = None, strategy: str | None = None,
             kind: str | None = None, run: str | None = None, sort: str = "score", limit: int | None = None,
             include_pruned: bool = False) -> list[Any]:
        """Stored candidate records matching the filters."""

    def genome(self, id_or_prefix: str) -> Genome:
        """The genome stored under an id (or unique id prefix)."""


@runtime_checkable
class ClaimingArchive(ArchiveLike, Protocol):
    """An archive several searches may share: evaluation keys are claimed before they are paid for."""

    def claim(self, genome_id: str, task: str, split: str, lm_key: str, *, run: str = "",
              stop: StopFn | None = None, on_wait: WaitFn | None = None) -> Claim | None:
        """Hold (genome, task, split, LM) while evaluating it, waiting while another process holds it; None if
        ``stop()`` gives a reason to give up first."""
