"""Export a genome as something that runs without masforge (loading it back: :mod:`masforge.export.loader`).

Formats (``masforge export ID --format ...``):

* ``yaml`` / ``json``: the genome file itself (same text as the archive stores; same genome id).
* ``python``: ONE standalone Python module that needs only ``dspy`` and ``litellm``.

  - A **config** genome becomes readable code: the agents' full instructions as constants, the wiring as
    plain data, and a small runtime that mirrors :mod:`masforge.genome.compile` line by line (same dspy
    signatures and instructions, role line, module kinds including program_of_thought and refine,
    rounds and message passing, copies as independent samples, majority-vote normalisation, judge).
    ``build(lm=...)`` returns a ``dspy.Module``; ``python exported.py "question" --model ...`` answers from
    the command line. The sample index masforge gives each LM call (``copy + 1000 * round``) reaches the
    LM as dspy's ``rollout_id``, so on the same deterministic LM the export gives the same outputs as
    masforge (the tests check this for every config seed).
  - A **code** genome becomes a module that states at the top that its code came from an automated search
    and must be run in a sandbox; ``llm()`` and ``tool()`` are implemented with litellm. The searched code
    is kept verbatim in ``SYSTEM_CODE`` and executed in its own namespace.

"""

from __future__ import annotations

import ast
import inspect
import json
import re
import sys
import textwrap
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from masforge.errors import ArchiveError, GenomeError
from masforge.export.marker import EXPORT_FORMAT_VERSION, MARKER_NAME, is_exported
from masforge.genome import compile as _compile
from masforge.genome.schema import Genome

EXPORT_FORMATS = ("python", "yaml", "json")
CODE_WARNING = (
    "WARNING: the code in this module was written by an automated search (masforge) and has not been "
    "reviewed by a person. Run it only in a sandbox (a container or VM without secrets, with limited "
    "network, file system and resources): it can do anything Python can do."
)
_WRAP = 108


# ------------------------------------------------------------------------------------------------
# resolving what to export


def resolve_genome(ref: str, archive: str | Path | None = None) -> Genome:
    """The genome ``ref`` names: a genome file, a seed name or a genome id prefix in ``archive``."""
    from masforge.genome.io import load_genome
    from masforge.seeds import load_seed, seed_names

    path = Path(ref)
    if path.is_file():
        if is_exported(path):
            raise GenomeError(f"{path}: is already an exported module; export the genome it came from "
                              "(its id is in MASFORGE_EXPORT) instead")
        return load_genome(path)
    if path.suffix.lower() in (".yaml", ".yml", ".json", ".py"):
        raise GenomeError(f"{path}: no such genome file")
    if ref in seed_names():
        return load_seed(ref)
    if re.fullmatch(r"[0-9a-fA-F]{1,64}", ref):
        from masforge.archive.store import Archive

        where = Path(archive) if archive is not None else Path("runs/latest/archive")
        if not where.exists():
            raise ArchiveError(f"{where}: no archive there to look up id '{ref}' (pass --archive PATH, "
                               "a run's archive is <run folder>/archive)")
        with Archive.open(where) as arch:
            return arch.genome(ref)
    raise GenomeError(f"'{ref}' is neither a genome file, a seed (seeds: {', '.join(seed_names())}) "
                      "nor a genome id (hex digits)")


def export_genome(genome: Genome, fmt: str = "python", filename: str | None = None) -> str:
    """The text of ``genome`` exported as ``python``, ``yaml`` or ``json`` (``filename`` names the module
    in the usage notes of a Python export)."""
    from masforge.genome.io import dump_genome
    from masforge.genome.validate import validate

    if fmt not in EXPORT_FORMATS:
        raise GenomeError(f"unknown export format '{fmt}' (use {', '.join(EXPORT_FORMATS)})")
    if fmt in ("yaml", "json"):
        return dump_genome(genome, fmt)
    validate(genome)
    name = filename or f"{_module_name(genome.name)}.py"
    if genome.kind == "code":
        return _export_code(genome, name)
    return _export_config(genome, name)


def _module_name(name: str) -> str:
    text = re.sub(r"[^A-Za-z0-9_]+", "_", name).strip("_").lower() or "system"
    return text if text[0].isalpha() else f"system_{text}"


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
    import inspect

    from masforge.runtime.tools import get_tool

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


def _runtime_names(*templates: str) -> set[str]:
    names: set[str] = set()
    for text in templates:
        for node in ast.parse(text.replace("@DEFAULT_TOOLS@", "")).body:
            if isinstance(node, ast.FunctionDef | ast.ClassDef):
                names.add(node.name)
            elif isinstance(node, ast.Assign | ast.AnnAssign):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                names.update(t.id for t in targets if isinstance(t, ast.Name))
    return names


def _tool_sections(tools: list[str], templates: tuple[str, ...],
                   system_names: set[str]) -> tuple[list[str], set[str], dict[str, str]]:
    """Source sections, imports and ``name -> function`` of the default tool implementations of an export."""
    reserved = _runtime_names(*templates) | system_names
    sections: list[str] = []
    imports: set[str] = set()
    functions: dict[str, str] = {}
    for name in tools:
        if name == "python":
            sections.append(_PYTHON_TOOL)
            imports |= {"import contextlib", "import json", "import os", "import signal", "import subprocess",
                        "import sys", "import tempfile"}
            functions[name] = "run_python"
            continue
        found = _tool_source(name, reserved)
        if found is None:
            continue  # build(tools={name: fn}) must supply it
        sections.append(f"# Tool {name!r}: copied from masforge ({found.function}), so it behaves the same.\n"
                        + found.source)
        imports |= found.imports
        functions[name] = found.function
        reserved |= _runtime_names(found.source)
    return sections, imports, functions


# ------------------------------------------------------------------------------------------------
# config genomes


@dataclass
class _AgentPlan:
    """What the export writes for one agent (everything precomputed from the genome)."""

    id: str
    module: str
    signature: str
    inputs: list[str]
    outputs: list[str]
    steps: dict[str, tuple[str, str]]
    """step name -> (dspy signature text, instruction expression in the generated code)"""
    step_text: dict[str, str]
    """step name -> the instruction text itself (for the self-check)"""
    lm: str
    temperature: float | None
    tools: list[str]
    copies: int
    max_iters: int
    role: str
    const: str
    instructions: str
    predecessors: list[str] = field(default_factory=list)


