"""What a candidate will cost before it runs: a dry run on the answer cache.

The answer cache is indexed by prompt and sample number, so a candidate that only changes how existing answers are
picked, voted or routed needs no new LM call. A *cost probe* runs the candidate on the selection examples with a
client that answers from the cache or not at all: an example whose calls are all cached is scored exactly as a real
evaluation would score it; an example that reaches a missing answer stops there and counts as needing LM calls. A
candidate with no miss is *free*. Strategies try free and cheap candidates before expensive ones
(:func:`cheapest_first`), since on a small machine LM calls are the scarce thing.
"""

from __future__ import annotations

from dataclasses import dataclass

from masforge.errors import MasforgeError
from masforge.evaluators.runner import Evaluator
from masforge.genome.schema import Genome
from masforge.lm.client import LMClient
from masforge.lm.ledger import Ledger


@dataclass(frozen=True)
class Cost:
    """A probe's finding: answers already cached, answers missing (at least one per example that met a miss:
    what comes after a missing answer depends on it) and examples that met a miss."""

    cached: int
    missing: int
    examples_missing: int

    @property
    def free(self) -> bool:
        return self.missing == 0


class CostProbe:
    """Dry runs of genomes on ``evaluator``'s examples, answered from its client's answer cache only."""

    def __init__(self, evaluator: Evaluator) -> None:
        self.evaluator = evaluator
        self.known: dict[str, Cost] = {}
        """Costs found, by genome id (a free answer stays free: answers are never dropped from the cache)."""

    def usable(self) -> bool:
        """Whether probing can tell anything: the run keeps an answer cache and evaluates in this process."""
        return self.evaluator.client.cache is not None and self.evaluator.executor.name == "local"

    def cost(self, genome: Genome) -> Cost | None:
        """What ``genome`` still needs on the selection examples (None: it cannot be probed, e.g. it does not
        compile; the real evaluation will say why)."""
        known = self.known.get(genome.id)
        if known is not None and known.free:
            return known
        source = self.evaluator.client
        client = LMClient(source.lms, ledger=Ledger(), cache=source.cache, responder=source.responder,
                          seed=source.seed, cache_only=True)
        ev = self.evaluator
        probe = Evaluator(ev.task, client, split=ev.split, limit=len(ev.examples), concurrency=ev.concurrency,
                          example_timeout_s=ev.example_timeout_s, max_unscored=0.999)
        try:
            report = probe.evaluate(genome)
        except MasforgeError:
            return None
        found = Cost(cached=report.cache_hits, missing=client.misses,
                     examples_missing=sum(1 for e in report.examples if e.unscored))
        self.known[genome.id] = found
        return found


def cheapest_first(proposals: list[Genome], probe: CostProbe, replayed: dict[str, int]) -> list[int]:
    """The order to try ``proposals`` in (indices): those a replayed run admitted first, in its order (the cache
    holds their answers now, so probing them again would not tell the order the run chose); then free ones, then
    by missing answers, ties in the order proposed; a proposal that cannot be probed last."""

    def key(i: int) -> tuple[int, float, int]:
        genome = proposals[i]
        if genome.id in replayed:
            return (0, replayed[genome.id], i)
        cost = probe.cost(genome)
        return (1, float("inf") if cost is None else cost.missing, i)

    return sorted(range(len(proposals)), key=key)
