"""A code genome exported as Python: a module that states at the top that its code came from an automated search
and must be run in a sandbox, the searched code verbatim in ``SYSTEM_CODE``, then the frame's tail (``llm()`` and
``tool()`` implemented with litellm, and every registered tool's default implementation)."""

from __future__ import annotations

import ast
from typing import Any

from masforge.export.frame import (
    about_lines,
    assemble,
    file_head,
    found_with_lines,
    head_names,
    identity_lines,
    template,
    usage_lines,
)
from masforge.export.inline import CODE_MODULES, inline
from masforge.export.pysource import RULE, docstring, wrap
from masforge.export.tool_sources import tool_sections
from masforge.genome.schema import Genome

CODE_WARNING = (
    "WARNING: the code in this module was written by an automated search (masforge) and has not been "
    "reviewed by a person. Run it only in a sandbox (a container or VM without secrets, with limited "
    "network, file system and resources): it can do anything Python can do."
)


def _code_literal(code: str) -> str:
    """``code`` as a readable triple-quoted literal: raw if possible (then it starts with a newline, which the genome
    id ignores like all surrounding whitespace), else with escapes; ``repr`` if neither reproduces the code."""
    body = code if code.endswith("\n") else code + "\n"
    raw = "r'''\n" + body + "'''"
    escaped = "'''\\\n" + body.replace("\\", "\\\\").replace("'''", "\\'\\'\\'") + "'''"
    for literal, value in ((raw, "\n" + body), (escaped, body)):
        try:
            if ast.literal_eval(literal) == value:
                return literal
        except (SyntaxError, ValueError):
            continue
    return repr(body)


def _code_doc(genome: Genome, filename: str, found: dict[str, Any]) -> str:
    """The module docstring: the warning first, what the system is, and how to run it (in a sandbox)."""
    lines = [
        wrap(CODE_WARNING),
        "",
        wrap("masforge itself only ever runs this code in its sandbox (separate process, unprivileged user, no "
             "network, resource limits). Importing this module does not run the searched code; build() and the "
             "command line do."),
        "",
        *about_lines(genome, "a code-defined system",
                     "needs only litellm (llm() and tool() are implemented with it)."),
        *usage_lines(filename, found, genome.inputs[0],
                     f'    print(build()({genome.inputs[0]}="What is 17 * 23?")["{genome.outputs[0]}"])',
                     " (inside a sandbox)"),
    ]
    return "\n".join(lines)


def export_code(genome: Genome, filename: str, found: dict[str, Any]) -> str:
    """The Python module a (validated) code genome exports to; ``filename`` is named in its usage notes and
    ``found`` is the LM it was found with (its default)."""
    from masforge.sandbox.tools import tool_names

    code = (genome.code or "").strip() + "\n"
    out = [
        *file_head(docstring(_code_doc(genome, filename, found)), "code", genome),
        *identity_lines(genome),
        "",
        RULE,
        "# The searched system, verbatim. MACHINE-WRITTEN CODE: run it only in a sandbox.",
        "# It defines forward(inputs) and calls llm(prompt, system=None, temperature=None, lm='worker', sample=0)",
        "# and tool(name, arg); CodeSystem below executes it in a namespace of its own where those two exist.",
        RULE,
        "",
        f"SYSTEM_CODE = {_code_literal(code)}",
        "",
        *found_with_lines(found),
        "",
        "",
        template("code_entry.py.txt"),
        "",
        "",
        RULE,
        "# Runtime: masforge's own (masforge/standalone), the same for every exported system",
        RULE,
    ]
    runtime = inline(CODE_MODULES)
    reserved = runtime.names | head_names(out)
    sections, tool_imports, functions = tool_sections(["python", *[t for t in tool_names() if t != "python"]],
                                                      reserved)
    return assemble(out, [*runtime.sections, *sections], runtime.imports | tool_imports, functions, "CodeToolFn")