def _agent_plans(genome: Genome) -> list[_AgentPlan]:
    from masforge.genome.compile import _instructions, _with_fields
    from masforge.genome.graph import predecessors
    from masforge.genome.validate import agent_signature
    from masforge.runtime.prompts import render

    taken: set[str] = set()
    plans = []
    for agent in genome.agents:
        sig = agent_signature(genome, agent)
        sig_text = str(sig)
        outs = sig_text.split("->", 1)[1].strip()
        ins = sig.input_names
        default = f"Given the fields {', '.join(ins)}, produce the fields {', '.join(sig.output_names)}."
        instr = _instructions(agent, default)
        const = _const_name(agent.id, taken)
        steps: dict[str, tuple[str, str]] = {}
        texts: dict[str, str] = {}
        if agent.module in ("predict", "chain_of_thought", "react"):
            steps["main"], texts["main"] = (sig_text, const), instr
        elif agent.module == "program_of_thought":
            steps["write"] = (_with_fields(ins, ["feedback"], "code"), f'{const} + " " + POT_WRITE')
            texts["write"] = f"{instr} {render('pot_write')}"
            steps["answer"] = (_with_fields(ins, ["code", "code_output"], outs), f'{const} + " " + POT_ANSWER')
            texts["answer"] = f"{instr} {render('pot_answer')}"
        elif agent.module == "refine":
            steps["main"], texts["main"] = (sig_text, const), instr
            steps["critique"] = (_with_fields(ins, ["draft"], "critique, is_correct: bool"), "REFINE_CRITIQUE")
            texts["critique"] = render("refine_critique")
            steps["revise"] = (_with_fields(ins, ["draft", "critique"], outs), f'{const} + " " + REFINE_REVISE')
            texts["revise"] = f"{instr} {render('refine_revise')}"
        else:  # pragma: no cover - a module kind this exporter does not know yet
            raise GenomeError(f"agent '{agent.id}': module kind '{agent.module}' cannot be exported yet")
        plans.append(_AgentPlan(
            id=agent.id, module=agent.module, signature=sig_text, inputs=ins, outputs=sig.output_names,
            steps=steps, step_text=texts, lm=agent.lm, temperature=agent.temperature, tools=list(agent.tools),
            copies=agent.copies, max_iters=agent.max_iters, role=agent.role, const=const, instructions=instr,
            predecessors=predecessors(genome, agent.id)))
    return plans


_KIND_CLASSES = {
    "predict": {"main": "Predict"},
    "chain_of_thought": {"main": "ChainOfThought"},
    "react": {"main": "ReAct"},
    "program_of_thought": {"write": "Predict", "answer": "Predict"},
    "refine": {"main": "ChainOfThought", "critique": "Predict", "revise": "Predict"},
}


def _check_against_compiler(genome: Genome, plans: list[_AgentPlan]) -> None:
    """Refuse to export if the precomputed steps differ from what masforge's compiler builds (no LM call):
    the same dspy module classes with the same signatures (instructions, field names and types)."""
    import dspy

    from masforge.genome.compile import _AgentRunner
    from masforge.runtime.lm import LMClient

    client = LMClient({"worker": "fake"}, cache=False)
    for plan in plans:
        runner = _AgentRunner(genome, genome.agent(plan.id), client)
        theirs = {name: type(module).__name__ for name, module in runner.steps.items()}
        if theirs != _KIND_CLASSES[plan.module]:
            raise GenomeError(f"agent '{plan.id}': masforge builds {theirs}, the exporter {_KIND_CLASSES[plan.module]} "
                              "(the exporter is out of date with masforge/genome/compile.py)")
        for name, module in runner.steps.items():
            mine = dspy.Signature(plan.steps[name][0], plan.step_text[name])
            if isinstance(module, dspy.ChainOfThought):
                base, mine = module.predict.signature, dspy.ChainOfThought(mine).predict.signature
            else:
                base = module.signature
            if _sig_key(base) != _sig_key(mine):
                raise GenomeError(f"agent '{plan.id}' step '{name}': the exported signature differs from masforge's "
                                  "(the exporter is out of date with masforge/genome/compile.py)")


def _sig_key(sig: Any) -> tuple[Any, ...]:
    def fields(d: dict[str, Any]) -> list[tuple[str, str]]:
        return [(k, str(v.annotation)) for k, v in d.items()]

    return (sig.instructions, fields(sig.input_fields), fields(sig.output_fields))


