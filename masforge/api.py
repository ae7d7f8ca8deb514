"""The programmatic API: ``masforge.optimize(task, strategy=..., budget=..., lm=...)``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from masforge.errors import ConfigError
from masforge.search.budget import budget_data
from masforge.search.config import DEFAULT_LIMIT


def optimize(
    task: Any,
    *,
    strategy: str | list[str] = "evolve",
    budget: dict[str, Any] | int | None = None,
    lm: str | dict[str, Any] | None = None,
    meta_lm: str | dict[str, Any] | None = None,
    seeds: list[str] | None = None,
    references: list[str] | None = None,
    limit: int | None = DEFAULT_LIMIT,
    test_limit: int | str | None = "auto",
    concurrency: int = 4,
    output: str | Path = "runs",
    seed: int = 0,
    progress: bool = False,
    strategy_options: dict[str, dict[str, Any]] | None = None,
    **options: Any,
) -> Any:
    """Search for a better multi-agent system for ``task`` and return a :class:`SearchResult`.

    ``task`` is a built-in task name (``"gsm8k"``, ``"rg:leg_counting"``, ...) or a
    :class:`masforge.evaluators.tasks.Task` (e.g. ``Task.from_callable(fn)``). ``budget`` is a dict of
    limits by field (those of :data:`masforge.search.budget.BUDGET_LIMITS`: ``max_dollars``, ``max_tokens``,
    ``max_calls``, ``max_seconds``, ``max_candidates``, ``patience``) — or an int meaning ``max_candidates``.
    ``lm`` is a litellm model string, ``"local"`` (default) or ``"fake"``.
    ``test_limit`` is the held-out examples per finalist (``"auto"``: three times ``limit``, at most 50).
    ``references`` names systems the best new system is compared with on the held-out split at the end (seed names,
    genome files, or ``"library"``: every shipped seed that runs on the task, raced on the selection set first);
    the result's ``.references`` holds each paired difference with its 95% CI.
    Further keyword ``options`` are :class:`masforge.search.config.RunConfig` fields (``cost_weight``,
    ``test_top_k``, ...).

    The result has ``.best`` (the best system overall, a seed when nothing better was found), ``.best_new`` (the
    best system the search made), ``.verdict`` (the best new system against the best seed on held-out data, never
    None), ``.front``, ``.top(k)``, ``.test_scores``, ``.spend``, ``.run_dir`` and ``.open_archive()``.
    """
    from masforge.evaluators.tasks import Task
    from masforge.search.config import DEFAULT_SEEDS, RunConfig
    from masforge.search.engine import run_search

    task_obj = task if isinstance(task, Task) else None
    data = {
        "task": task_obj.name if task_obj else str(task), "strategy": strategy, "lm": lm, "meta_lm": meta_lm,
        "seeds": seeds if seeds is not None else list(DEFAULT_SEEDS), "references": references or [],
        "limit": limit, "test_limit": test_limit,
        "concurrency": concurrency, "output": str(output), "seed": seed,
        "strategy_options": strategy_options or {}, **options,
    }
    if budget is not None:
        data["budget"] = budget_data(budget)
    if not isinstance(task, Task | str):
        raise ConfigError(f"task must be a task name or a Task, got {type(task).__name__}")
    cfg = RunConfig.from_data(data, "optimize()")
    return run_search(cfg, task=task_obj, progress=progress)


def resume(run_dir: str | Path, *, budget: dict[str, Any] | int | None = None, concurrency: int | None = None,
           progress: bool = False) -> Any:
    """Continue a stopped run from its folder (no seed added twice, no evaluation repeated); ``budget`` (as in
    :func:`optimize`) and ``concurrency`` replace the saved ones, e.g. to let a finished run go further."""
    from masforge.search.config import RunConfig
    from masforge.search.engine import run_search

    overrides: dict[str, Any] = {}
    if budget is not None:
        overrides["budget"] = budget_data(budget)
    if concurrency is not None:
        overrides["concurrency"] = concurrency
    cfg = None
    if overrides:
        saved = Path(run_dir) / "config.yaml"
        if not saved.is_file():
            raise ConfigError(f"{run_dir}: not a masforge run folder (no config.yaml); give the folder that "
                              "`masforge search` printed")
        cfg = RunConfig.from_data({"task": RunConfig.load(saved).task, **overrides}, "resume()")
    return run_search(cfg, resume=run_dir, progress=progress)
