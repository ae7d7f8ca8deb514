"""masforge.lm.http1: the HTTP/1.1 client connection the direct endpoint path uses, against a raw socket server
that answers each request with bytes given by the test (every framing a server may use)."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from masforge.lm.endpoint import Endpoint, EndpointError
from masforge.lm.http1 import Connection, ProtocolError, TooLarge


@contextmanager
def raw_server(replies: list[bytes], *, close_after: bool = False) -> Iterator[tuple[int, list[bytes]]]:
    """Serves ``replies`` in order, one per request read (a request ends after its Content-Length body), on one
    connection after another; ``close_after``: close each connection after its reply."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    requests: list[bytes] = []
    queue = list(replies)

    def read_request(conn: socket.socket) -> bytes | None:
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = conn.recv(65536)
            if not chunk:
                return None
            data += chunk
        head, _, body = data.partition(b"\r\n\r\n")
        length = next(int(line.split(b":")[1]) for line in head.split(b"\r\n")
                      if line.lower().startswith(b"content-length"))
        while len(body) < length:
            body += conn.recv(65536)
        return head + b"\r\n\r\n" + body

    def serve() -> None:
        while queue:
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            with conn:
                while queue:
                    request = read_request(conn)
                    if request is None:
                        break
                    requests.append(request)
                    conn.sendall(queue.pop(0))
                    if close_after:
                        break

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield listener.getsockname()[1], requests
    finally:
        listener.close()


OK_JSON = b'{"choices": [{"message": {"content": "hi"}}], "usage": {"prompt_tokens": 3, "completion_tokens": 1}}'


def sized(body: bytes, extra: str = "") -> bytes:
    return f"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n{extra}Content-Length: {len(body)}\r\n\r\n" \
        .encode() + body


def test_a_sized_reply_is_read_and_the_connection_kept_for_the_next_request() -> None:
    with raw_server([sized(b"one"), sized(b"two")]) as (port, requests):
        conn = Connection("127.0.0.1", port, 5)
        first = conn.post("/v1/chat/completions", b'{"a": 1}', {"Content-Type": "application/json"}, 1000)
        assert (first.status, first.reason, first.body, first.will_close) == (200, "OK", b"one", False)
        assert first.headers["content-type"] == "application/json"
        assert conn.idle_and_open()
        second = conn.post("/v1/chat/completions", b"{}", {}, 1000)
        assert second.body == b"two"
        conn.close()
    assert requests[0].startswith(f"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n".encode())
    assert requests[0].endswith(b'\r\n\r\n{"a": 1}') and b"Content-Length: 8\r\n" in requests[0]


def test_chunked_replies_with_extensions_and_trailers_are_joined() -> None:
    reply = (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
             b"5;name=x\r\nhello\r\n6\r\n world\r\n0\r\nX-Trailer: 1\r\n\r\n")
    with raw_server([reply, sized(b"after")]) as (port, _):
        conn = Connection("127.0.0.1", port, 5)
        assert conn.post("/", b"", {}, 1000).body == b"hello world"
        assert conn.post("/", b"", {}, 1000).body == b"after"  # nothing of the first reply is left over
        conn.close()


def test_continue_replies_are_skipped_and_close_delimited_bodies_read_to_the_end() -> None:
    reply = b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.0 200 OK\r\nContent-Type: text/plain\r\n\r\nall of it"
    with raw_server([reply], close_after=True) as (port, _):
        conn = Connection("127.0.0.1", port, 5)
        got = conn.post("/", b"x", {}, 1000)
        assert (got.status, got.body, got.will_close) == (200, b"all of it", True)
        conn.close()


def test_connection_close_and_repeated_headers() -> None:
    reply = sized(b"{}", "Connection: close\r\nX-Seen: a\r\nx-seen: b\r\n")
    with raw_server([reply], close_after=True) as (port, _):
        conn = Connection("127.0.0.1", port, 5)
        got = conn.post("/", b"", {}, 1000)
        assert got.will_close and got.headers["x-seen"] == "a, b"
        conn.close()


