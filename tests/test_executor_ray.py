"""Evaluation on a Ray cluster (a local one with 2 CPUs here): the same results as the local executor on the
deterministic LM, a worker killed mid-example retried elsewhere and paid for once, a budget stop that reaches
every worker, and a whole search on Ray equal to the same search run locally."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest

from masforge.errors import ConfigError
from masforge.evaluators.executors import make_executor
from masforge.evaluators.runner import Evaluator
from masforge.evaluators.tasks import Task, get_task
from masforge.lm.client import Budget, Ledger, LMCache, LMClient, LMConfig
from masforge.search.config import RunConfig
from masforge.search.engine import build_executor, run_search
from masforge.seeds import load_seed
from masforge.testing import chain_genome
from masforge.testing.cluster import KillOnSecondCall, SlowFake

ray = pytest.importorskip("ray", reason="Ray is not installed: pip install 'masforge[ray]'")

# A priced fake LM, so dollars are counted too.
FAKE = LMConfig(model="fake", price_in_per_m=1.0, price_out_per_m=2.0)


@pytest.fixture(scope="module")
def executor():
    """One local Ray cluster with 2 CPUs and an executor with 2 worker processes for the whole module."""
    started = not ray.is_initialized()
    if started:
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    ex = make_executor("ray", workers=2, worker_concurrency=8)
    ex.start_workers()
    yield ex
    ex.close()
    if started:
        ray.shutdown()


def _client(tmp_path: Path, name: str, responder=None, budget: Budget | None = None) -> LMClient:
    return LMClient({"worker": FAKE}, cache=LMCache(tmp_path / f"{name}.sqlite"), responder=responder,
                    ledger=Ledger(budget))


def _comparable(report) -> list[tuple]:
    return [(e.example_id, e.outputs, e.score, e.error, e.tokens, round(e.dollars, 12), e.llm_calls)
            for e in report.examples]


def test_ray_gives_the_local_results(executor, tmp_path: Path) -> None:
    task = get_task("rg:basic_arithmetic")
    genome = load_seed("self_refine")  # several LM calls per example
    local_client = _client(tmp_path, "local")
    local = Evaluator(task, local_client, limit=8, concurrency=4).evaluate(genome)
    ray_client = _client(tmp_path, "ray")
    remote = Evaluator(task, ray_client, limit=8, concurrency=4, executor=executor).evaluate(genome)
    assert _comparable(remote) == _comparable(local)
    assert remote.score == local.score and remote.llm_calls == local.llm_calls > 8
    spent_local, spent_ray = local_client.ledger.snapshot(), ray_client.ledger.snapshot()
    for key in ("llm_calls", "tokens", "dollars"):
        assert spent_ray[key] == pytest.approx(spent_local[key]), key  # every worker's spend reached the driver
    assert spent_ray["dollars"] > 0
    # the answers landed in the driver's cache: evaluating again on the cluster pays nothing
    again = Evaluator(task, ray_client, limit=8, concurrency=4, executor=executor).evaluate(genome)
    assert again.llm_calls == 0 and again.cache_hits == local.llm_calls
    assert ray_client.ledger.snapshot()["llm_calls"] == spent_local["llm_calls"]
    # A code genome runs in the sandbox of the worker that evaluates it, with the same answers.
    code = load_seed("code_verify")
    local_code = Evaluator(task, _client(tmp_path, "local-code"), limit=2, concurrency=2).evaluate(code)
    remote_code = Evaluator(task, _client(tmp_path, "ray-code"), limit=2, concurrency=2,
                            executor=executor).evaluate(code)
    assert _comparable(remote_code) == _comparable(local_code) and remote_code.llm_calls > 0


def test_killed_worker_is_retried_and_counted_once(executor, tmp_path: Path) -> None:
    examples = [{"id": f"q{i}", "question": f"What is {i} + {i}?", "answer": str(2 * i)} for i in range(5)]
    examples[2]["question"] = "KILL-ME: what is 3 + 4?"
    examples[2]["answer"] = "7"

    def exact(outputs, example) -> float:
        return 1.0 if str(outputs.get("answer", "")).strip() == str(example.target) else 0.0

    task = Task.from_callable(exact, examples=examples, name="kill-test")
    genome = load_seed("self_refine")
    local_client = _client(tmp_path, "local")
    local = Evaluator(task, local_client, limit=5, concurrency=2).evaluate(genome)

    lost_before, retried_before = executor.lost_workers, executor.retried
    client = _client(tmp_path, "ray", responder=KillOnSecondCall(tmp_path, "KILL-ME"))
    remote = Evaluator(task, client, limit=5, concurrency=2, executor=executor).evaluate(genome)
    assert (tmp_path / "killed").is_file(), "the worker was not killed mid-example"
    assert executor.lost_workers == lost_before + 1 and executor.retried > retried_before
    assert [(e.example_id, e.outputs, e.score, e.error) for e in remote.examples] == \
        [(e.example_id, e.outputs, e.score, e.error) for e in local.examples]
    spent = client.ledger.snapshot()
    # The dead attempt's first call was paid and cached; the retry found it in the cache, so it is counted once.
    # Its second call was in flight when the worker died: a request the provider got, counted too (unsettled).
    assert spent["llm_calls"] == local_client.ledger.snapshot()["llm_calls"] + 1 == local.llm_calls + 1
    assert remote.llm_calls == local.llm_calls  # the retried example reports what its attempts paid
    assert spent["dollars"] == pytest.approx(local_client.ledger.snapshot()["dollars"])


def test_budget_stop_reaches_every_worker(executor, tmp_path: Path) -> None:
    workers = set(executor.start_workers())  # both up (one may be a replacement of a killed one)
    task = get_task("rg:basic_arithmetic")
    # Each worker loads the task's metric on its first example (seconds on a busy machine): done here, so the
    # budget is not spent by one worker while the other is still loading.
    Evaluator(task, _client(tmp_path, "warm"), limit=4, concurrency=4, executor=executor).evaluate(load_seed("io"))
    log = tmp_path / "calls.log"
    client = _client(tmp_path, "ray", responder=SlowFake(0.2, log), budget=Budget(max_calls=12))
    concurrency = 4
    report = Evaluator(task, client, limit=16, concurrency=concurrency, executor=executor).evaluate(
        load_seed("self_refine"))
    assert report.stopped == "llm_calls" and report.n < 16
    calls = client.ledger.snapshot()["llm_calls"]
    pids = log.read_text().split()
    assert len(pids) == calls  # every call any worker made is in the driver's ledger
    assert {int(p) for p in pids} == workers and len(workers) == 2  # the work ran on both workers ...
    assert 12 <= calls <= 12 + concurrency  # ... and both stopped: past the limit only calls already under way
    # An exhausted budget stops every worker before its first call.
    again = Evaluator(task, client, limit=8, concurrency=concurrency, executor=executor).evaluate(load_seed("cot"))
    assert again.stopped == "llm_calls" and again.n == 0
    assert client.ledger.snapshot()["llm_calls"] == calls and len(log.read_text().split()) == calls


def test_search_on_ray_equals_local_search(executor, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MASFORGE_CACHE", str(tmp_path / "cache"))
    base = {"task": "rg:basic_arithmetic", "strategy": ["random"], "lm": "fake", "seeds": ["cot", "io"],
            "limit": 4, "test_limit": 3, "test_top_k": 1, "budget": {"max_candidates": 4}, "concurrency": 4}
    local = run_search(RunConfig.from_data({**base, "output": str(tmp_path / "a")}), progress=False)
    monkeypatch.setenv("MASFORGE_CACHE", str(tmp_path / "cache2"))  # no answer shared with the local run
    remote = run_search(RunConfig.from_data({**base, "output": str(tmp_path / "b")}), progress=False,
                        executor=executor)
    assert [(c.id, c.score) for c in remote.candidates] == [(c.id, c.score) for c in local.candidates]
    assert [(t.genome_id, t.test) for t in remote.test_scores] == [(t.genome_id, t.test) for t in local.test_scores]
    assert remote.spend["llm_calls"] == local.spend["llm_calls"] > 0
    assert remote.stats["executor"]["executor"] == "ray" and remote.stats["executor"]["workers"] == 2


def test_more_workers_than_free_cpus_is_one_line(executor) -> None:
    # The module's executor holds both CPUs of the cluster: a search asking for more gets one clear line.
    cfg = RunConfig.from_data({"task": "rg:basic_arithmetic", "lm": "fake", "executor": "ray", "ray_workers": 2})
    with pytest.raises(ConfigError, match=r"0 free CPUs of 2 .*--ray-workers"):
        build_executor(cfg)


def test_ray_missing_is_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)  # as if not installed
    with pytest.raises(ConfigError, match=r"pip install 'masforge\[ray\]'"):
        make_executor("ray")


def test_an_example_given_up_for_its_timeout_stops_spending_on_its_worker(executor, tmp_path: Path) -> None:
    task = get_task("rg:basic_arithmetic")
    Evaluator(task, _client(tmp_path, "warm"), limit=2, concurrency=2, executor=executor).evaluate(load_seed("io"))
    log = tmp_path / "calls.log"
    client = _client(tmp_path, "ray", responder=SlowFake(0.3, log))
    # 12 LM calls in a row, 0.3 s each: far more than the example's 0.5 s
    report = Evaluator(task, client, limit=1, concurrency=1, executor=executor, example_timeout_s=0.5).evaluate(
        chain_genome(12))
    assert report.examples[0].error_kind == "timeout"
    at_give_up = len(log.read_text().split()) if log.is_file() else 0
    time.sleep(4.0)  # time enough for the rest of the chain, had the worker gone on asking
    calls = len(log.read_text().split()) if log.is_file() else 0
    assert calls <= at_give_up + 1  # at most the request already in flight ended
    assert client.ledger.snapshot()["llm_calls"] == calls
