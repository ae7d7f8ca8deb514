"""The OpenAI-compatible stub server: endpoints, dspy-format replies, concurrency, error injection."""

from __future__ import annotations

import asyncio
import http.client
import json
import os
import subprocess
import sys
import threading
import time
from typing import Any, Literal

import pytest
from pydantic import BaseModel

from masforge.testing.stub_server import StubServer, default_responder, example_from_schema

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
litellm = pytest.importorskip("litellm")  # imported after the env var is set
dspy = pytest.importorskip("dspy")


def _post(stub: StubServer, body: dict[str, Any], path: str = "/v1/chat/completions") -> tuple[int, Any]:
    conn = http.client.HTTPConnection("127.0.0.1", stub.port, timeout=30)
    try:
        conn.request("POST", path, json.dumps(body), {"Content-Type": "application/json"})
        resp = conn.getresponse()
        return resp.status, json.loads(resp.read())
    finally:
        conn.close()


def _get(stub: StubServer, path: str) -> tuple[int, Any]:
    conn = http.client.HTTPConnection("127.0.0.1", stub.port, timeout=30)
    try:
        conn.request("GET", path)
        resp = conn.getresponse()
        return resp.status, json.loads(resp.read())
    finally:
        conn.close()


def _kw(stub: StubServer) -> dict[str, str]:
    return {"model": "openai/stub", "api_base": stub.api_base, "api_key": "x"}


HI = [{"role": "user", "content": "hi"}]


# --------------------------------------------------------------------------------------------------
# Endpoints and response shape
# --------------------------------------------------------------------------------------------------


def test_litellm_completion_against_stub():
    with StubServer() as stub:
        assert stub.api_base == f"http://127.0.0.1:{stub.port}/v1"
        resp = litellm.completion(messages=[{"role": "user", "content": "x" * 40}], **_kw(stub))
        assert resp.choices[0].message.content == "stub answer"
        assert resp.choices[0].finish_reason == "stop"
        assert resp.model.endswith("stub")
        assert resp.usage.prompt_tokens == 10  # 40 chars // 4
        assert resp.usage.completion_tokens == len("stub answer") // 4
        assert resp.usage.total_tokens == resp.usage.prompt_tokens + resp.usage.completion_tokens
        assert stub.requests == 1 and stub.max_in_flight == 1 and stub.in_flight == 0
        assert stub.last_body is not None and stub.last_body["messages"][0]["content"] == "x" * 40
    assert not stub.running


def test_raw_response_shape_and_models_endpoint():
    with StubServer(model="my-model") as stub:
        status, data = _get(stub, "/v1/models")
        assert status == 200 and data["object"] == "list" and data["data"][0]["id"] == "my-model"
        status, data = _post(stub, {"model": "echo-me", "messages": HI, "n": 2})
        assert status == 200
        assert data["object"] == "chat.completion" and data["model"] == "echo-me"
        assert data["id"].startswith("chatcmpl-") and isinstance(data["created"], int)
        assert [c["index"] for c in data["choices"]] == [0, 1]
        assert data["choices"][0]["message"] == {"role": "assistant", "content": "stub answer"}
        assert set(data["usage"]) == {"prompt_tokens", "completion_tokens", "total_tokens"}
        second = _post(stub, {"model": "m", "messages": HI})[1]
        assert second["id"] != data["id"]


def test_bad_requests():
    with StubServer() as stub:
        assert _post(stub, {"messages": HI}, "/v1/nope")[0] == 404
        assert _get(stub, "/v1/nope")[0] == 404
        status, data = _post(stub, {"model": "m"})
        assert status == 400 and "messages" in data["error"]["message"]
        conn = http.client.HTTPConnection("127.0.0.1", stub.port, timeout=10)
        conn.request("POST", "/v1/chat/completions", b"{not json", {"Content-Type": "application/json"})
        resp = conn.getresponse()
        assert resp.status == 400 and "not JSON" in json.loads(resp.read())["error"]["message"]
        conn.close()
        assert stub.requests == 0  # malformed requests are not counted


