"""Ctrl-C, as a user presses it: the command ends within seconds, prints what it finished (an evaluation's partial
table, a comparison over the examples both systems finished, a search's resume command), books the requests it
cut as abandoned rather than failed, and does not call the user's own stop an error."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from masforge.lm.client import LMClient, LMConfig, RequestAbandoned
from masforge.testing.stub_server import StubServer

EXIT_WITHIN_S = 10.0


class _Gate:
    """A stub responder that answers the first ``fast`` requests at once and holds every later one until the
    test ends: the requests a Ctrl-C finds in flight."""

    def __init__(self, fast: int) -> None:
        self.fast = fast
        self.seen = 0
        self.held = 0
        self._lock = threading.Lock()
        self.release = threading.Event()

    def __call__(self, messages: list[dict[str, Any]], body: dict[str, Any]) -> str | None:
        with self._lock:
            self.seen += 1
            held = self.seen > self.fast
            self.held += held
        if held:
            self.release.wait(300)
        return None  # the stub's own dspy-aware answer


@pytest.fixture
def gated() -> Iterator[Callable[[int], tuple[StubServer, _Gate]]]:
    made: list[tuple[StubServer, _Gate]] = []

    def make(fast: int) -> tuple[StubServer, _Gate]:
        gate = _Gate(fast)
        stub = StubServer(responder=gate).__enter__()
        made.append((stub, gate))
        return stub, gate

    yield make
    for stub, gate in made:
        gate.release.set()
        stub.__exit__(None, None, None)


def _start(args: list[str], stub: StubServer, tmp_path: Path) -> subprocess.Popen[str]:
    env = {**os.environ, "MASFORGE_CACHE": str(tmp_path / "cache"), "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    # a child of a background job would inherit an ignored SIGINT: a user's terminal delivers it
    return subprocess.Popen([sys.executable, "-m", "masforge", *args, "--lm", "openai/stub", "--api-base",
                             stub.api_base], cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))


def _ctrl_c_when(proc: subprocess.Popen[str], ready: Callable[[], bool]) -> tuple[float, str, str]:
    deadline = time.monotonic() + 300  # start-up (imports) on a loaded machine
    while not ready():
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "the command never reached the point to stop it at"
        time.sleep(0.05)
    time.sleep(0.3)  # the held requests are in flight
    start = time.monotonic()
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=120)
    return time.monotonic() - start, out, err


def test_ctrl_c_ends_an_evaluation_in_seconds_with_the_finished_examples(tmp_path: Path, gated: Any) -> None:
    stub, gate = gated(3)
    proc = _start(["evaluate", "io", "--task", "rg:basic_arithmetic", "--limit", "8", "--concurrency", "2"],
                  stub, tmp_path)
    took, out, err = _ctrl_c_when(proc, lambda: gate.held >= 2)
    assert took < EXIT_WITHIN_S, (took, out, err)
    assert proc.returncode == 130
    flat = " ".join(out.split())
    assert "stopped (Ctrl-C) after 3 of 8 examples" in flat and "3/8" in flat  # the partial table
    assert "error" not in err.lower() and "Traceback" not in err + out


def test_ctrl_c_during_b_compares_the_examples_both_finished(tmp_path: Path, gated: Any) -> None:
    stub, gate = gated(6)  # A (io) answers its 4 examples, B its first 2
    proc = _start(["compare", "io", "take_a_deep_breath", "--task", "rg:basic_arithmetic", "--limit", "4",
                   "--concurrency", "2"], stub, tmp_path)
    took, out, err = _ctrl_c_when(proc, lambda: gate.held >= 2)
    assert took < EXIT_WITHIN_S and proc.returncode == 130, (took, out, err)
    flat = " ".join(out.split())
    assert "2 paired examples" in flat and "too few examples to tell (2;" in flat
    assert "the comparison covers the 2 examples both finished" in flat
    assert "error" not in err.lower()


def test_ctrl_c_ends_a_search_in_seconds_and_books_no_failure(tmp_path: Path, gated: Any) -> None:
    stub, gate = gated(6)
    proc = _start(["search", "--task", "rg:basic_arithmetic", "--seeds", "io,take_a_deep_breath", "-n", "4",
                   "--limit", "4", "--concurrency", "2", "-o", "runs"], stub, tmp_path)
    took, out, err = _ctrl_c_when(proc, lambda: gate.held >= 2)
    assert took < EXIT_WITHIN_S and proc.returncode == 130, (took, out, err)
    flat = " ".join(out.split())
    assert "stopped (Ctrl-C): nothing finished is lost; continue with" in flat and "--resume" in flat
    assert "2 abandoned in flight at a stop (not failures)" in flat and "failed" not in flat
    assert "error" not in err.lower()
    rows = [json.loads(line) for line in (tmp_path / "runs" / "latest" / "ledger.jsonl").read_text().splitlines()]
    assert sum(1 for r in rows if r.get("a")) == 2 and not any("f" in r for r in rows)


def test_an_abandoned_client_cuts_its_requests_and_sends_no_more() -> None:
    release = threading.Event()
    with StubServer(responder=lambda m, b: None if release.wait(60) else None) as stub:
        client = LMClient({"worker": LMConfig(model="openai/stub", api_base=stub.api_base, timeout_s=60)},
                          cache=False)
        errors: list[BaseException] = []

        def ask() -> None:
            try:
                client.complete([{"role": "user", "content": "hi"}])
            except BaseException as exc:
                errors.append(exc)

        thread = threading.Thread(target=ask)
        thread.start()
        while stub.in_flight < 1:
            time.sleep(0.01)
        start = time.monotonic()
        client.abandon()
        thread.join(10)
        assert not thread.is_alive() and time.monotonic() - start < 2
        assert isinstance(errors[0], RequestAbandoned)
        with pytest.raises(RequestAbandoned, match="not sent"):
            client.complete([{"role": "user", "content": "again"}])
        snap = client.ledger.snapshot()
        assert (snap["llm_calls"], snap["abandoned"], snap["errors"]) == (1, 1, 0)
        fresh = LMClient({"worker": LMConfig(model="openai/stub", api_base=stub.api_base)}, cache=False)
        release.set()
        assert fresh.complete([{"role": "user", "content": "hi"}]).text  # another client is not stopped


def test_a_search_leaves_no_request_of_a_timed_out_example_in_flight(tmp_path: Path, monkeypatch: Any,
                                                                     gated: Any) -> None:
    from functools import partial

    from masforge.evaluators.runner import Evaluator
    from masforge.search import engine
    from masforge.search.config import RunConfig

    monkeypatch.setenv("MASFORGE_CACHE", str(tmp_path / "cache"))
    # example timeouts of a fraction of a second (a search's own are minutes long)
    monkeypatch.setattr(engine, "Evaluator", partial(Evaluator, example_timeout_s=0.2, provider_wait_s=0.3))
    stub, gate = gated(1)  # the first example is answered; the second one's request never is
    result = engine.run_search(RunConfig.from_data({
        "task": "rg:basic_arithmetic", "strategy": ["random"], "seeds": ["io"], "limit": 2, "concurrency": 1,
        "test_top_k": 0, "output": str(tmp_path / "runs"), "budget": {"max_candidates": 1},
        "lm": {"model": "openai/stub", "api_base": stub.api_base, "timeout_s": 120}}), progress=False)
    assert gate.held >= 1
    ledger = result.run_dir / "ledger.jsonl"

    def booked(kind: str) -> int:
        return sum(1 for line in ledger.read_text().splitlines() if kind in json.loads(line))

    deadline = time.monotonic() + EXIT_WITHIN_S
    while booked("a") < gate.held and time.monotonic() < deadline:
        time.sleep(0.05)
    # cut when the run ended (exiting does not wait up to the LM's own timeout), abandoned, not failed
    assert booked("a") == gate.held and booked("f") == 0
