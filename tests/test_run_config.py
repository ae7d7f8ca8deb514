"""The run configuration stays typed through a resume: config.yaml reads back into an equal RunConfig, no field is
lost on the way, and the search's default candidate limit is a default (not a given value) without writing into
pydantic's internals."""

from __future__ import annotations

from pathlib import Path

import yaml

from masforge.lm.budget import MaxSeconds
from masforge.search.budget import SearchBudget
from masforge.search.config import DEFAULT_MAX_CANDIDATES, RunConfig
from masforge.search.engine import _run_config


def _full() -> RunConfig:
    """A configuration with every field away from its default."""
    return RunConfig.from_data({
        "task": "rg:basic_arithmetic", "task_options": {"size": 40}, "data_dir": "data",
        "strategy": ["knapsack", "evolve"], "strategy_options": {"evolve": {"population": 6}},
        "seeds": ["cot", "io"], "lm": {"model": "fake", "temperature": 0.3}, "meta_lm": "fake", "api_base": None,
        "budget": {"max_dollars": 1.5, "max_tokens": 9000, "max_calls": 300, "max_seconds": 600.0,
                   "max_candidates": 12, "patience": 4, "test_share": 0.25},
        "concurrency": 3, "split": "validation", "limit": 10, "race": False, "race_first": 8, "race_batch": 4,
        "race_confidence": 0.9, "test_split": "test", "test_limit": 7, "test_top_k": 2, "cascade_first": 3,
        "max_unscored": 0.1, "cost_weight": 2.0, "cache": False, "seed": 7, "output": "out", "name": "r1",
        "archive": "shared-archive", "executor": "ray", "ray_address": "auto", "ray_workers": 2})


def test_a_resumed_run_reads_its_config_back_into_an_equal_typed_run_config(tmp_path: Path) -> None:
    cfg = _full()
    cfg.dump(tmp_path / "config.yaml")
    saved = yaml.safe_load((tmp_path / "config.yaml").read_text())
    assert set(saved) == set(RunConfig.model_fields)  # every field written, none dropped
    assert set(saved["budget"]) == set(SearchBudget.model_fields)
    resumed, run_dir = _run_config(None, tmp_path)  # what run_search(resume=...) starts from
    assert run_dir == tmp_path
    assert resumed == cfg and resumed.model_dump() == cfg.model_dump()
    assert isinstance(resumed.budget, SearchBudget) and resumed.budget.max_seconds == 600.0
    # a resume naming limits changes those only, and the folder keeps the merged config typed as well
    raised, _ = _run_config(RunConfig.from_data({"task": "x", "budget": {"max_calls": 900}, "concurrency": 8}),
                            tmp_path)
    assert raised.budget.max_calls == 900 and raised.budget.max_candidates == 12 and raised.concurrency == 8
    assert raised.model_dump(exclude={"budget", "concurrency"}) == cfg.model_dump(exclude={"budget", "concurrency"})
    assert RunConfig.load(tmp_path / "config.yaml") == raised


def test_the_default_candidate_limit_is_a_default_not_a_given_limit() -> None:
    cfg = RunConfig.from_data({"task": "x", "budget": {"max_dollars": 2}})
    assert cfg.budget.max_candidates == DEFAULT_MAX_CANDIDATES
    assert cfg.budget.model_fields_set == {"max_dollars"}
    assert cfg.model_dump(exclude_unset=True)["budget"] == {"max_dollars": 2.0}
    assert RunConfig(task="x").budget.max_candidates == DEFAULT_MAX_CANDIDATES
    assert RunConfig.from_data({"task": "x", "budget": {"max_candidates": None}}).budget.max_candidates is None


def test_a_budget_object_given_in_python_is_not_changed_and_keeps_its_conditions() -> None:
    mine = SearchBudget(max_dollars=1.0) | MaxSeconds(30)
    cfg = RunConfig(task="x", budget=mine)
    assert mine.max_candidates is None  # the caller's object is left alone (it used to be written into)
    assert cfg.budget.max_candidates == DEFAULT_MAX_CANDIDATES and cfg.budget.max_dollars == 1.0
    assert cfg.budget.max_seconds == 30 and "max_candidates" not in cfg.budget.model_fields_set
    cfg = RunConfig(task="x", budget=SearchBudget(max_candidates=5, test_share=0.1))
    assert cfg.budget.max_candidates == 5 and cfg.budget.test_share == 0.1
