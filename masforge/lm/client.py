"""The LM client every part of masforge calls: aliases, the disk cache, retries on transient errors, per-model
concurrency limits, cost accounting and budgets.

Its pieces live beside it by job: :mod:`.lm_config` (what an LM is and how to name one), :mod:`.lm_cache`
(answers on disk), :mod:`.endpoint` (direct HTTP to OpenAI-compatible servers), :mod:`.ledger` (spend and
budgets). They are re-exported here, so ``from masforge.lm.client import LMClient, LMConfig, ...`` works.
"""

from __future__ import annotations

import os
import random
import re
import threading
import time
import weakref
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # litellm must not fetch its cost map

from masforge.errors import (  # noqa: E402
    BudgetExceeded,
    ConfigError,
    LMError,
    LocalModelError,
    MasforgeError,
    ProviderError,
)
from masforge.lm import rates as lm_rates  # noqa: E402
from masforge.lm.budget import Budget  # noqa: E402
from masforge.lm.cache import LMCache, default_cache_path  # noqa: E402
from masforge.lm.config import LMConfig, check_credentials, parse_lm, with_temperature  # noqa: E402
from masforge.lm.endpoint import (  # noqa: E402
    PLAIN_EXTRA,
    Endpoint,
    EndpointError,
    InFlight,
    Unreachable,
    catalog_price,
    retry_after_seconds,
)
from masforge.lm.ledger import Completion, Ledger  # noqa: E402
from masforge.lm.trace import (  # noqa: E402
    LMCall,
    first_incident,
    given_up,
    note_incident,
    note_lm_call,
    waiting_on_provider,
)
from masforge.redact import redact, redact_secret_values, register_secret  # noqa: E402
from masforge.standalone.connect import api_key_for, completion_request, cut_at_stop  # noqa: E402

__all__ = ["Budget", "CacheMiss", "Completion", "EndpointError", "LMCache", "LMClient", "LMConfig", "Ledger",
           "Messages", "RequestAbandoned", "Responder", "abandon_requests", "check_credentials", "default_cache_path",
           "failure_kind", "parse_lm", "with_temperature"]

Messages = list[dict[str, Any]]
Responder = Callable[[Messages, dict[str, Any]], str]

# Failure kinds of one request (the ledger counts them). Transient ones are retried; all but client_error are
# the provider's fault, so an example that meets one for good is unscored rather than wrong. The provider's refusals
# of the run itself (a rejected key, an unknown model, a server nobody answers at) stop the run at once.
TRANSIENT_KINDS = frozenset({"rate_limit", "server_error", "timeout", "connection", "bad_answer"})
REFUSAL_FIXES = {
    "access": "the provider refused the credentials: check the API key{env} and that it may use this model",
    "not_found": "the provider does not know this model: check its name (--lm, or lms: in the run configuration)",
    "unreachable": "nothing answers there: start that server, or fix --api-base / the model's api_base",
}
_UNREACHABLE = re.compile(r"connection refused|name or service not known|nodename nor servname|temporary failure in "
                          r"name resolution|no address associated with hostname|getaddrinfo failed|errno 111\b", re.I)
_UNKNOWN_MODEL = re.compile(r"\bmodel\b.{0,120}\b(not found|does not exist|not exist|unknown)|\bunknown model\b|"
                            r"\bmodel_not_found\b", re.I | re.S)
_CLIENT_ERRORS = ("BadRequestError", "ContextWindowExceededError", "ContentPolicyViolationError",
                  "UnprocessableEntityError")
MAX_RETRY_AFTER_S = 60.0


class Reservation(NamedTuple):
    """What one request may cost at most, reserved in the ledger before it is sent: dollars (0: a free LM), how
    they were priced, and the tokens behind them (the prompt's bound, ``max_tokens``)."""

    dollars: float
    detail: str
    prompt_tokens: int
    completion_tokens: int


CHARS_PER_TOKEN_CAP = 16
"""An answer longer than max_tokens x this many characters cannot be honest: it is cut there."""


