"""The LM client (disk cache, retries, budgets) and the evaluation runner (bounded concurrency, budget stops,
failure kinds, timeouts, cascade, CIs) and the ``masforge evaluate`` CLI, on the fake LM and the stub server."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from masforge.errors import BudgetExceeded, LMError, ProviderError  # noqa: E402
from masforge.evaluators.runner import Cascade, EvalReport, Evaluator, ExampleResult  # noqa: E402
from masforge.evaluators.stats import bootstrap_ci  # noqa: E402
from masforge.evaluators.tasks import Task  # noqa: E402
from masforge.lm import client as lm_module  # noqa: E402
from masforge.lm.client import Budget, Ledger, LMCache, LMClient, LMConfig  # noqa: E402
from masforge.lm.fake import fake_reply  # noqa: E402
from masforge.lm.trace import Incidents  # noqa: E402
from masforge.seeds import load_seed  # noqa: E402
from masforge.testing import ScriptedResponder, chain_genome, chat_reply  # noqa: E402
from masforge.testing.stub_server import StubServer  # noqa: E402

MSG = [{"role": "user", "content": "What is 2 + 3?"}]


@pytest.fixture
def stub() -> Iterator[StubServer]:
    with StubServer() as server:
        yield server


@pytest.fixture
def sleeps(monkeypatch) -> list[float]:
    """Backoff sleeps of the LM client, recorded instead of slept (jitter fixed at its midpoint)."""
    recorded: list[float] = []
    monkeypatch.setattr(lm_module._Stop, "wait", lambda self, seconds: recorded.append(seconds))
    monkeypatch.setattr(lm_module.random, "random", lambda: 0.5)
    return recorded


def stub_config(stub: StubServer, **kw) -> LMConfig:
    return LMConfig(model="openai/stub", api_base=stub.api_base, max_concurrency=kw.pop("max_concurrency", 64), **kw)


def counting_fake() -> tuple[list[int], object]:
    calls: list[int] = []
    lock = threading.Lock()

    def responder(messages, info):
        with lock:
            calls.append(info["sample"])
        return fake_reply(messages, info)

    return calls, responder


def question_task(n: int, name: str = "qs", metric=None) -> Task:
    examples = [{"id": f"{name}/{i}", "question": f"What is {i} + {i}?", "answer": str(2 * i)} for i in range(n)]

    def exact(outputs, example) -> float:
        return 1.0 if str(outputs.get("answer", "")).strip() == str(example.target) else 0.0

    return Task.from_callable(metric or exact, examples=examples, name=name)


# --------------------------------------------------------------------------------------------------
# LM client: cache
# --------------------------------------------------------------------------------------------------


def test_second_identical_call_is_a_cache_hit_and_costs_nothing(tmp_path):
    calls, responder = counting_fake()
    priced = LMConfig(model="fake", temperature=0.0, price_in_per_m=1000.0, price_out_per_m=2000.0)
    client = LMClient({"worker": priced}, cache=LMCache(tmp_path / "c.sqlite"), responder=responder)
    first = client.complete(MSG)
    second = client.complete(MSG)
    assert not first.cached and second.cached
    assert second.text == first.text and second.prompt_tokens == first.prompt_tokens
    assert len(calls) == 1
    assert first.cost > 0
    snap = client.ledger.snapshot()
    assert snap["llm_calls"] == 1 and snap["cache_hits"] == 1
    assert snap["dollars"] == pytest.approx(first.cost)  # the hit is not paid again
    assert snap["tokens"] == first.prompt_tokens + first.completion_tokens


def test_cache_survives_a_new_client_on_the_same_file(tmp_path):
    calls, responder = counting_fake()
    LMClient({"worker": "fake"}, cache=LMCache(tmp_path / "c.sqlite"), responder=responder).complete(MSG)
    again = LMClient({"worker": "fake"}, cache=LMCache(tmp_path / "c.sqlite"), responder=responder).complete(MSG)
    assert again.cached and len(calls) == 1


def test_sample_index_and_sampling_settings_change_the_key(tmp_path):
    calls, responder = counting_fake()
    client = LMClient({"worker": "fake"}, cache=LMCache(tmp_path / "c.sqlite"), responder=responder)
    client.complete(MSG, sample=0)
    assert not client.complete(MSG, sample=1).cached
    assert not client.complete(MSG, sample=0, temperature=0.9).cached
    assert not client.complete(MSG, sample=0, max_tokens=7).cached
    assert client.complete(MSG, sample=1).cached
    assert calls == [0, 1, 0, 0]
    base = {"model": "fake", "messages": MSG, "sample": 0}
    assert LMCache.make_key(base) != LMCache.make_key({**base, "sample": 1})
    assert LMCache.make_key(base) == LMCache.make_key(dict(reversed(list(base.items()))))


def test_use_cache_false_and_no_cache_always_call(tmp_path):
    calls, responder = counting_fake()
    client = LMClient({"worker": "fake"}, cache=LMCache(tmp_path / "c.sqlite"), responder=responder)
    client.complete(MSG)
    assert not client.complete(MSG, use_cache=False).cached
    uncached = LMClient({"worker": "fake"}, cache=False, responder=responder)
    assert not uncached.complete(MSG).cached and not uncached.complete(MSG).cached
    assert len(calls) == 4


def test_stop_strings_reach_the_server_end_the_answer_and_key_the_cache(stub, tmp_path):
    client = LMClient({"worker": stub_config(stub)}, cache=LMCache(tmp_path / "c.sqlite"))
    client.complete(MSG, stop=["\nObservation"])
    assert stub.last_body["stop"] == ["\nObservation"]
    plain = client.complete(MSG)
    assert "stop" not in stub.last_body and not plain.cached and stub.requests == 2  # a different answer's key
    # A provider that ignores them (here the fake LM) still gives the answer only up to the first one.
    fake = LMClient({"worker": "fake"}, cache=False,
                    responder=ScriptedResponder(["Next tool args: print(1)\nObservation 0: 1 (made up)"]))
    assert fake.complete(MSG, stop=["\nObservation", "\nReply"]).text == "Next tool args: print(1)"


def test_stub_answers_are_cached_too(stub, tmp_path):
    client = LMClient({"worker": stub_config(stub)}, cache=LMCache(tmp_path / "c.sqlite"))
    first = client.complete(MSG)
    second = client.complete(MSG)
    assert first.text == second.text == "stub answer"
    assert second.cached and stub.requests == 1
    assert first.prompt_tokens > 0 and first.completion_tokens > 0


# --------------------------------------------------------------------------------------------------
# LM client: retries
# --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("status", [429, 500, 503])
def test_transient_errors_are_retried_with_backoff(status, sleeps):
    with StubServer(fail_first_n=2, fail_status=status) as stub:
        client = LMClient({"worker": stub_config(stub)}, cache=False)
        c = client.complete(MSG)
        assert c.text == "stub answer"
        assert stub.requests == 3 and stub.failures == 2
    assert sleeps == [0.5, 1.0]  # exponential: 0.5 s, then 1 s (jitter at its midpoint)
    # every request that reached the provider counts, the failed ones too, by kind
    kind = "rate_limit" if status == 429 else "server_error"
    assert client.ledger.calls == 3 and client.ledger.errors == 2 and client.ledger.failures == {kind: 2}


def test_retries_give_up_after_num_retries(sleeps):
    with StubServer(fail_first_n=10, fail_status=500) as stub:
        client = LMClient({"worker": stub_config(stub, num_retries=2)}, cache=False)
        with pytest.raises(LMError) as info:
            client.complete(MSG)
        assert stub.requests == 3
    assert len(sleeps) == 2
    message = str(info.value)
    assert "\n" not in message and "after 3 tries" in message and "500" in message
    assert client.ledger.errors == 3 and client.ledger.calls == 3
    assert info.value.infrastructure  # the provider's fault: an example meeting it is unscored


def test_bad_request_is_not_retried(sleeps):
    with StubServer(fail_first_n=1, fail_status=400) as stub:
        client = LMClient({"worker": stub_config(stub)}, cache=False)
        with pytest.raises(LMError) as info:
            client.complete(MSG)
        assert stub.requests == 1
    assert sleeps == []
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith("LM 'openai/stub' failed: ")
    assert "400" in message and "injected failure" in message
    assert not info.value.infrastructure  # the request was refused: the system's failure


def test_unreachable_endpoint_stops_the_run_at_once(sleeps):
    with StubServer() as stub:
        base = stub.api_base
    client = LMClient({"worker": LMConfig(model="openai/stub", api_base=base, num_retries=3)}, cache=False)
    with pytest.raises(ProviderError) as info:
        client.complete(MSG)
    assert sleeps == []  # nothing answers there: no retry can mend that
    message = str(info.value)
    assert "\n" not in message and "cannot reach" in message and "start that server" in message
    assert client.ledger.calls == 1 and client.ledger.failures == {"unreachable": 1}
    with pytest.raises(ProviderError):  # every later call stops too, without a request
        client.complete([{"role": "user", "content": "another"}])
    assert client.ledger.calls == 1


@pytest.mark.parametrize(("status", "words"), [(401, "check the API key in $STUB_KEY"),
                                               (403, "check the API key in $STUB_KEY"),
                                               (404, "does not know this model")])
def test_a_refused_key_or_unknown_model_stops_the_run_at_once(status, words, sleeps, monkeypatch):
    monkeypatch.setenv("STUB_KEY", "sk-stub-" + "k" * 24)
    with StubServer(fail_first_n=10**6, fail_status=status) as stub:
        client = LMClient({"worker": stub_config(stub, api_key_env="STUB_KEY")}, cache=False)
        with pytest.raises(ProviderError) as info:
            client.complete(MSG)
        assert stub.requests == 1 and sleeps == []
        assert f"HTTP {status}" in str(info.value) and words in str(info.value)
        assert info.value.limit == "provider" and client.ledger.halted is not None


def test_an_unknown_model_named_in_a_400_answer_is_a_refusal_of_the_run():
    class BadRequestError(Exception):
        status_code = 400

    kind = lm_module.failure_kind
    assert kind(lm_module.EndpointError(400, "The model `gpt-9` does not exist")) == "not_found"
    assert kind(BadRequestError("Invalid model: unknown model 'gpt-9'")) == "not_found"
    assert kind(lm_module.EndpointError(400, "max_tokens is too large")) == "client_error"
    assert kind(ConnectionError("cannot reach http://x/v1: ConnectionResetError: reset by peer")) == "connection"


def test_direct_endpoint_sends_the_body_litellm_sends(stub):
    """OpenAI-compatible endpoints are called directly (speed); other extras still go through litellm."""
    msgs = [{"role": "user", "content": "hi"}]
    fast = LMClient({"worker": stub_config(stub, temperature=0.7, extra={"top_p": 0.9})}, cache=False)
    fast.complete(msgs, sample=3, response_format={"type": "json_object"})
    direct = dict(stub.last_body)
    via_litellm = LMClient({"worker": stub_config(stub, temperature=0.7,
                                                  extra={"top_p": 0.9, "extra_headers": {"X-Test": "1"}})},
                           cache=False)
    c = via_litellm.complete(msgs, sample=3, response_format={"type": "json_object"})
    assert c.text and stub.requests == 2
    assert direct == stub.last_body
    assert direct["seed"] == 3 and direct["model"] == "stub" and direct["max_tokens"] == 1024


def test_keep_alive_connections_are_reused_and_survive_a_server_restart_on_the_same_port():
    with StubServer() as stub:
        port = stub.port
        client = LMClient({"worker": stub_config(stub)}, cache=False)
        for i in range(5):
            client.complete([{"role": "user", "content": f"hi {i}"}])
        assert stub.requests == 5
    # The pooled connection is now dead; a new server on the same port must still be reached.
    with StubServer(port=port) as again:
        assert client.complete(MSG).text == "stub answer"
        assert again.requests == 1


# --------------------------------------------------------------------------------------------------
# Budgets
# --------------------------------------------------------------------------------------------------


def test_max_calls_budget_names_the_limit():
    client = LMClient({"worker": "fake"}, cache=False, ledger=Ledger(Budget(max_calls=2)))
    client.complete([{"role": "user", "content": "a"}])
    client.complete([{"role": "user", "content": "b"}])
    with pytest.raises(BudgetExceeded) as info:
        client.complete([{"role": "user", "content": "c"}])
    assert info.value.limit == "llm_calls"
    assert "--max-calls 2" in str(info.value) and "2 of 2" in str(info.value)  # names the flag to raise
    assert client.ledger.calls == 2


def test_dollar_budget_refuses_a_request_that_could_cross_it():
    priced = LMConfig(model="fake", price_in_per_m=10.0, price_out_per_m=10.0, max_tokens=500)  # $10 per M tokens
    client = LMClient({"worker": priced}, cache=False, ledger=Ledger(Budget(max_dollars=0.05)))
    sent = 0
    with pytest.raises(BudgetExceeded) as info:
        while True:
            client.complete([{"role": "user", "content": f"question {sent}"}])
            sent += 1
    # each request could cost up to ~$0.0055 (its prompt as bytes and 500 completion tokens): the limit holds
    assert sent >= 8 and client.ledger.dollars <= 0.05
    assert info.value.limit == "dollars" and "--budget-usd 0.05" in str(info.value)
    assert "could cost up to $0.005" in str(info.value) and "500 completion tokens" in str(info.value)
    assert client.ledger.reserved_dollars == 0.0 and client.ledger.in_flight == 0


def test_a_huge_prompt_is_refused_before_it_is_sent():
    seen: list[int] = []

    def responder(messages, info):
        seen.append(1)
        return "answer"

    priced = LMConfig(model="fake", price_in_per_m=10.0, price_out_per_m=10.0)
    client = LMClient({"worker": priced}, cache=False, ledger=Ledger(Budget(max_dollars=0.01)), responder=responder)
    with pytest.raises(BudgetExceeded, match=r"could cost up to \$10\.0"):
        client.complete([{"role": "user", "content": "x" * 1_000_000}])
    assert seen == [] and client.ledger.calls == 0 and client.ledger.dollars == 0.0


def test_max_tokens_budget():
    client = LMClient({"worker": "fake"}, cache=False, ledger=Ledger(Budget(max_tokens=3)))
    client.complete(MSG)
    with pytest.raises(BudgetExceeded) as info:
        client.complete(MSG)
    assert info.value.limit == "tokens" and "--max-tokens 3" in str(info.value)


def test_cache_hits_are_served_after_the_budget_is_spent(tmp_path):
    client = LMClient({"worker": "fake"}, cache=LMCache(tmp_path / "c.sqlite"), ledger=Ledger(Budget(max_calls=1)))
    first = client.complete(MSG)
    assert client.complete(MSG).text == first.text  # free: no budget check for cached answers
    with pytest.raises(BudgetExceeded):
        client.complete([{"role": "user", "content": "new"}])


def test_failed_requests_count_against_the_budget(sleeps):
    with StubServer(fail_first_n=1, fail_status=400) as stub:
        client = LMClient({"worker": stub_config(stub)}, cache=False, ledger=Ledger(Budget(max_calls=1)))
        with pytest.raises(LMError):
            client.complete(MSG)
        with pytest.raises(BudgetExceeded, match="--max-calls"):
            client.complete(MSG)
        assert stub.requests == 1 and client.ledger.calls == 1


def test_retries_stop_at_the_call_budget(sleeps):
    with StubServer(fail_first_n=10, fail_status=503) as stub:
        client = LMClient({"worker": stub_config(stub)}, cache=False, ledger=Ledger(Budget(max_calls=2)))
        with pytest.raises(BudgetExceeded):
            client.complete(MSG)
        assert stub.requests == 2 and client.ledger.calls == 2  # never a request past the limit


# --------------------------------------------------------------------------------------------------
# Evaluator
# --------------------------------------------------------------------------------------------------


def test_concurrency_is_bounded_by_the_evaluator():
    with StubServer(latency_s=0.05) as stub:
        client = LMClient({"worker": stub_config(stub)}, cache=False)
        report = Evaluator(question_task(16), client, limit=16, concurrency=4).evaluate(load_seed("cot"))
        assert report.n == 16 and stub.requests == 16
        assert 2 <= stub.max_in_flight <= 4
    assert not report.failures.get("lm")


def test_concurrency_is_bounded_per_model_by_the_client():
    with StubServer(latency_s=0.05) as stub:
        client = LMClient({"worker": stub_config(stub, max_concurrency=2)}, cache=False)
        report = Evaluator(question_task(12), client, limit=12, concurrency=8).evaluate(load_seed("cot"))
        assert report.n == 12
        assert stub.max_in_flight == 2


def test_concurrent_evaluation_actually_overlaps_calls():
    with StubServer(latency_s=0.2) as stub:
        client = LMClient({"worker": stub_config(stub)}, cache=False)
        started = time.perf_counter()
        report = Evaluator(question_task(16), client, limit=16, concurrency=16).evaluate(load_seed("cot"))
        wall = time.perf_counter() - started
    assert report.n == 16 and report.llm_calls == 16
    assert wall < 16 * 0.2 / 2  # serial would be 3.2 s


@pytest.mark.parametrize("concurrency", [1, 4])
def test_budget_stop_keeps_every_finished_example(concurrency):
    client = LMClient({"worker": "fake"}, cache=False, ledger=Ledger(Budget(max_calls=10)))
    report = Evaluator(question_task(20), client, limit=20, concurrency=concurrency).evaluate(load_seed("debate"))
    # debate makes 7 LM calls per example: the budget runs out in the middle of an example.
    assert report.stopped == "llm_calls"
    assert not report.complete and report.planned == 20
    assert report.n == (1 if concurrency == 1 else report.n) <= 1
    for ex in report.examples:  # whatever was recorded is whole: no half-run example
        assert ex.error is None and ex.error_kind is None
        assert ex.outputs.get("answer") and ex.llm_calls == 7 and len(ex.trace) == 7
    assert report.llm_calls == 7 * report.n
    assert 10 <= client.ledger.calls <= 10 + concurrency  # in-flight calls may pass the check together
    assert report.summary()["stopped"] == "llm_calls"


def test_budget_stop_with_single_call_examples_keeps_them_all():
    client = LMClient({"worker": "fake"}, cache=False, ledger=Ledger(Budget(max_calls=5)))
    report = Evaluator(question_task(20), client, limit=20, concurrency=3).evaluate(load_seed("cot"))
    assert report.stopped == "llm_calls"
    assert report.n == client.ledger.calls and 5 <= report.n <= 7
    ids = [int(e.example_id.split("/")[1]) for e in report.examples]
    assert ids == sorted(ids)  # in task order
    assert all(e.error is None and e.llm_calls == 1 for e in report.examples)


def test_unparsable_model_output_is_a_scored_parse_failure():
    client = LMClient({"worker": "fake"}, cache=False,
                      responder=lambda messages, info: "I refuse to use your format. The answer might be 4.")
    report = Evaluator(question_task(3), client, limit=3, concurrency=2).evaluate(load_seed("cot"))
    assert report.n == 3 and report.score == 0.0
    assert report.failures == {"parse": 3}
    for ex in report.examples:
        assert ex.error_kind == "parse"
        assert ex.error.startswith("AdapterParseError") and "\n" not in ex.error
        assert ex.outputs == {}
    assert client.ledger.calls == 6  # ChatAdapter, then dspy's JSONAdapter fallback, per example
    assert report.failure_examples(2)[0].error_kind == "parse"


def test_parse_failure_keeps_its_trace():
    client = LMClient({"worker": "fake"}, cache=False, responder=lambda messages, info: "garbage")
    report = Evaluator(question_task(1), client, limit=1, concurrency=1).evaluate(load_seed("cot"))
    ex = report.examples[0]
    assert ex.trace and ex.trace[0]["error"] and ex.llm_calls == 2 and ex.tokens > 0


def test_a_later_parse_recovers_per_example():
    replies = ["garbage", "still garbage", chat_reply(reasoning="2+2", answer="4")]
    client = LMClient({"worker": "fake"}, cache=False, responder=ScriptedResponder(replies))
    task = question_task(2, metric=lambda outputs: 1.0 if outputs.get("answer") == "4" else 0.0)
    report = Evaluator(task, client, limit=2, concurrency=1).evaluate(load_seed("cot"))
    assert [e.error_kind for e in report.examples] == ["parse", None]
    assert report.scores == [0.0, 1.0]
    assert report.failures == {"parse": 1}


def test_lm_errors_are_scored_failures_of_kind_lm(sleeps):
    with StubServer(fail_first_n=100, fail_status=400) as stub:
        client = LMClient({"worker": stub_config(stub)}, cache=False)
        report = Evaluator(question_task(2), client, limit=2, concurrency=2).evaluate(load_seed("cot"))
    assert report.failures == {"lm": 2}
    assert all("400" in e.error for e in report.examples)


def test_per_example_timeout_marks_timeout_and_does_not_wait_for_the_stuck_example():
    release = threading.Event()

    def exact(outputs, example) -> float:
        if example.id == "qs/1":
            release.wait(20)  # this example hangs outside any LM call: the system's own timeout
        return 1.0 if str(outputs.get("answer", "")).strip() == str(example.target) else 0.0

    client = LMClient({"worker": "fake"}, cache=False)
    ev = Evaluator(question_task(4, metric=exact), client, limit=4, concurrency=1, example_timeout_s=0.3)
    started = time.perf_counter()
    try:
        report = ev.evaluate(load_seed("cot"))
        wall = time.perf_counter() - started
    finally:
        release.set()
    kinds = {e.example_id: e.error_kind for e in report.examples}
    assert kinds == {"qs/0": None, "qs/1": "timeout", "qs/2": None, "qs/3": None}
    stuck = report.examples[1]
    assert stuck.score == 0.0 and "longer than 0.3s" in stuck.error and not stuck.unscored
    assert report.failures.get("timeout") == 1
    assert wall < 5  # neither the rest of the batch nor evaluate() waited for the hung thread


def test_an_example_given_up_for_its_timeout_sends_no_more_lm_requests():
    steps = 12
    chain = chain_genome(steps)
    sent: list[int] = []

    def slow(messages, info):  # 0.2 s a call: the chain needs 2.4 s; its example may take 0.4 s (seen within 1 s)
        sent.append(1)
        time.sleep(0.2)
        return fake_reply(messages, info)

    client = LMClient({"worker": "fake"}, cache=False, responder=slow)
    ev = Evaluator(question_task(1), client, limit=1, concurrency=1, example_timeout_s=0.1, provider_wait_s=0.3)
    report = ev.evaluate(chain)
    assert report.examples[0].error_kind == "timeout"
    at_give_up = len(sent)
    time.sleep(2.5)  # time enough for the whole chain, had its thread gone on
    assert at_give_up < steps and len(sent) <= at_give_up + 1  # at most the request already in flight ended
    assert client.ledger.calls == len(sent)  # nothing refused was counted as sent


def test_later_evaluations_reuse_the_threads_of_a_finished_one_but_never_a_stuck_ones(monkeypatch):
    from masforge.evaluators.executors import local

    monkeypatch.setattr(local, "_spare", [])  # no idle pool left by an earlier test
    threads: list[threading.Thread] = []
    release = threading.Event()

    def exact(outputs, example) -> float:
        threads.append(threading.current_thread())
        if example.id == "stuck/0":
            release.wait(20)
        return 1.0

    def pool_threads() -> set[threading.Thread]:
        return {t for t in threading.enumerate() if t.name.startswith("masforge-eval")}

    client = LMClient({"worker": "fake"}, cache=False)
    try:
        Evaluator(question_task(4, metric=exact), client, limit=4, concurrency=2).evaluate(load_seed("cot"))
        idle = pool_threads()
        threads.clear()
        Evaluator(question_task(4, metric=exact), client, limit=4, concurrency=2).evaluate(load_seed("cot"))
        assert threads and set(threads) <= idle  # the second evaluation started no thread
        threads.clear()
        stuck = Evaluator(question_task(2, name="stuck", metric=exact), client, limit=2, concurrency=2,
                          example_timeout_s=0.3).evaluate(load_seed("cot"))
        assert stuck.examples[0].error_kind == "timeout"
        held = threads[0]
        threads.clear()
        after = Evaluator(question_task(8, metric=exact), client, limit=8, concurrency=2).evaluate(load_seed("cot"))
        assert after.n == 8 and held not in threads  # the stuck thread's pool went out of use
    finally:
        release.set()


def _evaluate_while_the_provider_hangs_on(hangs: Callable[[str], bool], n: int, timeout_s: float,
                                          max_unscored: float) -> EvalReport:
    """The cot seed on ``n`` questions, one at a time, with an LM that never answers a prompt ``hangs`` picks."""
    release = threading.Event()

    def responder(messages, info):
        if hangs(str(messages[-1]["content"])):
            release.wait(20)  # the LM never answers this one
        return fake_reply(messages, info)

    client = LMClient({"worker": "fake"}, cache=False, responder=responder)
    ev = Evaluator(question_task(n), client, limit=n, concurrency=1, example_timeout_s=timeout_s,
                   max_unscored=max_unscored)
    try:
        return ev.evaluate(load_seed("cot"))
    finally:
        release.set()


def test_an_example_stuck_on_the_provider_is_unscored_not_wrong():
    report = _evaluate_while_the_provider_hangs_on(lambda prompt: "What is 1 + 1?" in prompt, 4, 0.3, 0.5)
    stuck = report.examples[1]
    assert stuck.unscored and stuck.error_kind == "timeout" and "waiting on the LM provider" in stuck.error
    assert report.n == 3 and report.unscored == 1 and report.score == 1.0  # left out, not counted as wrong
    assert report.failures == {"unscored": 1} and not report.incomplete


def test_an_evaluation_stops_queueing_once_too_much_is_unscored():
    report = _evaluate_while_the_provider_hangs_on(lambda prompt: True, 10, 0.2, 0.2)
    # 3 unscored of 10 planned is over the 20% share: the other 7 are never run
    assert report.attempted == 3 and report.unscored == 3 and report.incomplete


def test_a_slow_provider_is_not_a_hung_system():
    def responder(messages, info):
        time.sleep(0.6)  # a busy shared server: twice the example's own timeout, well inside the provider wait
        return fake_reply(messages, info)

    client = LMClient({"worker": "fake"}, cache=False, responder=responder)
    ev = Evaluator(question_task(2), client, limit=2, concurrency=2, example_timeout_s=0.3)
    report = ev.evaluate(load_seed("cot"))
    assert report.failures == {} and report.n == 2 and report.score == 1.0


def test_queueing_for_the_clients_own_request_slots_is_waiting_on_the_provider():
    # Five copies per example, four examples at once, one request at a time to the LM (a server with one slot):
    # each example spends most of its time queued behind the others' requests. That is the provider's time, not
    # the system's, so no example times out (before, the queue counted as the system's own time: a 5-copy system
    # on a busy shared local server scored 0 with 27 of 32 examples "timeout").
    def responder(messages, info):
        time.sleep(0.05)
        return fake_reply(messages, info)

    client = LMClient({"worker": LMConfig(model="fake", max_concurrency=1)}, cache=False, responder=responder)
    ev = Evaluator(question_task(4), client, limit=4, concurrency=4, example_timeout_s=0.4)
    report = ev.evaluate(load_seed("self_consistency"))
    assert report.failures == {} and report.n == 4 and report.score == 1.0


def test_parallel_requests_count_once_in_the_time_waited_on_providers():
    seen = Incidents()
    seen.wait(1)
    seen.wait(1)  # a second copy's request while the first is in flight
    time.sleep(0.2)
    seen.wait(-1)
    seen.wait(-1)
    time.sleep(0.1)  # the system's own time: not counted
    assert 0.2 <= seen.waited_s() < 0.3


def test_cascade_prunes_a_hopeless_candidate_after_first_n():
    calls, responder = counting_fake()
    client = LMClient({"worker": "fake"}, cache=False, responder=responder)
    task = question_task(20, metric=lambda outputs: 0.0)
    ev = Evaluator(task, client, limit=20, concurrency=2, cascade=Cascade(first_n=4))
    report = ev.evaluate(load_seed("cot"), threshold=0.5)
    assert report.pruned and report.n == 4 and len(calls) == 4
    assert not report.complete and report.stopped is None


def test_cascade_continues_a_promising_candidate_and_ignores_no_threshold():
    client = LMClient({"worker": "fake"}, cache=False)
    task = question_task(12, metric=lambda outputs: 1.0)
    ev = Evaluator(task, client, limit=12, concurrency=2, cascade=Cascade(first_n=4))
    report = ev.evaluate(load_seed("cot"), threshold=0.5)
    assert not report.pruned and report.n == 12 and report.complete
    assert ev.evaluate(load_seed("cot")).n == 12  # no threshold: no cascade


def test_report_numbers_from_a_fake_run():
    client = LMClient({"worker": "fake"}, cache=False)
    report = Evaluator(question_task(10), client, limit=10, concurrency=4).evaluate(load_seed("cot"))
    assert report.complete and report.n == 10
    assert report.score == 1.0  # the fake LM computes "What is i + i?"
    assert report.tokens > 0 and report.llm_calls == 10 and report.dollars == 0.0
    s = report.summary()
    assert s["ci_low"] <= s["score"] <= s["ci_high"]
    assert s["n"] == 10 and s["failures"] == {}
    assert report.to_dict()["examples"][0]["trace"]


# --------------------------------------------------------------------------------------------------
# Statistics and failure ordering
# --------------------------------------------------------------------------------------------------


def _ex(i: int, score: float, error: str | None = None, kind: str | None = None) -> ExampleResult:
    return ExampleResult(f"e{i}", {}, "", {}, score, error=error, error_kind=kind)


def test_bootstrap_ci_contains_the_mean_and_is_narrow_for_constant_scores():
    mixed = [1.0, 0.0, 1.0, 1.0, 0.0, 1.0, 0.0, 1.0, 1.0, 0.0] * 3
    lo, hi = bootstrap_ci(mixed)
    mean = sum(mixed) / len(mixed)
    assert 0.0 <= lo < mean < hi <= 1.0
    assert hi - lo < 0.5
    assert bootstrap_ci([1.0] * 20) == (1.0, 1.0)
    assert bootstrap_ci([0.25] * 7) == pytest.approx((0.25, 0.25))
    wide = bootstrap_ci([1.0, 0.0])
    assert wide[1] - wide[0] > hi - lo  # fewer examples, wider interval
    assert bootstrap_ci(mixed) == (lo, hi)  # deterministic


def test_failure_examples_errors_first_then_lowest_scores():
    report = EvalReport("g", "g", "t", "validation", "k", 6)
    report.examples = [_ex(0, 1.0), _ex(1, 0.5), _ex(2, 0.0, "LMError: x", "lm"), _ex(3, 0.2),
                       _ex(4, 0.0, "AdapterParseError: y", "parse"), _ex(5, 0.0)]
    ordered = [e.example_id for e in report.failure_examples(k=10)]
    assert ordered[:2] == ["e2", "e4"]  # errors first
    assert ordered[2:] == ["e5", "e3", "e1"]  # then by score, lowest first; the perfect one is left out
    assert [e.example_id for e in report.failure_examples(k=3)] == ["e2", "e4", "e5"]
    assert report.failures == {"lm": 1, "parse": 1, "wrong": 3}
    # why the wrong ones failed, as the metric said it (the errors of the system are not among them)
    report.examples[1].details = {"error_kind": "syntax"}
    report.examples[3].details = {"error_kind": "no_code"}
    assert report.wrong_reasons == {"syntax": 1, "no_code": 1, "unstated": 1}


# --------------------------------------------------------------------------------------------------
# CLI
# --------------------------------------------------------------------------------------------------


@pytest.fixture
def cli(monkeypatch, tmp_path):
    from masforge.cli import app

    monkeypatch.delenv("MASFORGE_LM_CACHE", raising=False)
    monkeypatch.setenv("MASFORGE_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("COLUMNS", "200")
    runner = CliRunner()
    return lambda *args: runner.invoke(app, list(args))


def test_cli_evaluate_prints_score_and_ci(cli, tmp_path):
    out_file = tmp_path / "report.json"
    result = cli("evaluate", "cot", "--task", "rg:basic_arithmetic", "--lm", "fake", "--limit", "5",
                 "--output", str(out_file))
    assert result.exit_code == 0, result.output
    out = result.output
    assert "score" in out and "95% CI" in out and "rg:basic_arithmetic" in out
    row = next(line for line in out.splitlines() if "rg:basic_arithmetic" in line and "validation" in line
               and "│" in line)  # the table's row, not the plan line above it
    assert "[" in row and "]" in row  # the CI cell
    assert "Traceback" not in out and "stopped early" not in out
    assert out_file.exists() and '"n": 5' in out_file.read_text()
    assert Path(tmp_path / "cache" / "lm_cache.sqlite").exists()


def test_cli_evaluate_says_why_wrong_answers_were_wrong(cli, monkeypatch):
    monkeypatch.setenv("MASFORGE_DATA_DIR", str(Path(__file__).parent / "fixtures" / "data"))
    result = cli("evaluate", "io", "--task", "mbpp", "--lm", "fake", "--limit", "2", "--no-cache")
    assert result.exit_code == 0, result.output
    assert "wrong: 2 (syntax 2)" in result.output  # the fake LM's prose is not Python


def test_cli_evaluate_max_calls_stop_message(cli):
    result = cli("evaluate", "cot", "--task", "rg:basic_arithmetic", "--lm", "fake", "--limit", "6",
                 "--max-calls", "2", "--concurrency", "1", "--no-cache")
    assert result.exit_code == 0, result.output
    assert "stopped early: LM-call budget reached (--max-calls)" in result.output
    assert "2/6" in result.output  # the table covers the finished examples


def test_cli_evaluate_budget_usd_stop_message(cli):
    result = cli("evaluate", "cot", "--task", "rg:basic_arithmetic", "--lm", "fake", "--limit", "3",
                 "--budget-usd", "0", "--no-cache")
    assert result.exit_code == 0, result.output
    assert "stopped early: dollar budget reached (--budget-usd)" in result.output


def test_cli_evaluate_unknown_task_is_one_line(cli):
    result = cli("evaluate", "cot", "--task", "no-such-task", "--lm", "fake")
    assert result.exit_code == 1
    assert "unknown task" in result.output and "Traceback" not in result.output


def test_cli_lm_at_an_api_base_sends_the_openai_key_or_the_one_api_key_env_names(cli, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    args = ["evaluate", "io", "--task", "rg:basic_arithmetic", "--lm", "openai/stub", "--limit", "1", "--no-cache"]
    with StubServer() as stub:
        assert cli(*args, "--api-base", stub.api_base).exit_code == 0
        assert stub.last_authorization == "Bearer sk-none"  # nothing set: the placeholder
        monkeypatch.setenv("OPENAI_API_KEY", "sk-openai-" + "o" * 24)
        assert cli(*args, "--api-base", stub.api_base).exit_code == 0
        assert stub.last_authorization == "Bearer sk-openai-" + "o" * 24
        monkeypatch.setenv("HOSTED_PROVIDER_KEY", "sk-hosted-" + "h" * 24)
        result = cli(*args, "--api-base", stub.api_base, "--api-key-env", "HOSTED_PROVIDER_KEY")
        assert result.exit_code == 0, result.output
        assert stub.last_authorization == "Bearer sk-hosted-" + "h" * 24
        requests = stub.requests
        result = cli(*args, "--api-base", stub.api_base, "--api-key-env", "NO_SUCH_KEY_VARIABLE")
        assert result.exit_code == 1 and "$NO_SUCH_KEY_VARIABLE" in result.output, result.output
        assert stub.requests == requests  # refused before anything was sent
