"""Whole-genome checks: each problem is one line naming its place and the fix.

:func:`validate` raises :class:`GenomeError` with the first problem; :func:`problems` lists them all.
Shape errors (wrong types, unknown fields) are caught earlier by pydantic in :mod:`masforge.genome.io`.
"""

from __future__ import annotations

import ast
import json
import unicodedata
from collections.abc import Iterable

from masforge.errors import GenomeError
from masforge.genome.cycles import is_cyclic, strongly_connected
from masforge.genome.graph import Wiring, agent_edges
from masforge.genome.names import (
    EXECUTE_MODULE,
    JUDGE_INPUT,
    MESSAGES_INPUT,
    REPORT_FIELD,
    TESTS_FIELD,
    VERDICT_FIELD,
)
from masforge.genome.portfolio import portfolio_problems
from masforge.genome.schema import RESERVED_NODES, Agent, Genome
from masforge.genome.signature import Signature, parse_signature
from masforge.genome.tools import tool_names
from masforge.redact import contains_secret


def available_inputs(genome: Genome, agent: Agent, wiring: Wiring | None = None) -> list[str]:
    """Fields an agent can read: genome inputs if wired from ``input``, ``messages`` and predecessor
    outputs if it has agent predecessors; the judge reads the genome inputs and ``candidates``."""
    if genome.topology.aggregation == "judge" and agent.id == genome.topology.judge:
        return [*genome.inputs, JUDGE_INPUT]
    w = wiring or Wiring(genome)
    preds = w.predecessors(agent.id)
    fields: list[str] = []
    if "input" in preds:
        fields.extend(genome.inputs)
    agent_preds = [p for p in preds if p != "input"]
    if agent_preds:
        fields.append(MESSAGES_INPUT)
        for pid in agent_preds:
            for name in agent_signature(genome, w.agents[pid], w).output_names:
                if name not in fields:
                    fields.append(name)
    return fields


def agent_signature(genome: Genome, agent: Agent, wiring: Wiring | None = None) -> Signature:
    """The agent's signature: its own, or the default built from how it is wired. An execute node writes the
    genome outputs (its pick's) and its ``verdict`` and ``report``."""
    if agent.signature and agent.module != EXECUTE_MODULE:
        return parse_signature(agent.signature)
    if genome.topology.aggregation == "judge" and agent.id == genome.topology.judge:
        ins = [*genome.inputs, JUDGE_INPUT]
    else:
        preds = (wiring or Wiring(genome)).predecessors(agent.id)
        ins = list(genome.inputs) if "input" in preds else []
        if any(p != "input" for p in preds):
            ins.append(MESSAGES_INPUT)
    outs = list(genome.outputs)
    if agent.module == EXECUTE_MODULE:
        outs += [f for f in (VERDICT_FIELD, REPORT_FIELD) if f not in outs]
    return parse_signature(f"{', '.join(ins)} -> {', '.join(outs)}")


def writes_tests(genome: Genome, agent: Agent, wiring: Wiring | None = None) -> bool:
    """Whether ``agent`` writes tests (a ``tests`` output): the execute nodes it feeds run them beside the stated
    examples."""
    return TESTS_FIELD in agent_signature(genome, agent, wiring).output_names


# An execute node runs code and calls no LM: settings of an LM call mean nothing on it (field, default, why).
_EXECUTE_REFUSES = (
    ("copies", 1, "it runs each candidate once; give the agents before it copies instead"),
    ("tools", [], "it always runs code with the python tool"),
    ("instructions", "", "it follows no prompt; put instructions on the agents before it"),
    ("temperature", None, "it samples nothing"),
    ("lm", "worker", "it calls no LM"),
    ("adapter", "auto", "it sends no prompt"),
    ("signature", None, "it reads its predecessors' answers and tests and writes their fields plus verdict and "
                        "report"),
)


def _execute_problems(i: int, agent: Agent) -> list[str]:
    out = []
    for name, default, why in _EXECUTE_REFUSES:
        if getattr(agent, name) != default:
            out.append(f"agents[{i}].{name}: execute node '{agent.id}' takes no {name} ({why}); remove it")
    return out


def _condition_problems(genome: Genome, modules: dict[str, str]) -> list[str]:
    topo = genome.topology
    out = []
    edges = {f"{a} -> {b}" for a, b in topo.edges}
    for key in topo.conditions:
        source = key.split(" -> ")[0]
        if key not in edges:
            out.append(f"topology.conditions: '{key}' is not an edge in topology.edges; add the edge or remove "
                       "its condition")
        elif modules.get(source) != EXECUTE_MODULE:
            out.append(f"topology.conditions: '{key}' starts at '{source}', which is not an execute node (only an "
                       "execute node's verdict can route); remove the condition or make the source module: execute")
    return out


