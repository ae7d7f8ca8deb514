"""A config genome exported as readable Python: a docstring describing the system, the agents' full instructions
as constants, the wiring and execution plan as plain data, then the frame's tail (masforge's runtime inlined)."""

from __future__ import annotations

import textwrap
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from masforge.export.frame import about_lines, dspy_usage_lines, file_head, finish_export, identity_lines
from masforge.export.inline import CONFIG_MODULES
from masforge.export.pysource import RULE, WRAP, block, const_name, lit, py_str
from masforge.genome.names import EXECUTE_MODULE
from masforge.genome.schema import Genome

if TYPE_CHECKING:  # for the hints only: the runtime imports dspy, which an export's writer does not need
    from masforge.standalone.system import SystemSpec


def export_config(genome: Genome, filename: str, found: dict[str, Any]) -> str:
    """The Python module a (validated) config genome exports to; ``filename`` is named in its usage notes and
    ``found`` is the LM it was found with (its default)."""
    from masforge.execution.compile import system_spec

    spec = system_spec(genome)
    tools_used = spec.needed_tools()
    taken: set[str] = set()
    consts = {a.id: const_name(a.id, taken) for a in spec.agents.values()}
    out = [*file_head(_config_doc(genome, spec, filename, found, tools_used), "config", genome),
           *_config_data(genome, spec, consts)]
    return finish_export(out, tools_used, found, "config_entry.py.txt", CONFIG_MODULES)


def _config_doc(genome: Genome, spec: SystemSpec, filename: str, found: dict[str, Any],
                tools_used: Sequence[str]) -> str:
    """The module docstring: what the system is, its structure, and how to run it."""
    lines = [
        *about_lines(genome, "a multi-agent LLM system", "this module needs only dspy and litellm (no masforge)."),
        "It runs on masforge's own runtime, inlined below: the same dspy signatures and instructions, prompt",
        "adapters, message passing, sample indices and aggregation, so on the same deterministic LM it gives the",
        "same answers as masforge. Structure:",
        "",
        *_structure_lines(genome, spec),
    ]
    call = (f'    print(build()({genome.inputs[0]}="What is 17 * 23?").{genome.outputs[0]})\n'
            '    print(build(lm=dspy.LM("openai/gpt-4o-mini"))(...))    # on another LM (import dspy)')
    return "\n".join([*lines, *dspy_usage_lines(filename, found, genome.inputs[0], call, tools_used)])


def _structure_lines(genome: Genome, spec: SystemSpec) -> list[str]:
    """The docstring's structure: one line per agent, then the edges, cycles and aggregation."""
    lines = []
    for agent in spec.agents.values():
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
    lines.append(textwrap.fill("edges: " + ", ".join(edges), WRAP,
                               initial_indent="    ", subsequent_indent="        ", break_on_hyphens=False))
    if any(c for _, c in spec.plan):
        lines.append(f"    cycles run {topo.rounds} rounds, {topo.message_passing} message passing")
    lines.append(f"    aggregation: {topo.aggregation}" + (f" (judge: {topo.judge})" if topo.aggregation == "judge"
                                                          else ""))
    return lines


def _config_data(genome: Genome, spec: SystemSpec, consts: dict[str, str]) -> list[str]:
    """The system as data: name and fields, each agent's instructions and settings, the wiring and plan; ends
    opening the tools' descriptions (the frame's tail fills them in)."""
    out: list[str] = [
        RULE,
        "# The system",
        RULE,
        "",
        *identity_lines(genome),
        "",
        "# The instructions of each agent: the docstring of its dspy signature (role line + instructions).",
    ]
    for agent in spec.agents.values():
        const = consts[agent.id]
        out.append(f"{const} = {py_str(agent.instructions, 0, len(const) + 3)}")
    out += [
        "",
        "# Each agent: its dspy module kind and signature (its steps follow from the kind: see agent_steps), input",
        "# and output fields, the LM alias it uses, an optional temperature, tools, independent copies, the",
        "# iteration limit of react / refine / program_of_thought, and its prompt adapter (auto: the LM's choice).",
        "AGENTS: dict[str, dict[str, Any]] = {",
    ]
    for agent in spec.agents.values():
        out.append(f"    {lit(agent.id)}: {{")
        out.append(f'        "module": {lit(agent.module)},')
        out.append(f'        "signature": {py_str(agent.signature, 8, 21)},')
        out.append(f'        "instructions": {consts[agent.id]},')
        for key in ("inputs", "outputs", "lm", "temperature", "tools", "copies", "max_iters", "adapter"):
            out.append(f"        {lit(key)}: {block(getattr(agent, key), 8, 12 + len(key))},")
        if agent.unchecked != "pass":  # an execute node that fails when there is nothing to run
            out.append(f'        "unchecked": {lit(agent.unchecked)},  # its verdict when there is nothing to run')
        out.append("    },")
    return [*out, "}", "", *_wiring_lines(genome, spec)]


def _wiring_lines(genome: Genome, spec: SystemSpec) -> list[str]:
    """The wiring, execution plan, aggregation and conditions as data; ends opening the tools' descriptions."""
    return [
        "# Wiring. An agent reads the inputs if \"input\" is among its predecessors, and \"messages\": the latest",
        "# outputs of its agent predecessors as text (each output is also readable by its field name).",
        f"EDGES = {block([tuple(e) for e in genome.topology.edges], 0, 8)}",
        f"PREDECESSORS = {block(spec.predecessors, 0, 15)}",
        "# Execution plan: the agent graph's strongly connected components in the order they run;",
        "# a cyclic component (True) runs ROUNDS rounds.",
        f"PLAN = {block(spec.plan, 0, 7)}",
        f"ROUNDS = {spec.rounds!r}",
        "# sequential: agents see this round's earlier outputs; synchronous: only the previous round's",
        f"MESSAGE_PASSING = {lit(spec.message_passing)}",
        "# The outputs of every copy of these agents are the candidates the aggregation chooses from.",
        f"OUTPUT_AGENTS = {block(spec.output_agents, 0, 16)}",
        f"AGGREGATION = {lit(spec.aggregation)}  # last | majority_vote | run_examples | judge",
        f"JUDGE = {lit(spec.judge)}",
        "# Conditional edges: an edge out of an execute node that carries only while the node's verdict is the one",
        "# named (pass: its pick passed every check; fail: it did not).",
        f"CONDITIONS = {block(spec.conditions or {}, 0, 13)}",
        "",
        "# The tools' descriptions word for word as masforge shows them to the model (so the prompts are the same;",
        "# what the exported python tool really is: see run_python).",
        "TOOL_DESCRIPTIONS = {",
    ]
