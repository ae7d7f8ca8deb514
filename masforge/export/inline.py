"""Inline masforge's standalone runtime (:mod:`masforge.standalone`) into one exported file.

The runtime's modules are named by their short name (``system``); a module from elsewhere that the export
carries as well (:data:`CARRIED`: the names a genome and the runtime share) by its dotted name.

Each module's text is read with ``importlib.resources`` and kept verbatim (comments included) except for what
one file cannot hold: the module docstring becomes a one-line comment, ``from __future__`` and imports of sibling
and carried modules go (their names are defined in the same file), other imports are collected to be merged at the top,
and named top-level definitions can be replaced (e.g. the prompt table by a literal). Only the standard library,
dspy and litellm may be imported (plus masforge's local model, lazily, to start the embedded model where masforge
is installed); a top-level name defined by two modules is refused.
"""

from __future__ import annotations

import ast
import re
import sys
import textwrap
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from importlib import resources

PACKAGE = "masforge.standalone"
CARRIED = ("masforge.genome.names",)
"""Modules outside :data:`PACKAGE` that an export carries (standard library only), so the runtime may import them."""
CONFIG_MODULES = ("prompts", "masforge.genome.names", "adapters", "reading", "plain_adapter", "prose_examples",
                  "examples", "execute", "system", "connect", "litellm_lm", "command_line")
"""What a config export carries, in dependency order."""
PORTFOLIO_MODULES = (*CONFIG_MODULES, "router", "portfolio")
"""What a portfolio export carries: a config export's runtime, the router's prediction and the routing."""
CODE_MODULES = ("connect", "code_system", "command_line")
"""What a code export carries (no dspy)."""
THIRD_PARTY = ("dspy", "litellm", "json_repair")
OPTIONAL_IMPORTS = ("masforge.local_model",)
"""Imported inside a function and a ``try``: present where masforge is installed, never needed otherwise."""


@dataclass
class Inlined:
    """Runtime modules ready to be written into one file."""

    sections: list[str] = field(default_factory=list)
    imports: set[str] = field(default_factory=set)
    names: set[str] = field(default_factory=set)


def full_name(name: str) -> str:
    """The dotted module name of ``name``: a runtime module's short name, or a carried module's dotted name."""
    return name if "." in name else f"{PACKAGE}.{name}"


def _carried(module: str) -> bool:
    """True for a module the export holds itself (a runtime module or a carried one): its imports go."""
    return module.startswith(PACKAGE) or module in CARRIED


def module_text(name: str) -> str:
    """The source of ``masforge.standalone.<name>`` (or of the carried module ``name``)."""
    package, _, leaf = full_name(name).rpartition(".")
    return resources.files(package).joinpath(f"{leaf}.py").read_text(encoding="utf-8")


def top_level_names(tree: ast.Module) -> set[str]:
    """Names a module defines at its top level (functions, classes, assignments)."""
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
    return names


def _import_lines(node: ast.Import | ast.ImportFrom) -> list[str]:
    if isinstance(node, ast.Import):
        return [f"import {a.name}" + (f" as {a.asname}" if a.asname else "") for a in node.names]
    return [f"from {node.module} import {a.name}" + (f" as {a.asname}" if a.asname else "") for a in node.names]


def _check_import(module: str, where: str, nested: bool) -> None:
    root = module.split(".")[0]
    if root in sys.stdlib_module_names or root in THIRD_PARTY or _carried(module):
        return
    if nested and module in OPTIONAL_IMPORTS:
        return
    raise ValueError(f"{where}: imports {module}, which an exported module cannot rely on "
                     "(standalone modules use only the standard library, dspy and litellm)")


def _defined_name(node: ast.stmt) -> str | None:
    if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
        return node.name
    if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
        return node.targets[0].id
    if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
        return node.target.id
    return None


def _start(node: ast.stmt) -> int:
    decorators = getattr(node, "decorator_list", [])
    return min([node.lineno, *[d.lineno for d in decorators]]) - 1


