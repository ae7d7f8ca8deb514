"""LLM-driven genome operators: a meta-agent that invents, mutates, crosses over, repairs and reflects on
multi-agent systems (ADAS-style Meta Agent Search, feedback-driven mutation as in EvoMAS, and the
"velocity" plans of SwarmAgentic).

Config genomes come back as JSON following a compact proposal schema (:class:`ProposalSpec`: rationale,
name, agents, ``"a -> b"`` edges, rounds, aggregation, judge) that is converted to a :class:`Genome`;
code genomes come back as a fenced ``python`` block defining ``forward(inputs)``. Parsing is tolerant
(fences, chatter around the JSON, trailing commas, aliases such as ``cot``), and whatever is still wrong
(broken JSON, an unknown agent in an edge, a cycle without rounds, a syntax error) is sent back to the
model with the one-line problem, at most ``max_repairs`` times. No operator raises on garbage model
output: it returns ``None`` and says why in :attr:`MetaAgent.errors` and :attr:`MetaAgent.counters`.

Prompts are the ``search/prompts/meta_*.txt`` templates; every prompt is kept under a character budget
(``prompt_chars``, about 1,500 tokens) so a 0.5B local model with a 4,096-token context can answer.
"""

from __future__ import annotations

import ast
import json
import re
from collections import Counter
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from masforge.errors import BudgetExceeded, MasforgeError
from masforge.genome.io import format_validation_error
from masforge.genome.schema import AGGREGATIONS, MODULE_KINDS, Agent, Genome, Topology
from masforge.genome.validate import problems
from masforge.runtime.adapters import ADAPTERS
from masforge.runtime.lm import LMClient
from masforge.search.context import Proposal
from masforge.search.operators.hygiene import copied_example, descriptive_name
from masforge.search.population import Candidate, feature_matrix
from masforge.search.prompts import render

if TYPE_CHECKING:
    from masforge.search.context import SearchContext

GenomeKind = Literal["config", "code"]

__all__ = [
    "AgentSpec", "MetaAgent", "ProposalParseError", "ProposalSpec", "extract_code", "extract_json",
    "genome_brief", "parse_proposal", "proposal_json_schema", "spec_to_genome", "starter_genome",
]

MAX_AGENTS = 8
_MODULE_ALIASES = {
    "cot": "chain_of_thought", "chainofthought": "chain_of_thought", "chain_of_thoughts": "chain_of_thought",
    "pot": "program_of_thought", "program": "program_of_thought", "code": "program_of_thought",
    "self_refine": "refine", "refinement": "refine", "reflexion": "refine", "direct": "predict",
    "prediction": "predict", "io": "predict",
}
_AGGREGATION_ALIASES = {"vote": "majority_vote", "majority": "majority_vote", "voting": "majority_vote",
                        "self_consistency": "majority_vote", "final": "last", "none": "last"}
_ARROWS = re.compile(r"\s*(?:-+>|=+>|→|⟶|->)\s*")
_THINK = re.compile(r"<think>.*?</think>", re.S | re.I)
_JSON_FENCE = re.compile(r"```(?:json|JSON)?[ \t]*\n(.*?)```", re.S)
_CODE_FENCE = re.compile(r"```(?:python|py|Python|python3)?[ \t]*\n(.*?)(?:```|\Z)", re.S)


PROPOSAL_TEMPERATURE = 0.8
"""Meta-agent temperature when its LM is configured greedy (the embedded model's default)."""


class ProposalParseError(ValueError):
    """A model reply that is not a usable genome; the message is the one-line problem shown to the model."""


# ----------------------------------------------------------------------------------------- proposal schema


