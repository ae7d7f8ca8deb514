"""Direct HTTP to OpenAI-compatible endpoints (pooled keep-alive connections, :mod:`masforge.lm.http1`) and
litellm's price table."""

from __future__ import annotations

import json
import socket
import ssl
import threading
import time
import urllib.request
from typing import Any
from urllib.parse import urlsplit

from masforge.lm.http1 import Connection, ProtocolError, TooLarge


class EndpointError(Exception):
    """An HTTP error answer from an OpenAI-compatible endpoint called directly (see :meth:`Endpoint.chat`), or an
    answer that is not a chat completion (``kind`` ``bad_answer``, reported as 502 so that it is retried)."""

    def __init__(self, status_code: int, message: str, *, retry_after: float | None = None,
                 kind: str | None = None) -> None:
        super().__init__(f"HTTP {status_code}: {message}")
        self.status_code = status_code
        self.retry_after = retry_after
        """Seconds the server asked to wait (``Retry-After``), if it said."""
        self.kind = kind or ("rate_limit" if status_code == 429 else "server_error" if status_code >= 500
                             else "access" if status_code in (401, 403) else "not_found" if status_code == 404
                             else "client_error")


class Unreachable(ConnectionError):
    """Nothing answers at an endpoint (connection refused, no such host): not a fault a retry can mend."""

    kind = "unreachable"


MAX_ANSWER_BYTES = 8 * 1024 * 1024
"""A larger answer is refused (a provider fault): it would only fill memory, traces and the archive. A chat
completion of 100k tokens is well under it; parsed, JSON can take about 12 times its size (a list of short
strings), so this keeps one answer's memory near 100 MB."""
MAX_JSON_CONTAINERS = 100_000
"""Arrays and objects one answer may hold (brackets counted, those inside strings too): a chat completion has a
few dozen; each costs a Python list or dict (about 70 bytes for the 2-3 bytes of ``[],``)."""


def parse_json(raw: bytes | bytearray) -> Any:
    """The JSON of an answer, or ValueError saying in a few words why there is none: not UTF-8, not JSON, nested
    too deep, too many arrays and objects (each bounded in memory and CPU, whatever the bytes)."""
    if len(raw) > MAX_JSON_CONTAINERS:  # shorter, it cannot hold that many (an answer is rarely that long)
        containers = raw.count(b"[") + raw.count(b"{")
        if containers > MAX_JSON_CONTAINERS:
            raise ValueError(f"{containers:,} JSON arrays and objects, more than {MAX_JSON_CONTAINERS:,}")
    try:
        return json.loads(raw)
    except RecursionError:
        raise ValueError("JSON nested too deep") from None
    except UnicodeDecodeError as exc:
        raise ValueError(f"not UTF-8 ({exc.reason} at byte {exc.start})") from None
    except ValueError as exc:  # JSONDecodeError, and numbers past int's digit limit
        raise ValueError(f"not JSON ({exc})") from None


def retry_after_seconds(headers: Any) -> float | None:
    """The wait a ``Retry-After`` / ``retry-after-ms`` header asks for, in seconds (None if absent or a date)."""
    if headers is None:
        return None
    try:
        ms = headers.get("retry-after-ms")
        if ms is not None:
            return max(0.0, float(ms) / 1000)
        value = headers.get("retry-after")
        return max(0.0, float(value)) if value is not None else None
    except (TypeError, ValueError):
        return None


# OpenAI-compatible endpoints (``openai/<model>`` at an ``api_base``: the local llama.cpp server, vLLM, LM
# Studio, the test stub) are called directly over pooled keep-alive HTTP connections instead of through
# litellm. Calls run in threads that share the GIL, so client CPU per call caps throughput: measured on two
# cores, litellm.completion costs 5-10 ms per call (logging objects, an asyncio loop per call for its service
# logger, price-table lookups) and an httpx client 2-5 ms with 64 threads, against ~0.5 ms for http.client and
# less for masforge.lm.http1; with litellm an evaluation topped out near 80 LM calls/s whatever the concurrency
# (bench/concurrency.py).
# The request body is the one litellm sends for these models. Hosted providers still go through litellm.
PLAIN_EXTRA = frozenset({"top_p", "stop", "presence_penalty", "frequency_penalty", "logit_bias", "seed", "user",
                          "top_k", "min_p", "repeat_penalty", "n"})
_ENDPOINTS: dict[str, Endpoint] = {}
_ENDPOINTS_LOCK = threading.Lock()
_CATALOG_PRICES: dict[str, tuple[float, float]] = {}


