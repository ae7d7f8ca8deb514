"""Secrets never leave the process: text is redacted before masforge writes it anywhere.

Providers echo keys back in error bodies (a 401 that quotes the key), exceptions carry headers, and a search
stores every failure for the meta-agent to learn from. :func:`redact` replaces, in any text:

* the values of secret-looking environment variables (``*_API_KEY``, ``*_TOKEN``, ``*_SECRET``, ...) and of
  secrets the configuration hands to :func:`register_secret`, and the ways an echo may change them: split by
  white space, line breaks, quotes or ``+`` (``sk-test- PLANTED...``), percent-encoded in whole or in part, or
  base64-encoded (also inside a longer base64 text, such as a Basic credential);
* ``Authorization: ...`` header values and ``Bearer ...`` tokens;
* key-shaped tokens (``sk-...``, ``sk-ant-...``, ``AIza...``, ``gsk_...``, ``hf_...``, ``ghp_...``, ``AKIA...``,
  ``xai-...``) and ``api_key=...``-style assignments;
* passwords in URLs (``https://user:secret@host`` -> ``https://[REDACTED]@host``).

It is applied at the write boundaries: when an :class:`~masforge.errors.LMError` is made, when an example's
error and trace are recorded, and in the archive (git objects and the SQLite index), ``events.jsonl``, the
run summary and configuration, reports, exports and the CLI's error lines.
"""

from __future__ import annotations

import base64
import json
import os
import re
import threading
from typing import Any, TypeVar
from urllib.parse import unquote_to_bytes

T = TypeVar("T")

REDACTED = "[REDACTED]"
MIN_SECRET_LEN = 8  # shorter values (flags, "1", "none") would redact ordinary words

_SECRET_ENV = re.compile(r"(API_?KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL|ACCESS_?KEY|AUTH)", re.I)
# A token: the alphabet keys are written in, at least 12 characters, at least one digit. The digit keeps code
# (`api_key=api_key`, `f"Bearer {key}"`) and prose ("bearer tokens") from being taken for a key.
_TOKEN = r"(?=[A-Za-z0-9._~+/=-]*[0-9])[A-Za-z0-9._~+/=-]{12,}"
_KEY_WORDS = tuple(f"{a}{sep}{b}" for a, b in (("api", "key"), ("access", "token"), ("auth", "token"),
                                                ("secret", "key"), ("client", "secret")) for sep in ("_", "-", ""))
# Each pattern comes with lower-case literals one of which any match contains: plain substring tests (in C) skip
# the regexes for the vast majority of text, which holds no secret at all.
_PATTERNS: list[tuple[re.Pattern[str], str, tuple[str, ...]]] = [
    (re.compile(r"(?i)\b(proxy-)?(authorization|x-api-key|api-key|x-goog-api-key)(\"?\s*[:=]\s*\"?)"
                r"((?:bearer|basic|token)\s+)?" + _TOKEN), r"\1\2\3\4" + REDACTED, ("authorization", "api-key")),
    (re.compile(r"(?i)\b(bearer\s+)" + _TOKEN), r"\1" + REDACTED, ("bearer",)),
    (re.compile(r"(?i)\b(api[_-]?key|access[_-]?token|auth[_-]?token|secret[_-]?key|client[_-]?secret)"
                r"([\"']?\s*[:=]\s*[\"']?)" + _TOKEN), r"\1\2" + REDACTED, _KEY_WORDS),
    (re.compile(r"\b(sk|pk|rk)-[A-Za-z0-9_-]{16,}"), REDACTED, ("sk-", "pk-", "rk-")),
    (re.compile(r"\bAIza[0-9A-Za-z_-]{30,}"), REDACTED, ("aiza",)),
    (re.compile(r"\b(gsk|hf|ghp|gho|ghu|ghs|ghr|glpat|xai|r8|sk_live|rk_live|pplx)[_-][A-Za-z0-9]{20,}"), REDACTED,
     tuple(f"{p}{sep}" for p in ("gsk", "hf", "ghp", "gho", "ghu", "ghs", "ghr", "glpat", "xai", "r8", "sk_live",
                                  "rk_live", "pplx") for sep in "_-")),
    (re.compile(r"\bxox[abprs]-[A-Za-z0-9-]{10,}"), REDACTED, ("xox",)),
    (re.compile(r"\b(AKIA|ASIA)[0-9A-Z]{16}\b"), REDACTED, ("akia", "asia")),
    (re.compile(r"(?<=://)[^/\s:@\"']+:[^/\s@\"']+@"), REDACTED + "@", ("://",)),
]
_TRIGGERS = tuple(sorted({t for _, _, triggers in _PATTERNS for t in triggers}))

_registered: set[str] = set()
_lock = threading.Lock()
_cache: tuple[frozenset[str], _Secrets | None] = (frozenset(), None)


