"""The task registry: every task by name (the built-in benchmarks register themselves here, see
`masforge.evaluators.benchmarks`), and `get_task`, which finds one. `masforge.evaluators.tasks` is the public
entry: importing it registers the built-ins."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from masforge.errors import TaskError
from masforge.evaluators.task import Task

Factory = TypeVar("Factory", bound=Callable[..., Task])

FRAMEWORK_OPTIONS = ("data_dir", "seed", "subset")
"""What `get_task` itself passes a factory (when it takes them): not options a user gives."""


@dataclass(frozen=True)
class _Entry:
    factory: Callable[..., Task]
    description: str
    splits: str = ""
    """The split sizes in words (train / validation / test), as `masforge tasks` shows them."""
    options: tuple[str, ...] | None = None
    """The options the factory takes, when its signature cannot say (None: read its signature)."""


_REGISTRY: dict[str, _Entry] = {}


def register_task(name: str, factory: Callable[..., Task], description: str, splits: str = "",
                  options: Sequence[str] | None = None) -> None:
    """Register a task factory under `name`.

    `factory(data_dir=..., seed=..., **options) -> Task` (it may omit `data_dir`/`seed` if it does
    not use them). A name ending in `:<...>` (e.g. `"mgsm:<lang>"`) registers a family: then
    `get_task("mgsm:de")` calls `factory(subset="de", ...)`. Registering a name again replaces it.
    `splits` says the split sizes for `masforge tasks` (e.g. "32 / 32 / 100"), without loading any data.
    `options` names the options a factory taking ``**options`` accepts (any other is refused by name).
    """
    if not name or not callable(factory):
        raise TaskError("register_task needs a name and a factory function")
    _REGISTRY[name] = _Entry(factory, description, splits, None if options is None else tuple(options))


def task_factory(name: str, description: str, splits: str = "") -> Callable[[Factory], Factory]:
    """`register_task` as a decorator, for a benchmark whose factory builds its task itself (`rg:<family>`)."""

    def register(factory: Factory) -> Factory:
        register_task(name, factory, description, splits)
        return factory

    return register


def list_tasks() -> list[tuple[str, str]]:
    """(name, description) of every registered task and task family."""
    return [(name, entry.description) for name, entry in _REGISTRY.items()]


def describe_tasks() -> list[tuple[str, str, str]]:
    """(name, description, split sizes as train / validation / test) of every registered task and family."""
    return [(name, entry.description, entry.splits or "-") for name, entry in _REGISTRY.items()]


def _accepted(entry: _Entry) -> list[str] | None:
    """The keywords a factory takes, in order (None: any, it takes ``**options``)."""
    if entry.options is not None:
        return [*FRAMEWORK_OPTIONS, *entry.options]
    try:
        params = inspect.signature(entry.factory).parameters
    except (TypeError, ValueError):
        return None
    if any(p.kind == p.VAR_KEYWORD for p in params.values()):
        return None
    return list(params)


def _call(entry: _Entry, framework: dict[str, Any], options: dict[str, Any], name: str) -> Task:
    accepted = _accepted(entry)
    kwargs = {k: v for k, v in framework.items() if accepted is None or k in accepted}
    unknown = [k for k in options if accepted is not None and k not in accepted]
    if unknown:
        allowed = [k for k in accepted or () if k not in FRAMEWORK_OPTIONS]
        raise TaskError(
            f"task {name} takes no option {unknown[0]!r}; options: {', '.join(allowed) or 'none'}"
        )
    return entry.factory(**kwargs, **options)


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
        return _call(entry, framework, options, name)
    if ":" in name:
        prefix, subset = name.split(":", 1)
        for key, fam in _REGISTRY.items():
            if key.startswith(prefix + ":<") and key.endswith(">"):
                return _call(fam, {**framework, "subset": subset}, options, name)
    known = ", ".join(n for n, _ in list_tasks())
    raise TaskError(
        f"unknown task {name!r}; known tasks: {known} "
        "(or a .jsonl file of question/answer lines; see `masforge tasks`)"
    )
