"""One contract, every archive (the way optuna runs one storage suite over every storage): the git archive and the
in-memory archive declare the Protocols of ``masforge.archive.protocol`` and behave alike under each test below:
add, results, queries, lineage, claims and resume. Resume is what each archive offers: the git archive is opened
again from its folder, the in-memory archive is handed over as the same object (it does not outlive its process)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from masforge.archive.memory import MemoryArchive
from masforge.archive.protocol import ArchiveLike, ClaimingArchive, LineageArchive, ResumableArchive
from masforge.archive.records import CandidateRecord, ResultRecord
from masforge.archive.store import Archive
from masforge.errors import ArchiveError
from masforge.genome.schema import Agent, Genome, Topology

PROTOCOLS = (ArchiveLike, ResumableArchive, LineageArchive, ClaimingArchive)


class Subject:
    """An archive under test, and how a resumed run gets it back."""

    def __init__(self, kind: str, folder: Path) -> None:
        self.kind, self.folder = kind, folder
        self.archive: Archive | MemoryArchive = (Archive.open(folder, create=True) if kind == "git"
                                                 else MemoryArchive())

    def reopen(self) -> Archive | MemoryArchive:
        """What a resumed run is given: the git archive opened again from its folder (any process may), the
        in-memory archive as the same object (only this process has it)."""
        if isinstance(self.archive, Archive):
            self.archive.close()
            self.archive = Archive.open(self.folder)
        return self.archive

    def close(self) -> None:
        if isinstance(self.archive, Archive):
            self.archive.close()


@pytest.fixture(params=["git", "memory"])
def subject(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Subject]:
    made = Subject(request.param, tmp_path / "archive")
    yield made
    made.close()


def genome(name: str, temperature: float = 0.0) -> Genome:
    return Genome(name=name, description=f"{name} for the contract",
                  agents=[Agent(id="a", role="solver", instructions=f"Answer as {name}.", temperature=temperature)],
                  topology=Topology(edges=[("input", "a"), ("a", "output")]))


def result(score: float, dollars: float = 0.01, task: str = "t", split: str = "validation",
           lm_key: str = "lm") -> ResultRecord:
    return ResultRecord(task=task, split=split, lm_key=lm_key, score=score, dollars=dollars, n=4, tokens=40,
                        llm_calls=4, failures={"wrong": 1}, example_scores={"q1": 1.0, "q2": score},
                        example_dollars={"q1": dollars}, extra={"run": "r1", "failure_notes": [{"error": "x"}]})


def ids(records: list[CandidateRecord]) -> list[str]:
    return [r.genome_id for r in records]


# ------------------------------------------------------------------------------------------------ declared


def test_both_archives_declare_every_protocol(subject: Subject) -> None:
    for protocol in PROTOCOLS:
        assert protocol in type(subject.archive).__mro__, protocol.__name__  # declared, not just shaped alike
        assert isinstance(subject.archive, protocol)


# ------------------------------------------------------------------------------------------------ add


def test_add_stores_a_candidate_once(subject: Subject) -> None:
    archive = subject.archive
    seed = genome("seed")
    record = archive.add(seed, strategy="seed", operator="seed", rationale="hand-made", generation=0, run="r1")
    assert (record.genome_id, record.name, record.kind, record.parents) == (seed.id, "seed", "config", [])
    assert (record.strategy, record.operator, record.rationale, record.run) == ("seed", "seed", "hand-made", "r1")
    again = archive.add(seed, strategy="evolve", rationale="other words", generation=3, run="r2")
    assert (again.strategy, again.rationale, again.generation, again.run) == ("seed", "hand-made", 0, "r1")
    assert len(archive.list()) == 1
    stored = archive.genome(seed.id[:10])
    assert stored.id == seed.id and stored == seed
    stored.name = "changed"  # a copy: the archive keeps its own
    assert archive.genome(seed.id).name == "seed"


def test_parents_are_stored_candidates_each_once_in_order(subject: Subject) -> None:
    archive = subject.archive
    a, b, child = genome("a"), genome("b"), genome("child")
    with pytest.raises(ArchiveError, match="not in the archive"):
        archive.add(child, parents=[a])
    with pytest.raises(ArchiveError, match="unknown candidate id"):
        archive.add(child, parents=[a.id])
    archive.add(a)
    archive.add(b)
    with pytest.raises(ArchiveError, match="invalid candidate id"):
        archive.add(child, parents=["not-hex"])
    record = archive.add(child, parents=[b.id[:8], a, b], strategy="evolve", operator="crossover", generation=1)
    assert record.parents == [b.id, a.id]
    assert archive.get(child.id).parents == [b.id, a.id]


# ------------------------------------------------------------------------------------------------ results


def test_results_are_found_by_exactly_their_key(subject: Subject) -> None:
    archive = subject.archive
    g = genome("g")
    with pytest.raises(ArchiveError, match="unknown candidate id"):
        archive.add_result(g.id, result(0.5))
    archive.add(g)
    assert archive.get_result(g.id, "t", "validation", "lm") is None
    stored = result(0.5)
    record = archive.add_result(g.id, stored)
    assert [r.key for r in record.results] == [("t", "validation", "lm")]
    found = archive.get_result(g.id, "t", "validation", "lm")
    assert found is not None and found.to_dict() == stored.to_dict()
    for other in (("u", "validation", "lm"), ("t", "test", "lm"), ("t", "validation", "lm2")):
        assert archive.get_result(g.id, *other) is None
    archive.add_result(g.id, result(0.75, task="t", split="test"))
    archive.add_result(g.id, result(0.25))  # the same key: replaced
    found = archive.get_result(g.id, "t", "validation", "lm")
    assert found is not None and found.score == 0.25
    assert [(r.key, r.score) for r in archive.get(g.id).results] == [(("t", "test", "lm"), 0.75),
                                                                      (("t", "validation", "lm"), 0.25)]


# ------------------------------------------------------------------------------------------------ queries


def test_list_filters_and_ranks_alike(subject: Subject) -> None:
    archive = subject.archive
    cheap, best, unscored, other_run = genome("cheap"), genome("best"), genome("unscored"), genome("other run")
    archive.add(cheap, run="r1")
    archive.add(best, parents=[cheap], strategy="evolve", operator="mutate", generation=1, run="r1")
    archive.add(unscored, parents=[best], strategy="evolve", operator="mutate", generation=2, run="r1")
    archive.add(other_run, strategy="swarm", run="r2")
    archive.add_result(cheap.id, result(0.5, dollars=0.001))
    archive.add_result(best.id, result(0.9, dollars=0.05))
    archive.add_result(other_run.id, result(0.7, dollars=0.01, split="test"))
    assert ids(archive.list()) == [best.id, other_run.id, cheap.id, unscored.id]
    assert ids(archive.list(sort="cost")) == [cheap.id, other_run.id, best.id, unscored.id]
    assert ids(archive.list(sort="generation")) == [unscored.id, best.id, other_run.id, cheap.id]
    assert ids(archive.list(sort="created")) == [other_run.id, unscored.id, best.id, cheap.id]
    assert ids(archive.list(task="t", split="validation")) == [best.id, cheap.id]
    assert ids(archive.list(split="test")) == [other_run.id]
    assert ids(archive.list(run="r1", sort="created", limit=2)) == [unscored.id, best.id]
    assert ids(archive.list(strategy="evolve", kind="config")) == [best.id, unscored.id]
    assert archive.list(kind="code") == []
    with pytest.raises(ArchiveError, match="unknown sort"):
        archive.list(sort="fame")
    with pytest.raises(ArchiveError, match="unknown candidate id"):
        archive.get("abc")


# ------------------------------------------------------------------------------------------------ lineage


def test_lineage_walks_parents_and_children(subject: Subject) -> None:
    archive = subject.archive
    a, b = genome("a"), genome("b")
    child, grandchild, cousin = genome("child"), genome("grandchild"), genome("cousin")
    archive.add(a)
    archive.add(b)
    archive.add(child, parents=[a, b], operator="crossover", generation=1)
    archive.add(cousin, parents=[b], operator="mutate", generation=1)
    archive.add(grandchild, parents=[child], operator="mutate", generation=2)
    ancestors, descendants = archive.lineage(grandchild.id)
    assert ids(ancestors)[-1] == child.id and set(ids(ancestors)) == {a.id, b.id, child.id}
    assert descendants == []
    assert ids(archive.lineage(grandchild.id, depth=1).ancestors) == [child.id]
    ancestors, descendants = archive.lineage(b.id[:9])
    assert ancestors == [] and set(ids(descendants)) == {child.id, cousin.id, grandchild.id}
    assert ids(descendants)[-1] == grandchild.id
    assert set(ids(archive.lineage(b.id, depth=1).descendants)) == {child.id, cousin.id}
    tree = archive.lineage(grandchild.id).ancestor_tree(archive.get(grandchild.id))
    assert [n.record.genome_id for n in tree.children] == [child.id]
    assert [n.record.genome_id for n in tree.children[0].children] == [a.id, b.id]


# ------------------------------------------------------------------------------------------------ claims


def test_a_claimed_key_is_held_until_released(subject: Subject) -> None:
    archive = subject.archive
    held = archive.claim("abc", "t", "validation", "lm", run="r1")
    assert held is not None
    assert archive.claim("abc", "t", "validation", "lm", stop=lambda: "stopped") is None  # gives up at once
    other = archive.claim("abc", "t", "test", "lm", stop=lambda: "stopped")  # another key is free
    assert other is not None
    other.release()
    waits: list[dict] = []
    got: list[object] = []
    waiter = threading.Thread(target=lambda: got.append(archive.claim("abc", "t", "validation", "lm", run="r2",
                                                                        on_wait=waits.append)))
    waiter.start()
    started = time.monotonic()
    while not waits and time.monotonic() - started < 10:
        time.sleep(0.01)
    assert [w.get("run") for w in waits] == ["r1"] and not got  # told once who holds it, and waiting
    held.release()
    waiter.join(timeout=10)
    assert len(got) == 1 and got[0] is not None and [w.get("run") for w in waits] == ["r1"]
    got[0].release()  # type: ignore[union-attr]


# ------------------------------------------------------------------------------------------------ resume


def test_a_resumed_run_finds_everything_stored(subject: Subject) -> None:
    archive = subject.archive
    a, b, c = genome("a"), genome("b", 0.5), genome("c")
    archive.add(a, run="r1")
    archive.add(b, parents=[a], generation=1, strategy="evolve", operator="mutate", run="r1")
    archive.add(c, run="r0")
    archive.add_result(a.id, result(0.4))
    stored = result(0.6)
    archive.add_result(b.id, stored)
    before = {g.id: archive.get(g.id).to_dict() for g in (a, b, c)}

    archive = subject.reopen()
    assert {g.id: archive.get(g.id).to_dict() for g in (a, b, c)} == before
    assert ids(archive.list(run="r1", sort="created")) == [b.id, a.id]
    assert archive.genome(b.id) == b
    found = archive.get_result(b.id, "t", "validation", "lm")
    assert found is not None and found.to_dict() == stored.to_dict()
    assert ids(archive.lineage(b.id).ancestors) == [a.id]
    assert archive.add(a).to_dict() == before[a.id]  # nothing is stored twice


def test_a_search_resumes_from_either_archive_without_paying_twice(subject: Subject, tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    from masforge.search.config import RunConfig
    from masforge.search.engine import run_search

    monkeypatch.setenv("MASFORGE_CACHE", str(tmp_path / "cache"))
    first = run_search(RunConfig.from_data({
        "task": "rg:basic_arithmetic", "strategy": ["evolve"], "lm": "fake", "seeds": ["cot", "io"], "limit": 2,
        "test_top_k": 0, "output": str(tmp_path / "runs"), "seed": 4, "budget": {"max_candidates": 3}}),
        archive=subject.archive, progress=False)
    resumed = run_search(RunConfig.from_data({"task": "x", "budget": {"max_candidates": 5}}), resume=first.run_dir,
                         archive=subject.reopen(), progress=False)
    assert resumed.stats["replayed"] == 3 and resumed.stats["restored"] == 3  # the first three came back, unpaid
    assert [c.id for c in resumed.candidates][:3] == [c.id for c in first.candidates]
    assert len(resumed.candidates) == 5
    assert all(len(subject.archive.get(c.id).results) == 1 for c in resumed.candidates)  # each stored once
