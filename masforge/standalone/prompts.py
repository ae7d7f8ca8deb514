"""The runtime's prompt templates as one name -> text table, and how a template is filled.

In masforge the table is read from the template files in ``masforge/standalone/templates/``; an
exported module carries it as a literal instead (the exporter replaces ``PROMPTS``), so both fill the same text the
same way.
"""

from __future__ import annotations

from importlib import resources
from string import Template


def _read_prompts() -> dict[str, str]:
    folder = resources.files("masforge.standalone").joinpath("templates")
    return {entry.name[:-4]: entry.read_text(encoding="utf-8").strip()
            for entry in sorted(folder.iterdir(), key=lambda e: e.name) if entry.name.endswith(".txt")}


PROMPTS: dict[str, str] = _read_prompts()


def render_prompt(name: str, **values: object) -> str:
    """Template ``name`` with ``$placeholders`` filled (unknown ones are left as they are)."""
    try:
        text = PROMPTS[name]
    except KeyError:
        raise KeyError(f"no prompt template {name!r}: add {name}.txt to "
                       "masforge/standalone/templates") from None
    return Template(text).safe_substitute({k: str(v) for k, v in values.items()})
