"""Bounds on untrusted input and the YAML/JSON parsing that enforces them.

Genome files, run configurations, task files and meta-agent replies come from people and models masforge does
not control. Each is parsed here with limits on file bytes, nesting depth, number of values, string length,
agents and edges, so that a hostile or broken input costs at most a bounded amount of time and memory and ends
in one line that names the problem (never a ``RecursionError`` traceback or an exhausted machine):

* YAML: libyaml's event stream is checked first (iteratively, so any depth is safe to look at) for depth,
  values, string length and anchors/aliases (rejected in genome files; in run configurations an alias may not
  refer to itself and the expanded document is bounded), then built with a loader that rejects duplicate keys.
* JSON: duplicate keys are an error; nesting beyond the decoder's recursion limit is caught and reported.

The defaults are far above any real genome (the shipped seeds are under 10 KB, at most a few agents, nested at
most five levels deep); each can be raised with the environment variable its message names.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import yaml

ErrorType = Callable[[str], Exception]

# libyaml when present (about 7x faster); the pure-Python loader otherwise. Both are driven the same way.
_BASE_LOADER: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_MERGE_TAG = "tag:yaml.org,2002:merge"
# Deeper nesting than this cannot be parsed by recursive code (pydantic, json, libyaml's composer) anyway.
_DEPTH_CEILING = 200


@dataclass(frozen=True)
class Limits:
    """What one input may hold. Read with :func:`current_limits` (environment overrides applied)."""

    max_bytes: int = 1_048_576
    """Bytes of a genome or run-configuration file (and characters of a genome text)."""
    max_depth: int = 64
    """Nesting levels of mappings and lists."""
    max_nodes: int = 200_000
    """Values (scalars, mappings, lists) in one document, aliases expanded."""
    max_string: int = 200_000
    """Characters of one string (instructions, code, metadata values)."""
    max_agents: int = 1_000
    max_edges: int = 20_000
    max_line_bytes: int = 16_777_216
    """Bytes of one line of a JSON Lines task file."""
    max_reply_chars: int = 100_000
    """Characters of a meta-agent reply that is parsed as a genome."""


_ENV = {
    "max_bytes": "MASFORGE_MAX_FILE_BYTES", "max_depth": "MASFORGE_MAX_DEPTH", "max_nodes": "MASFORGE_MAX_VALUES",
    "max_string": "MASFORGE_MAX_STRING_CHARS", "max_agents": "MASFORGE_MAX_AGENTS", "max_edges": "MASFORGE_MAX_EDGES",
    "max_line_bytes": "MASFORGE_MAX_LINE_BYTES", "max_reply_chars": "MASFORGE_MAX_REPLY_CHARS",
}


def env_name(limit: str) -> str:
    """The environment variable that raises ``limit`` (a :class:`Limits` field name)."""
    return _ENV[limit]


def current_limits() -> Limits:
    """The defaults with any ``MASFORGE_MAX_*`` environment overrides (read on every call, so tests and
    long-lived processes see a change at once). A malformed override is a one-line ConfigError."""
    values: dict[str, int] = {}
    for name, env in _ENV.items():
        raw = os.environ.get(env, "").strip()
        if not raw:
            continue
        try:
            value = int(raw.replace("_", ""))
        except ValueError:
            from masforge.errors import ConfigError

            raise ConfigError(f"${env}={raw!r} is not a whole number; unset it or give e.g. {env}=1000") from None
        values[name] = max(1, value)
    if "max_depth" in values:
        values["max_depth"] = min(values["max_depth"], _DEPTH_CEILING)
    return Limits(**values)


def _n(value: int) -> str:
    return f"{value:,}"


def check_bytes(size: int, origin: str, what: str, error: ErrorType, limit: int | None = None) -> None:
    """Refuse an input of ``size`` bytes over the file-size limit (before reading or parsing it)."""
    cap = current_limits().max_bytes if limit is None else limit
    if size > cap:
        env = env_name("max_bytes") if limit is None else env_name("max_line_bytes")
        raise error(f"{origin}: {_n(size)} bytes is over the {_n(cap)}-byte limit for {what} "
                    f"(real ones are a few KB; raise ${env} if this one is genuine)")


# --------------------------------------------------------------------------------------------------
# walking parsed data


def _encodable(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


class _Path:
    """Where a value sits (a linked list of keys, formatted only when an error needs it)."""

    __slots__ = ("key", "parent")

    def __init__(self, key: object, parent: _Path | None) -> None:
        self.key = key
        self.parent = parent

    def text(self) -> str:
        keys: list[object] = []
        node: _Path | None = self
        while node is not None:
            keys.append(node.key)
            node = node.parent
        out = ""
        for key in reversed(keys):
            out += f"[{key}]" if isinstance(key, int) else (f".{key}" if out else str(key))
        return out


def check_tree(data: Any, origin: str | None, error: ErrorType, *, limits: Limits | None = None,
               root: str | None = None) -> None:
    """Check parsed data (or a value built in code) against the depth, value-count and string limits.

    Iterative and bounded: it stops at the first violation, so a structure that refers to itself (a recursive
    YAML anchor, a dict holding itself) or an exponential alias bomb costs at most ``max_nodes`` steps.
    Messages start with ``<origin>: `` (nothing when ``origin`` is None, e.g. inside a pydantic validator)."""
    lim = limits or current_limits()
    at = f"{origin}: " if origin else ""
    stack: list[tuple[Any, int, _Path | None]] = [(data, 1, _Path(root, None) if root else None)]
    nodes = 0
    while stack:
        value, depth, path = stack.pop()
        nodes += 1
        if nodes > lim.max_nodes:
            raise error(f"{at}more than {_n(lim.max_nodes)} values (or aliases that expand to that many); "
                        f"no real input is this large (raise ${env_name('max_nodes')} if this one is genuine)")
        if isinstance(value, str):
            if len(value) > lim.max_string:
                where = f"{path.text()}: " if path else ""
                raise error(f"{at}{where}text of {_n(len(value))} characters is over the "
                            f"{_n(lim.max_string)}-character limit (raise ${env_name('max_string')} if genuine)")
            if not value.isascii() and not _encodable(value):
                where = f"{path.text()}: " if path else ""
                raise error(f"{at}{where}text is not valid Unicode (it holds a lone surrogate such as \\ud800, "
                            "which cannot be stored); fix the text or its encoding")
        elif isinstance(value, dict | list | tuple):
            if depth > lim.max_depth:
                where = f" at {path.text()}" if path else ""
                raise error(f"{at}nested deeper than {lim.max_depth} levels{where} (or a value that contains "
                            "itself); flatten it")
            items = value.items() if isinstance(value, dict) else enumerate(value)
            for key, child in items:
                if isinstance(key, str) and len(key) > lim.max_string:
                    raise error(f"{at}a key of {_n(len(key))} characters is over the "
                                f"{_n(lim.max_string)}-character limit")
                if isinstance(key, str) and not key.isascii() and not _encodable(key):
                    raise error(f"{at}a key is not valid Unicode (it holds a lone surrogate); fix its encoding")
                if isinstance(child, str | dict | list | tuple):
                    stack.append((child, depth + 1, _Path(key, path)))
                else:
                    nodes += 1


# --------------------------------------------------------------------------------------------------
# YAML


class _DuplicateKey(Exception):
    def __init__(self, key: object, line: int) -> None:
        super().__init__(key)
        self.key = key
        self.line = line


class _StrictLoader(_BASE_LOADER):  # type: ignore[misc, valid-type]
    """The safe loader, with duplicate keys in one mapping as an error instead of "last one wins"."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        if isinstance(node, yaml.MappingNode):
            seen: set[Any] = set()
            for key_node, _ in node.value:
                if key_node.tag == _MERGE_TAG or not isinstance(key_node, yaml.ScalarNode):
                    continue  # merge keys override on purpose; collection keys fail later as unhashable
                key = self.construct_object(key_node, deep=True)
                try:
                    duplicate = key in seen
                    seen.add(key)
                except TypeError:
                    continue
                if duplicate:
                    raise _DuplicateKey(key, key_node.start_mark.line + 1 if key_node.start_mark else 0)
        return super().construct_mapping(node, deep)