class AgentSpec(BaseModel):
    """One agent as the meta-agent writes it (a subset of :class:`Agent`; the LM alias stays ``worker``)."""

    model_config = ConfigDict(extra="ignore")

    id: str
    role: str = ""
    instructions: str = ""
    module: Literal["predict", "chain_of_thought", "react", "program_of_thought", "refine"] = "predict"
    temperature: float | None = Field(default=None, ge=0.0, le=2.0)
    copies: int = Field(default=1, ge=1, le=16)
    tools: list[str] = Field(default_factory=list)
    adapter: Literal["auto", "chat", "json", "plain"] = "auto"


class ProposalSpec(BaseModel):
    """What a meta-agent returns for a config genome: the design and the reason for it."""

    model_config = ConfigDict(extra="ignore")

    rationale: str = ""
    name: str = "proposal"
    agents: list[AgentSpec] = Field(min_length=1, max_length=MAX_AGENTS)
    edges: list[str] = Field(default_factory=list)
    rounds: int = Field(default=1, ge=1, le=10)
    aggregation: Literal["last", "majority_vote", "judge"] = "last"
    judge: str | None = None


def proposal_json_schema() -> dict[str, Any]:
    """A flat JSON schema of :class:`ProposalSpec` for constrained decoding.

    Written by hand rather than taken from pydantic: no ``$defs``/``$ref`` or titles (the llama.cpp grammar
    converter and small models both do better with a flat schema). Long strings get no ``maxLength``:
    llama-cpp-python compiles it into one nested optional per character (a huge, slow grammar); the reply
    length is bounded by ``max_tokens`` instead. Agent ids follow the genome's identifier pattern and tools
    are an enum of the registered tools, so those two mistakes cannot be generated at all.
    """
    from masforge.runtime.tools import tool_names

    agent = {
        "type": "object",
        "properties": {
            "id": {"type": "string", "pattern": "^[A-Za-z_][A-Za-z0-9_]{0,23}$"},
            "role": {"type": "string"},
            "instructions": {"type": "string"},
            "module": {"type": "string", "enum": list(MODULE_KINDS)},
            "temperature": {"type": "number", "minimum": 0, "maximum": 2},
            "copies": {"type": "integer", "minimum": 1, "maximum": 16},
            "tools": {"type": "array", "items": {"type": "string", "enum": tool_names()}, "maxItems": 3},
            "adapter": {"type": "string", "enum": list(ADAPTERS)},
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
        },
        "required": ["rationale", "name", "agents", "edges"],
    }


# ----------------------------------------------------------------------------------------- parsing


