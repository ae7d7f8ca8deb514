"""What a search maximises: a candidate's fitness, quality minus weighted cost.

Fitness belongs to the search, not to the task: a task is data and a metric, and the same task can be
searched for the best quality or for the best quality per dollar. The search context applies one
:class:`Fitness` to every candidate, whatever kind of task it was built from (a built-in name, a
``.jsonl`` file or a :class:`~masforge.evaluators.tasks.Task` object).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Fitness:
    """``quality - cost_weight * dollars``: with ``cost_weight=10`` one cent per example weighs 0.1 quality."""

    cost_weight: float = 0.0

    def __post_init__(self) -> None:
        if self.cost_weight < 0:
            raise ValueError(f"cost_weight must be >= 0, got {self.cost_weight}")

    def __call__(self, quality: float, dollars: float) -> float:
        """Fitness of a mean score in [0, 1] at ``dollars`` per example."""
        return float(quality) - float(self.cost_weight) * float(dollars)

    def describe(self, metric: str) -> str:
        """The objective in words, as the meta-agent is told it."""
        text = f"maximise the {metric} score (0 to 1)"
        return text + (f" minus {self.cost_weight:g} x dollars per example" if self.cost_weight else "")
