"""What a strategy asks the search to evaluate, and the shipped seed a proposal may turn out to be."""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Any

from masforge.genome.schema import Genome


@dataclass
class Proposal:
    """A genome a strategy wants evaluated, with where it came from."""

    genome: Genome
    parents: list[str] = field(default_factory=list)
    operator: str = "seed"
    rationale: str = ""
    info: dict[str, Any] = field(default_factory=dict)
    """What the proposing strategy needs back when the proposal is observed (its parent, the edit, an optuna
    trial, ...): a proposal carries its own bookkeeping. Never stored in the archive."""


@functools.cache
def _library() -> dict[str, Genome]:
    """The shipped seeds by structure id."""
    from masforge.seeds import load_seeds

    return {g.structure_id: g for g in load_seeds()}


def library_twin(genome: Genome) -> Genome | None:
    """The shipped seed ``genome`` is, up to the names of its agents (None: no seed has its design)."""
    return _library().get(genome.structure_id)


def as_library_seed(p: Proposal) -> Proposal:
    """A proposal that rebuilds a shipped seed under other agent names becomes that seed, marked as rediscovered:
    its answers are usually in the answer cache already, it can be a parent, and no report calls it new."""
    seed = library_twin(p.genome)
    if seed is None:
        return p
    genome = seed.model_copy(deep=True)
    genome.metadata = {**genome.metadata, "rediscovers": seed.name}
    return Proposal(genome, list(p.parents), p.operator, f"rediscovered {seed.name}: {p.rationale}".strip(),
                    info={**p.info, "rediscovers": seed.name})
