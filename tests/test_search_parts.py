"""The search's parts, each on its own (offline): the evaluation pipeline's one typed result (validated once, the
candidate built from the record the archive stores), the population and its incumbent, the racing policy, the
replay of a stopped run, the retries of incomplete evaluations, and the typed result record from the evaluator's
report to the archive (nothing dropped, redacted field by field)."""

from __future__ import annotations

import importlib
import random
from dataclasses import fields
from pathlib import Path

import pytest

from masforge.archive.memory import MemoryArchive
from masforge.archive.records import ResultRecord, redacted
from masforge.archive.store import Archive
from masforge.errors import ArchiveError, GenomeError
from masforge.evaluators.one_example import ExampleResult
from masforge.evaluators.racing import RaceSettings
from masforge.evaluators.runner import EvalReport, Evaluator
from masforge.evaluators.tasks import Task
from masforge.genome.schema import Genome
from masforge.lm.client import LMClient
from masforge.lm.fake import output_fields
from masforge.search.budget import SearchBudget
from masforge.search.context import Proposal, SearchContext
from masforge.search.events import LoggedCandidate
from masforge.search.fitness import Fitness
from masforge.search.population import Candidate, Population
from masforge.search.racing import RaceTheIncumbent
from masforge.search.replay import Replay, rng_fingerprint
from masforge.search.retries import RETRIES_INCOMPLETE, Retries
from masforge.seeds import load_seed
from masforge.testing import chat_reply

validation = importlib.import_module("masforge.genome.validate")  # the package's name `validate` is the function
TASK = Task.from_callable(lambda out: float(str(out.get("answer", "")).strip() == "4"),
                          examples=[{"question": f"what is 2+{i}?", "id": f"q{i}"} for i in range(3)], name="arith")


def _ctx(archive: MemoryArchive | Archive, run_id: str = "t") -> SearchContext:
    def responder(messages, *args, **kw) -> str:
        return chat_reply(**{name: "4" for name, _ in output_fields(messages)})

    client = LMClient({"worker": "fake", "meta": "fake"}, cache=False, responder=responder)
    return SearchContext(TASK, Evaluator(TASK, client, limit=3, concurrency=1), client, archive, run_id=run_id,
                         budget=SearchBudget(max_candidates=10), seed=0)


def _genome(name: str) -> Genome:
    return Genome(name=name, description=name, agents=[{"id": "a", "instructions": name}],
                  topology={"edges": ["input -> a", "a -> output"]})


def _cand(name: str, values: dict[str, float], fitness: float | None = None) -> Candidate:
    score = sum(values.values()) / max(len(values), 1)
    return Candidate(genome=_genome(name), score=score, fitness=score if fitness is None else fitness,
                     example_values=values)


# ------------------------------------------------------------------------------------------------ the pipeline


def test_the_pipeline_gives_one_typed_result_per_proposal() -> None:
    archive = MemoryArchive()
    ctx = _ctx(archive)
    broken = _genome("broken")
    broken.topology.edges = [("input", "a")]  # nothing reaches the output
    assert ctx.pipeline.run(Proposal(broken), "seed", 0).status == "invalid"
    first = ctx.pipeline.run(Proposal(load_seed("cot")), "seed", 0)
    assert first.status == "evaluated" and first.candidate is not None and first.record is not None
    assert archive.get_result(first.candidate.id, TASK.name, "validation", ctx.evaluator.lm_key) == first.record
    assert first.record.extra["run"] == "t" and first.candidate.llm_calls == first.record.llm_calls > 0
    # A later session of the same run restores it: the candidate its evaluation made, its calls still counted.
    again = _ctx(archive).pipeline.run(Proposal(load_seed("cot")), "seed", 0)
    assert again.status == "restored" and again.record == first.record and again.candidate is not None
    differ = {f.name for f in fields(Candidate) if getattr(again.candidate, f.name) != getattr(first.candidate, f.name)}
    assert differ == {"reused"} and again.candidate.reused
    # Another run restores it too, but did not pay for its answers.
    other = _ctx(archive, run_id="other").pipeline.run(Proposal(load_seed("cot")), "seed", 0)
    assert other.status == "restored" and other.candidate is not None and other.candidate.llm_calls == 0
    ctx.submit(load_seed("cot"))
    dup = ctx.pipeline.run(Proposal(load_seed("cot"), [], "mutate"), "evolve", 1)
    assert dup.status == "duplicate" and dup.candidate is ctx.population[0] and dup.record is None


