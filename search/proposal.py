"""What a strategy asks the search to evaluate, and the shipped seed a proposal may turn out to be."""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from masforge.genome.hashing import structure_hash
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
def _library(auto_adapters: tuple[tuple[str, str], ...] = ()) -> dict[str, Genome]:
    """The shipped seeds by structure id (with ``auto_adapters``: as one run sees them)."""
    from masforge.seeds import load_seeds

    return {structure_hash(g, dict(auto_adapters)): g for g in load_seeds()}


def library_twin(genome: Genome, auto_adapters: Mapping[str, str] | None = None) -> Genome | None:
    """The shipped seed ``genome`` is, up to the names of its agents (None: no seed has its design). With
    ``auto_adapters`` (see :func:`masforge.genome.hashing.structure_hash`), an agent naming the adapter ``auto``
    stands for in the run matches the seed's ``auto``."""
    key = tuple(sorted((auto_adapters or {}).items()))
    return _library(key).get(structure_hash(genome, dict(key)))


def as_library_seed(p: Proposal, auto_adapters: Mapping[str, str] | None = None) -> Proposal:
    """A proposal that rebuilds a shipped seed under other agent names becomes that seed, marked as rediscovered:
    its answers are usually in the answer cache already, it can be a parent, and no report calls it new."""
    seed = library_twin(p.genome, auto_adapters)
    if seed is None:
        return p
    genome = seed.model_copy(deep=True)
    genome.metadata = {**genome.metadata, "rediscovers": seed.name}
    return Proposal(genome, list(p.parents), p.operator, f"rediscovered {seed.name}: {p.rationale}".strip(),
                    info={**p.info, "rediscovers": seed.name})
