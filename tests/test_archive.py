"""The git-versioned candidate archive: round trips, lineage in git, idempotence, result lookup, index
rebuilds, crash safety under SIGKILL, concurrent writers, prefix ids and the ``masforge archive`` CLI."""

from __future__ import annotations

import json
import os
import random
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import git
import pytest
from typer.testing import CliRunner

from masforge.archive.index import ArchiveIndex
from masforge.archive.records import CandidateRecord, ResultRecord
from masforge.archive.store import INDEX_FILE, Archive, result_filename
from masforge.cli import archive as cli_archive
from masforge.errors import ArchiveError
from masforge.genome.schema import Agent, Genome, Topology

ROOT = Path(__file__).resolve().parents[1]
ENV = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}


def config_genome(name: str, instructions: str = "Answer the question.", temperature: float | None = None,
                  agents: int = 1, module: str = "predict") -> Genome:
    ids = [f"a{k}" for k in range(agents)]
    edges = [("input", ids[0]), *zip(ids, ids[1:], strict=False), (ids[-1], "output")]
    return Genome(
        name=name,
        description=f"{name} for tests",
        agents=[Agent(id=i, role="solver", instructions=f"{instructions} ({i})", module=module,  # type: ignore[arg-type]
                      temperature=temperature) for i in ids],
        topology=Topology(edges=edges),
        metadata={"note": "metadata is not part of the id"},
    )


def code_genome(name: str, answer: str = "42") -> Genome:
    code = f"def forward(inputs):\n    # always the same\n    return {{'answer': '{answer}'}}\n"
    return Genome(kind="code", name=name, description="a code genome", code=code)


def result(score: float, task: str = "gsm8k", split: str = "dev", lm_key: str = "lm-a", dollars: float = 0.01,
           **kw: object) -> ResultRecord:
    return ResultRecord(task=task, split=split, lm_key=lm_key, score=score, dollars=dollars, **kw)  # type: ignore[arg-type]


def git_out(path: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=path, capture_output=True, text=True, check=True).stdout


