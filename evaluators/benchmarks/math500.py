"""MATH-500 competition math (`math500/test.jsonl`, the 500-problem test split of PRM800K): the gold answer is the
`answer` field (LaTeX). Train and validation are carved from the 500."""

from __future__ import annotations

from pathlib import Path

from masforge.evaluators.benchmark import Benchmark, Cut, Record, Records, benchmark
from masforge.evaluators.data_files import iter_jsonl, require
from masforge.evaluators.datasets import Download, Files, Source


@benchmark
class Math500(Benchmark):
    name = "math500"
    description = "MATH-500 competition math; LaTeX answer in \\boxed{}"
    sizes = "100 / 100 / 300"
    metric = "math"
    template = "{problem}\n\nSolve the problem step by step and put the final answer in \\boxed{{}}."
    plan = (Cut("validation", "test", 100), Cut("train", "test", 100), Cut("test", "test", None))
    # prm800k keeps the file in Git LFS; media.githubusercontent.com serves the LFS object (sha256 = its LFS oid).
    download = Download((
        Source("math500/test.jsonl",
               "https://media.githubusercontent.com/media/openai/prm800k/7ecc794703b2877f63226f2477a49b34f9b25163/"
               "prm800k/math_splits/test.jsonl",
               "35dc41080a3680858b27fa7e0533d2d547825316fc5dafe5d316f4ccc5a06132"),
    ))

    def load(self, files: Files) -> Records:
        """{"test": 500} records in the published set."""
        return {"test": files.parsed(_read, "math500/test.jsonl")}


def _read(path: Path) -> list[Record]:
    records = []
    for i, (lineno, obj) in enumerate(iter_jsonl(path)):
        where = f"{path}:{lineno}"
        problem = require(obj, "problem", where)
        answer = require(obj, "answer", where)
        uid = str(obj.get("unique_id") or f"test/{i}").removesuffix(".json")
        meta = {k: obj[k] for k in ("subject", "level", "solution") if k in obj}
        records.append(Record(f"math500/{uid}", {"problem": problem}, answer, meta))
    return records
