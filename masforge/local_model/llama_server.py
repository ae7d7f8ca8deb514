"""llama.cpp's own server for the embedded model: parallel slots that decode concurrent requests in one batch.

llama-cpp-python's server answers one request at a time, so on the embedded model concurrency buys nothing
(it even loses: ``bench/results/real_model.txt``). llama.cpp's ``llama-server`` runs several slots with
continuous batching. masforge builds it once per machine from the llama.cpp source that the installed
llama-cpp-python release vendors (the same model code, no other download) with ``masforge models
build-server`` (``make llama-server``) and then uses it instead; without it everything works as before.

``$MASFORGE_LLAMA_SERVER`` names a binary to use, or ``off`` to keep llama-cpp-python's server. It is also the
testing seam: tests name a script that runs :mod:`masforge.testing.stub_server`, which takes llama-server's flags,
in place of the real server (no model is loaded).
``$MASFORGE_LOCAL_SLOTS`` sets how many slots a started server runs (and so how many requests masforge sends it
at once); a server named by ``$MASFORGE_LOCAL_API_BASE`` is asked how many it runs.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path

from masforge.cache_root import cache_root
from masforge.errors import LocalModelError

SERVER_ENV = "MASFORGE_LLAMA_SERVER"
SLOTS_ENV = "MASFORGE_LOCAL_SLOTS"
EXTERNAL_ENV = "MASFORGE_LOCAL_API_BASE"
"""A server the user runs; local_model uses it instead of starting one, and local_slots asks it its slots."""
SLOTS = 4
"""Default parallel slots of a started llama.cpp server. On 2 cores 8 slots decode about 10% more tokens per
second than 4 (measured on the embedded model: 55 against 50) at twice the KV memory, so 4 stays the default
and ``$MASFORGE_LOCAL_SLOTS`` raises it."""
MAX_SLOTS = 64
_SERVED_SLOTS: dict[str, int | None] = {}
"""Slot counts already asked of external servers (one question per server and process)."""
_BUILD_FLAGS = ("-DCMAKE_BUILD_TYPE=Release", "-DBUILD_SHARED_LIBS=OFF", "-DGGML_NATIVE=OFF", "-DLLAMA_CURL=OFF",
                "-DLLAMA_BUILD_TESTS=OFF", "-DLLAMA_BUILD_EXAMPLES=OFF")
"""A static, portable binary (no libllama.so beside it, no CPU-specific instructions) that cannot download models."""


def llama_cpp_version() -> str | None:
    """Installed llama-cpp-python version, or None if it is not importable (checked without importing)."""
    if importlib.util.find_spec("llama_cpp") is None:
        return None
    try:
        return importlib.metadata.version("llama_cpp_python")
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


def built_path(version: str | None = None) -> Path | None:
    """Where :func:`build` puts the binary for the installed llama-cpp-python (None if it is not installed)."""
    version = version or llama_cpp_version()
    if not version or version == "unknown":
        return None
    return cache_root() / "bin" / f"llama-server-{version}"


def server_binary() -> Path | None:
    """The llama.cpp server binary to run, or None to run llama-cpp-python's server: ``$MASFORGE_LLAMA_SERVER``
    (a path, or ``off``), else the one :func:`build` made for the installed llama-cpp-python, if any."""
    chosen = os.environ.get(SERVER_ENV, "").strip()
    if chosen.lower() == "off":
        return None
    if chosen:
        path = Path(chosen).expanduser()
        if not (path.is_file() and os.access(path, os.X_OK)):
            raise LocalModelError(f"{SERVER_ENV}={chosen}: no executable llama-server there; build one with "
                                  f"`masforge models build-server` or set {SERVER_ENV}=off")
        return path
    path = built_path()
    return path if path is not None and path.is_file() and os.access(path, os.X_OK) else None


def configured_slots() -> int:
    """Slots a started llama.cpp server runs: ``$MASFORGE_LOCAL_SLOTS`` (1 to :data:`MAX_SLOTS`), else
    :data:`SLOTS`; LocalModelError names a bad value."""
    raw = os.environ.get(SLOTS_ENV, "").strip()
    if not raw:
        return SLOTS
    try:
        slots = int(raw)
    except ValueError:
        slots = 0
    if not 1 <= slots <= MAX_SLOTS:
        raise LocalModelError(f"{SLOTS_ENV}={raw}: give a whole number of slots from 1 to {MAX_SLOTS} "
                              f"(or unset it for {SLOTS})")
    return slots


def served_slots(api_base: str, timeout: float = 2.0) -> int | None:
    """The slot count a running llama.cpp server reports at ``GET /props`` (``total_slots``), or None for a
    server that does not say (llama-cpp-python's, a proxy, a server that is down). Asked once per process."""
    root = api_base.rstrip("/").removesuffix("/v1")
    if root not in _SERVED_SLOTS:
        try:
            with urllib.request.urlopen(f"{root}/props", timeout=timeout) as resp:  # noqa: S310 (a local URL)
                total = json.loads(resp.read()).get("total_slots")
            _SERVED_SLOTS[root] = int(total) if isinstance(total, int) and 1 <= total <= MAX_SLOTS else None
        except (urllib.error.URLError, OSError, ValueError, AttributeError):
            _SERVED_SLOTS[root] = None
    return _SERVED_SLOTS[root]


def started_server_kind() -> tuple[str, int]:
    """Which server masforge starts here and how many requests it decodes at once: llama.cpp's own with
    :func:`configured_slots`, else llama-cpp-python's with one (it serialises requests)."""
    return ("llama.cpp", configured_slots()) if server_binary() is not None else ("llama-cpp-python", 1)


def local_slots(model: str | None = None) -> int:
    """How many requests masforge sends the embedded model at once: the slots of the server it uses.

    A server named by ``$MASFORGE_LOCAL_API_BASE`` is asked (``GET /props``); the shared server another masforge
    process started for ``model`` says so in its record (:mod:`.registry`), so every process keeps to the slots
    of the one server they share; else the server this process would start (:func:`started_server_kind`).
    """
    try:
        external = os.environ.get(EXTERNAL_ENV, "").strip()
        if external:
            served = served_slots(external)
            if served is not None:
                return served
        if model is not None:
            from masforge.local_model.registry import recorded_slots

            recorded = recorded_slots(model)
            if recorded is not None:
                return recorded
        return started_server_kind()[1]
    except LocalModelError:
        return 1  # the bad setting is reported, in one line, when the server is started


def command(binary: Path, model_file: Path, *, alias: str, host: str, port: int, n_ctx: int,
            threads: int, slots: int | None = None) -> list[str]:
    """The llama.cpp server command line: ``slots`` parallel slots of ``n_ctx`` tokens each (the context is
    split between them; None: :func:`configured_slots`), every core for generation and prompt processing, the
    model served as ``alias``."""
    slots = configured_slots() if slots is None else slots
    return [str(binary), "--model", str(model_file), "--alias", alias, "--host", host, "--port", str(port),
            "--ctx-size", str(n_ctx * slots), "--parallel", str(slots), "--threads", str(threads),
            "--threads-batch", str(threads), "--no-webui"]


def build(log: Callable[[str], None] = print, jobs: int | None = None) -> Path:
    """Build ``llama-server`` from the llama.cpp source of the installed llama-cpp-python release (its sdist,
    fetched with pip from the configured index) into the masforge cache; returns the binary's path. About 12
    minutes on 2 cores, once per machine and llama-cpp-python version."""
    version = llama_cpp_version()
    target = built_path(version)
    if target is None:
        raise LocalModelError("llama-cpp-python is not installed: run `make llama` first")
    if target.is_file():
        log(f"llama-server for llama-cpp-python {version} is already built: {target}")
        return target
    for tool in ("cmake", "c++"):
        if shutil.which(tool) is None:
            raise LocalModelError(f"building llama-server needs {tool}: install it (apt install cmake g++)")
    with tempfile.TemporaryDirectory(prefix="masforge-llama-build-") as tmp:
        work = Path(tmp)
        log(f"fetching the llama-cpp-python {version} source (for its vendored llama.cpp)")
        _run([sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:", "-d", str(work),
              f"llama-cpp-python=={version}"], "pip could not fetch the llama-cpp-python source")
        sdist = next(work.glob("llama_cpp_python-*.tar.gz"), None)
        if sdist is None:
            raise LocalModelError("pip fetched no llama-cpp-python source archive; check the pip index")
        with tarfile.open(sdist) as tar:
            tar.extractall(work, filter="data")
        source = next(work.glob("llama_cpp_python-*/vendor/llama.cpp"), None)
        if source is None or not (source / "CMakeLists.txt").is_file():
            raise LocalModelError(f"{sdist.name} holds no vendored llama.cpp source")
        build_dir = work / "build"
        log("building llama-server (static, portable; about 12 minutes on 2 cores)")
        _run(["cmake", "-S", str(source), "-B", str(build_dir), *_BUILD_FLAGS], "cmake could not configure llama.cpp")
        _run(["cmake", "--build", str(build_dir), "--target", "llama-server", "-j", str(jobs or os.cpu_count() or 1)],
             "the llama-server build failed")
        binary = build_dir / "bin" / "llama-server"
        if not binary.is_file():
            raise LocalModelError(f"the build made no {binary.name}")
        target.parent.mkdir(parents=True, exist_ok=True)
        partial = target.with_name(target.name + ".partial")
        shutil.copy2(binary, partial)
        partial.replace(target)  # a half-copied binary is never taken for a built one
    log(f"built {target}")
    return target


def _run(cmd: list[str], what: str) -> None:
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        tail = [ln.strip() for ln in (proc.stderr or proc.stdout or "").splitlines() if ln.strip()][-1:]
        raise LocalModelError(f"{what}: {tail[0][:300] if tail else f'exit code {proc.returncode}'}")
