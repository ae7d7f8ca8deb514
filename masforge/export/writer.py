"""Export a genome as something that runs without masforge (loading it back: :mod:`masforge.export.loader`).

Formats (``masforge export ID --format ...``):

* ``yaml`` / ``json``: the genome file itself (same text as the archive stores; same genome id).
* ``python``: ONE standalone Python module that needs only ``dspy`` and ``litellm``.

  - A **config** genome becomes readable code: the agents' full instructions as constants, the wiring as plain
    data, and masforge's own runtime inlined (:mod:`masforge.execution.standalone`, see :mod:`.inline`): the same
    code masforge runs genomes on, so the prompt adapters, message passing, sample indices and aggregation are
    masforge's by construction and on the same deterministic LM the export gives the same outputs (the tests
    check this for every config seed). ``build()`` returns a ``dspy.Module``; ``python exported.py "question"``
    answers from the command line.
  - A **code** genome becomes a module that states at the top that its code came from an automated search and
    must be run in a sandbox; ``llm()`` and ``tool()`` are implemented with litellm. The searched code is kept
    verbatim in ``SYSTEM_CODE`` and executed in its own namespace.

Both default to the LM the system was found with (``FOUND_WITH``: model, endpoint, sampling, prompt adapter),
recorded from its archive result at export time (:mod:`.found_with`); ``local`` is masforge's embedded model,
started through masforge where it is installed.
"""

from __future__ import annotations

import ast
import inspect
import json
import re
import sys
import textwrap
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from masforge.errors import ArchiveError, GenomeError
from masforge.export.inline import (
    CODE_MODULES,
    CONFIG_MODULES,
    PORTFOLIO_MODULES,
    inline,
    inline_module,
    is_third_party,
    top_level_names,
    used_imports,
)
from masforge.export.marker import EXPORT_FORMAT_VERSION, MARKER_NAME, is_exported
from masforge.files import write_text_file
from masforge.genome.names import EXECUTE_MODULE
from masforge.genome.schema import Genome
from masforge.lm.config import LMConfig, parse_lm
from masforge.redact import redact

EXPORT_FORMATS = ("python", "yaml", "json")
CODE_WARNING = (
    "WARNING: the code in this module was written by an automated search (masforge) and has not been "
    "reviewed by a person. Run it only in a sandbox (a container or VM without secrets, with limited "
    "network, file system and resources): it can do anything Python can do."
)
_WRAP = 108
_RULE = "# " + "=" * 110


def _file_head(doc: str, kind: str, genome: Genome) -> list[str]:
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
        f"{MARKER_NAME} = {_block(marker, 0, len(MARKER_NAME) + 3)}",
        "",
    ]


# ------------------------------------------------------------------------------------------------
# resolving what to export


def resolve_genome(ref: str, archive: str | Path | None = None) -> Genome:
    """The genome ``ref`` names: a genome file or a seed name (as everywhere, :func:`masforge.seeds.resolve_genome`),
    or a genome id prefix in ``archive``. An already exported module is refused with the way out."""
    from masforge.seeds import resolve_genome as resolve_file_or_seed
    from masforge.seeds import seed_names

    path = Path(ref)
    if path.is_file() and is_exported(path):
        raise GenomeError(f"{path}: is already an exported module; export the genome it came from "
                          "(its id is in MASFORGE_EXPORT) instead")
    if not path.is_file() and ref not in seed_names() and re.fullmatch(r"[0-9a-fA-F]{1,64}", ref):
        from masforge.archive.store import Archive

        where = Path(archive) if archive is not None else Path("runs/latest/archive")
        if not where.exists():
            raise ArchiveError(f"{where}: no archive there to look up id '{ref}' (pass --archive PATH, "
                               "a run's archive is <run folder>/archive)")
        with Archive.open(where) as arch:
            return arch.genome(ref)
    return resolve_file_or_seed(ref, also="a genome id (hex digits)")


def resolve_export(ref: str, archive: str | Path | None = None) -> tuple[Genome, LMConfig | None]:
    """The genome ``ref`` names (see :func:`resolve_genome`) and, for a candidate looked up in ``archive``, the LM
    it was found with (None for a genome file or a seed, or a candidate with no result yet)."""
    from masforge.export.found_with import found_with
    from masforge.seeds import seed_names

    genome = resolve_genome(ref, archive)
    if Path(ref).is_file() or ref in seed_names():
        return genome, None
    return genome, found_with(genome.id, archive if archive is not None else Path("runs/latest/archive"))


