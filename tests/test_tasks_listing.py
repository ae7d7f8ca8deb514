"""`masforge tasks rg` lists the reasoning-gym families that `rg:<family>` accepts (issue 39)."""

from __future__ import annotations

import os

from typer.testing import CliRunner

from masforge.cli import app
from masforge.evaluators.benchmarks.reasoning_gym import reasoning_gym_families
from masforge.evaluators.tasks import get_task


def test_tasks_rg_lists_every_family_and_each_one_is_a_task() -> None:
    from reasoning_gym.factory import DATASETS

    families = reasoning_gym_families()
    assert [f for f, _, _ in families] == sorted(DATASETS)
    assert ("basic_arithmetic", "arithmetic") in [(f, c) for f, c, _ in families]
    out = CliRunner().invoke(app, ["tasks", "rg"], env={**os.environ, "COLUMNS": "200"})
    assert out.exit_code == 0, out.output
    for family, _, _ in families:
        assert f"rg:{family} " in out.output
    assert get_task(f"rg:{families[0][0]}", size=5).name == f"rg:{families[0][0]}"  # a listed name is a task


def test_the_task_list_points_to_the_families_and_a_wrong_list_is_one_line() -> None:
    runner = CliRunner()
    listed = runner.invoke(app, ["tasks"], env={**os.environ, "COLUMNS": "250"})
    assert listed.exit_code == 0 and "masforge tasks rg" in " ".join(listed.output.split())
    wrong = runner.invoke(app, ["tasks", "gsm8k"], env={**os.environ, "COLUMNS": "200"})
    assert wrong.exit_code == 1 and "the only list of families is rg" in wrong.output
