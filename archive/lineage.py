"""What the archive's queries return beyond records: the event log's entries and lineage trees for display."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import NamedTuple

from masforge.archive.records import CandidateRecord


@dataclass(frozen=True)
class ArchiveEvent:
    """One entry of the archive's event log (a journal commit on ``main``)."""

    at: str
    kind: str
    genome_id: str
    name: str
    summary: str
    commit: str

    @property
    def short_id(self) -> str:
        """First 12 hex digits of the genome id."""
        return self.genome_id[:12]


@dataclass
class LineageNode:
    """A node of a lineage tree for display; ``repeated`` marks a node already expanded elsewhere (DAG)."""

    record: CandidateRecord
    children: list[LineageNode] = field(default_factory=list)
    repeated: bool = False


class Lineage(NamedTuple):
    """Ancestors and descendants of a candidate (oldest generation first), unpackable as a pair."""

    ancestors: list[CandidateRecord]
    descendants: list[CandidateRecord]

    def ancestor_tree(self, focus: CandidateRecord) -> LineageNode:
        """Tree rooted at ``focus`` whose children are parents (crossovers branch)."""
        known = {r.genome_id: r for r in self.ancestors}
        return _build_tree(focus, lambda rec: [known[p] for p in rec.parents if p in known])

    def descendant_tree(self, focus: CandidateRecord) -> LineageNode:
        """Tree rooted at ``focus`` whose children are the candidates bred from it."""
        children: dict[str, list[CandidateRecord]] = {}
        for rec in self.descendants:
            for p in dict.fromkeys(rec.parents):
                children.setdefault(p, []).append(rec)
        return _build_tree(focus, lambda rec: children.get(rec.genome_id, []))


def _build_tree(focus: CandidateRecord, next_of: Callable[[CandidateRecord], list[CandidateRecord]]) -> LineageNode:
    # Lineage is a DAG (crossovers share ancestors): expand each node only at its first place in display
    # (pre-order) and mark later places as repeated, so the tree stays linear in size. Iterative, because
    # long runs have lineages deeper than Python's recursion limit.
    root = LineageNode(focus)
    seen: set[str] = set()
    stack = [root]
    while stack:
        node = stack.pop()
        if node.record.genome_id in seen:
            node.repeated = True
            continue
        seen.add(node.record.genome_id)
        node.children = [LineageNode(rec) for rec in next_of(node.record)]
        stack.extend(reversed(node.children))
    return root
