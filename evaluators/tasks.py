"""Tasks: what a candidate system is scored on — examples in fixed splits plus a metric.

A `Task` has a name, the input fields a system consumes (built-in tasks: just `"question"`, the
full prompt text including any instruction), the output field that is scored (`"answer"`), a
metric, and three fixed splits `train` / `validation` / `test`. Build one with

* `get_task(name)` for a built-in benchmark (see `list_tasks()`); `rg:<family>` names any
  reasoning-gym family (procedural, seeded, any size: `get_task("rg:leg_counting", size=300)`);
* `Task.from_jsonl(path, input=..., target=..., metric=...)` for your own data;
* `Task.from_callable(fn)` for any Python objective over a system's outputs.

Each built-in task is a loader (`masforge.evaluators.datasets`), a metric name
(`masforge.evaluators.metrics.METRICS`) and a prompt template (`TEMPLATES`); nothing else.
The `Task` type lives in `masforge.evaluators.task`, the built-in benchmarks in
`masforge.evaluators.builtin_tasks`, the reasoning-gym families in
`masforge.evaluators.reasoning_gym_tasks`; this module registers them and finds a task by name.

Splits are fixed and seeded: each data source is shuffled once with
`random.Random(f"{task_name}:{seed}")` (string seeds hash the same on every machine) and cut in a
fixed order. The official test set stays `test` where one exists; otherwise `train` and
`validation` are carved from the evaluation set and the rest is `test`. Sizes for `seed=0`:

| task | train | validation | test | how | metric |
|---|---:|---:|---:|---|---|
| gsm8k | 7273 | 200 | 1319 | train/validation from the official train; official test | numeric |
| math500 | 100 | 100 | 300 | carved from the 500 | math |
| drop | 1000 | 200 | 8336 | carved from the simple-evals dev set (9536) | drop_f1 |
| hotpotqa | 50 | 50 | 100 | carved from the 200-question validate subset | f1 |
| mgsm | 500 | 250 | 2000 | carved from all 11 languages (2750) | numeric |
| mgsm:<lang> | 50 | 50 | 150 | carved from one language (250) | numeric |
| mmlu | 1000 | 200 | 12842 | carved from the official test (14042) | mc |
| mmlu:<subject> | 20% | 20% | rest | carved from one subject (floor of 20%) | mc |
| mbpp | 127 | 43 | 257 | official task-id ranges of the sanitized set | code |
| humaneval | 32 | 32 | 100 | carved from the 164 | code |
| arc | 311 | 105 | 419 | training set cut by task (300/100 tasks); official evaluation set | grid |
| rg:<family> | 60% | 20% | 20% | generated, `size` (default 500) items | reasoning-gym `score_answer` |

(ARC has one example per test input; a task's test inputs stay in the same split.)

A task says what a system's answers are worth, not what a search maximises: the fitness (quality
minus weighted cost) belongs to the search (`masforge.search.fitness`).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from masforge.errors import TaskError
from masforge.evaluators.builtin_tasks import BUILTIN_TASKS, TEMPLATES
from masforge.evaluators.example import Example
from masforge.evaluators.reasoning_gym_tasks import reasoning_gym_task
from masforge.evaluators.score import MetricFn, Score
from masforge.evaluators.splits import SPLITS, split_parts
from masforge.evaluators.task import Task

__all__ = [
    "Example",
    "Score",
    "MetricFn",
    "Task",
    "SPLITS",
    "split_parts",
    "TEMPLATES",
    "register_task",
    "get_task",
    "list_tasks",
    "describe_tasks",
]


@dataclass(frozen=True)
class _Entry:
    factory: Callable[..., Task]
    description: str
    splits: str = ""
    """The split sizes in words (train / validation / test), as the module docstring's table gives them."""


_REGISTRY: dict[str, _Entry] = {}


def register_task(name: str, factory: Callable[..., Task], description: str, splits: str = "") -> None:
    """Register a task factory under `name`.

    `factory(data_dir=..., seed=..., **options) -> Task` (it may omit `data_dir`/`seed` if it does
    not use them). A name ending in `:<...>` (e.g. `"mgsm:<lang>"`) registers a family: then
    `get_task("mgsm:de")` calls `factory(subset="de", ...)`. Registering a name again replaces it.
    `splits` says the split sizes for `masforge tasks` (e.g. "32 / 32 / 100"), without loading any data.
    """
    if not name or not callable(factory):
        raise TaskError("register_task needs a name and a factory function")
    _REGISTRY[name] = _Entry(factory, description, splits)


def list_tasks() -> list[tuple[str, str]]:
    """(name, description) of every registered task and task family."""
    return [(name, entry.description) for name, entry in _REGISTRY.items()]


def describe_tasks() -> list[tuple[str, str, str]]:
    """(name, description, split sizes as train / validation / test) of every registered task and family."""
    return [(name, entry.description, entry.splits or "-") for name, entry in _REGISTRY.items()]


def _call(
    factory: Callable[..., Task], framework: dict[str, Any], options: dict[str, Any], name: str
) -> Task:
    try:
        params = inspect.signature(factory).parameters
        open_kwargs = any(p.kind == p.VAR_KEYWORD for p in params.values())
    except (TypeError, ValueError):
        params, open_kwargs = {}, True
    kwargs = {k: v for k, v in framework.items() if open_kwargs or k in params}
    unknown = [k for k in options if not open_kwargs and k not in params]
    if unknown:
        allowed = [k for k in params if k not in ("data_dir", "seed", "subset")]
        raise TaskError(
            f"task {name} takes no option {unknown[0]!r}; options: {', '.join(allowed) or 'none'}"
        )
    return factory(**kwargs, **options)


def get_task(name: str, *, data_dir: str | Path | None = None, seed: int = 0, **options: Any) -> Task:
    """The task called `name` (see `list_tasks()`); `options` go to its factory
    (e.g. `get_task("rg:leg_counting", size=200)`, `get_task("arc", version="arc1")`). A name ending in
    `.jsonl` is a file of `question`/`answer` lines scored by exact match (`Task.from_jsonl` for others)."""
    if name.endswith(".jsonl"):
        known = ("input", "target", "metric", "val_fraction", "test_fraction", "name", "description")
        unknown = [k for k in options if k not in known]
        if unknown:
            raise TaskError(f"task {name} takes no option {unknown[0]!r}; options: {', '.join(known)}")
        settings: dict[str, Any] = {"input": "question", "target": "answer", "metric": "exact_match", **options}
        return Task.from_jsonl(name, seed=seed, **settings)
    framework: dict[str, Any] = {"data_dir": data_dir, "seed": seed}
    entry = _REGISTRY.get(name)
    if entry is not None and not name.endswith(">"):
        return _call(entry.factory, framework, options, name)
    if ":" in name:
        prefix, subset = name.split(":", 1)
        for key, fam in _REGISTRY.items():
            if key.startswith(prefix + ":<") and key.endswith(">"):
                return _call(fam.factory, {**framework, "subset": subset}, options, name)
    known = ", ".join(n for n, _ in list_tasks())
    raise TaskError(
        f"unknown task {name!r}; known tasks: {known} "
        "(or a .jsonl file of question/answer lines; see `masforge tasks`)"
    )


for _builtin in BUILTIN_TASKS:  # name, factory, description, split sizes
    register_task(*_builtin)
register_task(
    "rg:<family>", reasoning_gym_task, "any reasoning-gym family, e.g. rg:leg_counting (options: size, config; "
    "`masforge tasks rg` lists them)",
    "300 / 100 / 100 (60% / 20% / 20% of size, default 500)"
)
