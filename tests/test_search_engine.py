"""The search engine end to end on the fake LM: run folders, archive contents, held-out re-scoring,
resume without repeating work (also after a SIGKILL), the optimize() API and the search CLI."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

import masforge
from masforge.archive.store import Archive
from masforge.cli import app
from masforge.errors import ConfigError
from masforge.evaluators.runner import results_key
from masforge.lm.client import parse_lm
from masforge.search.config import RunConfig
from masforge.search.engine import run_search

TASK = "rg:basic_arithmetic"


@pytest.fixture(autouse=True)
def _private_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MASFORGE_CACHE", str(tmp_path / "cache"))


def _cfg(tmp_path: Path, **kw: object) -> RunConfig:
    data = {"task": TASK, "strategy": ["random"], "lm": "fake", "seeds": ["cot", "io"], "limit": 6,
            "test_limit": 5, "test_top_k": 2, "output": str(tmp_path / "runs"), "budget": {"max_candidates": 6}}
    data.update(kw)
    return RunConfig.from_data(data)


def test_search_writes_run_folder_archive_and_test_scores(tmp_path: Path) -> None:
    result = run_search(_cfg(tmp_path), progress=False)
    assert result.stop_reason == "max_candidates"
    assert len(result.candidates) == 6
    run = result.run_dir
    for name in ("config.yaml", "summary.json", "events.jsonl", "best.yaml", "sandbox.json"):
        assert (run / name).is_file(), name
    summary = json.loads((run / "summary.json").read_text())
    assert summary["stats"]["evaluated"] == 6
    sandbox = json.loads((run / "sandbox.json").read_text())  # which sandbox layers held in this run
    assert sandbox["isolation"] in ("bwrap", "unshare", "process") and "audit hook" in sandbox["layers"]
    assert summary["best"]["id"] == result.best.id
    # finalists (top 2) plus the best seed and the best new system are re-scored on the test split
    assert 2 <= len(result.test_scores) <= 4
    assert any(t.is_seed for t in result.test_scores)
    found, seed = result.held_out()
    assert found is not None and not found.is_seed and found.n == 5
    assert seed is not None and seed.is_seed
    assert found.validation == max(c.score for c in result.candidates if c.operator != "seed" and not c.pruned)
    archive = Archive.open(result.archive_path)
    assert len(archive.list(run=run.name)) == 6
    best = result.best
    assert archive.get_result(best.id, TASK, result.config.split, results_key(parse_lm("fake"))) is not None
    assert any(r.split == "test" for r in archive.get(result.test_scores[0].genome_id).results)


def test_resume_continues_without_repeating(tmp_path: Path) -> None:
    first = run_search(_cfg(tmp_path, budget={"max_candidates": 4}), progress=False)
    calls_first = first.spend["llm_calls"]
    assert calls_first > 0
    resumed = run_search(RunConfig.from_data({"task": TASK, "budget": {"max_candidates": 7}}),
                         resume=first.run_dir, progress=False)
    assert resumed.stats["reused"] == 4          # the 4 finished candidates came back for free
    # seeds were not added twice: as many duplicates as the same search run without a stop (a random walk of
    # edits can come back to a system it has seen)
    straight = run_search(_cfg(tmp_path / "straight", budget={"max_candidates": 7}), progress=False)
    assert resumed.stats["duplicates"] == straight.stats["duplicates"]
    assert [c.id for c in resumed.candidates] == [c.id for c in straight.candidates]
    assert len(resumed.candidates) == 7
    ids = [c.id for c in resumed.candidates]
    assert len(ids) == len(set(ids))
    archive = Archive.open(resumed.archive_path)
    assert len(archive.list(run=first.run_dir.name)) == 7
    # the budget already spent is counted: the resumed ledger starts at the first run's spend
    assert resumed.spend["llm_calls"] >= calls_first
    # and the candidates of the first session keep what their evaluation used (the summary's per-candidate counts)
    paid = {c.id: (c.llm_calls, c.cache_hits) for c in first.candidates}
    restored = {c.id: (c.llm_calls, c.cache_hits) for c in resumed.candidates if c.id in paid}
    assert restored == paid and sum(calls for calls, _ in paid.values()) > 0


def test_results_read_under_an_older_revision_are_evaluated_again(tmp_path: Path, monkeypatch) -> None:
    from masforge.evaluators import runner
    from masforge.export.found_with import lm_from_key

    first = run_search(_cfg(tmp_path, budget={"max_candidates": 3}), progress=False)
    key = results_key(parse_lm("fake"))
    assert key.startswith(parse_lm("fake").key()) and lm_from_key(key) == parse_lm("fake")
    monkeypatch.setattr(runner, "READING_REVISION", runner.READING_REVISION + 1)
    assert results_key(parse_lm("fake")) != key
    more = masforge.resume(first.run_dir, budget=4)
    assert len(more.candidates) == 4 and more.stats["reused"] == 0  # stored results were read the old way


def test_api_resume_can_raise_the_budget(tmp_path: Path) -> None:
    first = run_search(_cfg(tmp_path, budget={"max_candidates": 3}), progress=False)
    more = masforge.resume(first.run_dir, budget=5)
    assert len(more.candidates) == 5 and more.stats["reused"] == 3
    again = masforge.resume(first.run_dir)  # the raised budget was saved with the run: nothing left to do
    assert len(again.candidates) == 5


def test_resume_needs_a_run_folder(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="not a masforge run folder"):
        run_search(resume=tmp_path)


# A script preamble: the fake LM made slow enough that a signal lands in the middle of a search.
SLOW_FAKE_LM = ("import sys, time\n"
                "import masforge.lm.fake as t\n"
                "orig = t.fake_reply\n"
                "def slow(messages, info=None):\n"
                "    time.sleep(0.02)\n"
                "    return orig(messages, info)\n"
                "t.fake_reply = slow\n")


def test_killed_search_resumes_without_losing_finished_evaluations(tmp_path: Path) -> None:
    script = tmp_path / "slow_search.py"
    script.write_text(
        SLOW_FAKE_LM
        + "from masforge.search.config import RunConfig\n"
        "from masforge.search.engine import run_search\n"
        f"cfg = RunConfig.from_data({{'task': '{TASK}', 'strategy': ['random'], 'lm': 'fake', 'seeds': ['cot', 'io'],"
        f" 'limit': 6, 'test_limit': 3, 'name': 'killed', 'output': sys.argv[1],"
        f" 'budget': {{'max_candidates': 40}}}})\n"
        "run_search(cfg, progress=False)\n"
    )
    env = {**os.environ, "MASFORGE_CACHE": str(tmp_path / "cache2")}
    proc = subprocess.Popen([sys.executable, str(script), str(tmp_path / "runs")], env=env)
    events = tmp_path / "runs" / "killed" / "events.jsonl"
    deadline = time.time() + 60
    while time.time() < deadline:
        if events.is_file() and len(events.read_text().splitlines()) >= 4:
            break
        time.sleep(0.1)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    finished = {json.loads(line)["id"] for line in events.read_text().splitlines()}
    assert len(finished) >= 4
    fsck = subprocess.run(["git", "fsck"], cwd=tmp_path / "runs" / "killed" / "archive", capture_output=True,
                          text=True)
    assert fsck.returncode == 0, fsck.stderr
    resumed = run_search(RunConfig.from_data({"task": TASK, "budget": {"max_candidates": len(finished) + 2}}),
                         resume=tmp_path / "runs" / "killed", progress=False)
    got = {c.id for c in resumed.candidates}
    assert finished <= got                       # nothing finished was lost
    assert resumed.stats["reused"] >= len(finished)  # ... and none of it was evaluated again


def test_ctrl_c_exits_non_zero_with_a_resume_hint(tmp_path: Path) -> None:
    script = tmp_path / "interrupted.py"
    script.write_text(
        SLOW_FAKE_LM
        + "from masforge.cli import main\n"
        f"sys.argv = ['masforge', 'search', '--task', '{TASK}', '--strategy', 'random', '--lm', 'fake', '-n', '40',"
        " '--limit', '6', '--seeds', 'cot,io', '-o', sys.argv[1], '-q']\n"
        "main()\n"
    )
    env = {**os.environ, "MASFORGE_CACHE": str(tmp_path / "cache2")}
    # (a SIGINT the test runner ignores would be inherited, and Python then leaves Ctrl-C ignored too)
    proc = subprocess.Popen([sys.executable, str(script), str(tmp_path / "runs")], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    deadline = time.time() + 90
    while time.time() < deadline:
        events = list((tmp_path / "runs").glob("*/events.jsonl"))
        if events and len(events[0].read_text().splitlines()) >= 2:
            break
        time.sleep(0.1)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, out + err
    run_dir = next(p for p in (tmp_path / "runs").iterdir() if not p.is_symlink())
    # the user's own stop is said plainly, on stdout, not as an error
    assert "stopped (Ctrl-C)" in out and f"search --resume {run_dir}" in out
    assert "error" not in err.lower() and "Traceback" not in out + err


def test_cli_exit_stops_the_local_servers_before_waiting_for_worker_threads(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """After Ctrl-C, requests still in flight would keep the process alive until they finish generating."""
    from masforge import local_model
    from masforge.cli import commands

    stopped: list[bool] = []
    monkeypatch.setattr(local_model, "shutdown_local_servers", lambda timeout=10.0: stopped.append(True))

    def interrupted() -> None:
        assert stopped == []  # not before the command ends
        raise KeyboardInterrupt

    monkeypatch.setattr(commands, "app", interrupted)
    with pytest.raises(SystemExit) as exc:
        commands.main()
    assert exc.value.code == 130 and stopped == [True]


def test_optimize_api_with_callable_objective(tmp_path: Path) -> None:
    from masforge.evaluators.tasks import Task

    def more_agents_is_better(outputs: dict, example: object) -> float:
        return 1.0 if "42" in str(outputs.get("answer", "")) else 0.0

    task = Task.from_callable(more_agents_is_better, examples=[{"question": "What is 40 + 2?"}] * 3)
    result = masforge.optimize(task, strategy="random", budget=4, lm="fake", seeds=["cot"], output=tmp_path,
                               test_limit=3)
    assert result.best is not None and result.best.score == 1.0
    assert result.front and result.spend["llm_calls"] > 0
    assert result.open_archive().best(task=task.name, k=1)


PRICED_FAKE = {"model": "fake", "price_in_per_m": 1000.0, "price_out_per_m": 1000.0}


@pytest.mark.parametrize("kind", ["jsonl", "task object"])
def test_cost_weight_reaches_every_kind_of_task(tmp_path: Path, kind: str) -> None:
    """Fitness is the search's: a .jsonl path and a Task object get cost_weight like a built-in task."""
    from masforge.evaluators.tasks import Task

    path = tmp_path / "sums.jsonl"
    path.write_text("".join(json.dumps({"question": f"What is {i} + {i}?", "answer": str(2 * i)}) + "\n"
                            for i in range(10)))
    task = str(path) if kind == "jsonl" else Task.from_jsonl(path, input="question", target="answer")
    result = masforge.optimize(task, strategy="random", budget=3, lm=PRICED_FAKE, seeds=["cot", "io"],
                               output=tmp_path / "runs", limit=2, test_top_k=0, cost_weight=50.0)
    assert result.candidates and all(c.dollars > 0 for c in result.candidates)
    for c in result.candidates:
        assert c.fitness == pytest.approx(c.score - 50.0 * c.dollars)
    assert result.best is max(result.candidates, key=lambda c: (c.fitness, -c.dollars))


