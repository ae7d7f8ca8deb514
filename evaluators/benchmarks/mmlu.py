"""MMLU multiple choice, the official test set of the original release (Hendrycks et al.; 14042 questions in 57
subjects), kept as `mmlu/test/<subject>_test.csv` with the header `question,choice0..choice3,answer` (0-3).
`mmlu` is every subject (sorted by subject), `mmlu:<subject>` one of them."""

from __future__ import annotations

import csv
import io
import tarfile
import tempfile
from collections.abc import Mapping, Sequence
from functools import partial
from pathlib import Path
from typing import Any

from masforge.errors import DataError
from masforge.evaluators.benchmark import Benchmark, Cut, Family, Record, Records, benchmark
from masforge.evaluators.datasets import Download, Files, Source, download_file, hint

COLUMNS = ("question", "choice0", "choice1", "choice2", "choice3", "answer")


def _unpack(source: Source, root: Path, dataset: str) -> None:
    """Download the original MMLU tarball and write `mmlu/test/<subject>_test.csv` with a header (question,
    choice0..choice3, answer as 0-3), the layout the loader reads."""
    with tempfile.TemporaryDirectory() as tmp:
        tar_path = Path(tmp) / "data.tar"
        download_file(source.url, tar_path, dataset, source.rel, sha256=source.sha256, timeout_s=600.0)
        out_dir = root / "mmlu" / "test"
        out_dir.mkdir(parents=True, exist_ok=True)
        with tarfile.open(tar_path) as tar:
            for member in tar.getmembers():
                name = Path(member.name)
                if name.parent.name != "test" or not name.name.endswith("_test.csv"):
                    continue
                raw = tar.extractfile(member)
                if raw is None:
                    continue
                rows = csv.reader(io.TextIOWrapper(raw, encoding="utf-8"))
                with open(out_dir / name.name, "w", newline="", encoding="utf-8") as fh:
                    writer = csv.writer(fh)
                    writer.writerow(COLUMNS)
                    for row in rows:
                        if len(row) == 6 and row[5].strip() in "ABCD":
                            writer.writerow([*row[:5], "ABCD".index(row[5].strip())])


@benchmark
class MMLU(Benchmark):
    name = "mmlu"
    description = "MMLU multiple choice, all 57 subjects; letter A-D"
    sizes = "1000 / 200 / 12842"
    metric = "mc"
    template = ("The following is a multiple choice question about {subject}.\n\n{question}\n\n{choices}\n\n"
                "Answer with the letter of the correct option (A, B, C or D).")
    plan = (Cut("validation", "test", 200), Cut("train", "test", 1000), Cut("test", "test", None))
    family = Family(placeholder="subject", kind="MMLU subjects", description="MMLU, one subject (e.g. mmlu:anatomy)",
                    describe="MMLU multiple choice, subject {part}", sizes="20% / 20% / the rest",
                    plan=(Cut("validation", "test", 0.2), Cut("train", "test", 0.2), Cut("test", "test", None)))
    # The original release; `_unpack` converts its headerless CSVs.
    download = Download((Source("mmlu/test", "https://people.eecs.berkeley.edu/~hendrycks/data.tar"),), _unpack)

    def parts(self, files: Files) -> Sequence[str]:
        """The subjects present in `mmlu/test/` (57 in the full set)."""
        folder = files("mmlu/test")
        subjects = sorted(p.name.removesuffix("_test.csv") for p in folder.glob("*_test.csv"))
        if not subjects:
            raise DataError(f"no <subject>_test.csv files in {folder}: {hint('mmlu/test/<subject>_test.csv')}")
        return subjects

    def load(self, files: Files, subject: str | None) -> Records:
        """{"test": 14042} records for all subjects in the published set, or one subject's; target = the gold
        letter A-D."""
        subjects = [subject] if subject else self.parts(files)
        return {"test": [record for name in subjects
                         for record in files.parsed(partial(_read, subject=name), f"mmlu/test/{name}_test.csv")]}

    def prompt_fields(self, fields: Mapping[str, Any]) -> Mapping[str, Any]:
        choices = "\n".join(f"{'ABCD'[i]}. {c}" for i, c in enumerate(fields["choices"]))
        return {**fields, "choices": choices, "subject": str(fields.get("subject", "")).replace("_", " ")}


def _read(path: Path, subject: str) -> list[Record]:
    records = []
    with open(path, encoding="utf-8", newline="") as fh:
        reader = csv.reader(fh)
        header = next(reader, None)
        if tuple(header or ()) != COLUMNS:
            raise DataError(f"{path}:1: header should be {','.join(COLUMNS)}, got {header}")
        for row in reader:
            if not row:
                continue
            where = f"{path}:{reader.line_num}"
            if len(row) != len(COLUMNS):
                raise DataError(f"{where}: expected 6 columns ({','.join(COLUMNS)}), got {len(row)}")
            question, *choices, answer = row
            if answer.strip() not in ("0", "1", "2", "3"):
                raise DataError(f"{where}: answer {answer!r} should be 0, 1, 2 or 3")
            fields = {"question": question, "choices": choices, "subject": subject}
            gold = "ABCD"[int(answer)]
            records.append(Record(f"mmlu/{subject}/{len(records)}", fields, gold, {"subject": subject}))
    return records
