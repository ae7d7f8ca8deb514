"""Prompt shaping for the meta-agent: a genome as compact text, a candidate's score and failures as text,
and fitting a rendered template into a character budget so a small local model's context holds it."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import yaml

from masforge.genome.schema import EXECUTE_MODULE, Genome
from masforge.search.population import Candidate
from masforge.text import shorten


def genome_brief(genome: Genome, *, max_instructions: int = 160, max_code: int = 1400) -> str:
    """Compact YAML of what a genome does (no documentation fields, defaults left out, long text cut)."""
    if genome.kind == "code":
        # Blank lines cost tokens and carry nothing for the reader.
        code = shorten("\n".join(line for line in (genome.code or "").splitlines() if line.strip()), max_code,
                       flat=False)
        return f"name: {genome.name}\nkind: code\ncode: |\n" + "\n".join("  " + line for line in code.splitlines())
    agents = []
    for a in genome.agents:
        item: dict[str, Any] = {"id": a.id}
        if a.role:
            item["role"] = a.role
        item["module"] = a.module
        if a.copies != 1:
            item["copies"] = a.copies
        if a.temperature is not None:
            item["temperature"] = a.temperature
        if a.tools:
            item["tools"] = list(a.tools)
        if a.adapter != "auto":
            item["adapter"] = a.adapter
        if a.signature:
            item["signature"] = a.signature
        if a.module != EXECUTE_MODULE:  # an execute node has no prompt
            item["instructions"] = shorten(a.instructions, max_instructions)
        agents.append(item)
    data: dict[str, Any] = {"name": genome.name, "agents": agents,
                            "edges": [f"{x} -> {y}" for x, y in genome.topology.edges]}
    if genome.topology.rounds != 1:
        data["rounds"] = genome.topology.rounds
    if genome.topology.aggregation != "last":
        data["aggregation"] = genome.topology.aggregation
    if genome.topology.aggregation == "judge":
        data["judge"] = genome.topology.judge
    if genome.topology.conditions:
        data["conditions"] = dict(genome.topology.conditions)
    return yaml.safe_dump(data, sort_keys=False, default_flow_style=None, width=1000, allow_unicode=True).strip()


def layout(genome: Genome) -> str:
    """A genome's shape on one line, without instructions: ``[solver:chain_of_thoughtx3, judge:predict, judge]``."""
    if genome.kind == "code":
        return f"code ({(genome.code or '').count('llm(')} llm calls)"
    agents = ", ".join(f"{a.id}:{a.module}" + (f"x{a.copies}" if a.copies > 1 else "") for a in genome.agents)
    topo = genome.topology
    extra = (f", rounds {topo.rounds}" if topo.rounds > 1 else "") + (
        f", {topo.aggregation}" if topo.aggregation != "last" else "")
    return f"[{shorten(agents, 90)}{extra}]"


def score_text(cand: Candidate | None) -> str:
    """A candidate's score (and cost per example when it has one) as the meta-agent is shown it."""
    if cand is None:
        return "not scored yet"
    cost = f", ${cand.dollars:.5f}/example" if cand.dollars else ""
    return f"score {cand.score:.2f}{cost}"


def failure_text(cand: Candidate, limit: int = 2) -> str:
    """Failures with the start of the execution trace of the first one (what the agents actually did)."""
    text = cand.feedback(limit)
    trace = next((n.get("trace") for n in cand.failure_notes if n.get("trace")), "")
    if trace:
        text += "\n  trace: " + shorten(trace, 300)
    return text


def fit_prompt(render: Callable[..., str], name: str, values: dict[str, str], *, budget: int,
               shrink: Sequence[str], items: tuple[str, list[str]] | None = None) -> str:
    """Render template ``name``, shortening the ``shrink`` values (largest first) until the prompt has at most
    ``budget`` characters.

    ``items`` is ``(key, entries)`` for a value made of entries (the archive, sorted best last): whole
    entries are dropped from the front, the weakest first, before any text is cut.
    """
    values = dict(values)
    entries: list[str] = []
    if items is not None:
        key, entries = items[0], list(items[1])
        values[key] = "\n\n".join(entries)
    prompt = render(name, **values)
    while items is not None and len(entries) > 1 and len(prompt) > budget:
        entries.pop(0)
        values[items[0]] = "\n\n".join(entries)
        prompt = render(name, **values)
    for _ in range(12):
        if len(prompt) <= budget:
            break
        key = max(shrink, key=lambda k: len(values.get(k, "")))
        over = len(prompt) - budget
        current = values.get(key, "")
        values[key] = shorten(current, max(40, len(current) - over - 10, len(current) // 2), flat=False)
        prompt = render(name, **values)
    return prompt