def export_genome(genome: Genome, fmt: str = "python", filename: str | None = None,
                  lm: LMConfig | str | dict[str, Any] | None = None) -> str:
    """The text of ``genome`` exported as ``python``, ``yaml`` or ``json``. For a Python export, ``filename``
    names the module in its usage notes and ``lm`` is the LM the system was found with, its default LM (None:
    masforge's default, ``$MASFORGE_LM`` or the embedded model)."""
    from masforge.genome.io import dump_genome
    from masforge.genome.validate import validate

    if fmt not in EXPORT_FORMATS:
        raise GenomeError(f"unknown export format '{fmt}' (use {', '.join(EXPORT_FORMATS)})")
    if fmt in ("yaml", "json"):
        return dump_genome(genome, fmt)
    validate(genome)
    name = filename or f"{_module_name(genome.name)}.py"
    found = found_with_settings(parse_lm(lm))
    if genome.kind == "code":
        return _export_code(genome, name, found)
    if genome.kind == "portfolio":
        return _export_portfolio(genome, name, found)
    return _export_config(genome, name, found)


def found_with_settings(cfg: LMConfig) -> dict[str, Any]:
    """What an export records of the LM its system was found with (never a key: at most the name of the
    environment variable that holds it)."""
    local = cfg.is_local or cfg.is_fake
    return {"model": cfg.model, "api_base": None if local else cfg.api_base,
            "api_key_env": None if local else cfg.api_key_env, "temperature": cfg.temperature,
            "max_tokens": cfg.max_tokens, "adapter": cfg.adapter, "extra": dict(cfg.extra)}


def _module_name(name: str) -> str:
    text = re.sub(r"[^A-Za-z0-9_]+", "_", name).strip("_").lower() or "system"
    return text if text[0].isalpha() else f"system_{text}"


def _template(name: str) -> str:
    return resources.files("masforge.export.templates").joinpath(name).read_text(encoding="utf-8").strip("\n")


# ------------------------------------------------------------------------------------------------
# Python source helpers


def _lit(value: Any) -> str:
    """A Python literal for plain data (str, numbers, bools, None, lists, tuples, dicts), strings double-quoted."""
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)  # a JSON string is a valid Python literal of the same value
    if isinstance(value, bool) or value is None or isinstance(value, int | float):
        return repr(value)
    if isinstance(value, list):
        return "[" + ", ".join(_lit(v) for v in value) + "]"
    if isinstance(value, tuple):
        return "(" + ", ".join(_lit(v) for v in value) + ("," if len(value) == 1 else "") + ")"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{_lit(k)}: {_lit(v)}" for k, v in value.items()) + "}"
    raise TypeError(f"cannot write {type(value).__name__} as a literal")


def _block(value: Any, indent: int, lead: int = 0, width: int = 118) -> str:
    """``_lit(value)`` on one line if it fits after ``lead`` characters, else one element per line."""
    one = _lit(value)
    if lead + len(one) <= width or not isinstance(value, list | tuple | dict) or not value:
        return one
    pad = " " * (indent + 4)
    if isinstance(value, dict):
        items = [f"{pad}{_lit(k)}: {_block(v, indent + 4, len(pad) + len(_lit(k)) + 2)}," for k, v in value.items()]
        return "{\n" + "\n".join(items) + "\n" + " " * indent + "}"
    items = [f"{pad}{_block(v, indent + 4, len(pad))}," for v in value]
    left, right = ("[", "]") if isinstance(value, list) else ("(", ")")
    return left + "\n" + "\n".join(items) + "\n" + " " * indent + right


def _py_str(text: str, indent: int, lead: int = 0, width: int = 118) -> str:
    """A string literal: on one line if it fits, else implicitly concatenated chunks in parentheses."""
    literal = _lit(text)
    if lead + len(literal) <= width or len(text) < 20:
        return literal
    pad = " " * (indent + 4)
    room = width - len(pad)
    chunks: list[str] = []
    current = ""
    for token in re.findall(r"\S*\s*", text):
        if not token:
            continue
        if current and len(_lit(current + token)) > room:
            chunks.append(current)
            current = ""
        current += token
    if current:
        chunks.append(current)
    body = "\n".join(f"{pad}{_lit(chunk)}" for chunk in chunks)
    return f"(\n{body}\n{' ' * indent})"


