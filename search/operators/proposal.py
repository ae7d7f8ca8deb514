"""The proposal format a meta-agent writes, and reading it back: a compact JSON schema for config genomes
(:class:`ProposalSpec`: rationale, name, agents, ``"a -> b"`` edges, conditions, rounds, aggregation, judge) and a
fenced ``python`` block defining ``forward(inputs)`` for code genomes.

Parsing is tolerant (fences, chatter around the JSON, trailing commas, aliases such as ``cot``, YAML
instead of JSON); whatever is still wrong (broken JSON, an unknown agent in an edge, a cycle without
rounds, a syntax error) is a :class:`ProposalParseError` whose one-line message the meta-agent is shown
when it is asked to repair its reply.
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Callable, Sequence
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from masforge.genome.io import format_validation_error
from masforge.genome.names import EXECUTE_MODULE, TESTS_FIELD, VERDICTS
from masforge.genome.outline import outline
from masforge.genome.schema import AGENT_MODULES, AGGREGATIONS, Agent, Aggregation, Genome, Topology, Verdict
from masforge.genome.signature import parse_signature
from masforge.genome.validate import problems
from masforge.input_limits import check_tree, current_limits, load_yaml
from masforge.lm.adapters import ADAPTERS
from masforge.standalone.plain_adapter import strip_think

GenomeKind = Literal["config", "code"]

MAX_AGENTS = 8
_MODULE_ALIASES = {
    "cot": "chain_of_thought", "chainofthought": "chain_of_thought", "chain_of_thoughts": "chain_of_thought",
    "pot": "program_of_thought", "program": "program_of_thought", "code": "program_of_thought",
    "self_refine": "refine", "refinement": "refine", "reflexion": "refine", "direct": "predict",
    "prediction": "predict", "io": "predict",
    "exec": "execute", "execution": "execute", "executor": "execute", "runcode": "execute", "runtests": "execute",
    "testgate": "execute", "testrunner": "execute", "codeexecution": "execute", "sandbox": "execute",
}
_VERDICT_ALIASES = {"pass": "pass", "passed": "pass", "passes": "pass", "passing": "pass", "success": "pass",
                    "ok": "pass", "true": "pass", "fail": "fail", "failed": "fail", "fails": "fail",
                    "failing": "fail", "failure": "fail", "error": "fail", "false": "fail"}
# An edge written with its condition: "check -fail-> fixer", "check -[fail]-> fixer", "check -> fixer [fail]",
# "check -> fixer (if fail)", "check -> fixer: on fail", "check -> fixer if fails".
_LABELLED_ARROW = re.compile(r"^(.+?)\s*-+\s*[\[(]?\s*(?:if|on|when)?\s*([A-Za-z]+)\s*[\])]?\s*-*>\s*(.+)$")
_TRAILING_VERDICT = re.compile(r"^(.+?)(?:\s*[\[(:,]\s*|\s+)(?:(?:if|on|when)\s+)?([A-Za-z]+)\s*[\])]?$")
_AGGREGATION_ALIASES = {"vote": "majority_vote", "majority": "majority_vote", "voting": "majority_vote",
                        "self_consistency": "majority_vote", "final": "last", "none": "last",
                        "examples": "run_examples", "tests": "run_examples", "run_tests": "run_examples",
                        "tested": "run_examples"}
_ARROWS = re.compile(r"\s*(?:-+>|=+>|→|⟶|->)\s*")
_JSON_FENCE = re.compile(r"```(?:json|JSON)?[ \t]*\n(.*?)```", re.S)
_CODE_FENCE = re.compile(r"```(?:python|py|Python|python3)?[ \t]*\n(.*?)(?:```|\Z)", re.S)


class ProposalParseError(ValueError):
    """A model reply that is not a usable genome; the message is the one-line problem shown to the model."""

    def __init__(self, message: str = "") -> None:
        # The problem may quote the reply's own text (an agent id, an edge): keep it to one line.
        super().__init__(str(message).strip().replace("\r", "\\r").replace("\n", "\\n"))


def _bounded_reply(text: str) -> str:
    """Refuse a reply too long to be a genome before any parsing work is spent on it."""
    limit = current_limits().max_reply_chars
    if len(text or "") > limit:
        raise ProposalParseError(f"the reply is {len(text):,} characters, over the {limit:,}-character limit for a "
                                 "proposal; reply with one short JSON object or program")
    return text or ""


# ----------------------------------------------------------------------------------------- proposal schema


class AgentSpec(BaseModel):
    """One agent as the meta-agent writes it (a subset of :class:`Agent`; the LM alias stays ``worker``)."""

    model_config = ConfigDict(extra="ignore")

    id: str
    role: str = ""
    instructions: str = ""
    module: Literal["predict", "chain_of_thought", "react", "program_of_thought", "refine", "execute"] = "predict"
    temperature: float | None = Field(default=None, ge=0.0, le=2.0)
    copies: int = Field(default=1, ge=1, le=16)
    tools: list[str] = Field(default_factory=list)
    adapter: Literal["auto", "chat", "json", "plain"] = "auto"
    signature: str | None = None
    """Read only for a test writer (a signature whose outputs are just ``tests``): any other agent's signature
    follows from its wiring, as it always has for proposals."""

    def test_signature(self) -> str | None:
        """The agent's signature if it writes only ``tests`` (a test writer for an execute node), else None."""
        if not self.signature or self.module == EXECUTE_MODULE:
            return None
        try:
            sig = parse_signature(self.signature)
        except ValueError:
            return None
        return str(sig) if sig.output_names == [TESTS_FIELD] else None


