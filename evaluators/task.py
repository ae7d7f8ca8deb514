"""The `Task` type: examples in fixed train/validation/test splits plus a metric, and the two ways to make one from
your own data (`Task.from_jsonl` for a file, `Task.from_callable` for a Python objective). The built-in tasks and
the registry that finds them by name are in `masforge.evaluators.tasks`."""

from __future__ import annotations

import copy
import inspect
import json
import math
import random
import threading
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from masforge.errors import DataError, MasforgeError, TaskError
from masforge.evaluators.data_files import iter_jsonl
from masforge.evaluators.example import Example
from masforge.evaluators.metrics import METRICS
from masforge.evaluators.score import MetricFn, Score
from masforge.evaluators.splits import SPLITS, split_parts

# --------------------------------------------------------------------------------------------
# Split sources
# --------------------------------------------------------------------------------------------


class SplitSource(ABC):
    """Where a task's examples come from; loaded on first use."""

    @abstractmethod
    def get(self, split: str, limit: int | None) -> list[Example]:
        """The first ``limit`` examples of ``split``."""

    @abstractmethod
    def sizes(self) -> dict[str, int]:
        """Number of examples per split."""


class _StaticSplits(SplitSource):
    def __init__(self, load: Callable[[], Mapping[str, Sequence[Example]]]) -> None:
        self._load = load
        self._splits: dict[str, list[Example]] | None = None
        self._lock = threading.Lock()

    def _all(self) -> dict[str, list[Example]]:
        with self._lock:
            if self._splits is None:
                loaded = self._load()
                self._splits = {s: list(loaded.get(s, ())) for s in SPLITS}
            return self._splits

    def get(self, split: str, limit: int | None) -> list[Example]:
        examples = self._all()[split]
        return list(examples if limit is None else examples[:limit])

    def sizes(self) -> dict[str, int]:
        return {s: len(v) for s, v in self._all().items()}


class _NoSplits(SplitSource):
    """No examples (a task that only scores answers, e.g. on a remote worker)."""

    def get(self, split: str, limit: int | None) -> list[Example]:
        return []

    def sizes(self) -> dict[str, int]:
        return {s: 0 for s in SPLITS}


# --------------------------------------------------------------------------------------------
# Task
# --------------------------------------------------------------------------------------------


def _resolve_metric(metric: str | MetricFn) -> tuple[MetricFn, str]:
    if isinstance(metric, str):
        if metric not in METRICS:
            raise TaskError(f"unknown metric {metric!r}; known: {', '.join(METRICS)} (or pass a function)")
        return METRICS[metric], metric
    if callable(metric):
        return metric, getattr(metric, "__name__", type(metric).__name__)
    raise TaskError(
        f"metric should be a name ({', '.join(METRICS)}) or a function, got {type(metric).__name__}"
    )