def _export_config(genome: Genome, filename: str) -> str:
    from masforge import __version__
    from masforge.genome.graph import agent_edges, execution_plan, is_cyclic
    from masforge.runtime.prompts import render
    from masforge.runtime.tools import get_tool

    plans = _agent_plans(genome)
    _check_against_compiler(genome, plans)
    topo = genome.topology
    kinds = {p.module for p in plans}
    tools_used = sorted({t for p in plans for t in p.tools} | ({"python"} if "program_of_thought" in kinds else set()))
    edges = agent_edges(genome)
    plan_order = [(comp, is_cyclic(comp, edges)) for comp in execution_plan(genome)]
    feeders = [a.id for a in genome.agents if (a.id, "output") in set(topo.edges)]
    module = filename[:-3] if filename.endswith(".py") else filename

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
        "It reproduces masforge's execution semantics exactly: the same dspy signatures and instructions,",
        "message passing, sample indices and aggregation, so on the same deterministic LM it gives the same",
        "answers as masforge. Structure:",
        "",
    ]
    for plan in plans:
        extra = f", {plan.copies} copies" if plan.copies > 1 else ""
        extra += f", tools: {', '.join(plan.tools)}" if plan.tools else ""
        lines.append(f"    {plan.id}: {plan.module} ({plan.signature}){extra}")
    lines.append(textwrap.fill("edges: " + ", ".join(f"{a} -> {b}" for a, b in topo.edges), _WRAP,
                               initial_indent="    ", subsequent_indent="        ", break_on_hyphens=False))
    if any(c for _, c in plan_order):
        lines.append(f"    cycles run {topo.rounds} rounds, {topo.message_passing} message passing")
    lines.append(f"    aggregation: {topo.aggregation}" + (f" (judge: {topo.judge})" if topo.aggregation == "judge"
                                                          else ""))
    lines += [
        "",
        "Command line:",
        "",
        f'    python {filename} "What is 17 * 23?" --model openai/gpt-4o-mini',
        f"    python {filename} --field {genome.inputs[0]}=... --model ollama/llama3 --api-base http://localhost:11434",
        "",
        "From Python:",
        "",
        "    import dspy",
        f"    from {module} import build",
        "",
        '    program = build(lm=dspy.LM("openai/gpt-4o-mini"))',
        f'    print(program({genome.inputs[0]}="What is 17 * 23?").{genome.outputs[0]})',
    ]
    if "python" in tools_used:
        lines += ["", _wrap("NOTE: the python tool runs model-written programs in a child process with a timeout. "
                            "That is NOT a sandbox (masforge runs them in its sandbox): run this module in a "
                            "container or VM if that matters.")]
    doc = "\n".join(lines)

    # ---- imports
    imports = {"import argparse", "import contextlib", "import contextvars", "import json", "import os",
               "import re", "import sys", "import warnings", "from collections import Counter",
               "from collections.abc import Callable", "from concurrent.futures import ThreadPoolExecutor",
               "from typing import Any"}

    # ---- the system as data
    marker = {"format": EXPORT_FORMAT_VERSION, "kind": "config", "genome_id": genome.id, "masforge": __version__}
    out: list[str] = [
        "#!/usr/bin/env python3",
        f'"""{doc}\n"""',
        "",
        "from __future__ import annotations",
        "",
        "@IMPORTS@",
        "",
        'os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # litellm\'s bundled price table, no download',
        "",
        "import dspy  # noqa: E402",
        "",
        f"{MARKER_NAME} = {_block(marker, 0, len(MARKER_NAME) + 3)}",
        "",
        "# " + "=" * 110,
        "# The system",
        "# " + "=" * 110,
        "",
        f"NAME = {_py_str(genome.name, 0, 7)}",
        f"GENOME_ID = {_lit(genome.id)}",
        f"INPUTS = {_block(genome.inputs, 0, 9)}",
        f"OUTPUTS = {_block(genome.outputs, 0, 10)}",
        "",
        "# The instructions of each agent: the docstring of its dspy signature (role line + instructions).",
    ]
    for plan in plans:
        out.append(f"{plan.const} = {_py_str(plan.instructions, 0, len(plan.const) + 3)}")
    if "program_of_thought" in kinds:
        out += ["", "# program_of_thought: a write step (code) and an answer step (reads the program's output).",
                f"POT_WRITE = {_py_str(render('pot_write'), 0, 12)}",
                f"POT_ANSWER = {_py_str(render('pot_answer'), 0, 13)}"]
    if "refine" in kinds:
        out += ["", "# refine: a chain-of-thought draft, then critique (is_correct stops) and revise steps.",
                f"REFINE_CRITIQUE = {_py_str(render('refine_critique'), 0, 18)}",
                f"REFINE_REVISE = {_py_str(render('refine_revise'), 0, 16)}"]
    out += [
        "",
        "# Each agent: its dspy module kind, input and output fields, steps (dspy signature, instructions), the LM",
        "# alias it uses, an optional temperature, tools, independent copies and the iteration limit of",
        "# react / refine / program_of_thought.",
        "AGENTS: dict[str, dict[str, Any]] = {",
    ]
    for plan in plans:
        out.append(f"    {_lit(plan.id)}: {{")
        for key, value in (("module", plan.module), ("inputs", plan.inputs), ("outputs", plan.outputs)):
            out.append(f"        {_lit(key)}: {_block(value, 8, 12 + len(key))},")
        out.append('        "steps": {')
        for step, (spec, expr) in plan.steps.items():
            out.append(f"            {_lit(step)}: ({_lit(spec)}, {expr}),")
        out.append("        },")
        for key, value in (("lm", plan.lm), ("temperature", plan.temperature), ("tools", plan.tools),
                           ("copies", plan.copies), ("max_iters", plan.max_iters)):
            out.append(f"        {_lit(key)}: {_block(value, 8, 12 + len(key))},")
        out.append("    },")
    out += [
        "}",
        "",
        "# Wiring. An agent reads the inputs if \"input\" is among its predecessors, and \"messages\": the latest",
        "# outputs of its agent predecessors as text (each output is also readable by its field name).",
        f"EDGES = {_block([tuple(e) for e in topo.edges], 0, 8)}",
        f"PREDECESSORS = {_block({p.id: p.predecessors for p in plans}, 0, 15)}",
        "# Execution plan: the agent graph's strongly connected components in the order they run;",
        "# a cyclic component (True) runs ROUNDS rounds.",
        f"PLAN = {_block(plan_order, 0, 7)}",
        f"ROUNDS = {topo.rounds!r}",
        "# sequential: agents see this round's earlier outputs; synchronous: only the previous round's",
        f"MESSAGE_PASSING = {_lit(topo.message_passing)}",
        "# The outputs of every copy of these agents are the candidates the aggregation chooses from.",
        f"OUTPUT_AGENTS = {_block(feeders, 0, 16)}",
        f"AGGREGATION = {_lit(topo.aggregation)}  # last | majority_vote | judge",
        f"JUDGE = {_lit(topo.judge if topo.aggregation == 'judge' else None)}",
        "",
        "# The tools' descriptions word for word as masforge shows them to the model (so the prompts are the same;",
        "# what the exported python tool really is: see run_python).",
        "TOOL_DESCRIPTIONS = {",
    ]
    for name in tools_used:
        out.append(f"    {_lit(name)}: {_py_str(get_tool(name).description, 4, 6 + len(_lit(name)))},")
    out.append("}")
    system_names = _runtime_names("\n".join(out).replace("@IMPORTS@", ""))
    sections, tool_imports, functions = _tool_sections(tools_used, (_RUNTIME_HEAD, _CONFIG_RUNTIME, _LITELLM_LM,
                                                                    _CONFIG_MAIN), system_names)
    out[out.index("@IMPORTS@")] = _imports(imports | tool_imports)
    default_tools = ", ".join(f"{_lit(t)}: {f}" for t, f in functions.items())
    runtime = [_RUNTIME_HEAD, *sections, _CONFIG_RUNTIME.replace("@DEFAULT_TOOLS@", default_tools), _LITELLM_LM,
               _CONFIG_MAIN]
    return "\n".join(out) + "\n\n\n" + "\n\n\n".join(r.strip("\n") for r in runtime) + "\n"

