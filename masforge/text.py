"""Shortening text for prompts, tables, logs and commit subjects: one rule everywhere.

A leaf module (it imports nothing from masforge), so every layer may use it, like :mod:`masforge.errors`.
"""

from __future__ import annotations


def shorten(value: object, limit: int, *, flat: bool = True, mark: str = "...") -> str:
    """``value`` as text of at most ``limit`` characters. With ``flat`` (the default) runs of white space,
    line breaks included, become one space first; text that is cut ends in ``mark``."""
    text = " ".join(str(value).split()) if flat else str(value)
    if len(text) <= limit:
        return text
    return text[: max(0, limit - len(mark))].rstrip() + mark

