"""Reliability against a flaky provider, at CI size: the fault-injecting stub server, the LM client's
classification and exact accounting of every request, honest failures (unscored, incomplete, outage) in a
search, and hard budgets. Larger soak runs: ``bench/faults.py`` (results in ``bench/results/reliability.md``)."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from masforge.archive.store import Archive  # noqa: E402
from masforge.cli import app  # noqa: E402
from masforge.errors import BudgetExceeded, LMError, ProviderError  # noqa: E402
from masforge.lm.budget import Budget, MaxCalls, Usage, free_lm_warning  # noqa: E402
from masforge.lm.client import LMClient, LMConfig, Reservation  # noqa: E402
from masforge.lm.fake import fake_reply  # noqa: E402
from masforge.lm.ledger import Completion, Ledger  # noqa: E402
from masforge.search.budget import Patience, SearchBudget, SearchUsage  # noqa: E402
from masforge.search.config import RunConfig  # noqa: E402
from masforge.search.engine import run_search  # noqa: E402
from masforge.testing.stub_server import FAULTS, StubServer  # noqa: E402

TASK = "rg:basic_arithmetic"


@pytest.fixture(autouse=True)
def _private_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MASFORGE_CACHE", str(tmp_path / "cache"))


def fake_over_http(messages: list[dict[str, Any]], body: dict[str, Any]) -> str:
    """The stub answers like ``--lm fake`` (arithmetic computed), so systems score above zero."""
    return fake_reply(messages, {"sample": body.get("seed", 0)})


def flaky(rate: float = 0.3, **kw: Any) -> StubServer:
    return StubServer(responder=fake_over_http, faults=StubServer.uniform_faults(rate), fault_seed=kw.pop("seed", 7),
                      hang_s=kw.pop("hang_s", 1.0), long_chars=kw.pop("long_chars", 40_000), **kw)


def stub_lm(stub: StubServer, **kw: Any) -> dict[str, Any]:
    return {"model": "openai/stub", "api_base": stub.api_base, "timeout_s": 0.4, "max_concurrency": 8,
            "temperature": 0.0, **kw}


def assert_every_fault_classified(stub: StubServer, ledger: Ledger | dict[str, Any]) -> None:
    """Each injected fault shows up in the client's books under the kind it is."""
    snap = ledger.snapshot() if isinstance(ledger, Ledger) else ledger
    inj = {k: stub.injected.get(k, 0) for k in FAULTS}
    failures, notes = snap["failures"], snap["notes"]
    assert failures.get("rate_limit", 0) == inj["rate_limit"]
    assert failures.get("server_error", 0) == inj["server_error"]
    assert failures.get("timeout", 0) == inj["hang"]
    assert failures.get("connection", 0) == inj["drop"] + inj["cut_body"]
    assert failures.get("bad_answer", 0) == inj["bad_json"]
    assert notes.get("empty", 0) == inj["empty"]
    assert notes.get("overlong", 0) == inj["long"]
    assert set(failures) <= {"rate_limit", "server_error", "timeout", "connection", "bad_answer"}


def assert_spend_exact(stub: StubServer, snap: dict[str, Any]) -> None:
    """Every request that reached the provider is counted, and the tokens are those of the answers received."""
    assert snap["llm_calls"] == stub.requests
    assert snap["prompt_tokens"] == stub.delivered_tokens["prompt_tokens"]
    assert snap["completion_tokens"] == stub.delivered_tokens["completion_tokens"]


# --------------------------------------------------------------------------------------------------
# The fault server and the client
# --------------------------------------------------------------------------------------------------


def test_fault_server_rejects_unknown_faults_and_rates() -> None:
    with pytest.raises(ValueError, match="unknown fault 'meteor'"):
        StubServer(faults={"meteor": 0.1})
    with pytest.raises(ValueError, match="sum to at most 1"):
        StubServer(faults={"drop": 0.7, "hang": 0.6})
    assert sum(StubServer.uniform_faults(0.3).values()) == pytest.approx(0.3)


