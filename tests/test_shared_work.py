"""Several processes on shared state: claims on evaluation keys (a dead holder's claim expires), two searches on
one archive evaluating each (genome, task, split, LM) key once, and `tune` studies worked by two processes at
once on SQLite and on a real PostgreSQL server (started here on loopback; skipped with the reason where it
cannot be), including a trial whose process died being taken over."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from collections import Counter
from pathlib import Path

import pytest
from sqlalchemy.exc import SQLAlchemyError

from masforge.archive.claims import ClaimBook, MemoryClaims
from masforge.archive.memory import MemoryArchive
from masforge.archive.store import Archive
from masforge.testing.postgres import PostgresServer, unavailable
from masforge.testing.stub_server import StubServer

KEY = ("genome", "task", "validation", "lm")


def _python(code: str, *args: str, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-c", textwrap.dedent(code), *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env={**os.environ, **(env or {})})


def _finish(proc: subprocess.Popen[str], timeout: float = 300) -> dict:
    out, err = proc.communicate(timeout=timeout)
    assert proc.returncode == 0, err[-3000:]
    return json.loads(out.strip().splitlines()[-1])


# ------------------------------------------------------------------------------------------------ claims


def test_claim_excludes_others_until_released(tmp_path: Path) -> None:
    book = ClaimBook(tmp_path / "claims")
    first = book.try_claim(KEY, run="run-a")
    assert first is not None
    assert book.try_claim(KEY, run="run-b") is None  # another open of the same file: excluded, even in-process
    assert book.holder(KEY)["run"] == "run-a" and book.holder(KEY)["pid"] == os.getpid()
    other = book.try_claim(("other", *KEY[1:]))
    assert other is not None  # other keys are free
    other.release()
    got: list[object] = []
    waiter = threading.Thread(target=lambda: got.append(book.claim(KEY, run="run-b", poll_s=0.05)))
    waiter.start()
    time.sleep(0.3)
    assert not got  # still waiting
    first.release()
    waiter.join(5)
    assert got and got[0] is not None
    got[0].release()  # type: ignore[union-attr]
    assert not list((tmp_path / "claims").glob("*.claim"))  # released claims leave nothing behind


def test_claim_gives_up_when_told_to_stop(tmp_path: Path) -> None:
    for book in (ClaimBook(tmp_path / "claims"), MemoryClaims()):
        held = book.try_claim(KEY)
        assert held is not None
        waits: list[dict] = []
        assert book.claim(KEY, stop=lambda: "wall_time", on_wait=waits.append) is None
        assert book.try_claim(KEY) is None
        held.release()
        assert book.try_claim(KEY) is not None


def test_claim_of_a_killed_process_expires_at_once(tmp_path: Path) -> None:
    holder = _python("""
        import sys, time
        from masforge.archive.claims import ClaimBook
        claim = ClaimBook(sys.argv[1]).try_claim(("genome", "task", "validation", "lm"), run="doomed")
        print("held" if claim else "busy", flush=True)
        time.sleep(600)
    """, str(tmp_path / "claims"))
    assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
    book = ClaimBook(tmp_path / "claims")
    assert book.try_claim(KEY) is None and book.holder(KEY)["run"] == "doomed"
    holder.send_signal(signal.SIGKILL)
    holder.wait(10)
    claim = book.try_claim(KEY)  # the kernel dropped the dead process's lock: no timeout to wait out
    assert claim is not None
    claim.release()


def test_archives_expose_claims(tmp_path: Path) -> None:
    archive = Archive.open(tmp_path / "archive", create=True)
    claim = archive.claim("abc", "task", "validation", "lm", run="r1")
    assert claim is not None
    assert archive.claim("abc", "task", "validation", "lm", stop=lambda: "stop") is None
    claim.release()
    assert not (tmp_path / "archive" / "masforge-claims").exists()  # lives inside .git, never tracked
    memory = MemoryArchive()
    held = memory.claim("abc", "task", "validation", "lm")
    assert held is not None and memory.claim("abc", "task", "validation", "lm", stop=lambda: "x") is None
    held.release()


# ------------------------------------------------------------------------------------------------ searches

SEARCH = """
    import json, os, sys, time
    import masforge.evaluators.runner as runner
    from masforge.search.config import RunConfig
    from masforge.search.engine import run_search

    log = sys.argv[2]
    evaluate = runner.Evaluator.evaluate

    def logged(self, genome, **kw):  # every evaluation this process pays for
        with open(log, "a") as fh:
            fh.write(json.dumps([genome.id, self.split, os.getpid()]) + "\\n")
        return evaluate(self, genome, **kw)

    runner.Evaluator.evaluate = logged
    print("ready", flush=True)
    while not os.path.exists(sys.argv[3]):  # both searches start together
        time.sleep(0.02)
    result = run_search(RunConfig.from_data(json.loads(sys.argv[1])), progress=False)
    print(json.dumps({"run": result.run_dir.name, "stats": result.stats, "calls": result.spend["llm_calls"]}))
