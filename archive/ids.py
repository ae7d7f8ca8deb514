"""Candidate ids as people give them: a genome hash, or a unique prefix of one. Checked and resolved with the same
one-line errors by every archive (the git archive's index and the in-memory archive)."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

from masforge.errors import ArchiveError
from masforge.genome.schema import Genome

HEX = re.compile(r"^[0-9a-f]{1,64}$")


def normalised(id_or_prefix: str) -> str:
    """The id or prefix as stored (lower-case hex); a one-line ArchiveError if it cannot be one."""
    text = str(id_or_prefix).strip().lower()
    if not HEX.match(text):
        raise ArchiveError(f"invalid candidate id '{id_or_prefix}' (a genome id is hex digits 0-9a-f)")
    return text


def unresolved(text: str, matches: int) -> ArchiveError:
    """The error for a prefix that matches no candidate, or more than one (`matches` of them)."""
    if not matches:
        return ArchiveError(f"unknown candidate id '{text}' (no genome hash starts with it); "
                            "see `masforge archive list`")
    return ArchiveError(f"ambiguous id '{text}': matches {matches} candidates, give more digits")


def unknown_candidate(gid: str) -> ArchiveError:
    """The error for a full id that names no stored candidate."""
    return ArchiveError(f"unknown candidate id '{gid}' (no genome hash starts with it); add it first")


def parent_ids(gid: str, parents: Sequence[str | Genome], known: Callable[[str], bool],
               resolve: Callable[[str], str]) -> list[str]:
    """The stored ids of candidate `gid`'s parents, in order and each once: a genome must be stored already, an id
    or prefix must name a stored candidate (`resolve`), and none may be `gid` itself (one ArchiveError)."""
    found: list[str] = []
    for parent in parents:
        if isinstance(parent, Genome):
            pid = parent.id
            if not known(pid):
                raise ArchiveError(f"parent {pid[:12]} ({parent.name}) is not in the archive; add it first")
        else:
            pid = resolve(parent)
        if pid == gid:
            raise ArchiveError(f"genome {gid[:12]} cannot be its own parent")
        if pid not in found:
            found.append(pid)
    return found