class Task:
    """Examples in fixed train/validation/test splits plus a metric over a system's outputs."""

    def __init__(
        self,
        name: str,
        splits: Mapping[str, Sequence[Example]] | Callable[[], Mapping[str, Sequence[Example]]] | SplitSource,
        metric: str | MetricFn,
        *,
        description: str = "",
        input_fields: Sequence[str] = ("question",),
        output_field: str = "answer",
        metric_name: str | None = None,
    ) -> None:
        self.name = name
        self.description = description
        self.split_note = ""
        """How the examples were split, when the user should know (a file of their own data)."""
        self.input_fields = tuple(input_fields)
        self.output_field = output_field
        self.metric, default_name = _resolve_metric(metric)
        self.metric_name = metric_name or default_name
        if isinstance(splits, SplitSource):
            self._source: SplitSource = splits
        elif isinstance(splits, Mapping):
            unknown = set(splits) - set(SPLITS)
            if unknown:
                raise TaskError(f"task {name}: unknown split(s) {sorted(unknown)}; use {', '.join(SPLITS)}")
            fixed = dict(splits)
            self._source = _StaticSplits(lambda: fixed)
        elif callable(splits):
            self._source = _StaticSplits(splits)
        else:
            raise TaskError(f"task {name}: splits should be a mapping or a loader function")

    def __repr__(self) -> str:
        return f"Task({self.name!r}, metric={self.metric_name!r})"

    def split(self, name: str, *, limit: int | None = None) -> list[Example]:
        """The examples of split `name` ("train", "validation" or "test"), the first `limit` of them.

        A union of splits is written with ``+`` (``"validation+train"``: validation's examples, then train's); an
        example id that comes again (a task whose splits share examples) is kept once."""
        parts = split_parts(name, self.name)
        if limit is not None and (not isinstance(limit, int) or limit < 0):
            raise TaskError(f"limit should be a non-negative integer, got {limit!r}")
        if len(parts) == 1:
            return self._source.get(parts[0], limit)
        out: dict[str, Example] = {}
        for part in parts:
            if limit is not None and len(out) >= limit:
                break
            for ex in self._source.get(part, limit):  # `limit` from each part is enough, repeats included
                out.setdefault(ex.id, ex)
        examples = list(out.values())
        return examples if limit is None else examples[:limit]

    def sizes(self) -> dict[str, int]:
        """Number of examples per split."""
        return self._source.sizes()

    def without_examples(self) -> Task:
        """This task's metric and fields without its data: what a worker that scores answers needs (small
        to send, and free of the loaders' locks and files)."""
        bare = copy.copy(self)
        bare._source = _NoSplits()
        return bare

    def score(self, example: Example, outputs: Mapping[str, Any] | Any) -> Score:
        """Score a system's outputs on one example. Never raises on garbage output: anything the
        metric cannot use scores `Score(0.0, {"error": ...})`. (Infrastructure failures such as a
        broken sandbox, which are `MasforgeError`s, do propagate.)"""
        if not isinstance(outputs, Mapping):
            outputs = {self.output_field: outputs}
        view = dict(outputs)
        if self.output_field != "answer":
            view["answer"] = outputs.get(self.output_field)
        try:
            result = self.metric(example, view)
            if isinstance(result, Score):
                value, details = float(result.value), dict(result.details)
            else:
                value, details = float(result), {}
        except MasforgeError:
            raise
        except Exception as exc:  # a metric choking on garbage output scores 0, with the reason
            return Score(0.0, {"error": f"metric {self.metric_name} failed: {type(exc).__name__}: {exc}"})
        if math.isnan(value):
            return Score(0.0, {**details, "error": "metric returned NaN"})
        if not 0.0 <= value <= 1.0:
            details["raw"] = value
            value = min(1.0, max(0.0, value))
        return Score(value, details)

    # ----------------------------------------------------------------------------------------

    @classmethod
    def from_jsonl(
        cls,
        path: str | Path,
        *,
        input: str | Mapping[str, str] = "question",
        target: str = "answer",
        metric: str | MetricFn = "exact_match",
        name: str | None = None,
        seed: int = 0,
        val_fraction: float = 0.2,
        test_fraction: float = 0.2,
        description: str | None = None,
    ) -> Task:
        """A task from a JSON Lines file, one example per line.

        `input` names the field holding the question (`"question"` by default), or maps input
        names to fields (`{"question": "q", "context": "ctx"}`); `target` names the gold field;
        `metric` is a `METRICS` name ("exact_match", "f1", "numeric", "math", "mc", "contains",
        "drop_f1", "code", "grid") or a function `(example, outputs) -> float | Score`. The file
        is read now (errors name file and line) and split with `Random(f"{name}:{seed}")`:
        `val_fraction` to validation, `test_fraction` to test (at least one each when there are
        3+ lines), the rest to train.
        """
        path = Path(path)
        task_name = name or path.stem
        mapping = {"question": input} if isinstance(input, str) else dict(input)
        if not mapping:
            raise TaskError("input should name at least one field")
        if not (0 <= val_fraction < 1 and 0 <= test_fraction < 1 and val_fraction + test_fraction < 1):
            raise TaskError("val_fraction and test_fraction should be in [0, 1) and sum to less than 1")
        examples = []
        for lineno, obj in iter_jsonl(path, strict=True):
            where = f"{path}:{lineno}"
            inputs = {}
            for field_name, key in mapping.items():
                if key not in obj:
                    raise DataError(f"{where}: missing field {key!r} (input {field_name!r})")
                inputs[field_name] = _as_input(obj[key])
            if target not in obj:
                raise DataError(f"{where}: missing target field {target!r}")
            meta = {k: v for k, v in obj.items() if k not in mapping.values() and k != target}
            meta["line"] = lineno
            ex_id = (
                f"{task_name}/{obj['id']}"
                if isinstance(obj.get("id"), str | int)
                else f"{task_name}/{lineno}"
            )
            examples.append(Example(ex_id, inputs, obj[target], meta))
        if not examples:
            raise DataError(f"{path}: no examples (the file is empty)")
        rng = random.Random(f"{task_name}:{seed}")
        order = list(examples)
        rng.shuffle(order)
        n = len(order)
        n_val = round(n * val_fraction)
        n_test = round(n * test_fraction)
        if n >= 3:
            n_val = max(n_val, 1 if val_fraction > 0 else 0)
            n_test = max(n_test, 1 if test_fraction > 0 else 0)
        splits = {
            "validation": order[:n_val],
            "test": order[n_val : n_val + n_test],
            "train": order[n_val + n_test :],
        }
        task = cls(
            task_name,
            splits,
            metric,
            description=description or f"examples from {path.name}",
            input_fields=tuple(mapping),
        )
        task.split_note = (
            f"{path.name}: {n} lines, shuffled (seed {seed}) and split into {n - n_val - n_test} train / {n_val} "
            f"validation / {n_test} test (val_fraction {val_fraction:g}, test_fraction {test_fraction:g}; "
            "--task-option val_fraction=0.4 changes it, --split train searches on the train lines)"
        )
        return task

    @classmethod
    def from_callable(
        cls,
        fn: Callable[..., float],
        *,
        examples: Sequence[Mapping[str, Any]] | None = None,
        name: str | None = None,
        input_fields: Sequence[str] = ("question",),
        description: str | None = None,
    ) -> Task:
        """A task whose metric is any Python objective: `fn(outputs)` or `fn(outputs, example)`.

        `examples` are mappings holding the input fields (or an `"inputs"` mapping), optionally a
        `"target"` (or `"answer"`) and an `"id"`; other keys go to `meta`. With no examples the task
        is one example with empty inputs (a pure objective over what the system produces). Every
        split holds all the examples (an objective has no held-out data). Scores outside [0, 1]
        are clipped, the raw value kept in the details.
        """
        fields = tuple(input_fields)
        task_name = name or (
            fn.__name__ if getattr(fn, "__name__", "<lambda>") != "<lambda>" else "objective"
        )
        built: list[Example] = []
        for i, item in enumerate(examples or ()):
            if not isinstance(item, Mapping):
                raise TaskError(
                    f"task {task_name}: example {i} should be a mapping, got {type(item).__name__}"
                )
            raw = item["inputs"] if isinstance(item.get("inputs"), Mapping) else item
            missing = [f for f in fields if f not in raw]
            if missing:
                raise TaskError(f"task {task_name}: example {i} lacks input field(s) {missing}")
            inputs = {f: _as_input(raw[f]) for f in fields}
            gold = item.get("target", item.get("answer"))
            used = {*fields, "inputs", "target", "answer", "id"}
            meta = {k: v for k, v in item.items() if k not in used}
            built.append(Example(str(item.get("id", f"{task_name}/{i}")), inputs, gold, meta))
        if not built:
            built = [Example(f"{task_name}/0", {f: "" for f in fields}, None)]
        wants_example = _takes_two_args(fn)

        def metric(example: Example, outputs: dict[str, Any]) -> float | Score:
            return fn(outputs, example) if wants_example else fn(outputs)

        metric.__name__ = getattr(fn, "__name__", "objective")
        splits = {s: list(built) for s in SPLITS}
        return cls(
            task_name,
            splits,
            metric,
            description=description or (inspect.getdoc(fn) or "a Python objective function").splitlines()[0],
            input_fields=fields,
        )


def _as_input(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, list | dict):
        return json.dumps(value, ensure_ascii=False)
    return str(value)


def _takes_two_args(fn: Callable[..., Any]) -> bool:
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return False
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    return any(p.kind == p.VAR_POSITIONAL for p in params) or len(positional) >= 2