def test_custom_responder_and_none_fallback():
    seen: list[tuple[list[dict[str, Any]], dict[str, Any]]] = []

    def responder(messages, body):
        seen.append((messages, body))
        return None if messages[-1]["content"] == "default please" else f"echo: {messages[-1]['content']}"

    with StubServer(responder=responder) as stub:
        resp = litellm.completion(messages=[{"role": "user", "content": "ping"}], temperature=0.5, **_kw(stub))
        assert resp.choices[0].message.content == "echo: ping"
        assert seen[0][1]["temperature"] == 0.5
        resp = litellm.completion(messages=[{"role": "user", "content": "default please"}], **_kw(stub))
        assert resp.choices[0].message.content == "stub answer"


def test_broken_responder_is_a_visible_500():
    def responder(messages, body):
        raise RuntimeError("boom")

    with StubServer(responder=responder) as stub:
        status, data = _post(stub, {"model": "m", "messages": HI})
        assert status == 500 and "RuntimeError: boom" in data["error"]["message"]


def test_streaming():
    with StubServer() as stub:
        chunks = litellm.completion(messages=HI, stream=True, **_kw(stub))
        assert "".join(c.choices[0].delta.content or "" for c in chunks) == "stub answer"


def test_stop_closes_idle_keepalive_connections():
    stub = StubServer().start()
    conn = http.client.HTTPConnection("127.0.0.1", stub.port, timeout=10)
    conn.request("GET", "/v1/models")
    conn.getresponse().read()  # the connection stays open (HTTP/1.1 keep-alive)
    stub.stop()
    assert not stub.running
    with pytest.raises((OSError, http.client.HTTPException)):
        conn.request("GET", "/v1/models")
        conn.getresponse().read()
    conn.close()
    stub.stop()  # twice is fine


def test_validation():
    with pytest.raises(ValueError):
        StubServer(latency_s=-1)
    with pytest.raises(ValueError):
        StubServer(fail_status=200)
    with pytest.raises(RuntimeError):
        _ = StubServer().api_base


# --------------------------------------------------------------------------------------------------
# Concurrency
# --------------------------------------------------------------------------------------------------


def test_64_concurrent_requests_with_200ms_latency_threads():
    with StubServer(latency_s=0.2) as stub:
        results: list[str] = []
        errors: list[BaseException] = []
        lock = threading.Lock()

        def call() -> None:
            try:
                text = litellm.completion(messages=HI, **_kw(stub)).choices[0].message.content
                with lock:
                    results.append(text)
            except BaseException as exc:  # reported below
                with lock:
                    errors.append(exc)

        threads = [threading.Thread(target=call) for _ in range(64)]
        t0 = time.monotonic()
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        elapsed = time.monotonic() - t0
        assert not errors, errors[:3]
        assert results == ["stub answer"] * 64
        assert stub.requests == 64
        assert elapsed < 64 * 0.2 / 3, f"64 x 200 ms took {elapsed:.1f} s: requests are serialised"
        assert stub.max_in_flight >= 16  # most requests overlapped
        assert stub.in_flight == 0


def test_64_concurrent_requests_with_200ms_latency_async():
    async def run(stub: StubServer) -> list[Any]:
        return await asyncio.gather(*(litellm.acompletion(messages=HI, **_kw(stub)) for _ in range(64)))

    with StubServer(latency_s=0.2) as stub:
        t0 = time.monotonic()
        responses = asyncio.run(run(stub))
        elapsed = time.monotonic() - t0
        assert len(responses) == 64 and stub.requests == 64
        assert elapsed < 64 * 0.2 / 3, f"64 x 200 ms took {elapsed:.1f} s"
        assert stub.max_in_flight >= 32


def test_raw_http_64_concurrent():
    """The server itself (no litellm overhead): 64 x 200 ms all in flight at once."""
    with StubServer(latency_s=0.2) as stub:
        statuses: list[int] = []
        threads = [
            threading.Thread(target=lambda: statuses.append(_post(stub, {"model": "m", "messages": HI})[0]))
            for _ in range(64)
        ]
        t0 = time.monotonic()
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
        elapsed = time.monotonic() - t0
        assert statuses == [200] * 64
        assert elapsed < 2.0, f"{elapsed:.2f} s"
        assert stub.max_in_flight >= 32  # (all 64 overlap on an idle machine)