def _edge_text(edge: tuple[str, str]) -> str:
    return f"'{edge[0]} -> {edge[1]}'"


def _code_problems(genome: Genome) -> list[str]:
    if genome.agents:
        return ["agents: a code genome takes no agents (its forward() does the work); use kind: config"]
    if not genome.code or not genome.code.strip():
        return ["code: a code genome needs Python source defining forward(inputs)"]
    try:
        tree = ast.parse(genome.code)
    except SyntaxError as exc:
        return [f"code:{exc.lineno}: Python syntax error ({exc.msg})"]
    fns = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}
    if "forward" not in fns:
        return ["code: define a top-level function forward(inputs) that returns a dict of the outputs"]
    if not fns["forward"].args.args and not fns["forward"].args.vararg:
        return ["code: forward must take one argument (the inputs dict)"]
    return []


def _secret_problems(genome: Genome) -> list[str]:
    """A genome holding an API key would be stored and exported with it: name the field, never the value."""
    if not contains_secret(genome.model_dump_json()):
        return []
    fields: list[tuple[str, object]] = [("name", genome.name), ("description", genome.description),
                                         ("source", genome.source), ("code", genome.code or ""),
                                         ("metadata", genome.metadata)]
    for i, agent in enumerate(genome.agents):
        fields += [(f"agents[{i}].{k}", v) for k, v in agent.model_dump().items()]
    place = next((name for name, value in fields if contains_secret(json.dumps(value, default=str))), "genome")
    return [f"{place}: holds what looks like an API key or token; remove it (keys belong in the environment, "
            "and masforge never stores them)"]


def name_problem(name: str) -> str | None:
    """Why ``name`` cannot name a genome (a control character: NUL breaks git commits, line breaks the one-line
    tables and messages), or None."""
    bad = next(((i, ch) for i, ch in enumerate(name) if unicodedata.category(ch) == "Cc"), None)
    if bad is None:
        return None
    return (f"name: holds a control character (U+{ord(bad[1]):04X} at position {bad[0]}); a name is one line of "
            "printable text: remove it")


def _one_line(message: str) -> str:
    # Problems quote the genome's own values (a tool name, an edge, a signature), which may hold line breaks.
    return message.replace("\r", "\\r").replace("\n", "\\n")


def problems(genome: Genome, known_tools: Iterable[str] | None = None) -> list[str]:
    """Every problem of ``genome`` as a one-line message (empty list: valid).

    Linear in the genome's size: the wiring (predecessors, successors, what input reaches and what reaches
    output) is indexed once, never re-scanned per agent."""
    return [_one_line(p) for p in _problems(genome, known_tools)]


def _problems(genome: Genome, known_tools: Iterable[str] | None = None) -> list[str]:
    secrets = _secret_problems(genome)
    if secrets:
        return secrets
    bad_name = name_problem(genome.name)
    if bad_name:
        return [bad_name]
    if genome.kind == "portfolio":
        return portfolio_problems(genome, lambda member: problems(member, known_tools))
    if genome.portfolio is not None:
        return ["portfolio: only portfolio genomes carry members and a router; remove it or set kind: portfolio"]
    if genome.kind == "code":
        return _code_problems(genome)
    return _config_problems(genome, set(tool_names() if known_tools is None else known_tools))


def _config_problems(genome: Genome, tools: set[str]) -> list[str]:
    """A config genome's problems, checked in stages: each stage runs only on what the ones before it found
    sound (an edge to an unknown agent would make every reachability problem after it noise)."""
    ids = [a.id for a in genome.agents]
    found = _agent_problems(genome, tools) or _edge_problems(genome, ids) or _judge_problems(genome, ids)
    if found:
        return found
    out = _judge_placement_problems(genome)
    ends = _end_problems(genome)
    if ends:
        return [*out, *ends]
    wiring = Wiring(genome)
    out += _reach_problems(genome, wiring)
    if out:
        return out
    return _cycle_problems(genome, ids, wiring) + _field_problems(genome, wiring)


