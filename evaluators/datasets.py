"""Benchmark data files: where they are, downloading them (checked against their sha256 where the published bytes
are pinned), and parsing each file once per process.

Where data comes from, first match wins:

1. the `data_dir` argument (CLI `--data-dir`), else the environment variable `MASFORGE_DATA_DIR`
   (only that folder is used: a missing file there is an error, nothing is downloaded);
2. the cache `<MASFORGE_CACHE or ~/.cache/masforge>/data`, into which a benchmark's `Download` fetches its files
   from their public source (automatically on first use unless `MASFORGE_OFFLINE=1`). A file whose published bytes
   are pinned (a commit, not a branch) is checked against its sha256; the others are checked by parsing, like any
   local file.

Every folder uses the same layout, `<benchmark>/<file>` (each benchmark's module in
`masforge.evaluators.benchmarks` names its files). A missing file raises a `DataError` naming the expected path
and how to point masforge at the data.
"""

from __future__ import annotations

import hashlib
import os
import threading
import urllib.request
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from masforge.cache_root import cache_root
from masforge.errors import DataError
from masforge.files import not_a_file
from masforge.text import shorten

ENV_DATA_DIR = "MASFORGE_DATA_DIR"
ENV_OFFLINE = "MASFORGE_OFFLINE"

DataDir = str | Path | None
T = TypeVar("T")


@dataclass(frozen=True)
class Source:
    """Where one file of a benchmark is published; `sha256` when those bytes are pinned and known."""

    rel: str
    url: str
    sha256: str | None = None


@dataclass(frozen=True)
class Download:
    """Where a benchmark's files are published. `unpack(source, root, dataset)`, when given, writes a source into
    the folder layout the loader reads itself (MMLU's tarball becomes one CSV per subject); otherwise each source
    is downloaded as the file `root/<source.rel>`."""

    sources: tuple[Source, ...]
    unpack: Callable[[Source, Path, str], None] | None = None


# --------------------------------------------------------------------------------------------
# Locating files
# --------------------------------------------------------------------------------------------


def cache_data_dir() -> Path:
    """The download cache: ``data`` in masforge's cache folder (:func:`masforge.cache_root.cache_root`)."""
    return cache_root() / "data"


def given_folder(data_dir: DataDir) -> Path | None:
    """The folder the user pointed masforge at (`data_dir`, else `MASFORGE_DATA_DIR`), or None: use the cache."""
    if data_dir is not None:
        return Path(data_dir).expanduser()
    env = os.environ.get(ENV_DATA_DIR)
    return Path(env).expanduser() if env else None


def hint(rel: str) -> str:
    """How to give masforge a local copy of the file `rel` (the end of every missing-data message)."""
    return f"point --data-dir or {ENV_DATA_DIR} at a folder holding {rel}"


def _found(path: Path) -> bool:
    """Whether a data file (or folder) is at ``path``; something else there (a FIFO, a device) is one DataError
    naming it, before anything waits on it or reads it without end."""
    what = not_a_file(path)
    if what is not None and what != "a directory":
        raise DataError(f"{path} is {what}, not a data file: put the file itself there")
    return path.exists()


def locate(dataset: str, rels: Sequence[str], data_dir: DataDir = None, download: Download | None = None) -> Path:
    """The first existing file (or folder) among `rels` for `dataset`, fetched into the cache by `download` if
    needed."""
    explicit = given_folder(data_dir)
    if explicit is not None:
        for rel in rels:
            if _found(explicit / rel):
                return explicit / rel
        raise DataError(f"missing data file {explicit / rels[0]} for {dataset}: put it there, or {hint(rels[0])}")
    cache = cache_data_dir()
    for rel in rels:
        if _found(cache / rel):
            return cache / rel
    if download is None:
        raise DataError(f"missing data file {cache / rels[0]} for {dataset}: {hint(rels[0])}")
    if os.environ.get(ENV_OFFLINE):
        raise DataError(f"missing data file {cache / rels[0]} for {dataset} and {ENV_OFFLINE} is set, so nothing "
                        f"is downloaded: {hint(rels[0])}")
    fetch(dataset, download, dest=cache)
    for rel in rels:
        if _found(cache / rel):
            return cache / rel
    raise DataError(f"missing data file {cache / rels[0]} for {dataset} after downloading it: {hint(rels[0])}")