def _docstring(text: str) -> str:
    """``text`` made safe inside a regular triple-quoted docstring."""
    return text.replace("\\", "\\\\").replace('"""', '\\"\\"\\"')


def _wrap(text: str, indent: str = "") -> str:
    paragraphs = [p for p in re.split(r"\n\s*\n", text.strip()) if p.strip()]
    return "\n\n".join(textwrap.fill(" ".join(p.split()), _WRAP, initial_indent=indent, subsequent_indent=indent)
                       for p in paragraphs)


def _const_name(agent_id: str, taken: set[str]) -> str:
    base = re.sub(r"_+", "_", agent_id.upper()).strip("_") or "AGENT"
    name = f"{base}_INSTRUCTIONS"
    i = 2
    while name in taken:
        name = f"{base}_{i}_INSTRUCTIONS"
        i += 1
    taken.add(name)
    return name


def _imports(lines: set[str]) -> str:
    """Import lines merged by module and sorted the way ruff/isort does (plain ``import`` lines first)."""
    plain = sorted({x for x in lines if x.startswith("import ")}, key=lambda x: x.split()[1])
    froms: dict[str, set[str]] = {}
    for line in lines:
        if line.startswith("from "):
            module, _, names = line[5:].partition(" import ")
            froms.setdefault(module, set()).update(n.strip() for n in names.split(","))
    merged = [f"from {m} import {', '.join(sorted(froms[m]))}" for m in sorted(froms)]
    return "\n".join(plain + merged)


@dataclass
class _ToolSource:
    """A tool implementation copied into an export: source text, the imports it needs, its entry function."""

    source: str
    imports: set[str]
    function: str


def _tool_source(name: str, reserved: set[str]) -> _ToolSource | None:
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
    return _ToolSource("".join(parts), imports, fn.__name__)


def _tool_sections(tools: list[str], reserved: set[str]) -> tuple[list[str], set[str], dict[str, str]]:
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
        found = _tool_source(name, reserved)
        if found is None:
            continue  # build(tools={name: fn}) must supply it
        sections.append(f"# Tool {name!r}: copied from masforge ({found.function}), so it behaves the same.\n"
                        + found.source)
        imports |= found.imports
        functions[name] = found.function
        reserved |= top_level_names(ast.parse(found.source))
    return sections, imports, functions


def _found_with_lines(found: dict[str, Any]) -> list[str]:
    model = found["model"]
    where = "masforge's embedded model" if model == "local" or model.startswith("local:") else model
    return [
        "# The LM this system was found with (the default of build() and the command line): model, endpoint, the",
        "# name of the variable holding its API key, sampling, and the prompt adapter agents that leave it to the",
        f"# LM use (auto: plain on the embedded model, chat elsewhere). Found on {where}.",
        f"FOUND_WITH: dict[str, Any] = {_block(found, 0, 30)}",
    ]


def _assemble(out: list[str], runtime: list[str], imports: set[str], tools: dict[str, str], tool_type: str) -> str:
    """The module: head (``@IMPORTS@`` placeholder), runtime sections, default tools, entry point."""
    default_tools = ", ".join(f"{_lit(t)}: {f}" for t, f in tools.items())
    tail = [
        _RULE, "# Default tool implementations (build(tools=...) adds or replaces some)", _RULE, "",
        f"DEFAULT_TOOLS: dict[str, {tool_type}] = {{{default_tools}}}", "", "",
        'if __name__ == "__main__":', "    sys.exit(main())",
    ]
    body = "\n".join(out) + "\n\n\n" + "\n\n\n".join(r.strip("\n") for r in runtime) + "\n\n\n" + "\n".join(tail)
    kept = used_imports(imports | {"import os", "import sys"}, body.replace("@IMPORTS@", "").replace("@LIBS@", ""))
    # dspy (and litellm through it) is imported after the line that keeps litellm from downloading prices
    third_party = {i for i in kept if is_third_party(i)}
    libs = _library_imports(_imports(third_party)) if third_party else ""
    body = body.replace("@LIBS@\n\n", libs + "\n\n" if libs else "")
    return body.replace("@IMPORTS@", _imports({i for i in kept if not is_third_party(i)})) + "\n"


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