_RUNTIME_HEAD = '''
# ==============================================================================================================
# Runtime: the same for every exported masforge system (it mirrors masforge/genome/compile.py)
# ==============================================================================================================

# Custom dspy LMs implement forward(); dspy 3.4 warns that this interface is deprecated.
warnings.filterwarnings("ignore", message=".*BaseLM.forward\\\\(\\\\) or aforward\\\\(\\\\) is deprecated.*")
warnings.filterwarnings("ignore", message="rollout_id has no effect when temperature=0.*")

ToolFn = Callable[[str], str]
'''

_PYTHON_TOOL = '''
PYTHON_TIMEOUT_S = 10.0
PYTHON_MEMORY_MB = 512

# The child process runs the program as module "__sandbox__" (as masforge does, so `if __name__ ==
# "__main__":` blocks do not run) and reports how it ended in a result file.
_CHILD = r"""
import json, sys
try:
    import resource
    limit = int(sys.argv[3]) * 1024 * 1024
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
except Exception:
    pass

def _line(exc):
    name = type(exc).__name__
    try:
        text = str(exc)
    except BaseException:
        text = "<exception str() failed>"
    line = f"{name}: {text}" if text else name
    line = line.strip().splitlines()[0] if line.strip() else name
    return line if len(line) <= 500 else line[:497] + "..."

def _kind(exc):
    queue, seen = [exc], set()
    while queue:
        current = queue.pop(0)
        if id(current) in seen:
            continue
        seen.add(id(current))
        if isinstance(current, MemoryError):
            return "memory"
        queue.extend(e for e in (current.__cause__, current.__context__) if e is not None)
    return "exception"

with open(sys.argv[2], encoding="utf-8") as fh:
    source = fh.read()
try:
    compiled = compile(source, "<code>", "exec", dont_inherit=True)
except (SyntaxError, ValueError) as exc:
    verdict = {"ok": False, "error": _line(exc), "kind": "syntax"}
else:
    import types
    module = types.ModuleType("__sandbox__")
    sys.modules["__sandbox__"] = sys.modules["__main__"] = module
    try:
        exec(compiled, module.__dict__)
        verdict = {"ok": True}
    except BaseException as exc:
        verdict = {"ok": False, "error": _line(exc), "kind": _kind(exc)}
sys.stdout.flush()
with open(sys.argv[1], "w", encoding="utf-8") as fh:
    json.dump(verdict, fh)
"""


def run_python(code: str) -> str:
    """The python tool: run a program and return what it printed (or its error).

    THIS IS NOT A SANDBOX. The program runs in a separate Python process, in a fresh temporary directory, with a
    scrubbed environment, a wall-clock timeout and (where the OS allows) a memory limit -- but with your user's
    permissions, file system and network. masforge runs the same programs in its sandbox; run this module in a
    container or VM if the code may do harm.
    """
    src = code.strip()
    if src.startswith("```"):
        src = src.split("\\n", 1)[1] if "\\n" in src else ""
        src = src.rsplit("```", 1)[0]
    with tempfile.TemporaryDirectory(prefix="masforge-export-") as tmp:
        program, result, child = (os.path.join(tmp, n) for n in ("program.py", "result.json", "child.py"))
        with open(program, "w", encoding="utf-8") as fh:
            fh.write(src)
        with open(child, "w", encoding="utf-8") as fh:
            fh.write(_CHILD)
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LANG": "C.UTF-8", "PYTHONHASHSEED": "0",
               "HOME": tmp, "TMPDIR": tmp}
        proc = subprocess.Popen([sys.executable, "-s", child, result, program, str(PYTHON_MEMORY_MB)], cwd=tmp,
                                env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                start_new_session=True)
        try:
            raw, _ = proc.communicate(timeout=PYTHON_TIMEOUT_S)
            error, kind = None, None
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            raw, _ = proc.communicate()
            error, kind = f"TimeoutError: killed after {PYTHON_TIMEOUT_S} s", "timeout"
        if kind is None:
            try:
                with open(result, encoding="utf-8") as fh:
                    verdict = json.load(fh)
                if not verdict["ok"]:
                    error, kind = verdict["error"], verdict["kind"]
                    if kind == "memory" and error == "MemoryError":
                        error = f"MemoryError: out of memory (limit {PYTHON_MEMORY_MB} MB)"
            except (OSError, ValueError, KeyError):
                kind = "killed"
                error = f"Killed: the program's process ended without a result (status {proc.returncode})"
    out = raw.decode("utf-8", errors="replace").strip()
    if kind is not None:
        return (out + "\\n" if out else "") + f"error ({kind}): {error}"
    return out[-2000:] or "(no output: print the result)"
'''

