"""What a candidate system IS: the genome data model.

One `Genome` type with two kinds:

* ``config`` (default): agents, a topology of directed edges among ``input``, agents and
  ``output``, rounds of message passing for cyclic parts, and an aggregation.
* ``code``: an ADAS-style Python ``forward(inputs)`` function that only ever runs in the sandbox.

Structural checks that need the whole genome (unknown agents in edges, cycles, reachability,
signatures) live in :mod:`masforge.genome.validate`; this module only declares shapes.
"""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from masforge.genome.hashing import genome_hash, structure_hash
from masforge.genome.names import EXECUTE_MODULE, AdapterName
from masforge.genome.router import Router
from masforge.input_limits import check_tree, current_limits, env_name

IDENT = r"^[A-Za-z_][A-Za-z0-9_]*$"
RESERVED_NODES = ("input", "output")
MODULE_KINDS = ("predict", "chain_of_thought", "react", "program_of_thought", "refine")
"""The module kinds that call an LM (what mutation and tuning choose among)."""
AGENT_MODULES = (*MODULE_KINDS, EXECUTE_MODULE)
"""Every module kind an agent may have: the LM kinds and ``execute``, a node that runs code and calls no LM."""
AGGREGATIONS = ("last", "majority_vote", "run_examples", "judge")
PICKING_AGGREGATIONS = ("majority_vote", "run_examples")
"""Aggregations that pick one of the answers reaching ``output`` (no judge agent): over one answer they are "last"."""

ModuleKind = Literal["predict", "chain_of_thought", "react", "program_of_thought", "refine", "execute"]
Verdict = Literal["pass", "fail"]
Aggregation = Literal["last", "majority_vote", "run_examples", "judge"]
MessagePassing = Literal["sequential", "synchronous"]


def _bounded(data: Any) -> Any:
    """Refuse raw data over the input limits before pydantic walks it (deep or self-referencing metadata, huge
    strings): a genome built in code gets the same one-line error as one read from a file."""
    if isinstance(data, dict):
        check_tree(data, None, ValueError)
    return data


def check_counts(data: Any) -> None:
    """Refuse raw genome data with more agents or edges than the limits (ValueError naming the field)."""
    if isinstance(data, dict):
        _count_limit(data.get("agents"), "agents", "max_agents", "agents: ")
        topo = data.get("topology")
        if isinstance(topo, dict):
            _count_limit(topo.get("edges"), "edges", "max_edges", "topology.edges: ")


def _count_limit(items: Any, what: str, limit_name: str, place: str = "") -> None:
    limit = getattr(current_limits(), limit_name)
    if isinstance(items, list | tuple) and len(items) > limit:
        raise ValueError(f"{place}{len(items):,} {what} is over the limit of {limit:,} (no real genome has that "
                         f"many; raise ${env_name(limit_name)} if this one is genuine)")




def condition_key(edge: Any) -> str | None:
    """``"a -> b"`` for an edge written ``"a->b"``, ``" a  ->  b "`` or ``[a, b]``; None if it is no edge."""
    if isinstance(edge, list | tuple) and len(edge) == 2:
        left, right = (str(x) for x in edge)
    elif isinstance(edge, str) and edge.count("->") == 1:
        left, _, right = edge.partition("->")
    else:
        return None
    left, right = left.strip(), right.strip()
    return f"{left} -> {right}" if left and right else None


class Agent(BaseModel):
    """One agent: a role, its instructions and the dspy module that realises it."""

    model_config = ConfigDict(extra="forbid")

    id: str = Field(pattern=IDENT, description="Unique identifier, used in edges.")
    role: str = Field(default="", description="Short role name shown to the model, e.g. 'critic'.")
    instructions: str = Field(default="", description="What the agent must do; becomes the signature docstring.")
    module: ModuleKind = Field(default="predict", description="dspy module kind, or 'execute': run the code "
                               "of its predecessors' answers against checks (no LM call).")
    signature: str | None = Field(
        default=None,
        description="dspy-style 'in1, in2 -> out1'. Default: the genome inputs (if wired from input), "
        "'messages' (if it has agent predecessors) -> the genome outputs.",
    )
    lm: str = Field(default="worker", pattern=IDENT, description="LM alias resolved by the run configuration.")
    temperature: float | None = Field(default=None, ge=0.0, le=2.0)
    tools: list[str] = Field(default_factory=list, description="Tool names from the tool registry.")
    copies: int = Field(default=1, ge=1, le=16, description="Independent samples of this agent.")
    max_iters: int = Field(default=3, ge=1, le=10, description="Iterations for react / refine / program_of_thought.")
    adapter: AdapterName = Field(
        default="auto",
        description="Prompt format: 'plain' (ordinary chat, for small models), 'chat' (dspy field markers), "
        "'json', or 'auto' (the LM configuration's choice: plain on the embedded model, chat elsewhere).",
    )
    unchecked: Verdict = Field(
        default="pass",
        description="Execute nodes only: their verdict when there is nothing to run (the question states no example "
        "and no test was written). 'pass' trusts the pick; 'fail' routes it on as unverified, e.g. to more samples.",
    )

    _limits = model_validator(mode="before")(_bounded)


