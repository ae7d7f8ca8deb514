"""Acceptance: when a candidate becomes the search's incumbent (the policy the engine gives the search).

The incumbent is the best system so far by a paired comparison over the whole selection set: it changes only when
a candidate scored on the whole set beats it there. A race or cascade that stopped a candidate early leaves a score
over a few examples, which is never compared with one over all of them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from masforge.evaluators.stats import paired_difference
from masforge.search.population import Candidate


@dataclass(frozen=True)
class Win:
    """How a candidate beat the incumbent: ``diff`` in mean fitness (95% interval ``low`` to ``high``) over ``n``
    paired examples (all 0 for the first incumbent, which beats nothing)."""

    diff: float = 0.0
    low: float = 0.0
    high: float = 0.0
    n: int = 0


class Acceptance(Protocol):
    """Decides whether ``candidate`` replaces ``incumbent`` (None: there is none yet)."""

    def accepts(self, candidate: Candidate, incumbent: Candidate | None) -> Win | None:
        """The win that makes ``candidate`` the incumbent, or None: the incumbent stays."""


class PairedWin:
    """A candidate scored on the whole set replaces the incumbent when its mean per-example fitness over the examples
    both have is higher; a tie that costs fewer tokens replaces it too (that is how an agent that adds nothing is
    pruned: its ablation ties and is cheaper)."""

    def accepts(self, candidate: Candidate, incumbent: Candidate | None) -> Win | None:
        if candidate.pruned:
            return None
        if incumbent is None:
            return Win()
        common = sorted(set(candidate.example_values) & set(incumbent.example_values))
        if common:
            diff, low, high = paired_difference([candidate.example_values[k] for k in common],
                                                [incumbent.example_values[k] for k in common])
        else:  # results stored before per-example scores were kept: their means are all there is
            diff, low, high = candidate.fitness - incumbent.fitness, 0.0, 0.0
        if diff > 0 or (diff == 0 and common and candidate.tokens < incumbent.tokens):
            return Win(diff, low, high, len(common))
        return None
