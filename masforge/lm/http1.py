"""A keep-alive HTTP/1.1 client connection for one POST at a time: what masforge needs from an OpenAI-compatible
server and nothing more.

Why not ``http.client``: with 64 calls in flight the calls share one GIL, and ``http.client`` reads a reply's
headers through the ``email`` package's feed parser, about a fifth of masforge's CPU per LM call
(``bench/concurrency.py``). Why not h11 (kept by httpx): measured there, it costs more CPU per call for the same
bounds (see the commit that added the deadline). Here a request goes out in one write, and a reply's status line
and headers are split from one buffer; the body is read by ``Content-Length``, chunk by chunk, or up to the
server's close.

A server is not trusted to be well-behaved. One deadline bounds the whole request (connect, send, headers, body,
trailers), not each read, so a server that trickles a byte at a time cannot hold a call past it. Header and
trailer lines, interim (1xx) replies and chunks are counted and capped, and a body grows in one buffer, never one
object per chunk, so memory stays near the body limit and CPU near the bytes received.
"""

from __future__ import annotations

import re
import socket
import ssl
import time

MAX_HEAD_BYTES = 64 * 1024
"""Status line and headers (or trailers) larger than this are not an HTTP reply masforge can use."""
MAX_HEADER_LINES = 200
"""Header (or trailer) lines of one reply, at most: real servers send a few dozen."""
MAX_INTERIM = 16
"""Interim (1xx) replies before the real one, at most."""
MAX_CHUNKS = 65_536
"""Chunks of one chunked body, at most: tiny chunks cost parsing per chunk, and no server answering a whole (not
streamed) reply needs this many."""
MAX_CHUNK_LINE = 4096
"""A chunk-size line (size and extensions), at most."""
_RECV = 256 * 1024
_HEX = re.compile(rb"[0-9A-Fa-f]{1,16}")
_DIGITS = re.compile(r"[0-9]{1,18}")


class ProtocolError(ConnectionError):
    """The server's reply is not HTTP/1.x, or breaks one of this client's bounds (a broken or hostile server): the
    connection cannot be reused."""


class TooLarge(Exception):
    """The reply's body is larger than the caller's limit (nothing more is read)."""


class Reply:
    """A reply: status, reason, headers (names in lower case; a repeated header keeps its values joined by ", ")
    and body; ``will_close`` when the server ends the connection after it."""

    __slots__ = ("status", "reason", "headers", "body", "will_close")

    def __init__(self, status: int, reason: str, headers: dict[str, str], body: bytes | bytearray,
                 will_close: bool) -> None:
        self.status = status
        self.reason = reason
        self.headers = headers
        self.body = body
        self.will_close = will_close


