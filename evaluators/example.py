"""One input to a system with its gold answer: what tasks produce and metrics score."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Example:
    """One input to a system with its gold answer.

    `inputs` is what the system consumes (built-in tasks always give `"question"`, the complete
    prompt text); `target` is the gold answer(s); `meta` holds what a metric needs besides, e.g.
    `{"test": ..., "entry_point": ...}` for code tasks.
    """

    id: str
    inputs: dict[str, str]
    target: Any
    meta: dict[str, Any] = field(default_factory=dict)
