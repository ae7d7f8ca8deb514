"""An archive kept in memory: the calls a search makes on :class:`masforge.archive.store.Archive`, without
git or SQLite (for tests, and for searches whose candidates need not outlive the process)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from masforge.archive.claims import Claim, MemoryClaims, StopFn, WaitFn
from masforge.archive.records import ResultRecord
from masforge.genome.schema import Genome


class MemoryArchive:
    """Candidates, their metadata and results in dicts; idempotent by genome id like the git archive."""

    def __init__(self) -> None:
        self.genomes: dict[str, Genome] = {}
        self.meta: dict[str, dict[str, Any]] = {}
        self.results: dict[tuple[str, str, str, str], ResultRecord] = {}
        self._claims = MemoryClaims()

    def add(self, genome: Genome, parents: Sequence[str] = (), **meta: Any) -> dict[str, Any]:
        if genome.id not in self.genomes:
            self.genomes[genome.id] = genome
            self.meta[genome.id] = {"parents": list(parents), **meta}
        return self.meta[genome.id]

    def add_result(self, genome_id: str, result: ResultRecord) -> None:
        self.results[(genome_id, result.task, result.split, result.lm_key)] = result

    def get_result(self, genome_id: str, task: str, split: str, lm_key: str) -> ResultRecord | None:
        return self.results.get((genome_id, task, split, lm_key))

    def claim(self, genome_id: str, task: str, split: str, lm_key: str, *, run: str = "",
              stop: StopFn | None = None, on_wait: WaitFn | None = None) -> Claim | None:
        """Claim an evaluation key (searches in this process sharing this archive wait for each other)."""
        return self._claims.claim((genome_id, task, split, lm_key), run, stop=stop, on_wait=on_wait)
