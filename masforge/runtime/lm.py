"""Language-model access for every part of masforge: configuration, aliases, one client with a disk
cache, retries, per-model concurrency limits, cost accounting and budgets.

Genomes name LMs by alias (``worker``, ``meta``, ...); a run maps aliases to :class:`LMConfig` s, so one
genome runs on any provider litellm knows (OpenAI, Anthropic, Ollama, vLLM, ...). ``local`` means the
embedded llama.cpp model (started on demand, free); ``fake`` is a deterministic offline LM for tests.
"""

from __future__ import annotations

import hashlib
import http.client
import json
import os
import random
import socket
import sqlite3
import ssl
import threading
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # litellm must not fetch its cost map

from masforge.errors import BudgetExceeded, ConfigError, LMError  # noqa: E402
from masforge.runtime.trace import LMCall, note_lm_call  # noqa: E402

Messages = list[dict[str, Any]]
Responder = Callable[[Messages, dict[str, Any]], str]

# API-key environment variables by provider prefix, to say which one is missing.
_KEY_ENV = {
    "openai": "OPENAI_API_KEY", "anthropic": "ANTHROPIC_API_KEY", "gemini": "GEMINI_API_KEY",
    "groq": "GROQ_API_KEY", "mistral": "MISTRAL_API_KEY", "together_ai": "TOGETHERAI_API_KEY",
    "deepseek": "DEEPSEEK_API_KEY", "openrouter": "OPENROUTER_API_KEY",
}
_KEYLESS_PREFIXES = ("ollama", "ollama_chat", "hosted_vllm", "lm_studio", "llamafile")


@dataclass(frozen=True)
class LMConfig:
    """How to reach one LM. ``model`` is a litellm model string, ``local[:name]`` or ``fake[:name]``."""

    model: str
    api_base: str | None = None
    api_key_env: str | None = None
    temperature: float = 0.7
    max_tokens: int = 1024
    price_in_per_m: float | None = None
    """Dollars per million prompt tokens; None: litellm's price table (0 for local and fake)."""
    price_out_per_m: float | None = None
    max_concurrency: int = 8
    num_retries: int = 4
    timeout_s: float = 180.0
    extra: dict[str, Any] = field(default_factory=dict)
    """Further litellm completion arguments (e.g. ``{"top_p": 0.9}``)."""
    adapter: str = "auto"
    """How dspy modules talk to this LM (``auto``, ``chat``, ``json``, ``plain``; see masforge.runtime.adapters).
    A genome agent may override it."""

    @property
    def is_local(self) -> bool:
        return self.model == "local" or self.model.startswith("local:")

    @property
    def is_fake(self) -> bool:
        return self.model == "fake" or self.model.startswith("fake:")

    @property
    def resolved_adapter(self) -> str:
        """The concrete adapter ``auto`` stands for with this LM (``plain`` on the embedded model)."""
        from masforge.runtime.adapters import resolve_adapter

        return resolve_adapter(self.adapter, local=self.is_local)

    def key(self) -> str:
        """Fingerprint of what changes answers (model, endpoint kind, sampling, prompt adapter); keys cached
        results."""
        base = None if (self.is_local or self.is_fake) else self.api_base
        payload = [self.model, base, self.temperature, self.max_tokens, sorted(self.extra.items())]
        if self.resolved_adapter != "chat":  # results made before adapters existed keep their key
            payload.append(self.resolved_adapter)
        digest = hashlib.sha256(json.dumps(payload, default=str).encode()).hexdigest()[:10]
        return f"{self.model}@{digest}"