def test_client_at_30_percent_faults_classifies_every_fault_and_accounts_exactly() -> None:
    with flaky(0.3) as stub:
        cfg = LMConfig(**stub_lm(stub, num_retries=4, max_concurrency=8, max_tokens=256))
        client = LMClient({"worker": cfg}, cache=False)
        prompts = [[{"role": "user", "content": f"What is {i} + {i}? Final answer:"}] for i in range(80)]

        def ask(messages: list[dict[str, Any]]) -> str:
            try:
                return client.complete(messages).text
            except LMError as exc:
                assert exc.infrastructure  # every injected fault is the provider's
                return "LMError"

        with ThreadPoolExecutor(8) as pool:
            answers = list(pool.map(ask, prompts))
        snap = client.ledger.snapshot()
        assert stub.requests > 80 and sum(stub.injected.values()) > 20  # the faults did happen
        assert_every_fault_classified(stub, client.ledger)
        assert_spend_exact(stub, snap)
        assert snap["max_attempt"] <= 1 + cfg.num_retries  # never a retry past the cap
        assert snap["errors"] == sum(snap["failures"].values())
        assert all(len(a) <= cfg.max_tokens * 16 for a in answers)  # absurdly long answers are cut
        assert sum(a.endswith("Final answer: " + str(2 * i)) or str(2 * i) in a
                   for i, a in enumerate(answers)) >= 65  # most calls still get through


def test_retry_after_is_honoured() -> None:
    waits: list[float] = []
    import masforge.lm.client as lm_module

    with StubServer(fail_first_n=2, fail_status=429, retry_after=0.01) as stub:
        real_wait = lm_module._Stop.wait  # the backoff's sleep (which a stop cuts short)
        lm_module._Stop.wait = lambda self, s: (waits.append(s), real_wait(self, s))  # type: ignore[method-assign]
        try:
            LMClient({"worker": LMConfig(**stub_lm(stub))}, cache=False).complete([{"role": "user", "content": "x"}])
        finally:
            lm_module._Stop.wait = real_wait  # type: ignore[method-assign]
    assert waits == [0.01, 0.01]  # the server's word, not the exponential backoff


# --------------------------------------------------------------------------------------------------
# Budgets: one type, composable, naming the flag
# --------------------------------------------------------------------------------------------------


def test_budget_conditions_compose_and_name_their_flags() -> None:
    budget = SearchBudget(max_calls=10, max_candidates=5) | Patience(3) | MaxCalls(8)
    assert budget.max_calls == 8 and budget.patience == 3  # the tighter limit wins
    assert budget.stop(Usage(calls=7)) is None
    stop = budget.stop(Usage(calls=8))
    assert stop is not None and stop.limit == "llm_calls" and stop.flag == "--max-calls"
    assert "--max-calls 8" in stop.message and "8 of 8 LM calls" in stop.message
    assert budget.stop(SearchUsage(since_best=3), progress_only=True).flag == "--patience"  # type: ignore[union-attr]
    assert budget.stop(SearchUsage(candidates=9), spend_only=True) is None  # candidates are not spending
    search = SearchBudget(max_calls=100, max_dollars=2.0, max_candidates=20, test_share=0.25).for_search()
    assert (search.max_calls, search.max_dollars, search.max_candidates) == (75, 1.5, 20)
    assert Budget(max_seconds=120).stop(Usage(seconds=121)).message.startswith(  # type: ignore[union-attr]
        "budget reached: --max-minutes 2 ")


def test_budget_from_a_run_configuration_keeps_the_default_candidates_and_one_line_errors() -> None:
    cfg = RunConfig.from_data({"task": TASK, "budget": {"max_dollars": 2}})
    assert cfg.budget.max_candidates == 20 and cfg.budget.max_dollars == 2.0
    with pytest.raises(Exception, match="budget.test_share"):
        RunConfig.from_data({"task": TASK, "budget": {"test_share": 1.5}})


