"""What the stub server answers by default: dspy prompts read for the output fields they ask for, each filled
with a value of the type the prompt notes (a ChatAdapter reply in ``[[ ## field ## ]]`` sections, or a JSON object
when JSON is asked for). Part of the stub server (:mod:`masforge.testing.stub_server`); stdlib only."""

from __future__ import annotations

import contextlib
import json
import re
from typing import Any

_MARKER = re.compile(r"\[\[ ## (\w+) ## \]\]")
_FIELD_LINE = re.compile(r"^\s*\d+\.\s+`(\w+)`\s+\((.*?)\):")
_NOTE = "# note: the value you produce "


def content_text(content: Any) -> str:
    """The text of a message ``content`` (a string or a list of OpenAI content parts)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(str(p.get("text", "")) for p in content if isinstance(p, dict) and p.get("type") == "text")
    return ""


def _last(messages: list[dict[str, Any]], role: str) -> str:
    for msg in reversed(messages):
        if isinstance(msg, dict) and msg.get("role") == role:
            return content_text(msg.get("content"))
    return ""


def _system_text(messages: list[dict[str, Any]]) -> str:
    for msg in messages:
        if isinstance(msg, dict) and msg.get("role") in ("system", "developer"):
            return content_text(msg.get("content"))
    return ""


def _output_fields(system: str) -> list[str]:
    """Names of the fields under "Your output fields are:" in a dspy system message, in order."""
    _, found, rest = system.partition("Your output fields are:")
    if not found:
        return []
    names: list[str] = []
    for line in rest.splitlines():
        if line.startswith("All interactions") or _MARKER.match(line.strip()):
            break
        match = _FIELD_LINE.match(line)
        if match and match.group(1) not in names:
            names.append(match.group(1))
    return names


def _field_note(system: str, name: str) -> str:
    """dspy's type note for an output field (``must be True or False``, ...), or "" for a plain string."""
    match = re.search(r"\{" + re.escape(name) + r"\}[ \t]*" + re.escape(_NOTE) + r"(.*)$", system, re.M)
    return match.group(1).strip() if match else ""


def example_from_schema(schema: Any, defs: dict[str, Any] | None = None, depth: int = 0) -> Any:
    """A small value that validates against a (simple) JSON schema: required shape, first enum, minimal sizes."""
    if not isinstance(schema, dict) or depth > 12:
        return None
    defs = {**(defs or {}), **schema.get("$defs", {}), **schema.get("definitions", {})}
    if "$ref" in schema:
        target = defs.get(str(schema["$ref"]).rsplit("/", 1)[-1])
        return example_from_schema(target, defs, depth + 1)
    if "const" in schema:
        return schema["const"]
    if schema.get("enum"):
        return schema["enum"][0]
    if "default" in schema:
        return schema["default"]
    for key in ("anyOf", "oneOf"):
        options = [o for o in schema.get(key, []) if not (isinstance(o, dict) and o.get("type") == "null")]
        if options:
            return example_from_schema(options[0], defs, depth + 1)
    if schema.get("allOf"):
        merged: dict[str, Any] = {}
        for part in schema["allOf"]:
            value = example_from_schema(part, defs, depth + 1)
            if isinstance(value, dict):
                merged.update(value)
        return merged
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "null")
    if kind == "object" or (kind is None and "properties" in schema):
        props = schema.get("properties", {})
        return {name: example_from_schema(sub, defs, depth + 1) for name, sub in props.items()}
    if kind == "array":
        item = example_from_schema(schema.get("items", {}), defs, depth + 1)
        return [item] * int(schema.get("minItems", 0))
    if kind == "string":
        return "x" * int(schema.get("minLength", 0)) if schema.get("minLength") else "stub"
    if kind == "integer":
        return int(schema.get("minimum", 0))
    if kind == "number":
        return float(schema.get("minimum", 0.0))
    if kind == "boolean":
        return True
    return None


def _field_value(system: str, name: str) -> Any:
    """The Python value the stub gives output field ``name``, from dspy's type note."""
    note = _field_note(system, name)
    if not note:
        return f"stub {name}"
    if note.startswith("must be True or False"):
        return True
    if note.startswith("must be a single int value"):
        return 0
    if note.startswith("must be a single float value"):
        return 0.0
    if "one of:" in note:
        return note.split("one of:", 1)[1].split(";")[0].strip()
    if "JSON schema:" in note:
        schema = _parse_schema_note(note.split("JSON schema:", 1)[1].strip())
        return example_from_schema(schema) if schema is not None else {}
    return f"stub {name}"


def _parse_schema_note(text: str) -> Any:
    """The JSON schema in a dspy note; JSONAdapter prompts carry it escaped inside a JSON string (``\\"``)."""
    decoder = json.JSONDecoder()
    with contextlib.suppress(json.JSONDecodeError):
        return decoder.raw_decode(text)[0]
    inner = text.rstrip().rstrip(",").rstrip()
    inner = inner[:-1] if inner.endswith('"') else inner
    with contextlib.suppress(json.JSONDecodeError):
        return decoder.raw_decode(json.loads(f'"{inner}"'))[0]
    return None


def _chat_format(value: Any) -> str:
    """A value as dspy's ChatAdapter writes it: strings raw, booleans as ``True``, the rest as JSON."""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return str(value)
    return json.dumps(value)


def _wants_json(body: dict[str, Any], user: str) -> dict[str, Any] | None:
    """The JSON schema asked for ({} for any JSON object), or None if plain text is expected."""
    fmt = body.get("response_format")
    if isinstance(fmt, dict) and fmt.get("type") == "json_schema":
        inner = fmt.get("json_schema") or {}
        return inner.get("schema") or {} if isinstance(inner, dict) else {}
    if isinstance(fmt, dict) and fmt.get("type") == "json_object":
        return fmt.get("schema") or {}
    if "Respond with a JSON object" in user:
        return {}
    return None


def default_responder(messages: list[dict[str, Any]], body: dict[str, Any]) -> str:
    """Answer a dspy prompt with a well-formed stub for every output field (see the module docstring)."""
    system = _system_text(messages)
    user = _last(messages, "user")
    declared = _output_fields(system)
    # Order: as the last user message's format reminder asks, then any remaining declared field.
    mentioned = [m for m in dict.fromkeys(_MARKER.findall(user)) if m in declared]
    if not declared:  # no system message: trust the reminder ("Respond with ... `[[ ## answer ## ]]` ...")
        _, _, reminder = user.rpartition("Respond with the corresponding output fields")
        mentioned = [m for m in dict.fromkeys(_MARKER.findall(reminder)) if m != "completed"]
    fields = mentioned + [f for f in declared if f not in mentioned]

    schema = _wants_json(body, user)
    if schema is not None:
        if fields:
            return json.dumps({name: _field_value(system, name) for name in fields})
        return json.dumps(example_from_schema(schema) if schema else {"answer": "stub answer"})
    if not fields:
        return "stub answer"
    sections = [f"[[ ## {name} ## ]]\n{_chat_format(_field_value(system, name))}" for name in fields]
    return "\n\n".join([*sections, "[[ ## completed ## ]]"])
