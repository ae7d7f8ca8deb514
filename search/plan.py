"""What a search will do, said before anything is spent: the real number of examples each candidate and each
finalist is scored on (after the task's split, a limit larger than the split capped and said so), how a file of
the user's own data was split, the budget, warnings when the search cannot do what it is asked (no room for new
systems, a held-out test too small for a verdict), and about how long it will take."""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass, replace

from masforge.evaluators.compare import MIN_VERDICT_EXAMPLES, more_examples_advice
from masforge.evaluators.estimate import Estimate, calls_per_example, estimate, sent_calls
from masforge.evaluators.splits import split_parts
from masforge.evaluators.tasks import Task
from masforge.genome.schema import Genome
from masforge.lm.config import LMConfig
from masforge.search.budget import MaxCandidates, SearchBudget
from masforge.search.config import RunConfig
from masforge.search.strategies.base import Strategy, rewritten

UNLIMITED_NEW_SYSTEMS = 20
"""New systems the estimate prices when no candidate limit is set."""
SKETCHED_SYSTEMS = 160
"""Systems the strategies sketch, LM-free, for the estimate to average over (in runs of the search's new systems,
from a fixed random seed; at least 8 runs): a random edit's cost varies a lot, so a few runs would not do."""


@dataclass(frozen=True)
class SearchPlan:
    """The counts a search runs with."""

    examples: int
    """Examples of the search split each candidate is scored on."""
    split_size: int
    test_examples: int
    """Held-out examples each finalist is re-scored on (0: no re-scoring)."""
    test_size: int
    seeds: int
    candidates: int | None
    test_top_k: int
    """Finalists re-scored on the held-out split besides the best seed and the best new system (0: none)."""
    code: bool = False
    """The task's answers are code (its gates have something to check)."""
    seed: int = 0
    """The search's random seed (what its strategies draw from)."""
    race_first: int | None = None
    """Examples in a race's first batch, when a race may drop a system after it (None: every system is scored on
    all ``examples``)."""

    @property
    def new_systems(self) -> int | None:
        """Candidates left for new systems after the seeds (None: no candidate limit)."""
        return None if self.candidates is None else max(0, self.candidates - self.seeds)


def make_plan(cfg: RunConfig, task: Task, seeds: Sequence[Genome]) -> SearchPlan:
    """The counts of ``cfg`` on ``task`` (its split sizes read now)."""
    sizes = task.sizes()
    split_size = sum(sizes.get(part, 0) for part in split_parts(cfg.split))  # a union: validation+train
    test_size = sum(sizes.get(part, 0) for part in split_parts(cfg.test_split))
    examples = split_size if cfg.limit is None else min(cfg.limit, split_size)
    test = 0 if not cfg.test_top_k else test_size if cfg.test_limit is None else min(cfg.test_limit, test_size)
    race_first = cfg.race_first if cfg.race and examples > cfg.race_first else None
    return SearchPlan(examples=examples, split_size=split_size, test_examples=test, test_size=test_size,
                      seeds=len(seeds), candidates=cfg.budget.max_candidates,
                      test_top_k=cfg.test_top_k, code=task.metric_name == "code", seed=cfg.seed,
                      race_first=race_first)


def _capped(flag: str, asked: int | None, got: int, where: str) -> str:
    verb = "hold" if where.endswith(" splits") else "holds"
    return f" ({flag} {asked} capped: {where} {verb} {got})" if asked is not None and asked > got else ""


def _split_words(split: str) -> str:
    """``the validation split`` or, for a union, ``the validation and train splits``."""
    parts = split_parts(split)
    return f"the {split} split" if len(parts) == 1 else f"the {' and '.join(parts)} splits"


def plan_lines(cfg: RunConfig, task: Task, plan: SearchPlan, search_budget: SearchBudget,
               lms: dict[str, LMConfig], seeds: Sequence[Genome],
               pipeline: Sequence[Strategy] = ()) -> tuple[list[str], list[str]]:
    """(lines, warnings) a search prints before it starts."""
    lines: list[str] = []
    if task.split_note:
        lines.append(task.split_note)
    lines.append(f"each candidate is scored on {plan.examples} {cfg.split} examples of {task.name}"
                 + _capped("--limit", cfg.limit, plan.split_size, _split_words(cfg.split)))
    b = cfg.budget
    text = f"budget: {b.describe()}"
    held = (f"{plan.test_examples} held-out examples each"
            + _capped("--test-limit", cfg.test_limit, plan.test_size, "the test split"))
    if b.has_spend_limit and b.test_share and cfg.test_top_k:
        text += (f"; the search stops at {search_budget.spending().describe()}, the rest is for re-scoring the "
                 f"finalists on {held} (budget.test_share {b.test_share:g})")
    elif cfg.test_top_k:
        text += f"; then the finalists are re-scored on {held}"
    lines.append(text)
    lines.append(f"time: {search_estimate(plan, lms, seeds, cfg.concurrency, pipeline).words()}; a busy machine "
                 "is slower")
    warnings: list[str] = []
    if plan.new_systems == 0:
        flag = MaxCandidates.declared.short or MaxCandidates.flag
        warnings.append(f"{flag} {plan.candidates} leaves no room for new systems: the {plan.seeds} seeds use it up, "
                        f"so nothing new is proposed; raise {flag} above {plan.seeds} or give fewer --seeds")
    if cfg.test_top_k and plan.test_examples < MIN_VERDICT_EXAMPLES:
        warnings.append(f"{plan.test_examples} held-out examples cannot tell the found system from the seeds "
                        f"(a verdict needs about {MIN_VERDICT_EXAMPLES}): "
                        f"{more_examples_advice('--test-limit', cfg.test_split, plan.test_size)}")
    return lines, warnings