@pytest.mark.parametrize(("name", "options", "message"), [
    ("nosuch", {}, "unknown strategy 'nosuch'"),
    ("meta", {"bogus": 1}, "strategy 'meta': unknown option 'bogus'"),
    ("evolve", {"population_size": "many"}, "strategy 'evolve': option 'population_size'"),
    ("evolve", {"selection": "roulette"}, "strategy 'evolve': option 'selection': unknown selection 'roulette'"),
    ("knapsack", {"probe_mode": "both"}, "strategy 'knapsack': option 'probe_mode'"),
    ("knapsack", {"budget": -1}, "strategy 'knapsack': option 'budget': must be >= 0"),
    ("tune", {"knobs": ["colour"]}, "strategy 'tune': option 'knobs': unknown knob 'colour'"),
    ("coevolve", {"seed_genome": "nosuch"}, "strategy 'coevolve': option 'seed_genome': unknown seed"),
    ("swarm", {"particles": 0}, "strategy 'swarm': option 'particles': must be at least 1"),
])
def test_a_bad_later_stage_fails_before_any_lm_call(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str,
                                                    options: dict, message: str) -> None:
    """The whole pipeline is built and checked first: a bad second stage costs no LM call and no run folder."""
    from masforge.lm import fake as fake_lm

    calls: list[object] = []
    real = fake_lm.fake_reply
    monkeypatch.setattr(fake_lm, "fake_reply", lambda messages, info=None: calls.append(1) or real(messages, info))
    cfg = _cfg(tmp_path, strategy=["random", name], strategy_options={name: options} if options else {})
    with pytest.raises(ConfigError) as err:
        run_search(cfg, progress=False)
    assert message in str(err.value) and "\n" not in str(err.value)
    assert calls == [] and not (tmp_path / "runs").exists()


