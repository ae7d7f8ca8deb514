"""What masforge does per LM call, made cheaper for 64 calls in flight (issue 27, bench/concurrency.py) without
changing what it does: the same prompts, the same trace records, the same redaction."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

import dspy
import pytest

from masforge.lm.adapters import make_adapter
from masforge.lm.trace import AgentCall, LMCall, Trace


@pytest.mark.parametrize(("name", "base"), [("chat", dspy.ChatAdapter), ("json", dspy.JSONAdapter)])
def test_the_system_message_is_built_once_per_signature_and_unchanged(name: str, base: type,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    sig = dspy.ChainOfThought(dspy.Signature("question -> answer", "Solve it.")).predict.signature
    inputs = {"question": "What is 2 + 2?"}
    expected = base().format(sig, [], inputs)
    built: list[Any] = []
    original = base.format_system_message

    def counted(self: Any, signature: Any) -> str:
        built.append(signature)
        return original(self, signature)

    monkeypatch.setattr(base, "format_system_message", counted)
    adapter = make_adapter(name)
    assert isinstance(adapter, base)
    first = adapter.format(sig, [], inputs)
    again = make_adapter(name).format(sig, [], {"question": "And 3 + 3?"})
    assert first == expected  # the same request as dspy's own adapter makes
    assert again[0] == first[0] and again[1]["content"] != first[1]["content"]
    assert len(built) <= 1  # built once for this signature (or before this test, by another)
    other = dspy.Signature("question -> answer", "Something else.")
    assert make_adapter(name).format(other, [], inputs)[0]["content"] != first[0]["content"]


def test_the_trace_record_is_what_asdict_gave() -> None:
    call = AgentCall("solver", "chain_of_thought", 1, 2, {"question": "q"}, {"answer": [1, 2], "reasoning": "r"},
                     [LMCall("worker", "m", 10, 20, 0.5, 0.25, True, None), LMCall("meta", "n", error="x")], 1.5)
    trace = Trace([call])
    expected = {**asdict(call), "tokens": call.tokens, "cost": call.cost}
    got = trace.to_dict()[0]
    assert got == expected and list(got) == list(expected)
    got["outputs"]["answer"] = "changed"  # a copy: the call itself is untouched
    assert call.outputs["answer"] == [1, 2]


def test_no_dspy_history_is_kept_for_masforge_runs() -> None:
    """masforge traces every call itself; dspy's history would build a timestamped record of each request and
    answer on every LM call (time per call, and memory over a search)."""
    from masforge.execution.compile import compile_genome
    from masforge.lm.client import LMClient
    from masforge.seeds import load_seed

    system = compile_genome(load_seed("cot"), LMClient({"worker": "fake"}, cache=False))
    result = system(question="What is 2 + 2?")
    assert result.trace.lm_calls == 1
    assert system._lms["worker"].history == []  # type: ignore[attr-defined]


def test_an_lm_call_without_history_reads_the_same_outputs_as_dspys_own_path() -> None:
    """With dspy's history off (masforge's compiled systems), MasforgeLM skips dspy's general call path; the outputs
    and the usage dspy tracks are what that path gives, and with history on the call takes it."""
    from masforge.lm import dspy_lm
    from masforge.lm.client import LMClient

    messages = [{"role": "user", "content": "What is 2 + 2?"}]
    lm = dspy_lm.MasforgeLM(LMClient({"worker": "fake"}, cache=False))
    taken: list[str] = []
    dspy_path = dspy_lm._DSPY_CALL

    def spy(self: Any, *args: Any, **kwargs: Any) -> Any:
        taken.append("dspy")
        return dspy_path(self, *args, **kwargs)

    original, dspy_lm._DSPY_CALL = dspy_lm._DSPY_CALL, spy
    try:
        with dspy.context(disable_history=True), dspy.track_usage() as fast_usage:
            fast = lm(messages=messages, temperature=0.0)
        assert taken == []
        with dspy.context(disable_history=True), dspy.track_usage() as own_usage:
            own = dspy_path(lm, None, messages=messages, temperature=0.0)
        with dspy.context(disable_history=False):
            kept = lm(messages=messages, temperature=0.0)
        assert taken == ["dspy"] and lm.history  # history on: dspy's path, which records it
    finally:
        dspy_lm._DSPY_CALL = original
    assert fast == own == kept and isinstance(fast[0], str) and fast[0]
    assert fast_usage.get_total_tokens() and fast_usage.get_total_tokens() == own_usage.get_total_tokens()