def register_secret(value: str | None) -> None:
    """Redact ``value`` from now on (an API key the configuration resolved, a server's own key, ...)."""
    if value and len(value) >= MIN_SECRET_LEN:
        with _lock:
            _registered.add(value)


def _env_secret(name: str, value: str) -> bool:
    # Paths (SSH_AUTH_SOCK, XAUTHORITY, *_TOKEN_FILE) name where a secret is, they are not one.
    return len(value) >= MIN_SECRET_LEN and not value.startswith(("/", "~", "./")) and bool(_SECRET_ENV.search(name))


_env_seen: tuple[dict[Any, Any], frozenset[str]] | None = None


def _env_secrets() -> frozenset[str]:
    """The secret-looking values of the environment. Decoding and testing every variable costs ~0.7 ms, paid
    on every redaction (two per LM call at 64 in flight: a tenth of masforge's time there); the environment
    rarely changes, so the answer is kept until the raw environment differs (one C-level dict comparison)."""
    global _env_seen
    raw = getattr(os.environ, "_data", None)
    seen = _env_seen
    if isinstance(raw, dict) and seen is not None and seen[0] == raw:
        return seen[1]
    found = frozenset(v for k, v in os.environ.items() if _env_secret(k, v))
    if isinstance(raw, dict):
        _env_seen = (dict(raw), found)
    return found


def secret_values() -> frozenset[str]:
    """The exact values redacted: secret-looking environment variables and registered secrets."""
    found = set(_env_secrets())
    with _lock:
        found |= _registered
    return frozenset(found)


# Between two characters of a secret, what an echo may have put: white space, a line break (also as the escape
# JSON writes, or percent-encoded), a zero-width character, quotes, commas and + (a key split across string
# literals), at most a few.
_GAP_CHARS = " \t\n\r\f\v\u200b\u200c\u200d\u2060\ufeff\"'+,"
_GAP = "(?:[" + re.escape(_GAP_CHARS) + r"]|\\[nrt\"]|%(?:20|0[9aAdD]|2[27bBcC])){0,8}"
_GAP_BYTES = "".join(c for c in _GAP_CHARS if c.isascii()).encode("ascii")
_WIDE_GAPS = tuple(c.encode("utf-8") for c in _GAP_CHARS if not c.isascii())
MIN_BASE64_CHARS = 10
"""A secret's base64 form is redacted from this many characters of it that do not depend on the bytes around."""


def _char_forms(c: str) -> str:
    """One character of a secret as a regex: itself, or percent-encoded (hex digits in either case)."""
    encoded = "".join(f"%{b:02X}" for b in c.encode("utf-8"))
    either = "".join(f"[{h}{h.lower()}]" if h.isalpha() else re.escape(h) for h in encoded)
    return f"(?:{re.escape(c)}|{either})"


