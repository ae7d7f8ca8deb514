"""The tool names a genome may give its agents: the built-in tools and every tool registered since.

The tools themselves (what they run) are the runtime's, in :mod:`masforge.sandbox.tools`; registering one there
names it here, so validation knows it without importing the runtime.
"""

from __future__ import annotations

BUILTIN_TOOLS = ("calculator", "python")
"""The tools masforge brings (the runtime registers exactly these on import; a test holds the two together)."""

_NAMES: set[str] = set(BUILTIN_TOOLS)


def add_tool_name(name: str) -> None:
    """Let genomes name tool ``name`` (called by the runtime's ``register_tool``)."""
    _NAMES.add(name)


def tool_names() -> list[str]:
    """Every tool name a genome may use, sorted."""
    return sorted(_NAMES)