def search_estimate(plan: SearchPlan, lms: dict[str, LMConfig], seeds: Sequence[Genome], concurrency: int,
                    pipeline: Sequence[Strategy] = ()) -> Estimate:
    """LM calls the whole search sends and the time they take, counted as its strategies will ask for them: each
    seed's calls per example (copies, rounds, gates) on the search split; each new system as the strategy that
    makes it would make it (:func:`new_system_calls`), plus that strategy's meta-agent calls; then the finalists on
    the held-out split (the best seed, and the new systems the top ones are among). A call whose prompt a system
    before it asked on the same examples is answered by the answer cache and not counted. With a race, the fewest
    calls are those where every system after the first is dropped after the race's first batch."""
    code = plan.code
    seed_sent = sent_calls(seeds, code=code) or [1.0]
    seed_asked = sum(calls_per_example(g, code=code) for g in seeds) / len(seeds) if seeds else 1.0
    new = plan.new_systems if plan.new_systems is not None else UNLIMITED_NEW_SYSTEMS
    strategies = _strategy_of_each(new, pipeline)
    new_sent, beyond_seeds = new_system_calls(strategies, seeds, code=code, seed=plan.seed)
    # the top k hold the best system, a seed or a new one: the best of the other kind makes one more finalist; the
    # first scored asks every call, the others only what it did not
    finalists = min(plan.test_top_k + (1 if new and seeds else 0), len(seeds) + new) if plan.test_examples else 0
    others = beyond_seeds if new else sum(seed_sent[1:]) / max(len(seed_sent) - 1, 1)
    held_out = (seed_asked + (finalists - 1) * others) * plan.test_examples if finalists else 0.0
    search_calls = (sum(seed_sent) + sum(new_sent)) * plan.examples
    fewest = None
    if plan.race_first is not None:  # every system but the first seed dropped after the race's first batch
        dropped = sum(seed_sent[1:]) + sum(new_sent)
        fewest = search_calls - dropped * (plan.examples - plan.race_first) + held_out
    meta_s = estimate([], 0, lms["meta"], 1).per_call_s
    base = estimate([], 0, lms["worker"], concurrency)
    return replace(base.more(calls=search_calls + held_out,
                             serial_calls=sum(s.meta_calls_per_system() for s in strategies if s), serial_s=meta_s),
                   fewest_calls=fewest)


def _strategy_of_each(new: int, pipeline: Sequence[Strategy]) -> list[Strategy | None]:
    """The strategy that makes each of ``new`` systems: each stage of the pipeline but the last gets its share of
    what is left, as the engine runs them (None: no pipeline given)."""
    if not pipeline:
        return [None] * new
    out: list[Strategy | None] = []
    for i, strategy in enumerate(pipeline):
        left = new - len(out)
        count = left if i == len(pipeline) - 1 else max(1, left // (len(pipeline) - i))
        out += [strategy] * min(count, left)
    return out


def new_system_calls(strategies: Sequence[Strategy | None], seeds: Sequence[Genome], *, code: bool = False,
                     seed: int = 0) -> tuple[list[float], float]:
    """(LM calls per example each new system sends, in order; what a new system sends beyond the seeds' prompts),
    from runs in which each strategy sketches its next system from the seeds and the systems sketched before (its
    own LM-free edits; an LM's system is priced like its parent, with prompts of its own). A pipeline of strategies
    whose sketch is exact is sketched once, from the search's own random seed: those are the systems it will
    propose. Others are averaged over runs (:data:`SKETCHED_SYSTEMS`)."""
    if not seeds or not strategies:
        return [1.0] * len(strategies), 1.0
    exact = all(s is not None and s.sketch_exact for s in strategies)
    runs = 1 if exact else max(8, SKETCHED_SYSTEMS // len(strategies))
    seed_prompts: set[str] = set()
    sent_calls(seeds, code=code, seen=seed_prompts)
    totals, beyond = [0.0] * len(strategies), 0.0
    rng = random.Random(seed)
    for _ in range(runs):
        population = list(seeds)
        for strategy in strategies:
            population.append(strategy.sketch(population, rng) if strategy is not None else
                              rewritten(rng.choice(population), rng))
        children = population[len(seeds):]
        sent = sent_calls(children, code=code, seen=set(seed_prompts))
        totals = [t + c for t, c in zip(totals, sent, strict=True)]
        beyond += sum(sent_calls([c], code=code, seen=set(seed_prompts))[0] for c in children) / len(children)
    return [t / runs for t in totals], beyond / runs