def test_dollar_budget_on_a_free_lm_is_a_one_line_warning(tmp_path: Path) -> None:
    assert free_lm_warning(Budget(max_dollars=1), {"local": (True, True)}).startswith("--budget-usd 1 has no effect")
    assert "price of LM 'openai/x' is unknown" in str(free_lm_warning(Budget(max_dollars=1),
                                                                      {"openai/x": (False, False)}))
    assert free_lm_warning(Budget(max_calls=3), {"local": (True, True)}) is None
    result = run_search(RunConfig.from_data({
        "task": TASK, "strategy": ["random"], "lm": "fake", "seeds": ["cot"], "limit": 2, "test_top_k": 0,
        "output": str(tmp_path / "runs"), "budget": {"max_candidates": 2, "max_dollars": 1}}), progress=False)
    assert len(result.warnings) == 1 and "has no effect" in result.warnings[0] and "\n" not in result.warnings[0]
    assert json.loads((result.run_dir / "summary.json").read_text())["warnings"] == result.warnings


def test_call_budget_is_hard_and_covers_the_held_out_rescoring(tmp_path: Path) -> None:
    with StubServer(responder=fake_over_http) as stub:
        result = run_search(RunConfig.from_data({
            "task": TASK, "strategy": ["random"], "lm": stub_lm(stub), "seeds": ["cot", "io", "self_refine"],
            "limit": 4, "test_limit": 4, "test_top_k": 2, "output": str(tmp_path / "runs"),
            "budget": {"max_candidates": 50, "max_calls": 30, "test_share": 0.3}}), progress=False)
        assert stub.requests == result.spend["llm_calls"] <= 30  # the held-out re-scoring is inside the budget
    summary = json.loads((result.run_dir / "summary.json").read_text())
    assert summary["budget"]["search"]["max_calls"] == 21 and summary["budget"]["overshoot"]["llm_calls"] == 0
    assert summary["budget"]["overshoot_search"]["llm_calls"] == 0
    assert result.stop_reason == "llm_calls"
    assert result.test_scores  # the reserve paid for re-scoring the finalists


def test_ledger_journal_continues_the_same_totals(tmp_path: Path) -> None:
    journal = tmp_path / "ledger.jsonl"
    first = Ledger(Budget(max_calls=5), journal=journal)
    for i in range(3):
        first.reserve()
        first.settle(Completion("x", 10, 5, 0.5, 0.0, False, "m"), "empty" if i == 0 else None)
    first.reserve()
    first.fail("timeout")
    first.reserve()  # in flight when the process died: it may have reached the provider
    again = Ledger(Budget(max_calls=5), journal=journal)
    again.resume()
    assert (again.calls, again.prompt_tokens, again.completion_tokens, again.dollars) == (5, 30, 15, 1.5)
    assert again.failures == {"timeout": 1, "unsettled": 1} and again.notes == {"empty": 1}
    with pytest.raises(BudgetExceeded, match="--max-calls 5"):
        again.reserve()


# --------------------------------------------------------------------------------------------------
# Searches against a flaky or a dead provider
# --------------------------------------------------------------------------------------------------


def _search(tmp_path: Path, lm: dict[str, Any], **kw: Any) -> Any:
    data: dict[str, Any] = {"task": TASK, "strategy": ["random"], "lm": lm, "seeds": ["cot", "io", "self_refine"],
                            "limit": 4, "test_limit": 3, "test_top_k": 1, "output": str(tmp_path / "runs"),
                            "budget": {"max_candidates": 6}}
    data.update(kw)
    return run_search(RunConfig.from_data(data), progress=False)


def test_search_at_30_percent_faults_finishes_classifies_and_accounts_exactly(tmp_path: Path) -> None:
    with flaky(0.3, seed=1) as stub:
        result = _search(tmp_path, stub_lm(stub, num_retries=5))
        assert result.stop_reason == "max_candidates" and len(result.candidates) == 6
        assert sum(stub.injected.values()) >= 10
        assert_every_fault_classified(stub, result.spend)
        assert_spend_exact(stub, result.spend)
        assert result.spend["max_attempt"] <= 6
    assert max(c.score for c in result.candidates) > 0  # the search still measured something


