"""Resume by replay: a resumed run walks the stopped run's path again.

The same seed and strategies propose the same genomes, whose results come back from the archive and whose
meta-agent answers come back from the LM cache, so the strategies' state (RNG, populations, studies) is rebuilt
exactly and the run goes on as if never stopped. Every admitted candidate is logged in ``events.jsonl`` with its
position and a fingerprint of the RNG (:class:`~masforge.search.events.LoggedCandidate`); a resume reads that log
back (:func:`read_log`) and :class:`Replay` checks each candidate against it, so a replay that takes another path
(a non-deterministic LM, changed options) is detected and said.
"""

from __future__ import annotations

import hashlib
import json
import random
from collections.abc import Iterable
from pathlib import Path

from masforge.search.events import Admitted, Diverged, LoggedCandidate


def rng_fingerprint(rng: random.Random) -> str:
    """A short digest of an RNG's state (equal states, equal digests)."""
    return hashlib.sha256(repr(rng.getstate()).encode()).hexdigest()[:12]


def read_log(path: Path) -> list[LoggedCandidate]:
    """The admitted candidates a run's ``events.jsonl`` holds, in the order written (none: no log yet)."""
    logged: list[LoggedCandidate] = []
    if not path.is_file():
        return logged
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            row = json.loads(line)
            if isinstance(row, dict) and row.get("event") == Admitted.kind:
                logged.append(LoggedCandidate.from_row(row, len(logged)))
        except (ValueError, TypeError):
            continue  # a line cut by a kill
    return logged


class Replay:
    """The stopped run's candidates a resume walks again, and where (if anywhere) the walk left their path."""

    def __init__(self, log: Iterable[LoggedCandidate] = ()) -> None:
        self.expected = sorted(log, key=lambda c: c.seq)
        """The candidate log of the stopped run, by position."""
        self.diverged: int | None = None
        """Position at which the replay took another path than the stopped run, if it did."""

    def replaying(self, admitted: int) -> bool:
        """Whether, with ``admitted`` candidates in the population, the run still re-walks the stopped run's."""
        return admitted < len(self.expected) and self.diverged is None

    def admit(self, seq: int, candidate_id: str, rng: str) -> tuple[bool, Diverged | None]:
        """Check the candidate admitted at position ``seq`` (RNG fingerprint ``rng``) against the stopped run's:
        whether it is one the stopped run had admitted there, and the divergence found here (None: none)."""
        if not self.replaying(seq):
            return False, None
        want = self.expected[seq]
        if want.id == candidate_id and want.rng in (None, rng):
            return True, None
        self.diverged = seq
        return False, Diverged(seq=seq, expected=want.id[:12], got=candidate_id[:12])