def _head_names(out: list[str]) -> set[str]:
    """Top-level names the generated head of an export defines (the runtime must not redefine them)."""
    return top_level_names(ast.parse("\n".join(out).replace("@IMPORTS@", "").replace("@LIBS@", "")))


def _usage_lines(filename: str, module: str, found: dict[str, Any], example_input: str, example_call: str,
                 sandbox: str = "") -> list[str]:
    model = found["model"]
    lines = [f"Command line{sandbox}:", "", f'    python {filename} "What is 17 * 23?"', ""]
    if model == "local" or model.startswith("local:"):
        lines += [_wrap("It runs on the LM it was found with, masforge's embedded model: where masforge is "
                        "installed (pip install masforge, then masforge models pull) it starts the model itself. "
                        "Any OpenAI-compatible server or hosted model works too:"), "",
                  f'    python {filename} "..." --model openai/<name> --api-base http://localhost:8080/v1',
                  f'    python {filename} "..." --model openai/gpt-4o-mini    # with OPENAI_API_KEY set']
    else:
        lines += [_wrap(f"It runs on the LM it was found with, {model}; --model picks another (any litellm model "
                        "string, or an OpenAI-compatible server with --api-base):"), "",
                  f"    python {filename} --field {example_input}=... --model ollama/llama3 --api-base "
                  "http://localhost:11434"]
    lines += ["", f"From Python{sandbox}:", "", f"    from {module} import build", "", *example_call.splitlines()]
    return lines


# ------------------------------------------------------------------------------------------------
# config genomes


