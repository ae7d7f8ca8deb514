"""DROP reading comprehension with discrete reasoning, the simple-evals dev set (`drop/drop_v0_dev.jsonl.gz`,
9536 questions): the gold answers are `ref_text` split on `|`. Train and validation are carved from the dev set."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from masforge.errors import DataError
from masforge.evaluators.benchmark import Benchmark, Cut, Record, Records, benchmark
from masforge.evaluators.data_files import iter_jsonl, require
from masforge.evaluators.datasets import Download, Files, Source


@benchmark
class Drop(Benchmark):
    name = "drop"
    description = "DROP reading comprehension with discrete reasoning; DROP F1"
    sizes = "1000 / 200 / 8336"
    metric = "drop_f1"
    template = ("{passage}\n\nAnswer the question from the passage. Give only the answer: a number, a date or the "
                "exact words from the passage, as briefly as possible.")
    plan = (Cut("validation", "dev", 200), Cut("train", "dev", 1000), Cut("test", "dev", None))
    download = Download((
        Source("drop/drop_v0_dev.jsonl.gz", "https://openaipublic.blob.core.windows.net/simple-evals/drop_v0_dev.jsonl.gz"),
    ))

    def load(self, files: Files) -> Records:
        """{"dev": 9536} records in the published set; target = the list of gold answers."""
        return {"dev": files.parsed(_read, "drop/drop_v0_dev.jsonl.gz")}

    def prompt_fields(self, fields: Mapping[str, Any]) -> Mapping[str, Any]:
        # simple-evals' context is "Passage: ...\nQuestion: ...\nAnswer:"; the template asks for the answer itself.
        return {**fields, "passage": fields["context"].rstrip().removesuffix("Answer:").rstrip()}


def _read(path: Path) -> list[Record]:
    records = []
    for i, (lineno, obj) in enumerate(iter_jsonl(path)):
        where = f"{path}:{lineno}"
        context = require(obj, "context", where)
        golds = [g.strip() for g in require(obj, "ref_text", where).split("|") if g.strip()]
        if not golds:
            raise DataError(f"{where}: field 'ref_text' holds no gold answer")
        records.append(Record(f"drop/dev/{i}", {"context": context}, golds, {"completion": obj.get("completion")}))
    return records
