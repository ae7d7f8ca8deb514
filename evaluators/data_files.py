"""Reading data files with line numbers: JSON Lines (plain or gzipped) one bounded line at a time, and required
fields checked by type. Every problem is one `DataError` naming the file and line (`<file>:<line>: <problem>`)."""

from __future__ import annotations

import gzip
import io
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

from masforge.errors import DataError
from masforge.evaluators.datasets import hint
from masforge.files import not_a_file
from masforge.input_limits import check_bytes, current_limits, load_json


def open_text(path: Path) -> io.TextIOBase:
    """A UTF-8 text file, gunzipped on the fly when its name ends in ``.gz``."""
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
        raise DataError(f"missing data file {path}: {hint(path.name)}")
    lim = current_limits()
    max_line = lim.max_line_bytes
    line_limits = replace(lim, max_string=max_line)  # one example's text may be long; its nesting may not be deep
    lineno = 0
    try:
        with open_text(path) as fh:
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
