"""A keep-alive HTTP/1.1 client connection for one POST at a time: what masforge needs from an OpenAI-compatible
server and nothing more.

Why not ``http.client``: with 64 calls in flight the calls share one GIL, and ``http.client`` reads a reply's
headers through the ``email`` package's feed parser, about a fifth of masforge's CPU per LM call
(``bench/concurrency.py``). Here a request goes out in one write, and a reply's status line and headers are split
from one buffer; the body is read by ``Content-Length``, chunk by chunk, or up to the server's close.
"""

from __future__ import annotations

import re
import socket
import ssl

MAX_HEAD_BYTES = 64 * 1024
"""Status line and headers larger than this are not an HTTP reply masforge can use."""
_RECV = 256 * 1024
_HEX = re.compile(rb"[0-9A-Fa-f]{1,16}")
_DIGITS = re.compile(r"[0-9]{1,18}")


class ProtocolError(ConnectionError):
    """The server's reply is not HTTP/1.x (a broken or foreign server): the connection cannot be reused."""


class TooLarge(Exception):
    """The reply's body is larger than the caller's limit (nothing more is read)."""


class Reply:
    """A reply: status, reason, headers (names in lower case; a repeated header keeps its values joined by ", ")
    and body; ``will_close`` when the server ends the connection after it."""

    __slots__ = ("status", "reason", "headers", "body", "will_close")

    def __init__(self, status: int, reason: str, headers: dict[str, str], body: bytes, will_close: bool) -> None:
        self.status = status
        self.reason = reason
        self.headers = headers
        self.body = body
        self.will_close = will_close


class Connection:
    """One TCP (or TLS) connection to ``host:port``; :meth:`post` sends a request and reads its whole reply."""

    def __init__(self, host: str, port: int, timeout: float, context: ssl.SSLContext | None = None) -> None:
        self.host = host
        named = f"[{host}]" if ":" in host else host  # an IPv6 address is bracketed in a Host header
        self.host_header = named if port == (443 if context is not None else 80) else f"{named}:{port}"
        sock = socket.create_connection((host, port), timeout=timeout)
        try:
            # Nagle would hold a second segment back for an ACK; requests go out in one write, but a large one
            # spans segments.
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if context is not None:
                sock = context.wrap_socket(sock, server_hostname=host)
        except BaseException:
            sock.close()
            raise
        self.sock: socket.socket | None = sock
        self._buf = bytearray()

    def settimeout(self, timeout: float) -> None:
        if self.sock is not None:
            self.sock.settimeout(timeout)

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

    def post(self, path: str, body: bytes, headers: dict[str, str], max_body: int) -> Reply:
        """POST ``body`` to ``path`` and read the reply. Socket errors and timeouts propagate (the connection is
        then unusable: close it); a body larger than ``max_body`` raises :class:`TooLarge`."""
        if self.sock is None:
            raise ConnectionError("the connection is closed")
        lines = [f"POST {path} HTTP/1.1", f"Host: {self.host_header}", f"Content-Length: {len(body)}",
                 "Accept-Encoding: identity"]
        lines += [f"{k}: {v}" for k, v in headers.items()]
        if any("\r" in line or "\n" in line for line in lines):  # a key read with its newline, say
            raise ValueError("a request header or path holds a line break; strip the value (an API key?)")
        self.sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body)
        while True:
            version, status, reason, fields = self._head()
            if not 100 <= status < 200:  # 1xx replies (100 Continue) come before the real one
                break
        if fields.get("content-encoding", "identity").strip().lower() not in ("identity", ""):
            raise ProtocolError(f"the reply is encoded ({fields['content-encoding']}); masforge asked for none")
        keep = fields.get("connection", "").lower()
        will_close = "close" in keep or (version == "HTTP/1.0" and "keep-alive" not in keep)
        if status in (204, 304):
            return Reply(status, reason, fields, b"", will_close)
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

    def _fill(self) -> None:
        assert self.sock is not None
        chunk = self.sock.recv(_RECV)
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
        head = bytes(self._buf[:end]).decode("latin-1")
        del self._buf[:end + 4]
        status_line, *header_lines = head.split("\r\n")
        parts = status_line.split(" ", 2)
        if len(parts) < 2 or not parts[0].startswith("HTTP/1.") or not _DIGITS.fullmatch(parts[1]) or \
                len(parts[1]) != 3:
            raise ProtocolError(f"not an HTTP/1.x reply: {status_line[:80]!r}")
        fields: dict[str, str] = {}
        for line in header_lines:
            name, sep, value = line.partition(":")
            if not sep:
                continue
            name = name.strip().lower()
            value = value.strip()
            fields[name] = f"{fields[name]}, {value}" if name in fields else value
        return parts[0], int(parts[1]), parts[2].strip() if len(parts) > 2 else "", fields

    def _exactly(self, n: int) -> bytes:
        while len(self._buf) < n:
            self._fill()
        data = bytes(self._buf[:n])
        del self._buf[:n]
        return data

    def _line(self) -> bytes:
        while (end := self._buf.find(b"\r\n")) < 0:
            if len(self._buf) > MAX_HEAD_BYTES:
                raise ProtocolError("a chunk header without an end")
            self._fill()
        line = bytes(self._buf[:end])
        del self._buf[:end + 2]
        return line

    def _chunked(self, max_body: int) -> bytes:
        parts: list[bytes] = []
        total = 0
        while True:
            size_text = self._line().split(b";", 1)[0].strip()
            if not _HEX.fullmatch(size_text):
                raise ProtocolError(f"bad chunk size {size_text[:20]!r}")
            size = int(size_text, 16)
            if size == 0:
                while self._line():  # trailer fields, up to the blank line
                    pass
                return b"".join(parts)
            total += size
            if total > max_body:
                raise TooLarge(total)
            parts.append(self._exactly(size))
            if self._exactly(2) != b"\r\n":
                raise ProtocolError("a chunk without its line end")

    def _until_close(self, max_body: int) -> bytes:
        assert self.sock is not None
        while len(self._buf) <= max_body:
            chunk = self.sock.recv(_RECV)
            if not chunk:
                break
            self._buf += chunk
        if len(self._buf) > max_body:
            raise TooLarge(len(self._buf))
        data = bytes(self._buf)
        self._buf.clear()
        return data
