"""MBPP Python programming problems, the sanitized set (`mbpp/sanitized-mbpp.json`) or else the full set
(`mbpp/mbpp.jsonl`), split by the official task-id ranges. The gold target is the reference code; a system's code
is run against the problem's asserts in the sandbox."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from masforge.errors import DataError
from masforge.evaluators.benchmark import Benchmark, Cut, Record, Records, benchmark
from masforge.evaluators.data_files import iter_jsonl, require
from masforge.evaluators.datasets import Download, Files, Source

_REPO = "https://raw.githubusercontent.com/google-research/google-research/master/mbpp/"


@benchmark
class MBPP(Benchmark):
    name = "mbpp"
    description = "MBPP Python programming; code run against the asserts in the sandbox"
    sizes = "127 / 43 / 257"
    metric = "code"
    template = ("{prompt}\nYour code should pass this test:\n{example_test}\n\n"
                "Write the complete Python function in a ```python code block.")
    plan = (Cut("train", "train", None), Cut("validation", "validation", None), Cut("test", "test", None))
    download = Download((
        Source("mbpp/sanitized-mbpp.json", _REPO + "sanitized-mbpp.json"),
        Source("mbpp/mbpp.jsonl", _REPO + "mbpp.jsonl"),
    ))

    def load(self, files: Files) -> Records:
        """{"train": ids 1-10 and 601+, "validation": 511-600, "test": 11-510}; meta["test"] = test imports +
        setup + asserts."""
        return files.parsed(_read, "mbpp/sanitized-mbpp.json", "mbpp/mbpp.jsonl")


def _split(task_id: int) -> str:
    # google-research/mbpp README: 11-510 test, 511-600 validation, 601-1000 train, 1-10 few-shot.
    if 11 <= task_id <= 510:
        return "test"
    if 511 <= task_id <= 600:
        return "validation"
    return "train"


def _record(obj: dict[str, Any], where: str, prompt_key: str, imports: list[str]) -> Record:
    task_id = require(obj, "task_id", where, int)
    prompt = require(obj, prompt_key, where)
    code = require(obj, "code", where)
    tests = require(obj, "test_list", where, list)
    if not tests or not all(isinstance(t, str) for t in tests):
        raise DataError(f"{where}: field 'test_list' should be a non-empty list of assert strings")
    setup = obj.get("test_setup_code") or ""
    test_code = "\n".join([*imports, setup, *tests]).strip() + "\n"
    fields = {"prompt": prompt, "example_test": tests[0]}
    return Record(f"mbpp/{task_id}", fields, code, {"test": test_code, "task_id": task_id})


def _read(path: Path) -> dict[str, list[Record]]:
    out: dict[str, list[Record]] = {"train": [], "validation": [], "test": []}
    if path.suffix == ".json":
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except ValueError as exc:
            line = getattr(exc, "lineno", "?")
            raise DataError(f"{path}:{line}: invalid JSON ({exc}); re-download the file") from exc
        except RecursionError:
            raise DataError(f"{path}: nested too deeply to be an MBPP file; re-download the file") from None
        if not isinstance(data, list):
            raise DataError(f"{path}:1: expected a JSON list of problems")
        for i, obj in enumerate(data):
            where = f"{path}: record {i}"
            if not isinstance(obj, dict):
                raise DataError(f"{where}: expected an object")
            imports = require(obj, "test_imports", where, list)
            rec = _record(obj, where, "prompt", [str(x) for x in imports])
            out[_split(rec.meta["task_id"])].append(rec)
    else:
        for lineno, obj in iter_jsonl(path):
            rec = _record(obj, f"{path}:{lineno}", "text", [])
            out[_split(rec.meta["task_id"])].append(rec)
    return out
