"""Incomplete evaluations: owed another try, and an outage when they come in a row.

An evaluation whose examples are too often unscored (the provider or the sandbox failed, see
:mod:`masforge.evaluators.runner`) is *incomplete*: the genome is stored without a result, so nothing ever reuses it
as a score, and it is evaluated again later (after the next complete evaluation: the provider works again; or at
the end of the run). Several incomplete candidates in a row are an outage: the search stops and says so.
"""

from __future__ import annotations

from collections.abc import Callable

from masforge.evaluators.runner import EvalReport
from masforge.lm.budget import Stop
from masforge.search.population import Candidate
from masforge.search.proposal import Proposal

OUTAGE_AFTER = 3
"""Incomplete candidates in a row that mean the provider (or the sandbox) is down: the search stops."""
RETRIES_INCOMPLETE = 2
"""Times an incomplete candidate is evaluated again within a run (after that it waits for a resume)."""


class Retries:
    """The run's incomplete evaluations: what is owed another try, what was given up, and the outage count."""

    def __init__(self, outage_after: int = OUTAGE_AFTER) -> None:
        self.outage_after = outage_after
        self.owed: list[tuple[Proposal, str]] = []
        """Proposals (with their strategy) whose evaluation was incomplete, owed another evaluation."""
        self.given_up: list[str] = []
        """Genomes evaluated incompletely more than :data:`RETRIES_INCOMPLETE` times again (left for a resume)."""
        self.unscored_examples = 0
        self.seen = 0
        """Evaluations that came out incomplete (a candidate evaluated again counts again)."""
        self.errors: list[str] = []
        """The infrastructure error of each evaluation that left examples unscored."""
        self._tries: dict[str, int] = {}
        self._streak = 0
        self._retrying = False

    def complete(self, report: EvalReport) -> None:
        """A complete evaluation: the streak of incomplete ones is broken; its unscored examples (if any) count."""
        self._streak = 0
        self.unscored_examples += report.unscored
        if report.unscored:
            self.errors.append(report.outage)

    def incomplete(self, proposal: Proposal, strategy: str, report: EvalReport) -> Stop | None:
        """An incomplete evaluation of ``proposal``: owed another try (at most :data:`RETRIES_INCOMPLETE` in a run);
        returns the outage stop when it is the ``outage_after``-th in a row."""
        gid = proposal.genome.id
        tries = self._tries[gid] = self._tries.get(gid, 0) + 1
        if tries <= RETRIES_INCOMPLETE and all(q.genome.id != gid for q, _ in self.owed):
            self.owed.append((proposal, strategy))
        if tries > RETRIES_INCOMPLETE:
            self.given_up = sorted({*self.given_up, gid})
        self.unscored_examples += report.unscored
        self.errors.append(report.outage)
        self.seen += 1
        self._streak += 1
        if self._streak < self.outage_after:
            return None
        return Stop("outage", "--lm", (
            f"provider outage: {self._streak} candidates in a row had more than {report.max_unscored:.0%} of their "
            f"examples unscored ({report.outage[:200]}); none was stored as a score; continue with --resume when "
            "the provider is back"))

    def retry(self, submit: Callable[[Proposal, str], Candidate | None], should_stop: Callable[[], bool]) -> int:
        """Evaluate once more (with ``submit``) what is owed, until ``should_stop()``; returns how many now have a
        score. A retry that completes does not start another round of retries."""
        if self._retrying or not self.owed:
            return 0
        self._retrying = True
        done = 0
        try:
            for item in list(self.owed):
                if should_stop():
                    break
                self.owed.remove(item)
                if submit(*item) is not None:
                    done += 1
        finally:
            self._retrying = False
        return done

    @property
    def unscored_candidates(self) -> list[str]:
        """Genomes left without a score in this run because their evaluations were incomplete."""
        return sorted({*(p.genome.id for p, _ in self.owed), *self.given_up})