class ProposalSpec(BaseModel):
    """What a meta-agent returns for a config genome: the design and the reason for it."""

    model_config = ConfigDict(extra="ignore")

    rationale: str = ""
    name: str = "proposal"
    agents: list[AgentSpec] = Field(min_length=1, max_length=MAX_AGENTS)
    edges: list[str] = Field(default_factory=list)
    rounds: int = Field(default=1, ge=1, le=10)
    aggregation: Aggregation = "last"
    judge: str | None = None
    conditions: dict[str, Verdict] = Field(default_factory=dict)


def proposal_json_schema() -> dict[str, Any]:
    """A flat JSON schema of :class:`ProposalSpec` for constrained decoding.

    Written by hand rather than taken from pydantic: no ``$defs``/``$ref`` or titles (the llama.cpp grammar
    converter and small models both do better with a flat schema). Long strings get no ``maxLength``:
    llama-cpp-python compiles it into one nested optional per character (a huge, slow grammar); the reply
    length is bounded by ``max_tokens`` instead. Agent ids follow the genome's identifier pattern and tools
    are an enum of the registered tools, so those two mistakes cannot be generated at all.
    """
    from masforge.sandbox.tools import tool_names

    agent = {
        "type": "object",
        "properties": {
            "id": {"type": "string", "pattern": "^[A-Za-z_][A-Za-z0-9_]{0,23}$"},
            "role": {"type": "string"},
            "instructions": {"type": "string"},
            "module": {"type": "string", "enum": list(AGENT_MODULES)},
            "temperature": {"type": "number", "minimum": 0, "maximum": 2},
            "copies": {"type": "integer", "minimum": 1, "maximum": 16},
            "tools": {"type": "array", "items": {"type": "string", "enum": tool_names()}, "maxItems": 3},
            "adapter": {"type": "string", "enum": list(ADAPTERS)},
            "signature": {"type": "string"},
        },
        "required": ["id", "role", "instructions", "module"],
    }
    return {
        "type": "object",
        "properties": {
            "rationale": {"type": "string"},
            "name": {"type": "string"},
            "agents": {"type": "array", "items": agent, "minItems": 1, "maxItems": MAX_AGENTS},
            "edges": {"type": "array", "items": {"type": "string"}, "minItems": 2, "maxItems": 24},
            "rounds": {"type": "integer", "minimum": 1, "maximum": 10},
            "aggregation": {"type": "string", "enum": list(AGGREGATIONS)},
            "judge": {"type": ["string", "null"]},
            "conditions": {"type": "object", "additionalProperties": {"type": "string", "enum": list(VERDICTS)}},
        },
        "required": ["rationale", "name", "agents", "edges"],
    }


# ----------------------------------------------------------------------------------------- parsing


def _loads_lenient(blob: str) -> Any:
    """``json.loads`` that also accepts trailing commas and Python literals (common small-model slips)."""
    try:
        return json.loads(blob)
    except json.JSONDecodeError:
        pass
    fixed = re.sub(r",\s*([}\]])", r"\1", blob)
    try:
        return json.loads(fixed)
    except json.JSONDecodeError:
        pass
    try:
        return ast.literal_eval(fixed)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        pass
    return json.loads(fixed)  # raises with the most useful message


