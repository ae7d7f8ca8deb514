"""What running a system returns (config and code genomes alike): the answer with its trace, or an error."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from masforge.errors import MasforgeError
from masforge.lm.trace import Trace


class SystemRunError(MasforgeError):
    """A system could not produce an answer (every candidate failed); the trace says why."""


@dataclass
class SystemResult:
    """A system's answer to one input, with the trace of how it got there."""

    outputs: dict[str, Any]
    trace: Trace
    candidates: list[dict[str, Any]] = field(default_factory=list)
