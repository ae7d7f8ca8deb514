"""One meaning of "best" and a verdict that is never None (issue 39): ``result.best`` is the best system overall
(a seed when nothing better was found), ``result.best_new`` the best system the search made, and
``result.verdict`` always holds a state a caller can read, also when the search proposed nothing new."""

from __future__ import annotations

import dataclasses
import json
import os
import warnings
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console
from typer.testing import CliRunner

import masforge
from masforge.cli import app
from masforge.cli import console as cli_console
from masforge.cli.search import print_search_result
from masforge.report import build_report, render_html
from masforge.search.verdict import OUTCOMES

TASK = "rg:basic_arithmetic"


def _printed(result: Any, monkeypatch: pytest.MonkeyPatch) -> str:
    recorder = Console(record=True, width=200)
    monkeypatch.setattr("masforge.cli.search.console", recorder)
    monkeypatch.setattr(cli_console, "console", recorder)
    print_search_result(result)
    return recorder.export_text()


def test_a_budget_below_the_seeds_gives_a_nothing_new_verdict(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    # 4 candidates and the 5 default seeds: the search proposes nothing, as the README's example with a small budget
    result = masforge.optimize(TASK, strategy="evolve", budget={"max_candidates": 4}, lm="fake", limit=4,
                               output=tmp_path / "runs")
    assert all(c.id in result.seed_ids for c in result.candidates)
    assert result.best is not None and result.best_new is None
    v = result.verdict
    assert v.outcome == "nothing_new" and v.outcome in OUTCOMES and not v.compared
    line = f"{v.diff:+.3f} [{v.ci_low:+.3f}, {v.ci_high:+.3f}] on {v.n} examples: {v.sentence}"
    assert line.startswith("+0.000 [+0.000, +0.000] on 0 examples: nothing new was proposed")
    assert "max_candidates" in str(v)
    summary = json.loads((result.run_dir / "summary.json").read_text())
    assert summary["verdict"]["outcome"] == "nothing_new" and summary["best_new"] is None
    page = render_html(build_report(result.run_dir))
    assert "nothing new was proposed" in page and "Lineage of the best system (a seed" in page
    out = _printed(result, monkeypatch)
    assert "nothing new was proposed" in out
    assert f"best system overall: {result.best.genome.name}" in out and "(a seed: the search found nothing" in out
    summary = CliRunner().invoke(app, ["report", str(result.run_dir)], env={**os.environ, "COLUMNS": "200"}).output
    assert "best new" in summary and "none: nothing new was proposed" in summary


@pytest.fixture(scope="module")
def searched(tmp_path_factory: pytest.TempPathFactory) -> Any:
    out = tmp_path_factory.mktemp("verdict") / "runs"
    return masforge.optimize(TASK, strategy="random", budget=5, lm="fake", seeds=["io", "cot"], limit=4,
                             test_limit=8, output=out)


def test_best_overall_and_best_new_are_named_apart(searched: Any, monkeypatch: pytest.MonkeyPatch):
    result = searched
    new = [c for c in result.candidates if result.is_new(c)]
    assert new and result.best_new is not None and result.best_new.id not in result.seed_ids
    assert result.best_new.fitness == max(c.fitness for c in new)
    assert result.best.fitness == max(c.fitness for c in result.candidates)
    found, seed = result.held_out()
    assert found is not None and not found.is_seed and seed is not None and seed.is_seed
    v = result.verdict
    assert v.compared and v.found == found.name and v.seed == seed.name and v.n == 8
    assert v.outcome == "too_few" and "--test-limit" in v.sentence  # 8 held-out examples: no verdict yet
    summary = json.loads((result.run_dir / "summary.json").read_text())
    assert summary["best_new"]["id"] == result.best_new.id and summary["best"]["id"] == result.best.id
    page = render_html(build_report(result.run_dir))
    assert f"Lineage of the best new system: {result.best_new.genome.name}" in page
    out = _printed(result, monkeypatch)
    assert f"best new system {found.name}" in out and "best system overall:" in out
    summary = CliRunner().invoke(app, ["report", str(result.run_dir)], env={**os.environ, "COLUMNS": "200"}).output
    assert "best new" in summary and f"({result.best_new.short_id})" in summary


def test_a_shipped_seed_the_search_rebuilt_is_named_rediscovered(searched: Any, monkeypatch: pytest.MonkeyPatch):
    # the quickstart's case: io's child is the escalate seed's design, so it is the best "seed" and no new system
    _, seed = searched.held_out()
    top = searched.best.id
    candidates = [dataclasses.replace(c, rediscovers="escalate") if c.id in (seed.genome_id, top) else c
                  for c in searched.candidates]
    out = _printed(dataclasses.replace(searched, candidates=candidates), monkeypatch)
    assert f"best seed {seed.name} (rediscovered: a shipped seed the search rebuilt)" in out
    assert "(rediscovered: the search rebuilt the shipped seed escalate from its own seeds" in out
    assert "(a seed: the search found nothing better)" not in out


def test_the_old_names_still_work_and_say_they_are_deprecated(searched: Any):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert searched.versus_seeds() == searched.held_out()
        assert searched.verdict.versus_seeds() == searched.verdict.sentence
        assert searched.verdict.comparison.versus_seeds() == searched.verdict.sentence
    assert [w.category for w in caught] == [DeprecationWarning] * 3


def test_no_held_out_scores_is_a_state_not_none(tmp_path: Path):
    result = masforge.optimize(TASK, strategy="random", budget=3, lm="fake", seeds=["io"], limit=4,
                               test_top_k=0, output=tmp_path / "runs")
    v = result.verdict
    assert result.best_new is not None and v.outcome == "not_rescored" and v.n == 0
    assert "no held-out score" in v.sentence and v.found_score is None