def format_yaml_error(origin: object, exc: yaml.YAMLError, what: str = "") -> str:
    """A YAML syntax error as one line: ``<origin>:<line>: invalid YAML[ in <what>] (<problem>)``."""
    mark = getattr(exc, "problem_mark", None)
    where = f":{mark.line + 1}" if mark is not None else ""
    problem = getattr(exc, "problem", None) or "syntax error"
    if "expected a single document" in str(exc):
        problem = "more than one document (remove the '---' separators)"
    if "maximum nesting depth" in problem:  # libyaml's own bound (1,000 levels) is past ours: say ours
        return f"{origin}{where}: nested deeper than {current_limits().max_depth} levels; flatten it"
    return f"{origin}{where}: invalid YAML{f' in {what}' if what else ''} ({problem})"


def _scan_events(text: str, origin: str, error: ErrorType, lim: Limits, aliases: bool) -> None:
    """One pass over the parser's events (no recursion, no objects built) enforcing the limits."""
    loader = _BASE_LOADER(text)
    try:
        depth = 0
        nodes = 0
        open_anchors: list[str | None] = []
        while True:
            event = loader.get_event()
            if event is None:
                return
            line = event.start_mark.line + 1 if event.start_mark is not None else 0
            anchor = getattr(event, "anchor", None)
            if isinstance(event, yaml.AliasEvent):
                if not aliases:
                    raise error(f"{origin}:{line}: YAML aliases (*{anchor}) are not allowed in genome files; "
                                "write the value out in full")
                if anchor in open_anchors:
                    raise error(f"{origin}:{line}: YAML alias *{anchor} refers to a value that contains it "
                                "(a recursive anchor); write the value out")
                nodes += 1
                continue
            if anchor is not None and not aliases:
                raise error(f"{origin}:{line}: YAML anchors (&{anchor}) are not allowed in genome files; "
                            "write the value out in full")
            if isinstance(event, yaml.ScalarEvent):
                nodes += 1
                if len(event.value) > lim.max_string:
                    raise error(f"{origin}:{line}: text of {_n(len(event.value))} characters is over the "
                                f"{_n(lim.max_string)}-character limit (raise ${env_name('max_string')} if genuine)")
            elif isinstance(event, yaml.CollectionStartEvent):
                nodes += 1
                depth += 1
                open_anchors.append(anchor)
                if depth > lim.max_depth:
                    raise error(f"{origin}:{line}: nested deeper than {lim.max_depth} levels; flatten it")
            elif isinstance(event, yaml.CollectionEndEvent):
                depth -= 1
                open_anchors.pop()
            if nodes > lim.max_nodes:
                raise error(f"{origin}:{line}: more than {_n(lim.max_nodes)} values; no real input is this large "
                            f"(raise ${env_name('max_nodes')} if this one is genuine)")
    finally:
        loader.dispose()