def _strip_think(text: str) -> str:
    return _THINK.sub("", text or "").strip()


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

    Raises :class:`ProposalParseError` with a one-line reason the model can act on.
    """
    body = _strip_think(text)
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
            if isinstance(data, dict):
                return data
    # Small models sometimes answer in YAML, the format the archive is shown in.
    for chunk in candidates:
        try:
            data = yaml.safe_load(chunk)
        except yaml.YAMLError:
            continue
        if isinstance(data, dict) and "agents" in data:
            return data
    raise ProposalParseError(first_error or "no JSON object found in the reply; reply with one JSON object")


def extract_code(text: str) -> tuple[str, str, str]:
    """``(code, rationale, name)`` from a reply holding a python block that defines ``forward``."""
    body = _strip_think(text)
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
    if "agents" not in data:
        nested = next((v for v in data.values() if isinstance(v, dict) and "agents" in v), None)
        if nested is not None:
            data = {**nested, "rationale": nested.get("rationale") or data.get("rationale", "")}
    data = dict(data)
    topo = data.pop("topology", None)
    if isinstance(topo, dict):
        for key in ("edges", "rounds", "aggregation", "judge"):
            data.setdefault(key, topo.get(key))
    agents = data.get("agents")
    if isinstance(agents, dict):  # {"solver": {...}} instead of a list
        agents = [{"id": k, **v} if isinstance(v, dict) else {"id": k} for k, v in agents.items()]
    renamed: dict[str, str] = {}
    if isinstance(agents, list):
        fixed = []
        for i, agent in enumerate(agents):
            if not isinstance(agent, dict):
                fixed.append(agent)
                continue
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
            if any(isinstance(f, dict) and f.get("id") == a["id"] for f in fixed):
                continue  # a repeated agent (small models loop): edges can only mean the first one
            fixed.append(a)
        data["agents"] = fixed

    def end(name: Any) -> str:
        text = str(name).strip().strip("'\"")
        if text.lower() in ("input", "output"):
            return text.lower()
        return renamed.get(text, renamed.get(text.lower(), _ident(text, text)))

    edges = data.get("edges")
    if isinstance(edges, str):
        edges = [e for e in re.split(r"[,;\n]", edges) if e.strip()]
    if isinstance(edges, list):
        out = []
        for e in edges:
            if isinstance(e, dict):
                src = e.get("from", e.get("source", e.get("src")))
                dst = e.get("to", e.get("target", e.get("dst")))
                e = [src, dst]
            if isinstance(e, list | tuple) and len(e) == 2:
                out.append(f"{end(e[0])} -> {end(e[1])}")
            elif isinstance(e, str):
                parts = _ARROWS.split(e.strip())
                out.append(" -> ".join(end(p) for p in parts) if len(parts) == 2 else e)
            else:
                out.append(str(e))
        data["edges"] = out
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
    _drop_unwired(data)
    return data


def _drop_unwired(data: dict[str, Any]) -> None:
    """Remove agents that no edge mentions (and that are not the judge): they could never run, so dropping
    them keeps the design's behaviour and spares a repair round. Nothing is dropped if no agent is wired."""
    agents = data.get("agents")
    if not isinstance(agents, list):
        return
    ends = {p.strip() for e in data.get("edges", []) if isinstance(e, str) for p in e.split("->")}
    judge = data.get("judge") if data.get("aggregation") == "judge" else None
    wired = [a for a in agents if not isinstance(a, dict) or a.get("id") in ends or a.get("id") == judge]
    if any(isinstance(a, dict) and a.get("id") in ends for a in wired):
        data["agents"] = wired


def spec_to_genome(spec: ProposalSpec, *, inputs: Sequence[str] = ("question",),
                   outputs: Sequence[str] = ("answer",), name: str = "proposal") -> Genome:
    """The config :class:`Genome` a proposal describes (raises :class:`ProposalParseError` on a bad shape)."""
    try:
        agents = [Agent(id=a.id, role=a.role, instructions=a.instructions, module=a.module,
                        temperature=a.temperature, copies=a.copies, tools=list(a.tools), adapter=a.adapter)
                  for a in spec.agents]
        topology = Topology(edges=list(spec.edges), rounds=spec.rounds, aggregation=spec.aggregation,
                            judge=spec.judge)
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
    return genome, rationale.strip()


def starter_genome(inputs: Sequence[str] = ("question",), outputs: Sequence[str] = ("answer",)) -> Genome:
    """One step-by-step solver: where a search starts when there are no seeds and the meta LM fails."""
    solver = Agent(id="solver", role="careful solver", module="chain_of_thought",
                   instructions="Think step by step, then give the final answer.")
    return Genome(kind="config", name="starter", description="single chain-of-thought solver (fallback start)",
                  inputs=list(inputs), outputs=list(outputs), agents=[solver],
                  topology=Topology(edges=[("input", "solver"), ("solver", "output")]))


# ----------------------------------------------------------------------------------------- prompt pieces


def _cut(text: str, limit: int) -> str:
    text = str(text)
    return text if len(text) <= limit else text[: max(0, limit - 3)].rstrip() + "..."