def _balanced_object(text: str, start: int) -> str | None:
    """The ``{...}`` starting at ``start`` with balanced braces (strings respected), or None if unclosed."""
    depth, in_str, escape, quote = 0, False, False, ""
    for i in range(start, len(text)):
        ch = text[i]
        if in_str:
            if escape:
                escape = False
            elif ch == "\\":
                escape = True
            elif ch == quote:
                in_str = False
        elif ch in "\"'":
            in_str, quote = True, ch
        elif ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
            if depth == 0:
                return text[start : i + 1]
    return None


def extract_json(text: str) -> dict[str, Any]:
    """The first JSON object in a model reply (fences and chatter around it are ignored).

    Raises :class:`ProposalParseError` with a one-line reason the model can act on. The reply is bounded in
    length and the object in nesting, values and string length (see :mod:`masforge.input_limits`).
    """
    body = strip_think(_bounded_reply(text)).strip()
    if not body:
        raise ProposalParseError("the reply is empty; reply with one JSON object")
    candidates = [m.group(1) for m in _JSON_FENCE.finditer(body)] + [body]
    first_error: str | None = None
    for chunk in candidates:
        for m in list(re.finditer(r"\{", chunk))[:20]:
            blob = _balanced_object(chunk, m.start())
            if blob is None:
                first_error = first_error or "the JSON object is cut off (a closing brace is missing)"
                break  # later braces sit inside this unclosed object
            try:
                data = _loads_lenient(blob)
            except json.JSONDecodeError as exc:
                first_error = first_error or f"invalid JSON at line {exc.lineno} column {exc.colno}: {exc.msg}"
                continue
            except RecursionError:
                first_error = first_error or "the JSON object is nested far too deeply; keep it flat"
                continue
            if isinstance(data, dict):
                check_tree(data, None, ProposalParseError)
                return data
    # Small models sometimes answer in YAML, the format the archive is shown in (no anchors/aliases: a reply
    # must not expand into something huge or self-referencing).
    for chunk in candidates:
        try:
            data = load_yaml(chunk, "reply", ProposalParseError, what="proposals")
        except ProposalParseError:
            continue
        if isinstance(data, dict) and "agents" in data:
            check_tree(data, None, ProposalParseError)
            return data
    raise ProposalParseError(first_error or "no JSON object found in the reply; reply with one JSON object")


def extract_code(text: str) -> tuple[str, str, str]:
    """``(code, rationale, name)`` from a reply holding a python block that defines ``forward``."""
    body = strip_think(_bounded_reply(text)).strip()
    blocks = [m.group(1) for m in _CODE_FENCE.finditer(body)]
    code = next((b for b in blocks if "def forward" in b), None)
    outside = _CODE_FENCE.sub("", body)
    if code is None and "def forward" in body:
        # An unfenced program: take everything from its first top-level statement.
        lines = body.splitlines()
        start = next((i for i, line in enumerate(lines) if re.match(r"(def |import |from |[A-Z_]+\s*=)", line)), 0)
        code = "\n".join(lines[start:])
        outside = "\n".join(lines[:start])
    if code is None:
        raise ProposalParseError("no ```python block defining forward(inputs) found in the reply")
    rationale_m = re.search(r"rationale\s*:\s*(.+)", outside, re.I)
    name_m = re.search(r"^\W*name\s*:\s*(\S.*)$", outside, re.I | re.M)
    if rationale_m:
        rationale = rationale_m.group(1).strip()
    else:  # no "Rationale:" line: the prose around the code is the rationale
        skip = name_m.group(0).strip() if name_m else None
        rationale = " ".join(line.strip() for line in outside.splitlines() if line.strip() and line.strip() != skip)
    name = name_m.group(1).strip().strip("<>`*\"' ") if name_m else ""
    return code.strip() + "\n", rationale.strip().strip("<>").strip()[:1000], name


def _ident(value: Any, fallback: str) -> str:
    text = re.sub(r"\W+", "_", str(value or "").strip()).strip("_")
    if not text:
        return fallback
    return text if re.match(r"[A-Za-z_]", text) else f"a_{text}"


def _slug(value: Any, fallback: str) -> str:
    text = re.sub(r"[^A-Za-z0-9_.-]+", "-", str(value or "").strip()).strip("-.")[:48]
    return text or fallback


def _clamp(value: Any, lo: float, hi: float, as_int: bool = False) -> Any:
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        return value
    try:
        num = float(value)
    except ValueError:
        return value  # left for pydantic to report
    num = min(hi, max(lo, num))
    return int(round(num)) if as_int else num


