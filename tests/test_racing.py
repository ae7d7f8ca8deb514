"""Racing: candidates scored in batches against the incumbent, dropped once a paired test says they are worse;
the selection set as a union of splits; the incumbent changes only on a whole-set paired comparison."""

from __future__ import annotations

import pytest

from masforge.errors import ConfigError, TaskError
from masforge.evaluators.one_example import ExampleResult
from masforge.evaluators.racing import Race, RaceSettings
from masforge.evaluators.runner import Evaluator
from masforge.evaluators.tasks import Task
from masforge.genome.schema import Genome
from masforge.lm.client import LMClient
from masforge.search.acceptance import PairedWin, Win
from masforge.search.config import RunConfig
from masforge.search.population import Candidate
from masforge.seeds import load_seed
from tests.test_lm_runner import counting_fake, question_task


def _result(i: int, score: float) -> ExampleResult:
    return ExampleResult(f"e{i}", {}, "", {}, score)


def test_batches_are_the_first_then_equal_steps():
    race = Race({}, first=4, batch=3)
    batches = race.batches(list(range(12)))  # type: ignore[arg-type]
    assert [len(b) for b in batches] == [4, 3, 3, 2]
    assert [x for b in batches for x in b] == list(range(12))


def test_a_candidate_that_only_loses_is_behind_and_one_that_ties_is_not():
    incumbent = {f"e{i}": 1.0 if i % 2 else 0.0 for i in range(16)}
    losing = [_result(i, 0.0) for i in range(16)]  # loses the 8 the incumbent solved, wins none
    look = Race(incumbent).look(losing)
    assert look is not None and look.n == 16 and look.diff == -0.5 and look.behind
    tying = [_result(i, incumbent[f"e{i}"]) for i in range(16)]
    look = Race(incumbent).look(tying)
    assert look is not None and look.diff == 0.0 and not look.behind


def test_one_loss_among_ties_is_not_enough_to_drop():
    incumbent = {f"e{i}": 1.0 for i in range(16)}
    results = [_result(i, 1.0) for i in range(15)] + [_result(15, 0.0)]
    look = Race(incumbent).look(results)
    assert look is not None and look.diff < 0 and not look.behind  # one problem in 16 is noise


def test_unscored_and_unknown_examples_are_left_out_of_the_look():
    incumbent = {"e0": 1.0}
    unscored = ExampleResult("e0", {}, "", {}, 0.0, error="down", error_kind="lm", unscored=True)
    assert Race(incumbent).look([unscored, _result(7, 0.0)]) is None


def test_the_evaluator_drops_a_worse_candidate_after_its_first_batch():
    calls, responder = counting_fake()
    client = LMClient({"worker": "fake"}, cache=False, responder=responder)
    task = question_task(48, metric=lambda outputs: 0.0)
    ev = Evaluator(task, client, limit=48, concurrency=4)
    incumbent = {ex.id: 1.0 for ex in ev.examples}
    report = ev.evaluate(load_seed("cot"), race=RaceSettings(first=8, batch=8).against(incumbent, "io"))
    assert report.pruned and report.n == 8 and len(calls) == 8
    assert len(report.looks) == 1 and report.looks[0].behind
    assert report.summary()["race"][0]["n"] == 8


def test_the_evaluator_runs_a_candidate_that_keeps_up_to_the_end():
    client = LMClient({"worker": "fake"}, cache=False)
    task = question_task(24)  # the fake LM answers "What is i + i?" right: the candidate ties the incumbent
    ev = Evaluator(task, client, limit=24, concurrency=4)
    incumbent = {ex.id: 1.0 for ex in ev.examples}
    report = ev.evaluate(load_seed("cot"), race=RaceSettings(first=8, batch=8).against(incumbent, "io"))
    assert not report.pruned and report.n == 24 and report.complete
    assert [look.n for look in report.looks] == [8, 16, 24]
    assert report.summary()["example_scores"] == {ex.id: 1.0 for ex in ev.examples}


def test_a_union_of_splits_is_validation_then_train_without_repeats():
    examples = {s: [{"id": f"{s}/{i}", "question": "q", "answer": "a"} for i in range(3)]
                for s in ("train", "validation", "test")}
    from masforge.evaluators.example import Example

    task = Task("t", {s: [Example(e["id"], {"question": e["question"]}, e["answer"]) for e in v]
                      for s, v in examples.items()}, "exact_match")
    assert [e.id for e in task.split("validation+train")] == [*(f"validation/{i}" for i in range(3)),
                                                              *(f"train/{i}" for i in range(3))]
    assert [e.id for e in task.split("validation+train", limit=4)][-1] == "train/0"
    shared = question_task(5)  # a task from a callable: every split holds the same examples
    assert len(shared.split("validation+train")) == 5
    with pytest.raises(TaskError, match="unknown split 'valid'"):
        task.split("valid+train")


def test_a_search_never_selects_on_its_held_out_split():
    assert RunConfig(task="humaneval").split == "validation+train"
    with pytest.raises(ConfigError, match="includes the held-out split 'test'"):
        RunConfig.from_data({"task": "humaneval", "split": "validation+test"})


def _cand(name: str, values: dict[str, float], pruned: bool = False) -> Candidate:
    g = Genome(name=name, description=name, agents=[{"id": "a", "instructions": name}],
               topology={"edges": ["input -> a", "a -> output"]})
    score = sum(values.values()) / max(len(values), 1)
    return Candidate(genome=g, score=score, fitness=score, pruned=pruned, example_values=values)


def test_the_incumbent_changes_only_on_a_whole_set_paired_win():
    accept = PairedWin()
    first = _cand("first", {"a": 1.0, "b": 0.0, "c": 0.0})
    assert accept.accepts(_cand("dropped", {"a": 1.0}, pruned=True), None) is None  # never, even as the first
    assert accept.accepts(first, None) == Win()  # the first candidate scored on the whole set
    # a race stopped it: never the incumbent
    assert accept.accepts(_cand("dropped", {"a": 1.0, "b": 1.0}, pruned=True), first) is None
    assert accept.accepts(_cand("tie", {"a": 0.0, "b": 1.0, "c": 0.0}), first) is None  # the same mean: it stays
    win = accept.accepts(_cand("better", {"a": 1.0, "b": 1.0, "c": 0.0}), first)
    assert win is not None and win.n == 3 and win.diff == pytest.approx(1 / 3)


def test_the_search_command_races_unless_told_not_to(monkeypatch: pytest.MonkeyPatch):
    from typer.testing import CliRunner

    from masforge.cli.commands import app
    from masforge.search import engine

    seen: list[RunConfig] = []

    class Stop(Exception):
        pass

    def fake_run(cfg: RunConfig, **_: object) -> None:
        seen.append(cfg)
        raise Stop

    monkeypatch.setattr(engine, "check_run", lambda cfg: None)
    monkeypatch.setattr(engine, "run_search", fake_run)
    for flags, race in (([], True), (["--no-race"], False)):
        CliRunner().invoke(app, ["search", "--task", "rg:basic_arithmetic", "--lm", "fake", *flags])
        assert seen[-1].race is race and seen[-1].split == "validation+train"