def parse_lm(spec: str | LMConfig | dict[str, Any] | None) -> LMConfig:
    """Turn a CLI/API value into an :class:`LMConfig` (None: ``$MASFORGE_LM`` or the embedded local model)."""
    if spec is None:
        default = os.environ.get("MASFORGE_LM", "").strip()
        if default:
            return parse_lm(default)
        return LMConfig(model="local", max_concurrency=1, max_tokens=1024, temperature=0.0)
    if isinstance(spec, LMConfig):
        return spec
    if isinstance(spec, dict):
        try:
            cfg = LMConfig(**spec)
        except TypeError as exc:
            raise ConfigError(f"bad LM configuration {spec!r}: {exc} (fields: model, api_base, temperature, "
                              "max_tokens, price_in_per_m, price_out_per_m, max_concurrency, adapter, ...)") from None
        from masforge.runtime.adapters import ADAPTERS

        if cfg.adapter not in ADAPTERS:
            raise ConfigError(f"LM '{cfg.model}': unknown adapter '{cfg.adapter}'; use one of {', '.join(ADAPTERS)}")
        return cfg
    text = str(spec).strip()
    if not text:
        raise ConfigError("empty LM name: give a litellm model string like openai/gpt-4o-mini, or 'local'")
    if text == "local" or text.startswith("local:"):
        # Greedy by default: a 0.5B model is at its best greedy, and a search compares candidates with less
        # noise when a rerun gives the same answers. Agents that sample (copies, debate) set a temperature.
        return LMConfig(model=text, max_concurrency=1, max_tokens=1024, temperature=0.0)
    if text == "fake" or text.startswith("fake:"):
        return LMConfig(model=text, max_concurrency=64, temperature=0.0)
    if "/" not in text:
        raise ConfigError(f"LM '{text}' needs a provider prefix (e.g. openai/{text}, anthropic/{text}, "
                          f"ollama/{text}) or use 'local'")
    return LMConfig(model=text)


def check_credentials(cfg: LMConfig) -> None:
    """Fail early, in one line, if a hosted model's API key is missing."""
    if cfg.is_local or cfg.is_fake or cfg.api_base:
        return
    provider = cfg.model.split("/", 1)[0]
    if provider in _KEYLESS_PREFIXES:
        return
    env = cfg.api_key_env or _KEY_ENV.get(provider)
    if env and not os.environ.get(env):
        raise ConfigError(f"LM '{cfg.model}' needs the API key in ${env}: export {env}=... "
                          "or run without --lm to use the embedded local model")


@dataclass
class Completion:
    """One LM answer with its accounting."""

    text: str
    prompt_tokens: int
    completion_tokens: int
    cost: float
    latency_s: float
    cached: bool
    model: str


@dataclass
class Budget:
    """Limits for a run; None means unlimited. Checked before every LM call."""

    max_dollars: float | None = None
    max_tokens: int | None = None
    max_calls: int | None = None
    max_seconds: float | None = None


class Ledger:
    """Thread-safe totals of LM use and the budget they are checked against."""

    def __init__(self, budget: Budget | None = None, spent_dollars: float = 0.0, spent_tokens: int = 0,
                 spent_calls: int = 0) -> None:
        self.budget = budget or Budget()
        self._lock = threading.Lock()
        self.calls = spent_calls
        self.cache_hits = 0
        self.prompt_tokens = spent_tokens
        self.completion_tokens = 0
        self.dollars = spent_dollars
        self.errors = 0
        self.started = time.monotonic()

    @property
    def tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    @property
    def elapsed_s(self) -> float:
        return time.monotonic() - self.started

    def exceeded(self) -> str | None:
        """Name of the first limit reached, or None."""
        b = self.budget
        if b.max_dollars is not None and self.dollars >= b.max_dollars:
            return "dollars"
        if b.max_tokens is not None and self.tokens >= b.max_tokens:
            return "tokens"
        if b.max_calls is not None and self.calls >= b.max_calls:
            return "llm_calls"
        if b.max_seconds is not None and self.elapsed_s >= b.max_seconds:
            return "wall_time"
        return None

    def check(self) -> None:
        """Raise :class:`BudgetExceeded` naming the limit if one is reached."""
        limit = self.exceeded()
        if limit is None:
            return
        b = self.budget
        shown = {"dollars": f"${self.dollars:.4f} of ${b.max_dollars}", "tokens": f"{self.tokens} of {b.max_tokens}",
                 "llm_calls": f"{self.calls} of {b.max_calls}",
                 "wall_time": f"{self.elapsed_s:.0f}s of {b.max_seconds}s"}[limit]
        raise BudgetExceeded(limit, f"budget reached: {limit} ({shown}); raise the limit or resume the run")

    def add(self, c: Completion) -> None:
        with self._lock:
            if c.cached:
                self.cache_hits += 1
                return
            self.calls += 1
            self.prompt_tokens += c.prompt_tokens
            self.completion_tokens += c.completion_tokens
            self.dollars += c.cost

    def add_error(self) -> None:
        with self._lock:
            self.errors += 1

    def snapshot(self) -> dict[str, Any]:
        with self._lock:
            return {"llm_calls": self.calls, "cache_hits": self.cache_hits, "prompt_tokens": self.prompt_tokens,
                    "completion_tokens": self.completion_tokens, "tokens": self.tokens, "dollars": self.dollars,
                    "errors": self.errors, "elapsed_s": self.elapsed_s}