def test_a_genome_is_validated_once_per_evaluation(monkeypatch: pytest.MonkeyPatch) -> None:
    checked: list[str] = []
    original = validation._problems

    def counting(genome: Genome, known_tools: object = None) -> list[str]:
        checked.append(genome.name)
        return original(genome, known_tools)  # type: ignore[arg-type]

    monkeypatch.setattr(validation, "_problems", counting)
    ctx = _ctx(MemoryArchive())
    genome = load_seed("self_consistency")
    assert ctx.submit(genome) is not None
    assert checked == [genome.name]
    # outside a search, compiling validates as before
    broken = _genome("broken")
    broken.topology.edges = [("input", "a")]
    with pytest.raises(GenomeError, match="genome 'broken'"):
        ctx.evaluator.evaluate(broken)
    assert checked[-1] == "broken"


# ------------------------------------------------------------------------------------------------ the parts


def test_the_population_finds_twins_and_counts_patience() -> None:
    pop = Population()
    a, b = _cand("a", {"x": 1.0}), _cand("b", {"x": 0.0})
    assert pop.add(a) and not pop.add(b) and pop.since_best == 1
    assert pop.twin(_genome("a")) is a and pop.twin(_genome("c")) is None
    pop.incumbent = b
    assert pop.best(2) == [b, a]  # the incumbent first


def test_equally_good_systems_rank_the_cheaper_first_even_at_no_dollar_cost() -> None:
    from masforge.search.engine import SearchResult
    from masforge.search.population import merit

    costly, cheap = _cand("costly", {"x": 1.0}), _cand("cheap", {"x": 1.0})
    costly.tokens, cheap.tokens = 900.0, 300.0  # both free (a local model): only the tokens per example differ
    pop = Population()
    pop.add(costly)
    pop.add(cheap)
    assert pop.best(2) == [cheap, costly]
    assert max([costly, cheap], key=merit) is cheap
    priced = _cand("priced", {"x": 1.0})
    priced.dollars, priced.tokens = 0.01, 10.0
    assert max([priced, costly], key=merit) is costly  # dollars first, then tokens
    result = SearchResult(run_dir=Path("r"), archive_path=Path("a"), config=None, candidates=[costly, cheap],  # type: ignore[arg-type]
                          test_scores=[], spend={}, stop_reason=None)
    assert result.best is cheap and result.top(2) == [cheap, costly]


def test_racing_needs_an_incumbent_with_per_example_results() -> None:
    racing = RaceTheIncumbent(RaceSettings(first=2, batch=2))
    fit = Fitness()
    assert racing.race(None, fit) is None
    assert racing.race(_cand("old", {}, fitness=0.5), fit) is None  # stored before per-example scores were kept
    race = racing.race(_cand("inc", {"q0": 1.0, "q1": 0.0}), fit)
    assert race is not None and race.incumbent_name == "inc" and dict(race.incumbent) == {"q0": 1.0, "q1": 0.0}
    assert (race.first, race.batch) == (2, 2)


def _logged(seq: int, gid: str, rng: str | None) -> LoggedCandidate:
    return LoggedCandidate(t=0.0, id=gid, name="n", score=0.0, dollars=0.0, operator="seed", strategy="seed",
                           reused=False, seq=seq, rng=rng, spent={})