def genome_brief(genome: Genome, *, max_instructions: int = 160, max_code: int = 1400) -> str:
    """Compact YAML of what a genome does (no documentation fields, defaults left out, long text cut)."""
    if genome.kind == "code":
        # Blank lines cost tokens and carry nothing for the reader.
        code = _cut("\n".join(line for line in (genome.code or "").splitlines() if line.strip()), max_code)
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
        item["instructions"] = _cut(" ".join(a.instructions.split()), max_instructions)
        agents.append(item)
    data: dict[str, Any] = {"name": genome.name, "agents": agents,
                            "edges": [f"{x} -> {y}" for x, y in genome.topology.edges]}
    if genome.topology.rounds != 1:
        data["rounds"] = genome.topology.rounds
    if genome.topology.aggregation != "last":
        data["aggregation"] = genome.topology.aggregation
    if genome.topology.aggregation == "judge":
        data["judge"] = genome.topology.judge
    return yaml.safe_dump(data, sort_keys=False, default_flow_style=None, width=1000, allow_unicode=True).strip()


def _score_text(cand: Candidate | None) -> str:
    if cand is None:
        return "not scored yet"
    cost = f", ${cand.dollars:.5f}/example" if cand.dollars else ""
    return f"score {cand.score:.2f}{cost}"


def _failure_text(cand: Candidate, limit: int = 2) -> str:
    """Failures with the start of the execution trace of the first one (what the agents actually did)."""
    text = cand.feedback(limit)
    trace = next((n.get("trace") for n in cand.failure_notes if n.get("trace")), "")
    if trace:
        text += "\n  trace: " + _cut(" ".join(str(trace).split()), 300)
    return text


# ----------------------------------------------------------------------------------------- the meta-agent


