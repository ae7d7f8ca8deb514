"""Numeric descriptors of a genome: for novelty, MAP-Elites cells, diversity and the surrogate model."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from masforge.genome.graph import cyclic_agents, lm_calls_per_example
from masforge.genome.schema import MODULE_KINDS, Genome

FEATURE_NAMES = (
    "code", "agents", "edges", "copies", "rounds", "cyclic", "tools", "temperature", "instruction_chars",
    "vote", "judge", "run_examples", *[f"module_{m}" for m in MODULE_KINDS],
)


def genome_features(genome: Genome) -> list[float]:
    """A fixed-length vector (see :data:`FEATURE_NAMES`)."""
    if genome.kind == "code":
        code = genome.code or ""
        calls = float(code.count("llm("))
        return [1.0, calls, 0.0, calls, 1.0, 0.0, float(code.count("tool(")), 0.7, float(len(code)),
                0.0, 0.0, 0.0, *[0.0] * len(MODULE_KINDS)]
    cyclic = bool(cyclic_agents(genome))
    temps = [a.temperature if a.temperature is not None else 0.7 for a in genome.agents] or [0.7]
    modules = [sum(1.0 for a in genome.agents if a.module == m) for m in MODULE_KINDS]
    return [
        0.0, float(len(genome.agents)), float(len(set(genome.topology.edges))),
        float(sum(a.copies for a in genome.agents)), float(genome.topology.rounds if cyclic else 1),
        1.0 if cyclic else 0.0, float(sum(len(a.tools) for a in genome.agents)), sum(temps) / len(temps),
        float(sum(len(a.instructions) for a in genome.agents)),
        1.0 if genome.topology.aggregation == "majority_vote" else 0.0,
        1.0 if genome.topology.aggregation == "judge" else 0.0,
        1.0 if genome.topology.aggregation == "run_examples" else 0.0, *modules,
    ]


def feature_matrix(genomes: Sequence[Genome]) -> np.ndarray:
    """One :func:`genome_features` row per genome."""
    return np.asarray([genome_features(g) for g in genomes], dtype=float).reshape(len(genomes), -1)


def scaled_features(genomes: Sequence[Genome]) -> np.ndarray:
    """Feature rows as z-scores per column (a column that does not vary is all zero), so distances weigh
    every feature alike: how novelty, diversity and the meta-agent's archive choice measure difference."""
    rows = feature_matrix(genomes)
    if not len(rows):
        return rows
    scale = rows.std(axis=0)
    scale[scale == 0] = 1.0
    return (rows - rows.mean(axis=0)) / scale


def llm_calls_estimate(genome: Genome) -> float:
    """Rough LM calls per example, a cost descriptor for MAP-Elites cells (:func:`lm_calls_per_example`)."""
    return lm_calls_per_example(genome)