def _agent_problems(genome: Genome, tools: set[str]) -> list[str]:
    """The genome's fields and each agent on its own: ids, tools, modules, execute nodes' settings, signatures."""
    out: list[str] = []
    if genome.code:
        out.append("code: only code genomes carry code; remove it or set kind: code")
    shared = [name for name in genome.outputs if name in genome.inputs]
    if shared:  # every default signature would read and write the same field
        return [*out, f"outputs: '{shared[0]}' is also an input; give the outputs names of their own"]
    if not genome.agents:
        return [*out, "agents: a config genome needs at least one agent"]
    seen_ids: set[str] = set()
    for i, agent in enumerate(genome.agents):
        if agent.id in RESERVED_NODES:
            out.append(f"agents[{i}].id: '{agent.id}' is reserved for the graph's ends; rename the agent")
        elif agent.id in seen_ids:
            out.append(f"agents[{i}].id: duplicate agent id '{agent.id}'; agent ids must be unique")
        seen_ids.add(agent.id)
        for tool in agent.tools:
            if tool not in tools:
                out.append(f"agents[{i}].tools: unknown tool '{tool}' (known: {', '.join(sorted(tools))})")
        if agent.module == "react" and not agent.tools:
            out.append(f"agents[{i}]: module 'react' needs at least one tool (e.g. tools: [calculator])")
        if agent.module == EXECUTE_MODULE:
            out += _execute_problems(i, agent)
        elif agent.unchecked != "pass":
            out.append(f"agents[{i}].unchecked: only an execute node has a verdict; remove it from '{agent.id}'")
        if agent.signature:
            try:
                parse_signature(agent.signature)
            except ValueError as exc:
                out.append(f"agents[{i}].signature: {exc}")
    executes = [a.id for a in genome.agents if a.module == EXECUTE_MODULE]
    taken = [f for f in (VERDICT_FIELD, REPORT_FIELD) if f in genome.outputs]
    if executes and taken:
        out.append(f"outputs: '{taken[0]}' is what execute node '{executes[0]}' writes beside the answer; give the "
                   "genome output another name")
    return out


def _edge_problems(genome: Genome, ids: list[str]) -> list[str]:
    """Each edge on its own (its ends exist, nothing flows into input or out of output) and each condition."""
    out = []
    nodes = set(ids) | set(RESERVED_NODES)
    for j, (a, b) in enumerate(genome.topology.edges):
        for end in (a, b):
            if end not in nodes:
                known = ", ".join(ids[:20]) + (f", ... ({len(ids)} agents)" if len(ids) > 20 else "")
                out.append(f"topology.edges[{j}]: unknown agent '{end}' in edge {_edge_text((a, b))} "
                           f"(agents: {known}; ends: input, output)")
        if b == "input":
            out.append(f"topology.edges[{j}]: nothing can flow into 'input' ({_edge_text((a, b))})")
        if a == "output":
            out.append(f"topology.edges[{j}]: nothing flows out of 'output' ({_edge_text((a, b))})")
        if a == "input" and b == "output":
            out.append(f"topology.edges[{j}]: 'input -> output' bypasses every agent; remove it")
    return out + _condition_problems(genome, {a.id: a.module for a in genome.agents})


def _judge_problems(genome: Genome, ids: list[str]) -> list[str]:
    """Aggregation by a judge that cannot judge: none named, an unknown agent, or an execute node."""
    topo = genome.topology
    judge = topo.judge
    if topo.aggregation != "judge":
        return []
    if not judge:
        return ["topology.judge: aggregation 'judge' needs topology.judge set to an agent id"]
    if judge not in ids:
        return [f"topology.judge: unknown agent '{judge}' (agents: {', '.join(ids[:20])})"]
    if genome.agent(judge).module == EXECUTE_MODULE:
        return [f"topology.judge: '{judge}' is an execute node; a judge must be an LM agent"]
    return []


def _judge_placement_problems(genome: Genome) -> list[str]:
    """A judge wired into the graph (it runs after it), or a judge named without aggregation by a judge."""
    topo = genome.topology
    judge = topo.judge
    if topo.aggregation == "judge":
        if any(judge in e for e in topo.edges):
            return [f"topology.judge: judge '{judge}' must not appear in edges (it runs after the graph "
                    "on the candidates that reach output)"]
    elif judge:
        return [f"topology.judge: set to '{judge}' but aggregation is '{topo.aggregation}'; "
                "set aggregation: judge or remove judge"]
    return []


def _end_problems(genome: Genome) -> list[str]:
    """The graph's ends: something must reach output, and something must read input (the first missing one)."""
    edges = genome.topology.edges
    if not any(b == "output" for _, b in edges):
        return ["topology.edges: nothing reaches 'output'; add an edge like 'solver -> output'"]
    if not any(a == "input" for a, _ in edges):
        return ["topology.edges: nothing reads 'input'; add an edge like 'input -> solver'"]
    return []


def _reach_problems(genome: Genome, wiring: Wiring) -> list[str]:
    """Every agent but the judge is wired, reached from input and reaches output."""
    topo = genome.topology
    out = []
    from_input = wiring.reachable_from("input")
    to_output = wiring.reaching("output")
    for i, agent in enumerate(genome.agents):
        if agent.id == topo.judge and topo.aggregation == "judge":
            continue
        if agent.id not in wiring.nodes_in_edges:
            out.append(f"agents[{i}]: agent '{agent.id}' is in no edge; wire it or remove it")
            continue
        if agent.id not in from_input:
            out.append(f"agents[{i}]: agent '{agent.id}' is unreachable from input; add an edge into it")
        if agent.id not in to_output:
            out.append(f"agents[{i}]: agent '{agent.id}' never reaches output (its work is lost); "
                       "add an edge towards output or remove it")
    return out


