"""The frame every Python export shares, whatever its format: the head (shebang, docstring, imports, the guarded
library imports and the marker), the usage notes of its docstring, and the tail (the tools' descriptions, the LM
it was found with, the entry point, masforge's runtime inlined, the default tools and ``main``)."""

from __future__ import annotations

import ast
from collections.abc import Sequence
from importlib import resources
from typing import Any

from masforge.export.inline import inline, is_third_party, top_level_names, used_imports
from masforge.export.marker import EXPORT_FORMAT_VERSION, MARKER_NAME
from masforge.export.pysource import RULE, block, docstring, lit, merge_imports, py_str, wrap
from masforge.export.tool_sources import tool_sections
from masforge.genome.schema import Genome

PYTHON_TOOL_NOTE = ("NOTE: the python tool runs model-written programs in a child process with a timeout. That is NOT "
                    "a sandbox (masforge runs them in its sandbox): run this module in a container or VM if that "
                    "matters.")
"""What the docstring of a config or portfolio export that carries the python tool says of it."""


def file_head(doc: str, kind: str, genome: Genome) -> list[str]:
    """The first lines of every exported file: shebang, docstring, imports, libraries and the marker."""
    from masforge import __version__  # lazy: masforge's __init__ imports the API, which imports export

    marker = {"format": EXPORT_FORMAT_VERSION, "kind": kind, "genome_id": genome.id, "masforge": __version__}
    return [
        "#!/usr/bin/env python3",
        f'"""{doc}\n"""',
        "",
        "from __future__ import annotations",
        "",
        "@IMPORTS@",
        "",
        'os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # litellm\'s bundled price table, no download',
        "",
        "@LIBS@",
        "",
        f"{MARKER_NAME} = {block(marker, 0, len(MARKER_NAME) + 3)}",
        "",
    ]


def identity_lines(genome: Genome) -> list[str]:
    """The system's name, genome id, inputs and outputs as the export's first constants."""
    return [f"NAME = {py_str(genome.name, 0, 7)}", f"GENOME_ID = {lit(genome.id)}",
            f"INPUTS = {block(genome.inputs, 0, 9)}", f"OUTPUTS = {block(genome.outputs, 0, 10)}"]


def about_lines(genome: Genome, what: str, needs: str, idea: bool = True) -> list[str]:
    """The docstring's opening: the system's name and ``what`` it is, its description (and with ``idea`` the idea it
    came from), its id, and what the module ``needs``."""
    from masforge import __version__  # lazy, as above

    lines = [f"{docstring(genome.name)}: {what} exported from masforge.", ""]
    if genome.description.strip():
        lines += [docstring(wrap(genome.description)), ""]
    if idea and genome.source.strip():
        lines += [docstring(wrap(f"Idea: {genome.source}")), ""]
    return [*lines, f"Genome id: {genome.id}", f"Exported by masforge {__version__}; {needs}", ""]


def usage_lines(filename: str, found: dict[str, Any], example_input: str, example_call: str,
                sandbox: str = "") -> list[str]:
    """The docstring's usage notes: the command line on the LM the system was found with, and from Python."""
    module = filename[:-3] if filename.endswith(".py") else filename
    model = found["model"]
    lines = [f"Command line{sandbox}:", "", f'    python {filename} "What is 17 * 23?"', ""]
    if model == "local" or model.startswith("local:"):
        lines += [wrap("It runs on the LM it was found with, masforge's embedded model: where masforge is "
                       "installed (pip install masforge, then masforge models pull) it starts the model itself. "
                       "Any OpenAI-compatible server or hosted model works too:"), "",
                  f'    python {filename} "..." --model openai/<name> --api-base http://localhost:8080/v1',
                  f'    python {filename} "..." --model openai/gpt-4o-mini    # with OPENAI_API_KEY set']
    else:
        lines += [wrap(f"It runs on the LM it was found with, {model}; --model picks another (any litellm model "
                       "string, or an OpenAI-compatible server with --api-base):"), "",
                  f"    python {filename} --field {example_input}=... --model ollama/llama3 --api-base "
                  "http://localhost:11434"]
    lines += ["", f"From Python{sandbox}:", "", f"    from {module} import build", "", *example_call.splitlines()]
    return lines


def dspy_usage_lines(filename: str, found: dict[str, Any], example_input: str, example_call: str,
                     tools_used: Sequence[str]) -> list[str]:
    """The usage notes of a config or portfolio export, after a blank line; then what its python tool is, if it
    carries one."""
    lines = ["", *usage_lines(filename, found, example_input, example_call)]
    return [*lines, "", wrap(PYTHON_TOOL_NOTE)] if "python" in tools_used else lines


