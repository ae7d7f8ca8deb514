"""What a candidate will cost before it runs: a dry run on the answer cache.

The answer cache is indexed by prompt and sample number, so a candidate that only changes how existing answers are
picked, voted or routed needs no new LM call. A *cost probe* runs the candidate on the selection examples with a
client that answers from the cache or not at all: an example whose calls are all cached is scored exactly as a real
evaluation would score it; an example that reaches a missing answer stops there and counts as needing LM calls. A
candidate with no miss is *free*. Strategies try free and cheap candidates before expensive ones
(:func:`cheapest_first`), since on a small machine LM calls are the scarce thing.
"""

from __future__ import annotations

import json
from collections.abc import Container
from dataclasses import asdict, dataclass
from pathlib import Path

from masforge.errors import MasforgeError
from masforge.evaluators.runner import Evaluator
from masforge.genome.schema import Genome
from masforge.lm.client import LMClient
from masforge.lm.ledger import Ledger
from masforge.search.proposal import Proposal

COSTS_FILE = "costs.jsonl"
"""The run folder's record of the costs its probes found."""


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

    def __init__(self, evaluator: Evaluator, path: Path | None = None) -> None:
        self.evaluator = evaluator
        self.path = path
        """Where the costs found are kept (one JSON line each), so a resumed run decides on the costs the stopped
        run saw: probed again, a proposal whose answers were paid for later in the run would look free."""
        self.known: dict[str, Cost] = {}
        """Costs found, by genome id: each genome is probed once in a run."""
        if path is not None and path.is_file():
            for line in path.read_text(encoding="utf-8").splitlines():
                try:
                    row = json.loads(line)
                    self.known[str(row["id"])] = Cost(int(row["cached"]), int(row["missing"]),
                                                      int(row["examples_missing"]))
                except (ValueError, KeyError, TypeError):
                    continue  # a line cut by a kill: that genome is probed again

    def usable(self) -> bool:
        """Whether probing can tell anything: the run keeps an answer cache and evaluates in this process."""
        return self.evaluator.client.cache is not None and self.evaluator.executor.name == "local"

    def cost(self, genome: Genome) -> Cost | None:
        """What ``genome`` still needs on the selection examples (None: it cannot be probed, e.g. it does not
        compile; the real evaluation will say why)."""
        known = self.known.get(genome.id)
        if known is not None:
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
        if self.path is not None:
            with self.path.open("a", encoding="utf-8") as out:
                out.write(json.dumps({"id": genome.id, **asdict(found)}) + "\n")
        return found


def cheapest_first(proposals: list[Proposal], probe: CostProbe, held: Container[str] = ()) -> list[Proposal]:
    """``proposals`` in the order to try them: free ones (every answer already in the answer cache) first, then by
    the answers they still need, ties in the order proposed, one that cannot be probed last. Proposals the run
    already ``held`` (genome ids) come first in their order, and all keep their order when the run keeps no cache."""
    if len(proposals) < 2 or not probe.usable():
        return proposals
    fresh = [p for p in proposals if p.genome.id not in held]
    if len(fresh) < 2:
        return proposals

    def key(i: int) -> tuple[float, int]:
        cost = probe.cost(fresh[i].genome)
        return (float("inf") if cost is None else cost.missing, i)

    known = [p for p in proposals if p.genome.id in held]
    return known + [fresh[i] for i in sorted(range(len(fresh)), key=key)]