def test_options_of_a_strategy_not_in_the_pipeline_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="strategy_options: 'evolve' is not in the pipeline"):
        run_search(_cfg(tmp_path, strategy_options={"evolve": {"offspring": 3}}), progress=False)


def test_tune_keeps_its_study_in_the_run_folder(tmp_path: Path) -> None:
    """The engine does not know tune: the strategy finds the run folder on the context."""
    result = run_search(_cfg(tmp_path, strategy=["tune"], strategy_options={"tune": {"knobs": ["copies"]}}),
                        progress=False)
    assert (result.run_dir / "optuna.sqlite3").is_file()
    assert '"tune"' not in (Path(__file__).parent.parent / "search" / "engine.py").read_text()


def test_search_cli_prints_tables(tmp_path: Path) -> None:
    res = CliRunner().invoke(app, ["search", "--task", TASK, "--strategy", "random", "--lm", "fake", "-n", "4",
                                   "--limit", "4", "--test-limit", "3", "--seeds", "cot", "-o",
                                   str(tmp_path / "r"), "-q"])
    assert res.exit_code == 0, res.output
    assert "top systems" in res.output and "held-out test" in res.output and "run folder" in res.output
    flat = " ".join(res.output.split())
    assert "held-out test, the same 3 examples for both: best new system" in flat and "vs best seed" in flat
    assert "(paired 95% CI): too few examples to tell (3;" in flat  # 3 examples support no verdict
    assert "validation+train (4 examples)" in flat


