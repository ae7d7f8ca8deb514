"""The candidates a search has seen: the population a run admitted and its incumbent, their quality-vs-cost front
and their novelty against what exists. (Picking parents among them is :mod:`masforge.search.selection`; when a
candidate becomes the incumbent is :mod:`masforge.search.acceptance`.)"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from masforge.archive.pareto import pareto_front
from masforge.genome.hashing import structure_hash
from masforge.genome.schema import Genome
from masforge.search.features import genome_features, scaled_features


@dataclass
class Candidate:
    """A genome with its validation result in this search."""

    genome: Genome
    score: float
    """Task quality on the search split (0..1)."""
    fitness: float
    """What selection maximises: the search's fitness, quality minus weighted cost (:mod:`masforge.search.fitness`)."""
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
    example_values: dict[str, float] = field(default_factory=dict)
    """Per-example fitness by example id (score minus weighted cost): what paired comparisons and races use."""
    llm_calls: int = 0
    """LM answers its evaluation generated (paid for); 0 for a result another run stored in the archive (this run
    paid nothing), the stored count for one an earlier session of this run evaluated (this run paid it)."""
    cache_hits: int = 0
    """LM answers its evaluation read from the answer cache (answers other candidates had paid for); counted like
    ``llm_calls`` for a result from the archive."""
    reused: bool = False
    """Its result came from the archive (evaluated before, by this run or another): nothing was run."""
    n: int = 0
    """Examples its score covers."""
    rediscovers: str = ""
    """The shipped seed this candidate's design is (a search rebuilt it under other agent names), or "": such a
    candidate may be a parent, but it is not a new system."""
    wrong_reasons: dict[str, int] = field(default_factory=dict)
    """Why its wrong answers were wrong, as the metric says (code: ``exception``, ``syntax``, ``no_code``,
    ``timeout``; ``unstated`` where the metric gives no reason): what failure-guided edits address."""

    @property
    def id(self) -> str:
        """The genome's canonical hash: the same system always has the same id."""
        return self.genome.id

    @property
    def short_id(self) -> str:
        """The first 12 hex digits of :attr:`id`, as lists show it."""
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


class Population:
    """The candidates one run admitted, in order, found by genome id and by structure id, and the incumbent."""

    def __init__(self, auto_adapters: Mapping[str, str] | None = None) -> None:
        self.members: list[Candidate] = []
        self.by_id: dict[str, Candidate] = {}
        self.auto_adapters = dict(auto_adapters or {})
        """LM alias -> the adapter ``auto`` stands for in this run: an agent naming that adapter is no new design."""
        self.by_structure: dict[str, Candidate] = {}
        """Candidates by design (:meth:`design_id`): a renamed twin is a duplicate."""
        self.incumbent: Candidate | None = None
        """The best system so far by a paired comparison over the whole selection set (set by the acceptance)."""
        self.since_best = 0
        """Candidates admitted since the best fitness last improved (what ``patience`` counts)."""

    def design_id(self, genome: Genome) -> str:
        """``genome``'s id up to its agents' names and to adapters that resolve as ``auto`` does in this run."""
        return structure_hash(genome, self.auto_adapters)

    def twin(self, genome: Genome) -> Candidate | None:
        """The candidate that is ``genome``, maybe under other agent names (None: a new design)."""
        return self.by_id.get(genome.id) or self.by_structure.get(self.design_id(genome))

    def best(self, k: int = 1) -> list[Candidate]:
        """Top ``k`` by fitness (cheaper first on ties); candidates scored on the whole set come before those a race
        or cascade stopped early (a score over a few examples is not comparable), and the incumbent first."""

        def key(c: Candidate) -> tuple[bool, bool, tuple[float, ...]]:
            return (c is not self.incumbent, c.pruned, tuple(-v for v in merit(c)))

        return sorted(self.members, key=key)[:k]

    def add(self, cand: Candidate) -> bool:
        """Admit ``cand`` (after the acceptance had its say); returns whether it improved on the best so far."""
        prev = self.best(1)
        self.members.append(cand)
        self.by_id[cand.id] = cand
        self.by_structure.setdefault(self.design_id(cand.genome), cand)
        improved = not prev or cand.fitness > prev[0].fitness
        self.since_best = 0 if improved else self.since_best + 1
        return improved


def merit(c: Candidate) -> tuple[float, float, float]:
    """How candidates rank, the higher the better: fitness, then the cheaper per example in dollars, then in tokens
    (on a free local model every system costs $0: tokens still tell the cheaper of two equally good ones)."""
    return (c.fitness, -c.dollars, -c.tokens)


def front(cands: Sequence[Candidate]) -> list[Candidate]:
    """The candidates no other beats on both quality (higher) and dollars per example (lower), cheapest first."""
    return pareto_front(cands, score=lambda c: c.score, cost=lambda c: c.dollars)


def novelty(genome: Genome, others: Sequence[Genome], k: int = 3) -> float:
    """Mean distance to the ``k`` nearest existing genomes in scaled feature space (0: a near-duplicate)."""
    if not others:
        return float("inf")
    z = scaled_features([*others, genome])
    dist = np.sort(np.linalg.norm(z[:-1] - z[-1], axis=1))
    return float(dist[: min(k, len(others))].mean())


def is_near_duplicate(genome: Genome, others: Sequence[Genome], threshold: float = 1e-6) -> bool:
    """Same structure and numbers as an existing genome (only wording differs)."""
    if not others:
        return False
    mine = genome_features(genome)
    text = " ".join(a.instructions.lower() for a in genome.agents)
    for g in others:
        if genome_features(g) == mine and " ".join(a.instructions.lower() for a in g.agents) == text:
            return True
    return False if threshold <= 1e-6 else novelty(genome, others, k=1) < threshold
