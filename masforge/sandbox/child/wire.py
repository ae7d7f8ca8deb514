"""The sandbox child's wire: JSON lines between its processes, the judge's channel to the parent, values between
worker and judge (plain data, else an opaque handle) and the judge's exit statuses."""

from __future__ import annotations

import base64
import json
import os

TYPE_CHECKING = False  # not importing typing keeps the child's start-up fast
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

_EXIT_OK = 0
_EXIT_FAILED = 1
_EXIT_FATAL = 70
_EXIT_PARENT_GONE = 75
_MAX_DEPTH = 100  # nesting of a value crossing between judge and worker
_MAX_HANDLES = 100_000
_READ_CHUNK = 65536


def _dumps(message: Any) -> bytes:
    return (json.dumps(message) + "\n").encode("utf-8")


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def _too_big(what: str, size: int, limit: int) -> str:
    return f"{what} is {size / 2**20:.1f} MB, over the {limit / 2**20:g} MB limit of the sandbox channel"


class _Lines:
    """JSON lines from a pipe, each at most ``limit`` bytes (a longer one raises ValueError, unread)."""

    def __init__(self, fd: int, limit: int) -> None:
        self.fd, self.limit = fd, limit
        self._buf = bytearray()

    def read(self) -> Any:
        """The next message; None at end of file; ValueError for a line too long or not JSON."""
        while True:
            newline = self._buf.find(b"\n")
            if newline >= 0:
                line = bytes(self._buf[:newline])
                del self._buf[: newline + 1]
                try:
                    return json.loads(line)
                except (ValueError, RecursionError):
                    raise ValueError("a message that is not JSON (or nested too deeply)") from None
            if len(self._buf) > self.limit:
                raise ValueError(_too_big("a message", len(self._buf), self.limit))
            chunk = os.read(self.fd, _READ_CHUNK)
            if not chunk:
                return None
            self._buf += chunk


class _Channel:
    """The judge's line to the parent: RPC requests and the result."""

    def __init__(self, out_fd: int, in_fd: int) -> None:
        self._out = out_fd
        self._in = os.fdopen(in_fd, "rb")

    def send(self, message: dict[str, Any]) -> None:
        """Send one message (raises TypeError/ValueError if it is not JSON-serializable)."""
        _write_all(self._out, _dumps(message))

    def request(self, method: str, args: Any, kwargs: Any) -> Any:
        """Send an RPC request for the worker and return the parent's reply (a dict); exits if the parent is gone."""
        self.send({"type": "rpc", "method": method, "args": args, "kwargs": kwargs})
        line = self._in.readline()
        if not line:
            os._exit(_EXIT_PARENT_GONE)
        return json.loads(line)


# --------------------------------------------------------------------------------------------------
# values between worker and judge: plain data, else an opaque handle


def _exact(value: Any) -> Any:
    """``value`` as its exact built-in type (an int, float or str subclass may override comparisons)."""
    if isinstance(value, bool):
        return bool(value)
    if isinstance(value, int):
        return int.__add__(value, 0)
    if isinstance(value, float):
        return float.__mul__(value, 1.0)  # keeps -0.0 and nan
    return str.__getitem__(value, slice(None))


def _encode(value: Any, handles: dict[int, Any] | None, depth: int = 0) -> Any:
    """``value`` as tagged JSON: plain data is copied, anything else becomes a handle (``handles`` is None: refuse
    it). Subclasses of built-in types are copied as their base type, read with the base type's own methods."""
    if depth > _MAX_DEPTH:
        raise ValueError(f"a value nested deeper than {_MAX_DEPTH} levels")
    kind = type(value)
    if value is None or kind is bool or kind is str:
        return value
    if isinstance(value, (bool, int, float, str)):
        value = _exact(value)
        kind = type(value)
    if kind is int:
        return value if -(2**63) <= value < 2**63 else {"$i": hex(value)}
    if kind is float:
        return value if value - value == 0.0 else {"$f": repr(value)}
    if kind is str:
        return value
    below = depth + 1
    if isinstance(value, complex):
        return {"$c": [_encode(complex.real.__get__(value), None, below),
                       _encode(complex.imag.__get__(value), None, below)]}
    if isinstance(value, (bytes, bytearray)):
        tag = "$b" if isinstance(value, bytes) else "$ba"
        return {tag: base64.b64encode(bytes(value)).decode("ascii")}
    if isinstance(value, list):
        return [_encode(v, handles, below) for v in list.__iter__(value)]
    if isinstance(value, tuple):
        return {"$t": [_encode(v, handles, below) for v in tuple.__iter__(value)]}
    if isinstance(value, dict):
        return {"$d": [[_encode(k, handles, below), _encode(v, handles, below)] for k, v in dict.items(value)]}
    if isinstance(value, frozenset):
        return {"$fs": [_encode(v, handles, below) for v in frozenset.__iter__(value)]}
    if isinstance(value, set):
        return {"$s": [_encode(v, handles, below) for v in set.__iter__(value)]}
    if kind is range:
        return {"$r": [value.start, value.stop, value.step]}
    if kind.__module__ == "numpy" and getattr(value, "shape", None) == () and hasattr(value, "item"):
        return _encode(value.item(), handles, below)  # a numpy scalar: the Python number it holds
    if handles is None:
        raise TypeError(f"a {kind.__name__} object is not plain data")
    if len(handles) >= _MAX_HANDLES:
        raise ValueError(f"more than {_MAX_HANDLES} objects handed out")
    handles[id(value)] = value
    return {"$h": [id(value), kind.__name__[:80]]}


def _decode(data: Any, handle: Callable[[Any], Any], depth: int = 0) -> Any:
    """The value of tagged JSON (ValueError/TypeError for anything malformed); ``handle(tag)`` resolves handles."""
    if depth > _MAX_DEPTH:
        raise ValueError(f"a value nested deeper than {_MAX_DEPTH} levels")
    if data is None or type(data) in (bool, int, float, str):
        return data
    below = depth + 1
    if type(data) is list:
        return [_decode(v, handle, below) for v in data]
    if type(data) is not dict or len(data) != 1:
        raise ValueError("a malformed value")
    ((tag, body),) = data.items()
    if tag == "$i" and type(body) is str:
        return int(body, 16)
    if tag == "$f" and body in ("nan", "inf", "-inf"):
        return float(body)
    if tag == "$c" and type(body) is list and len(body) == 2:
        return complex(*(float(_decode(v, handle, below)) for v in body))
    if tag in ("$b", "$ba") and type(body) is str:
        raw = base64.b64decode(body.encode("ascii"), validate=True)
        return raw if tag == "$b" else bytearray(raw)
    if tag == "$r" and type(body) is list and len(body) == 3 and all(type(v) is int for v in body):
        return range(*body)
    if tag == "$h":
        return handle(body)
    if type(body) is not list:
        raise ValueError("a malformed value")
    if tag == "$t":
        return tuple(_decode(v, handle, below) for v in body)
    if tag == "$s":
        return {_decode(v, handle, below) for v in body}
    if tag == "$fs":
        return frozenset(_decode(v, handle, below) for v in body)
    if tag == "$d" and all(type(p) is list and len(p) == 2 for p in body):
        return {_decode(k, handle, below): _decode(v, handle, below) for k, v in body}
    raise ValueError("a malformed value")
