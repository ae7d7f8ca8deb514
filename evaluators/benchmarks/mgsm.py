"""MGSM: GSM8K problems translated into 10 languages, plus English (`mgsm/mgsm_<lang>.tsv`, 250 per language; a
TSV without header: question, numeric answer). `mgsm` is every language together, `mgsm:<lang>` one of them."""

from __future__ import annotations

import csv
import re
from collections.abc import Sequence
from functools import partial
from pathlib import Path

from masforge.errors import DataError
from masforge.evaluators.benchmark import Benchmark, Cut, Family, Record, Records, benchmark
from masforge.evaluators.benchmarks.gsm8k import TEMPLATE
from masforge.evaluators.datasets import Download, Files, Source

LANGUAGES = ("bn", "de", "en", "es", "fr", "ja", "ru", "sw", "te", "th", "zh")


@benchmark
class MGSM(Benchmark):
    name = "mgsm"
    description = "MGSM multilingual grade-school math, all 11 languages; numeric answer"
    sizes = "500 / 250 / 2000"
    metric = "numeric"
    template = TEMPLATE
    plan = (Cut("validation", "test", 250), Cut("train", "test", 500), Cut("test", "test", None))
    family = Family(placeholder="lang", kind="MGSM languages",
                    description=f"MGSM in one language: {', '.join(LANGUAGES)}",
                    describe="MGSM grade-school math in language {part!r} (250 items)", sizes="50 / 50 / 150",
                    plan=(Cut("validation", "test", 50), Cut("train", "test", 50), Cut("test", "test", None)))
    download = Download(tuple(
        Source(f"mgsm/mgsm_{lang}.tsv", f"https://raw.githubusercontent.com/google-research/url-nlp/main/mgsm/"
                                        f"mgsm_{lang}.tsv")
        for lang in LANGUAGES
    ))

    def parts(self, files: Files) -> Sequence[str]:
        return LANGUAGES

    def load(self, files: Files, lang: str | None) -> Records:
        """{"test": 250} records of one language, or of every language in turn; target = the numeric answer."""
        languages = LANGUAGES if lang is None else (lang,)
        return {"test": [record for one in languages
                         for record in files.parsed(partial(_read, lang=one), f"mgsm/mgsm_{one}.tsv")]}


def _read(path: Path, lang: str) -> list[Record]:
    records = []
    try:
        with open(path, encoding="utf-8", newline="") as fh:
            reader = csv.reader(fh, delimiter="\t", quoting=csv.QUOTE_NONE)
            for row in reader:
                if not row:
                    continue
                where = f"{path}:{reader.line_num}"
                if len(row) != 2:
                    raise DataError(f"{where}: expected 2 tab-separated columns (question, answer), got {len(row)}")
                question, answer = row[0], row[1].strip()
                if not re.fullmatch(r"-?[\d,]+(\.\d+)?", answer):
                    raise DataError(f"{where}: answer column {answer!r} is not a number")
                gold = answer.replace(",", "")
                records.append(Record(f"mgsm/{lang}/{len(records)}", {"question": question}, gold, {"lang": lang}))
    except UnicodeDecodeError as exc:
        raise DataError(f"{path}: not UTF-8 ({exc}); re-download the file") from exc
    return records