def _export_config(genome: Genome, filename: str, found: dict[str, Any]) -> str:
    from masforge import __version__
    from masforge.execution.compile import system_spec

    spec = system_spec(genome)
    agents = list(spec.agents.values())
    tools_used = spec.needed_tools()
    module = filename[:-3] if filename.endswith(".py") else filename
    taken: set[str] = set()
    consts = {a.id: _const_name(a.id, taken) for a in agents}

    # ---- docstring
    lines = [f"{_docstring(genome.name)}: a multi-agent LLM system exported from masforge.", ""]
    if genome.description.strip():
        lines += [_docstring(_wrap(genome.description)), ""]
    if genome.source.strip():
        lines += [_docstring(_wrap(f"Idea: {genome.source}")), ""]
    lines += [
        f"Genome id: {genome.id}",
        f"Exported by masforge {__version__}; this module needs only dspy and litellm (no masforge).",
        "",
        "It runs on masforge's own runtime, inlined below: the same dspy signatures and instructions, prompt",
        "adapters, message passing, sample indices and aggregation, so on the same deterministic LM it gives the",
        "same answers as masforge. Structure:",
        "",
    ]
    for agent in agents:
        if agent.module == EXECUTE_MODULE:
            lines.append(f"    {agent.id}: execute (runs the answers' code against the stated examples and written "
                         "tests; no LM)")
            continue
        extra = f", {agent.copies} copies" if agent.copies > 1 else ""
        extra += f", tools: {', '.join(agent.tools)}" if agent.tools else ""
        extra += f", adapter: {agent.adapter}" if agent.adapter != "auto" else ""
        lines.append(f"    {agent.id}: {agent.module} ({agent.signature}){extra}")
    topo = genome.topology
    edges = [f"{a} -> {b}" + (f" (if {topo.condition_of(a, b)})" if topo.condition_of(a, b) else "")
             for a, b in topo.edges]
    lines.append(textwrap.fill("edges: " + ", ".join(edges), _WRAP,
                               initial_indent="    ", subsequent_indent="        ", break_on_hyphens=False))
    if any(c for _, c in spec.plan):
        lines.append(f"    cycles run {topo.rounds} rounds, {topo.message_passing} message passing")
    lines.append(f"    aggregation: {topo.aggregation}" + (f" (judge: {topo.judge})" if topo.aggregation == "judge"
                                                          else ""))
    call = (f'    print(build()({genome.inputs[0]}="What is 17 * 23?").{genome.outputs[0]})\n'
            '    print(build(lm=dspy.LM("openai/gpt-4o-mini"))(...))    # on another LM (import dspy)')
    lines += ["", *_usage_lines(filename, module, found, genome.inputs[0], call)]
    if "python" in tools_used:
        lines += ["", _wrap("NOTE: the python tool runs model-written programs in a child process with a timeout. "
                            "That is NOT a sandbox (masforge runs them in its sandbox): run this module in a "
                            "container or VM if that matters.")]
    doc = "\n".join(lines)

    # ---- the system as data
    out: list[str] = [
        *_file_head(doc, "config", genome),
        _RULE,
        "# The system",
        _RULE,
        "",
        f"NAME = {_py_str(genome.name, 0, 7)}",
        f"GENOME_ID = {_lit(genome.id)}",
        f"INPUTS = {_block(genome.inputs, 0, 9)}",
        f"OUTPUTS = {_block(genome.outputs, 0, 10)}",
        "",
        "# The instructions of each agent: the docstring of its dspy signature (role line + instructions).",
    ]
    for agent in agents:
        const = consts[agent.id]
        out.append(f"{const} = {_py_str(agent.instructions, 0, len(const) + 3)}")
    out += [
        "",
        "# Each agent: its dspy module kind and signature (its steps follow from the kind: see agent_steps), input",
        "# and output fields, the LM alias it uses, an optional temperature, tools, independent copies, the",
        "# iteration limit of react / refine / program_of_thought, and its prompt adapter (auto: the LM's choice).",
        "AGENTS: dict[str, dict[str, Any]] = {",
    ]
    for agent in agents:
        out.append(f"    {_lit(agent.id)}: {{")
        out.append(f'        "module": {_lit(agent.module)},')
        out.append(f'        "signature": {_py_str(agent.signature, 8, 21)},')
        out.append(f'        "instructions": {consts[agent.id]},')
        for key in ("inputs", "outputs", "lm", "temperature", "tools", "copies", "max_iters", "adapter"):
            out.append(f"        {_lit(key)}: {_block(getattr(agent, key), 8, 12 + len(key))},")
        out.append("    },")
    out += [
        "}",
        "",
        "# Wiring. An agent reads the inputs if \"input\" is among its predecessors, and \"messages\": the latest",
        "# outputs of its agent predecessors as text (each output is also readable by its field name).",
        f"EDGES = {_block([tuple(e) for e in topo.edges], 0, 8)}",
        f"PREDECESSORS = {_block(spec.predecessors, 0, 15)}",
        "# Execution plan: the agent graph's strongly connected components in the order they run;",
        "# a cyclic component (True) runs ROUNDS rounds.",
        f"PLAN = {_block(spec.plan, 0, 7)}",
        f"ROUNDS = {spec.rounds!r}",
        "# sequential: agents see this round's earlier outputs; synchronous: only the previous round's",
        f"MESSAGE_PASSING = {_lit(spec.message_passing)}",
        "# The outputs of every copy of these agents are the candidates the aggregation chooses from.",
        f"OUTPUT_AGENTS = {_block(spec.output_agents, 0, 16)}",
        f"AGGREGATION = {_lit(spec.aggregation)}  # last | majority_vote | run_examples | judge",
        f"JUDGE = {_lit(spec.judge)}",
        "# Conditional edges: an edge out of an execute node that carries only while the node's verdict is the one",
        "# named (pass: its pick passed every check; fail: it did not).",
        f"CONDITIONS = {_block(spec.conditions or {}, 0, 13)}",
        "",
        "# The tools' descriptions word for word as masforge shows them to the model (so the prompts are the same;",
        "# what the exported python tool really is: see run_python).",
        "TOOL_DESCRIPTIONS = {",
    ]
    return _finish_export(out, tools_used, found, "config_entry.py.txt", CONFIG_MODULES)


def _finish_export(out: list[str], tools_used: Sequence[str], found: Any, entry: str,
                   modules: Sequence[str]) -> str:
    """The rest of a config or portfolio export after its own data: the tools' descriptions (``out`` ends opening
    their dict), the LM it was found with, the entry point template, and masforge's runtime ``modules`` inlined."""
    from masforge.sandbox.tools import get_tool

    for name in tools_used:
        out.append(f"    {_lit(name)}: {_py_str(get_tool(name).description, 4, 6 + len(_lit(name)))},")
    out += ["}", "", *_found_with_lines(found), "", "", _template(entry), "", "",
            _RULE, "# Runtime: masforge's own (masforge/execution/standalone), the same for every exported system",
            _RULE]
    runtime = inline(modules, {"prompts": {"_read_prompts": "", "PROMPTS": _prompts_literal()}})
    reserved = runtime.names | _head_names(out)
    sections, tool_imports, functions = _tool_sections(tools_used, reserved)
    return _assemble(out, [*runtime.sections, *sections], runtime.imports | tool_imports, functions, "ToolFn")


