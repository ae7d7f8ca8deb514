"""Reference systems at the end of a search: the best new system against systems the user names, paired on the same
held-out examples (``--reference``).

A reference is a shipped seed's name, a genome file, or ``library``: every shipped seed that runs on the task. The
library's seeds are first raced on the selection set as seeds are (each against the best of them so far, dropped as
soon as the paired test says it is worse), and only the best :data:`LIBRARY_HELD_OUT` are re-scored on the held-out
split: scoring twenty seeds on it would cost more than the search.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from masforge.archive.protocol import ArchiveLike
from masforge.errors import GenomeError, MasforgeError, SandboxUnavailable
from masforge.evaluators.compare import Comparison, Side, compare, too_few_words
from masforge.evaluators.racing import RaceSettings
from masforge.evaluators.runner import EvalReport, Evaluator, input_mapping
from masforge.evaluators.tasks import Task
from masforge.genome.schema import Genome
from masforge.genome.validate import problems
from masforge.search import events as ev
from masforge.search.pipeline import stored_by_failing_provider

Announce = Callable[[Genome, Evaluator], Callable[[int, int, EvalReport], None]]
"""Says an evaluation starts and returns its progress callback (the search pipeline's ``announce``)."""

LIBRARY = "library"
"""The reference name meaning every shipped seed that runs on the task."""
LIBRARY_HELD_OUT = 2
"""Library seeds re-scored on the held-out split: the best of the race on the selection set."""


def given_references(names: Sequence[str]) -> list[Genome]:
    """The genomes ``names`` give by seed name or file (``library`` aside); a bad name is a one-line error."""
    from masforge.seeds import resolve_genome

    return [resolve_genome(n, also=f"'{LIBRARY}' (every shipped seed)") for n in names if n.strip() != LIBRARY]


def check_fits(genomes: Sequence[Genome], task: Task) -> None:
    """Refuse, in one line, a reference whose inputs the task cannot give (before anything is paid)."""
    for g in genomes:
        try:
            input_mapping(g, task)
        except GenomeError as exc:
            raise GenomeError(f"reference {g.name}: {exc}") from None


def library_seeds(task: Task) -> list[Genome]:
    """Every shipped seed that validates and reads inputs the task gives, in the library's order."""
    from masforge.seeds import load_seeds

    out = []
    for g in load_seeds():
        try:
            input_mapping(g, task)
        except GenomeError:
            continue
        if not problems(g):
            out.append(g)
    return out


@dataclass
class Raced:
    """A library seed on the selection set: its score over the examples it was scored on."""

    name: str
    genome_id: str
    score: float
    n: int
    dropped: bool
    """The race stopped it: the paired test said it is worse than a seed before it."""
    scores: dict[str, float] = field(default_factory=dict, repr=False)


@dataclass
class Check:
    """The best new system (B) against one reference (A) on the same held-out examples."""

    name: str
    genome_id: str
    source: str
    """``given`` (named by the user) or ``library`` (the best of the library's race)."""
    comparison: Comparison | None
    note: str = ""
    """Why there is no comparison, or what cut it short."""

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name, "id": self.genome_id, "source": self.source, "note": self.note}
        c = self.comparison
        if c is not None:
            out |= {"n": c.n, "found_score": c.mean(c.b), "reference_score": c.mean(c.a), "diff": c.diff,
                    "ci_low": c.ci_low, "ci_high": c.ci_high, "wins": c.wins, "losses": c.losses,
                    "outcome": c.outcome, "verdict": verdict_words(c)}
        return out


def verdict_words(c: Comparison) -> str:
    """What the paired difference supports, the found system against the reference."""
    return {"better": f"better than {c.a.name}", "worse": f"worse than {c.a.name}",
            "no_difference": f"not shown to differ from {c.a.name}",
            "too_few": too_few_words(c.n, "--test-limit", c.a.split, c.split_size)}[c.outcome]