_CONFIG_RUNTIME = '''
MESSAGES_INPUT = "messages"
JUDGE_INPUT = "candidates"
DEFAULT_TOOLS: dict[str, ToolFn] = {@DEFAULT_TOOLS@}


class SystemRunError(RuntimeError):
    """The system produced no answer (no agent with an edge to output produced one)."""


def _safe(fn: ToolFn) -> ToolFn:
    """A tool that returns its error as the observation instead of raising."""

    def call(arg: str) -> str:
        try:
            return str(fn(str(arg)))
        except Exception as exc:
            return f"error: {type(exc).__name__}: {exc}"

    return call


def _dspy_tool(name: str, fn: ToolFn) -> dspy.Tool:
    """A dspy tool taking one string argument, described as masforge describes it."""
    return dspy.Tool(_safe(fn), name=name, desc=TOOL_DESCRIPTIONS[name], args={"arg": {"type": "string"}})


@SHARED_HELPERS@


class Agent:
    """One agent: its dspy module(s), called with a dict of inputs, an LM and a sample index."""

    def __init__(self, agent_id: str, spec: dict[str, Any], tools: dict[str, ToolFn]) -> None:
        self.id = agent_id
        self.spec = spec
        self.kind = spec["module"]
        self.outputs: list[str] = spec["outputs"]
        self.tools = tools
        sigs = {name: dspy.Signature(text, instructions) for name, (text, instructions) in spec["steps"].items()}
        self.steps: dict[str, dspy.Module] = {}
        if self.kind == "predict":
            self.steps["main"] = dspy.Predict(sigs["main"])
        elif self.kind == "chain_of_thought":
            self.steps["main"] = dspy.ChainOfThought(sigs["main"])
        elif self.kind == "react":
            react_tools = [_dspy_tool(name, tools[name]) for name in spec["tools"]]
            self.steps["main"] = dspy.ReAct(sigs["main"], tools=react_tools, max_iters=spec["max_iters"])
        elif self.kind == "program_of_thought":
            self.steps["write"] = dspy.Predict(sigs["write"])
            self.steps["answer"] = dspy.Predict(sigs["answer"])
        elif self.kind == "refine":
            self.steps["main"] = dspy.ChainOfThought(sigs["main"])
            self.steps["critique"] = dspy.Predict(sigs["critique"])
            self.steps["revise"] = dspy.Predict(sigs["revise"])
        else:
            raise ValueError(f"agent {agent_id!r}: unknown module kind {self.kind!r}")

    def __call__(self, inputs: dict[str, Any], lm: dspy.BaseLM, sample: int) -> dict[str, Any]:
        # The sample index reaches the LM as dspy's rollout_id (masforge: copy + 1000 * round), so copies
        # are independent samples and a rerun reproduces them.
        options: dict[str, Any] = {"rollout_id": sample}
        if self.spec["temperature"] is not None:
            options["temperature"] = self.spec["temperature"]
        elif self.spec["copies"] > 1 and not lm.kwargs.get("temperature"):
            options["temperature"] = 0.7  # copies on a greedy LM sample, else every copy is the same answer
        with dspy.context(lm=lm.copy(**options)):
            if self.kind == "program_of_thought":
                return self._program_of_thought(inputs)
            if self.kind == "refine":
                return self._refine(inputs)
            pred = self.steps["main"](**inputs)
        # Keep the reasoning next to the outputs: debaters and judges read it in their messages.
        extra = {"reasoning": _plain(pred["reasoning"])} if "reasoning" in pred.keys() else {}
        return {**extra, **{k: _plain(pred[k]) for k in self.outputs}}

    def _program_of_thought(self, inputs: dict[str, Any]) -> dict[str, Any]:
        python = _safe(self.tools["python"])
        feedback, code, output = "none", "", ""
        for _ in range(self.spec["max_iters"]):
            code = str(self.steps["write"](**inputs, feedback=feedback).code)
            code = re.sub(r"^```(?:python)?\\s*|\\s*```\\s*$", "", code.strip())
            output = python(code)
            if "error (" not in output:
                break
            feedback = f"The previous program failed: {output[-500:]}"
        pred = self.steps["answer"](**inputs, code=code, code_output=output)
        return {k: _plain(pred[k]) for k in self.outputs}

    def _refine(self, inputs: dict[str, Any]) -> dict[str, Any]:
        pred = self.steps["main"](**inputs)
        result = {k: _plain(pred[k]) for k in self.outputs}
        for _ in range(self.spec["max_iters"] - 1):
            draft = "\\n".join(f"{k}: {v}" for k, v in result.items())
            crit = self.steps["critique"](**inputs, draft=draft)
            if bool(crit.is_correct):
                break
            pred = self.steps["revise"](**inputs, draft=draft, critique=crit.critique)
            result = {k: _plain(pred[k]) for k in self.outputs}
        return result


class System(dspy.Module):
    """The exported system as a dspy module: call it with the input fields, get a dspy.Prediction."""

    def __init__(self, lm: dspy.BaseLM | None = None, lms: dict[str, dspy.BaseLM] | None = None,
                 tools: dict[str, ToolFn] | None = None, trace_hook: Callable[..., Any] | None = None,
                 fatal: tuple[type[BaseException], ...] = ()) -> None:
        super().__init__()
        self.default_lm = lm
        self.lms = dict(lms or {})
        self.trace_hook = trace_hook
        self.fatal = fatal
        available = {**DEFAULT_TOOLS, **(tools or {})}
        needed = sorted({t for spec in AGENTS.values() for t in spec["tools"]}
                        | ({"python"} if any(s["module"] == "program_of_thought" for s in AGENTS.values()) else set()))
        missing = [t for t in needed if t not in available]
        if missing:
            raise ValueError(f"tool {missing[0]!r} has no implementation here: "
                             f"pass build(tools={{{missing[0]!r}: fn}})")
        self.agents = {aid: Agent(aid, spec, available) for aid, spec in AGENTS.items()}

    def _lm(self, alias: str) -> dspy.BaseLM:
        lm = self.lms.get(alias) or self.default_lm or dspy.settings.lm
        if lm is None:
            raise ValueError("no LM: pass build(lm=dspy.LM(...)) or call dspy.configure(lm=...) first")
        return lm

    def _scope(self, agent: Agent, copy: int, round_: int, inputs: dict[str, Any]) -> Any:
        if self.trace_hook is None:
            return contextlib.nullcontext()
        return self.trace_hook(agent.id, agent.kind, copy=copy, round=round_, inputs=inputs)

    def _run_agent(self, agent: Agent, ctx: dict[str, Any], round_: int) -> list[dict[str, Any]]:
        lm = self._lm(agent.spec["lm"])

        def one(copy: int) -> dict[str, Any]:
            with self._scope(agent, copy, round_, ctx) as call:
                out = agent(ctx, lm, sample=copy + 1000 * round_)
                if call is not None:
                    call.outputs = out
                return out

        copies = agent.spec["copies"]
        if copies == 1:
            return [one(0)]
        results: list[Any] = []
        with ThreadPoolExecutor(max_workers=min(copies, 8)) as pool:
            futures = [pool.submit(contextvars.copy_context().run, one, c) for c in range(copies)]
            for fut in futures:
                try:
                    results.append(fut.result())
                except BaseException as exc:  # collected; re-raised below if every copy failed
                    results.append(exc)
        for r in results:
            if isinstance(r, self.fatal):
                raise r
        ok = [r for r in results if isinstance(r, dict)]
        if not ok:
            raise results[0]
        return ok

    def _context(self, agent: Agent, inputs: dict[str, Any], state: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
        preds = PREDECESSORS[agent.id]
        avail: dict[str, Any] = {}
        if "input" in preds:
            avail.update({k: inputs[k] for k in INPUTS})
        entries: list[tuple[str, dict[str, Any]]] = []
        for pid in preds:
            if pid == "input":
                continue
            for copy, out in enumerate(state.get(pid, [])):
                label = pid if len(state[pid]) == 1 else f"{pid}#{copy + 1}"
                entries.append((label, out))
                for k, v in out.items():
                    avail.setdefault(k, v)
        avail[MESSAGES_INPUT] = format_messages(entries)
        return {k: avail.get(k, "(not available yet)") for k in agent.spec["inputs"]}

    def run(self, **inputs: Any) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        """The outputs and every candidate (the outputs of each copy of each agent feeding output)."""
        missing = [f for f in INPUTS if f not in inputs]
        if missing:
            raise TypeError(f"{NAME} needs input {missing[0]!r} (inputs: {', '.join(INPUTS)})")
        state: dict[str, list[dict[str, Any]]] = {}
        for comp, cyclic in PLAN:
            for r in range(ROUNDS if cyclic else 1):
                snapshot = {k: list(v) for k, v in state.items()}
                for aid in comp:
                    view = state
                    if MESSAGE_PASSING == "synchronous":
                        # Inside the cycle, agents only see the previous round.
                        view = {k: v for k, v in state.items() if k not in comp}
                        view.update({k: snapshot[k] for k in comp if k in snapshot})
                    agent = self.agents[aid]
                    state[aid] = self._run_agent(agent, self._context(agent, inputs, view), r)
        candidates = [out for aid in OUTPUT_AGENTS for out in state.get(aid, [])]
        if not candidates:
            raise SystemRunError(f"{NAME}: no agent produced an answer")
        return self._aggregate(inputs, state, candidates), candidates

    def _aggregate(self, inputs: dict[str, Any], state: dict[str, list[dict[str, Any]]],
                   candidates: list[dict[str, Any]]) -> dict[str, Any]:
        if AGGREGATION == "majority_vote":
            keys = [normalise_answer(c.get(OUTPUTS[0], "")) for c in candidates]
            winner = Counter(keys).most_common(1)[0][0]
            chosen = candidates[keys.index(winner)]
        elif AGGREGATION == "judge" and JUDGE:
            entries = []
            for aid in OUTPUT_AGENTS:
                for copy, out in enumerate(state.get(aid, [])):
                    entries.append((aid if len(state[aid]) == 1 else f"{aid}#{copy + 1}", out))
            avail = {**{k: inputs[k] for k in INPUTS}, JUDGE_INPUT: format_messages(entries)}
            judge = self.agents[JUDGE]
            chosen = self._run_agent(judge, {k: avail.get(k, "") for k in judge.spec["inputs"]}, 0)[0]
        else:
            chosen = candidates[-1]
        return {k: chosen.get(k, "") for k in OUTPUTS}

    def forward(self, **inputs: Any) -> dspy.Prediction:
        outputs, _ = self.run(**inputs)
        return dspy.Prediction(**outputs)


def build(lm: dspy.BaseLM | None = None, *, lms: dict[str, dspy.BaseLM] | None = None,
          tools: dict[str, ToolFn] | None = None, trace_hook: Callable[..., Any] | None = None,
          fatal: tuple[type[BaseException], ...] = ()) -> System:
    """The runnable system.

    lm: any dspy LM (dspy.LM("openai/gpt-4o-mini"), LiteLLM(...) below, ...); None: dspy.settings.lm.
    lms: LMs for other aliases agents name (masforge falls back to the worker LM for unknown aliases too).
    tools: implementations replacing or adding tools by name (fn(str) -> str).
    trace_hook: optional context manager factory hook(agent_id, module, copy=, round=, inputs=) around every
        agent call; if it yields an object, its .outputs is set to the agent's outputs.
    fatal: exception types that abort the run even when other copies of an agent succeeded.
    """
    return System(lm, lms=lms, tools=tools, trace_hook=trace_hook, fatal=fatal)
'''

