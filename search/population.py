"""The candidates a search has seen, and the ways it picks among them: Pareto front (quality vs cost),
MAP-Elites cells for quality-diversity, tournaments, and novelty against what exists."""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from masforge.genome.schema import Genome
from masforge.search.features import genome_features, llm_calls_estimate


@dataclass
class Candidate:
    """A genome with its validation result in this search."""

    genome: Genome
    score: float
    """Task quality on the search split (0..1)."""
    fitness: float
    """What selection maximises: the task objective (quality minus weighted cost)."""
    dollars: float = 0.0
    """Dollars per example."""
    tokens: float = 0.0
    """Tokens per example."""
    latency_s: float = 0.0
    ci: tuple[float, float] = (0.0, 0.0)
    failures: dict[str, int] = field(default_factory=dict)
    parents: list[str] = field(default_factory=list)
    operator: str = "seed"
    strategy: str = "seed"
    rationale: str = ""
    generation: int = 0
    pruned: bool = False
    failure_notes: list[dict[str, Any]] = field(default_factory=list)
    """A few failed examples (input, expected, got, error, trace summary) for feedback-driven operators."""

    @property
    def id(self) -> str:
        return self.genome.id

    @property
    def short_id(self) -> str:
        return self.genome.id[:12]

    def feedback(self, limit: int = 3) -> str:
        """Failures as text for a meta-agent prompt."""
        if not self.failure_notes:
            return "No recorded failures."
        parts = []
        for note in self.failure_notes[:limit]:
            parts.append(
                f"- input: {str(note.get('input', ''))[:300]}\n  expected: {str(note.get('expected', ''))[:120]}\n"
                f"  got: {str(note.get('got', ''))[:200]}\n  error: {note.get('error') or '-'}"
            )
        return "\n".join(parts)


def pareto_front(cands: list[Candidate]) -> list[Candidate]:
    """Candidates no other beats on both quality (higher) and dollars per example (lower), by cost."""
    front: list[Candidate] = []
    for c in sorted(cands, key=lambda x: (x.dollars, -x.score)):
        if not front or c.score > front[-1].score:
            front.append(c)
    return front


def tournament(cands: list[Candidate], rng: random.Random, k: int = 3) -> Candidate:
    """The fittest of ``k`` random candidates."""
    pool = rng.sample(cands, min(k, len(cands)))
    return max(pool, key=lambda c: (c.fitness, -c.dollars))


def map_elites(cands: list[Candidate], bins: int = 4) -> dict[tuple[int, int], Candidate]:
    """MAP-Elites archive: the best candidate per cell of (agent count, estimated LM calls per example)."""
    cells: dict[tuple[int, int], Candidate] = {}
    for c in cands:
        agents = len(c.genome.agents) if c.genome.kind == "config" else 1
        calls = llm_calls_estimate(c.genome)
        cell = (min(agents, bins) - 1 if agents else 0, min(int(math.log2(max(calls, 1.0))), bins - 1))
        if cell not in cells or c.fitness > cells[cell].fitness:
            cells[cell] = c
    return cells


def feature_matrix(genomes: list[Genome]) -> np.ndarray:
    """Standardisable feature rows for novelty and the surrogate."""
    return np.asarray([genome_features(g) for g in genomes], dtype=float)


def novelty(genome: Genome, others: list[Genome], k: int = 3) -> float:
    """Mean distance to the ``k`` nearest existing genomes in scaled feature space (0: a near-duplicate)."""
    if not others:
        return float("inf")
    from sklearn.neighbors import NearestNeighbors
    from sklearn.preprocessing import StandardScaler

    rows = feature_matrix([*others, genome])
    scaled = StandardScaler().fit_transform(rows)
    nn = NearestNeighbors(n_neighbors=min(k, len(others))).fit(scaled[:-1])
    dist, _ = nn.kneighbors(scaled[-1:])
    return float(dist.mean())


def is_near_duplicate(genome: Genome, others: list[Genome], threshold: float = 1e-6) -> bool:
    """Same structure and numbers as an existing genome (only wording differs)."""
    if not others:
        return False
    mine = genome_features(genome)
    text = " ".join(a.instructions.lower() for a in genome.agents)
    for g in others:
        if genome_features(g) == mine and " ".join(a.instructions.lower() for a in g.agents) == text:
            return True
    return False if threshold <= 1e-6 else novelty(genome, others, k=1) < threshold