def _prompts_literal() -> str:
    """The runtime's prompt templates as the literal an export carries (masforge reads them from files)."""
    from masforge.execution.standalone.prompts import PROMPTS

    items = [f"    {_lit(k)}: {_py_str(v, 4, 6 + len(_lit(k)))}," for k, v in PROMPTS.items()]
    return "PROMPTS: dict[str, str] = {\n" + "\n".join(items) + "\n}"


# ------------------------------------------------------------------------------------------------
# portfolio genomes


def _member_literal(member: Genome) -> str:
    """One member system as a dict literal: its spec (what SystemSpec takes) with its agents as plain dicts."""
    from masforge.execution.compile import system_spec

    spec = system_spec(member)
    agents = {aid: {k: v for k, v in a._asdict().items() if k != "id"} for aid, a in spec.agents.items()}
    data = {"name": spec.name, "genome_id": member.id, "inputs": spec.inputs, "outputs": spec.outputs,
            "agents": agents, "predecessors": spec.predecessors, "plan": spec.plan,
            "output_agents": spec.output_agents, "rounds": spec.rounds, "message_passing": spec.message_passing,
            "aggregation": spec.aggregation, "judge": spec.judge, "conditions": spec.conditions or {}}
    return _block(data, 4, 4)


def _router_literal(router: dict[str, Any]) -> str:
    """The router's numbers: settings on one line, each coefficient row on a line of its own."""
    head = ", ".join(f"{_lit(k)}: {_lit(router[k])}" for k in ("version", "n_hash", "ngrams", "classes"))
    pad = " " * 12
    rows = "".join("        [\n" + textwrap.fill(", ".join(_lit(x) for x in row), 118, initial_indent=pad,
                                                  subsequent_indent=pad) + ",\n        ],\n" for row in router["coef"])
    return (f"{{{head},\n    \"coef\": [\n{rows}    ],\n    \"intercept\": {_lit(router['intercept'])}}}")


def _export_portfolio(genome: Genome, filename: str, found: dict[str, Any]) -> str:
    from masforge import __version__
    from masforge.execution.compile import system_spec

    body = genome.portfolio
    assert body is not None  # validated by export_genome
    code = [m.name for m in body.members if m.kind != "config"]
    if code:
        raise GenomeError(f"portfolio '{genome.name}': member '{code[0]}' is a code genome, which a portfolio export "
                          "cannot carry yet; export the portfolio as yaml, or build it from config genomes only")
    specs = [system_spec(m) for m in body.members]
    tools_used = sorted({t for s in specs for t in s.needed_tools()} | ({"python"} if body.escalation else set()))
    module = filename[:-3] if filename.endswith(".py") else filename
    lines = [f"{_docstring(genome.name)}: a portfolio of multi-agent LLM systems exported from masforge.", ""]
    if genome.description.strip():
        lines += [_docstring(_wrap(genome.description)), ""]
    lines += [
        f"Genome id: {genome.id}",
        f"Exported by masforge {__version__}; this module needs only dspy and litellm (no masforge).",
        "",
        _wrap("A router (a linear model over features of the question, stored as plain numbers in ROUTER) picks one "
              "member per question, and that member answers exactly as it would alone, on masforge's own runtime "
              "inlined below. Members:"),
        "",
    ]
    for i, member in enumerate(body.members):
        chosen = "" if i in body.router.classes else " (the router never picks it)"
        lines.append(f"    {i}: {_docstring(member.name)} ({member.short_id}){chosen}")
    if body.escalation:
        lines += ["", _wrap("Escalation: an answer that fails an example the question states passes the question on "
                            "to the next member of " + ", ".join(str(i) for i in body.escalation) + ".")]
    call = (f'    print(build()({genome.inputs[0]}="What is 17 * 23?").{genome.outputs[0]})\n'
            f'    print(build().choose({genome.inputs[0]}="..."))    # the member the router picks')
    lines += ["", *_usage_lines(filename, module, found, genome.inputs[0], call)]
    if "python" in tools_used:
        lines += ["", _wrap("NOTE: the python tool runs model-written programs in a child process with a timeout. "
                            "That is NOT a sandbox (masforge runs them in its sandbox): run this module in a "
                            "container or VM if that matters.")]
    out: list[str] = [
        *_file_head("\n".join(lines), "portfolio", genome),
        _RULE,
        "# The portfolio",
        _RULE,
        "",
        f"NAME = {_py_str(genome.name, 0, 7)}",
        f"GENOME_ID = {_lit(genome.id)}",
        f"INPUTS = {_block(genome.inputs, 0, 9)}",
        f"OUTPUTS = {_block(genome.outputs, 0, 10)}",
        "",
        "# Each member system: its agents (module kind, signature, full instructions, fields, LM alias, sampling,",
        "# tools, copies, iterations, prompt adapter), its wiring, execution plan and aggregation (see SystemSpec).",
        "MEMBERS: list[dict[str, Any]] = [",
        *[f"    {_member_literal(m)}," for m in body.members],
        "]",
        "",
        "# The router: classes are member indices; one coefficient row per class (one row for two classes), over the",
        "# features question_features computes (hashed words and word pairs, then a few numbers about the question).",
        f"ROUTER: dict[str, Any] = {_router_literal(body.router.model_dump())}",
        "# Member indices an answer failing the question's stated examples escalates along (empty: no escalation).",
        f"ESCALATION = {_lit(list(body.escalation))}",
        "",
        "# The tools' descriptions word for word as masforge shows them to the model.",
        "TOOL_DESCRIPTIONS = {",
    ]
    return _finish_export(out, tools_used, found, "portfolio_entry.py.txt", PORTFOLIO_MODULES)


