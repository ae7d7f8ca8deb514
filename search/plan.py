"""What a search will do, said before anything is spent: the real number of examples each candidate and each
finalist is scored on (after the task's split, a limit larger than the split capped and said so), how a file of
the user's own data was split, the budget, warnings when the search cannot do what it is asked (no room for new
systems, a held-out test too small for a verdict), and about how long it will take."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from masforge.evaluators.compare import MIN_VERDICT_EXAMPLES, more_examples_advice
from masforge.evaluators.estimate import Estimate, calls_per_example, estimate
from masforge.evaluators.splits import split_parts
from masforge.evaluators.tasks import Task
from masforge.genome.schema import Genome
from masforge.lm.budget import Budget
from masforge.lm.config import LMConfig
from masforge.search.config import RunConfig

META_CALLS_PER_PROPOSAL = 2
"""Meta-agent calls per new system, on average (a proposal, sometimes a repair or a reflection)."""


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
    finalists: int

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
    return SearchPlan(examples=examples, split_size=split_size, test_examples=test, test_size=test_size,
                      seeds=len(seeds), candidates=cfg.budget.max_candidates, finalists=cfg.test_top_k + 2)


def _capped(flag: str, asked: int | None, got: int, where: str) -> str:
    verb = "hold" if where.endswith(" splits") else "holds"
    return f" ({flag} {asked} capped: {where} {verb} {got})" if asked is not None and asked > got else ""


def _split_words(split: str) -> str:
    """``the validation split`` or, for a union, ``the validation and train splits``."""
    parts = split_parts(split)
    return f"the {split} split" if len(parts) == 1 else f"the {' and '.join(parts)} splits"


def plan_lines(cfg: RunConfig, task: Task, plan: SearchPlan, search_budget: Budget,
               lms: dict[str, LMConfig], seeds: Sequence[Genome]) -> tuple[list[str], list[str]]:
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
        spend = Budget(**{k: v for k, v in search_budget.model_dump().items()
                          if k in ("max_dollars", "max_tokens", "max_calls", "max_seconds")})
        text += (f"; the search stops at {spend.describe()}, the rest is for re-scoring the finalists on {held} "
                 f"(budget.test_share {b.test_share:g})")
    elif cfg.test_top_k:
        text += f"; then the finalists are re-scored on {held}"
    lines.append(text)
    lines.append(f"time: {search_estimate(plan, lms, seeds, cfg.concurrency).words()}; a busy machine is slower")
    warnings: list[str] = []
    if plan.new_systems == 0:
        warnings.append(f"-n {plan.candidates} leaves no room for new systems: the {plan.seeds} seeds use it up, so "
                        f"nothing new is proposed; raise -n above {plan.seeds} or give fewer --seeds")
    if cfg.test_top_k and plan.test_examples < MIN_VERDICT_EXAMPLES:
        warnings.append(f"{plan.test_examples} held-out examples cannot tell the found system from the seeds "
                        f"(a verdict needs about {MIN_VERDICT_EXAMPLES}): "
                        f"{more_examples_advice('--test-limit', cfg.test_split, plan.test_size)}")
    return lines, warnings


def search_estimate(plan: SearchPlan, lms: dict[str, LMConfig], seeds: Sequence[Genome],
                    concurrency: int) -> Estimate:
    """LM calls and time of the whole search: the seeds and the new systems on the search split (new systems cost
    what the seeds cost on average, plus the meta-agent's calls), then the finalists on the held-out split."""
    worker = lms["worker"]
    per_seed = [calls_per_example(g) for g in seeds] or [1.0]
    mean = sum(per_seed) / len(per_seed)
    new = plan.new_systems if plan.new_systems is not None else 20
    meta_s = estimate([], 0, lms["meta"], 1).per_call_s
    return estimate(seeds, plan.examples, worker, concurrency).more(
        calls=new * mean * plan.examples + plan.finalists * mean * plan.test_examples,
        serial_calls=new * META_CALLS_PER_PROPOSAL, serial_s=meta_s)