def failure_kind(exc: BaseException) -> str:
    """What kind of failure a request met: rate_limit, server_error, timeout, connection, bad_answer, access (a
    rejected key), not_found (an unknown model), unreachable (nothing answers at the address), client_error (the
    request itself was refused) or error (anything else)."""
    kind = getattr(exc, "kind", None)
    if isinstance(exc, EndpointError | Unreachable) and isinstance(kind, str):
        return "not_found" if kind == "client_error" and _UNKNOWN_MODEL.search(str(exc)) else kind
    name = type(exc).__name__
    status = getattr(exc, "status_code", None)
    status = status if isinstance(status, int) else None
    if isinstance(exc, TimeoutError) or "Timeout" in name or status == 408:
        return "timeout"
    if isinstance(exc, ConnectionError) or name == "APIConnectionError":
        return "unreachable" if _UNREACHABLE.search(str(exc)) else "connection"
    if status == 429 or name == "RateLimitError":
        return "rate_limit"
    if (status is not None and status >= 500) or name in ("ServiceUnavailableError", "InternalServerError",
                                                           "APIError", "BadGatewayError"):
        return "server_error"
    if status in (401, 403) or name in ("AuthenticationError", "PermissionDeniedError"):
        return "access"
    if status == 404 or name == "NotFoundError":
        return "not_found"
    if name in _CLIENT_ERRORS or (status is not None and 400 <= status < 500):
        return "not_found" if _UNKNOWN_MODEL.search(str(exc)) else "client_error"
    return "error"


class RequestAbandoned(LMError):
    """The request was given up because the run was stopped."""


class _Stop:
    """A client's stop (Ctrl-C): its requests in flight are cut, not awaited, and booked as abandoned, not
    failed; it sends no more. Shared by the clones of a client (:meth:`LMClient.with_lms`)."""

    def __init__(self) -> None:
        self.stopped = False
        self.changed = threading.Condition()
        self.in_flight = InFlight()

    def stop(self) -> None:
        with self.changed:
            self.stopped = True
            self.changed.notify_all()
        self.in_flight.cut()

    def wait(self, seconds: float) -> None:
        """Sleep ``seconds``, or less if the stop comes first."""
        with self.changed:
            self.changed.wait_for(lambda: self.stopped, timeout=seconds)


_LIVE_STOPS: weakref.WeakSet[_Stop] = weakref.WeakSet()


def abandon_requests() -> None:
    """Stop every LM client of this process (see :meth:`LMClient.abandon`): what exiting after Ctrl-C does."""
    for stop in list(_LIVE_STOPS):
        stop.stop()


def _is_transient(exc: BaseException) -> bool:
    return failure_kind(exc) in TRANSIENT_KINDS


def _retry_after(exc: BaseException) -> float | None:
    wait = getattr(exc, "retry_after", None)
    if isinstance(wait, int | float):
        return float(wait)
    return retry_after_seconds(getattr(getattr(exc, "response", None), "headers", None))


class ServerShare:
    """Processor sharing on one server: a clock that advances by 1/n of real time while n requests are in flight,
    so a request's share of the server is the clock's advance between its start and its end (a request that ran
    alone after the others finished gets the whole of that time, one that ran beside 3 others a quarter)."""

    def __init__(self, now: Callable[[], float] = time.monotonic) -> None:
        self._now = now
        self._lock = threading.Lock()
        self._in_flight = 0
        self._clock = 0.0
        self._at = now()

    def _advance(self) -> None:
        now = self._now()
        if self._in_flight:
            self._clock += (now - self._at) / self._in_flight
        self._at = now

    def enter(self) -> float:
        """A request starts: the clock's reading, to give back to :meth:`leave`."""
        with self._lock:
            self._advance()
            self._in_flight += 1
            return self._clock

    def leave(self, entered: float) -> float:
        """A request ends: its share of the server's time, in seconds."""
        with self._lock:
            self._advance()
            self._in_flight -= 1
            return self._clock - entered


class CacheMiss(LMError):
    """A cache-only client was asked for an answer the cache does not hold."""