def test_outage_is_unscored_named_and_never_reused_as_a_score(tmp_path: Path) -> None:
    archive = str(tmp_path / "shared-archive")
    with StubServer(responder=fake_over_http, fail_first_n=10**9, fail_status=429, retry_after=0) as down:
        result = _search(tmp_path, stub_lm(down, num_retries=2), archive=archive, name="down")
    assert result.stop_reason == "outage" and result.candidates == []
    assert result.outage is not None and "429" in result.outage["error"]
    assert "provider outage" in result.outage["message"] and "--resume" in result.outage["message"]
    assert len(result.outage["incomplete_candidates"]) == 3
    stored = Archive.open(archive)
    assert len(stored.list(include_pruned=True)) == 3  # kept, with lineage, but without a result
    assert all(not rec.results for rec in stored.list(include_pruned=True))
    summary = json.loads((result.run_dir / "summary.json").read_text())
    assert summary["stop_reason"] == "outage" and summary["outage"]["message"]
    with StubServer(responder=fake_over_http) as healthy:  # a rerun against a healthy endpoint evaluates them
        again = _search(tmp_path, stub_lm(healthy), archive=archive, name="up")
        assert healthy.requests > 0
    assert again.stats["reused"] == 0 and again.stop_reason == "max_candidates"
    assert max(c.score for c in again.candidates) > 0


def test_search_cli_exits_1_and_names_an_outage(tmp_path: Path) -> None:
    with StubServer(fail_first_n=10**9, fail_status=503, retry_after=0) as down:
        config = tmp_path / "run.yaml"
        config.write_text(json.dumps({"task": TASK, "strategy": "random", "seeds": ["cot", "io", "self_refine"],
                                      "limit": 3, "lm": stub_lm(down, num_retries=1), "output": str(tmp_path / "r"),
                                      "budget": {"max_candidates": 4}}))
        res = CliRunner().invoke(app, ["search", "--config", str(config), "-q"])
    assert res.exit_code == 1, res.output
    assert "provider outage" in res.output and "Traceback" not in res.output


def test_examples_hit_by_sporadic_failures_are_left_out_of_the_score(tmp_path: Path) -> None:
    from masforge.evaluators.runner import Evaluator
    from masforge.evaluators.tasks import get_task
    from masforge.seeds import load_seed

    with StubServer(responder=fake_over_http, fail_first_n=3, fail_status=500, retry_after=0) as stub:
        client = LMClient({"worker": LMConfig(**stub_lm(stub, num_retries=2))}, cache=False)
        report = Evaluator(get_task(TASK), client, limit=10, concurrency=1, max_unscored=0.2).evaluate(
            load_seed("io"))
    assert report.unscored == 1 and report.n == 9 and report.attempted == 10
    assert report.failures.get("unscored") == 1 and "unscored" not in {e.error_kind for e in report.examples}
    assert not report.incomplete and report.complete
    bad = next(e for e in report.examples if e.unscored)
    assert "500" in (bad.error or "") and bad.score == 0.0
    assert report.score == sum(e.score for e in report.examples) / 9


@pytest.fixture
def stub() -> Iterator[StubServer]:
    with StubServer(responder=fake_over_http) as server:
        yield server


def test_incomplete_candidates_are_evaluated_again_once_the_provider_recovers(tmp_path: Path) -> None:
    # The first 12 requests fail (3 tries per call, 4 examples at once): the first seed comes out incomplete, the
    # next ones complete; the incomplete one is evaluated again after the next complete one and gets a score.
    with StubServer(responder=fake_over_http, fail_first_n=12, fail_status=503, retry_after=0) as stub:
        result = _search(tmp_path, stub_lm(stub, num_retries=2), budget={"max_candidates": 5})
    assert result.stats["incomplete_seen"] >= 1 and result.stats["incomplete"] == 0
    assert result.outage is not None and result.outage["unscored_examples"] >= 1
    assert len(result.candidates) == 5 and result.stop_reason == "max_candidates"
    assert {"chain-of-thought", "io", "self-refine"} <= {c.genome.name for c in result.candidates}