class InFlight:
    """The connections of one client's requests in flight, so that a stop can cut them (:meth:`cut`): a thread
    blocked reading an answer then fails at once instead of waiting for it."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._conns: set[Connection] = set()

    def add(self, conn: Connection) -> None:
        with self._lock:
            self._conns.add(conn)

    def discard(self, conn: Connection) -> None:
        with self._lock:
            self._conns.discard(conn)

    def cut(self) -> None:
        with self._lock:
            conns = list(self._conns)
        for conn in conns:
            sock = conn.sock
            if sock is not None:
                try:
                    sock.shutdown(socket.SHUT_RDWR)  # wakes the thread blocked on it
                except OSError:
                    pass


class Endpoint:
    """Keep-alive HTTP/1.1 connections to one OpenAI-compatible server, shared by every thread."""

    def __init__(self, api_base: str) -> None:
        parts = urlsplit(api_base)
        self.https = parts.scheme == "https"
        self.host = parts.hostname or "127.0.0.1"
        self.port = parts.port or (443 if self.https else 80)
        self.url = api_base.rstrip("/") + "/chat/completions"
        self.path = parts.path.rstrip("/") + "/chat/completions"
        # A proxy configured for this host means litellm (httpx honours the proxy settings); this client does not.
        proxies = urllib.request.getproxies()
        self.proxied = parts.scheme in proxies and not urllib.request.proxy_bypass(self.host)
        self._ssl = ssl.create_default_context() if self.https else None
        self._idle: list[Connection] = []
        self._lock = threading.Lock()

    @staticmethod
    def get(api_base: str) -> Endpoint:
        """The shared endpoint for ``api_base`` (one connection pool per server)."""
        with _ENDPOINTS_LOCK:
            ep = _ENDPOINTS.get(api_base)
            if ep is None:
                ep = _ENDPOINTS[api_base] = Endpoint(api_base)
            return ep

    def _take_idle(self) -> Connection | None:
        """A pooled connection the server has not closed meanwhile (checked before anything is sent, so a
        request is never sent twice behind the caller's back)."""
        while True:
            with self._lock:
                conn = self._idle.pop() if self._idle else None
            if conn is None:
                return None
            if conn.idle_and_open():
                return conn
            conn.close()

    def post(self, body: bytes, headers: dict[str, str], timeout: float,
             active: InFlight | None = None) -> tuple[int, str, bytes | bytearray, dict[str, str]]:
        """POST ``body`` to ``/chat/completions`` once: (status, reason, response bytes, response headers, their
        names in lower case). ``timeout`` bounds the whole request (connecting, sending, the reply's headers, body
        and trailers), not each read. Transport failures raise ConnectionError or TimeoutError (both retried, and
        counted, by the caller), or :class:`Unreachable` when no connection can be made at all (the server is down
        or the address wrong); a reply that is not HTTP or passes the client's bounds raises :class:`EndpointError`
        (``bad_answer``). ``active``: where the connection is registered while the request is in flight (so it
        can be cut)."""
        deadline = time.monotonic() + timeout
        conn = self._take_idle()
        try:
            if conn is None:
                try:
                    conn = Connection(self.host, self.port, timeout, self._ssl)
                except (ConnectionRefusedError, socket.gaierror) as exc:
                    raise Unreachable(f"cannot reach {self.url}: {type(exc).__name__}: {exc}") from exc
            if active is not None:
                active.add(conn)
            reply = conn.post(self.path, body, headers, MAX_ANSWER_BYTES, deadline)
        except TimeoutError as exc:
            if conn is not None:
                conn.close()
            raise TimeoutError(f"no whole answer from {self.url} within {timeout:g}s") from exc
        except Unreachable:
            raise
        except TooLarge:
            conn.close()
            raise EndpointError(502, f"answer larger than {MAX_ANSWER_BYTES // 2**20} MB", kind="bad_answer") \
                from None
        except ProtocolError as exc:
            conn.close()
            raise EndpointError(502, f"the reply from {self.url} is not usable HTTP: {exc}", kind="bad_answer") \
                from None
        except OSError as exc:
            if conn is not None:
                conn.close()
            raise ConnectionError(f"cannot reach {self.url}: {type(exc).__name__}: {exc}") from exc
        except BaseException:
            if conn is not None:
                conn.close()
            raise
        finally:
            if active is not None and conn is not None:
                active.discard(conn)
        if reply.will_close:
            conn.close()
        else:
            with self._lock:
                self._idle.append(conn)
        return reply.status, reply.reason, reply.body, reply.headers

    def chat(self, body: dict[str, Any], api_key: str | None, timeout: float,
             active: InFlight | None = None) -> dict[str, Any]:
        """POST one chat-completion request body; the parsed answer, which has at least one choice. An HTTP
        error status, or an answer that is not a chat completion, raises :class:`EndpointError`."""
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if api_key:
            headers["Authorization"] = f"Bearer {api_key}"
        status, reason, raw, resp_headers = self.post(json.dumps(body).encode(), headers, timeout, active)
        if status >= 400:
            try:
                detail = str(parse_json(raw)["error"]["message"])
            except Exception:
                detail = raw[:300].decode("utf-8", "replace").strip() or reason
            raise EndpointError(status, detail, retry_after=retry_after_seconds(resp_headers))
        try:
            data = parse_json(raw)
        except ValueError as exc:
            shown = raw[:120].decode("utf-8", "replace")
            raise EndpointError(502, f"the answer is {exc}: {len(raw)} bytes, {shown!r}", kind="bad_answer") \
                from None
        choices = data.get("choices") if isinstance(data, dict) else None
        message = choices[0].get("message") if isinstance(choices, list) and choices and \
            isinstance(choices[0], dict) else None
        if not isinstance(message, dict) or not isinstance(message.get("content"), str | None):
            error = data.get("error") if isinstance(data, dict) else None
            if error:  # a 200 carrying an error (some proxies and servers answer a failure so)
                said = error.get("message") if isinstance(error, dict) else error
                raise EndpointError(502, f"the answer is an error, sent with HTTP {status}: {str(said)[:300]}",
                                    kind="bad_answer")
            raise EndpointError(502, f"no chat completion in the answer: {raw[:200].decode('utf-8', 'replace')}",
                                kind="bad_answer")
        return data


def catalog_price(model: str) -> tuple[float, float]:
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