"""


def test_two_searches_on_one_archive_evaluate_each_key_once(tmp_path: Path) -> None:
    log, go = tmp_path / "evaluations.jsonl", tmp_path / "go"
    with StubServer(latency_s=0.5) as stub:
        cfg = {"task": "rg:basic_arithmetic", "strategy": ["random"], "seeds": ["io", "cot", "self_refine"],
               "lm": {"model": "openai/stub", "api_base": stub.api_base}, "meta_lm": "fake", "limit": 3,
               "test_limit": 2, "test_top_k": 1, "budget": {"max_candidates": 5}, "concurrency": 3,
               "archive": str(tmp_path / "shared-archive")}
        # Different seeds: the same hand-designed seeds first (both want them), then different proposals.
        procs = [_python(SEARCH, json.dumps({**cfg, "seed": i, "output": str(tmp_path / f"runs{i}")}), str(log),
                         str(go), env={"MASFORGE_CACHE": str(tmp_path / f"cache{i}")}) for i in range(2)]
        for p in procs:
            assert p.stdout is not None and p.stdout.readline().strip() == "ready"
        go.touch()
        results = [_finish(p) for p in procs]
        requests = stub.requests
    evaluations = [tuple(json.loads(line)) for line in log.read_text().splitlines()]
    per_key = Counter((gid, split) for gid, split, _pid in evaluations)
    assert per_key and max(per_key.values()) == 1, [k for k, n in per_key.items() if n > 1]
    assert len({pid for *_k, pid in evaluations}) == 2  # both searches did part of the work
    # The three seeds and the held-out re-scoring were wanted by both: one paid, the other reused
    assert sum(r["stats"]["reused"] for r in results) >= 3
    assert sum(r["stats"]["waited"] for r in results) >= 1  # started together: one waited for the other's work
    assert sum(r["calls"] for r in results) == requests  # and every LM request reached is in one of the ledgers
    archive = Archive.open(tmp_path / "shared-archive")
    assert len(archive) >= 5


# ------------------------------------------------------------------------------------------------ studies

TUNE = """
    import json, os, sys, time
    from masforge.archive.store import Archive
    from masforge.evaluators.runner import Evaluator
    from masforge.evaluators.tasks import Task
    from masforge.lm.fake import fake_reply
    from masforge.lm.client import LMClient
    from masforge.search.budget import SearchBudget
    from masforge.search.context import SearchContext
    from masforge.search.events import Admitted
    from masforge.search.strategies.tune import Tune
    from masforge.seeds import load_seed

    storage, archive_path, trials, mode = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]

    def reply(messages, info=None):
        time.sleep(0.05)  # long enough for two processes' trials to overlap
        if mode == "hang":
            time.sleep(600)
        return fake_reply(messages, info)

    task = Task.from_callable(lambda o: 1.0 if o.get("answer") else 0.0,
                              examples=[{"id": f"q{i}", "question": f"What is {i} + 1?"} for i in range(2)],
                              name="shared-study")
    client = LMClient({"worker": "fake"}, cache=False, responder=fake_reply)
    archive = Archive.open(archive_path, create=True)
    paid = []
    ctx = SearchContext(task, Evaluator(task, client, limit=2, concurrency=2), client, archive,
                        run_id=f"p{os.getpid()}", budget=SearchBudget(),
                        on_event=lambda e: paid.append(e.candidate.id)
                        if isinstance(e, Admitted) and not e.reused else None)
    base = load_seed("cot")
    base.agents[0].temperature = 1.0
    ctx.submit(base)
    client.responder = reply
    tune = Tune(storage=storage, study_name="shared", knobs=["temperature", "copies"], max_copies=4,
                trials=trials, heartbeat_s=1)
    print("tuning", flush=True)
    tune.run(ctx)
    print(json.dumps({"pid": os.getpid(), "paid": paid, "report": tune.report()}))