# --------------------------------------------------------------------------------------------------
# A provider that refuses the run: a rejected key, an unknown model, a server that is down
# --------------------------------------------------------------------------------------------------


def test_a_rejected_key_stops_a_search_at_once_and_stores_no_score(tmp_path: Path) -> None:
    archive = str(tmp_path / "shared-archive")
    with StubServer(responder=fake_over_http, fail_first_n=10**9, fail_status=401) as refusing:
        result = _search(tmp_path, stub_lm(refusing, num_retries=3), archive=archive, name="refused")
        assert refusing.requests <= 4  # the first refusal ends the run: no retry; at most the examples in flight
    assert result.stop_reason == "provider" and result.candidates == [] and result.test_scores == []
    assert "HTTP 401" in result.outage["message"] and "API key" in result.outage["message"]
    assert all(not rec.results for rec in Archive.open(archive).list(include_pruned=True))
    with StubServer(responder=fake_over_http) as healthy:  # the fixed key: everything is evaluated, nothing reused
        again = _search(tmp_path, stub_lm(healthy), archive=archive, name="fixed")
    assert again.stats["reused"] == 0 and again.stop_reason == "max_candidates"
    assert max(c.score for c in again.candidates) > 0


def test_a_stored_score_of_a_refusing_provider_is_never_reused(tmp_path: Path) -> None:
    from masforge.archive.records import ResultRecord
    from masforge.evaluators.runner import results_key
    from masforge.lm.client import parse_lm
    from masforge.seeds import load_seed

    # What earlier versions stored when every request got HTTP 401: the seeds at 0.000, as wrong answers.
    archive_path = tmp_path / "old-archive"
    old = Archive.open(archive_path, create=True)
    refused = "LMError: LM 'fake' failed: EndpointError: HTTP 401: Incorrect API key provided: [REDACTED]"
    for name in ("cot", "io", "self_refine"):
        genome = load_seed(name)
        old.add(genome)
        old.add_result(genome.id, ResultRecord(task=TASK, split="validation", lm_key=results_key(parse_lm("fake")),
                                               score=0.0, n=4, failures={"lm": 4},
                                               extra={"failure_notes": [{"error": refused}] * 4}))
    old.close()
    result = _search(tmp_path, "fake", archive=str(archive_path), budget={"max_candidates": 3})
    assert result.stats["reused"] == 0 and result.spend["llm_calls"] > 0
    assert max(c.score for c in result.candidates) > 0


def _evaluate(*args: str, env: dict[str, str] | None = None) -> Any:
    return CliRunner().invoke(app, ["evaluate", *args], env=env)


def test_evaluate_and_compare_exit_non_zero_on_a_refused_key(tmp_path: Path) -> None:
    with StubServer(responder=fake_over_http, fail_first_n=10**9, fail_status=401) as refusing:
        base = ["--task", TASK, "--lm", "openai/stub", "--api-base", refusing.api_base, "--limit", "3", "--no-cache"]
        res = _evaluate("cot", *base)
        assert res.exit_code == 1 and "HTTP 401" in res.output and "API key" in res.output, res.output
        assert "Traceback" not in res.output and refusing.requests <= 3
        res = CliRunner().invoke(app, ["compare", "io", "cot", *base])
        assert res.exit_code == 1 and "HTTP 401" in res.output, res.output


def test_evaluate_on_a_local_server_that_is_down_exits_non_zero(tmp_path: Path) -> None:
    from masforge import local_model
    from masforge.ports import free_port

    env = {local_model.EXTERNAL_API_BASE_ENV: f"http://127.0.0.1:{free_port()}/v1"}
    res = _evaluate("cot", "--task", "humaneval", "--lm", "local", "--limit", "2", "--no-cache", env=env)
    assert res.exit_code == 1, res.output
    assert "does not answer GET /models" in res.output and "Traceback" not in res.output
    assert "0.000" not in res.output  # no table of zeros: nothing was scored


