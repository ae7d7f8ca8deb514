"""Agent signatures: ``"question, messages -> reasoning_hint, answer"`` with optional simple types.

Kept deliberately small so a meta-agent (even a 0.5B local model) writes valid ones: field names, an
optional ``: type`` from :data:`FIELD_TYPES`, inputs and outputs separated by ``->``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

FIELD_TYPES = ("str", "int", "float", "bool", "list[str]")
_FIELD = re.compile(r"^\s*([A-Za-z_][A-Za-z0-9_]*)\s*(?::\s*([A-Za-z\[\]]+))?\s*$")


@dataclass(frozen=True)
class Field:
    """One signature field."""

    name: str
    type: str = "str"


@dataclass(frozen=True)
class Signature:
    """Parsed signature: input and output fields."""

    inputs: tuple[Field, ...]
    outputs: tuple[Field, ...]

    @property
    def input_names(self) -> list[str]:
        return [f.name for f in self.inputs]

    @property
    def output_names(self) -> list[str]:
        return [f.name for f in self.outputs]

    def __str__(self) -> str:
        def side(fields: tuple[Field, ...]) -> str:
            return ", ".join(f.name if f.type == "str" else f"{f.name}: {f.type}" for f in fields)

        return f"{side(self.inputs)} -> {side(self.outputs)}"


def _fields(text: str, which: str, raw: str) -> tuple[Field, ...]:
    if not text.strip():
        if which == "inputs":
            return ()
        raise ValueError(f"bad signature '{raw}': no output fields after '->'")
    out: list[Field] = []
    for part in text.split(","):
        m = _FIELD.match(part)
        if not m:
            raise ValueError(
                f"bad signature '{raw}': '{part.strip()}' is not a field name (write 'name' or 'name: int')"
            )
        ftype = m.group(2) or "str"
        if ftype not in FIELD_TYPES:
            raise ValueError(f"bad signature '{raw}': unknown type '{ftype}' (use one of {', '.join(FIELD_TYPES)})")
        out.append(Field(m.group(1), ftype))
    names = [f.name for f in out]
    if len(set(names)) != len(names):
        raise ValueError(f"bad signature '{raw}': repeated {which} field")
    return tuple(out)


def parse_signature(raw: str) -> Signature:
    """Parse ``raw``; ValueError with a one-line reason when malformed."""
    if raw.count("->") != 1:
        raise ValueError(f"bad signature '{raw}': write inputs -> outputs with exactly one '->'")
    left, right = raw.split("->")
    sig = Signature(_fields(left, "inputs", raw), _fields(right, "outputs", raw))
    clash = set(sig.input_names) & set(sig.output_names)
    if clash:
        raise ValueError(f"bad signature '{raw}': '{sorted(clash)[0]}' is both an input and an output")
    return sig