@dataclass
class References:
    """What ``--reference`` found: one check per reference, and the library's race when ``library`` was named."""

    found: str | None
    found_id: str | None
    checks: list[Check] = field(default_factory=list)
    library: list[Raced] | None = None
    """The library's seeds as raced on the selection set, best first (None: ``library`` was not named)."""
    selection: str = ""
    """The selection set the library was raced on, and its size."""
    note: str = ""

    def to_dict(self) -> dict[str, Any]:
        library = None if self.library is None else {
            "selection": self.selection,
            "raced": [{"name": r.name, "id": r.genome_id, "score": r.score, "n": r.n, "dropped": r.dropped}
                      for r in self.library],
            "held_out": [c.name for c in self.checks if c.source == LIBRARY]}
        return {"found": self.found, "found_id": self.found_id, "note": self.note,
                "checks": [c.to_dict() for c in self.checks], "library": library}

    def lines(self) -> list[str]:
        """The result as plain lines: the library's race (which seeds went on), then one line per reference."""
        out = []
        if self.library is not None:
            dropped = sum(r.dropped for r in self.library)
            chosen = {c.genome_id for c in self.checks if c.source == LIBRARY}
            best = ", ".join(f"{r.name} {r.score:.3f}" for r in self.library if r.genome_id in chosen)
            out.append(f"library: {len(self.library)} shipped seeds raced on {self.selection}, {dropped} dropped by "
                       f"the race; the best, re-scored on the held-out split as references: {best or 'none'}")
        if self.note:
            out.append(f"references: {self.note}")
        for c in self.checks:
            cmp = c.comparison
            if cmp is None:
                out.append(f"reference {c.name}: {c.note}")
                continue
            cut = f" ({c.note})" if c.note else ""
            out.append(f"reference {c.name}: best found {self.found} {cmp.mean(cmp.b):.3f} vs {cmp.mean(cmp.a):.3f} "
                       f"on the same {cmp.n} held-out examples{cut}, difference {cmp.diff:+.3f} "
                       f"[{cmp.ci_low:+.3f}, {cmp.ci_high:+.3f}] (paired 95% CI), won {cmp.wins}, lost "
                       f"{cmp.losses}: {verdict_words(cmp)}")
        return out


def race_library(seeds: Sequence[Genome], selection: Evaluator, archive: ArchiveLike, race: RaceSettings | None,
                 announce: Announce | None = None) -> list[Raced]:
    """Score the library's seeds on the selection set, best first. A seed's complete stored result is read back (the
    run's own seeds have one); the others are raced against the best so far (answers come from the answer cache
    where the search asked the same), each evaluation said by ``announce`` (which returns its progress callback). A
    budget stop ends the race where it is; a seed that cannot run here is left out."""
    planned = len(selection.examples)
    known: list[Raced] = []
    todo: list[Genome] = []
    for g in seeds:
        prev = archive.get_result(g.id, selection.task.name, selection.split, selection.lm_key)
        if prev is not None and prev.n == planned and not stored_by_failing_provider(prev):
            known.append(Raced(g.name, g.id, prev.score, prev.n, False, dict(prev.example_scores)))
        else:
            todo.append(g)
    raced = sorted(known, key=lambda r: -r.score)
    for g in todo:
        best = next((r for r in raced if not r.dropped), None)
        against = race.against(best.scores, best.name) if race is not None and best is not None else None
        try:
            rep = selection.evaluate(g, race=against, progress=announce(g, selection) if announce else None)
        except (GenomeError, SandboxUnavailable):
            continue  # a seed that cannot run here (a sandbox layer it needs is missing) is no reference
        if rep.stopped or rep.incomplete:
            break  # the budget is spent (or the provider failed): the seeds left are not raced
        raced.append(Raced(g.name, g.id, rep.score, rep.n, rep.pruned, rep.example_scores()))
        raced.sort(key=lambda r: (r.dropped, -r.score))
    return raced


def check_references(given: Sequence[Genome], library: Sequence[Genome] | None, found: Side | None,
                     held_out: Callable[[Genome], Side], selection: Evaluator, archive: ArchiveLike,
                     race: RaceSettings | None, emit: Callable[[ev.Event], None],
                     announce: Announce | None = None) -> References:
    """The best new system (``found``, its held-out side) against each reference: those ``given``, then the best of
    the ``library`` (None: not asked for) by the race on the selection set. ``held_out(genome)`` scores a reference
    on the found system's held-out examples (or reads its score back)."""
    if found is None:
        return References(None, None, note="no new system was re-scored on the held-out split, so there is nothing "
                                           "to compare with the references")
    result = References(found.name, found.genome_id)
    refs = [(g, "given") for g in given]
    if library is not None:
        emit(ev.Notice(text=f"racing the {len(library)} shipped seeds that run on {selection.task.name} on the "
                            "selection set, to find the library's best as references", warning=False))
        result.library = race_library(library, selection, archive, race, announce)
        result.selection = f"{selection.split} ({len(selection.examples)} examples)"
        ids = {g.id for g in given}
        by_id = {g.id: g for g in library}
        best = [by_id[r.genome_id] for r in result.library if not r.dropped and r.genome_id not in ids]
        refs += [(g, LIBRARY) for g in best[:LIBRARY_HELD_OUT]]
    for g, source in refs:
        try:
            side = held_out(g)
            cmp = compare(side, found)
        except MasforgeError as exc:
            result.checks.append(Check(g.name, g.id, source, None, f"not compared: {exc}"))
            continue
        note = f"the reference was cut short: {side.planned - len(side.scores)} examples not scored" \
            if len(side.scores) < side.planned else ""
        result.checks.append(Check(g.name, g.id, source, cmp, note))
    return result
