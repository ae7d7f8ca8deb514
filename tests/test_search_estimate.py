"""A search's estimate counts the LM calls its strategies will send (issue 39: the own-data search printed "76 LM
calls" and used 146; the tour's random search charged meta-agent calls it never makes and estimated 29 minutes for
12.7). Both searches run on the fake LM, where the LM calls a run sends are counted exactly (the ledger's count,
the end line's "N LM calls"; answers its answer cache gives are not sent): as the issue ran them (seed 0), and over
seeds 0-7, since one run of a random search may send three times what another does."""

from __future__ import annotations

import random
import statistics
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from masforge.evaluators.estimate import calls_per_example, sent_calls
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


def _sent(data: dict[str, Any], folder: Path, monkeypatch: pytest.MonkeyPatch) -> list[tuple[Any, int, Counter[str]]]:
    """For seeds 0-7 of ``data``'s search: its estimate, the LM calls the run sent, and the calls it asked by alias
    (an answer from the answer cache counts there: the strategy asked for it)."""
    asked: Counter[str] = Counter()
    real = LMClient.complete

    def counting(self: LMClient, messages: Any, *, alias: str = "worker", **options: Any) -> Any:
        if not self.cache_only:  # a cost probe's dry run on the answer cache asks no LM
            asked[alias] += 1
        return real(self, messages, alias=alias, **options)

    monkeypatch.setattr(LMClient, "complete", counting)
    runs = []
    for seed in range(8):
        cfg = RunConfig.from_data({**data, "lm": "fake", "seed": seed, "output": str(folder / "runs")})
        seeds = [resolve_genome(ref) for ref in cfg.seeds]
        estimate = search_estimate(make_plan(cfg, build_task(cfg), seeds), build_lms(cfg), seeds, cfg.concurrency,
                                   build_pipeline(cfg))
        monkeypatch.setenv("MASFORGE_CACHE", str(folder / f"cache{seed}"))  # every run starts from an empty cache
        asked.clear()
        spent = run_search(cfg, progress=False).spend
        assert sum(asked.values()) == spent["llm_calls"] + spent["cache_hits"]
        runs.append((estimate, spent["llm_calls"], Counter(asked)))
    return runs


@pytest.mark.parametrize("which", ["tour", "own data"])
def test_the_estimate_is_within_a_quarter_of_the_calls_the_search_sends(
        which: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    data = TOUR if which == "tour" else _own_data(tmp_path)
    runs = _sent(data, tmp_path, monkeypatch)
    estimated = [est.calls + est.serial_calls for est, _, _ in runs]
    sent = [calls for _, calls, _ in runs]
    assert abs(estimated[0] - sent[0]) <= 0.25 * sent[0], (estimated, sent)  # the search as the issue ran it
    assert abs(statistics.mean(estimated) - statistics.mean(sent)) <= 0.25 * statistics.mean(sent), (estimated, sent)
    if which == "tour":  # random search calls no meta-agent, so the estimate charges none
        assert all(est.serial_calls == 0 and asked["meta"] == 0 for est, _, asked in runs)
    else:  # evolve's meta-agent makes most children (its bandit may pick structural edits for all, in a run)
        assert all(est.serial_calls > 0 for est, _, _ in runs) and statistics.mean(a["meta"] for _, _, a in runs) > 0
    est = runs[0][0]
    assert est.seconds == pytest.approx(est.calls * est.per_call_s / max(1, est.parallel)
                                        + est.serial_calls * est.serial_s)


def test_random_search_is_sketched_as_it_will_run(tmp_path: Path) -> None:
    """Random search's proposals depend on no LM answer and no score: sketched from the search's own seed, they
    are the systems it proposes."""
    cfg = RunConfig.from_data({**TOUR, "lm": "fake", "seed": 3, "output": str(tmp_path / "runs")})
    ran = [c.genome.id for c in run_search(cfg, progress=False).candidates if c.operator == "random_edit"]
    sketched = [resolve_genome(ref) for ref in cfg.seeds]
    rng = random.Random(cfg.seed)
    for _ in ran:
        sketched.append(get_strategy("random").sketch(sketched, rng))
    assert [g.id for g in sketched[2:]] == ran


def test_a_prompt_asked_before_in_the_run_is_not_sent_again() -> None:
    io, cot = load_seed("io"), load_seed("cot")
    assert sent_calls([io, cot, io, cot], code=False) == [1.0, 1.0, 0.0, 0.0]
    copies = cot.model_copy(deep=True)
    copies.agents[0].copies = 5  # its first sample is cot's own call
    assert sent_calls([cot, copies], code=False) == [1.0, 4.0]
    refine = cot.model_copy(deep=True)
    refine.agents[0].module = "refine"  # drafts as cot does: critique and revision are new
    assert sent_calls([cot, refine], code=False) == [1.0, 1.5]


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
    random_search, meta_only = get_strategy("random"), get_strategy("evolve", structural_rate=0.0)
    edited, _ = new_system_calls([random_search] * 4, seeds, seed=1)
    assert sum(edited) > 0  # 1-3 structural edits add agents, copies, checks: new prompts
    assert new_system_calls([meta_only] * 4, seeds) == ([1.0] * 4, 1.0)  # the meta-agent's: as its parent,
    # with prompts of its own
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