def _base64_forms(value: str) -> set[str]:
    """The parts of ``value``'s base64 (and base64url) encodings that are the same wherever it stands in the
    encoded bytes: for each of the 3 offsets in a 3-byte group, the characters made of its bits alone."""
    raw = value.encode("utf-8")
    forms = set()
    for offset in range(3):
        text = base64.b64encode(b"\0" * offset + raw).decode("ascii")
        first = -(-8 * offset // 6)  # the first character whose 6 bits all come from the value
        last = 8 * (offset + len(raw)) // 6  # one past the last such character
        core = text[first:last]
        if len(core) >= MIN_BASE64_CHARS:
            forms |= {core, core.replace("+", "-").replace("/", "_")}
    return forms


class _Secrets:
    """The secret values and every form of them :func:`redact` replaces. The regex of all forms is slow (tried at
    every position: ~40 us a KB), so a text is first checked in C for a form (the values and their base64 forms
    as they are; the values in the text with its gap characters dropped and percent-escapes decoded): nearly
    every text holds none and is passed over at once."""

    def __init__(self, values: frozenset[str]) -> None:
        self.values = sorted(values, key=len, reverse=True)  # longest first: a key holding another goes whole
        self.squeezed = [_squeeze(v.encode("utf-8", "surrogatepass")) for v in self.values]
        self.encoded = sorted({form for v in self.values for form in _base64_forms(v)}, key=len, reverse=True)
        split = ["|".join(_GAP.join(_char_forms(c) for c in v) for v in self.values)]
        self.pattern = re.compile("|".join(split + [re.escape(form) for form in self.encoded]))

    def _maybe_in(self, text: str) -> bool:
        if any(form in text for form in self.encoded):
            return True
        squeezed = _squeeze(text.encode("utf-8", "surrogatepass"))  # bytes: translate is 3x faster on them
        if b"%" in squeezed:
            squeezed = _squeeze(unquote_to_bytes(squeezed))
        return any(v in squeezed for v in self.squeezed)

    def sub(self, text: str) -> str:
        """``text`` with every form of every secret replaced by ``[REDACTED]``."""
        return self.pattern.sub(REDACTED, text) if self._maybe_in(text) else text


def _squeeze(data: bytes) -> bytes:
    """``data`` without the characters an echo may put inside a secret (see ``_GAP``)."""
    if b"\\" in data:  # a line break or quote as JSON escapes it
        for escape in (b"\\n", b"\\r", b"\\t", b'\\"'):
            data = data.replace(escape, b"")
    if not data.isascii():
        for wide in _WIDE_GAPS:
            data = data.replace(wide, b"")
    return data.translate(None, _GAP_BYTES)


def _values_pattern() -> _Secrets | None:
    global _cache
    values = secret_values()
    if values != _cache[0]:
        _cache = (values, _Secrets(values) if values else None)
    return _cache[1]


def _redact_with(values: _Secrets | None, text: str) -> str:
    if values is not None:
        text = values.sub(text)
    lower = text.lower()
    found = [t for t in _TRIGGERS if t in lower]
    if not found:
        return text  # the common case: a few substring scans in C, no pattern can match
    for pattern, repl, triggers in _PATTERNS:
        if any(t in found for t in triggers):
            text = pattern.sub(repl, text)
    return text


def redact(text: str) -> str:
    """``text`` with every secret replaced by ``[REDACTED]`` (idempotent; non-strings are returned as is)."""
    if not isinstance(text, str) or not text:
        return text
    return _redact_with(_values_pattern(), text)


def redact_secret_values(text: str) -> str:
    """``text`` with only the secret values (keys in the environment, registered secrets, and their split or
    encoded forms) replaced: for text that must otherwise stay as it is, such as an LM's answer before it is
    cached and scored."""
    values = _values_pattern()
    if not isinstance(text, str) or not text or values is None:
        return text
    return values.sub(text)


def redact_data(value: T) -> T:
    """JSON-like ``value`` (dicts, lists, tuples, strings) with every string redacted, keys included: the value
    itself when nothing needed redacting, else a redacted copy (the caller's data is never changed).

    The data is scanned as one JSON text (far faster than string by string: records hold hundreds of short
    strings); a structure JSON cannot express is walked instead, iteratively and to a bounded depth."""
    if isinstance(value, str):
        return redact(value)  # type: ignore[return-value]
    if not isinstance(value, dict | list | tuple):
        return value
    values = _values_pattern()  # once per call: scanning the environment per string would dominate
    try:
        text = json.dumps(value, ensure_ascii=False, default=str)
    except (TypeError, ValueError):  # a circular structure or keys JSON cannot hold
        return _walk(value, values)  # type: ignore[return-value]
    clean = _redact_with(values, text)
    if clean == text:
        return value
    try:
        return json.loads(clean)  # type: ignore[no-any-return]
    except ValueError:
        return _walk(value, values)  # type: ignore[return-value]


def _walk(value: Any, values: _Secrets | None, max_depth: int = 100) -> Any:
    root: list[Any] = [None]
    stack: list[tuple[Any, Any, Any, int]] = [(value, root, 0, 0)]
    while stack:
        item, parent, slot, depth = stack.pop()
        if isinstance(item, str):
            new: Any = _redact_with(values, item) if item else item
        elif depth >= max_depth and isinstance(item, dict | list | tuple):
            new = "[...]"  # deeper than any record: (part of) a cycle
        elif isinstance(item, dict):
            new = {}
            for k, v in item.items():
                key = _redact_with(values, k) if isinstance(k, str) and k else k
                new[key] = None
                stack.append((v, new, key, depth + 1))
        elif isinstance(item, list | tuple):
            new = [None] * len(item)
            for i, v in enumerate(item):
                stack.append((v, new, i, depth + 1))
        else:
            new = item
        parent[slot] = new
    return root[0]


def contains_secret(text: str) -> bool:
    """Whether :func:`redact` would change ``text``."""
    return isinstance(text, str) and redact(text) != text


_log_factory_installed = False


def install_log_redaction() -> None:
    """Redact every log record made from now on, whichever library logs it (litellm and dspy log provider
    errors, headers included, to the run's stderr). Idempotent; wraps the current record factory."""
    global _log_factory_installed
    import logging

    with _lock:
        if _log_factory_installed:
            return
        _log_factory_installed = True
    previous = logging.getLogRecordFactory()

    def factory(*args: Any, **kwargs: Any) -> logging.LogRecord:
        record = previous(*args, **kwargs)
        try:
            message = record.getMessage()
        except Exception:  # a malformed record is logging's problem, not ours; leave it as it is
            return record
        clean = redact(message)
        if clean != message:
            record.msg, record.args = clean, ()
        if record.exc_info and record.exc_info[1] is not None and contains_secret(str(record.exc_info[1])):
            record.exc_text = redact("".join(logging.Formatter().formatException(record.exc_info)))
            record.exc_info = None
        return record

    logging.setLogRecordFactory(factory)