def found_with_lines(found: dict[str, Any]) -> list[str]:
    """``FOUND_WITH``, the LM the system was found with, and the comment saying what it is."""
    model = found["model"]
    where = "masforge's embedded model" if model == "local" or model.startswith("local:") else model
    return [
        "# The LM this system was found with (the default of build() and the command line): model, endpoint, the",
        "# name of the variable holding its API key, sampling, and the prompt adapter agents that leave it to the",
        f"# LM use (auto: plain on the embedded model, chat elsewhere). Found on {where}.",
        f"FOUND_WITH: dict[str, Any] = {block(found, 0, 30)}",
    ]


def template(name: str) -> str:
    """The text of the entry point template ``name`` (``masforge/export/templates``)."""
    return resources.files("masforge.export.templates").joinpath(name).read_text(encoding="utf-8").strip("\n")


def finish_export(out: list[str], tools_used: Sequence[str], found: Any, entry: str,
                  modules: Sequence[str]) -> str:
    """The rest of a config or portfolio export after its own data: the tools' descriptions (``out`` ends opening
    their dict), the LM it was found with, the entry point template, and masforge's runtime ``modules`` inlined."""
    from masforge.sandbox.tools import get_tool

    for name in tools_used:
        out.append(f"    {lit(name)}: {py_str(get_tool(name).description, 4, 6 + len(lit(name)))},")
    out += ["}", "", *found_with_lines(found), "", "", template(entry), "", "",
            RULE, "# Runtime: masforge's own (masforge/standalone), the same for every exported system",
            RULE]
    runtime = inline(modules, {"prompts": {"_read_prompts": "", "PROMPTS": _prompts_literal()}})
    reserved = runtime.names | head_names(out)
    sections, tool_imports, functions = tool_sections(list(tools_used), reserved)
    return assemble(out, [*runtime.sections, *sections], runtime.imports | tool_imports, functions, "ToolFn")


def _prompts_literal() -> str:
    """The runtime's prompt templates as the literal an export carries (masforge reads them from files)."""
    from masforge.standalone.prompts import PROMPTS

    items = [f"    {lit(k)}: {py_str(v, 4, 6 + len(lit(k)))}," for k, v in PROMPTS.items()]
    return "PROMPTS: dict[str, str] = {\n" + "\n".join(items) + "\n}"


def assemble(out: list[str], runtime: list[str], imports: set[str], tools: dict[str, str], tool_type: str) -> str:
    """The module: head (``@IMPORTS@`` placeholder), runtime sections, default tools, entry point."""
    default_tools = ", ".join(f"{lit(t)}: {f}" for t, f in tools.items())
    tail = [
        RULE, "# Default tool implementations (build(tools=...) adds or replaces some)", RULE, "",
        f"DEFAULT_TOOLS: dict[str, {tool_type}] = {{{default_tools}}}", "", "",
        'if __name__ == "__main__":', "    sys.exit(main())",
    ]
    body = "\n".join(out) + "\n\n\n" + "\n\n\n".join(r.strip("\n") for r in runtime) + "\n\n\n" + "\n".join(tail)
    kept = used_imports(imports | {"import os", "import sys"}, body.replace("@IMPORTS@", "").replace("@LIBS@", ""))
    # dspy (and litellm through it) is imported after the line that keeps litellm from downloading prices
    third_party = {i for i in kept if is_third_party(i)}
    libs = _library_imports(merge_imports(third_party)) if third_party else ""
    body = body.replace("@LIBS@\n\n", libs + "\n\n" if libs else "")
    return body.replace("@IMPORTS@", merge_imports({i for i in kept if not is_third_party(i)})) + "\n"


# The package to install for each library module an export imports.
_PIP_NAMES = {"dspy": "dspy", "litellm": "litellm", "json_repair": "json-repair"}


def _library_imports(lines: str) -> str:
    """The export's library imports, guarded: run where a library is missing, the file says in one line which
    one and how to install it, instead of a ModuleNotFoundError traceback."""
    modules = sorted({ln.split()[1].split(".")[0] for ln in lines.splitlines()})
    need = "pip install " + " ".join(_PIP_NAMES.get(m, m) for m in modules)
    body = "\n".join(f"    {line}" for line in lines.splitlines())
    return (f"try:\n{body}\n"
            "except ImportError as _missing:  # run outside an environment that has the libraries below\n"
            f'    _how = f"needs the Python package {{_missing.name}} ({need})"\n'
            '    if __name__ == "__main__":\n'
            '        sys.exit(f"{os.path.basename(__file__)} {_how}")\n'
            '    raise ImportError(f"this exported system {_how}") from None')


def head_names(out: list[str]) -> set[str]:
    """Top-level names the generated head of an export defines (the runtime must not redefine them)."""
    return top_level_names(ast.parse("\n".join(out).replace("@IMPORTS@", "").replace("@LIBS@", "")))
