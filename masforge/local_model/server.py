"""The embedded model's server: a llama.cpp server process started on a loopback port, watched and stopped by the
process that started it (its own session, killed by the kernel if that process dies, stopped at interpreter exit).
Which process that is, and how every masforge process on the machine shares one server, is :mod:`.shared`'s job."""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import ctypes.util
import importlib.metadata
import importlib.util
import json
import os
import queue
import re
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from masforge.errors import LocalModelError
from masforge.local_model.catalog import (
    DEFAULT_LOCAL_MODEL,
    LOCAL_API_KEY,
    LocalModelSpec,
    get_spec,
)
from masforge.local_model.llama_server import command as native_command
from masforge.local_model.llama_server import server_binary
from masforge.local_model.weights import logs_dir, model_path
from masforge.ports import free_port

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


def preflight(spec: LocalModelSpec, cache: Path | None = None) -> Path:
    """Check what starting a server for ``spec`` needs (llama-cpp-python with its server extras, unless llama.cpp's
    own server runs; the pulled weights); return the GGUF path. Raises :class:`LocalModelError` naming the fix."""
    if server_binary() is None:
        require_llama_cpp()
    return model_path(spec, cache=cache)


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


def answers(api_base: str, timeout: float = 5.0) -> bool:
    """Whether an HTTP server answers at ``api_base``'s root, with any status. A cheap route is asked, not
    ``/v1/models``: llama-cpp-python's server answers that only once the generation in progress has ended."""
    root = api_base.rstrip("/").removesuffix("/v1")
    opener = _DIRECT if _is_loopback(root) else urllib.request.build_opener()
    try:
        with opener.open(urllib.request.Request(f"{root}/health"), timeout=timeout):
            return True
    except urllib.error.HTTPError:
        return True  # a 404 or 503 is an answer too
    except (OSError, ValueError):
        return False


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
        """Check what the server needs (:func:`preflight`); return the GGUF path."""
        return preflight(self.spec, self.cache)

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
        if native is not None:  # llama.cpp's own server: parallel slots (see masforge.local_model.llama_server)
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