def load_yaml(text: str, origin: str, error: ErrorType, *, aliases: bool = False, what: str = "YAML files",
              label: str = "", limits: Limits | None = None) -> Any:
    """Parse one YAML document within the limits; every problem is ``error("<origin>[:line]: ...")``.

    ``aliases=False`` (genome files) rejects anchors and aliases outright; with ``aliases=True`` (run
    configurations) they are allowed but may not be recursive, and the expanded document is bounded. ``what``
    names such files in size messages, ``label`` the document in syntax errors ("invalid YAML in <label>")."""
    lim = limits or current_limits()
    check_bytes(len(text.encode("utf-8", "surrogatepass")), origin, what, error, None)
    if not text.isascii() and not _encodable(text):
        raise error(f"{origin}: text is not valid Unicode (it holds a lone surrogate such as \\ud800); "
                    "fix the text or its encoding")
    try:
        _scan_events(text, origin, error, lim, aliases)
        loader = _StrictLoader(text)
        try:
            data = loader.get_single_data()
        finally:
            loader.dispose()
    except _DuplicateKey as dup:
        raise error(f"{origin}:{dup.line}: duplicate key {dup.key!r} (each key may appear once in a mapping; "
                    "remove or rename one)") from None
    except yaml.YAMLError as exc:
        raise error(format_yaml_error(origin, exc, label)) from None
    except RecursionError:  # pragma: no cover - the event scan bounds the depth first
        raise error(f"{origin}: nested too deeply to parse; flatten it") from None
    if aliases:
        check_tree(data, origin, error, limits=lim)  # aliases may expand a small text into a huge tree
    return data


# --------------------------------------------------------------------------------------------------
# JSON


def _strict_pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise _DuplicateKey(key, 0)
        out[key] = value
    return out


def load_json(text: str, origin: str, error: ErrorType, *, duplicates: bool = False, check: bool = True,
              limits: Limits | None = None, one_line: bool = False) -> Any:
    """Parse JSON text; duplicate keys are an error unless ``duplicates``; nesting, value count and string
    length are bounded (``check=False`` leaves only the recursion guard, for bulk data files). ``one_line``:
    ``origin`` already names the line (a JSON Lines record), so messages give the column only."""
    try:
        data = json.loads(text) if duplicates else json.loads(text, object_pairs_hook=_strict_pairs)
    except _DuplicateKey as dup:
        raise error(f"{origin}: duplicate key {dup.key!r} in a JSON object (each key may appear once; remove or "
                    "rename one)") from None
    except json.JSONDecodeError as exc:
        where = "" if one_line else f":{exc.lineno}"
        raise error(f"{origin}{where}: invalid JSON ({exc.msg} at column {exc.colno}); fix or delete it") from None
    except RecursionError:
        lim = limits or current_limits()
        raise error(f"{origin}: nested deeper than {lim.max_depth} levels; flatten it") from None
    if check:
        check_tree(data, origin, error, limits=limits)
    return data

