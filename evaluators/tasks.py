"""Tasks: what a candidate system is scored on — examples in fixed splits plus a metric.

A `Task` has a name, the input fields a system consumes (built-in tasks: just `"question"`, the
full prompt text including any instruction), the output field that is scored (`"answer"`), a
metric, and three fixed splits `train` / `validation` / `test`. Build one with

* `get_task(name)` for a built-in benchmark (see `list_tasks()`, or `masforge tasks` for each one's split
  sizes); `rg:<family>` names any reasoning-gym family (procedural, seeded, any size:
  `get_task("rg:leg_counting", size=300)`);
* `Task.from_jsonl(path, input=..., target=..., metric=...)` for your own data;
* `Task.from_callable(fn)` for any Python objective over a system's outputs.

Each built-in benchmark is one module of `masforge.evaluators.benchmarks` declaring its spec: where its files
are published (`masforge.evaluators.datasets` downloads and caches them), its loader, prompt template, metric
(`masforge.evaluators.metrics.METRICS`), split plan and the split sizes `masforge tasks` shows. The `Task` type
lives in `masforge.evaluators.task` and the registry in `masforge.evaluators.registry`; importing this module
registers the built-ins.

Splits are fixed and seeded: each data source is shuffled once with
`random.Random(f"{task_name}:{seed}")` (string seeds hash the same on every machine) and cut in a
fixed order. The official test set stays `test` where one exists; otherwise `train` and
`validation` are carved from the evaluation set and the rest is `test` (each benchmark's module says how).

A task says what a system's answers are worth, not what a search maximises: the fitness (quality
minus weighted cost) belongs to the search (`masforge.search.fitness`).
"""

from __future__ import annotations

from masforge.evaluators import benchmarks  # noqa: F401  (registers the built-in benchmarks)
from masforge.evaluators.example import Example
from masforge.evaluators.registry import describe_tasks, get_task, list_tasks, register_task
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
    "register_task",
    "get_task",
    "list_tasks",
    "describe_tasks",
]