class Connection:
    """One TCP (or TLS) connection to ``host:port``; :meth:`post` sends a request and reads its whole reply.
    ``timeout``: seconds the connection (TCP and TLS handshakes) may take, and each :meth:`post` by default."""

    def __init__(self, host: str, port: int, timeout: float, context: ssl.SSLContext | None = None) -> None:
        self.host = host
        self.timeout = timeout
        named = f"[{host}]" if ":" in host else host  # an IPv6 address is bracketed in a Host header
        self.host_header = named if port == (443 if context is not None else 80) else f"{named}:{port}"
        sock = socket.create_connection((host, port), timeout=timeout)
        try:
            # Nagle would hold a second segment back for an ACK; requests go out in one write, but a large one
            # spans segments.
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if context is not None:
                sock = context.wrap_socket(sock, server_hostname=host)  # the handshake, under the same timeout
        except BaseException:
            sock.close()
            raise
        self.sock: socket.socket | None = sock
        self._buf = bytearray()
        self._deadline = 0.0

    def idle_and_open(self) -> bool:
        """Whether the connection can carry another request: open, nothing unread, and the server has not closed
        it or sent anything since (readable while idle means either)."""
        import select

        sock = self.sock
        if sock is None or self._buf:
            return False
        if isinstance(sock, ssl.SSLSocket) and sock.pending():
            return False
        try:
            return not select.select([sock], [], [], 0)[0]
        except (OSError, ValueError):
            return False

    def close(self) -> None:
        sock, self.sock = self.sock, None
        self._buf.clear()
        if sock is not None:
            try:
                sock.close()
            except OSError:
                pass

    def post(self, path: str, body: bytes, headers: dict[str, str], max_body: int,
             deadline: float | None = None) -> Reply:
        """POST ``body`` to ``path`` and read the whole reply by ``deadline`` (a :func:`time.monotonic` time;
        default: the connection's timeout from now). Socket errors propagate, and :class:`TimeoutError` when the
        deadline passes (the connection is then unusable: close it); a body larger than ``max_body`` raises
        :class:`TooLarge`; a reply that is not HTTP, or passes a bound of this module, :class:`ProtocolError`."""
        if self.sock is None:
            raise ConnectionError("the connection is closed")
        self._deadline = time.monotonic() + self.timeout if deadline is None else deadline
        lines = [f"POST {path} HTTP/1.1", f"Host: {self.host_header}", f"Content-Length: {len(body)}",
                 "Accept-Encoding: identity"]
        lines += [f"{k}: {v}" for k, v in headers.items()]
        if any("\r" in line or "\n" in line for line in lines):  # a key read with its newline, say
            raise ValueError("a request header or path holds a line break; strip the value (an API key?)")
        self.sock.settimeout(self._left())  # sendall's timeout bounds the whole send
        self.sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body)
        for _ in range(MAX_INTERIM + 1):
            version, status, reason, fields = self._head()
            if not 100 <= status < 200:  # 1xx replies (100 Continue, 103 Early Hints) come before the real one
                break
        else:
            raise ProtocolError(f"more than {MAX_INTERIM} interim (1xx) replies")
        if fields.get("content-encoding", "identity").strip().lower() not in ("identity", ""):
            raise ProtocolError(f"the reply is encoded ({fields['content-encoding']}); masforge asked for none")
        keep = fields.get("connection", "").lower()
        will_close = "close" in keep or (version == "HTTP/1.0" and "keep-alive" not in keep)
        if status in (204, 304):
            return Reply(status, reason, fields, b"", will_close)
        data: bytes | bytearray
        if "chunked" in fields.get("transfer-encoding", "").lower():
            data = self._chunked(max_body)
        elif "content-length" in fields:
            values = {v.strip() for v in fields["content-length"].split(",")}
            if len(values) != 1 or not _DIGITS.fullmatch(next(iter(values))):
                raise ProtocolError(f"bad Content-Length {fields['content-length']!r}")
            length = int(next(iter(values)))
            if length > max_body:
                raise TooLarge(length)
            data = self._exactly(length)
        else:  # the body ends where the server closes the connection
            data = self._until_close(max_body)
            will_close = True
        return Reply(status, reason, fields, data, will_close)

    # -- reading --------------------------------------------------------------------------------

    def _left(self) -> float:
        """Seconds left before the request's deadline (TimeoutError once it has passed)."""
        left = self._deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError("the reply did not end by the request's deadline")
        return left

    def _recv(self) -> bytes:
        """What the server sends next (b"" when it closed), waiting no later than the deadline."""
        assert self.sock is not None
        self.sock.settimeout(self._left())
        return self.sock.recv(_RECV)

    def _fill(self) -> None:
        chunk = self._recv()
        if not chunk:
            raise ConnectionError("the server closed the connection before its reply ended")
        self._buf += chunk

    def _head(self) -> tuple[str, int, str, dict[str, str]]:
        while True:
            end = self._buf.find(b"\r\n\r\n")
            if end >= 0:
                break
            if len(self._buf) > MAX_HEAD_BYTES:
                raise ProtocolError(f"reply headers larger than {MAX_HEAD_BYTES // 1024} KB")
            self._fill()
        if end > MAX_HEAD_BYTES:
            raise ProtocolError(f"reply headers larger than {MAX_HEAD_BYTES // 1024} KB")
        head = self._buf[:end].decode("latin-1")
        del self._buf[:end + 4]
        status_line, *header_lines = head.split("\r\n")
        parts = status_line.split(" ", 2)
        if len(parts) < 2 or not parts[0].startswith("HTTP/1.") or not _DIGITS.fullmatch(parts[1]) or \
                len(parts[1]) != 3:
            raise ProtocolError(f"not an HTTP/1.x reply: {status_line[:80]!r}")
        if len(header_lines) > MAX_HEADER_LINES:
            raise ProtocolError(f"more than {MAX_HEADER_LINES} header lines")
        fields: dict[str, str] = {}
        for line in header_lines:
            name, sep, value = line.partition(":")
            if not sep:
                continue
            name = name.strip().lower()
            value = value.strip()
            fields[name] = f"{fields[name]}, {value}" if name in fields else value
        return parts[0], int(parts[1]), parts[2].strip() if len(parts) > 2 else "", fields

    def _exactly(self, n: int) -> bytearray:
        while len(self._buf) < n:
            self._fill()
        if len(self._buf) == n:  # the usual case: the body is all that was read, handed over without a copy
            data, self._buf = self._buf, bytearray()
            return data
        data = self._buf[:n]
        del self._buf[:n]
        return data

    def _line(self, limit: int, what: str) -> bytearray:
        """The next line (without its CRLF), at most ``limit`` bytes long."""
        while (end := self._buf.find(b"\r\n", 0, limit + 2)) < 0:
            if len(self._buf) >= limit + 2:
                raise ProtocolError(f"{what} longer than {limit} bytes")
            self._fill()
        line = self._buf[:end]
        del self._buf[:end + 2]
        return line

    def _chunked(self, max_body: int) -> bytearray:
        body = bytearray()
        buf = self._buf
        for _ in range(MAX_CHUNKS):
            size_text = bytes(self._line(MAX_CHUNK_LINE, "a chunk-size line")).split(b";", 1)[0].strip()
            if not _HEX.fullmatch(size_text):
                raise ProtocolError(f"bad chunk size {size_text[:20]!r}")
            size = int(size_text, 16)
            if size == 0:
                self._trailers()
                return body
            if len(body) + size > max_body:
                raise TooLarge(len(body) + size)
            while len(buf) < size + 2:
                self._fill()
            if buf[size:size + 2] != b"\r\n":
                raise ProtocolError("a chunk without its line end")
            body += memoryview(buf)[:size]
            del buf[:size + 2]
        raise ProtocolError(f"more than {MAX_CHUNKS} chunks in one reply")

    def _trailers(self) -> None:
        """Skip the trailer fields after a chunked body, up to the blank line (bounded like the headers)."""
        used = 0
        for _ in range(MAX_HEADER_LINES + 1):
            line = self._line(MAX_HEAD_BYTES, "a trailer line")
            if not line:
                return
            used += len(line) + 2
            if used > MAX_HEAD_BYTES:
                break
        raise ProtocolError(f"trailers longer than {MAX_HEADER_LINES} lines or {MAX_HEAD_BYTES // 1024} KB")

    def _until_close(self, max_body: int) -> bytearray:
        while len(self._buf) <= max_body:
            chunk = self._recv()
            if not chunk:
                break
            self._buf += chunk
        if len(self._buf) > max_body:
            raise TooLarge(len(self._buf))
        data, self._buf = self._buf, bytearray()
        return data