class LMClient:
    """Calls LMs for a run: aliases, cache, retries on transient errors, concurrency limits, ledger."""

    def __init__(self, lms: dict[str, LMConfig | str] | None = None, *, ledger: Ledger | None = None,
                 cache: LMCache | bool | None = True, responder: Responder | None = None, seed: int = 0,
                 cache_only: bool = False) -> None:
        configured = {k: parse_lm(v) for k, v in (lms or {}).items()}
        if "worker" not in configured:
            configured["worker"] = parse_lm(None)
        configured.setdefault("meta", configured["worker"])
        self.lms = configured
        self.ledger = ledger or Ledger()
        self.cache: LMCache | None = LMCache() if cache is True else (cache or None)
        self.responder = responder
        self.seed = seed
        self.cache_only = cache_only
        """Answer from the cache or not at all: a call the cache cannot answer raises :class:`CacheMiss` and is
        counted in :attr:`misses` (what a search's cost probe asks: how many answers a candidate still needs)."""
        self.misses = 0
        self._sems: dict[str, threading.BoundedSemaphore] = {}
        self._shares: dict[str, ServerShare] = {}
        """Per model: the server time each request in flight gets (what the embedded model's rate is kept in)."""
        self._sem_lock = threading.Lock()
        self._endpoints: dict[str, tuple[str, str, str]] = {}
        self._stop = _Stop()
        _LIVE_STOPS.add(self._stop)

    def abandon(self) -> None:
        """The run was stopped (Ctrl-C): cut this client's requests in flight (each ends at once, is counted as
        sent and abandoned, never as a failure, and is not retried) and send no more."""
        self._stop.stop()

    def config(self, alias: str) -> LMConfig:
        """The configuration of ``alias``; an alias the run does not define falls back to ``worker``."""
        return self.lms.get(alias) or self.lms["worker"]

    def with_lms(self, **lms: LMConfig | str) -> LMClient:
        """A client sharing this one's ledger and cache with some aliases remapped."""
        merged = {**self.lms, **{k: parse_lm(v) for k, v in lms.items()}}
        clone = LMClient(merged, ledger=self.ledger, cache=self.cache or False, responder=self.responder,
                         seed=self.seed)
        clone._sems, clone._shares, clone._endpoints = self._sems, self._shares, self._endpoints
        clone._stop = self._stop
        clone._sem_lock = self._sem_lock  # the maps above are guarded by it
        return clone

    def _semaphore(self, cfg: LMConfig) -> threading.BoundedSemaphore:
        with self._sem_lock:
            sem = self._sems.get(cfg.model)
            if sem is None:
                sem = self._sems[cfg.model] = threading.BoundedSemaphore(max(1, cfg.max_concurrency))
            return sem

    def _share(self, cfg: LMConfig) -> ServerShare:
        with self._sem_lock:
            share = self._shares.get(cfg.model)
            if share is None:
                share = self._shares[cfg.model] = ServerShare()
            return share

    def _route(self, cfg: LMConfig) -> tuple[str, str | None, str | None]:
        """litellm model, api_base and api_key for ``cfg`` (starting the local server if needed)."""
        if cfg.is_local:
            if cfg.model not in self._endpoints:
                from masforge.local_model import ensure_local_server

                name = cfg.model.split(":", 1)[1] if ":" in cfg.model else "qwen"
                ep = ensure_local_server(name)
                self._endpoints[cfg.model] = (ep.model, ep.api_base, ep.api_key)
            return self._endpoints[cfg.model]
        key = api_key_for(cfg.model, cfg.api_base, cfg.api_key_env)
        register_secret(key)  # whatever the variable is called, its value is never written anywhere
        return cfg.model, cfg.api_base, key

    def complete(self, messages: Messages, *, alias: str = "worker", temperature: float | None = None,
                 max_tokens: int | None = None, sample: int = 0, response_format: dict[str, Any] | None = None,
                 stop: Sequence[str] | None = None, use_cache: bool = True) -> Completion:
        """One chat completion. ``sample`` distinguishes independent samples (copies) in the cache and
        seeds the provider, so k samples differ from each other yet a rerun reproduces them. ``stop``: the
        answer ends before the first of these strings (asked of the provider, and enforced here)."""
        self._check_sendable()
        cfg = self.config(alias)
        temp = cfg.temperature if temperature is None else temperature
        mtok = max_tokens or cfg.max_tokens
        payload = {"model": cfg.model if (cfg.is_local or cfg.is_fake) else [cfg.model, cfg.api_base],
                   "messages": messages, "temperature": temp, "max_tokens": mtok, "sample": sample,
                   "response_format": response_format, "extra": cfg.extra, "seed": self.seed}
        stop = tuple(stop or ())
        if stop:  # only then: the keys of answers without stop strings stay as they were
            payload["stop"] = list(stop)
        key = LMCache.make_key(payload) if self.cache is not None else ""
        if self.cache is not None and use_cache:
            hit = self.cache.get(key)
            if hit is not None:
                c = Completion(redact_secret_values(hit["text"]), hit["prompt_tokens"], hit["completion_tokens"],
                               hit["cost"], 0.0, True, cfg.model)
                self.ledger.add(c)
                self._note(alias, c)
                return c
        if self.cache_only:
            with self._sem_lock:
                self.misses += 1
            raise CacheMiss("not in the answer cache (a cost probe sends nothing)", infrastructure=True)
        failed = first_incident()
        if failed is not None:
            # This example is unscored already (the provider failed it): more requests cannot change that.
            raise LMError(f"not sent: an earlier LM call of this example failed ({failed[:200]})", infrastructure=True)
        self.ledger.check()
        # Queued behind this client's other requests (the LM's slots are all taken) is waiting on the provider
        # too: that time must not count against the example's own timeout.
        with waiting_on_provider(), self._semaphore(cfg):
            # How long this LM takes here, for the next run's estimate. The embedded model's slots decode together
            # on the same cores (4 requests at once take about 4 times as long each), so its time is shared out; a
            # hosted model's is its latency.
            share = self._share(cfg) if cfg.is_local else None
            entered = share.enter() if share is not None else 0.0
            try:
                c = self._call_with_retries(cfg, messages, temp, mtok, sample, response_format, stop)
            finally:
                took = share.leave(entered) if share is not None else None
        c.text = redact_secret_values(c.text)  # a key the provider echoed is neither cached nor scored
        lm_rates.record(cfg, c.latency_s if took is None else took)
        # Counted (settled in the ledger, inside the retries) before cached: a process dying in between has then
        # at worst paid and counted a call that a retry pays again, never cached an answer nobody counted.
        if self.cache is not None and c.text:
            self.cache.put(key, {"text": c.text, "prompt_tokens": c.prompt_tokens,
                                 "completion_tokens": c.completion_tokens, "cost": c.cost})
        self._note(alias, c)
        return c

    def _check_sendable(self) -> None:
        """Refuse a request nobody waits for: the run was stopped, or its example was given up for its timeout
        (its thread cannot be killed, so without this it would go on spending the run's budget)."""
        if self._stop.stopped:
            raise RequestAbandoned("not sent: the run was stopped", infrastructure=True)
        if given_up():
            raise RequestAbandoned("not sent: the example was given up for its timeout", infrastructure=True)

    def _note(self, alias: str, c: Completion) -> None:
        note_lm_call(LMCall(alias=alias, model=c.model, prompt_tokens=c.prompt_tokens,
                            completion_tokens=c.completion_tokens, cost=c.cost, latency_s=c.latency_s,
                            cached=c.cached))

    def _call_with_retries(self, cfg: LMConfig, messages: Messages, temp: float, mtok: int, sample: int,
                           response_format: dict[str, Any] | None, stop: tuple[str, ...] = ()) -> Completion:
        """At most ``1 + num_retries`` requests, each reserved in the ledger before it is sent (so retries count
        against the budget and stop with it) and settled or failed when it ends. An empty answer is asked again
        once (a provider glitch, if it was one, rarely repeats; a model that really says nothing is then
        believed)."""
        attempt = 0
        reserved = self._worst_cost(cfg, messages, mtok)
        worst = reserved.dollars
        while True:
            self._check_sendable()  # also before a retry: the wait may have outlasted the run or the example
            self.ledger.reserve(attempt + 1, worst, reserved.detail)
            start = time.perf_counter()
            try:
                with waiting_on_provider():
                    if cfg.is_fake:
                        c = self._fake(cfg, messages, temp, sample, start)
                    else:
                        c = self._litellm(cfg, messages, temp, mtok, sample, response_format, start, stop)
            except BudgetExceeded:
                self.ledger.release(worst)  # nothing was sent
                raise
            except (ConfigError, LocalModelError) as exc:
                self.ledger.release(worst)  # nothing was sent, and nothing will be: the LM cannot be used
                halt = ProviderError(f"LM '{cfg.model}' cannot be used: {exc}")
                self.ledger.halt(halt)
                raise halt from exc
            except BaseException as exc:
                if self._stop.stopped or not isinstance(exc, Exception):  # the user stopped the run: no failure
                    self.ledger.abandon(worst)
                    if not isinstance(exc, Exception):
                        raise
                    raise RequestAbandoned("abandoned: the run was stopped", infrastructure=True) from None
                kind = failure_kind(exc)
                self.ledger.fail(kind, worst)
                if kind not in TRANSIENT_KINDS or attempt >= cfg.num_retries:
                    raise self._give_up(cfg, exc, kind, attempt, start) from exc
                wait = _retry_after(exc)
                if wait is None:  # exponential backoff with jitter, capped: rate limits clear in seconds
                    wait = min(20.0, 0.5 * 2**attempt) * (0.5 + random.random())
                self._stop.wait(min(wait, MAX_RETRY_AFTER_S))  # a stop ends the wait
                attempt += 1
                continue
            c.text = cut_at_stop(c.text, stop)  # a provider (or the fake LM) that ignores stop strings
            note = self._check_answer(c, mtok)
            billed = c.cost
            overrun = self._overrun(cfg, c, reserved)
            self.ledger.settle(c, note, worst, uncounted=billed - c.cost if overrun else None)
            if overrun is not None:
                self.ledger.halt(overrun)
                raise overrun
            if note == "empty" and attempt == 0 and cfg.num_retries > 0:
                attempt += 1
                continue
            return c

    def _check_answer(self, c: Completion, mtok: int) -> str | None:
        """A note on an odd answer (``empty``, ``overlong``); cuts one longer than max_tokens allows."""
        if not c.text.strip():
            return "empty"
        cap = max(mtok, 1) * CHARS_PER_TOKEN_CAP
        if len(c.text) > cap:
            c.text = c.text[:cap]
            return "overlong"
        return None

    def _give_up(self, cfg: LMConfig, exc: Exception, kind: str, attempt: int, start: float) -> MasforgeError:
        detail = redact(str(exc)).strip()  # before cutting: a cut key would no longer be recognised
        first = detail.splitlines()[0][:300] if detail else ""
        tries = f" after {attempt + 1} tries" if attempt else ""
        text = f"LM '{cfg.model}' failed{tries}: {type(exc).__name__}: {first}"
        infrastructure = kind != "client_error"
        note_lm_call(LMCall(alias="", model=cfg.model, latency_s=time.perf_counter() - start,
                            error=redact(f"{type(exc).__name__}: {exc}")[:300]))
        if kind in REFUSAL_FIXES:
            env = f" in ${cfg.api_key_env}" if cfg.api_key_env else ""
            halt = ProviderError(f"LM '{cfg.model}' cannot be used: {type(exc).__name__}: {first}; "
                                 f"{REFUSAL_FIXES[kind].format(env=env)} (nothing was scored)")
            self.ledger.halt(halt)
            return halt
        if infrastructure:
            note_incident(text)
        return LMError(text, infrastructure=infrastructure)

    def _worst_cost(self, cfg: LMConfig, messages: Messages, mtok: int) -> Reservation:
        """The most one request can cost: every byte of the prompt a token (no tokenizer makes more) and the whole
        ``max_tokens`` generated, at the model's price; and how that was priced, in words."""
        if cfg.price_in_per_m is not None or cfg.price_out_per_m is not None:
            p_in, p_out = (cfg.price_in_per_m or 0.0) / 1e6, (cfg.price_out_per_m or 0.0) / 1e6
        elif cfg.is_local or cfg.is_fake:
            return Reservation(0.0, "", 0, mtok)
        else:
            p_in, p_out = catalog_price(cfg.model)
        if p_in <= 0 and p_out <= 0:
            return Reservation(0.0, "", 0, mtok)
        prompt = 16 + sum(8 + len(str(m.get("content", "")).encode("utf-8", "replace")) for m in messages)
        return Reservation(prompt * p_in + mtok * p_out, f"a prompt of at most {prompt:,} tokens and {mtok:,} "
                           f"completion tokens at the price of {cfg.model}", prompt, mtok)

    def _overrun(self, cfg: LMConfig, c: Completion, reserved: Reservation) -> ProviderError | None:
        """The halt a priced answer calls for when its bill passes what was reserved for it, else None. A bill with
        more tokens than the request allowed (completion tokens past ``max_tokens``, prompt tokens past the prompt's
        bytes) shows the provider ignored the limit or reports usage wrongly: only the reservation is counted
        (``c``'s tokens and cost are cut to it); a bill within the tokens but above the reservation (another price)
        is counted as billed. Either way the run stops: a budget cannot hold against a provider that bills
        past what it was asked for."""
        if reserved.dollars <= 0:
            return None  # a free LM: nothing is billed (a long answer is cut and noted, see _check_answer)
        passed = []
        if c.completion_tokens > reserved.completion_tokens:
            passed.append(f"{c.completion_tokens:,} completion tokens for max_tokens {reserved.completion_tokens:,}")
        if c.prompt_tokens > reserved.prompt_tokens:
            passed.append(f"{c.prompt_tokens:,} prompt tokens for a prompt of at most {reserved.prompt_tokens:,}")
        if not passed and c.cost <= reserved.dollars * (1 + 1e-9):
            return None
        billed = c.cost
        if passed:
            c.prompt_tokens = min(c.prompt_tokens, reserved.prompt_tokens)
            c.completion_tokens = min(c.completion_tokens, reserved.completion_tokens)
            c.cost = min(c.cost, reserved.dollars)
            why = f"{'; '.join(passed)}; counted: the ${c.cost:.4f} reserved"
        else:
            why = f"at a higher price than {reserved.detail}; counted as billed"
        return ProviderError(
            f"LM '{cfg.model}' overran its bill: ${billed:.4f} for a request reserved at ${reserved.dollars:.4f} "
            f"({why}); a provider that bills past what it is asked for lets no budget hold, so the run stops: "
            "check its usage reports and the model's price (price_in_per_m / price_out_per_m)")

    def _fake(self, cfg: LMConfig, messages: Messages, temp: float, sample: int, start: float) -> Completion:
        from masforge.lm.fake import fake_reply

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
                 response_format: dict[str, Any] | None, start: float, stop: tuple[str, ...] = ()) -> Completion:
        model, api_base, api_key = self._route(cfg)
        if api_base and model.startswith("openai/") and PLAIN_EXTRA.issuperset(cfg.extra):
            ep = Endpoint.get(api_base)
            if not ep.proxied:
                return self._openai_compatible(cfg, ep, model, api_key, messages, temp, mtok, sample,
                                               response_format, start, stop)
        import litellm

        # Retries are ours (_call_with_retries), so litellm makes one attempt (and the OpenAI SDK under it none).
        resp = litellm.completion(**completion_request(
            model, messages, temperature=temp, max_tokens=mtok, api_base=api_base, api_key=api_key,
            timeout_s=cfg.timeout_s, num_retries=0, extra=cfg.extra, response_format=response_format,
            seed=self.seed, sample=sample, stop=stop), max_retries=0)
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

    def _openai_compatible(self, cfg: LMConfig, ep: Endpoint, model: str, api_key: str | None,
                           messages: Messages, temp: float, mtok: int, sample: int,
                           response_format: dict[str, Any] | None, start: float,
                           stop: tuple[str, ...] = ()) -> Completion:
        """One chat completion POSTed straight to an OpenAI-compatible endpoint (what litellm would send)."""
        body: dict[str, Any] = {"model": model.split("/", 1)[1], "messages": messages, "temperature": temp,
                                "max_tokens": mtok, **cfg.extra}
        if response_format is not None:
            body["response_format"] = response_format
        if stop:
            body["stop"] = list(stop)
        if temp > 0:
            body["seed"] = self.seed * 1000 + sample
        data = ep.chat(body, api_key, cfg.timeout_s, self._stop.in_flight)
        choices = data["choices"]
        text = (choices[0].get("message") or {}).get("content") or ""
        usage = data.get("usage") or {}
        pt = int(usage.get("prompt_tokens") or 0)
        ct = int(usage.get("completion_tokens") or 0)
        if cfg.is_local or cfg.price_in_per_m is not None or cfg.price_out_per_m is not None:
            cost = self._price(cfg, pt, ct)
        else:
            p_in, p_out = catalog_price(cfg.model)
            cost = pt * p_in + ct * p_out
        return Completion(text, pt, ct, cost, time.perf_counter() - start, False, cfg.model)

    def close(self) -> None:
        """Nothing to release but the local servers, which masforge stops at exit."""
