"""What the archive writes for people: commit messages that say what changed, and result file names."""

from __future__ import annotations

import hashlib
import re

from masforge.archive.records import CandidateRecord, ResultRecord
from masforge.genome.diff import diff_genomes, format_diff
from masforge.genome.schema import Genome
from masforge.text import shorten

SUBJECT_MAX = 72


def _safe_name(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "-", text).strip("-.")[:48] or "_"


def result_filename(result: ResultRecord) -> str:
    """``<task>__<split>__<hash>.json``; the hash covers task, split and lm_key, so sanitised names never clash."""
    digest = hashlib.sha256("\0".join(result.key).encode("utf-8")).hexdigest()[:12]
    return f"{_safe_name(result.task)}__{_safe_name(result.split)}__{digest}.json"


def change_text(text: str) -> str:
    """Compact one diff line for a subject: ``~ agent a.temperature: 0.7 -> 0.2`` -> ``a.temperature 0.7 -> 0.2``."""
    op, _, rest = text.partition(" ")
    if op == "~":
        rest = re.sub(r"^(agent |topology\.)", "", rest)
        return rest.replace(": text -> ", " edit ", 1).replace(": ", " ", 1)
    return (op + rest).replace(": ", " ", 1)


def add_message(record: CandidateRecord, genome: Genome, first_parent: Genome | None) -> str:
    """Short subject (<= 72 chars) saying what changed, then the full diff and the rationale."""
    child = record.genome_id[:12]
    body: list[str] = []
    if first_parent is None:
        subject = shorten(f"{record.operator} {child}: {genome.name}", SUBJECT_MAX)
        if genome.description:
            body.append(genome.description)
    else:
        # Renames are the least informative change; say what the system does differently first.
        changes = [str(c) for c in sorted(diff_genomes(first_parent, genome), key=lambda c: c.path == "name")]
        change = change_text(changes[0]) if changes else "no change"
        more = f" (+{len(changes) - 1} more)" if len(changes) > 1 else ""
        if len(record.parents) == 1:
            head = f"{record.operator} {record.parents[0][:12]} -> {child}"
        else:
            head = f"{record.operator} {'+'.join(p[:8] for p in record.parents)} -> {record.genome_id[:8]}"
        room = SUBJECT_MAX - len(head) - 2 - len(more)
        subject = f"{head}: {shorten(change, max(room, 12))}{more}"
        subject = shorten(subject, SUBJECT_MAX)
        body.append(f"diff against {first_parent.name} ({record.parents[0][:12]}):\n"
                     + format_diff(first_parent, genome))
    if record.rationale:
        body.append("rationale: " + record.rationale.strip())
    return subject + ("\n\n" + "\n\n".join(body) if body else "")