def test_the_replay_checks_each_candidate_against_the_stopped_run() -> None:
    rng = rng_fingerprint(random.Random(0))
    replay = Replay([_logged(1, "b", None), _logged(0, "a", rng), _logged(2, "c", rng)])  # read back out of order
    assert replay.replaying(0) and replay.admit(0, "a", rng) == (True, None)
    assert replay.admit(1, "b", "any") == (True, None)  # an older log kept no fingerprint: the id decides
    replayed, diverged = replay.admit(2, "c", "other")
    assert not replayed and diverged is not None and (diverged.seq, diverged.expected, diverged.got) == (2, "c", "c")
    assert replay.diverged == 2 and not replay.replaying(2) and replay.admit(3, "d", rng) == (False, None)


def _incomplete_report(gid: str) -> EvalReport:
    report = EvalReport(gid, gid, "t", "validation", "lm", planned=2)
    report.examples = [ExampleResult(example_id=f"q{i}", inputs={}, target="", outputs={}, score=0.0, error="429",
                                     unscored=True) for i in range(2)]
    return report


def test_incomplete_evaluations_are_owed_retries_and_an_outage_stops_the_search() -> None:
    retries = Retries(outage_after=3)
    p = Proposal(_genome("flaky"))
    assert retries.incomplete(p, "seed", _incomplete_report("flaky")) is None
    assert retries.incomplete(p, "seed", _incomplete_report("flaky")) is None
    assert [q for q, _ in retries.owed] == [p]  # owed once
    stop = retries.incomplete(p, "seed", _incomplete_report("flaky"))
    assert stop is not None and stop.limit == "outage" and "3 candidates in a row" in stop.message
    assert retries.given_up == [p.genome.id] and RETRIES_INCOMPLETE == 2 and retries.seen == 3
    assert retries.retry(lambda q, s: None, should_stop=lambda: True) == 0 and retries.owed  # stopped: still owed
    assert retries.retry(lambda q, s: _cand("ok", {"q0": 1.0}), should_stop=lambda: False) == 1
    assert retries.owed == [] and retries.unscored_candidates == [p.genome.id]
    retries.complete(_incomplete_report("fine"))  # a complete one breaks the streak
    assert retries.incomplete(p, "seed", _incomplete_report("flaky")) is None


# ------------------------------------------------------------------------------------------------ the result record


def test_the_report_becomes_the_record_the_archive_stores() -> None:
    ctx = _ctx(MemoryArchive())
    report = ctx.evaluator.evaluate(load_seed("cot"))
    record = report.result(run="r")
    summary = report.summary()
    for f in fields(ResultRecord):
        if f.name not in ("extra", "evaluated_at"):
            assert getattr(record, f.name) == summary[f.name], f.name
    assert record.extra == {"run": "r"}


def test_a_stored_result_keeps_the_keys_this_version_does_not_know() -> None:
    stored = {"task": "t", "split": "validation", "lm_key": "m", "score": 0.5, "wall_s": 3.0,
              "extra": {"run": "r", "wall_s": 1.0}}
    rec = ResultRecord.from_dict({**stored, "planned": 8})
    assert rec.extra == {"run": "r", "wall_s": 1.0, "planned": 8}  # what extra names already stays as it is
    assert ResultRecord.from_dict(rec.to_dict()) == rec
    with pytest.raises(ArchiveError, match="invalid result record.*extra must be a JSON object"):
        ResultRecord.from_dict({**stored, "extra": [1]})


def test_a_record_is_redacted_field_by_field(tmp_path: Path) -> None:
    key = "sk-" + "Rec0rd" * 5
    clean = ResultRecord(task="t", split="validation", lm_key="m", score=0.5, example_scores={"q0": 1.0})
    assert redacted(clean) is clean
    leaky = ResultRecord(task="t", split="validation", lm_key="m", score=0.5, example_scores={f"q {key}": 1.0},
                         extra={"failure_notes": [{"error": f"401 {key}"}]})
    safe = redacted(leaky)
    assert key not in repr(safe) and key in repr(leaky)  # the caller's record is left as it was
    assert safe.score == 0.5 and list(safe.example_scores.values()) == [1.0]
    with Archive.open(tmp_path / "arch", create=True) as archive:
        genome = load_seed("cot")
        archive.add(genome)
        archive.add_result(genome.id, leaky)
        assert archive.get_result(genome.id, "t", "validation", "m") == safe
