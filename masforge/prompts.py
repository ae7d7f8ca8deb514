"""Prompt templates live as text files in ``masforge/prompts/``; this loads and fills them."""

from __future__ import annotations

from functools import cache
from importlib import resources
from string import Template


@cache
def template(name: str) -> str:
    """Raw text of ``prompts/<name>.txt``."""
    return resources.files("masforge").joinpath("prompts", f"{name}.txt").read_text(encoding="utf-8").strip()


def render(name: str, **values: object) -> str:
    """``prompts/<name>.txt`` with ``$placeholders`` filled (unknown ones left as they are)."""
    return Template(template(name)).safe_substitute({k: str(v) for k, v in values.items()})
