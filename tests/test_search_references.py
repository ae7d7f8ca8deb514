"""``--reference``: at the end of a search the best new system meets each named reference system (a seed, a genome
file, or ``library``: every shipped seed that runs on the task, raced on the selection set first) on the same
held-out examples, paired; in the CLI, the API, the run configuration and summary.json. On the fake LM."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

import masforge
from masforge.archive.memory import MemoryArchive
from masforge.archive.records import ResultRecord
from masforge.cli import app
from masforge.errors import GenomeError, SandboxUnavailable
from masforge.evaluators.compare import Side
from masforge.evaluators.racing import RaceSettings
from masforge.evaluators.runner import Evaluator
from masforge.evaluators.tasks import Task
from masforge.genome.schema import Genome
from masforge.lm.client import LMClient
from masforge.lm.fake import output_fields
from masforge.search.config import RunConfig
from masforge.search.engine import run_search
from masforge.search.references import check_references, library_seeds, race_library
from masforge.seeds import load_seed, seed_names
from masforge.testing import chat_reply

TASK = "rg:basic_arithmetic"


@pytest.fixture(autouse=True)
def _private_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MASFORGE_CACHE", str(tmp_path / "cache"))


# ------------------------------------------------------------------------------------------------ the library's race


def _reasoners_right(asked: list[str]):
    """A fake LM that answers right only when asked to reason first (chain-of-thought agents), and notes the
    questions it was asked."""

    def respond(messages, info) -> str:
        fields = [name for name, _ in output_fields(messages)]
        asked.append(str(messages[-1]["content"]))
        right = "reasoning" in fields
        return chat_reply(**{name: ("4" if right else "5") if name == "answer" else "so" for name in fields})

    return respond


def _selection(asked: list[str]) -> Evaluator:
    task = Task.from_callable(lambda out: float(str(out.get("answer", "")).strip() == "4"),
                              examples=[{"question": f"what is 2+2? ({i})", "id": f"q{i}"} for i in range(8)],
                              name="four")
    client = LMClient({"worker": "fake"}, cache=False, responder=_reasoners_right(asked))
    return Evaluator(task, client, limit=8, concurrency=2)


def test_the_library_is_raced_and_a_worse_seed_is_dropped_after_its_first_batch() -> None:
    asked: list[str] = []
    selection = _selection(asked)
    cot, io = load_seed("cot"), load_seed("io")
    raced = race_library([cot, io], selection, MemoryArchive(), RaceSettings(first=4, batch=4))
    assert [(r.name, r.score, r.n, r.dropped) for r in raced] == [(cot.name, 1.0, 8, False), (io.name, 0.0, 4, True)]
    assert len(asked) == 8 + 4  # io stopped after its first batch of 4


def test_a_stored_complete_result_is_read_back_and_leads_the_race() -> None:
    asked: list[str] = []
    selection = _selection(asked)
    cot, io = load_seed("cot"), load_seed("io")
    archive = MemoryArchive()
    archive.add(cot)
    archive.add_result(cot.id, ResultRecord(task="four", split=selection.split, lm_key=selection.lm_key, score=1.0,
                                            n=8, example_scores={f"q{i}": 1.0 for i in range(8)}))
    raced = race_library([io, cot], selection, archive, RaceSettings(first=4, batch=4))
    assert [(r.name, r.dropped) for r in raced] == [(cot.name, False), (io.name, True)]
    assert len(asked) == 4  # cot was read back; io raced against it from the start


def test_a_seed_that_cannot_run_here_is_left_out_of_the_race(monkeypatch: pytest.MonkeyPatch) -> None:
    from masforge.evaluators import runner

    real = runner.compile_genome

    def no_sandbox(genome: Genome, client: LMClient, **options: bool):
        if genome.kind == "code":
            raise SandboxUnavailable("the file-system layer is missing")
        return real(genome, client, **options)

    monkeypatch.setattr(runner, "compile_genome", no_sandbox)
    code = load_seed("code_ensemble")
    assert code.kind == "code"
    raced = race_library([load_seed("cot"), code], _selection([]), MemoryArchive(), RaceSettings(first=4, batch=4))
    assert [r.name for r in raced] == [load_seed("cot").name]


def _side(genome: Genome, scores: dict[str, float]) -> Side:
    return Side(genome.name, genome.id, "four", "test", "", scores, 0.0, 0, 0, len(scores))


def test_only_the_best_two_of_the_library_are_compared_and_given_references_come_first() -> None:
    selection = _selection([])
    found = _side(load_seed("step_back"), {f"t{i}": float(i % 2) for i in range(10)})
    held: list[str] = []

    def held_out(genome: Genome) -> Side:
        held.append(genome.name)
        return _side(genome, {f"t{i}": 0.0 for i in range(10)})

    library = [load_seed(n) for n in ("cot", "io", "self_consistency", "plan_and_solve")]
    given = [load_seed("self_consistency")]
    refs = check_references(given, library, found, held_out, selection, MemoryArchive(),
                            RaceSettings(first=4, batch=4), lambda event: None)
    assert [(c.name, c.source) for c in refs.checks] == [
        ("self-consistency", "given"), ("chain-of-thought", "library"), ("plan-and-solve", "library")]
    assert held == ["self-consistency", "chain-of-thought", "plan-and-solve"]  # io was raced out; none twice
    check = refs.checks[0].to_dict()
    assert check["diff"] == pytest.approx(0.5) and check["wins"] == 5 and check["losses"] == 0
    assert check["outcome"] == "too_few"
    lines = refs.lines()
    assert lines[0].startswith("library: 4 shipped seeds raced on validation (8 examples), 1 dropped by the race; "
                               "the best, re-scored on the held-out split as references: chain-of-thought 1.000, "
                               "plan-and-solve 1.000")
    assert lines[1].startswith("reference self-consistency: best found step-back 0.500 vs 0.000 on the same 10 "
                               "held-out examples, difference +0.500 [")
    assert "(paired 95% CI), won 5, lost 0: too few examples to tell (10;" in lines[1]
    assert refs.to_dict()["library"]["held_out"] == ["chain-of-thought", "plan-and-solve"]


def test_without_a_new_system_nothing_is_raced_or_compared() -> None:
    asked: list[str] = []
    refs = check_references([load_seed("io")], [load_seed("cot")], None, lambda g: pytest.fail("scored"),
                            _selection(asked), MemoryArchive(), None, lambda event: None)
    assert refs.checks == [] and refs.library is None and asked == []
    assert refs.lines() == ["references: no new system was re-scored on the held-out split, so there is nothing to "
                            "compare with the references"]


def test_the_library_is_every_seed_that_runs_on_the_task() -> None:
    one_input = Task.from_callable(lambda out: 1.0, name="one")
    two_inputs = Task.from_callable(lambda out: 1.0, name="two", input_fields=("question", "context"))
    assert {g.name for g in library_seeds(one_input)} == {load_seed(n).name for n in seed_names()}
    assert all(set(g.inputs) <= {"question", "context"} for g in library_seeds(two_inputs))


# ------------------------------------------------------------------------------------------------ end to end


def _cfg(tmp_path: Path, **kw: object) -> RunConfig:
    """A small random search on the fake LM, seeded with cot and io."""
    return RunConfig.from_data({"task": TASK, "strategy": "random", "lm": "fake", "seeds": "cot,io", "limit": 6,
                                "test_limit": 5, "test_top_k": 1, "output": str(tmp_path / "runs"),
                                "budget": {"max_candidates": 5}, **kw})


def test_the_search_compares_its_best_new_system_with_each_reference(tmp_path: Path) -> None:
    result = masforge.optimize(TASK, strategy="random", budget=5, lm="fake", seeds=["cot", "io"], limit=6,
                               test_limit=5, output=tmp_path / "runs", references=["io", "self_refine"])
    found, _ = result.versus_seeds()
    refs = result.references
    assert refs is not None and refs.found == found.name and refs.library is None
    assert [c.name for c in refs.checks] == ["io", "self-refine"]
    for check in refs.checks:
        assert check.comparison is not None and check.comparison.n == 5
        assert check.comparison.b.scores == found.example_scores
    io_test = next(t for t in result.test_scores if t.name == "io")
    assert refs.checks[0].comparison.a.scores == io_test.example_scores  # the re-scored seed, read back
    summary = json.loads((result.run_dir / "summary.json").read_text())
    assert [c["name"] for c in summary["references"]["checks"]] == ["io", "self-refine"]
    assert summary["references"]["checks"][1]["n"] == 5 and "diff" in summary["references"]["checks"][1]


def test_search_cli_reference_library_says_which_seeds_went_on(tmp_path: Path) -> None:
    res = CliRunner().invoke(app, ["search", "--task", TASK, "--strategy", "random", "--lm", "fake", "-n", "4",
                                   "--limit", "4", "--test-limit", "3", "--seeds", "cot",
                                   "--reference", "library,self_refine", "-o", str(tmp_path / "r"), "-q"])
    assert res.exit_code == 0, res.output
    flat = " ".join(res.output.split())
    assert "shipped seeds raced on validation+train (4 examples)" in flat
    assert "the best, re-scored on the held-out split as references:" in flat
    assert "reference self-refine: best found" in flat and "on the same 3 held-out examples" in flat
    summary = json.loads(next((tmp_path / "r").glob("*/summary.json")).read_text())
    refs = summary["references"]
    assert len(refs["library"]["raced"]) == len(seed_names())
    assert 1 <= len(refs["library"]["held_out"]) <= 2
    assert [c["source"] for c in refs["checks"]] == ["given"] + ["library"] * len(refs["library"]["held_out"])


def test_references_in_the_run_configuration_and_on_a_resume(tmp_path: Path) -> None:
    path = tmp_path / "run.yaml"
    path.write_text(f"task: {TASK}\nreferences: library, io\n")
    assert RunConfig.load(path).references == ["library", "io"]
    first = run_search(_cfg(tmp_path), progress=False)
    assert first.references is None
    again = run_search(RunConfig.from_data({"task": TASK, "references": ["self_refine"]}), resume=first.run_dir,
                       progress=False)
    assert again.references is not None and [c.name for c in again.references.checks] == ["self-refine"]
    assert RunConfig.load(first.run_dir / "config.yaml").references == ["self_refine"]


def test_a_bad_reference_is_one_line_before_anything_runs(tmp_path: Path) -> None:
    with pytest.raises(GenomeError, match="'nosuch' is neither a genome file, a seed .* nor 'library'"):
        run_search(_cfg(tmp_path, references=["nosuch"]), progress=False)
    two = tmp_path / "two.yaml"
    two.write_text("name: two\ninputs: [question, context]\nagents: [{id: answerer}]\n"
                   "topology: {edges: [input -> answerer, answerer -> output]}\n")
    with pytest.raises(GenomeError, match="reference two: genome 'two' inputs"):
        run_search(_cfg(tmp_path, references=[str(two)]), progress=False)
    assert not (tmp_path / "runs").exists()
    res = CliRunner().invoke(app, ["search", "--task", TASK, "--lm", "fake", "--reference", "nosuch", "-o",
                                   str(tmp_path / "r"), "-q"])
    assert res.exit_code == 1 and "'nosuch' is neither" in res.output and "Traceback" not in res.output


def test_with_no_held_out_stage_the_references_say_so(tmp_path: Path) -> None:
    result = run_search(_cfg(tmp_path, test_top_k=0, references=["io"]), progress=False)
    assert result.references is not None and result.references.checks == []
    assert "no held-out stage ran" in result.references.lines()[0]