def _normalise_spec(data: dict[str, Any]) -> dict[str, Any]:
    """Undo the formatting slips small models make, so only real design errors need a repair round."""
    data = _flatten(data)
    end = _end_namer(_normalise_agents(data))
    conditions = _normalise_edges(data, end)
    _normalise_conditions(data, conditions, end)
    _normalise_settings(data, end)
    _drop_unwired(data)
    return data


def _flatten(data: dict[str, Any]) -> dict[str, Any]:
    """A copy of the proposal with its design at the top level: out of a wrapper object (``{"design": {...}}``)
    and out of a ``topology`` object."""
    if "agents" not in data:
        nested = next((v for v in data.values() if isinstance(v, dict) and "agents" in v), None)
        if nested is not None:
            data = {**nested, "rationale": nested.get("rationale") or data.get("rationale", "")}
    data = dict(data)
    topo = data.pop("topology", None)
    if isinstance(topo, dict):
        for key in ("edges", "rounds", "aggregation", "judge", "conditions"):
            if topo.get(key) is not None:  # an empty topology must not turn missing fields into nulls
                data.setdefault(key, topo[key])
    return data


def _normalise_agents(data: dict[str, Any]) -> dict[str, str]:
    """The agents as a list of cleaned-up dicts, a repeated one dropped; returns each name the model gave an agent
    (as written and lower-cased) mapped to the id it got."""
    agents = data.get("agents")
    if isinstance(agents, dict):  # {"solver": {...}} instead of a list
        agents = [{"id": k, **v} if isinstance(v, dict) else {"id": k} for k, v in agents.items()]
    renamed: dict[str, str] = {}
    if isinstance(agents, list):
        fixed: list[Any] = []
        for i, agent in enumerate(agents):
            if not isinstance(agent, dict):
                fixed.append(agent)
                continue
            a = _normalise_agent(i, agent, renamed)
            if any(isinstance(f, dict) and f.get("id") == a["id"] for f in fixed):
                continue  # a repeated agent (small models loop): edges can only mean the first one
            fixed.append(a)
        data["agents"] = fixed
    return renamed


def _normalise_agent(i: int, agent: dict[str, Any], renamed: dict[str, str]) -> dict[str, Any]:
    """Agent ``i`` cleaned up: an identifier id (recorded in ``renamed``), a known module name, tools as a list
    without repeats, settings clamped to their ranges, and nothing an execute node cannot use."""
    a = {k: v for k, v in agent.items() if v is not None}
    raw_id = a.get("id", a.get("name", a.get("role", "")))
    a["id"] = _ident(raw_id, f"agent_{i + 1}")
    renamed[str(raw_id).strip()] = a["id"]
    renamed[str(raw_id).strip().lower()] = a["id"]
    if isinstance(a.get("module"), str):
        mod = re.sub(r"[\s-]+", "_", a["module"].strip().lower())
        a["module"] = _MODULE_ALIASES.get(mod.replace("_", ""), _MODULE_ALIASES.get(mod, mod))
    if isinstance(a.get("tools"), str):
        a["tools"] = [t.strip() for t in a["tools"].split(",") if t.strip()]
    if "temperature" in a:
        a["temperature"] = _clamp(a["temperature"], 0.0, 2.0)
    if "copies" in a:
        a["copies"] = _clamp(a["copies"], 1, 16, as_int=True)
    if isinstance(a.get("adapter"), str):
        adapter = a["adapter"].strip().lower()
        a["adapter"] = adapter if adapter in ADAPTERS else "auto"  # a format name the runtime lacks
    if isinstance(a.get("tools"), list):
        a["tools"] = list(dict.fromkeys(str(t).strip() for t in a["tools"]))
    for key in ("role", "instructions"):
        if key in a:
            a[key] = str(a[key]).strip()
    if a.get("module") == EXECUTE_MODULE:
        # an execute node calls no LM: what a model writes there ("run the tests") means nothing
        for key in ("instructions", "temperature", "copies", "tools", "adapter", "lm", "signature"):
            a.pop(key, None)
    return a


def _end_namer(renamed: dict[str, str]) -> Callable[[Any], str]:
    """How an edge's end written by the model names a node: input, output, or the id its agent got."""

    def end(name: Any) -> str:
        text = str(name).strip().strip("'\"")
        if text.lower() in ("input", "output"):
            return text.lower()
        return renamed.get(text, renamed.get(text.lower(), _ident(text, text)))

    return end


