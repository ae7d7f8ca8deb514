"""The quality-vs-cost Pareto front, for anything with a score and a cost: archive records, a search's
candidates, a report's rows. One definition, so the archive, the search and the report agree."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from typing import TypeVar

T = TypeVar("T")


def pareto_front(items: Iterable[T], *, score: Callable[[T], float | None], cost: Callable[[T], float],
                 eps: float = 0.0) -> list[T]:
    """The items no other beats on both score (higher) and cost (lower), cheapest first.

    An item without a score (None) is left out; on equal cost the better score comes first, and an item
    joins the front only if it beats the best score so far by more than ``eps``."""
    scored = [(x, s) for x in items if (s := score(x)) is not None and not math.isnan(s)]
    scored.sort(key=lambda pair: (cost(pair[0]), -pair[1]))
    front: list[T] = []
    best = -math.inf
    for item, s in scored:
        if s > best + eps:
            front.append(item)
            best = s
    return front
