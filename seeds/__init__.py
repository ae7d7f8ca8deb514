"""Hand-designed starting systems, shipped as genome files (YAML config genomes, ``.py`` code genomes),
and the component inventory (``inventory/components.yaml``) that composition strategies build from."""

from __future__ import annotations

import os
from importlib import resources
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from masforge.errors import GenomeError
from masforge.genome.io import format_validation_error, load_genome
from masforge.genome.schema import IDENT, Agent, Genome
from masforge.input_limits import format_yaml_error

_SUFFIXES = (".yaml", ".yml", ".py")
GENOME_SUFFIXES = (".yaml", ".yml", ".json", ".py")
"""What a genome file may be called (the seeds themselves are never JSON)."""


def seed_paths() -> list[Path]:
    """Paths of every shipped seed genome, sorted by file name."""
    root = Path(str(resources.files("masforge.seeds")))
    return sorted(p for p in root.iterdir() if p.suffix in _SUFFIXES and not p.name.startswith("_"))


def seed_names() -> list[str]:
    """Seed names as accepted by :func:`load_seed` (file stems)."""
    return [p.stem for p in seed_paths()]


def _key(name: str) -> str:
    # `masforge seeds` shows genome names (reflexion-code), files use underscores (reflexion_code): both work.
    return name.strip().lower().replace("-", "_")


def load_seed(name: str) -> Genome:
    """The seed genome called ``name``: its file stem (``reflexion_code``) or its genome name
    (``reflexion-code``); dashes and underscores are the same."""
    wanted = _key(name)
    paths = seed_paths()
    for path in paths:
        if _key(path.stem) == wanted:
            return load_genome(path)
    for path in paths:
        genome = load_genome(path)
        if _key(genome.name) == wanted:
            return genome
    raise GenomeError(f"unknown seed '{name}' (seeds: {', '.join(seed_names())}; see `masforge seeds`)")


def resolve_genome(ref: str | os.PathLike[str], *, also: str = "") -> Genome:
    """The genome a user names: a genome file (.yaml/.yml/.json/.py) or a seed name. The one place a
    reference given on the command line, in a run configuration or to the API is turned into a genome.
    ``also`` names a further form the caller accepts, for the error message (e.g. ``a genome id``)."""
    path = Path(ref)
    try:
        is_file = path.is_file()
    except OSError:
        is_file = False  # not a usable path (a name too long, ...): maybe a seed name, else the error below
    if is_file or path.suffix.lower() in GENOME_SUFFIXES:
        return load_genome(path)  # a missing file is its own one-line error
    try:
        return load_seed(str(ref))
    except GenomeError:
        seeds = f"a seed (seeds: {', '.join(seed_names())})"
        forms = f"a genome file, {seeds} nor {also}" if also else f"a genome file nor {seeds}"
        raise GenomeError(f"'{ref}' is neither {forms}") from None


def load_seeds(names: list[str] | None = None) -> list[Genome]:
    """Several seeds (all when ``names`` is None)."""
    return [load_seed(n) for n in (names or seed_names())]


PATTERNS = ("test_gate", "repair_loop", "escalation", "test_writer")
"""Graph patterns an inventory component can name: execution and control genes wrapped around a system's answering
agents (see ``masforge.search.operators.execution``)."""
Pattern = Literal["test_gate", "repair_loop", "escalation", "test_writer"]
COMPONENT_KINDS = ("agent", "tool", "model", "pattern")


class Component(BaseModel):
    """One inventory entry: an agent fragment, a tool, a model alias or a graph pattern, with what it costs per
    use."""

    model_config = ConfigDict(extra="forbid")

    id: str = Field(pattern=IDENT, description="Unique identifier.")
    kind: Literal["agent", "tool", "model", "pattern"]
    description: str = Field(min_length=1, description="Capability: what the component is good at.")
    cost: float = Field(ge=0.0, description="Estimated dollars per use (only ratios matter).")
    agent: Agent | None = Field(default=None, description="For agents: the fragment to insert into a genome.")
    tool: str | None = Field(default=None, description="For tools: a registered tool name.")
    model: str | None = Field(default=None, pattern=IDENT, description="For models: an LM alias (worker, local, ...).")
    pattern: Pattern | None = Field(default=None, description="For patterns: test_gate, repair_loop, escalation or "
                                    "test_writer.")

    @model_validator(mode="before")
    @classmethod
    def _agent_id_defaults_to_component_id(cls, data: Any) -> Any:
        if isinstance(data, dict) and isinstance(data.get("agent"), dict) and "id" not in data["agent"]:
            data = {**data, "agent": {"id": data.get("id"), **data["agent"]}}
        return data

    @model_validator(mode="after")
    def _payload_matches_kind(self) -> Component:
        payload = {"agent": self.agent, "tool": self.tool, "model": self.model, "pattern": self.pattern}
        if payload[self.kind] is None:
            raise ValueError(f"a component of kind '{self.kind}' needs the field '{self.kind}'")
        extra = [k for k, v in payload.items() if v is not None and k != self.kind]
        if extra:
            raise ValueError(f"a component of kind '{self.kind}' takes no '{extra[0]}' field")
        return self


def inventory_path() -> Path:
    """The shipped inventory file."""
    return Path(str(resources.files("masforge.seeds"))) / "inventory" / "components.yaml"


def load_inventory(path: str | os.PathLike[str] | None = None) -> list[Component]:
    """The component inventory (the shipped one by default) as validated :class:`Component` s.

    Any problem is a one-line :class:`GenomeError` naming the file and the entry, e.g.
    ``components.yaml: components[3] 'critic': agent.tools: unknown tool 'browser' (known: ...)``.
    """
    from masforge.sandbox.tools import tool_names

    p = Path(path) if path is not None else inventory_path()
    try:
        data = yaml.safe_load(p.read_text(encoding="utf-8"))
    except OSError as exc:
        raise GenomeError(f"{p}: cannot read the inventory ({exc.strerror or exc})") from None
    except yaml.YAMLError as exc:
        raise GenomeError(format_yaml_error(p, exc)) from None
    if not isinstance(data, dict) or not isinstance(data.get("components"), list):
        raise GenomeError(f"{p}: an inventory is a mapping with a list under 'components'")
    known_tools = set(tool_names())
    components: list[Component] = []
    seen: set[str] = set()
    for i, entry in enumerate(data["components"]):
        name = f"'{entry['id']}'" if isinstance(entry, dict) and "id" in entry else "(no id)"
        where = f"{p}: components[{i}] {name}"
        if not isinstance(entry, dict):
            raise GenomeError(f"{where}: a component is a mapping (id, kind, description, cost, ...)")
        try:
            comp = Component.model_validate(entry)
        except ValidationError as exc:
            detail = format_validation_error(exc)
            detail = detail.removeprefix("genome: ")  # a whole-entry problem has no field to name
            raise GenomeError(f"{where}: {detail}") from None
        if comp.id in seen:
            raise GenomeError(f"{where}: duplicate component id '{comp.id}'")
        seen.add(comp.id)
        wanted = [comp.tool] if comp.tool else (comp.agent.tools if comp.agent else [])
        for tool in wanted:
            if tool not in known_tools:
                field = "tool" if comp.tool else "agent.tools"
                raise GenomeError(f"{where}: {field}: unknown tool '{tool}' (known: {', '.join(sorted(known_tools))})")
        components.append(comp)
    return components
