"""reasoning-gym tasks (`rg:<family>`): procedural, seeded datasets of any size, generated on demand and scored by
the family's own `score_answer` (so no loader, template or split plan: the factory builds the task itself)."""

from __future__ import annotations

import zlib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from masforge.errors import DataError, TaskError
from masforge.evaluators.answer_reading import answer_readings
from masforge.evaluators.example import Example
from masforge.evaluators.registry import task_factory
from masforge.evaluators.score import Score
from masforge.evaluators.task import SplitSource, Task


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


def reasoning_gym_families() -> list[tuple[str, str, str]]:
    """Every family ``rg:<family>`` accepts: (family, its reasoning-gym category, the generator's own first line of
    description, or "" where it has none)."""
    try:
        from reasoning_gym.factory import DATASETS
    except ImportError as exc:
        raise DataError("rg: tasks need the reasoning-gym package: pip install reasoning-gym") from exc
    out = []
    for family, (dataset, _config) in sorted(DATASETS.items()):
        category = dataset.__module__.split(".")[1] if dataset.__module__.count(".") else ""
        own = (dataset.__dict__.get("__doc__") or "").strip()  # not the base class's text
        out.append((family, category, own.splitlines()[0] if own else ""))
    return out


@task_factory("rg:<family>", "any reasoning-gym family, e.g. rg:leg_counting (options: size, config; "
              "`masforge tasks rg` lists them)",
              "300 / 100 / 100 (60% / 20% / 20% of size, default 500)")
def reasoning_gym_task(
    *,
    subset: str | None = None,
    data_dir: str | Path | None = None,
    seed: int = 0,
    size: int = 500,
    config: Mapping[str, Any] | None = None,
) -> Task:
    """The reasoning-gym family ``subset`` as a task of ``size`` items (60% train, 20% validation, 20% test) from
    one dataset seeded by the task name and ``seed``; ``config`` goes to the family's generator."""
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
