"""Each budget limit is declared once, in masforge.search.budget.BUDGET_LIMITS (the spending ones come from
masforge.lm.budget): the search (and evaluate/compare) options, the configuration errors' flag names and the stop
messages all come from that table, so a limit cannot have a flag the help does not list or a stop message that
names no flag."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from masforge.cli import app
from masforge.cli.evaluate import EVAL_LIMITS
from masforge.cli.options import STOP_REASONS
from masforge.cli.search import SEARCH_FLAGS
from masforge.search.budget import BUDGET_LIMITS, SearchBudget, SearchUsage

TASK = "rg:basic_arithmetic"
PRICED_FAKE = {"model": "fake", "price_in_per_m": 1000.0, "price_out_per_m": 1000.0}
# flags that make a small search on the fake LM stop by each limit (a dollar limit needs a priced LM)
STOPPING = {
    "max_dollars": ["--budget-usd", "0.001"],
    "max_tokens": ["--max-tokens", "30"],
    "max_calls": ["--max-calls", "2"],
    "max_seconds": ["--max-minutes", "0.0001"],
    "max_candidates": ["-n", "1"],
    "patience": ["--patience", "1"],
}


@pytest.fixture(autouse=True)
def _private_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MASFORGE_CACHE", str(tmp_path / "cache"))
    monkeypatch.chdir(tmp_path)


def _help(*command: str) -> str:
    res = CliRunner().invoke(app, [*command, "--help"], env={"COLUMNS": "250"})
    assert res.exit_code == 0, res.output
    return " ".join(res.output.replace("│", " ").split())


def test_every_limit_has_its_flag_and_help_in_search_help() -> None:
    shown = _help("search")
    for limit in BUDGET_LIMITS.values():
        assert f"{limit.flag} " in shown and limit.help in shown, limit.field
        assert SEARCH_FLAGS[f"budget.{limit.field}"] == limit.flag  # configuration errors name the same flag
    assert "-n " in shown


def test_evaluate_and_compare_take_the_spend_limits_from_the_table() -> None:
    for command in ("evaluate", "compare"):
        shown = _help(command)
        for field in EVAL_LIMITS:
            limit = BUDGET_LIMITS[field]
            assert f"{limit.flag} " in shown and f"Stop after this many {limit.unit}." in shown, (command, field)


@pytest.mark.parametrize("field", list(BUDGET_LIMITS))
def test_a_budget_stop_names_the_flag_that_set_it(field: str) -> None:
    limit = BUDGET_LIMITS[field]
    spent = SearchUsage(dollars=1e6, tokens=10**6, calls=10**6, seconds=1e6, candidates=10**6, since_best=10**6)
    stop = SearchBudget(**{field: 1}).stop(spent)
    assert stop is not None and stop.limit == limit.name and stop.flag == limit.flag
    assert f"budget reached: {limit.flag} " in stop.message
    assert limit.flag in STOP_REASONS[limit.name]


def test_the_table_and_the_stop_messages_cover_every_budget_field() -> None:
    limits = {name for name, field in SearchBudget.model_fields.items() if name != "test_share"}
    assert set(BUDGET_LIMITS) == limits == set(STOPPING)


@pytest.mark.parametrize("field", list(BUDGET_LIMITS))
def test_a_search_stopped_by_each_limit_names_its_flag(tmp_path: Path, field: str) -> None:
    limit = BUDGET_LIMITS[field]
    config = tmp_path / "run.yaml"  # a priced fake LM, so dollars are spent
    config.write_text(yaml.safe_dump({"task": TASK, "lm": PRICED_FAKE}), encoding="utf-8")
    args = ["search", "--task", TASK, "--config", str(config), "--strategy", "random", "--seeds", "cot,io",
            "--limit", "2", "--test-limit", "1", "--test-top-k", "0", "-q", "--output", str(tmp_path / "runs")]
    if field != "max_candidates":
        args += ["-n", "30"]
    res = CliRunner().invoke(app, [*args, *STOPPING[field]], env={"COLUMNS": "250"})
    assert res.exit_code == 0, res.output
    assert f"stopped: {limit.stopped};" in res.output and limit.flag in limit.stopped, res.output


def test_the_search_limits_are_declared_in_the_search_and_the_spending_ones_in_lm() -> None:
    """lm/ knows only what the LM ledger checks; candidates and patience are the search's, declared beside it."""
    from masforge.lm.budget import SPEND_LIMITS
    from masforge.lm.budget import Budget as SpendBudget
    from masforge.search.budget import SEARCH_LIMITS

    assert set(SpendBudget.model_fields) == set(SPEND_LIMITS) and all(limit.spend for limit in SPEND_LIMITS.values())
    assert not any(limit.spend for limit in SEARCH_LIMITS.values())
    assert BUDGET_LIMITS == {**SPEND_LIMITS, **SEARCH_LIMITS} == SearchBudget.declared()


def test_evaluate_and_compare_share_one_option_definition() -> None:
    """The options both commands take are the same options (flags, help, defaults), from one definition."""
    import typer.main

    def shared(name: str) -> dict[str, tuple[object, ...]]:
        command = typer.main.get_command(app).commands[name]  # type: ignore[attr-defined]
        own = {"task", "split", "output", "help"}
        return {p.name: (tuple(p.opts), p.help, p.default) for p in command.params
                if p.param_type_name == "option" and p.name not in own}

    evaluate, compare = shared("evaluate"), shared("compare")
    assert evaluate == compare
    assert {"limit", "lm", "concurrency", "no_cache", "budget_usd", "max_calls"} <= set(evaluate)
    from typing import get_type_hints

    from masforge.cli.evaluate import compare as compare_command
    from masforge.cli.evaluate import evaluate as evaluate_command
    from masforge.cli.options import EvalOptions

    for command in (evaluate_command, compare_command):  # both read their shared options as one object
        assert get_type_hints(command.__wrapped__)["options"] is EvalOptions  # type: ignore[attr-defined]