def fsck_clean(path: Path) -> None:
    proc = subprocess.run(["git", "fsck", "--strict", "--no-dangling"], cwd=path, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    bad = [line for line in (proc.stdout + proc.stderr).splitlines()
           if any(w in line for w in ("error", "missing", "broken", "corrupt", "fatal"))]
    assert not bad, bad


def commit_parents(path: Path, sha: str) -> list[str]:
    return [p.hexsha for p in git.Repo(path).commit(sha).parents]


@pytest.fixture()
def arch(tmp_path: Path) -> Archive:
    a = Archive.open(tmp_path / "archive", create=True)
    yield a
    a.close()


# --------------------------------------------------------------------------------------------------
# records


def test_records_json_round_trip():
    r = result(0.75, ci_low=0.6, ci_high=0.9, n=40, tokens=1234, llm_calls=80, latency_s=1.5,
               failures={"timeout": 2}, extra={"notes": ["x"]})
    assert ResultRecord.from_json(r.to_json()) == r
    c = CandidateRecord(genome_id="ab" * 32, name="x", parents=["cd" * 32], tags=["t"], results=[r])
    assert CandidateRecord.from_json(c.to_json()) == c
    meta = json.loads(c.meta_json())
    assert "results" not in meta and "commit" not in meta
    assert CandidateRecord.from_dict({**meta, "future_field": 1}).results == []  # unknown keys are ignored
    with pytest.raises(ValueError, match="score"):
        result(1.5)
    with pytest.raises(ArchiveError, match="invalid result record"):
        ResultRecord.from_dict({"task": "t", "split": "s", "lm_key": "k", "score": -1})


# --------------------------------------------------------------------------------------------------
# storing and reading


def test_round_trip_config_and_code_genomes(arch: Archive):
    cfg = config_genome("cfg", temperature=0.7, agents=2)
    code = code_genome("coder")
    rc = arch.add(cfg, rationale="start here", run="r1", tags=["baseline"])
    rk = arch.add(code)
    assert rc.genome_id == cfg.id and rk.genome_id == code.id and rk.kind == "code"
    back = arch.genome(cfg.id)
    assert back.id == cfg.id and back.name == "cfg" and back.metadata == cfg.metadata
    back_code = arch.genome(code.id[:10])
    assert back_code.id == code.id and back_code.kind == "code" and "always the same" in (back_code.code or "")
    files = git_out(arch.path, "ls-tree", "-r", "--name-only", f"refs/candidates/{code.id}")
    assert f"candidates/{code.id}/genome.py" in files and f"candidates/{code.id}/meta.json" in files
    files = git_out(arch.path, "ls-tree", "-r", "--name-only", f"refs/candidates/{cfg.id}")
    assert f"candidates/{cfg.id}/genome.yaml" in files
    got = arch.get(cfg.id[:8])
    assert (got.name, got.rationale, got.run, got.tags, got.status) == ("cfg", "start here", "r1", ["baseline"],
                                                                         "active")
    assert got.commit == rc.commit and len(arch) == 2 and cfg.id in arch and cfg in arch
    assert git_out(arch.path, "status", "--porcelain") == ""  # the checkout of main stays clean


def test_lineage_seed_mutation_crossover_in_git(arch: Archive):
    a, b = config_genome("a", "Solve it."), config_genome("b", "Think first.", module="chain_of_thought")
    ra, rb = arch.add(a), arch.add(b)
    m = config_genome("a", "Solve it.", temperature=0.2)
    rm = arch.add(m, parents=[a], strategy="evolutionary", operator="mutate", rationale="cooler", generation=1)
    x = config_genome("x", "Think first.", temperature=0.2, agents=2)
    rx = arch.add(x, parents=[rm.genome_id[:10], b.id], strategy="evolutionary", operator="crossover", generation=2)
    # git parents mirror the phylogeny: seed -> none, mutation -> one, crossover -> merge of two
    assert commit_parents(arch.path, ra.commit) == []
    assert commit_parents(arch.path, rm.commit) == [ra.commit]
    assert commit_parents(arch.path, rx.commit) == [rm.commit, rb.commit]
    subject = git_out(arch.path, "log", "-1", "--format=%s", rm.commit).strip()
    assert subject.startswith(f"mutate {a.id[:12]} -> {m.id[:12]}: ") and "temperature" in subject
    assert len(subject) <= 72
    xsubject = git_out(arch.path, "log", "-1", "--format=%s", rx.commit).strip()
    assert xsubject.startswith("crossover ") and len(xsubject) <= 72
    assert "cooler" in git_out(arch.path, "log", "-1", "--format=%B", rm.commit)
    # every candidate is reachable from main; main's first-parent chain is the event log
    for rec in (ra, rb, rm, rx):
        subprocess.run(["git", "merge-base", "--is-ancestor", rec.commit, "main"], cwd=arch.path, check=True)
    assert len(git_out(arch.path, "log", "--first-parent", "--format=%H", "main").split()) == 5  # init + 4 adds
    ancestors, descendants = arch.lineage(x.id)
    assert [r.genome_id for r in ancestors] == [a.id, b.id, m.id] and descendants == []
    lin = arch.lineage(a.id)
    assert lin.ancestors == [] and [r.genome_id for r in lin.descendants] == [m.id, x.id]
    assert [r.genome_id for r in arch.lineage(a.id, depth=1).descendants] == [m.id]
    tree = arch.lineage(x.id).ancestor_tree(arch.get(x.id))
    assert sorted(n.record.name for n in tree.children) == ["a", "b"]
    assert arch.get(x.id).parents == [m.id, b.id]
    # a DAG (y's parents are m and m's own parent a): a is expanded once, at its first place in display order
    y = config_genome("y", "Solve it.", temperature=0.9)
    arch.add(y, parents=[m.id, a.id], operator="crossover", generation=2)
    ytree = arch.lineage(y.id).ancestor_tree(arch.get(y.id))
    assert [(n.record.name, n.repeated) for n in ytree.children] == [("a", False), ("a", True)]
    assert [(n.record.genome_id, n.repeated) for n in ytree.children[0].children] == [(a.id, False)]
    dtree = arch.lineage(a.id).descendant_tree(arch.get(a.id))
    assert [(n.record.genome_id, n.repeated) for n in dtree.children] == [(m.id, False), (y.id, True)]
    with pytest.raises(ArchiveError, match="not in the archive"):
        arch.add(config_genome("orphan", "new"), parents=[config_genome("never-added", "zzz")])
    # a caller's message is used as is
    r = arch.add(config_genome("msg", "custom"), parents=[a.id], operator="mutate", message="my own words\n\nbody")
    assert git_out(arch.path, "log", "-1", "--format=%s", r.commit).strip() == "my own words"


def test_idempotent_reinsert(arch: Archive):
    g = config_genome("same")
    first = arch.add(g, rationale="first")
    commits = git_out(arch.path, "rev-list", "--all", "--count")
    renamed = g.model_copy(update={"name": "same-but-renamed"})  # the name is not part of the id
    again = arch.add(renamed, rationale="second")
    assert again == first and again.rationale == "first"
    assert git_out(arch.path, "rev-list", "--all", "--count") == commits and len(arch) == 1


def test_results_keyed_by_task_split_lm(arch: Archive):
    g = config_genome("evaluated")
    arch.add(g)
    assert arch.get_result(g.id, "gsm8k", "dev", "lm-a") is None
    arch.add_result(g.id, result(0.5, n=20, failures={"parse": 1}))
    arch.add_result(g.id[:9], result(0.6, split="test"))
    arch.add_result(g, result(0.7, lm_key="lm-b"))
    assert arch.get_result(g.id, "gsm8k", "dev", "lm-a").score == 0.5
    assert arch.get_result(g, "gsm8k", "test", "lm-a").score == 0.6
    assert arch.get_result(g.id, "gsm8k", "dev", "lm-b").score == 0.7
    assert arch.get_result(g.id, "drop", "dev", "lm-a") is None
    # updating the same key replaces it (with a commit); storing identical content adds none
    before = git_out(arch.path, "rev-list", "--all", "--count")
    new = result(0.55, n=40)
    rec = arch.add_result(g.id, new)
    assert arch.get_result(g.id, "gsm8k", "dev", "lm-a") == new and len(rec.results) == 3
    mid = git_out(arch.path, "rev-list", "--all", "--count")
    assert int(mid) == int(before) + 2  # candidate commit + journal commit
    arch.add_result(g.id, new)
    assert git_out(arch.path, "rev-list", "--all", "--count") == mid
    path = f"candidates/{g.id}/results/{result_filename(new)}"
    stored = git_out(arch.path, "show", f"refs/candidates/{g.id}:{path}")
    assert ResultRecord.from_json(stored) == new
    # another process (a second run sharing the archive) sees it too
    with Archive.open(arch.path) as other:
        assert other.get_result(g.id, "gsm8k", "dev", "lm-a") == new
    with pytest.raises(ArchiveError, match="unknown candidate id"):
        arch.add_result("ffffffffffff", result(0.1))


def _populate(arch: Archive) -> dict[str, Genome]:
    gs = {
        "cheap": config_genome("cheap", "Be brief."),
        "mid": config_genome("mid", "Be careful."),
        "dominated": config_genome("dominated", "Be slow."),
        "best": config_genome("best", "Be thorough.", agents=2),
        "coder": code_genome("coder"),
    }
    arch.add(gs["cheap"], run="r1")
    arch.add(gs["mid"], parents=[gs["cheap"]], strategy="evolutionary", operator="mutate", generation=1, run="r1")
    arch.add(gs["dominated"], parents=[gs["mid"]], strategy="evolutionary", operator="mutate", generation=2,
             run="r2")
    arch.add(gs["best"], parents=[gs["mid"], gs["cheap"]], strategy="meta", operator="crossover", generation=3,
             run="r2")
    arch.add(gs["coder"], strategy="meta", operator="write", run="r2")
    arch.add_result(gs["cheap"].id, result(0.5, dollars=1.0, ci_low=0.4, ci_high=0.6, n=50))
    arch.add_result(gs["mid"].id, result(0.7, dollars=2.0, n=50))
    arch.add_result(gs["dominated"].id, result(0.6, dollars=3.0, n=50))
    arch.add_result(gs["best"].id, result(0.9, dollars=5.0, n=50))
    arch.add_result(gs["coder"].id, result(0.8, task="humaneval", dollars=0.5, n=10))
    return gs


def test_equal_scores_at_no_dollar_cost_list_the_fewer_tokens_first(arch: Archive):
    wordy, terse = config_genome("wordy", "Explain at length."), config_genome("terse", "Answer only.")
    arch.add(wordy, run="r1")
    arch.add(terse, run="r1")  # added second: before, the older one won the tie
    arch.add_result(wordy.id, result(0.8, dollars=0.0, tokens=9000, n=10))
    arch.add_result(terse.id, result(0.8, dollars=0.0, tokens=3000, n=10))
    assert [r.name for r in arch.list(task="gsm8k")] == ["terse", "wordy"]
    assert [r.name for r in arch.list(sort="cost")] == ["terse", "wordy"]
    assert arch.resolve("best") == terse.id


def test_list_best_front_promote_prune_log(arch: Archive):
    gs = _populate(arch)
    names = lambda recs: [r.name for r in recs]  # noqa: E731
    assert names(arch.list(task="gsm8k")) == ["best", "mid", "dominated", "cheap"]
    assert names(arch.list(task="gsm8k", sort="cost")) == ["cheap", "mid", "dominated", "best"]
    assert names(arch.list(sort="generation"))[0] == "best"
    assert names(arch.list(sort="created")) == ["coder", "best", "dominated", "mid", "cheap"]
    assert names(arch.list(kind="code")) == ["coder"]
    assert names(arch.list(strategy="evolutionary")) == ["mid", "dominated"]
    assert names(arch.list(run="r1")) == ["mid", "cheap"]
    assert names(arch.list(task="gsm8k", limit=2)) == ["best", "mid"]
    assert names(arch.best("gsm8k", k=1)) == ["best"]
    assert names(arch.front("gsm8k")) == ["cheap", "mid", "best"]  # 'dominated' is worse and dearer than 'mid'
    assert names(arch.front("humaneval")) == ["coder"]
    with pytest.raises(ArchiveError, match="unknown sort"):
        arch.list(sort="colour")

    pruned = arch.prune(gs["best"].id[:8])
    assert pruned.status == "pruned" and "best" not in names(arch.list(task="gsm8k"))
    assert "best" in names(arch.list(task="gsm8k", include_pruned=True))
    assert names(arch.front("gsm8k")) == ["cheap", "mid"]
    tags = git_out(arch.path, "tag").split()
    assert f"pruned/{gs['best'].id[:12]}" in tags
    promoted = arch.promote(gs["best"].id)
    assert promoted.status == "promoted" and arch.get(gs["best"].id).status == "promoted"
    tags = git_out(arch.path, "tag").split()
    assert f"promoted/{gs['best'].id[:12]}" in tags and f"pruned/{gs['best'].id[:12]}" not in tags
    best_id = gs["best"].id
    meta = json.loads(git_out(arch.path, "show", f"refs/candidates/{best_id}:candidates/{best_id}/meta.json"))
    assert meta["status"] == "promoted"

    events = arch.log(4)
    assert [e.kind for e in events] == ["promote", "prune", "result", "result"]
    assert events[0].genome_id == gs["best"].id and events[0].name == "best"
    assert len(arch.log(None)) == 5 + 5 + 2


def test_index_rebuilt_when_missing_corrupt_or_stale(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    path = tmp_path / "archive"
    arch = Archive.open(path, create=True)
    gs = _populate(arch)
    arch.prune(gs["dominated"].id)

    def snapshot(a: Archive) -> tuple[list[dict], list[tuple]]:
        return ([r.to_dict() for r in a.list(sort="created", include_pruned=True)],
                [(e.kind, e.genome_id, e.summary, e.commit, e.at) for e in a.log(None)])

    before = snapshot(arch)
    index = path / INDEX_FILE
    # missing: deleted under a live archive object, and for a fresh open
    index.unlink()
    assert snapshot(arch) == before
    index.unlink()
    with Archive.open(path) as fresh:
        assert snapshot(fresh) == before
    # corrupt: garbage bytes over the whole file (seen by a live archive object), over the header, truncated
    good = index.read_bytes()
    index.write_bytes(os.urandom(len(good)))
    assert snapshot(arch) == before
    index.write_bytes(os.urandom(100) + good[100:])
    with Archive.open(path) as fresh:
        assert snapshot(fresh) == before
    index.write_bytes(good[: len(good) // 2])
    with Archive.open(path) as fresh:
        assert snapshot(fresh) == before
    # stale: an old copy of the index (as after a crash between the git write and the index write); the
    # missing events are replayed from the journal and give the same index as a full rebuild
    old = index.read_bytes()
    extra = config_genome("late", "added after the snapshot")
    arch.add(extra, parents=[gs["best"]], operator="mutate")
    arch.add_result(extra.id, result(0.95, dollars=9.0))
    arch.promote(gs["dominated"].id)
    arch.prune(gs["cheap"].id)
    after = snapshot(arch)
    index.write_bytes(old)
    caught_up: list[bool] = []
    catch_up = ArchiveIndex.catch_up

    def spy(self: ArchiveIndex, head: str) -> bool:
        caught_up.append(catch_up(self, head))
        return caught_up[-1]

    monkeypatch.setattr(ArchiveIndex, "catch_up", spy)
    assert snapshot(arch) == after and len(arch) == 6
    assert caught_up == [True]  # replayed 4 events instead of rebuilding everything
    assert arch.rebuild_index() == 6
    assert snapshot(arch) == after
    # an index built by another schema version is thrown away too
    with sqlite3.connect(index) as db:
        db.execute("UPDATE meta SET value = '999' WHERE key = 'schema'")
    with Archive.open(path) as fresh:
        assert len(fresh) == 6
    arch.close()


def test_packing_keeps_everything_readable(arch: Archive, monkeypatch: pytest.MonkeyPatch):
    from masforge.archive import git_store, store

    monkeypatch.setattr(store, "MAINTAIN_EVERY", 4)
    monkeypatch.setattr(git_store, "PACK_LOOSE_AT", 10)
    prev: str | None = None
    for i in range(6):
        rec = arch.add(config_genome(f"p{i}", f"packed {i}"), parents=[prev] if prev else [], operator="mutate")
        arch.add_result(rec.genome_id, result(i / 10))
        prev = rec.genome_id
    assert "in-pack: 0" not in git_out(arch.path, "count-objects", "-v")
    assert (arch.path / ".git" / "packed-refs").is_file()  # refs were packed too
    fsck_clean(arch.path)
    assert len(arch) == 6 and arch.get_result(prev, "gsm8k", "dev", "lm-a").score == 0.5
    assert arch.genome(prev).name == "p5" and len(arch.lineage(prev).ancestors) == 5
    assert arch.rebuild_index() == 6
    arch.add(config_genome("after", "after packing"), parents=[prev], operator="mutate")
    assert len(arch) == 7


def test_prefix_resolution_and_errors(arch: Archive):
    ids = [arch.add(config_genome(f"g{i}", f"variant {i}")).genome_id for i in range(17)]
    first = {}
    for gid in ids:
        first.setdefault(gid[0], []).append(gid)
    shared = next(d for d, group in first.items() if len(group) > 1)  # 17 ids, 16 digits: one must repeat
    with pytest.raises(ArchiveError) as err:
        arch.get(shared)
    assert str(err.value) == f"ambiguous id '{shared}': matches {len(first[shared])} candidates, give more digits"
    unique = ids[0][:12]
    assert arch.get(unique).genome_id == ids[0] and arch.get(unique.upper()).genome_id == ids[0]
    assert arch.resolve(ids[0]) == ids[0]
    unused = next(f"{a}{b}" for a in "0123456789abcdef" for b in "0123456789abcdef"
                  if not any(g.startswith(f"{a}{b}") for g in ids))
    with pytest.raises(ArchiveError, match=rf"^unknown candidate id '{unused}' \(no genome hash starts with it\)"):
        arch.get(unused)
    with pytest.raises(ArchiveError, match="invalid candidate id 'xyz'"):
        arch.genome("xyz")
    with pytest.raises(ArchiveError, match="invalid candidate id ''"):
        arch.lineage("")


def test_not_an_archive(tmp_path: Path):
    with pytest.raises(ArchiveError) as err:
        Archive.open(tmp_path)
    assert str(err.value) == (f"{tmp_path}: not a masforge archive (no .masforge-archive marker); "
                              "create one with Archive.open(path, create=True)")
    with pytest.raises(ArchiveError, match="not a masforge archive"):
        Archive.open(tmp_path / "nowhere")
    (tmp_path / "notes.txt").write_text("mine")
    with pytest.raises(ArchiveError, match="choose an empty or new folder"):
        Archive.open(tmp_path, create=True)
    (tmp_path / "file").write_text("x")
    with pytest.raises(ArchiveError, match="is a file"):
        Archive.open(tmp_path / "file")
    # opening with create=True twice (two runs sharing one archive) is fine
    Archive.open(tmp_path / "shared", create=True).close()
    with Archive.open(tmp_path / "shared", create=True) as again:
        assert len(again) == 0


# --------------------------------------------------------------------------------------------------
# crash safety and concurrency (real processes)

WRITER = r"""
import random, sys
from masforge.archive.records import ResultRecord
from masforge.archive.store import Archive
from masforge.genome.schema import Agent, Genome, Topology

path, tag, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
archive = Archive.open(path)
print("ready", flush=True)
prev = None
for i in range(count):
    g = Genome(name=f"{tag}-{i}", agents=[Agent(id="a", instructions=f"{tag} step {i} {random.random()}")],
               topology=Topology(edges=[("input", "a"), ("a", "output")]))
    rec = archive.add(g, parents=[prev] if prev else [], operator="mutate" if prev else "seed", generation=i,
                      run=tag)
    print("add", rec.genome_id, flush=True)
    archive.add_result(rec.genome_id, ResultRecord(task="t", split="dev", lm_key="lm", score=random.random(), n=5))
    print("result", rec.genome_id, flush=True)
    prev = rec.genome_id
print("done", flush=True)
"""


def _start_writer(path: Path, tag: str, count: int) -> subprocess.Popen[str]:
    proc = subprocess.Popen([sys.executable, "-c", WRITER, str(path), tag, str(count)], cwd=ROOT, env=ENV,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    line = proc.stdout.readline()
    assert line.strip() == "ready", line + (proc.stderr.read() if proc.stderr else "")
    return proc


def _completed(lines: list[str]) -> tuple[list[str], list[str]]:
    adds = [ln.split()[1] for ln in lines if ln.startswith("add ")]
    results = [ln.split()[1] for ln in lines if ln.startswith("result ")]
    return adds, results


def test_sigkill_at_random_moments_loses_nothing_completed(tmp_path: Path):
    path = tmp_path / "archive"
    Archive.open(path, create=True).close()
    rng = random.Random(1234)
    added: list[str] = []
    resulted: list[str] = []
    for round_no in range(15):
        proc = _start_writer(path, f"w{round_no}", 1000)
        time.sleep(rng.uniform(0.0, 0.15))
        proc.kill()
        proc.wait()
        assert proc.stdout is not None
        adds, results = _completed(proc.stdout.read().splitlines())
        added += adds
        resulted += results
        fsck_clean(path)
    assert added, "the writer never completed an add: raise the sleep"
    with Archive.open(path) as arch:
        for gid in added:
            assert gid in arch
        for gid in resulted:
            assert arch.get_result(gid, "t", "dev", "lm") is not None
        listed = [r.to_dict() for r in arch.list(sort="created")]
        arch.rebuild_index()
        assert [r.to_dict() for r in arch.list(sort="created")] == listed
        for gid in added:  # lineage survived too: each chain's parent is the add before it
            rec = arch.get(gid)
            if rec.parents:
                assert commit_parents(path, rec.commit) == [arch.get(rec.parents[0]).commit]
    # and the archive keeps working for the next writer
    proc = _start_writer(path, "after", 2)
    assert proc.wait(timeout=60) == 0
    fsck_clean(path)


def test_two_concurrent_writers(tmp_path: Path):
    path = tmp_path / "archive"
    Archive.open(path, create=True).close()
    procs = [_start_writer(path, tag, 30) for tag in ("left", "right")]
    outputs = []
    for proc in procs:
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
        outputs.append(out.splitlines())
    fsck_clean(path)
    with Archive.open(path) as arch:
        assert len(arch) == 60
        for lines in outputs:
            adds, results = _completed(lines)
            assert len(adds) == 30 and len(results) == 30
            for gid in results:
                assert arch.get_result(gid, "t", "dev", "lm") is not None
            ancestors, _ = arch.lineage(adds[-1])
            assert [r.genome_id for r in ancestors] == adds[:-1]
        assert len(arch.list(run="left")) == 30 and len(arch.list(run="right")) == 30
        assert len(arch.log(None)) == 120
        assert arch.rebuild_index() == 60
    assert len(git_out(path, "log", "--first-parent", "--format=%H", "main").split()) == 121


# --------------------------------------------------------------------------------------------------
# CLI


@pytest.fixture()
def small(tmp_path: Path) -> tuple[Path, dict[str, Genome]]:
    path = tmp_path / "archive"
    with Archive.open(path, create=True) as arch:
        gs = _populate(arch)
    return path, gs


def run_cli(*args: str) -> tuple[int, str]:
    res = CliRunner().invoke(cli_archive.app, list(args), env={"COLUMNS": "200"})
    return res.exit_code, res.output


def test_cli_list_show_diff(small: tuple[Path, dict[str, Genome]]):
    path, gs = small
    code, out = run_cli("list", "--archive", str(path), "--task", "gsm8k")
    assert code == 0, out
    assert out.index(gs["best"].id[:12]) < out.index(gs["mid"].id[:12]) < out.index(gs["cheap"].id[:12])
    assert "0.900" in out and "$5.0000" in out and gs["coder"].id[:12] not in out
    code, out = run_cli("list", "-a", str(path), "--sort", "cost", "--top", "2", "--kind", "config")
    assert code == 0 and gs["cheap"].id[:12] in out and gs["mid"].id[:12] in out and gs["best"].id[:12] not in out
    code, out = run_cli("list", "-a", str(path), "--strategy", "meta")
    assert code == 0 and "best" in out and "coder" in out and "humaneval" in out and "cheap" not in out
    code, out = run_cli("show", gs["best"].id[:8], "-a", str(path))
    assert code == 0, out
    assert gs["best"].id in out and "crossover" in out and "Be thorough." in out and "0.900" in out
    assert gs["mid"].id[:12] in out and gs["cheap"].id[:12] in out  # parents
    code, out = run_cli("show", gs["coder"].id[:8], "-a", str(path))
    assert code == 0 and "def forward" in out and "humaneval" in out
    code, out = run_cli("diff", gs["cheap"].id[:8], gs["mid"].id[:8], "-a", str(path))
    assert code == 0 and "a0.instructions" in out and "Be brief." in out and "Be careful." in out


def test_cli_lineage_front_promote_prune_log(small: tuple[Path, dict[str, Genome]]):
    path, gs = small
    code, out = run_cli("lineage", gs["mid"].id[:8], "-a", str(path))
    assert code == 0, out
    up, down = out.split("descendants of")
    assert gs["cheap"].id[:12] in up and gs["dominated"].id[:12] in down and gs["best"].id[:12] in down
    code, out = run_cli("front", "--task", "gsm8k", "-a", str(path))
    assert code == 0 and "3 candidates" in out and gs["dominated"].id[:12] not in out
    assert out.index(gs["cheap"].id[:12]) < out.index(gs["best"].id[:12])
    code, out = run_cli("prune", gs["dominated"].id[:8], "-a", str(path))
    assert code == 0 and "pruned" in out and gs["dominated"].id[:12] in out
    code, out = run_cli("promote", gs["best"].id[:8], "-a", str(path))
    assert code == 0 and "promoted" in out
    code, out = run_cli("list", "-a", str(path))
    assert gs["dominated"].id[:12] not in out and "promoted" in out
    code, out = run_cli("list", "-a", str(path), "--all")
    assert gs["dominated"].id[:12] in out
    code, out = run_cli("log", "-a", str(path), "-n", "3")
    assert code == 0 and "promote" in out and "prune" in out and "last 3 events" in out


def test_cli_errors(small: tuple[Path, dict[str, Genome]], tmp_path: Path):
    path, _ = small
    code, out = run_cli("show", "zzz", "-a", str(path))
    assert code == 1 and "error: invalid candidate id 'zzz'" in out and "Traceback" not in out
    code, out = run_cli("show", "0123456789abcdef", "-a", str(path))
    assert code == 1 and "unknown candidate id" in out
    empty = tmp_path / "empty"
    empty.mkdir()
    code, out = run_cli("list", "-a", str(empty))
    assert code == 1 and "not a masforge archive" in out
    code, out = run_cli("list", "-a", str(tmp_path / "missing"))
    assert code == 1 and "no archive there" in out