# The voting/messaging helpers are masforge's own source, copied in, so export and runtime cannot drift.
_CONFIG_RUNTIME = _CONFIG_RUNTIME.replace("@SHARED_HELPERS@", "\n\n\n".join(
    inspect.getsource(fn).strip() for fn in (_compile._plain, _compile.normalise_answer, _compile.format_messages)))

_LITELLM_LM = '''
class LiteLLM(dspy.BaseLM):
    """A dspy LM that calls litellm.completion the way masforge does: no response cache, the sample index
    (dspy's rollout_id) becomes the provider's seed when sampling, unknown provider parameters are dropped."""

    def __init__(self, model: str, *, api_base: str | None = None, api_key: str | None = None,
                 temperature: float = 0.7, max_tokens: int = 1024, seed: int = 0, timeout_s: float = 180.0,
                 retries: int = 4, **extra: Any) -> None:
        super().__init__(model=model, temperature=temperature, max_tokens=max_tokens, cache=False, num_retries=0)
        self.api_base = api_base
        self.api_key = api_key
        self.seed = seed
        self.timeout_s = timeout_s
        self.retries = retries
        self.extra = extra

    def forward(self, prompt: str | None = None, messages: list[dict[str, Any]] | None = None,
                **kwargs: Any) -> Any:
        import litellm

        merged = {**self.kwargs, **kwargs}
        temperature = merged.get("temperature")
        sample = int(merged.get("rollout_id") or 0)
        msgs = messages if messages is not None else [{"role": "user", "content": prompt or ""}]
        request: dict[str, Any] = {
            "model": self.model, "messages": msgs,
            "temperature": temperature, "max_tokens": merged.get("max_tokens"), "timeout": self.timeout_s,
            "num_retries": self.retries, "drop_params": True, **self.extra,
        }
        key = self.api_key
        if self.api_base:
            request["api_base"] = self.api_base
            if key is None and self.model.startswith("openai/"):
                key = "sk-none"  # OpenAI-compatible local servers want some key
        if key:
            request["api_key"] = key
        if merged.get("response_format") is not None:
            request["response_format"] = merged["response_format"]
        if temperature:
            request["seed"] = self.seed * 1000 + sample
        return litellm.completion(**request)
'''