@pytest.mark.parametrize(("args", "message"), [
    (["search", "--lm", "fake"], "give --task"),
    (["search", "--task", "nope", "--lm", "fake"], "unknown task 'nope'"),
    (["search", "--task", TASK, "--strategy", "nosuch", "--lm", "fake", "--seeds", "cot"], "unknown strategy"),
    (["search", "--task", TASK, "--lm", "gpt-4o"], "needs a provider prefix"),
])
def test_search_cli_errors_are_one_line(tmp_path: Path, args: list[str], message: str) -> None:
    res = CliRunner().invoke(app, [*args, "-o", str(tmp_path / "r"), "-q"])
    assert res.exit_code == 1
    assert message in res.output
    assert "Traceback" not in res.output


def test_run_config_errors(tmp_path: Path) -> None:
    bad = tmp_path / "run.yaml"
    bad.write_text("task: gsm8k\nbudget: {max_candidates: 0}\n")
    with pytest.raises(ConfigError, match="budget.max_candidates"):
        RunConfig.load(bad)
    bad.write_text("task: gsm8k\nstrategy: evolve\nbogus: 1\n")
    with pytest.raises(ConfigError, match="bogus: unknown field"):
        RunConfig.load(bad)
    assert RunConfig.from_data({"task": "x", "strategy": "knapsack,evolve"}).strategy == ["knapsack", "evolve"]