def test_an_unreachable_server_stops_a_search_at_once(tmp_path: Path) -> None:
    with StubServer() as gone:
        lm = stub_lm(gone, num_retries=3)
    result = _search(tmp_path, lm)
    assert result.stop_reason == "provider" and result.candidates == []
    assert "cannot reach" in result.outage["message"] and "start that server" in result.outage["message"]


def test_dollar_budget_holds_for_a_code_genome_sending_a_huge_prompt() -> None:
    from masforge.execution.code import CodeSystem
    from masforge.genome.schema import Genome
    from masforge.sandbox.runner import SandboxLimits

    seen: list[int] = []

    def responder(messages: list[dict[str, Any]], info: dict[str, Any]) -> str:
        seen.append(len(str(messages[-1]["content"])))
        return "fine"

    priced = LMConfig(model="fake", price_in_per_m=10.0, price_out_per_m=10.0)  # $10 per million tokens
    client = LMClient({"worker": priced}, cache=False, ledger=Ledger(Budget(max_dollars=0.05)), responder=responder)
    code = ("def forward(inputs):\n    small = llm('hello')\n    big = llm('x' * (3 * 1024 * 1024))\n"
            "    return {'answer': small + big}\n")
    system = CodeSystem(Genome(kind="code", name="spender", code=code), client, limits=SandboxLimits(timeout_s=60))
    with pytest.raises(BudgetExceeded, match=r"--budget-usd 0.05: the next request could cost up to \$31\."):
        system(question="q")
    # the small request went out; the 3 MB one (up to $31 at this price, was: sent, $25 for 10 MB) never did
    assert seen == [5] and client.ledger.calls == 1 and client.ledger.dollars <= 0.05


# --------------------------------------------------------------------------------------------------
# A provider that bills past what was reserved
# --------------------------------------------------------------------------------------------------


def test_a_provider_that_over_bills_cannot_spend_past_the_budget_and_is_named(tmp_path: Path) -> None:
    # Issue 37: a server reporting 10M completion tokens per answer spent $8.00 of a $0.01 budget in 4 requests.
    with StubServer(0.02, fake_over_http, billed_completion_tokens=10_000_000) as over:
        lm = stub_lm(over, price_in_per_m=0.2, price_out_per_m=0.2, max_tokens=256)
        result = _search(tmp_path, lm, concurrency=4, budget={"max_candidates": 6, "max_dollars": 0.01})
        requests = over.requests
    assert result.stop_reason == "provider" and result.candidates == []
    message = result.outage["message"]
    assert "overran its bill: $2.0000" in message and "10,000,000 completion tokens for max_tokens 256" in message
    assert "in flight" not in message
    spend = result.spend
    # Only the reservation of each over-billed answer counts: within the budget, not $2 an answer.
    reserved_each = spend["dollars"] / spend["overruns"]
    assert spend["dollars"] <= 0.01 and reserved_each < 0.001
    assert 1 <= spend["overruns"] <= requests <= 4  # the first overrun stopped the run: only those in flight ended
    assert spend["uncounted_dollars"] >= 2.0 * spend["overruns"] - 0.01
    assert spend["completion_tokens"] <= 256 * requests


def test_a_reply_longer_than_max_tokens_stops_the_run_and_counts_only_its_reservation() -> None:
    # Issue 37: $0.0138 on a $0.01 budget with one request, blamed on "requests already in flight".
    with StubServer(responder=lambda messages, body: "word " * 20_000) as long:
        cfg = LMConfig(model="openai/stub", api_base=long.api_base, price_in_per_m=0.5, price_out_per_m=0.5,
                       max_tokens=100, num_retries=0)
        client = LMClient({"worker": cfg}, cache=False, ledger=Ledger(Budget(max_dollars=0.01)))
        with pytest.raises(ProviderError, match=r"25,000 completion tokens for max_tokens 100; counted: the "
                                                 r"\$0\.0001 reserved"):
            client.complete([{"role": "user", "content": "say hi"}])
        with pytest.raises(ProviderError, match="overran its bill"):  # nothing more is sent
            client.complete([{"role": "user", "content": "again"}])
        assert long.requests == 1
    assert client.ledger.dollars <= 0.0001 and client.ledger.overruns == 1
    assert client.ledger.halted is not None and client.ledger.halted[0] == "provider"


