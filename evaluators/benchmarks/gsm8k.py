"""GSM8K grade-school math word problems (`gsm8k/{train,test}.jsonl`): the gold answer is the number after `####`
in the worked solution. Train and validation come from the official train set; the official test set is `test`."""

from __future__ import annotations

import re
from functools import partial
from pathlib import Path

from masforge.errors import DataError
from masforge.evaluators.benchmark import Benchmark, Cut, Record, Records, benchmark
from masforge.evaluators.data_files import iter_jsonl, require
from masforge.evaluators.datasets import Download, Files, Source

_COMMIT = ("https://raw.githubusercontent.com/openai/grade-school-math/3101c7d5072418e28b9008a6636bde82a006892c/"
           "grade_school_math/data/")

TEMPLATE = ("{question}\n\nSolve the problem step by step. End with the final answer as a number on the last line, "
            'written as "Answer: <number>".')


@benchmark
class GSM8K(Benchmark):
    name = "gsm8k"
    description = "GSM8K grade-school math word problems; numeric answer"
    sizes = "7273 / 200 / 1319"
    metric = "numeric"
    template = TEMPLATE
    plan = (Cut("validation", "train", 200), Cut("train", "train", None), Cut("test", "test", None))
    download = Download((
        Source("gsm8k/train.jsonl", _COMMIT + "train.jsonl",
               "17f347dc51477c50d4efb83959dbb7c56297aba886e5544ee2aaed3024813465"),
        Source("gsm8k/test.jsonl", _COMMIT + "test.jsonl",
               "3730d312f6e3440559ace48831e51066acaca737f6eabec99bccb9e4b3c39d14"),
    ))

    def load(self, files: Files) -> Records:
        """{"train": 7473, "test": 1319} records in the published set; target = the number after `####`."""
        return {split: files.parsed(partial(_read, split=split), f"gsm8k/{split}.jsonl") for split in ("train", "test")}


def _read(path: Path, split: str) -> list[Record]:
    records = []
    for i, (lineno, obj) in enumerate(iter_jsonl(path)):
        where = f"{path}:{lineno}"
        question = require(obj, "question", where)
        solution = require(obj, "answer", where)
        if "####" not in solution:
            raise DataError(f"{where}: field 'answer' has no '#### <number>' final answer")
        gold = solution.rsplit("####", 1)[1].strip().replace(",", "")
        if not re.fullmatch(r"-?\d+(\.\d+)?", gold):
            raise DataError(f"{where}: final answer {gold!r} after '####' is not a number")
        records.append(Record(f"gsm8k/{split}/{i}", {"question": question}, gold, {"solution": solution}))
    return records