def test_latency_is_counted_from_arrival_and_includes_building_the_reply():
    # A responder that needs 0.3 s inside a 0.3 s latency: the request takes the latency, not both added up
    # (built after the wait, 64 replies arriving together queued their building behind one GIL).
    def slow(messages: list[dict[str, Any]], body: dict[str, Any]) -> str:
        time.sleep(0.3)
        return "slow answer"

    with StubServer(latency_s=0.3, responder=slow) as stub:
        t0 = time.monotonic()
        status, data = _post(stub, {"model": "stub", "messages": HI})
        elapsed = time.monotonic() - t0
    assert status == 200 and data["choices"][0]["message"]["content"] == "slow answer"
    assert 0.3 <= elapsed < 0.55, f"took {elapsed:.2f} s: latency and reply building were added up"
    assert stub.delivered == 1


def test_reset_counters():
    with StubServer() as stub:
        _post(stub, {"model": "m", "messages": HI})
        stub.reset_counters()
        assert stub.requests == 0 and stub.max_in_flight == 0 and stub.failures == 0


# --------------------------------------------------------------------------------------------------
# Error injection
# --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("status", "error_cls"),
    [(500, "InternalServerError"), (429, "RateLimitError"), (503, "ServiceUnavailableError")],
)
def test_error_injection_without_retries(status, error_cls):
    with StubServer(fail_first_n=1, fail_status=status) as stub:
        with pytest.raises(getattr(litellm, error_cls)) as info:
            litellm.completion(messages=HI, max_retries=0, num_retries=0, **_kw(stub))
        assert info.value.status_code == status
        assert "injected failure" in str(info.value)
        assert stub.requests == 1 and stub.failures == 1
        # The next request succeeds.
        assert litellm.completion(messages=HI, **_kw(stub)).choices[0].message.content == "stub answer"
        assert stub.requests == 2 and stub.failures == 1


@pytest.mark.parametrize("status", [500, 429])
def test_error_injection_with_retries(status):
    with StubServer(fail_first_n=2, fail_status=status, retry_after=0) as stub:
        resp = litellm.completion(messages=HI, num_retries=3, **_kw(stub))
        assert resp.choices[0].message.content == "stub answer"
        assert stub.requests == 3 and stub.failures == 2


def test_error_injection_raw_and_retry_after():
    with StubServer(fail_first_n=2, fail_status=429, retry_after=1.5) as stub:
        conn = http.client.HTTPConnection("127.0.0.1", stub.port, timeout=10)
        conn.request("POST", "/v1/chat/completions", json.dumps({"model": "m", "messages": HI}))
        resp = conn.getresponse()
        body = json.loads(resp.read())
        assert resp.status == 429
        assert resp.getheader("Retry-After") == "1.5" and resp.getheader("retry-after-ms") == "1500"
        assert body["error"]["type"] == "rate_limit_error" and body["error"]["code"] == 429
        conn.close()
        assert _post(stub, {"model": "m", "messages": HI})[0] == 429
        assert _post(stub, {"model": "m", "messages": HI})[0] == 200


# --------------------------------------------------------------------------------------------------
# Default responder: dspy ChatAdapter / JSONAdapter
# --------------------------------------------------------------------------------------------------


def test_default_responder_chat_adapter_format():
    system = (
        "Your input fields are:\n1. `question` (str):\nYour output fields are:\n1. `reasoning` (str): \n"
        "2. `answer` (str): the answer\nAll interactions will be structured in the following way, with the "
        "appropriate values filled in.\n\n[[ ## question ## ]]\n{question}\n\n[[ ## reasoning ## ]]\n{reasoning}"
        "\n\n[[ ## answer ## ]]\n{answer}\n\n[[ ## completed ## ]]\nIn adhering to this structure, ..."
    )
    user = (
        "[[ ## question ## ]]\nWhat is 2+2?\n\nRespond with the corresponding output fields, starting with the field "
        "`[[ ## reasoning ## ]]`, then `[[ ## answer ## ]]`, and then ending with the marker for "
        "`[[ ## completed ## ]]`."
    )
    messages = [{"role": "system", "content": system}, {"role": "user", "content": user}]
    expected = "[[ ## reasoning ## ]]\nstub reasoning\n\n[[ ## answer ## ]]\nstub answer\n\n[[ ## completed ## ]]"
    assert default_responder(messages, {}) == expected
    # Without a system message, the reminder in the user message is enough.
    assert default_responder(messages[1:], {}) == expected
    # Not a dspy prompt at all.
    assert default_responder([{"role": "user", "content": "hello"}], {}) == "stub answer"