# ------------------------------------------------------------------------------------------------
# code genomes


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


def _export_code(genome: Genome, filename: str, found: dict[str, Any]) -> str:
    from masforge import __version__
    from masforge.sandbox.tools import tool_names

    code = (genome.code or "").strip() + "\n"
    module = filename[:-3] if filename.endswith(".py") else filename
    lines = [
        _wrap(CODE_WARNING),
        "",
        _wrap("masforge itself only ever runs this code in its sandbox (separate process, unprivileged user, no "
              "network, resource limits). Importing this module does not run the searched code; build() and the "
              "command line do."),
        "",
        f"{_docstring(genome.name)}: a code-defined system exported from masforge.",
        "",
    ]
    if genome.description.strip():
        lines += [_docstring(_wrap(genome.description)), ""]
    if genome.source.strip():
        lines += [_docstring(_wrap(f"Idea: {genome.source}")), ""]
    lines += [
        f"Genome id: {genome.id}",
        f"Exported by masforge {__version__}; needs only litellm (llm() and tool() are implemented with it).",
        "",
        *_usage_lines(filename, module, found, genome.inputs[0],
                      f'    print(build()({genome.inputs[0]}="What is 17 * 23?")["{genome.outputs[0]}"])',
                      " (inside a sandbox)"),
    ]
    doc = "\n".join(lines)
    out = [
        *_file_head(_docstring(doc), "code", genome),
        f"NAME = {_py_str(genome.name, 0, 7)}",
        f"GENOME_ID = {_lit(genome.id)}",
        f"INPUTS = {_block(genome.inputs, 0, 9)}",
        f"OUTPUTS = {_block(genome.outputs, 0, 10)}",
        "",
        _RULE,
        "# The searched system, verbatim. MACHINE-WRITTEN CODE: run it only in a sandbox.",
        "# It defines forward(inputs) and calls llm(prompt, system=None, temperature=None, lm='worker', sample=0)",
        "# and tool(name, arg); CodeSystem below executes it in a namespace of its own where those two exist.",
        _RULE,
        "",
        f"SYSTEM_CODE = {_code_literal(code)}",
        "",
        *_found_with_lines(found),
        "",
        "",
        _template("code_entry.py.txt"),
        "",
        "",
        _RULE,
        "# Runtime: masforge's own (masforge/execution/standalone), the same for every exported system",
        _RULE,
    ]
    runtime = inline(CODE_MODULES)
    reserved = runtime.names | _head_names(out)
    sections, tool_imports, functions = _tool_sections(["python", *[t for t in tool_names() if t != "python"]],
                                                       reserved)
    return _assemble(out, [*runtime.sections, *sections], runtime.imports | tool_imports, functions, "CodeToolFn")


def write_export(text: str, output: str | Path) -> Path:
    """Write an export to ``output`` (parents created; a symlink there is replaced, never followed); returns the
    path."""
    return write_text_file(output, redact(text))
