"""Canonical identity of a genome: the same system gets the same id.

Only behaviour-relevant fields enter the hash. ``name``, ``description``, ``source`` and ``metadata`` are
documentation/lineage; key order and surrounding whitespace never matter; duplicate edges count once and
edge order is irrelevant (edges are a set). Agent order *is* kept: it breaks ties in execution order.
A majority vote over a single answer (one agent, one copy, feeds the output) is that answer, so it hashes as
``last``; rounds and message passing only act on cycles, so a system without one hashes with the defaults:
the duplicate check then sees such variants as the same system. Conditional edges count (their keys in one
spelling, ``"a -> b"``); a genome without any hashes as it did before they existed.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any, Protocol

from masforge.genome.cycles import is_cyclic, strongly_connected
from masforge.genome.signature import parse_signature


class GenomeLike(Protocol):
    """What hashing needs of a :class:`masforge.genome.schema.Genome` (which hashes itself with this module,
    so this module does not import it)."""

    code: str | None

    def model_dump(self, *, mode: str, exclude: set[str]) -> dict[str, Any]: ...

_DOC_FIELDS = {"name", "description", "source", "metadata"}


def _normalise(value: Any) -> Any:
    if isinstance(value, str):
        return value.strip()
    if isinstance(value, dict):
        return {k: _normalise(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_normalise(v) for v in value]
    return value


def _canonical_signature(text: str) -> str:
    """``"q,messages->answer: str"`` and ``"q, messages -> answer"`` are the same signature."""
    try:
        return str(parse_signature(text))
    except ValueError:  # invalid genomes still get an id (validation reports the problem)
        return " ".join(text.split())


def _has_cycle(agents: list[str], edges: list[tuple[str, str]]) -> bool:
    pairs = set(edges)
    return any(is_cyclic(c, pairs) for c in strongly_connected(agents, pairs))


def canonical_dict(genome: GenomeLike) -> dict[str, Any]:
    """The behaviour-relevant content of ``genome`` in a canonical form (JSON-ready)."""
    data = genome.model_dump(mode="json", exclude=_DOC_FIELDS | {"portfolio"})
    data = _normalise(data)
    if data["kind"] == "portfolio":
        return _portfolio_dict(genome, data)
    if data["kind"] == "code":
        # A code genome is its source; config fields are ignored by the runtime.
        code = "\n".join(line.rstrip() for line in (genome.code or "").strip().splitlines())
        return {"kind": "code", "inputs": data["inputs"], "outputs": data["outputs"], "code": code}
    data.pop("code", None)
    topo = data["topology"]
    topo["edges"] = [[a, b] for a, b in sorted({(a, b) for a, b in topo["edges"]})]
    if topo["aggregation"] != "judge":
        topo["judge"] = None
    if topo.get("conditions"):
        topo["conditions"] = {" -> ".join(p.strip() for p in k.split("->")): v for k, v in topo["conditions"].items()}
    else:
        topo.pop("conditions", None)  # no conditional edge: ids made before conditions existed stay the same
    if not _has_cycle([a["id"] for a in data["agents"]], [(a, b) for a, b in topo["edges"]]):
        topo["rounds"], topo["message_passing"] = 1, "sequential"
    if topo["aggregation"] in ("majority_vote", "run_examples"):
        voters = sum(a.get("copies", 1) for a in data["agents"] if [a["id"], "output"] in topo["edges"])
        if voters == 1:
            topo["aggregation"] = "last"
    data["components"] = sorted(set(data["components"]))
    for agent in data["agents"]:
        agent["tools"] = sorted(set(agent["tools"]))
        if agent.get("adapter") == "auto":
            del agent["adapter"]  # the default leaves ids made before adapters existed unchanged
        if agent.get("unchecked") == "pass":
            del agent["unchecked"]  # likewise for ids made before the unchecked verdict existed
        if agent.get("signature"):
            agent["signature"] = _canonical_signature(agent["signature"])
    return data


def _portfolio_dict(genome: GenomeLike, data: dict[str, Any]) -> dict[str, Any]:
    """A portfolio is its members (each in its own canonical form, in order: the router's classes index them), its
    router's numbers (a refitted router is another system) and its escalation order."""
    body = getattr(genome, "portfolio", None)
    if body is None:  # invalid (validation says so), but it still gets an id
        return {"kind": "portfolio", "inputs": data["inputs"], "outputs": data["outputs"], "portfolio": None}
    return {"kind": "portfolio", "inputs": data["inputs"], "outputs": data["outputs"],
            "members": [canonical_dict(m) for m in body.members],
            "router": body.router.model_dump(mode="json"), "escalation": list(body.escalation)}


def canonical_json(genome: GenomeLike) -> str:
    """Canonical JSON text (sorted keys, no whitespace) that :func:`genome_hash` digests."""
    return json.dumps(canonical_dict(genome), sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def genome_hash(genome: GenomeLike) -> str:
    """sha256 hex digest of the canonical form: the genome's id."""
    return hashlib.sha256(canonical_json(genome).encode("utf-8")).hexdigest()


def _unpinned(data: dict[str, Any], auto_adapters: Mapping[str, str]) -> dict[str, Any]:
    """``data`` (a canonical dict) with each agent's adapter dropped where it is the one ``auto`` resolves to for
    the agent's LM alias (an alias not in ``auto_adapters`` is the ``worker``, as the LM client resolves it)."""
    for agent in data["agents"]:
        resolved = auto_adapters.get(agent.get("lm", "worker"), auto_adapters.get("worker"))
        if "adapter" in agent and agent["adapter"] == resolved:
            del agent["adapter"]
    return data


def _renamed(data: dict[str, Any]) -> dict[str, Any]:
    """``data`` (a canonical dict) with its agents called ``a1``, ``a2``, ... in the order they are listed (the order
    is behaviour: it breaks ties), everywhere an agent is named: edges, conditions and the judge."""
    names = {a["id"]: f"a{i}" for i, a in enumerate(data["agents"], 1)}

    def rename(node: str) -> str:
        return names.get(node, node)

    for agent in data["agents"]:
        agent["id"] = rename(agent["id"])
    topo = data["topology"]
    topo["edges"] = sorted([rename(a), rename(b)] for a, b in topo["edges"])
    if topo.get("conditions"):
        renamed = {}
        for key, verdict in topo["conditions"].items():
            a, _, b = key.partition(" -> ")
            renamed[f"{rename(a)} -> {rename(b)}"] = verdict
        topo["conditions"] = renamed
    if topo.get("judge"):
        topo["judge"] = rename(topo["judge"])
    return data


def structure_hash(genome: GenomeLike, auto_adapters: Mapping[str, str] | None = None) -> str:
    """The id of ``genome`` up to the names of its agents: two systems that differ only in what their agents are
    called (and in field order, documentation and lineage) have the same structure hash. A search uses it to
    recognise a design it already holds, or a shipped seed rebuilt under other names, before paying for it.

    ``auto_adapters`` (LM alias -> the adapter ``auto`` stands for on the run's LMs, ``worker`` for an alias not
    listed) makes the hash one run's: an agent that names the adapter ``auto`` picks anyway behaves as ``auto``
    there (``plain`` on the embedded model), so it hashes as ``auto``."""
    data = canonical_dict(genome)

    def same_design(config: dict[str, Any]) -> dict[str, Any]:
        return _renamed(_unpinned(config, auto_adapters) if auto_adapters else config)

    if data["kind"] == "config":
        data = same_design(data)
    elif data["kind"] == "portfolio" and data.get("members"):
        data["members"] = [same_design(m) if m["kind"] == "config" else m for m in data["members"]]
    text = json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()