_CONFIG_MAIN = '''
def main(argv: list[str] | None = None) -> int:
    """Command line: answer one input and print the outputs."""
    parser = argparse.ArgumentParser(description=f"Run {NAME} (a multi-agent system exported from masforge).")
    parser.add_argument("input", nargs="?", help=f"Text of the input field {INPUTS[0]!r}.")
    parser.add_argument("--field", "-f", action="append", default=[], metavar="NAME=VALUE",
                        help=f"An input field by name (inputs: {', '.join(INPUTS)}).")
    parser.add_argument("--model", default=os.environ.get("MASFORGE_EXPORT_MODEL", "openai/gpt-4o-mini"),
                        help="litellm model string (default: openai/gpt-4o-mini or $MASFORGE_EXPORT_MODEL).")
    parser.add_argument("--api-base", help="Endpoint of an OpenAI-compatible server (vLLM, Ollama, ...).")
    parser.add_argument("--api-key-env", help="Environment variable that holds the API key.")
    parser.add_argument("--temperature", type=float, default=0.7, help="Default sampling temperature.")
    parser.add_argument("--max-tokens", type=int, default=1024)
    parser.add_argument("--seed", type=int, default=0, help="Base of the provider seeds of sampled calls.")
    parser.add_argument("--json", action="store_true", help="Print the outputs as JSON.")
    args = parser.parse_args(argv)
    inputs: dict[str, str] = {}
    for item in args.field:
        name, sep, value = item.partition("=")
        if not sep:
            parser.error(f"--field {item!r} must look like name=value")
        inputs[name.strip()] = value
    if args.input is not None:
        inputs.setdefault(INPUTS[0], args.input)
    missing = [f for f in INPUTS if f not in inputs]
    if missing:
        parser.error(f"give the input {missing[0]!r} (as the argument or --field {missing[0]}=...)")
    key = os.environ.get(args.api_key_env) if args.api_key_env else None
    lm = LiteLLM(args.model, api_base=args.api_base, api_key=key, temperature=args.temperature,
                 max_tokens=args.max_tokens, seed=args.seed)
    try:
        outputs, _ = build(lm=lm).run(**inputs)
    except Exception as exc:
        print(f"error: {type(exc).__name__}: {str(exc).strip().splitlines()[0] if str(exc).strip() else ''}",
              file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps(outputs, ensure_ascii=False, indent=2))
    else:
        for name in OUTPUTS:
            print(outputs[name] if len(OUTPUTS) == 1 else f"{name}: {outputs[name]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
'''


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


def _export_code(genome: Genome, filename: str) -> str:
    from masforge import __version__
    from masforge.genome.code import MAX_LLM_CALLS_PER_RUN
    from masforge.runtime.tools import tool_names

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
        "Command line (inside a sandbox):",
        "",
        f'    python {filename} "What is 17 * 23?" --model openai/gpt-4o-mini',
        "",
        "From Python (inside a sandbox):",
        "",
        f"    from {module} import build",
        "",
        '    system = build(model="openai/gpt-4o-mini")',
        f'    print(system({genome.inputs[0]}="What is 17 * 23?")["{genome.outputs[0]}"])',
    ]
    doc = "\n".join(lines)
    marker = {"format": EXPORT_FORMAT_VERSION, "kind": "code", "genome_id": genome.id, "masforge": __version__}
    out = [
        "#!/usr/bin/env python3",
        f'"""{_docstring(doc)}\n"""',
        "",
        "from __future__ import annotations",
        "",
        "@IMPORTS@",
        "",
        'os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # litellm\'s bundled price table, no download',
        "",
        f"{MARKER_NAME} = {_block(marker, 0, len(MARKER_NAME) + 3)}",
        "",
        f"NAME = {_py_str(genome.name, 0, 7)}",
        f"GENOME_ID = {_lit(genome.id)}",
        f"INPUTS = {_block(genome.inputs, 0, 9)}",
        f"OUTPUTS = {_block(genome.outputs, 0, 10)}",
        f"MAX_LLM_CALLS_PER_RUN = {MAX_LLM_CALLS_PER_RUN}",
        "",
        "# " + "=" * 110,
        "# The searched system, verbatim. MACHINE-WRITTEN CODE: run it only in a sandbox.",
        "# It defines forward(inputs) and calls llm(prompt, system=None, temperature=None, lm='worker', sample=0)",
        "# and tool(name, arg); CodeSystem below executes it in a namespace of its own where those two exist.",
        "# " + "=" * 110,
        "",
        f"SYSTEM_CODE = {_code_literal(code)}",
        "",
        "# " + "=" * 110,
        "# Runtime",
        "# " + "=" * 110,
        "",
        "ToolFn = Callable[[str], str]",
    ]
    system_names = _runtime_names("\n".join(out).replace("@IMPORTS@", ""))
    sections, tool_imports, functions = _tool_sections(["python", *[t for t in tool_names() if t != "python"]],
                                                       (_CODE_RUNTIME,), system_names)
    imports = {"import argparse", "import json", "import os", "import sys", "import threading",
               "from collections.abc import Callable", "from typing import Any"}
    out[out.index("@IMPORTS@")] = _imports(imports | tool_imports)
    default_tools = ", ".join(f"{_lit(t)}: {f}" for t, f in functions.items())
    runtime = [*sections, _CODE_RUNTIME.replace("@DEFAULT_TOOLS@", default_tools)]
    return "\n".join(out).rstrip("\n") + "\n\n\n" + "\n\n\n".join(r.strip("\n") for r in runtime) + "\n"