def inline_module(name: str, replace: dict[str, str] | None = None) -> tuple[str, set[str], set[str]]:
    """(text, imports, top-level names) of one standalone module made ready for a single file.

    ``replace``: top-level name -> the text standing in for its definition ("" drops it)."""
    replace = replace or {}
    text = module_text(name)
    where = full_name(name)
    tree = ast.parse(text)
    lines = text.splitlines(keepends=True)
    edits: list[tuple[int, int, str]] = []  # (first line, end line, replacement), 0-based half-open
    imports: set[str] = set()
    title = ""
    body = list(tree.body)
    if body and isinstance(body[0], ast.Expr) and isinstance(getattr(body[0], "value", None), ast.Constant) and \
            isinstance(body[0].value.value, str):
        title = body[0].value.value.strip().splitlines()[0]
        edits.append((body[0].lineno - 1, body[0].end_lineno or body[0].lineno, ""))
        body = body[1:]
    for node in body:
        end = node.end_lineno or node.lineno
        if isinstance(node, ast.ImportFrom) and node.module == "__future__":
            edits.append((node.lineno - 1, end, ""))
        elif isinstance(node, ast.Import | ast.ImportFrom):
            for line in _import_lines(node):
                module = line.split()[1]
                _check_import(module, where, nested=False)
                if not _carried(module):
                    imports.add(line)
            edits.append((node.lineno - 1, end, ""))
        elif _defined_name(node) in replace:
            edits.append((_start(node), end, replace[_defined_name(node) or ""]))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import | ast.ImportFrom) and node not in tree.body:
            modules = [node.module or ""] if isinstance(node, ast.ImportFrom) else [a.name for a in node.names]
            for module in modules:
                _check_import(module, where, nested=True)
            if isinstance(node, ast.ImportFrom) and _carried(node.module or ""):
                end = node.end_lineno or node.lineno
                if end < len(lines) and not lines[end].strip():
                    end += 1  # and the blank line that set it apart
                edits.append((node.lineno - 1, end, ""))
    for first, end, new in sorted(edits, reverse=True):
        lines[first:end] = [new + "\n"] if new else []
    out = re.sub(r"\n{3,}", "\n\n\n", "".join(lines)).strip("\n")
    header = textwrap.fill(f"---- from {where.replace('.', '/')}.py" + (f": {title}" if title else ""),
                           116, initial_indent="# ", subsequent_indent="# ", break_on_hyphens=False)
    names = top_level_names(ast.parse(out)) if out else set()
    return header + "\n\n" + out, imports, names


def inline(modules: Sequence[str], replace: dict[str, dict[str, str]] | None = None) -> Inlined:
    """The given standalone modules made ready for one file; ``replace`` maps a module to its
    :func:`inline_module` replacements. Two modules defining one name is an error."""
    result = Inlined()
    owner: dict[str, str] = {}
    bound: dict[str, str] = {}
    for name in modules:
        text, imports, names = inline_module(name, (replace or {}).get(name))
        for n in names:
            if n in owner:
                raise ValueError(f"{PACKAGE}: {n!r} is defined by both {owner[n]} and {name}; rename one")
            owner[n] = name
        for line in imports:
            other = bound.setdefault(bound_name(line), line)
            if other != line or bound_name(line) in owner:
                raise ValueError(f"{full_name(name)}: '{line}' binds a name another module defines or imports "
                                 f"differently; rename one")
        result.sections.append(text)
        result.imports |= imports
        result.names |= names
    return result


def bound_name(import_line: str) -> str:
    """The name an import line binds (``import a.b`` binds ``a``)."""
    parts = import_line.split()
    if " as " in import_line:
        return parts[-1]
    return parts[1].split(".")[0] if parts[0] == "import" else parts[-1]


def is_third_party(import_line: str) -> bool:
    """True for an import of dspy, litellm or another package outside the standard library."""
    return import_line.split()[1].split(".")[0] not in sys.stdlib_module_names


def used_imports(import_lines: Iterable[str], text: str) -> set[str]:
    """The import lines whose bound name ``text`` (Python source) uses."""
    used = {n.id for n in ast.walk(ast.parse(text)) if isinstance(n, ast.Name)}
    return {line for line in import_lines if bound_name(line) in used}