@dataclass(frozen=True)
class Files:
    """One benchmark's files as its loader asks for them: ``files("gsm8k/test.jsonl")`` is the path of the first
    of the names given that exists (see :func:`locate`)."""

    dataset: str
    download: Download | None
    data_dir: DataDir = None

    def __call__(self, *rels: str) -> Path:
        return locate(self.dataset, rels, self.data_dir, self.download)

    @property
    def given(self) -> Path | None:
        """The folder the user pointed masforge at, or None (the cache)."""
        return given_folder(self.data_dir)

    def parsed(self, read: Callable[[Path], T], *rels: str) -> T:
        """``read(path)`` of the file ``self(*rels)``, parsed once per process (see :func:`parse_once`)."""
        path = self(*rels)
        return parse_once(self.dataset, path, lambda: read(path))


# --------------------------------------------------------------------------------------------
# Fetching (not used when the data is present locally)
# --------------------------------------------------------------------------------------------


def _reason(exc: BaseException) -> str:
    """A short reason for a failed download (urllib's messages nest the real cause)."""
    inner = getattr(exc, "reason", None)
    text = str(inner if inner is not None else exc).strip() or type(exc).__name__
    return shorten(text, 80)


def download_file(url: str, target: Path, dataset: str, rel: str, *, sha256: str | None = None,
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
        raise DataError(f"cannot download {dataset} ({_reason(exc)}); offline? {hint(rel)}") from exc
    if sha256 is not None and digest.hexdigest() != sha256:
        tmp.unlink(missing_ok=True)
        raise DataError(f"downloaded {rel} does not match its sha256 (got {digest.hexdigest()[:12]}..., expected "
                        f"{sha256[:12]}...): the source changed; {hint(rel)}")
    tmp.replace(target)


def fetch(dataset: str, download: Download, *, dest: DataDir = None) -> Path:
    """Download `dataset`'s files from their public source into `dest` (default: the cache).

    Returns the folder that now holds `<dataset>/...`. Files that already exist are kept. A failed
    download or a checksum mismatch raises a one-line `DataError` saying how to use a local copy instead.
    """
    root = Path(dest) if dest is not None else cache_data_dir()
    for source in download.sources:
        target = root / source.rel
        if target.exists():
            continue
        if download.unpack is not None:
            download.unpack(source, root, dataset)
        else:
            download_file(source.url, target, dataset, source.rel, sha256=source.sha256)
    return root


# --------------------------------------------------------------------------------------------
# Parsed files, once per process
# --------------------------------------------------------------------------------------------

_LOCK = threading.Lock()
_CACHE: dict[tuple[Any, ...], Any] = {}


def remember(key: tuple[Any, ...], build: Callable[[], Any]) -> Any:
    """`build()`, computed once per process for `key`."""
    with _LOCK:
        if key in _CACHE:
            return _CACHE[key]
    value = build()
    with _LOCK:
        _CACHE[key] = value
    return value


def parse_once(tag: str, path: Path, build: Callable[[], Any], *extra: Any) -> Any:
    """Parse a file once per process (keyed by path, size and modification time)."""
    try:
        stat = path.stat()
        key: tuple[Any, ...] = (tag, str(path.resolve()), stat.st_mtime_ns, stat.st_size, *extra)
    except OSError:
        key = (tag, str(path), *extra)
    return remember(key, build)


def clear_cache() -> None:
    """Forget every parsed file (the next load reads from disk again)."""
    with _LOCK:
        _CACHE.clear()