_CODE_RUNTIME = '''
Complete = Callable[[list[dict[str, Any]], float, int, str], str]
"""complete(messages, temperature, sample, lm_alias) -> reply text: the LM behind llm()."""

# Tools the code can call with tool(name, arg); build(tools=...) adds or replaces some.
DEFAULT_TOOLS: dict[str, ToolFn] = {@DEFAULT_TOOLS@}


def litellm_complete(model: str, *, api_base: str | None = None, api_key: str | None = None, max_tokens: int = 1024,
                     seed: int = 0, timeout_s: float = 180.0, retries: int = 4, **extra: Any) -> Complete:
    """An llm() backend calling litellm.completion the way masforge does (sample -> seed when sampling)."""

    def complete(messages: list[dict[str, Any]], temperature: float, sample: int, alias: str) -> str:
        import litellm

        request: dict[str, Any] = {"model": model, "messages": messages, "temperature": temperature,
                                   "max_tokens": max_tokens, "timeout": timeout_s, "num_retries": retries,
                                   "drop_params": True, **extra}
        key = api_key
        if api_base:
            request["api_base"] = api_base
            if key is None and model.startswith("openai/"):
                key = "sk-none"  # OpenAI-compatible local servers want some key
        if key:
            request["api_key"] = key
        if temperature > 0:
            request["seed"] = seed * 1000 + sample
        return litellm.completion(**request).choices[0].message.content or ""

    return complete


class CodeSystem:
    """Runs SYSTEM_CODE's forward(inputs) with llm() and tool() bound to an LM backend."""

    def __init__(self, complete: Complete, temperature: float = 0.7, tools: dict[str, ToolFn] | None = None) -> None:
        self.complete = complete
        self.temperature = temperature
        self.tools: dict[str, ToolFn] = {**DEFAULT_TOOLS, **(tools or {})}
        self._lock = threading.Lock()

    def __call__(self, **inputs: Any) -> dict[str, Any]:
        missing = [f for f in INPUTS if f not in inputs]
        if missing:
            raise TypeError(f"{NAME} needs input {missing[0]!r} (inputs: {', '.join(INPUTS)})")
        calls = [0]

        def llm(prompt: str, system: str | None = None, temperature: float | None = None, lm: str = "worker",
                sample: int = 0) -> str:
            with self._lock:
                calls[0] += 1
                if calls[0] > MAX_LLM_CALLS_PER_RUN:
                    raise RuntimeError(f"more than {MAX_LLM_CALLS_PER_RUN} llm() calls in one forward()")
            messages = []
            if system:
                messages.append({"role": "system", "content": str(system)})
            messages.append({"role": "user", "content": str(prompt)})
            temp = self.temperature if temperature is None else float(temperature)
            return self.complete(messages, temp, int(sample or 0), str(lm or "worker"))

        def tool(name: str, arg: str) -> str:
            fn = self.tools.get(str(name))
            if fn is None:
                raise RuntimeError(f"unknown tool {name!r} (known: {', '.join(sorted(self.tools))})")
            try:
                return str(fn(str(arg)))
            except Exception as exc:
                return f"error: {type(exc).__name__}: {exc}"

        namespace: dict[str, Any] = {"__name__": "__sandbox__", "llm": llm, "tool": tool}
        exec(compile(SYSTEM_CODE, "<code>", "exec"), namespace)  # the machine-written code runs here
        value = namespace["forward"](dict(inputs))
        if isinstance(value, str) and len(OUTPUTS) == 1:
            value = {OUTPUTS[0]: value}
        if not isinstance(value, dict):
            raise RuntimeError(f"forward() must return a dict with {OUTPUTS}, got {type(value).__name__}")
        absent = [k for k in OUTPUTS if k not in value]
        if absent:
            raise RuntimeError(f"forward() returned no {absent[0]!r} (outputs: {OUTPUTS})")
        return {k: value[k] for k in OUTPUTS}


def build(model: str | None = None, *, complete: Complete | None = None, api_base: str | None = None,
          api_key: str | None = None, temperature: float = 0.7, max_tokens: int = 1024, seed: int = 0,
          tools: dict[str, ToolFn] | None = None) -> CodeSystem:
    """The runnable system: an LM backend from a litellm model string, or any complete() function."""
    if complete is None:
        if not model:
            raise ValueError("give a litellm model string (build(model='openai/gpt-4o-mini')) or complete=")
        complete = litellm_complete(model, api_base=api_base, api_key=api_key, max_tokens=max_tokens, seed=seed)
    return CodeSystem(complete, temperature=temperature, tools=tools)


def main(argv: list[str] | None = None) -> int:
    """Command line: answer one input and print the outputs (run it inside a sandbox)."""
    parser = argparse.ArgumentParser(description=f"Run {NAME} (machine-written code exported from masforge; "
                                     "run it only in a sandbox).")
    parser.add_argument("input", nargs="?", help=f"Text of the input field {INPUTS[0]!r}.")
    parser.add_argument("--field", "-f", action="append", default=[], metavar="NAME=VALUE",
                        help=f"An input field by name (inputs: {', '.join(INPUTS)}).")
    parser.add_argument("--model", default=os.environ.get("MASFORGE_EXPORT_MODEL", "openai/gpt-4o-mini"),
                        help="litellm model string (default: openai/gpt-4o-mini or $MASFORGE_EXPORT_MODEL).")
    parser.add_argument("--api-base", help="Endpoint of an OpenAI-compatible server (vLLM, Ollama, ...).")
    parser.add_argument("--api-key-env", help="Environment variable that holds the API key.")
    parser.add_argument("--temperature", type=float, default=0.7, help="Default sampling temperature.")
    parser.add_argument("--max-tokens", type=int, default=1024)
    parser.add_argument("--seed", type=int, default=0, help="Base of the provider seeds of sampled calls.")
    parser.add_argument("--json", action="store_true", help="Print the outputs as JSON.")
    args = parser.parse_args(argv)
    inputs: dict[str, str] = {}
    for item in args.field:
        name, sep, value = item.partition("=")
        if not sep:
            parser.error(f"--field {item!r} must look like name=value")
        inputs[name.strip()] = value
    if args.input is not None:
        inputs.setdefault(INPUTS[0], args.input)
    missing = [f for f in INPUTS if f not in inputs]
    if missing:
        parser.error(f"give the input {missing[0]!r} (as the argument or --field {missing[0]}=...)")
    key = os.environ.get(args.api_key_env) if args.api_key_env else None
    system = build(args.model, api_base=args.api_base, api_key=key, temperature=args.temperature,
                   max_tokens=args.max_tokens, seed=args.seed)
    try:
        outputs = system(**inputs)
    except Exception as exc:
        print(f"error: {type(exc).__name__}: {str(exc).strip().splitlines()[0] if str(exc).strip() else ''}",
              file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps(outputs, ensure_ascii=False, indent=2, default=str))
    else:
        for name in OUTPUTS:
            print(outputs[name] if len(OUTPUTS) == 1 else f"{name}: {outputs[name]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
'''


def write_export(text: str, output: str | Path) -> Path:
    """Write an export to ``output`` (parents created); returns the path."""
    p = Path(output)
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(text, encoding="utf-8")
    return p
