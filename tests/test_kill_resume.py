"""The kill-and-resume harness at CI size (``masforge.testing.kill_resume``): SIGKILL a running search a few
times, resume it each time; nothing finished is lost or repeated, the archive stays whole, the final candidates
equal an uninterrupted run's and the ledger counts every request. The soak run is ``bench/kill_resume.py``."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from masforge.search.config import RunConfig
from masforge.search.engine import run_search
from masforge.testing.kill_resume import kill_and_resume, kill_trials

# Atomic archive creation lives in its own module; until it is there, a kill while the archive is being created
# leaves a folder no resume accepts, so that moment is only tried where creation is atomic.
ATOMIC_CREATION = importlib.util.find_spec("masforge.archive.creation") is not None


def test_kills_at_random_moments_lose_and_repeat_nothing(tmp_path: Path) -> None:
    report = kill_and_resume(tmp_path / "harness", kills=3, seed=5, strategy="evolve", candidates=6,
                             kill_in_creation=ATOMIC_CREATION)
    assert report.kills + report.finished_before_kill == 3
    assert not report.session_failures, report.session_failures
    assert not report.fsck_failures and not report.index_mismatches
    assert not report.lost and not report.repeated
    assert report.final_equal and report.diverged_at is None
    assert report.requests <= report.ledger_calls <= report.requests + report.unsettled
    assert report.ok


def test_resume_replays_the_same_candidates_without_writing_them_twice(tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MASFORGE_CACHE", str(tmp_path / "cache"))

    def cfg(name: str, n: int) -> RunConfig:
        return RunConfig.from_data({"task": "rg:basic_arithmetic", "strategy": ["evolve"],
                                    "lm": "fake", "seeds": ["cot", "io", "self_refine"], "limit": 3,
                                    "test_top_k": 0, "output": str(tmp_path / "runs"), "name": name, "seed": 4,
                                    "budget": {"max_candidates": n}})

    # Each search has an answer cache of its own: which proposals are free (tried first) depends on what the cache
    # holds, so the uninterrupted run must start from the same empty cache the stopped one did.
    monkeypatch.setenv("MASFORGE_LM_CACHE", str(tmp_path / "whole.sqlite"))
    whole = run_search(cfg("whole", 14), progress=False)
    monkeypatch.setenv("MASFORGE_LM_CACHE", str(tmp_path / "parts.sqlite"))
    first = run_search(cfg("parts", 14).model_copy(update={"budget": cfg("x", 6).budget}), progress=False)
    assert len(first.candidates) == 6
    resumed = run_search(RunConfig.from_data({"task": "x", "budget": {"max_candidates": 14}}),
                         resume=first.run_dir, progress=False)
    # Same seed, same path (a pipeline would differ: its stages share the candidate budget, so raising it moves
    # the stage boundaries; the replay then says so, as the next test shows).
    assert [c.id for c in resumed.candidates] == [c.id for c in whole.candidates]
    assert resumed.stats["replayed"] == 6 and resumed.stats["diverged_at"] is None
    assert resumed.stop_reason == whole.stop_reason == "max_candidates"
    rows = [json.loads(line) for line in (first.run_dir / "events.jsonl").read_text().splitlines()]
    ids = [r["id"] for r in rows if r["event"] == "candidate"]
    assert ids == [c.id for c in resumed.candidates]  # each candidate written once, in order
    assert [r["seq"] for r in rows] == list(range(14))


def test_a_replay_that_takes_another_path_is_detected(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MASFORGE_CACHE", str(tmp_path / "cache"))
    data = {"task": "rg:basic_arithmetic", "strategy": ["random"], "lm": "fake", "seeds": ["cot", "io"], "limit": 2,
            "test_top_k": 0, "output": str(tmp_path / "runs"), "name": "r", "budget": {"max_candidates": 4}}
    first = run_search(RunConfig.from_data(data), progress=False)
    log = first.run_dir / "events.jsonl"
    rows = [json.loads(line) for line in log.read_text().splitlines()]
    rows[3]["rng"] = "0" * 12  # as if the stopped run had drawn other random numbers
    log.write_text("".join(json.dumps(r) + "\n" for r in rows))
    resumed = run_search(RunConfig.from_data({"task": "x", "budget": {"max_candidates": 6}}), resume=first.run_dir,
                         progress=False)
    assert resumed.stats["diverged_at"] == 3 and len(resumed.candidates) == 6


def test_a_resume_raises_only_the_limits_it_names(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MASFORGE_CACHE", str(tmp_path / "cache"))
    first = run_search(RunConfig.from_data({
        "task": "rg:basic_arithmetic", "strategy": ["random"], "lm": "fake", "seeds": ["cot", "io"], "limit": 2,
        "test_top_k": 0, "output": str(tmp_path / "runs"), "budget": {"max_candidates": 3, "max_calls": 4}}),
        progress=False)
    assert first.stop_reason == "llm_calls"
    resumed = run_search(RunConfig.from_data({"task": "x", "budget": {"max_calls": 10_000}}), resume=first.run_dir,
                         progress=False)
    assert resumed.config.budget.max_candidates == 3 and resumed.config.budget.max_calls == 10_000
    assert resumed.stop_reason == "max_candidates" and len(resumed.candidates) == 3
    assert resumed.spend["llm_calls"] >= first.spend["llm_calls"]  # the same ledger goes on


def test_single_kills_resume_to_the_same_scores(tmp_path: Path) -> None:
    report = kill_trials(tmp_path / "trials", trials=3, seed=7, strategy="evolve", candidates=6)
    assert report.trials == 3 and not report.failures, report.failures
    assert report.matched == 3, report.mismatches  # candidates, validation and held-out scores, each trial


def test_a_resumed_tune_run_rebuilds_its_study_to_the_uninterrupted_run(tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """The resume replays the run from its start, so the tune study in the run folder is rebuilt, not continued:
    continued, its trial count would seed the sampler and the replay would leave the path at candidate 2."""
    import optuna

    from masforge.search.strategies.tune import STUDY_FILE

    monkeypatch.setenv("MASFORGE_CACHE", str(tmp_path / "cache"))

    def cfg(name: str, n: int) -> RunConfig:
        return RunConfig.from_data({"task": "rg:basic_arithmetic", "strategy": ["tune"], "lm": "fake",
                                    "seeds": ["cot", "io"], "limit": 2, "test_top_k": 0, "seed": 3,
                                    "output": str(tmp_path / "runs"), "name": name, "budget": {"max_candidates": n}})

    whole = run_search(cfg("whole", 10), progress=False)
    first = run_search(cfg("parts", 5), progress=False)
    assert (first.run_dir / STUDY_FILE).is_file()
    resumed = run_search(RunConfig.from_data({"task": "x", "budget": {"max_candidates": 10}}), resume=first.run_dir,
                         progress=False)
    assert resumed.stats["diverged_at"] is None
    assert [(c.id, c.score) for c in resumed.candidates] == [(c.id, c.score) for c in whole.candidates]

    def trials(run_dir: Path) -> list[dict[str, object]]:
        storage = f"sqlite:///{run_dir / STUDY_FILE}"
        study = optuna.load_study(study_name=optuna.get_all_study_names(storage)[0], storage=storage)
        return [t.params for t in study.trials]

    assert trials(resumed.run_dir) == trials(whole.run_dir)  # no trial of the stopped run is there twice
