"""The default tool implementations an export carries: the python tool is the standalone runtime's child-process
runner; any other registered tool is copied from the masforge module that defines it (its function and the
module-level definitions it uses), so the export's tool behaves exactly like masforge's."""

from __future__ import annotations

import ast
import inspect
import sys
from dataclasses import dataclass

from masforge.export.inline import inline_module, top_level_names


@dataclass
class ToolSource:
    """A tool implementation copied into an export: source text, the imports it needs, its entry function."""

    source: str
    imports: set[str]
    function: str


def tool_source(name: str, reserved: set[str]) -> ToolSource | None:
    """The standalone source of registered tool ``name``: its function and the module-level definitions it uses,
    copied from the module that defines it (so the export behaves exactly like masforge's tool). None when the
    function needs more than the standard library (e.g. the sandbox) or its names clash with the runtime's."""
    from masforge.sandbox.tools import get_tool

    fn = get_tool(name).fn
    module = sys.modules.get(getattr(fn, "__module__", "") or "")
    if module is None or getattr(module, fn.__name__, None) is not fn:
        return None
    try:
        source = inspect.getsource(module)
    except (OSError, TypeError):
        return None
    tree = ast.parse(source)
    defs: dict[str, ast.stmt] = {}
    imported: dict[str, str] = {}
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.ClassDef):
            defs[node.name] = node
        elif isinstance(node, ast.Assign):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    defs[target.id] = node
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            defs[node.target.id] = node
        elif isinstance(node, ast.Import):
            for alias in node.names:
                imported[alias.asname or alias.name.split(".")[0]] = f"import {alias.name}" + (
                    f" as {alias.asname}" if alias.asname else "")
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level and node.module != "__future__":
            for alias in node.names:
                imported[alias.asname or alias.name] = f"from {node.module} import {alias.name}" + (
                    f" as {alias.asname}" if alias.asname else "")
    if fn.__name__ not in defs:
        return None
    needed: set[str] = set()
    stack = [fn.__name__]
    while stack:
        current = stack.pop()
        if current in needed:
            continue
        needed.add(current)
        stack.extend(n.id for n in ast.walk(defs[current]) if isinstance(n, ast.Name) and n.id in defs)
    used = {n.id for d in needed for n in ast.walk(defs[d]) if isinstance(n, ast.Name) and n.id in imported}
    imports = {imported[n] for n in used}
    stdlib = set(sys.stdlib_module_names)
    if any(line.split()[1].split(".")[0] not in stdlib for line in imports) or needed & reserved:
        return None
    nodes = sorted({id(defs[d]): defs[d] for d in needed}.values(), key=lambda n: n.lineno)
    parts: list[str] = []
    for i, node in enumerate(nodes):
        segment = ast.get_source_segment(source, node) or ""
        is_def = isinstance(node, ast.FunctionDef | ast.ClassDef)
        if i:
            prev_def = isinstance(nodes[i - 1], ast.FunctionDef | ast.ClassDef)
            parts.append("\n\n\n" if is_def or prev_def else "\n")
        parts.append(segment)
    return ToolSource("".join(parts), imports, fn.__name__)


def tool_sections(tools: list[str], reserved: set[str]) -> tuple[list[str], set[str], dict[str, str]]:
    """Source sections, imports and ``name -> function`` of the default tool implementations of an export:
    the python tool is the standalone runtime's child-process runner, others are copied from masforge."""
    sections: list[str] = []
    imports: set[str] = set()
    functions: dict[str, str] = {}
    for name in tools:
        if name == "python":
            text, found_imports, names = inline_module("python_tool")
            sections.append(text)
            imports |= found_imports
            reserved |= names
            functions[name] = "run_python"
            continue
        found = tool_source(name, reserved)
        if found is None:
            continue  # build(tools={name: fn}) must supply it
        sections.append(f"# Tool {name!r}: copied from masforge ({found.function}), so it behaves the same.\n"
                        + found.source)
        imports |= found.imports
        functions[name] = found.function
        reserved |= top_level_names(ast.parse(found.source))
    return sections, imports, functions
