"""The score of one output on one example, and the shape of a metric function that gives it."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from masforge.evaluators.example import Example


@dataclass(frozen=True)
class Score:
    """The score of one system output on one example.

    `value` is in [0, 1]; `details` says why, e.g. `{"pred": "42", "gold": "42"}` or, for code,
    `{"error": "AssertionError", "error_kind": "exception", "traceback": "..."}`.
    """

    value: float
    details: dict[str, Any] = field(default_factory=dict)


MetricFn = Callable[[Example, dict[str, Any]], "float | Score"]