def test_default_responder_json_formats():
    schema = {
        "type": "object",
        "properties": {"name": {"type": "string"}, "age": {"type": "integer"}, "tags": {"type": "array"}},
        "required": ["name", "age"],
    }
    for fmt in (
        {"type": "json_object", "schema": schema},
        {"type": "json_schema", "json_schema": {"name": "p", "schema": schema, "strict": True}},
    ):
        assert json.loads(default_responder(HI, {"response_format": fmt})) == {"name": "stub", "age": 0, "tags": []}
    assert json.loads(default_responder(HI, {"response_format": {"type": "json_object"}})) == {"answer": "stub answer"}


def test_example_from_schema():
    schema = {
        "$defs": {
            "Color": {"enum": ["red", "green"]},
            "Inner": {"type": "object", "properties": {"x": {"type": "number"}}},
        },
        "type": "object",
        "properties": {
            "color": {"$ref": "#/$defs/Color"},
            "inner": {"$ref": "#/$defs/Inner"},
            "maybe": {"anyOf": [{"type": "null"}, {"type": "integer", "minimum": 3}]},
            "flag": {"type": "boolean"},
            "items": {"type": "array", "items": {"type": "string"}, "minItems": 2},
            "const": {"const": 7},
        },
    }
    assert example_from_schema(schema) == {
        "color": "red",
        "inner": {"x": 0.0},
        "maybe": 3,
        "flag": True,
        "items": ["stub", "stub"],
        "const": 7,
    }


class Person(BaseModel):
    name: str
    age: int


class QA(dspy.Signature):
    """Answer the question."""

    question: str = dspy.InputField()
    answer: str = dspy.OutputField()
    score: int = dspy.OutputField()
    confident: bool = dspy.OutputField()
    ratio: float = dspy.OutputField()
    tags: list[str] = dspy.OutputField()
    kind: Literal["fact", "opinion"] = dspy.OutputField()
    person: Person = dspy.OutputField()


def test_dspy_programs_parse_stub_replies():
    with StubServer() as stub:
        lm = dspy.LM("openai/stub", api_base=stub.api_base, api_key="x", cache=False)
        with dspy.context(lm=lm):
            pred = dspy.ChainOfThought(QA)(question="q?")
        assert pred.reasoning == "stub reasoning" and pred.answer == "stub answer"
        assert (pred.score, pred.confident, pred.ratio, pred.tags, pred.kind) == (0, True, 0.0, [], "fact")
        assert pred.person == Person(name="stub", age=0)
        with dspy.context(lm=lm, adapter=dspy.JSONAdapter()):
            pred = dspy.Predict(QA)(question="q?")
        assert pred.answer == "stub answer" and pred.person == Person(name="stub", age=0)
        assert stub.requests == 2  # no adapter fallback or retry was needed


# --------------------------------------------------------------------------------------------------
# Command line
# --------------------------------------------------------------------------------------------------


def test_module_runs_in_foreground_and_stops_on_sigterm():
    proc = subprocess.Popen(
        [sys.executable, "-m", "masforge.testing.stub_server", "--port", "0", "--model", "cli-model"],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        line = proc.stdout.readline() if proc.stdout else ""
        assert "listening on http://127.0.0.1:" in line
        api_base = line.split("listening on ", 1)[1].split()[0]
        resp = litellm.completion(model="openai/cli-model", api_base=api_base, api_key="x", messages=HI)
        assert resp.choices[0].message.content == "stub answer"
        proc.terminate()
        assert proc.wait(10) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        if proc.stdout:
            proc.stdout.close()
