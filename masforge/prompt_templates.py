"""Prompt templates live as text files next to the code that uses them; this loads and fills them.

A package keeps its ``<name>.txt`` templates in its own folder (e.g. ``masforge.search.prompts``) and loads them
with a :class:`Templates` of its own. The runtime's templates (agent roles, plain-chat formats,
program-of-thought, refine, execution feedback) are the exception: they sit in
``masforge/standalone/templates/`` and are filled by :mod:`masforge.standalone.prompts`,
because an exported system carries them as a literal.
"""

from __future__ import annotations

from functools import cache
from importlib import resources
from string import Template


@cache
def _read(package: str, name: str) -> str:
    path = resources.files(package).joinpath(f"{name}.txt")
    try:
        return path.read_text(encoding="utf-8").strip()
    except FileNotFoundError:
        raise FileNotFoundError(f"no prompt template {name!r} in {package}: add {name}.txt to that folder") from None


class Templates:
    """The ``<name>.txt`` templates of one package folder."""

    def __init__(self, package: str) -> None:
        self.package = package

    def template(self, name: str) -> str:
        """Raw text of ``<name>.txt``."""
        return _read(self.package, name)

    def render(self, name: str, **values: object) -> str:
        """``<name>.txt`` with ``$placeholders`` filled (unknown ones left as they are)."""
        return Template(self.template(name)).safe_substitute({k: str(v) for k, v in values.items()})