def _normalise_edges(data: dict[str, Any], end: Callable[[Any], str]) -> dict[str, Any]:
    """The edges as ``a -> b`` strings however they were written (one string, pairs, objects, other arrows);
    returns the conditions written on them (``a -> b (if fail)``, ``{"when": "fail"}``) by edge."""
    edges = data.get("edges")
    if isinstance(edges, str):
        edges = [e for e in re.split(r"[,;\n]", edges) if e.strip()]
    conditions: dict[str, Any] = {}
    if isinstance(edges, list):
        out = []
        for e in edges:
            verdict = None
            if isinstance(e, dict):
                src = e.get("from", e.get("source", e.get("src")))
                dst = e.get("to", e.get("target", e.get("dst")))
                verdict = _verdict(e.get("when", e.get("if", e.get("condition", e.get("on")))))
                e = [src, dst]
            elif isinstance(e, str):
                e, verdict = _split_condition(e)
            if isinstance(e, list | tuple) and len(e) == 2:
                out.append(f"{end(e[0])} -> {end(e[1])}")
            elif isinstance(e, str):
                parts = _ARROWS.split(e.strip())
                out.append(" -> ".join(end(p) for p in parts) if len(parts) == 2 else e)
            else:
                out.append(str(e))
            if verdict is not None:
                conditions[out[-1]] = verdict
        data["edges"] = out
    return conditions


def _normalise_conditions(data: dict[str, Any], conditions: dict[str, Any], end: Callable[[Any], str]) -> None:
    """The conditions given on their own (a dict or a list of them) joined to those written on the edges, their
    edges written like the edges and their verdicts as ``pass`` / ``fail``."""
    given = data.get("conditions")
    if isinstance(given, list):  # [{"edge": "a -> b", "when": "fail"}] or [["a -> b", "fail"]]
        given = dict(_condition_item(c) for c in given if _condition_item(c) is not None)
    if isinstance(given, dict):
        for key, verdict in given.items():
            parts = _ARROWS.split(str(key).strip())
            edge = " -> ".join(end(p) for p in parts) if len(parts) == 2 else str(key)
            conditions[edge] = _verdict(verdict) or verdict
    if conditions or "conditions" in data:
        data["conditions"] = conditions


def _normalise_settings(data: dict[str, Any], end: Callable[[Any], str]) -> None:
    """Rounds clamped, the aggregation's name, the judge only with aggregation by a judge, no null settings."""
    if "rounds" in data and data["rounds"] is not None:
        data["rounds"] = _clamp(data["rounds"], 1, 10, as_int=True)
    agg = data.get("aggregation")
    if isinstance(agg, str):
        agg = re.sub(r"[\s-]+", "_", agg.strip().lower())
        data["aggregation"] = _AGGREGATION_ALIASES.get(agg, agg)
    elif agg is None:
        data.pop("aggregation", None)
    if data.get("aggregation") != "judge":
        data["judge"] = None  # a stray judge with another aggregation is meaningless, not an error
    elif data.get("judge") is not None:
        data["judge"] = end(data["judge"])
    for key in ("rounds", "name", "rationale"):
        if data.get(key) is None:
            data.pop(key, None)
    if "rationale" in data and not isinstance(data["rationale"], str):
        data["rationale"] = str(data["rationale"])


def _verdict(value: Any) -> str | None:
    """``pass`` or ``fail`` for the ways a model writes them (``failed``, ``on_fail``, ``False``...); else None."""
    if isinstance(value, bool):
        return "pass" if value else "fail"
    text = re.sub(r"^(?:on|if|when)[\s_-]+", "", str(value or "").strip().lower())
    return _VERDICT_ALIASES.get(text)


def _split_condition(edge: str) -> tuple[str, str | None]:
    """An edge written with its condition, as ``("a -> b", verdict)``; ``(edge, None)`` for a plain edge."""
    text = edge.strip()
    m = _LABELLED_ARROW.match(text)
    if m and _verdict(m.group(2)):
        return f"{m.group(1).strip()} -> {m.group(3).strip()}", _verdict(m.group(2))
    m = _TRAILING_VERDICT.match(text)
    ends = _ARROWS.split(m.group(1).strip()) if m else []
    if m and _verdict(m.group(2)) and len(ends) == 2 and all(p.strip() for p in ends):
        return m.group(1).strip(), _verdict(m.group(2))
    return edge, None


