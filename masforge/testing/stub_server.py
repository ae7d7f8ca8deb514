"""A tiny OpenAI-compatible HTTP server for tests and benchmarks (stdlib only).

It answers ``GET /v1/models`` and ``POST /v1/chat/completions`` instantly or after a fixed latency, counts
requests, records the peak number of requests in flight, and can fail the first N chat requests with a given
HTTP status to exercise retries. Every connection gets its own daemon thread, so a slow request never blocks
the others::

    with StubServer(latency_s=0.2) as stub:
        litellm.completion(model="openai/stub", api_base=stub.api_base, api_key="x", messages=[...])
        assert stub.requests == 1

The default responder answers dspy prompts: for the ChatAdapter it emits every output field the system message
lists, in ``[[ ## field ## ]]`` sections ending with ``[[ ## completed ## ]]``; when JSON is asked for (a
``response_format``, or dspy's JSONAdapter wording) it returns a JSON object instead. Values follow the type
notes dspy puts in the prompt (``int`` -> ``0``, ``bool`` -> ``True``, a JSON schema -> a minimal instance);
plain ``str`` fields read ``stub <field>``.

With ``faults`` it is a flaky provider: each chat request, drawn from a seeded generator, gets one of the
:data:`FAULTS` at its rate (429 or 500 with ``Retry-After``, a hang past the client's timeout, a dropped
connection, a body cut short, invalid JSON, an empty or an absurdly long completion) and the server counts what
it injected (``injected``) and the tokens of the answers it delivered (``delivered_tokens``)::

    with StubServer(faults={"rate_limit": 0.1, "drop": 0.05}, fault_seed=1) as flaky: ...
    StubServer(faults=StubServer.uniform_faults(0.3))   # 30% of requests fail, spread over every kind

With ``billed_completion_tokens`` every answer reports that many completion tokens, whatever it holds: a provider
that over-bills (its usage is wrong, or it ignored ``max_tokens``), for the budgets to be held against.

``python -m masforge.testing.stub_server --port 8000 --model stub`` runs it in the foreground (until SIGTERM/Ctrl-C).
It also takes llama.cpp's server's flags (``--model <file> --alias <id> --parallel <slots> ...``) and answers its
``GET /props`` with the slot count, so a script running it can stand in for that server (``$MASFORGE_LLAMA_SERVER``)
in tests of the shared embedded-model server.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import random
import signal
import socket
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import FrameType
from typing import Any

from masforge.testing.stub_replies import content_text, default_responder, example_from_schema

__all__ = ["FAULTS", "Responder", "StubServer", "default_responder", "example_from_schema", "main"]

FAULTS = ("rate_limit", "server_error", "hang", "drop", "cut_body", "bad_json", "empty", "long")
"""What a flaky provider does to a request: 429 / 500 with Retry-After; no answer until past the client's
timeout; the connection closed without an answer; a 200 whose body stops half-way; a 200 that is not JSON; a
completion with no text; a completion far longer than max_tokens allows."""

Responder = Callable[[list[dict[str, Any]], dict[str, Any]], "str | None"]
"""``responder(messages, body)`` returns the reply text, or None to fall back to :func:`default_responder`."""


# --------------------------------------------------------------------------------------------------
# HTTP plumbing
# --------------------------------------------------------------------------------------------------


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 512  # the listen backlog: 64+ clients may connect at once

    def __init__(self, addr: tuple[str, int], stub: StubServer) -> None:
        self.stub = stub
        super().__init__(addr, _Handler)

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that went away (killed, timed out) is routine here, not a traceback on stderr."""
        if isinstance(sys.exc_info()[1], ConnectionError | TimeoutError):
            return
        super().handle_error(request, client_address)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, so pooled clients reuse connections
    disable_nagle_algorithm = True
    timeout = 120  # an idle keep-alive connection frees its thread after this
    server: _HTTPServer

    def setup(self) -> None:
        super().setup()
        self.server.stub._track(self.connection, True)

    def finish(self) -> None:
        with contextlib.suppress(OSError):
            super().finish()
        self.server.stub._track(self.connection, False)

    def log_message(self, format: str, *args: Any) -> None:
        """Silence the per-request access log."""

    # -- responses ----------------------------------------------------------------------------------

    def _send(self, status: int, payload: bytes, content_type: str, headers: dict[str, str] | None = None,
              cut: bool = False) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(payload)))
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.end_headers()
        with contextlib.suppress(OSError):
            self.wfile.write(payload[: len(payload) // 2] if cut else payload)
            if cut:  # the promised length never arrives
                self.wfile.flush()
                self._drop()

    def _json(self, status: int, obj: Any, headers: dict[str, str] | None = None) -> None:
        self._send(status, json.dumps(obj).encode("utf-8"), "application/json", headers)

    def _error(self, status: int, message: str, kind: str = "invalid_request_error") -> None:
        self._json(status, {"error": {"message": message, "type": kind, "param": None, "code": status}})


    # -- routes -------------------------------------------------------------------------------------

    def _route(self) -> str:
        path = self.path.split("?", 1)[0].rstrip("/")
        return path[3:] if path.startswith("/v1") else path

    def do_GET(self) -> None:
        """``/v1/models`` lists the stub's model; ``/health`` says ok; ``/props`` gives the slots, if it has some."""
        route = self._route()
        if route == "/props" and self.server.stub.slots:
            self._json(200, {"total_slots": self.server.stub.slots})
        elif route == "/models":
            model = {"id": self.server.stub.model, "object": "model", "created": 0, "owned_by": "masforge-stub"}
            self._json(200, {"object": "list", "data": [model]})
        elif route == "/health":
            self._json(200, {"status": "ok"})
        else:
            self._error(404, f"no route GET {self.path}", "not_found_error")

    def do_POST(self) -> None:
        """``/v1/chat/completions``: count, maybe fail, build the answer, wait out the latency, send it."""
        route = self._route()
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length > 0 else b""
        if route != "/chat/completions":
            self._error(404, f"no route POST {self.path}", "not_found_error")
            return
        try:
            body = json.loads(raw.decode("utf-8") or "null")
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            self._error(400, f"request body is not JSON: {exc}")
            return
        if not isinstance(body, dict) or not isinstance(body.get("messages"), list):
            self._error(400, "request body must be a JSON object with a 'messages' list")
            return
        stub = self.server.stub
        arrived = time.monotonic()
        auth = str(self.headers.get("Authorization") or "")
        stub.last_authorization = auth
        fault = stub._enter(body)
        try:
            # The reply is built on arrival and the latency counted from then, so a request takes the stated
            # latency however many arrive together (built after the wait, 64 replies queued behind one GIL).
            (status, payload, content_type, headers), usage = _answer(stub, body, fault, auth)
            if stub.latency_s > 0:
                time.sleep(max(0.0, arrived + stub.latency_s - time.monotonic()))
            if fault == "hang":
                time.sleep(stub.hang_s)
            if usage is not None:
                stub._delivered(usage)  # after the wait: a client that gave up meanwhile was never billed
        finally:
            stub._leave()  # before the reply goes out: a client that has its answer sees in_flight drop
        if fault in ("hang", "drop"):
            self._drop()
        elif fault == "cut_body":
            self._send(status, payload, content_type, headers, cut=True)
        else:
            self._send(status, payload, content_type, headers)

    def _drop(self) -> None:
        """Close the connection without a word (what a crashed proxy or a dead worker does)."""
        self.close_connection = True
        with contextlib.suppress(OSError):
            self.connection.shutdown(socket.SHUT_RDWR)


_Reply = tuple[int, bytes, str, dict[str, str]]


def _json_reply(status: int, obj: Any, headers: dict[str, str] | None = None) -> _Reply:
    return status, json.dumps(obj).encode("utf-8"), "application/json", headers or {}


def _answer(stub: StubServer, body: dict[str, Any], fault: str | None, auth: str = ""
            ) -> tuple[_Reply, dict[str, int] | None]:
    """The HTTP reply to a counted chat request (an injected failure, a completion, or an SSE stream), and the
    usage to count as delivered once it is sent (None: nothing the client is billed for)."""
    if fault in ("fail", "rate_limit", "server_error"):
        status = stub.fail_status if fault == "fail" else 429 if fault == "rate_limit" else 500
        wait = stub.retry_after if fault == "fail" else stub.fault_retry_after
        headers = {}
        if wait is not None:
            headers = {"Retry-After": f"{wait:g}", "retry-after-ms": f"{wait * 1000:.0f}"}
        kind = "rate_limit_error" if status == 429 else "server_error"
        message = f"stub: injected failure (HTTP {status})"
        if stub.echo_auth:
            # What careless providers do: quote the credential back (a test that keys are never stored needs it).
            key = auth.split(" ", 1)[1] if auth.lower().startswith("bearer ") else auth
            message = f"Incorrect API key provided: {key}. Authorization header was: {auth}"
            kind = "invalid_request_error"
        error = {"message": message, "type": kind, "param": None, "code": status}
        return _json_reply(status, {"error": error}, headers), None
    if fault == "bad_json":
        return (200, b"<html><body>502 Bad Gateway</body></html>", "application/json", {}), None
    try:
        text = stub.reply(body)
    except Exception as exc:  # a broken responder is a 500 the test can see, not a dead thread
        message = f"stub responder failed: {type(exc).__name__}: {exc}"
        error = {"message": message, "type": "server_error", "param": None, "code": 500}
        return _json_reply(500, {"error": error}), None
    if fault == "empty":
        text = ""
    elif fault == "long":
        text = (text + " ") * max(1, stub.long_chars // max(len(text) + 1, 1))
    if body.get("stream"):
        return (200, _sse(stub, body, text), "text/event-stream", {"Cache-Control": "no-cache"}), None
    answer = _completion(stub, body, text)
    delivered = answer["usage"] if fault in (None, "empty", "long") else None  # received in full: billed
    return _json_reply(200, answer), delivered


def _usage(body: dict[str, Any], text: str, n: int, billed: int | None = None) -> dict[str, int]:
    """Token counts estimated as characters // 4 (``billed``: the completion tokens reported instead)."""
    prompt = sum(len(content_text(m.get("content"))) for m in body["messages"] if isinstance(m, dict)) // 4
    completion = (len(text) // 4) * n if billed is None else billed
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}


def _completion(stub: StubServer, body: dict[str, Any], text: str) -> dict[str, Any]:
    n = max(1, int(body.get("n") or 1))
    choices = [
        {"index": i, "message": {"role": "assistant", "content": text}, "finish_reason": "stop", "logprobs": None}
        for i in range(n)
    ]
    return {
        "id": stub._next_id(),
        "object": "chat.completion",
        "created": int(time.time()),
        "model": str(body.get("model") or stub.model),
        "choices": choices,
        "usage": _usage(body, text, n, stub.billed_completion_tokens),
        "system_fingerprint": None,
    }


def _sse(stub: StubServer, body: dict[str, Any], text: str) -> bytes:
    """A whole streamed reply (one content chunk, a finish chunk with usage) as server-sent events."""
    base = {"id": stub._next_id(), "object": "chat.completion.chunk", "created": int(time.time())}
    base["model"] = str(body.get("model") or stub.model)
    chunks = [
        {**base, "choices": [{"index": 0, "delta": {"role": "assistant", "content": text}, "finish_reason": None}]},
        {**base, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}], "usage": _usage(body, text, 1)},
    ]
    return ("".join(f"data: {json.dumps(c)}\n\n" for c in chunks) + "data: [DONE]\n\n").encode("utf-8")


# --------------------------------------------------------------------------------------------------
# The server
# --------------------------------------------------------------------------------------------------


class StubServer:
    """An OpenAI-compatible stub on a loopback port, served from a background thread.

    ``latency_s`` is how long each chat request takes from its arrival (waited in that request's own thread).
    ``responder(messages, body)`` returns the reply text (None: use :func:`default_responder`). The first
    ``fail_first_n`` chat requests get HTTP ``fail_status`` with an OpenAI-shaped error body (and ``Retry-After`` if
    ``retry_after`` is set); with ``echo_auth`` that body quotes the request's API key and ``Authorization`` header,
    as some providers' 401 answers do.

    ``billed_completion_tokens``: the completion tokens every answer reports (None: its text's, characters // 4).

    ``faults`` maps kinds of :data:`FAULTS` to rates (their sum at most 1): each later request draws its fate
    from a generator seeded with ``fault_seed``. A hang lasts ``hang_s``; a long completion is ``long_chars``
    characters; 429 and 500 faults carry ``Retry-After: fault_retry_after``. ``slots`` is the slot count
    ``GET /props`` reports, as llama.cpp's server does (None: no such route).
    """

    def __init__(
        self,
        latency_s: float = 0.0,
        responder: Responder | None = None,
        *,
        model: str = "stub",
        fail_first_n: int = 0,
        fail_status: int = 500,
        retry_after: float | None = None,
        echo_auth: bool = False,
        host: str = "127.0.0.1",
        port: int = 0,
        faults: dict[str, float] | None = None,
        fault_seed: int = 0,
        hang_s: float = 2.0,
        long_chars: int = 200_000,
        fault_retry_after: float | None = 0.05,
        slots: int | None = None,
        billed_completion_tokens: int | None = None,
    ) -> None:
        faults = dict(faults or {})
        unknown = [k for k in faults if k not in FAULTS]
        if unknown:
            raise ValueError(f"unknown fault '{unknown[0]}' (faults: {', '.join(FAULTS)})")
        if any(r < 0 for r in faults.values()) or sum(faults.values()) > 1 + 1e-9:
            raise ValueError("fault rates must be >= 0 and sum to at most 1")
        if latency_s < 0 or fail_first_n < 0:
            raise ValueError("latency_s and fail_first_n must not be negative")
        if not 400 <= fail_status <= 599:
            raise ValueError(f"fail_status must be an HTTP error status (4xx/5xx), got {fail_status}")
        self.latency_s = latency_s
        self.responder = responder
        self.model = model
        self.slots = slots
        self.fail_first_n = fail_first_n
        self.fail_status = fail_status
        self.retry_after = retry_after
        self.echo_auth = echo_auth
        self.faults = faults
        self.hang_s = hang_s
        self.long_chars = long_chars
        self.fault_retry_after = fault_retry_after
        self.billed_completion_tokens = billed_completion_tokens
        self._fault_rng = random.Random(fault_seed)
        self._injected: Counter[str] = Counter()
        self._delivered_usage: Counter[str] = Counter()
        self.host = host
        self.requested_port = port
        self.last_body: dict[str, Any] | None = None
        self.last_authorization = ""
        """The Authorization header of the last chat request ("" if it had none)."""
        self._lock = threading.Lock()
        self._requests = 0
        self._failed = 0
        self._in_flight = 0
        self._max_in_flight = 0
        self._ids = itertools.count(1)
        self._conns: set[socket.socket] = set()
        self._httpd: _HTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- counters (thread-safe reads) --------------------------------------------------------------

    @property
    def requests(self) -> int:
        """Chat-completion requests received, injected failures included."""
        with self._lock:
            return self._requests

    @property
    def failures(self) -> int:
        """Injected failures sent so far."""
        with self._lock:
            return self._failed

    @property
    def in_flight(self) -> int:
        """Chat-completion requests being handled right now."""
        with self._lock:
            return self._in_flight

    @property
    def max_in_flight(self) -> int:
        """Peak number of chat-completion requests handled at the same time."""
        with self._lock:
            return self._max_in_flight

    @property
    def injected(self) -> dict[str, int]:
        """Faults injected so far, by kind (``fail`` for the first-N failures)."""
        with self._lock:
            return dict(self._injected)

    @property
    def delivered_tokens(self) -> dict[str, int]:
        """Prompt, completion and total tokens of the completions delivered whole (what a client is billed)."""
        with self._lock:
            return {k: self._delivered_usage[k] for k in ("prompt_tokens", "completion_tokens", "total_tokens")}

    @property
    def delivered(self) -> int:
        """Completions delivered whole."""
        with self._lock:
            return self._delivered_usage["answers"]

    @staticmethod
    def uniform_faults(rate: float) -> dict[str, float]:
        """``rate`` of the requests faulty, spread evenly over every kind of :data:`FAULTS`."""
        return {kind: rate / len(FAULTS) for kind in FAULTS}

    def reset_counters(self) -> None:
        """Zero ``requests``, ``failures`` and ``max_in_flight`` (injected failures start over)."""
        with self._lock:
            self._requests = self._failed = 0
            self._max_in_flight = self._in_flight
            self._injected.clear()
            self._delivered_usage.clear()

    # -- addresses ---------------------------------------------------------------------------------

    @property
    def port(self) -> int:
        """The bound port (after :meth:`start`)."""
        if self._httpd is None:
            raise RuntimeError("the stub server is not started")
        return int(self._httpd.server_address[1])

    @property
    def api_base(self) -> str:
        """OpenAI-style base URL, ``http://127.0.0.1:<port>/v1``."""
        return f"http://{self.host}:{self.port}/v1"

    @property
    def running(self) -> bool:
        """Whether the server thread is serving."""
        return self._thread is not None and self._thread.is_alive()

    # -- lifecycle ---------------------------------------------------------------------------------

    def start(self) -> StubServer:
        """Bind the port and serve from a daemon thread (idempotent while running)."""
        if self.running:
            return self
        self._httpd = _HTTPServer((self.host, self.requested_port), self)
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, name="stub-server", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving, close the listening socket and every open connection. Safe to call twice."""
        httpd, thread = self._httpd, self._thread
        if httpd is None:
            return
        httpd.shutdown()
        httpd.server_close()
        with self._lock:
            conns = list(self._conns)
        for conn in conns:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)
        if thread is not None:
            thread.join(5)
        self._thread = None

    def serve_forever(self) -> None:
        """Serve in the calling thread until :meth:`stop` is called from another thread (or Ctrl-C)."""
        self.start()
        assert self._thread is not None
        try:
            while self._thread is not None and self._thread.is_alive():
                self._thread.join(0.5)
        finally:
            self.stop()

    def __enter__(self) -> StubServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def __repr__(self) -> str:
        where = self.api_base if self.running else "stopped"
        return f"StubServer({where}, requests={self.requests}, max_in_flight={self.max_in_flight})"

    # -- used by the handler -----------------------------------------------------------------------

    def reply(self, body: dict[str, Any]) -> str:
        """The reply text for a chat request body."""
        messages = body["messages"]
        text = self.responder(messages, body) if self.responder is not None else None
        return text if text is not None else default_responder(messages, body)

    def _enter(self, body: dict[str, Any]) -> str | None:
        """Count a request; return the fault it gets (``fail`` for the first N), or None."""
        with self._lock:
            self._requests += 1
            self._in_flight += 1
            self._max_in_flight = max(self._max_in_flight, self._in_flight)
            self.last_body = body
            if self._failed < self.fail_first_n:
                self._failed += 1
                self._injected["fail"] += 1
                return "fail"
            if not self.faults:
                return None
            draw = self._fault_rng.random()
            for kind, rate in self.faults.items():
                if draw < rate:
                    self._injected[kind] += 1
                    return kind
                draw -= rate
            return None

    def _delivered(self, usage: dict[str, int]) -> None:
        with self._lock:
            self._delivered_usage.update(usage)
            self._delivered_usage["answers"] += 1

    def _leave(self) -> None:
        with self._lock:
            self._in_flight -= 1

    def _next_id(self) -> str:
        with self._lock:
            return f"chatcmpl-stub-{next(self._ids)}"

    def _track(self, conn: socket.socket, add: bool) -> None:
        with self._lock:
            if add:
                self._conns.add(conn)
            else:
                self._conns.discard(conn)


# --------------------------------------------------------------------------------------------------
# Command line
# --------------------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> None:
    """Run a stub server in the foreground: ``python -m masforge.testing.stub_server --port 8000``."""
    parser = argparse.ArgumentParser(prog="python -m masforge.testing.stub_server", description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0 picks a free port")
    parser.add_argument("--model", default="stub", help="model id listed by /v1/models (unless --alias names it)")
    # llama.cpp's server's flags, so a script running the stub can stand in for it
    parser.add_argument("--alias", default=None, help="model id listed by /v1/models, as llama-server takes it")
    parser.add_argument("--parallel", type=int, default=None, help="slot count GET /props reports")
    for ignored in ("--ctx-size", "--threads", "--threads-batch"):
        parser.add_argument(ignored, type=int, default=None, help="taken as llama-server takes it, and ignored")
    parser.add_argument("--no-webui", action="store_true", help="taken as llama-server takes it, and ignored")
    parser.add_argument("--latency", type=float, default=0.0, help="seconds each chat request takes from its arrival")
    parser.add_argument("--fail-first-n", type=int, default=0)
    parser.add_argument("--fail-status", type=int, default=500)
    parser.add_argument("--faults", type=float, default=0.0, help="share of requests given a fault, spread over "
                        f"every kind ({', '.join(FAULTS)})")
    parser.add_argument("--fault-seed", type=int, default=0)
    args = parser.parse_args(argv)
    stub = StubServer(
        args.latency,
        model=args.alias or args.model,
        slots=args.parallel,
        fail_first_n=args.fail_first_n,
        fail_status=args.fail_status,
        host=args.host,
        port=args.port,
        faults=StubServer.uniform_faults(args.faults) if args.faults else None,
        fault_seed=args.fault_seed,
    )

    def on_sigterm(signum: int, frame: FrameType | None) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, on_sigterm)
    try:
        stub.start()
    except OSError as exc:
        print(f"stub server: cannot bind {args.host}:{args.port}: {exc}", file=sys.stderr, flush=True)
        raise SystemExit(1) from None
    print(f"stub server listening on {stub.api_base} (model {stub.model})", flush=True)
    with contextlib.suppress(KeyboardInterrupt):
        stub.serve_forever()


if __name__ == "__main__":
    main()