def default_cache_path() -> Path:
    """``$MASFORGE_LM_CACHE``, else ``lm_cache.sqlite`` in the masforge cache folder (``$MASFORGE_CACHE``)."""
    if os.environ.get("MASFORGE_LM_CACHE"):
        return Path(os.environ["MASFORGE_LM_CACHE"])
    root = Path(os.environ.get("MASFORGE_CACHE") or Path.home() / ".cache" / "masforge")
    return root / "lm_cache.sqlite"


class LMCache:
    """Responses on disk (SQLite, WAL), keyed by model + messages + sampling + sample index.

    Evaluating the same genome again makes no LM call. One connection per thread."""

    def __init__(self, path: str | os.PathLike[str] | None = None) -> None:
        self.path = Path(path) if path else default_cache_path()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._local = threading.local()
        conn = self._conn()
        conn.execute("CREATE TABLE IF NOT EXISTS responses (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
        conn.commit()

    def _conn(self) -> sqlite3.Connection:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = sqlite3.connect(self.path, timeout=30, check_same_thread=False)
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=NORMAL")
            self._local.conn = conn
        return conn

    @staticmethod
    def make_key(payload: dict[str, Any]) -> str:
        return hashlib.sha256(json.dumps(payload, sort_keys=True, default=str).encode()).hexdigest()

    def get(self, key: str) -> dict[str, Any] | None:
        try:
            row = self._conn().execute("SELECT value FROM responses WHERE key = ?", (key,)).fetchone()
        except sqlite3.DatabaseError:
            return None  # a damaged cache costs money, never correctness
        return json.loads(row[0]) if row else None

    def put(self, key: str, value: dict[str, Any]) -> None:
        try:
            conn = self._conn()
            conn.execute("INSERT OR REPLACE INTO responses VALUES (?, ?)", (key, json.dumps(value)))
            conn.commit()
        except sqlite3.DatabaseError:
            pass


_TRANSIENT_NAMES = ("RateLimitError", "Timeout", "APIConnectionError", "ServiceUnavailableError",
                    "InternalServerError", "APIError", "BadGatewayError")


def _is_transient(exc: BaseException) -> bool:
    name = type(exc).__name__
    if name in ("BadRequestError", "AuthenticationError", "NotFoundError", "PermissionDeniedError",
                "ContextWindowExceededError", "ContentPolicyViolationError", "UnprocessableEntityError"):
        return False
    status = getattr(exc, "status_code", None)
    if isinstance(status, int) and (status in (408, 429) or status >= 500):
        return True
    return name in _TRANSIENT_NAMES or isinstance(exc, TimeoutError | ConnectionError)


class EndpointError(Exception):
    """An HTTP error answer from an OpenAI-compatible endpoint called directly (see ``_openai_compatible``)."""

    def __init__(self, status_code: int, message: str) -> None:
        super().__init__(f"HTTP {status_code}: {message}")
        self.status_code = status_code


# OpenAI-compatible endpoints (``openai/<model>`` at an ``api_base``: the local llama.cpp server, vLLM, LM
# Studio, the test stub) are called directly over pooled keep-alive HTTP connections instead of through
# litellm. Calls run in threads that share the GIL, so client CPU per call caps throughput: measured on two
# cores, litellm.completion costs 5-10 ms per call (logging objects, an asyncio loop per call for its service
# logger, price-table lookups) and an httpx client 2-5 ms with 64 threads, against ~0.5 ms for http.client;
# with litellm an evaluation topped out near 80 LM calls/s whatever the concurrency (bench/concurrency.py).
# The request body is the one litellm sends for these models. Hosted providers still go through litellm.
_PLAIN_EXTRA = frozenset({"top_p", "stop", "presence_penalty", "frequency_penalty", "logit_bias", "seed", "user",
                          "top_k", "min_p", "repeat_penalty", "n"})
_ENDPOINTS: dict[str, _Endpoint] = {}
_ENDPOINTS_LOCK = threading.Lock()
_CATALOG_PRICES: dict[str, tuple[float, float]] = {}


class _Endpoint:
    """Keep-alive HTTP/1.1 connections to one OpenAI-compatible server, shared by every thread."""

    def __init__(self, api_base: str) -> None:
        parts = urlsplit(api_base)
        self.https = parts.scheme == "https"
        self.host = parts.hostname or "127.0.0.1"
        self.port = parts.port or (443 if self.https else 80)
        self.url = api_base.rstrip("/") + "/chat/completions"
        self.path = parts.path.rstrip("/") + "/chat/completions"
        # A proxy configured for this host means litellm (httpx honours the proxy settings); http.client does not.
        proxies = urllib.request.getproxies()
        self.proxied = parts.scheme in proxies and not urllib.request.proxy_bypass(self.host)
        self._ssl = ssl.create_default_context() if self.https else None
        self._idle: list[http.client.HTTPConnection] = []
        self._lock = threading.Lock()

    @staticmethod
    def get(api_base: str) -> _Endpoint:
        with _ENDPOINTS_LOCK:
            ep = _ENDPOINTS.get(api_base)
            if ep is None:
                ep = _ENDPOINTS[api_base] = _Endpoint(api_base)
            return ep

    def _connect(self, timeout: float) -> http.client.HTTPConnection:
        if self.https:
            conn = http.client.HTTPSConnection(self.host, self.port, timeout=timeout, context=self._ssl)
        else:
            conn = http.client.HTTPConnection(self.host, self.port, timeout=timeout)
        conn.connect()
        # Headers and body go out in two writes: without TCP_NODELAY, Nagle holds the body back for an ACK.
        conn.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return conn

    def post(self, body: bytes, headers: dict[str, str], timeout: float) -> tuple[int, str, bytes]:
        """POST ``body`` to ``/chat/completions``: (status, reason, response bytes). Transport failures raise
        ConnectionError or TimeoutError (both retried by the caller)."""
        for attempt in range(2):
            with self._lock:
                conn = self._idle.pop() if self._idle and attempt == 0 else None
            reused = conn is not None
            try:
                if conn is None:
                    conn = self._connect(timeout)
                else:
                    conn.timeout = timeout
                    if conn.sock is not None:
                        conn.sock.settimeout(timeout)
                conn.request("POST", self.path, body=body, headers=headers)
                resp = conn.getresponse()
                data = resp.read()
            except TimeoutError as exc:
                if conn is not None:
                    conn.close()
                raise TimeoutError(f"no answer from {self.url} within {timeout:g}s") from exc
            except (OSError, http.client.HTTPException) as exc:
                if conn is not None:
                    conn.close()
                if reused and attempt == 0:
                    continue  # the server closed an idle keep-alive connection: once more on a fresh one
                raise ConnectionError(f"cannot reach {self.url}: {type(exc).__name__}: {exc}") from exc
            except BaseException:
                if conn is not None:
                    conn.close()
                raise
            if resp.will_close:
                conn.close()
            else:
                with self._lock:
                    self._idle.append(conn)
            return resp.status, resp.reason, data
        raise AssertionError("unreachable")  # pragma: no cover


def _catalog_price(model: str) -> tuple[float, float]:
    """Dollars per prompt and per completion token from litellm's price table ((0, 0) if unknown); cached."""
    price = _CATALOG_PRICES.get(model)
    if price is None:
        try:
            import litellm

            info = litellm.get_model_info(model)
            price = (float(info.get("input_cost_per_token") or 0.0), float(info.get("output_cost_per_token") or 0.0))
        except Exception:
            price = (0.0, 0.0)  # unknown model price: set price_in_per_m / price_out_per_m to count it
        _CATALOG_PRICES[model] = price
    return price


class LMClient:
    """Calls LMs for a run: aliases, cache, retries on transient errors, concurrency limits, ledger."""

    def __init__(self, lms: dict[str, LMConfig | str] | None = None, *, ledger: Ledger | None = None,
                 cache: LMCache | bool | None = True, responder: Responder | None = None, seed: int = 0) -> None:
        configured = {k: parse_lm(v) for k, v in (lms or {}).items()}
        if "worker" not in configured:
            configured["worker"] = parse_lm(None)
        configured.setdefault("meta", configured["worker"])
        self.lms = configured
        self.ledger = ledger or Ledger()
        self.cache: LMCache | None = LMCache() if cache is True else (cache or None)
        self.responder = responder
        self.seed = seed
        self._sems: dict[str, threading.BoundedSemaphore] = {}
        self._sem_lock = threading.Lock()
        self._endpoints: dict[str, tuple[str, str, str]] = {}

    def config(self, alias: str) -> LMConfig:
        """The configuration of ``alias``; an alias the run does not define falls back to ``worker``."""
        return self.lms.get(alias) or self.lms["worker"]

    def with_lms(self, **lms: LMConfig | str) -> LMClient:
        """A client sharing this one's ledger and cache with some aliases remapped."""
        merged = {**self.lms, **{k: parse_lm(v) for k, v in lms.items()}}
        clone = LMClient(merged, ledger=self.ledger, cache=self.cache or False, responder=self.responder,
                         seed=self.seed)
        clone._sems, clone._endpoints = self._sems, self._endpoints
        return clone

    def _semaphore(self, cfg: LMConfig) -> threading.BoundedSemaphore:
        with self._sem_lock:
            sem = self._sems.get(cfg.model)
            if sem is None:
                sem = self._sems[cfg.model] = threading.BoundedSemaphore(max(1, cfg.max_concurrency))
            return sem

    def _route(self, cfg: LMConfig) -> tuple[str, str | None, str | None]:
        """litellm model, api_base and api_key for ``cfg`` (starting the local server if needed)."""
        if cfg.is_local:
            if cfg.model not in self._endpoints:
                from masforge.runtime.local_model import ensure_local_server

                name = cfg.model.split(":", 1)[1] if ":" in cfg.model else "qwen"
                ep = ensure_local_server(name)
                self._endpoints[cfg.model] = (ep.model, ep.api_base, ep.api_key)
            return self._endpoints[cfg.model]
        key = os.environ.get(cfg.api_key_env) if cfg.api_key_env else None
        if cfg.api_base and key is None and cfg.model.startswith("openai/"):
            key = "sk-none"  # OpenAI-compatible local servers want some key
        return cfg.model, cfg.api_base, key

    def complete(self, messages: Messages, *, alias: str = "worker", temperature: float | None = None,
                 max_tokens: int | None = None, sample: int = 0, response_format: dict[str, Any] | None = None,
                 use_cache: bool = True) -> Completion:
        """One chat completion. ``sample`` distinguishes independent samples (copies) in the cache and
        seeds the provider, so k samples differ from each other yet a rerun reproduces them."""
        cfg = self.config(alias)
        temp = cfg.temperature if temperature is None else temperature
        mtok = max_tokens or cfg.max_tokens
        payload = {"model": cfg.model if (cfg.is_local or cfg.is_fake) else [cfg.model, cfg.api_base],
                   "messages": messages, "temperature": temp, "max_tokens": mtok, "sample": sample,
                   "response_format": response_format, "extra": cfg.extra, "seed": self.seed}
        key = LMCache.make_key(payload) if self.cache is not None else ""
        if self.cache is not None and use_cache:
            hit = self.cache.get(key)
            if hit is not None:
                c = Completion(hit["text"], hit["prompt_tokens"], hit["completion_tokens"], hit["cost"], 0.0,
                               True, cfg.model)
                self._account(alias, c)
                return c
        self.ledger.check()
        with self._semaphore(cfg):
            self.ledger.check()
            c = self._call_with_retries(cfg, messages, temp, mtok, sample, response_format)
        if self.cache is not None and c.text:
            self.cache.put(key, {"text": c.text, "prompt_tokens": c.prompt_tokens,
                                 "completion_tokens": c.completion_tokens, "cost": c.cost})
        self._account(alias, c)
        return c

    def _account(self, alias: str, c: Completion) -> None:
        self.ledger.add(c)
        note_lm_call(LMCall(alias=alias, model=c.model, prompt_tokens=c.prompt_tokens,
                            completion_tokens=c.completion_tokens, cost=c.cost, latency_s=c.latency_s,
                            cached=c.cached))

    def _call_with_retries(self, cfg: LMConfig, messages: Messages, temp: float, mtok: int, sample: int,
                           response_format: dict[str, Any] | None) -> Completion:
        attempt = 0
        while True:
            start = time.perf_counter()
            try:
                if cfg.is_fake:
                    return self._fake(cfg, messages, temp, sample, start)
                return self._litellm(cfg, messages, temp, mtok, sample, response_format, start)
            except (BudgetExceeded, ConfigError):
                raise
            except Exception as exc:
                if not _is_transient(exc) or attempt >= cfg.num_retries:
                    self.ledger.add_error()
                    note_lm_call(LMCall(alias="", model=cfg.model, latency_s=time.perf_counter() - start,
                                        error=f"{type(exc).__name__}: {exc}"[:300]))
                    first = str(exc).strip().splitlines()[0][:300] if str(exc).strip() else ""
                    tries = f" after {attempt + 1} tries" if attempt else ""
                    raise LMError(f"LM '{cfg.model}' failed{tries}: {type(exc).__name__}: {first}") from exc
                # Exponential backoff with jitter, capped: rate limits clear in seconds, not minutes.
                time.sleep(min(20.0, 0.5 * 2**attempt) * (0.5 + random.random()))
                attempt += 1

    def _fake(self, cfg: LMConfig, messages: Messages, temp: float, sample: int, start: float) -> Completion:
        from masforge.runtime.fake_lm import fake_reply

        responder = self.responder or fake_reply
        text = responder(messages, {"model": cfg.model, "temperature": temp, "sample": sample})
        prompt_tokens = sum(len(str(m.get("content", ""))) for m in messages) // 4
        return Completion(text, prompt_tokens, len(text) // 4, self._price(cfg, prompt_tokens, len(text) // 4),
                          time.perf_counter() - start, False, cfg.model)

    def _price(self, cfg: LMConfig, prompt_tokens: int, completion_tokens: int) -> float:
        if cfg.price_in_per_m is None and cfg.price_out_per_m is None:
            return 0.0
        return (prompt_tokens * (cfg.price_in_per_m or 0.0) + completion_tokens * (cfg.price_out_per_m or 0.0)) / 1e6

    def _litellm(self, cfg: LMConfig, messages: Messages, temp: float, mtok: int, sample: int,
                 response_format: dict[str, Any] | None, start: float) -> Completion:
        model, api_base, api_key = self._route(cfg)
        if api_base and model.startswith("openai/") and _PLAIN_EXTRA.issuperset(cfg.extra):
            ep = _Endpoint.get(api_base)
            if not ep.proxied:
                return self._openai_compatible(cfg, ep, model, api_key, messages, temp, mtok, sample,
                                               response_format, start)
        import litellm

        kwargs: dict[str, Any] = {"model": model, "messages": messages, "temperature": temp, "max_tokens": mtok,
                                  "timeout": cfg.timeout_s, "num_retries": 0, "drop_params": True, **cfg.extra}
        if api_base:
            kwargs["api_base"] = api_base
        if api_key:
            kwargs["api_key"] = api_key
        if response_format is not None:
            kwargs["response_format"] = response_format
        if temp > 0:
            kwargs["seed"] = self.seed * 1000 + sample
        resp = litellm.completion(**kwargs)
        text = resp.choices[0].message.content or ""
        usage = getattr(resp, "usage", None)
        pt = int(getattr(usage, "prompt_tokens", 0) or 0)
        ct = int(getattr(usage, "completion_tokens", 0) or 0)
        if cfg.is_local or cfg.price_in_per_m is not None or cfg.price_out_per_m is not None:
            cost = self._price(cfg, pt, ct)
        else:
            try:
                cost = float(litellm.completion_cost(completion_response=resp) or 0.0)
            except Exception:
                cost = 0.0  # unknown model price: set price_in_per_m / price_out_per_m to count it
        return Completion(text, pt, ct, cost, time.perf_counter() - start, False, cfg.model)

    def _openai_compatible(self, cfg: LMConfig, ep: _Endpoint, model: str, api_key: str | None,
                           messages: Messages, temp: float, mtok: int, sample: int,
                           response_format: dict[str, Any] | None, start: float) -> Completion:
        """One chat completion POSTed straight to an OpenAI-compatible endpoint (what litellm would send)."""
        body: dict[str, Any] = {"model": model.split("/", 1)[1], "messages": messages, "temperature": temp,
                                "max_tokens": mtok, **cfg.extra}
        if response_format is not None:
            body["response_format"] = response_format
        if temp > 0:
            body["seed"] = self.seed * 1000 + sample
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if api_key:
            headers["Authorization"] = f"Bearer {api_key}"
        status, reason, raw = ep.post(json.dumps(body).encode(), headers, cfg.timeout_s)
        if status >= 400:
            try:
                detail = str(json.loads(raw)["error"]["message"])
            except Exception:
                detail = raw.decode("utf-8", "replace").strip()[:300] or reason
            raise EndpointError(status, detail)
        data = json.loads(raw)
        choices = data.get("choices") if isinstance(data, dict) else None
        if not choices:
            raise EndpointError(status, f"no choices in the answer: {raw[:200].decode('utf-8', 'replace')}")
        text = (choices[0].get("message") or {}).get("content") or ""
        usage = data.get("usage") or {}
        pt = int(usage.get("prompt_tokens") or 0)
        ct = int(usage.get("completion_tokens") or 0)
        if cfg.is_local or cfg.price_in_per_m is not None or cfg.price_out_per_m is not None:
            cost = self._price(cfg, pt, ct)
        else:
            p_in, p_out = _catalog_price(cfg.model)
            cost = pt * p_in + ct * p_out
        return Completion(text, pt, ct, cost, time.perf_counter() - start, False, cfg.model)

    def close(self) -> None:
        """Nothing to release but the local servers, which masforge stops at exit."""


def with_temperature(cfg: LMConfig, temperature: float | None) -> LMConfig:
    """``cfg`` with another default temperature (None: unchanged)."""
    return cfg if temperature is None else replace(cfg, temperature=temperature)