"""


def _two_processes_share(storage: str, tmp_path: Path) -> None:
    import optuna

    archive = str(tmp_path / "archive")
    procs = [_python(TUNE, storage, archive, "8", "ok") for _ in range(2)]
    results = [_finish(p) for p in procs]
    study = optuna.load_study(study_name="shared", storage=_url(storage))
    trials = study.get_trials(deepcopy=False)
    assert [t.number for t in trials] == list(range(len(trials)))
    assert not [t for t in trials if t.state == optuna.trial.TrialState.RUNNING]
    owners = Counter(t.user_attrs.get("masforge_owner", {}).get("pid") for t in trials)
    assert {r["pid"] for r in results} <= set(owners)  # both processes asked trials of the one study
    assert len(trials) == sum(r["report"]["asked"] for r in results)
    paid = [gid for r in results for gid in r["paid"]]
    assert len(paid) == len(set(paid))  # no genome was paid for by both
    assert sum(1 for t in trials if t.state == optuna.trial.TrialState.COMPLETE) >= 8


def _url(storage: str) -> str:
    from masforge.search.strategies.tune import storage_url

    return storage_url(storage)


def test_two_processes_share_a_sqlite_study(tmp_path: Path) -> None:
    _two_processes_share(f"sqlite:///{tmp_path / 'study.sqlite3'}", tmp_path)


@pytest.fixture(scope="module")
def postgres_url():
    why = unavailable()
    if why:
        pytest.skip(f"no PostgreSQL server for the shared-study test: {why}")
    with PostgresServer() as server:
        yield server.url


def test_two_processes_share_a_postgresql_study(postgres_url: str, tmp_path: Path) -> None:
    _two_processes_share(postgres_url, tmp_path)


def test_trial_of_a_dead_process_is_taken_over(tmp_path: Path) -> None:
    import optuna

    storage, archive = f"sqlite:///{tmp_path / 'study.sqlite3'}", str(tmp_path / "archive")
    doomed = _python(TUNE, storage, archive, "3", "hang")
    assert doomed.stdout is not None and doomed.stdout.readline().strip() == "tuning"
    running = []
    for _ in range(300):  # until its trial is asked, built and being evaluated (its LM call hangs)
        time.sleep(0.2)
        try:
            study = optuna.load_study(study_name="shared", storage=storage)
            running = [t for t in study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.RUNNING,))
                       if t.user_attrs.get("masforge_owner") and len(t.params) == 2]  # both knobs suggested
            if running:
                time.sleep(1.0)  # still running a second later: it hangs in its LM call (not told at once)
                again = optuna.load_study(study_name="shared", storage=storage).trials[running[0].number]
                if again.state == optuna.trial.TrialState.RUNNING:
                    break
                running = []
        except (KeyError, SQLAlchemyError):
            continue  # the study is not created yet, or its tables are being created right now
    assert running, "the first process never started a trial"
    doomed.send_signal(signal.SIGKILL)
    doomed.wait(10)
    lost = optuna.load_study(study_name="shared", storage=storage).trials[running[0].number]
    survivor = _finish(_python(TUNE, storage, archive, "2", "ok"))
    study = optuna.load_study(study_name="shared", storage=storage)
    assert study.trials[lost.number].state == optuna.trial.TrialState.FAIL  # its process is gone: failed ...
    redone = [t for t in study.trials if t.number > lost.number and t.params == lost.params]
    assert redone and redone[0].state == optuna.trial.TrialState.COMPLETE  # ... and evaluated again
    assert redone[0].user_attrs["masforge_owner"]["pid"] == survivor["pid"]