def _condition_item(item: Any) -> tuple[str, Any] | None:
    if isinstance(item, dict):
        edge = item.get("edge")
        if edge is None and item.get("from") is not None:
            edge = f"{item.get('from')} -> {item.get('to')}"
        return (str(edge), item.get("when", item.get("if", item.get("verdict", item.get("on"))))) \
            if edge is not None else None
    if isinstance(item, list | tuple) and len(item) == 2:
        return str(item[0]), item[1]
    if isinstance(item, list | tuple) and len(item) == 3:
        return f"{item[0]} -> {item[1]}", item[2]
    return None


def _drop_unwired(data: dict[str, Any]) -> None:
    """Remove agents that no edge mentions (and that are not the judge): they could never run, so dropping
    them keeps the design's behaviour and spares a repair round. Nothing is dropped if no agent is wired."""
    agents = data.get("agents")
    if not isinstance(agents, list):
        return
    edges = data.get("edges")
    ends = {p.strip() for e in (edges if isinstance(edges, list) else []) if isinstance(e, str)
            for p in e.split("->")}
    judge = data.get("judge") if data.get("aggregation") == "judge" else None
    wired = [a for a in agents if not isinstance(a, dict) or a.get("id") in ends or a.get("id") == judge]
    if any(isinstance(a, dict) and a.get("id") in ends for a in wired):
        data["agents"] = wired


def spec_to_genome(spec: ProposalSpec, *, inputs: Sequence[str] = ("question",),
                   outputs: Sequence[str] = ("answer",), name: str = "proposal") -> Genome:
    """The config :class:`Genome` a proposal describes (raises :class:`ProposalParseError` on a bad shape)."""
    try:
        agents = [Agent(id=a.id, role=a.role, instructions=a.instructions, module=a.module,
                        temperature=a.temperature, copies=a.copies, tools=list(a.tools), adapter=a.adapter,
                        signature=a.test_signature())
                  for a in spec.agents]
        topology = Topology(edges=list(spec.edges), rounds=spec.rounds, aggregation=spec.aggregation,
                            judge=spec.judge, conditions=dict(spec.conditions))
        return Genome(kind="config", name=_slug(spec.name, name), description=spec.rationale[:400],
                      inputs=list(inputs), outputs=list(outputs), agents=agents, topology=topology)
    except ValidationError as exc:
        raise ProposalParseError(format_validation_error(exc)) from None


def parse_proposal(text: str, kind: GenomeKind, *, inputs: Sequence[str] = ("question",),
                   outputs: Sequence[str] = ("answer",), name: str = "proposal") -> tuple[Genome, str]:
    """``(genome, rationale)`` from a model reply; a valid genome or :class:`ProposalParseError`."""
    if kind == "code":
        code, rationale, title = extract_code(text)
        try:
            genome = Genome(kind="code", name=_slug(title, name), description=rationale[:400], inputs=list(inputs),
                            outputs=list(outputs), code=code)
        except ValidationError as exc:
            raise ProposalParseError(format_validation_error(exc)) from None
    else:
        data = _normalise_spec(extract_json(text))
        try:
            spec = ProposalSpec.model_validate(data)
        except ValidationError as exc:
            raise ProposalParseError(format_validation_error(exc)) from None
        genome = spec_to_genome(spec, inputs=inputs, outputs=outputs, name=name)
        rationale = spec.rationale
    found = problems(genome)
    if found:
        more = f" (and {len(found) - 3} more)" if len(found) > 3 else ""
        raise ProposalParseError("; ".join(found[:3]) + more)
    if genome.kind == "config":
        # the rationale argues for a score ("should score higher because ..."); the archive needs what the
        # system is first, so a person browsing it can tell designs apart
        genome.description = f"{outline(genome)} Rationale: {' '.join(rationale.split())}"[:600]
    return genome, rationale.strip()


def starter_genome(inputs: Sequence[str] = ("question",), outputs: Sequence[str] = ("answer",)) -> Genome:
    """One step-by-step solver: where a search starts when there are no seeds and the meta LM fails."""
    solver = Agent(id="solver", role="careful solver", module="chain_of_thought",
                   instructions="Think step by step, then give the final answer.")
    return Genome(kind="config", name="starter", description="single chain-of-thought solver (fallback start)",
                  inputs=list(inputs), outputs=list(outputs), agents=[solver],
                  topology=Topology(edges=[("input", "solver"), ("solver", "output")]))
