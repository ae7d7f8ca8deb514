"""Where evaluation work runs: :class:`LocalExecutor` (threads of this process, the default) or
:class:`RayExecutor` (worker processes of a Ray cluster, with the run's budget and answer cache shared by
every worker). :func:`make_executor` picks one by name."""

from __future__ import annotations

from typing import Any

from masforge.errors import ConfigError
from masforge.evaluators.executors.base import EvalJob, ExampleBatch, Executor
from masforge.evaluators.executors.local import LocalExecutor

EXECUTORS = ("local", "ray")

__all__ = ["EXECUTORS", "EvalJob", "ExampleBatch", "Executor", "LocalExecutor", "make_executor"]


def make_executor(name: str = "local", *, address: str | None = None, workers: int | None = None,
                  **options: Any) -> Executor:
    """The executor called ``name``: ``local``, or ``ray`` connected to the cluster at ``address`` (``auto``: the
    cluster started on this machine with ``ray start``; ``HOST:PORT``: a head node; None: a new local cluster)
    with ``workers`` evaluation worker processes (None: one per CPU of the cluster)."""
    if name == "local":
        return LocalExecutor()
    if name == "ray":
        from masforge.evaluators.executors.ray_cluster import RayExecutor

        return RayExecutor(address=address, workers=workers, **options)
    raise ConfigError(f"unknown executor '{name}' (executors: {', '.join(EXECUTORS)})")
