"""A search's estimate counts what its strategies will ask (issue 39: the own-data search printed "76 LM calls" and
used 146; the tour's random search charged meta-agent calls it never makes and estimated 29 minutes for 12.7).
Both searches are run on the fake LM, where every LM call the run asks is counted, over eight random seeds: the
estimate is of what a search asks on average, and one run of a random search may ask three times another's."""

from __future__ import annotations

import statistics
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from masforge.evaluators.estimate import calls_per_example
from masforge.genome.graph import lm_calls_per_example
from masforge.lm.client import LMClient
from masforge.search.config import RunConfig
from masforge.search.engine import build_lms, build_pipeline, build_task, run_search
from masforge.search.plan import make_plan, new_system_calls, search_estimate
from masforge.search.strategies.base import get_strategy
from masforge.seeds import load_seed, resolve_genome

TOUR = {"task": "rg:basic_arithmetic", "seeds": ["io", "cot"], "strategy": "random", "limit": 6,
        "budget": {"max_candidates": 6}}
"""`masforge search --task rg:basic_arithmetic --seeds io,cot --strategy random -n 6 --limit 6`"""


def _own_data(folder: Path) -> dict[str, Any]:
    """`masforge search --task units.jsonl --seeds io,cot -n 4` on a 20-line unit-conversion file."""
    units = [("km", "m", 1000), ("m", "cm", 100), ("cm", "mm", 10), ("kg", "g", 1000), ("hours", "minutes", 60)]
    lines = []
    for i in range(20):
        big, small, factor = units[i % len(units)]
        lines.append(f'{{"question": "Convert {i + 2} {big} to {small}.", "answer": "{(i + 2) * factor}"}}\n')
    data = folder / "units.jsonl"
    data.write_text("".join(lines))
    return {"task": str(data), "seeds": ["io", "cot"], "budget": {"max_candidates": 4}}


@pytest.fixture(autouse=True)
def _private_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MASFORGE_CACHE", str(tmp_path / "cache"))


def _asked(data: dict[str, Any], folder: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Any, list[Counter[str]]]:
    """The estimate of ``data``'s search and, for seeds 0-7, the LM calls each run asked, by alias (an answer from
    the answer cache counts: the strategy asked for it)."""
    asked: Counter[str] = Counter()
    real = LMClient.complete

    def counting(self: LMClient, messages: Any, *, alias: str = "worker", **options: Any) -> Any:
        if not self.cache_only:  # a cost probe's dry run on the answer cache asks no LM
            asked[alias] += 1
        return real(self, messages, alias=alias, **options)

    monkeypatch.setattr(LMClient, "complete", counting)
    runs = []
    estimate = None
    for seed in range(8):
        cfg = RunConfig.from_data({**data, "lm": "fake", "seed": seed, "output": str(folder / "runs")})
        if estimate is None:
            seeds = [resolve_genome(ref) for ref in cfg.seeds]
            estimate = search_estimate(make_plan(cfg, build_task(cfg), seeds), build_lms(cfg), seeds,
                                       cfg.concurrency, build_pipeline(cfg))
        monkeypatch.setenv("MASFORGE_CACHE", str(folder / f"cache{seed}"))  # every run asks from an empty cache
        asked.clear()
        result = run_search(cfg, progress=False)
        assert sum(asked.values()) == result.spend["llm_calls"] + result.spend["cache_hits"]
        runs.append(Counter(asked))
    return estimate, runs


@pytest.mark.parametrize("which", ["tour", "own data"])
def test_the_estimate_is_within_a_quarter_of_the_calls_the_search_asks(
        which: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    data = TOUR if which == "tour" else _own_data(tmp_path)
    estimate, runs = _asked(data, tmp_path, monkeypatch)
    mean = statistics.mean(sum(r.values()) for r in runs)
    assert abs(estimate.calls + estimate.serial_calls - mean) <= 0.25 * mean, (estimate, runs)
    if which == "tour":  # random search calls no meta-agent, so the estimate charges none
        assert estimate.serial_calls == 0 and all(r["meta"] == 0 for r in runs)
    else:
        assert estimate.serial_calls > 0 and statistics.mean(r["meta"] for r in runs) > 0
    assert estimate.seconds == pytest.approx(estimate.calls * estimate.per_call_s / max(1, estimate.parallel)
                                             + estimate.serial_calls * estimate.serial_s)


def test_a_gate_counts_its_fail_branch_only_where_it_has_code_to_check() -> None:
    escalate, self_debug = load_seed("escalate"), load_seed("self_debug")
    assert lm_calls_per_example(escalate) == 6.0  # the most it can cost: the 5 samples every time
    assert calls_per_example(escalate) == 1 + 5 * 0.5  # they run when the first answer fails its checks
    assert calls_per_example(escalate, code=False) == 1.0  # no code to run: no check fails
    assert calls_per_example(self_debug) == 1 + 2 * 0.5  # 3 rounds of checks: at most 2 repairs
    assert calls_per_example(load_seed("self_refine"), code=False) == 2.5  # revised when the critique finds fault
    assert calls_per_example(load_seed("debate")) == lm_calls_per_example(load_seed("debate")) == 7.0


def test_new_systems_are_priced_as_their_strategy_makes_them() -> None:
    seeds = [load_seed("io"), load_seed("cot")]
    random_search, structural_only = get_strategy("random"), get_strategy("evolve", structural_rate=0.0)
    edited = new_system_calls([random_search] * 4, seeds)
    assert min(edited) > 1.0  # 1-3 structural edits add agents, copies, checks
    assert new_system_calls([structural_only] * 4, seeds) == [1.0] * 4  # the meta-agent's, priced as the parent
    assert random_search.meta_calls_per_system() == 0
    assert get_strategy("evolve", structural_rate=1.0).meta_calls_per_system() == 0
    assert get_strategy("meta").meta_calls_per_system() == 3  # a proposal and up to 2 repairs


def test_the_race_s_first_batch_gives_the_fewest_calls() -> None:
    cfg = RunConfig.from_data({**TOUR, "lm": "fake", "limit": 40})
    seeds = [resolve_genome(ref) for ref in cfg.seeds]
    plan = make_plan(cfg, build_task(cfg), seeds)
    assert plan.race_first == 16
    est = search_estimate(plan, build_lms(cfg), seeds, cfg.concurrency, build_pipeline(cfg))
    assert est.fewest_calls is not None and est.fewest_calls < est.calls
    assert f"{est.fewest_calls:.0f} if the race drops each system after its first batch" in est.words()
    no_race = RunConfig.from_data({**TOUR, "lm": "fake", "limit": 40, "race": False})
    assert make_plan(no_race, build_task(no_race), seeds).race_first is None
