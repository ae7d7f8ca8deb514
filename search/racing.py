"""Racing: the race a new candidate runs against the search's incumbent (the policy the engine gives the search;
the paired test itself is :mod:`masforge.evaluators.racing`)."""

from __future__ import annotations

from typing import Protocol

from masforge.evaluators.racing import Race, RaceSettings
from masforge.search.fitness import Fitness
from masforge.search.population import Candidate


class Racing(Protocol):
    """Decides how a new candidate is scored against the incumbent."""

    def race(self, incumbent: Candidate | None, fitness: Fitness) -> Race | None:
        """The race against ``incumbent`` on per-example ``fitness`` (None: score the candidate on the whole set)."""


class RaceTheIncumbent:
    """Race every new candidate against the incumbent's per-example fitness with ``settings``; no race while there
    is no incumbent with per-example results yet (as for the first seed)."""

    def __init__(self, settings: RaceSettings) -> None:
        self.settings = settings

    def race(self, incumbent: Candidate | None, fitness: Fitness) -> Race | None:
        if incumbent is None or not incumbent.example_values:
            return None
        return self.settings.against(incumbent.example_values, incumbent.genome.name,
                                     value=lambda ex: fitness(ex.score, ex.dollars))
