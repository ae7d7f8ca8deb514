"""A portfolio genome exported as Python: each member system as data, the router's numbers, the escalation
order, then the frame's tail (masforge's runtime with the router and the routing inlined)."""

from __future__ import annotations

import textwrap
from typing import Any

from masforge.errors import GenomeError
from masforge.export.frame import about_lines, dspy_usage_lines, file_head, finish_export, identity_lines
from masforge.export.inline import PORTFOLIO_MODULES
from masforge.export.pysource import RULE, block, docstring, lit, wrap
from masforge.genome.schema import Genome, Portfolio


def _member_literal(member: Genome) -> str:
    """One member system as a dict literal: its spec (what SystemSpec takes) with its agents as plain dicts."""
    from masforge.execution.compile import system_spec

    spec = system_spec(member)
    agents = {aid: {k: v for k, v in a._asdict().items() if k != "id" and (k, v) != ("unchecked", "pass")}
              for aid, a in spec.agents.items()}  # the default verdict left out: exports made before it stay the same
    data = {"name": spec.name, "genome_id": member.id, "inputs": spec.inputs, "outputs": spec.outputs,
            "agents": agents, "predecessors": spec.predecessors, "plan": spec.plan,
            "output_agents": spec.output_agents, "rounds": spec.rounds, "message_passing": spec.message_passing,
            "aggregation": spec.aggregation, "judge": spec.judge, "conditions": spec.conditions or {}}
    return block(data, 4, 4)


def _router_literal(router: dict[str, Any]) -> str:
    """The router's numbers: settings on one line, each coefficient row on a line of its own."""
    head = ", ".join(f"{lit(k)}: {lit(router[k])}" for k in ("version", "n_hash", "ngrams", "classes"))
    pad = " " * 12
    rows = "".join("        [\n" + textwrap.fill(", ".join(lit(x) for x in row), 118, initial_indent=pad,
                                                  subsequent_indent=pad) + ",\n        ],\n" for row in router["coef"])
    return (f"{{{head},\n    \"coef\": [\n{rows}    ],\n    \"intercept\": {lit(router['intercept'])}}}")


def export_portfolio(genome: Genome, filename: str, found: dict[str, Any]) -> str:
    """The Python module a (validated) portfolio genome of config members exports to (a code member is refused in
    one line); ``filename`` is named in its usage notes and ``found`` is the LM it was found with."""
    from masforge.execution.compile import system_spec

    body = genome.portfolio
    assert body is not None  # validated by export_genome
    code = [m.name for m in body.members if m.kind != "config"]
    if code:
        raise GenomeError(f"portfolio '{genome.name}': member '{code[0]}' is a code genome, which a portfolio export "
                          "cannot carry yet; export the portfolio as yaml, or build it from config genomes only")
    specs = [system_spec(m) for m in body.members]
    tools_used = sorted({t for s in specs for t in s.needed_tools()} | ({"python"} if body.escalation else set()))
    out: list[str] = [
        *file_head(_portfolio_doc(genome, body, filename, found, tools_used), "portfolio", genome),
        RULE,
        "# The portfolio",
        RULE,
        "",
        *identity_lines(genome),
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
        f"ESCALATION = {lit(list(body.escalation))}",
        "",
        "# The tools' descriptions word for word as masforge shows them to the model.",
        "TOOL_DESCRIPTIONS = {",
    ]
    return finish_export(out, tools_used, found, "portfolio_entry.py.txt", PORTFOLIO_MODULES)


def _portfolio_doc(genome: Genome, body: Portfolio, filename: str, found: dict[str, Any],
                   tools_used: list[str]) -> str:
    """The module docstring: what the portfolio is, its members, its escalation and how to run it."""
    lines = [
        *about_lines(genome, "a portfolio of multi-agent LLM systems",
                     "this module needs only dspy and litellm (no masforge).", idea=False),
        wrap("A router (a linear model over features of the question, stored as plain numbers in ROUTER) picks one "
             "member per question, and that member answers exactly as it would alone, on masforge's own runtime "
             "inlined below. Members:"),
        "",
    ]
    for i, member in enumerate(body.members):
        chosen = "" if i in body.router.classes else " (the router never picks it)"
        lines.append(f"    {i}: {docstring(member.name)} ({member.short_id}){chosen}")
    if body.escalation:
        lines += ["", wrap("Escalation: an answer that fails an example the question states passes the question on "
                           "to the next member of " + ", ".join(str(i) for i in body.escalation) + ".")]
    call = (f'    print(build()({genome.inputs[0]}="What is 17 * 23?").{genome.outputs[0]})\n'
            f'    print(build().choose({genome.inputs[0]}="..."))    # the member the router picks')
    return "\n".join([*lines, *dspy_usage_lines(filename, found, genome.inputs[0], call, tools_used)])
