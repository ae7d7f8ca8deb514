"""HotpotQA multi-hop questions over 10 given paragraphs (the distractor setting): the 200-question "validate"
subset of the dev set used by AFlow and MASArena (`hotpotqa/hotpotqa_validate.jsonl`). Train and validation are
carved from the 200."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from masforge.errors import DataError
from masforge.evaluators.benchmark import Benchmark, Cut, Record, Records, benchmark
from masforge.evaluators.data_files import iter_jsonl, require
from masforge.evaluators.datasets import Download, Files, Source


@benchmark
class HotpotQA(Benchmark):
    name = "hotpotqa"
    description = "HotpotQA multi-hop QA over 10 given paragraphs; token F1"
    sizes = "50 / 50 / 100"
    metric = "f1"
    template = ("Answer the question using the paragraphs below.\n\n{paragraphs}\n\nQuestion: {question}\n"
                "Give only the answer, a short phrase of a few words.")
    plan = (Cut("validation", "validate", 50), Cut("train", "validate", 50), Cut("test", "validate", None))
    download = Download((
        Source("hotpotqa/hotpotqa_validate.jsonl",
               "https://raw.githubusercontent.com/fuzi233/MASArena/2a6f29d73c785b3a16e697f9be94b000c6934ec1/data/"
               "hotpotqa_validate.jsonl",
               "a2fcafe6cb44c705b48e404ab4e9a2726874cfdecffed5ddfef06e46b6c78639"),
    ))

    def load(self, files: Files) -> Records:
        """{"validate": 200} records in the published set; fields question and its 10 (title, text) paragraphs;
        target = the answer string."""
        return {"validate": files.parsed(_read, "hotpotqa/hotpotqa_validate.jsonl")}

    def prompt_fields(self, fields: Mapping[str, Any]) -> Mapping[str, Any]:
        paragraphs = "\n\n".join(f"[{i}] {title}\n{text}" for i, (title, text) in enumerate(fields["paragraphs"],
                                                                                              start=1))
        return {**fields, "paragraphs": paragraphs}


def _read(path: Path) -> list[Record]:
    records = []
    for i, (lineno, obj) in enumerate(iter_jsonl(path)):
        where = f"{path}:{lineno}"
        question = require(obj, "question", where)
        answer = require(obj, "answer", where)
        paragraphs = []
        for item in require(obj, "context", where, list):
            if not (isinstance(item, list) and len(item) == 2 and isinstance(item[1], list)):
                raise DataError(f"{where}: each 'context' item should be [title, [sentences]]")
            paragraphs.append((str(item[0]), "".join(str(s) for s in item[1]).strip()))
        meta = {k: obj[k] for k in ("type", "level", "supporting_facts") if k in obj}
        uid = obj.get("_id") or str(i)
        records.append(Record(f"hotpotqa/{uid}", {"question": question, "paragraphs": paragraphs}, answer, meta))
    return records