class MetaAgent:
    """LLM-driven genome operators. Each returns a :class:`Proposal` (with the model's rationale) or None.

    ``errors`` keeps the last failures as one-line strings (``operator: problem``); ``counters`` counts
    ``lm_calls``, ``lm_errors``, ``parse_errors`` (replies that were not a valid genome), ``repairs``
    (repair rounds), ``repaired`` (proposals that needed at least one), ``rejected`` (given up) and
    ``proposals`` (returned).

    ``max_tokens`` caps each reply (default: the alias's own cap, but at least 1,024 so a genome or a
    program is not cut off); ``prompt_chars`` caps each prompt; ``structured`` asks the backend to
    constrain config replies to :func:`proposal_json_schema`.
    """

    def __init__(self, client: LMClient, alias: str = "meta", max_repairs: int = 2, *,
                 temperature: float | None = None, max_tokens: int | None = None, archive_k: int = 4,
                 examples_k: int = 2, prompt_chars: int = 5000, structured: bool = True,
                 max_errors: int = 200) -> None:
        self.client = client
        self.alias = alias
        self.max_repairs = max(0, int(max_repairs))
        self.temperature = temperature
        self.max_tokens = max_tokens
        self.archive_k = archive_k
        self.examples_k = examples_k
        self.prompt_chars = prompt_chars
        """Upper bound on system + user prompt characters (~4 characters a token)."""
        self.structured = structured
        self.max_errors = max_errors
        self.errors: list[str] = []
        self.counters: Counter[str] = Counter()
        self._examples: dict[str, str] = {}
        self.last_prompt: str = ""
        """The last user prompt sent (for debugging and prompt-size checks)."""

    # ------------------------------------------------------------------ public operators

    def invent(self, ctx: SearchContext, *, kind: GenomeKind = "config", archive: Sequence[Candidate] | None = None,
               from_scratch: bool = False) -> Proposal | None:
        """A new system for the task, conditioned on the archive's best and most diverse candidates
        (``archive`` overrides the choice; ``from_scratch`` uses only the task description and objective)."""
        shown = [] if from_scratch else list(archive if archive is not None else self.select_archive(ctx))
        # Best last: the strongest example sits closest to the instruction, as in ADAS.
        shown.sort(key=lambda c: c.fitness)
        values = {**self._task_values(ctx), "examples": self._examples_text(ctx), "format": self._format(kind, ctx)}
        items = [f"# {_score_text(c)}\n{genome_brief(c.genome)}" for c in shown]
        if not items:
            values["archive"] = "(none yet)"
        name = "meta_invent_scratch" if from_scratch else "meta_invent"
        prompt = self._fit(name, values, shrink=["archive", "examples", "task"],
                           items=("archive", items) if items else None)
        return self._generate(prompt, kind, ctx, operator="meta_invent", parents=[c.id for c in shown[-2:]])

    def mutate(self, candidate: Candidate, ctx: SearchContext, *, notes: Sequence[str] = (),
               kind: GenomeKind | None = None) -> Proposal | None:
        """An improved version of ``candidate`` aimed at its recorded failures (``notes``: past edits and
        their effect on the score, e.g. ``copies 1->5 on solver: +0.10``)."""
        kind = kind or candidate.genome.kind
        memory = "\n".join(f"- {n}" for n in notes) or "(nothing recorded yet)"
        values = {**self._task_values(ctx), "score": _score_text(candidate), "genome": genome_brief(candidate.genome),
                  "feedback": _failure_text(candidate), "memory": memory, "format": self._format(kind, ctx)}
        prompt = self._fit("meta_mutate", values, shrink=["feedback", "memory", "genome", "task"])
        return self._generate(prompt, kind, ctx, operator="meta_mutate", parents=[candidate.id],
                              base=candidate.genome)

    def crossover(self, a: Candidate, b: Candidate, ctx: SearchContext) -> Proposal | None:
        """One system combining the strengths of ``a`` and ``b`` (code if either parent is code)."""
        kind: GenomeKind = "config" if a.genome.kind == b.genome.kind == "config" else "code"
        values = {**self._task_values(ctx), "score_a": _score_text(a), "genome_a": genome_brief(a.genome),
                  "score_b": _score_text(b), "genome_b": genome_brief(b.genome), "format": self._format(kind, ctx)}
        prompt = self._fit("meta_crossover", values, shrink=["genome_b", "genome_a", "task"])
        return self._generate(prompt, kind, ctx, operator="meta_crossover", parents=[a.id, b.id], base=a.genome)

    def repair(self, text_or_genome: str | Genome, error: str, ctx: SearchContext | None = None, *,
               kind: GenomeKind | None = None, parents: Sequence[str] = (),
               operator: str = "meta_repair") -> Proposal | None:
        """Fix a broken reply or a genome that failed (validation, build or runtime ``error``): up to
        ``max_repairs`` rounds, each showing the model the latest attempt and its one-line problem."""
        base = text_or_genome if isinstance(text_or_genome, Genome) else None
        if base is not None:
            kind = kind or base.kind
            shown = (base.code or "") if base.kind == "code" else genome_brief(base, max_instructions=400)
            what = "This system failed when it was run or checked:"
            parents = list(parents) or [base.id]
        else:
            kind = kind or ("code" if "def forward" in str(text_or_genome) else "config")
            shown = str(text_or_genome)
            what = "Your previous reply could not be used:"
        inputs, outputs = self._io(ctx, base)
        text, problem = shown, error
        for attempt in range(self.max_repairs):
            self.counters["repairs"] += 1
            reply = self._complete(self._repair_prompt(what, text, problem, kind, ctx), kind)
            if reply is None:
                break
            try:
                genome, rationale = parse_proposal(reply, kind, inputs=inputs, outputs=outputs,
                                                   name=base.name if base else "repaired")
                self._check_general(genome, ctx)
            except ProposalParseError as exc:
                self.counters["parse_errors"] += 1
                text, problem = reply, str(exc)
                what = "Your previous reply could not be used:"
                continue
            self.counters["repaired"] += 1
            return self._accept(genome, rationale, operator, list(parents), attempt + 1)
        self.counters["rejected"] += 1
        self._note(operator, f"gave up after {self.max_repairs} repair(s): {problem}")
        return None

    def reflect(self, proposal: Proposal, ctx: SearchContext) -> Proposal | None:
        """Critique-then-revise (ADAS self-reflection) before paying for an evaluation. None if the revision
        is unusable (the caller keeps the original)."""
        kind: GenomeKind = proposal.genome.kind
        values = {**self._task_values(ctx), "genome": genome_brief(proposal.genome, max_instructions=400),
                  "rationale": _cut(proposal.rationale or "-", 400), "format": self._format(kind, ctx)}
        prompt = self._fit("meta_reflect", values, shrink=["genome", "rationale", "task"])
        revised = self._generate(prompt, kind, ctx, operator=f"{proposal.operator}+reflect",
                                 parents=list(proposal.parents), base=proposal.genome)
        if revised is None:
            return None
        revised.rationale = _cut(f"{proposal.rationale} | reflection: {revised.rationale}".strip(" |"), 1500)
        return revised

    def velocity(self, current: Candidate, pbest: Candidate, gbest: Candidate, ctx: SearchContext, *,
                 last_change: str = "", strengths: tuple[str, str, str] = ("some", "some", "some")) -> str | None:
        """A particle's textual velocity: a short plan of edits from inertia (``last_change``), cognitive
        (``pbest``) and social (``gbest``) pulls, each weighted by a word in ``strengths``."""
        def other(c: Candidate) -> str:
            return "(the current system itself)" if c.id == current.id else genome_brief(c.genome)

        values = {**self._task_values(ctx), "score": _score_text(current), "current": genome_brief(current.genome),
                  "last_change": _cut(last_change or "none yet", 300), "pbest_score": _score_text(pbest),
                  "pbest": other(pbest), "gbest_score": _score_text(gbest), "gbest": other(gbest),
                  "inertia": strengths[0], "cognitive": strengths[1], "social": strengths[2]}
        prompt = self._fit("meta_velocity", values, shrink=["pbest", "gbest", "current", "task"])
        reply = self._complete(self._messages(prompt), None)
        if reply is None:
            return None
        plan = _strip_think(reply).strip().strip("`").strip()
        if not plan:
            self._note("velocity", "empty plan")
            return None
        return _cut(plan, 800)

    def rewrite(self, candidate: Candidate, plan: str, ctx: SearchContext, *,
                kind: GenomeKind | None = None) -> Proposal | None:
        """``candidate`` with a textual ``plan`` applied (a swarm particle's move)."""
        kind = kind or candidate.genome.kind
        values = {**self._task_values(ctx), "score": _score_text(candidate), "genome": genome_brief(candidate.genome),
                  "plan": _cut(plan, 800), "format": self._format(kind, ctx)}
        prompt = self._fit("meta_rewrite", values, shrink=["plan", "genome", "task"])
        prop = self._generate(prompt, kind, ctx, operator="meta_rewrite", parents=[candidate.id],
                              base=candidate.genome)
        if prop is not None and not prop.rationale:
            prop.rationale = _cut(plan, 500)
        return prop

    def select_archive(self, ctx: SearchContext, k: int | None = None) -> list[Candidate]:
        """The best half of ``k`` candidates plus the most diverse others (farthest in feature space from
        those already chosen), so the meta-agent sees both what works and what has been explored."""
        k = k or self.archive_k
        pop = list(ctx.population)
        if len(pop) <= k:
            return pop
        chosen = ctx.best(max(1, k // 2))
        rest = [c for c in pop if c.id not in {x.id for x in chosen}]
        feats = feature_matrix([c.genome for c in [*chosen, *rest]])
        scale = feats.std(axis=0)
        scale[scale == 0] = 1.0
        z = (feats - feats.mean(axis=0)) / scale
        chosen_rows = list(range(len(chosen)))
        rest_rows = list(range(len(chosen), len(pop)))
        while rest_rows and len(chosen_rows) < k:
            dists = [float(np.min(np.linalg.norm(z[chosen_rows] - z[r], axis=1))) for r in rest_rows]
            chosen_rows.append(rest_rows.pop(int(np.argmax(dists))))
        everyone = [*chosen, *rest]
        return [everyone[i] for i in chosen_rows]

    # ------------------------------------------------------------------ internals

    def _note(self, operator: str, problem: str) -> None:
        """Keep the one-line reason an operator failed (bounded, newest last)."""
        self.errors.append(_cut(f"{operator}: {' '.join(problem.split())}", 400))
        del self.errors[: max(0, len(self.errors) - self.max_errors)]

    def _io(self, ctx: SearchContext | None, base: Genome | None) -> tuple[list[str], list[str]]:
        if base is not None:
            return list(base.inputs), list(base.outputs)
        if ctx is not None:
            return list(ctx.task.input_fields), [ctx.task.output_field]
        return ["question"], ["answer"]

    def _task_values(self, ctx: SearchContext | None) -> dict[str, str]:
        if ctx is None:
            return {"task": "(see the system)", "objective": "maximise the task score"}
        task = ctx.task
        desc = " ".join(f"{task.name}: {task.description}".split())
        return {"task": _cut(desc, 600), "objective": ctx.fitness.describe(task.metric_name)}

    def _examples_text(self, ctx: SearchContext) -> str:
        if ctx.task.name in self._examples:  # some tasks generate their examples; do that once
            return self._examples[ctx.task.name]
        try:
            examples = ctx.task.split("train", limit=self.examples_k) or ctx.evaluator.examples[: self.examples_k]
        except MasforgeError:
            examples = []
        lines = []
        for ex in examples:
            shown = "; ".join(f"{k}: {' '.join(str(v).split())}" for k, v in ex.inputs.items() if str(v).strip())
            line = f"- input: {_cut(shown or '(empty)', 320)}"
            if ex.target not in (None, ""):
                line += f"\n  answer: {_cut(' '.join(str(ex.target).split()), 120)}"
            lines.append(line)
        self._examples[ctx.task.name] = "\n".join(lines) or "(none)"
        return self._examples[ctx.task.name]

    def _format(self, kind: GenomeKind, ctx: SearchContext | None) -> str:
        from masforge.runtime.tools import tool_names

        tools = ", ".join(tool_names())
        if kind == "code":
            inputs, outputs = self._io(ctx, None)
            return render("meta_format_code", inputs=", ".join(repr(i) for i in inputs), output=outputs[0],
                          first_input=inputs[0], tools=tools)
        return render("meta_format_config", modules=", ".join(MODULE_KINDS), tools=tools)

    def _messages(self, prompt: str) -> list[dict[str, Any]]:
        self.last_prompt = prompt
        return [{"role": "system", "content": render("meta_system")}, {"role": "user", "content": prompt}]

    def _fit(self, name: str, values: dict[str, str], *, shrink: Sequence[str],
             items: tuple[str, list[str]] | None = None) -> str:
        """Render ``name``, shortening the ``shrink`` values (largest first) until the prompt fits the budget.

        ``items`` is ``(key, entries)`` for a value made of entries (the archive, sorted best last): whole
        entries are dropped from the front, the weakest first, before any text is cut.
        """
        budget = self.prompt_chars - len(render("meta_system"))
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
            values[key] = _cut(current, max(40, len(current) - over - 10, len(current) // 2))
            prompt = render(name, **values)
        return prompt

    def _repair_prompt(self, what: str, text: str, error: str, kind: GenomeKind, ctx: SearchContext | None) -> str:
        values = {"what": what, "reply": _cut(_strip_think(text) or "(empty reply)", 1800),
                  "error": _cut(" ".join(str(error).split()), 500), "format": self._format(kind, ctx)}
        return self._fit("meta_repair", values, shrink=["reply", "error"])

    def _response_format(self, kind: GenomeKind | None) -> dict[str, Any] | None:
        if kind != "config" or not self.structured:
            return None
        cfg = self.client.config(self.alias)
        if cfg.is_fake:
            return None
        schema = proposal_json_schema()
        if cfg.is_local:
            # The embedded llama.cpp server turns this schema into a grammar (it rejects "json_schema").
            return {"type": "json_object", "schema": schema}
        return {"type": "json_schema", "json_schema": {"name": "proposal", "schema": schema, "strict": False}}

    def _temperature(self) -> float:
        """The sampling temperature of proposals: as given, else the meta LM's own, but never greedy (a greedy
        meta-agent answers a repeated prompt with the same design, which the search then skips as a duplicate)."""
        if self.temperature is not None:
            return self.temperature
        return self.client.config(self.alias).temperature or PROPOSAL_TEMPERATURE

    def _complete(self, prompt_or_messages: str | list[dict[str, Any]], kind: GenomeKind | None) -> str | None:
        messages = self._messages(prompt_or_messages) if isinstance(prompt_or_messages, str) else prompt_or_messages
        # A distinct sample index per call: the LM cache must not hand back the same reply to a repeated
        # prompt (that would only produce duplicates), while a rerun with the same seed still replays.
        sample = self.counters["lm_calls"]
        self.counters["lm_calls"] += 1
        try:
            # A genome (or a program) needs room: at least 1,024 completion tokens unless set explicitly
            # (with prompts under ~1,500 tokens this still fits a 4,096-token local context).
            max_tokens = self.max_tokens or max(1024, self.client.config(self.alias).max_tokens)
            return self.client.complete(messages, alias=self.alias, temperature=self._temperature(),
                                        max_tokens=max_tokens, sample=sample,
                                        response_format=self._response_format(kind)).text
        except BudgetExceeded:
            raise  # the budget ends the search; it is not a bad proposal
        except MasforgeError as exc:
            self.counters["lm_errors"] += 1
            self._note("lm", str(exc))
            return None

    def _generate(self, prompt: str, kind: GenomeKind, ctx: SearchContext | None, *, operator: str,
                  parents: list[str], base: Genome | None = None) -> Proposal | None:
        reply = self._complete(prompt, kind)
        if reply is None:
            return None
        inputs, outputs = self._io(ctx, base)
        try:
            genome, rationale = parse_proposal(reply, kind, inputs=inputs, outputs=outputs, name=operator)
            self._check_general(genome, ctx)
        except ProposalParseError as exc:
            self.counters["parse_errors"] += 1
            self._note(operator, str(exc))
            if self.max_repairs == 0:
                self.counters["rejected"] += 1
                return None
            fixed = self.repair(reply, str(exc), ctx, kind=kind, parents=parents, operator=operator)
            if fixed is not None:
                fixed.operator = operator
            return fixed
        return self._accept(genome, rationale, operator, parents, 0)

    def _check_general(self, genome: Genome, ctx: SearchContext | None) -> None:
        """Refuse instructions that copy a task example (they cannot transfer) and give the design a name
        that says what it does (not the task's name, not a name already in the run)."""
        if ctx is None:
            return
        texts = [" ".join(str(v) for v in ex.inputs.values()) for ex in ctx.evaluator.examples]
        copied = copied_example(genome, texts)
        if copied:
            self.counters["copied_examples"] += 1
            raise ProposalParseError(f"the instructions copy a task example (\"{copied}\"); write general "
                                     "instructions that work for every question of the task")
        taken = {c.genome.name for c in ctx.population}
        genome.name = descriptive_name(genome.name, genome, task_name=ctx.task.name, taken=taken)

    def _accept(self, genome: Genome, rationale: str, operator: str, parents: list[str], repairs: int) -> Proposal:
        self.counters["proposals"] += 1
        genome.metadata = {"operator": operator, **({"repairs": repairs} if repairs else {})}
        return Proposal(genome=genome, parents=list(dict.fromkeys(parents)), operator=operator,
                        rationale=rationale or f"({operator}: the model gave no rationale)")
