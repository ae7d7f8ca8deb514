"""A readable structural diff between two genomes: what changed, agent by agent and edge by edge."""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from typing import Any

from masforge.genome.hashing import canonical_dict
from masforge.genome.schema import Agent, Genome
from masforge.text import shorten


@dataclass(frozen=True)
class Change:
    """One difference: ``op`` is ``+`` (added), ``-`` (removed) or ``~`` (changed).

    For long texts and code, ``old``/``new`` are the full values and ``diff`` shows what changed
    (``[-removed words-] {+added words+}`` for text, unified-diff lines for code)."""

    op: str
    path: str
    old: Any = None
    new: Any = None
    diff: str | None = None

    def __str__(self) -> str:
        if self.diff is not None:
            if "\n" not in self.diff:
                return f"~ {self.path}: edit {_shown(self.diff, 400)}"
            lines = self.diff.splitlines()
            shown = lines[:60] + ([f"... ({len(lines) - 60} more diff lines)"] if len(lines) > 60 else [])
            old_n, new_n = (len(str(v).splitlines()) for v in (self.old, self.new))
            return f"~ {self.path}: {old_n} -> {new_n} lines\n" + "\n".join("    " + line for line in shown)
        if self.op == "+":
            return f"+ {self.path}: {_shown(self.new)}"
        if self.op == "-":
            return f"- {self.path}: {_shown(self.old)}"
        return f"~ {self.path}: {_shown(self.old)} -> {_shown(self.new)}"


def _shown(value: Any, limit: int = 80) -> str:
    """A value as a diff line shows it: text as is, anything else as its repr, shortened."""
    return shorten(value if isinstance(value, str) else repr(value), limit)


def _text_change(path: str, old: str, new: str) -> Change:
    if "\n" in old or "\n" in new or len(old) > 80 or len(new) > 80:
        words_old, words_new = old.split(), new.split()
        sm = difflib.SequenceMatcher(a=words_old, b=words_new)
        parts: list[str] = []
        for tag, i1, i2, j1, j2 in sm.get_opcodes():
            if tag in ("delete", "replace"):
                parts.append("[-" + " ".join(words_old[i1:i2]) + "-]")
            if tag in ("insert", "replace"):
                parts.append("{+" + " ".join(words_new[j1:j2]) + "+}")
        return Change("~", path, old, new, diff=" ".join(parts))
    return Change("~", path, old, new)


def _setting(agent: dict[str, Any], field: str) -> Any:
    """An agent's setting in its canonical form, where the canonical form leaves out a default (``adapter: auto``)."""
    if field in agent:
        return agent[field]
    known = Agent.model_fields.get(field)
    return None if known is None else known.default


def diff_genomes(old: Genome, new: Genome) -> list[Change]:
    """Behaviour-relevant changes from ``old`` to ``new`` (empty list: same system), plus renames."""
    changes: list[Change] = []
    if old.name != new.name:
        changes.append(Change("~", "name", old.name, new.name))
    a, b = canonical_dict(old), canonical_dict(new)
    if a["kind"] != b["kind"]:
        return [*changes, Change("~", "kind", a["kind"], b["kind"])]
    for key in ("inputs", "outputs"):
        if a[key] != b[key]:
            changes.append(Change("~", key, a[key], b[key]))
    if a["kind"] == "code":
        if a["code"] != b["code"]:
            diff = difflib.unified_diff(a["code"].splitlines(), b["code"].splitlines(), lineterm="", n=1)
            body = [line for line in diff if not line.startswith(("---", "+++"))]
            changes.append(Change("~", "code", a["code"], b["code"], diff="\n".join(body)))
        return changes
    old_agents = {ag["id"]: ag for ag in a["agents"]}
    new_agents = {ag["id"]: ag for ag in b["agents"]}
    for aid, agent in old_agents.items():
        if aid not in new_agents:
            changes.append(Change("-", f"agent {aid}", old=f"{agent['module']} '{agent['role'] or aid}'"))
    for aid, agent in new_agents.items():
        if aid not in old_agents:
            changes.append(Change("+", f"agent {aid}", new=f"{agent['module']} '{agent['role'] or aid}'"))
            continue
        before = old_agents[aid]
        for field in [*agent, *(f for f in before if f not in agent)]:
            was, now = _setting(before, field), _setting(agent, field)
            if was != now:
                if isinstance(now, str) and isinstance(was, str):
                    changes.append(_text_change(f"agent {aid}.{field}", was, now))
                else:
                    changes.append(Change("~", f"agent {aid}.{field}", was, now))
    if [x["id"] for x in a["agents"] if x["id"] in new_agents] != [
        x["id"] for x in b["agents"] if x["id"] in old_agents
    ]:
        changes.append(Change("~", "agent order", [x["id"] for x in a["agents"]], [x["id"] for x in b["agents"]]))
    old_edges = {tuple(e) for e in a["topology"]["edges"]}
    new_edges = {tuple(e) for e in b["topology"]["edges"]}
    for e in sorted(old_edges - new_edges):
        changes.append(Change("-", "edge", old=f"{e[0]} -> {e[1]}"))
    for e in sorted(new_edges - old_edges):
        changes.append(Change("+", "edge", new=f"{e[0]} -> {e[1]}"))
    old_when, new_when = a["topology"].get("conditions", {}), b["topology"].get("conditions", {})
    for edge in sorted(set(old_when) | set(new_when)):
        if edge not in new_when:
            changes.append(Change("-", "condition", old=f"{edge} if {old_when[edge]}"))
        elif edge not in old_when:
            changes.append(Change("+", "condition", new=f"{edge} if {new_when[edge]}"))
        elif old_when[edge] != new_when[edge]:
            changes.append(Change("~", f"condition {edge}", old_when[edge], new_when[edge]))
    for key in ("rounds", "message_passing", "aggregation", "judge"):
        if a["topology"][key] != b["topology"][key]:
            changes.append(Change("~", f"topology.{key}", a["topology"][key], b["topology"][key]))
    if a["components"] != b["components"]:
        changes.append(Change("~", "components", a["components"], b["components"]))
    return changes


def format_diff(old: Genome, new: Genome) -> str:
    """The diff as text lines (``no behavioural change`` when the ids match)."""
    changes = diff_genomes(old, new)
    if not changes:
        return "no change"
    return "\n".join(str(c) for c in changes)
