"""Confidence intervals for mean scores (percentile bootstrap, as ADAS reports them)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def bootstrap_ci(values: Sequence[float], *, confidence: float = 0.95, resamples: int = 2000,
                 seed: int = 0) -> tuple[float, float]:
    """Percentile bootstrap interval of the mean; ``(v, v)`` for fewer than two values."""
    arr = np.asarray(values, dtype=float)
    if arr.size == 0:
        return 0.0, 0.0
    if arr.size == 1 or np.all(arr == arr[0]):
        return float(arr[0]), float(arr[0])
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, arr.size, size=(resamples, arr.size))
    means = arr[idx].mean(axis=1)
    alpha = (1.0 - confidence) / 2.0
    return float(np.quantile(means, alpha)), float(np.quantile(means, 1.0 - alpha))


def paired_difference(b: Sequence[float], a: Sequence[float], *, confidence: float = 0.95, resamples: int = 5000,
                      seed: int = 0) -> tuple[float, float, float]:
    """Mean of ``b - a`` over paired values (the same examples, in the same order) with its percentile bootstrap
    interval: pairing removes the examples' own difficulty from the comparison, so it is far tighter than two
    separate intervals."""
    if len(a) != len(b):
        raise ValueError(f"paired scores need equal lengths, got {len(b)} and {len(a)}")
    diffs = np.asarray(b, dtype=float) - np.asarray(a, dtype=float)
    if diffs.size == 0:
        return 0.0, 0.0, 0.0
    lo, hi = bootstrap_ci(diffs.tolist(), confidence=confidence, resamples=resamples, seed=seed)
    return float(diffs.mean()), lo, hi