def test_a_bill_above_the_reservation_within_the_limits_is_counted_as_billed() -> None:
    # Another price than the reserved one (the request's tokens within its limits): counted in full, run stopped.
    client = LMClient({"worker": LMConfig(model="fake", price_in_per_m=1.0, price_out_per_m=1.0)}, cache=False)
    reserved = Reservation(0.001, "a prompt of at most 100 tokens and 50 completion tokens", 100, 50)
    answer = Completion("hi", 90, 40, 0.004, 0.1, False, "fake")
    halt = client._overrun(client.config("worker"), answer, reserved)
    assert halt is not None and "higher price than a prompt of at most 100 tokens" in str(halt)
    assert answer.cost == 0.004 and (answer.prompt_tokens, answer.completion_tokens) == (90, 40)
    assert client._overrun(client.config("worker"), Completion("hi", 90, 40, 0.001, 0.1, False, "fake"),
                           reserved) is None


def test_an_overrun_survives_in_the_journal(tmp_path: Path) -> None:
    journal = tmp_path / "ledger.jsonl"
    first = Ledger(Budget(max_dollars=1), journal=journal)
    first.reserve(1, 0.01)
    first.settle(Completion("x", 10, 50, 0.01, 0.0, False, "m"), None, 0.01, uncounted=1.99)
    again = Ledger(Budget(max_dollars=1), journal=journal)
    again.resume()
    assert (again.dollars, again.overruns, again.uncounted_dollars) == (0.01, 1, 1.99)
    assert again.snapshot()["uncounted_dollars"] == 1.99 and "overruns" not in Ledger().snapshot()


def test_the_search_command_names_an_overrun_and_exits_1(tmp_path: Path) -> None:
    with StubServer(0.02, fake_over_http, billed_completion_tokens=10_000_000) as over:
        config = tmp_path / "run.yaml"
        config.write_text(json.dumps({"task": TASK, "strategy": "random", "seeds": ["cot", "io"], "limit": 3,
                                      "lm": stub_lm(over, price_in_per_m=0.2, price_out_per_m=0.2),
                                      "output": str(tmp_path / "r"), "budget": {"max_dollars": 0.01}}))
        res = CliRunner().invoke(app, ["search", "--config", str(config), "-q"])
    assert res.exit_code == 1, res.output
    assert "overran its bill" in res.output and "the provider overran its bill on" in res.output
    assert "requests already in flight" not in res.output and "Traceback" not in res.output


def test_evaluate_and_compare_exit_non_zero_whenever_they_print_an_error(tmp_path: Path) -> None:
    # Issue 37: "error: 2 of 2 examples unscored ...: not a score", then exit code 0.
    with StubServer(responder=fake_over_http, fail_first_n=10**9, fail_status=500, retry_after=0) as failing:
        base = ["--task", TASK, "--lm", "openai/stub", "--api-base", failing.api_base, "--limit", "2", "--no-cache"]
        res = _evaluate("cot", *base)
        assert "error: 2 of 2 examples unscored" in res.output, res.output
        assert res.exit_code == 1, res.output
        res = CliRunner().invoke(app, ["compare", "io", "cot", *base])
        assert "error:" in res.output and res.exit_code == 1, res.output
    # A limit the user set is said, not an error: the command succeeds with the examples it finished.
    res = _evaluate("cot", "--task", TASK, "--lm", "fake", "--limit", "4", "--max-calls", "2", "--concurrency", "1",
                    "--no-cache")
    assert res.exit_code == 0 and "stopped early" in res.output and "error:" not in res.output, res.output