def _cycle_problems(genome: Genome, ids: list[str], wiring: Wiring) -> list[str]:
    """A cycle of agents runs in rounds: it needs two at least."""
    out = []
    edges = agent_edges(genome)
    edge_set = set(edges)
    graph_ids = [i for i in ids if i in wiring.nodes_in_edges]
    for comp in strongly_connected(graph_ids, edges):
        if is_cyclic(comp, edge_set) and genome.topology.rounds < 2:
            cycle = " -> ".join([*comp, comp[0]])
            out.append(f"topology.rounds: cycle {cycle} needs rounds >= 2 (set topology.rounds: 2 or more)")
    return out


def _field_problems(genome: Genome, wiring: Wiring) -> list[str]:
    """What flows along the wiring: each agent's input fields reach it, an agent feeding output (or the judge)
    writes the genome's outputs, and an execute node has code to run."""
    topo = genome.topology
    out = []
    for i, agent in enumerate(genome.agents):
        if agent.module == EXECUTE_MODULE:
            out += _execute_wiring_problems(genome, i, agent, wiring)
            continue
        sig = agent_signature(genome, agent, wiring)
        avail = available_inputs(genome, agent, wiring)
        if not sig.inputs:
            out.append(f"agents[{i}].signature: agent '{agent.id}' has no input fields; it would ignore the task")
        for name in sig.input_names:
            if name not in avail:
                hint = f"available: {', '.join(avail)}" if avail else "it receives nothing"
                fix = f"; add edge 'input -> {agent.id}'" if name in genome.inputs else ""
                out.append(f"agents[{i}].signature: input '{name}' never reaches agent '{agent.id}' ({hint}){fix}")
        feeds_output = "output" in wiring.succs.get(agent.id, ())
        is_judge = topo.aggregation == "judge" and agent.id == topo.judge
        if feeds_output or is_judge:
            missing = [o for o in genome.outputs if o not in sig.output_names]
            if missing:
                out.append(f"agents[{i}].signature: agent '{agent.id}' feeds output but does not produce "
                           f"'{missing[0]}' (genome outputs: {', '.join(genome.outputs)})")
    return out


def _execute_wiring_problems(genome: Genome, i: int, agent: Agent, wiring: Wiring) -> list[str]:
    """An execute node runs the answers of the agents before it: at least one of them must write the genome's
    first output (the code it runs)."""
    answer = genome.outputs[0]
    preds = [p for p in wiring.predecessors(agent.id) if p != "input"]
    if not preds:
        return [f"agents[{i}]: execute node '{agent.id}' has no agent before it (it runs their code); add an "
                f"edge like 'coder -> {agent.id}'"]
    writers = [p for p in preds if answer in agent_signature(genome, wiring.agents[p], wiring).output_names]
    if not writers:
        return [f"agents[{i}]: no agent before execute node '{agent.id}' writes '{answer}' (the code it runs); "
                f"add an edge from an agent that answers"]
    # Fed only by other checks (and no tests of its own), it runs answers they already ran against what they ran:
    # a "fixer" written as an execute node fixes nothing.
    if all(wiring.agents[p].module == EXECUTE_MODULE for p in writers) and not any(
            writes_tests(genome, wiring.agents[p], wiring) for p in preds):
        return [f"agents[{i}]: execute node '{agent.id}' gets code only from execute nodes ({', '.join(writers)}), "
                "so it re-runs answers already run and changes none; to repair them make it an LM agent (e.g. "
                "module: predict, with instructions), else remove it"]
    # A writer that runs only on this node's own verdict never runs: the node has nothing to check before it.
    conditions = genome.topology.conditions
    if all(f"{agent.id} -> {p}" in conditions for p in writers):
        return [f"agents[{i}]: every agent writing the code execute node '{agent.id}' runs is gated by its own "
                f"verdict, so none ever runs; add an edge from an agent that answers first, like "
                f"'coder -> {agent.id}'"]
    return []


def validate(genome: Genome, known_tools: Iterable[str] | None = None) -> Genome:
    """Return ``genome`` if valid, else raise :class:`GenomeError` with the first problem (one line)."""
    found = problems(genome, known_tools)
    if found:
        more = f" (and {len(found) - 1} more)" if len(found) > 1 else ""
        raise GenomeError(f"genome '{genome.name}': {found[0]}{more}")
    return genome
