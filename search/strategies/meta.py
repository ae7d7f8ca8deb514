"""Meta Agent Search (ADAS, Hu et al. 2024): a meta-agent keeps inventing new systems, each conditioned on
the ever-growing archive of what was tried (its best and its most diverse members, with scores).

Each step: invent one system (config, code, or either), optionally let the meta-agent critique and revise
it (self-reflection) before paying for an evaluation, skip it if the archive already holds it in
substance, and evaluate it. A system that scores 0 because it crashed (e.g. a code genome raising) or
that the runtime refused gets one repair attempt with the error, as in ADAS.
"""

from __future__ import annotations

from typing import Any, Literal

from masforge.genome.validate import problems
from masforge.search.context import Proposal, SearchContext
from masforge.search.events import Skipped
from masforge.search.operators.meta import GenomeKind
from masforge.search.population import Candidate
from masforge.search.strategies.base import bad_option, register
from masforge.search.strategies.meta_driven import MetaAgentStrategy


def crash_error(cand: Candidate) -> str | None:
    """The error of a candidate that scored 0 because it failed to run (not merely answered wrongly)."""
    if cand.score > 0:
        return None
    errors = [str(n.get("error")) for n in cand.failure_notes if n.get("error")]
    return errors[0] if errors else None


@register
class MetaSearch(MetaAgentStrategy):
    """ADAS Meta Agent Search: the meta-agent keeps inventing new systems from the archive's best and most diverse."""

    name = "meta"
    max_idle_steps = 8  # a small meta model often needs a few tries before it proposes something new

    def __init__(self, genome_kind: Literal["config", "code", "mixed"] = "config", repair_crashes: bool = True,
                 **options: Any) -> None:
        """Options of meta.

        Args:
            genome_kind: what the meta-agent writes: config genomes, code genomes (sandboxed Python) or mixed.
            repair_crashes: give a system that crashed or was refused one repair attempt with its error.
        """
        super().__init__(**options)
        if genome_kind not in ("config", "code", "mixed"):
            raise bad_option("genome_kind", f"must be config, code or mixed, not {genome_kind!r}")
        self.genome_kind = genome_kind
        self.repair_crashes = repair_crashes
        self.skipped = 0
        """Proposals dropped as near-duplicates of the archive."""
        self._repairs: list[Proposal] = []
        self._repaired: set[str] = set()

    def _kind(self, ctx: SearchContext) -> GenomeKind:
        if self.genome_kind == "mixed":
            return "code" if ctx.rng.random() < 0.5 else "config"
        return self.genome_kind

    def step(self, ctx: SearchContext) -> list[Proposal]:
        if self._repairs:
            return [self._repairs.pop(0)]
        proposal = self.reflected(self.agent().invent(ctx, kind=self._kind(ctx)), ctx)
        if proposal is None:
            return []
        if ctx.is_near_duplicate(proposal.genome):
            self.skipped += 1
            ctx.emit(Skipped(name=proposal.genome.name, reason="near-duplicate", operator=proposal.operator))
            return []
        return [proposal]

    def observe(self, ctx: SearchContext, proposal: Proposal, candidate: Candidate | None) -> None:
        if not self.repair_crashes or self.meta is None or proposal.operator == "meta_repair":
            return
        if candidate is None:
            # Rejected before or while building: repair with the validation problem when there is one.
            found = problems(proposal.genome)
            error = found[0] if found else "the runtime could not build this system (check signatures and fields)"
            key = proposal.genome.id
        else:
            error = crash_error(candidate)
            key = candidate.id
        if error is None or key in self._repaired:
            return
        self._repaired.add(key)  # one repair attempt per broken system
        fixed = self.meta.repair(proposal.genome, error, ctx, parents=[key])
        if fixed is not None and not ctx.is_near_duplicate(fixed.genome):
            self._repairs.append(fixed)
