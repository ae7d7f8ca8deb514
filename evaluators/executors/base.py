"""The executor interface: where the examples of a candidate's evaluation run. The evaluator on the driver
decides what to run and when to stop (cascade, budget, timeouts); an executor only runs examples and hands
back futures of their results."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any, ClassVar

from masforge.evaluators.example import Example
from masforge.evaluators.one_example import ExampleResult
from masforge.evaluators.tasks import Task
from masforge.lm.client import LMClient


@dataclass
class EvalJob:
    """What the examples of one candidate's evaluation share."""

    genome: Any
    """The genome (or system factory, see :meth:`Evaluator.evaluate`)."""
    task: Task
    mapping: dict[str, str]
    """genome input field -> task input field"""
    system: Callable[..., Any]
    """The genome compiled with the driver's client (what a local executor runs)."""
    client: LMClient


class ExampleBatch(ABC):
    """Examples of one evaluation in flight on an executor."""

    @abstractmethod
    def submit(self, example: Example) -> Future[ExampleResult]:
        """Start ``example``; its future ends with the result or raises :class:`BudgetExceeded`."""

    def abandon(self, future: Future[ExampleResult]) -> None:
        """The evaluator stopped waiting for ``future`` (its example timed out)."""
        return None

    def waiting_on_provider(self, future: Future[ExampleResult]) -> bool:
        """Whether ``future``'s example is stuck on an LM provider (then its timeout is the provider's fault and
        the example is unscored); False where the executor cannot tell."""
        return False

    def provider_seconds(self, future: Future[ExampleResult]) -> float:
        """Seconds ``future``'s example has spent waiting on LM providers so far. They do not count against the
        example's timeout: every request has its own (a slow shared local server is not a hung system); 0.0
        where the executor cannot tell."""
        return 0.0

    @abstractmethod
    def close(self, *, interrupted: bool = False) -> None:
        """Release what the batch holds; ``interrupted``: do not wait for examples still running."""


class Executor(ABC):
    """Runs examples: ``local`` (threads of this process) or ``ray`` (worker processes of a Ray cluster)."""

    name: ClassVar[str] = "base"

    def attach(self, client: LMClient) -> LMClient:
        """Make ``client``'s ledger and answer cache the ones every worker of this executor uses (the driver's
        budget and cache); returns the client."""
        return client

    @abstractmethod
    def batch(self, job: EvalJob, concurrency: int) -> ExampleBatch:
        """A batch that runs up to ``concurrency`` examples of ``job`` at once."""

    def describe(self) -> dict[str, Any]:
        """What ran the evaluations, for the run's records."""
        return {"executor": self.name}

    def close(self) -> None:
        """Release workers (the executor cannot be used afterwards)."""
        return None