class Topology(BaseModel):
    """How agents are wired: edges, rounds of message passing and the final aggregation."""

    model_config = ConfigDict(extra="forbid")

    edges: list[tuple[str, str]] = Field(default_factory=list)
    rounds: int = Field(default=1, ge=1, le=10, description="Rounds for cyclic parts (debate, refine loops).")
    message_passing: MessagePassing = Field(
        default="sequential",
        description="Inside a cycle: 'sequential' agents see this round's earlier outputs; "
        "'synchronous' agents see only the previous round.",
    )
    aggregation: Aggregation = "last"
    judge: str | None = Field(default=None, description="Agent id of the judge when aggregation is 'judge'.")
    conditions: dict[str, Verdict] = Field(
        default_factory=dict,
        description="Conditional edges: 'a -> b' (an edge out of an execute node) -> the verdict of a under "
        "which the edge carries anything ('pass' or 'fail').",
    )

    _limits = model_validator(mode="before")(_bounded)

    @field_validator("conditions", mode="before")
    @classmethod
    def _parse_conditions(cls, value: Any) -> Any:
        """Keys written ``"a -> b"`` (any spacing); a list of ``[a, b, verdict]`` or ``["a -> b", verdict]``
        entries is accepted too."""
        if isinstance(value, list | tuple):
            pairs: list[tuple[Any, Any]] = []
            for i, item in enumerate(value):
                if isinstance(item, list | tuple) and len(item) == 3:
                    pairs.append((f"{item[0]} -> {item[1]}", item[2]))
                elif isinstance(item, list | tuple) and len(item) == 2:
                    pairs.append((item[0], item[1]))
                else:
                    raise ValueError(f"condition {i} {item!r} is not a condition; write {{'a -> b': 'fail'}}")
            value = dict(pairs)
        if not isinstance(value, dict):
            return value
        parsed: dict[Any, Any] = {}
        for key, verdict in value.items():
            edge = condition_key(key)
            if edge is None:
                raise ValueError(f"condition '{key}' does not name an edge; write 'a -> b'")
            parsed[edge] = verdict.strip().lower() if isinstance(verdict, str) else verdict
        return parsed

    def condition_of(self, source: str, target: str) -> str | None:
        """The verdict the edge ``source -> target`` waits for (None: unconditional)."""
        return self.conditions.get(f"{source} -> {target}")

    @field_validator("edges", mode="before")
    @classmethod
    def _parse_arrow_edges(cls, value: Any) -> Any:
        """Accept ``"a -> b"`` strings as well as ``[a, b]`` pairs."""
        _count_limit(value, "edges", "max_edges")
        if not isinstance(value, list):
            return value
        parsed: list[Any] = []
        for i, item in enumerate(value):
            if isinstance(item, str):
                if item.count("->") != 1:
                    raise ValueError(f"edge {i} '{item}' is not an edge; write 'a -> b' or [a, b]")
                left, _, right = item.partition("->")
                parsed.append((left.strip(), right.strip()))
            elif isinstance(item, list | tuple) and len(item) != 2:
                raise ValueError(f"edge {i} {list(item)!r} must join exactly two nodes; write 'a -> b' or [a, b]")
            else:
                parsed.append(item)
        return parsed


class Genome(BaseModel):
    """A candidate multi-agent system (config or code kind).

    Identity is the canonical hash of the behaviour-relevant fields (see
    :func:`masforge.genome.hashing.genome_hash`); ``name``, ``description``, ``source`` and
    ``metadata`` are documentation and lineage and do not change the id.
    """

    model_config = ConfigDict(extra="forbid")

    kind: Literal["config", "code", "portfolio"] = "config"
    name: str = Field(default="unnamed", min_length=1)
    description: str = ""
    source: str = Field(default="", description="The idea or paper the system comes from.")
    inputs: list[str] = Field(default_factory=lambda: ["question"], min_length=1)
    outputs: list[str] = Field(default_factory=lambda: ["answer"], min_length=1)
    agents: list[Agent] = Field(default_factory=list)
    topology: Topology = Field(default_factory=Topology)
    code: str | None = Field(default=None, description="Python source defining forward(inputs) for code genomes.")
    components: list[str] = Field(default_factory=list, description="Inventory components this system uses.")
    portfolio: Portfolio | None = Field(default=None, description="Portfolio genomes only: the member systems, "
                                        "the router that picks one per question and an optional escalation order.")
    metadata: dict[str, Any] = Field(default_factory=dict, description="Lineage and notes; not part of the id.")

    @model_validator(mode="before")
    @classmethod
    def _within_limits(cls, data: Any) -> Any:
        check_counts(data)  # first: cheaper than walking 100k agents
        return _bounded(data)

    @field_validator("inputs", "outputs")
    @classmethod
    def _field_names(cls, value: list[str]) -> list[str]:
        for name in value:
            if not re.match(IDENT, name):
                raise ValueError(f"'{name}' is not a valid field name (letters, digits, underscore)")
        if len(set(value)) != len(value):
            raise ValueError("field names must be unique")
        return value

    @property
    def id(self) -> str:
        """Canonical 64-hex id (same system, same id)."""
        return genome_hash(self)

    @property
    def structure_id(self) -> str:
        """The id up to the names of the agents (:func:`masforge.genome.hashing.structure_hash`): a design rebuilt
        under other agent names has the same structure id."""
        return structure_hash(self)

    @property
    def short_id(self) -> str:
        """First 12 hex digits of :attr:`id`, used in tables and file names."""
        return self.id[:12]

    def agent(self, agent_id: str) -> Agent:
        """Return the agent with this id (KeyError if absent)."""
        for agent in self.agents:
            if agent.id == agent_id:
                return agent
        raise KeyError(agent_id)


class Portfolio(BaseModel):
    """A portfolio genome's body: member systems (whole genomes, so the file stands alone), the router that sends
    each question to one of them, and optionally an escalation order (see :mod:`masforge.genome.router`)."""

    model_config = ConfigDict(extra="forbid")

    members: list[Genome] = Field(min_length=1, description="The member systems, in the order the router's "
                                  "classes and the escalation order index them.")
    router: Router
    escalation: list[int] = Field(default_factory=list, description="Member indices: an answer that fails the "
                                  "examples its question states passes the question on to the next member here.")


Genome.model_rebuild()
