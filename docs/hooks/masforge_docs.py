"""mkdocs hooks of the masforge documentation site.

* The CLI reference page is generated from the typer app (:func:`masforge.cli.reference.cli_reference`) where the
  page holds the marker ``<!-- cli-reference -->``.
* Sphinx cross-reference roles in docstrings (``:class:`X` ``) are shown as plain code: the handler reads the
  docstrings as they are written for the terminal and the editor.
* Every object an API page documents with ``::: dotted.path`` must have a docstring, and so must its public members:
  a missing one is a warning, which ``mkdocs build --strict`` turns into a failed build.
"""

from __future__ import annotations

import importlib
import inspect
import logging
import re
from typing import Any

log = logging.getLogger("mkdocs.hooks.masforge")

CLI_MARKER = "<!-- cli-reference -->"
_DIRECTIVE = re.compile(r"^::: ([\w.]+)\s*$", re.M)


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    if CLI_MARKER in markdown:
        from masforge.cli.reference import cli_reference

        markdown = markdown.replace(CLI_MARKER, cli_reference())
    for path in _DIRECTIVE.findall(markdown):
        for missing in undocumented(path):
            log.warning("%s: %s has no docstring", page.file.src_uri, missing)
    return markdown


FOLDERS = ("search", "archive", "evaluators", "genome", "seeds")
"""Top-level folders installed as sub-packages of masforge: the API page names them by folder."""


_ROLE = re.compile(r":(?:class|func|meth|attr|mod|data|exc):(?=<code>)")


def on_page_content(html: str, page: Any, config: Any, files: Any) -> str:
    return _ROLE.sub("", html)


def _resolve(path: str) -> Any:
    if path.split(".", 1)[0] in FOLDERS:
        path = f"masforge.{path}"
    module, _, attr = path.rpartition(".")
    try:
        return importlib.import_module(path)
    except ImportError:
        return getattr(importlib.import_module(module), attr)


def undocumented(path: str) -> list[str]:
    """``path`` and those of its public members defined on it that have no docstring of their own."""
    obj = _resolve(path)
    missing = [] if inspect.getdoc(obj) else [path]
    if inspect.isclass(obj):
        for name, member in vars(obj).items():
            if name.startswith("_") or name in getattr(obj, "model_fields", {}):
                continue
            target = member.fget if isinstance(member, property) else getattr(member, "__func__", member)
            if callable(target) and not getattr(target, "__doc__", None):
                missing.append(f"{path}.{name}")
    return missing