@pytest.mark.parametrize("reply", [
    sized(b"x" * 2000),
    b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n7d0\r\n" + b"x" * 2000 + b"\r\n0\r\n\r\n",
])
def test_a_body_over_the_limit_is_refused(reply: bytes) -> None:
    with raw_server([reply]) as (port, _):
        conn = Connection("127.0.0.1", port, 5)
        with pytest.raises(TooLarge):
            conn.post("/", b"", {}, 1000)
        conn.close()


@pytest.mark.parametrize("reply", [b"SSH-2.0-OpenSSH\r\n\r\n", b"HTTP/1.1 200 OK\r\nContent-Length: ten\r\n\r\n",
                                   b"HTTP/1.1 200 OK\r\nContent-Length: -5\r\n\r\nabc",
                                   b"HTTP/1.1 200 OK\r\nContent-Length: 1_0\r\n\r\nabc",
                                   b"HTTP/1.1 200 OK\r\nContent-Length: 3, 5\r\n\r\nabc",
                                   b"HTTP/1.1 2\xc2\xb200 OK\r\nContent-Length: 0\r\n\r\n",
                                   b"HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\nContent-Length: 3\r\n\r\nabc",
                                   b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n-7\r\nabc\r\n0\r\n\r\n",
                                   b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n"])
def test_a_reply_that_is_not_http_is_a_protocol_error(reply: bytes) -> None:
    with raw_server([reply]) as (port, _):
        conn = Connection("127.0.0.1", port, 5)
        with pytest.raises(ProtocolError):
            conn.post("/", b"", {}, 1000)
        conn.close()


def test_a_reply_cut_short_is_a_connection_error() -> None:
    with raw_server([b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nshort"], close_after=True) as (port, _):
        conn = Connection("127.0.0.1", port, 5)
        with pytest.raises(ConnectionError):
            conn.post("/", b"", {}, 1000)
        conn.close()


def test_an_idle_connection_the_server_closed_is_not_reused() -> None:
    with raw_server([sized(b"one")], close_after=True) as (port, _):
        conn = Connection("127.0.0.1", port, 5)
        conn.post("/", b"", {}, 1000)
        for _ in range(100):  # the server's close reaches us
            if not conn.idle_and_open():
                break
            threading.Event().wait(0.01)
        assert not conn.idle_and_open()
        conn.close()


def test_the_endpoint_reads_errors_and_retry_after_through_it() -> None:
    limited = (b'HTTP/1.1 429 Too Many Requests\r\nRetry-After: 7\r\nContent-Length: 35\r\n\r\n'
               b'{"error": {"message": "slow down"}}')
    with raw_server([limited, sized(OK_JSON)]) as (port, _):
        ep = Endpoint(f"http://127.0.0.1:{port}/v1")
        with pytest.raises(EndpointError) as err:
            ep.chat({"model": "m", "messages": []}, None, 5)
        assert (err.value.status_code, err.value.retry_after, err.value.kind) == (429, 7.0, "rate_limit")
        assert "slow down" in str(err.value)
        assert ep.chat({"model": "m", "messages": []}, "sk-x", 5)["choices"][0]["message"]["content"] == "hi"


def test_a_header_value_with_a_line_break_is_refused_before_anything_is_sent() -> None:
    with raw_server([sized(b"{}")]) as (port, requests):
        conn = Connection("127.0.0.1", port, 5)
        with pytest.raises(ValueError, match="line break"):
            conn.post("/", b"{}", {"Authorization": "Bearer sk-abc\n"}, 1000)
        assert conn.post("/", b"{}", {}, 1000).body == b"{}"  # nothing half-sent on the connection
        conn.close()
    assert len(requests) == 1 and b"Accept-Encoding: identity\r\n" in requests[0]
