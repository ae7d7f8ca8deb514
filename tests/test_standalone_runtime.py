"""The runtime an exported system carries (masforge.standalone), unit by unit: execution rules, reaching an
LM, the exported LM and command line, and code-genome rules. (That an export built from it reproduces masforge
exactly is tested end to end in test_export_report.py.)"""

from __future__ import annotations

import contextlib
import sys
from types import SimpleNamespace
from typing import Any

import dspy
import pytest

from masforge.standalone import code_system, command_line, connect, system
from masforge.standalone.adapters import choose_adapter
from masforge.standalone.litellm_lm import LiteLLM
from masforge.standalone.plain_adapter import PlainAdapter
from masforge.standalone.prompts import PROMPTS, render_prompt

# ------------------------------------------------------------------------------------------------
# execution rules


def test_copies_sample_only_when_nothing_else_sets_a_temperature() -> None:
    assert system.copies_temperature(None, 3, 0.0) == system.COPIES_TEMPERATURE
    assert system.copies_temperature(None, 3, None) == system.COPIES_TEMPERATURE
    assert system.copies_temperature(None, 3, 0.4) is None  # the LM already samples
    assert system.copies_temperature(None, 1, 0.0) is None  # one copy stays greedy
    assert system.copies_temperature(0.2, 3, 0.0) == 0.2  # the agent's own choice wins


def test_agent_choice_wins_over_the_lm_and_auto_follows_the_lm() -> None:
    assert choose_adapter("auto", "auto", local=True) == "plain"
    assert choose_adapter("auto", "auto", local=False) == "chat"
    assert choose_adapter("auto", "json", local=True) == "json"
    assert choose_adapter("chat", "plain", local=True) == "chat"
    assert choose_adapter(None, None, local=False) == "chat"


def _spec(module: str, **kw: Any) -> system.AgentSpec:
    return system.AgentSpec(id="a", module=module, signature="question -> answer", instructions="Do it.",
                            inputs=["question"], outputs=["answer"], tools=kw.pop("tools", []), **kw)


def test_agent_steps_follow_the_module_kind() -> None:
    assert system.agent_steps(_spec("predict")) == {"main": ("question -> answer", "Do it.")}
    pot = system.agent_steps(_spec("program_of_thought"))
    assert pot["write"] == ("question, feedback -> code", f"Do it. {PROMPTS['pot_write']}")
    assert pot["answer"][0] == "question, code, code_output -> answer"
    refine = system.agent_steps(_spec("refine"))
    assert list(refine) == ["main", "critique", "revise"]
    assert refine["critique"] == ("question, draft -> critique, is_correct: bool", PROMPTS["refine_critique"])
    with pytest.raises(ValueError, match="unknown module kind"):
        system.agent_steps(_spec("telepathy"))
    assert system.agent_instructions("critic", "", ["q"], ["a"]) == (
        f"{render_prompt('agent_role', role='critic')} Given the fields q, produce the fields a.")


class ScriptLM(dspy.BaseLM):
    """Answers in dspy's chat format; the answer depends on the sample index (rollout_id). Records calls."""

    def __init__(self, answers: dict[int, str], temperature: float = 0.0) -> None:
        super().__init__(model="test/script", temperature=temperature, max_tokens=64, cache=False, num_retries=0)
        self.answers = answers
        self.calls: list[dict[str, Any]] = []

    def forward(self, prompt: str | None = None, messages: list[dict[str, Any]] | None = None,
                **kwargs: Any) -> Any:
        merged = {**self.kwargs, **kwargs}
        sample = int(merged.get("rollout_id") or 0)
        self.calls.append({"sample": sample, "temperature": merged.get("temperature"), "messages": messages})
        text = f"[[ ## answer ## ]]\n{self.answers.get(sample, 'x')}\n\n[[ ## completed ## ]]"
        message = SimpleNamespace(content=text, tool_calls=None, reasoning_content=None)
        return SimpleNamespace(choices=[SimpleNamespace(message=message, finish_reason="stop", logprobs=None)],
                               usage={}, model="test/script")


def _voting_spec(copies: int = 3) -> system.SystemSpec:
    agent = _spec("predict", copies=copies)
    return system.SystemSpec(name="vote", inputs=["question"], outputs=["answer"], agents={"a": agent},
                             predecessors={"a": ["input"]}, plan=[(["a"], False)], output_agents=["a"],
                             aggregation="majority_vote")


def test_copies_vote_sample_and_are_traced() -> None:
    lm = ScriptLM({0: "7", 1: "Seven", 2: "7."})
    seen: list[tuple[str, int, int]] = []

    @contextlib.contextmanager
    def hook(agent_id: str, module: str, copy: int, round: int, inputs: dict[str, Any]) -> Any:
        seen.append((agent_id, copy, round))
        yield None

    program = system.System(_voting_spec(), lm, trace_hook=hook)
    outputs, candidates = program.run(question="3 + 4?")
    assert outputs == {"answer": "7"} and len(candidates) == 3
    assert sorted(seen) == [("a", 0, 0), ("a", 1, 0), ("a", 2, 0)]
    assert sorted(c["sample"] for c in lm.calls) == [0, 1, 2]
    assert {c["temperature"] for c in lm.calls} == {system.COPIES_TEMPERATURE}  # greedy LM, several copies
    assert program(question="3 + 4?").answer == "7"
    with pytest.raises(TypeError, match="needs input 'question'"):
        program.run(query="3 + 4?")


def test_a_fatal_error_in_one_copy_stops_the_run_and_no_answer_is_an_error() -> None:
    class Stop(Exception):
        pass

    class FailingLM(ScriptLM):
        def forward(self, prompt: str | None = None, messages: list[dict[str, Any]] | None = None,
                    **kwargs: Any) -> Any:
            if int({**self.kwargs, **kwargs}.get("rollout_id") or 0) == 1:
                raise Stop("budget")
            return super().forward(prompt, messages, **kwargs)

    with pytest.raises(Stop):
        system.System(_voting_spec(), FailingLM({0: "1", 2: "1"}), fatal=(Stop,)).run(question="q")
    outputs, candidates = system.System(_voting_spec(), FailingLM({0: "1", 2: "1"})).run(question="q")
    assert outputs == {"answer": "1"} and len(candidates) == 2  # a failed copy is dropped, not fatal
    spec = _voting_spec(1)._replace(output_agents=[])
    with pytest.raises(system.SystemRunError, match="no agent produced an answer"):
        system.System(spec, ScriptLM({})).run(question="q")
    with pytest.raises(ValueError, match="has no implementation here"):
        system.System(spec._replace(agents={"a": _spec("react", tools=["search"])}), ScriptLM({}))


def test_the_lm_adapter_attributes_choose_the_prompt_format() -> None:
    lm = ScriptLM({0: "4"})
    lm.is_local = True  # type: ignore[attr-defined]  # auto -> plain
    system.System(_voting_spec(1), lm).run(question="2 + 2?")
    assert lm.calls[0]["messages"] == PlainAdapter().format(dspy.Signature("question -> answer", "Do it."), [],
                                                             {"question": "2 + 2?"})


# ------------------------------------------------------------------------------------------------
# reaching an LM


def test_connect_names_the_missing_key_and_the_way_to_run(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(connect.LMSetupError, match=r"\$OPENAI_API_KEY"):
        connect.connect("openai/gpt-4o-mini")
    assert connect.connect("openai/gpt-4o-mini", require_key=False)[2] is None
    assert connect.connect("openai/m", api_base="http://h:1/v1") == ("openai/m", "http://h:1/v1", "sk-none", False)
    assert connect.connect("ollama/llama3")[3] is False  # keyless provider
    monkeypatch.setenv("MY_KEY", "secret")
    assert connect.connect("anthropic/x", api_key_env="MY_KEY")[2] == "secret"
    with pytest.raises(connect.LMSetupError, match="offline test LM"):
        connect.connect("fake")
    with pytest.raises(connect.LMSetupError, match="provider prefix"):
        connect.connect("gpt-4o")
    assert connect.missing_key_env("groq/x") == "GROQ_API_KEY" and connect.missing_key_env("local") is None


def test_an_openai_model_behind_an_api_base_sends_the_key_that_is_set(monkeypatch: pytest.MonkeyPatch) -> None:
    # Issue 37: a hosted OpenAI-compatible provider behind --api-base got the placeholder with OPENAI_API_KEY set.
    base = "http://h:1/v1"
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("MY_PROVIDER_KEY", raising=False)
    assert connect.api_key_for("openai/m", base) == "sk-none"  # only when no key is set
    monkeypatch.setenv("OPENAI_API_KEY", "sk-from-the-environment")
    assert connect.api_key_for("openai/m", base) == "sk-from-the-environment"
    assert connect.connect("openai/m", api_base=base)[2] == "sk-from-the-environment"
    assert connect.api_key_for("anthropic/m", base) is None and connect.api_key_for("openai/m") is None
    # a variable named for the key is the one read, and needed: no other key is sent in its place
    assert connect.missing_key_env("openai/m", base, "MY_PROVIDER_KEY") == "MY_PROVIDER_KEY"
    with pytest.raises(connect.LMSetupError, match=r"\$MY_PROVIDER_KEY"):
        connect.connect("openai/m", api_base=base, api_key_env="MY_PROVIDER_KEY")
    monkeypatch.setenv("MY_PROVIDER_KEY", "sk-named")
    assert connect.connect("openai/m", api_base=base, api_key_env="MY_PROVIDER_KEY")[2] == "sk-named"


def test_the_embedded_model_starts_through_masforge_or_says_how(monkeypatch: pytest.MonkeyPatch) -> None:
    from masforge import local_model

    endpoint = local_model.LocalEndpoint(api_base="http://127.0.0.1:5/v1", model="openai/qwen", alias="qwen")
    monkeypatch.setattr(local_model, "ensure_local_server", lambda name: endpoint)
    assert connect.connect("local") == ("openai/qwen", "http://127.0.0.1:5/v1", "sk-local", True)
    monkeypatch.setitem(sys.modules, "masforge.local_model", None)  # masforge not installed
    with pytest.raises(connect.LMSetupError) as info:
        connect.connect("local")
    assert "pip install masforge" in str(info.value) and "masforge models pull" in str(info.value)
    assert "\n" not in str(info.value)


def test_completion_request_seeds_only_sampled_calls() -> None:
    greedy = connect.completion_request("openai/m", [], temperature=0.0, max_tokens=5, seed=2, sample=3)
    sampled = connect.completion_request("openai/m", [], temperature=0.5, max_tokens=5, seed=2, sample=3,
                                         api_base="http://h/v1", api_key="k", extra={"top_p": 0.9})
    assert "seed" not in greedy and "api_base" not in greedy and greedy["drop_params"] is True
    assert sampled["seed"] == 2003 and sampled["api_key"] == "k" and sampled["top_p"] == 0.9
    assert connect.default_sampling("local") == (0.0, 1024) and connect.default_sampling("openai/m") == (0.7, 1024)


def test_exported_lm_sends_masforges_request(monkeypatch: pytest.MonkeyPatch) -> None:
    import litellm

    sent: list[dict[str, Any]] = []
    monkeypatch.setattr(litellm, "completion", lambda **request: sent.append(request) or "reply")
    lm = LiteLLM("openai/m", api_base="http://h:1/v1", temperature=0.7, max_tokens=9, seed=1, adapter="plain")
    assert (lm.adapter, lm.is_local) == ("plain", False)
    assert lm.copy(rollout_id=4).forward(messages=[{"role": "user", "content": "hi"}]) == "reply"
    assert sent[0] == connect.completion_request("openai/m", [{"role": "user", "content": "hi"}], temperature=0.7,
                                                 max_tokens=9, api_base="http://h:1/v1", api_key="sk-none",
                                                 num_retries=4, seed=1, sample=4)


# ------------------------------------------------------------------------------------------------
# the command line


def _cli(argv: list[str], found: dict[str, Any], capsys: pytest.CaptureFixture[str],
         fail: BaseException | None = None) -> tuple[int, dict[str, Any], str, str]:
    got: dict[str, Any] = {}

    def answer(inputs: dict[str, str], options: dict[str, Any]) -> dict[str, Any]:
        got.update(options, inputs=inputs)
        if fail is not None:
            raise fail
        return {"answer": inputs["question"].upper()}

    code = command_line.command_line(argv, name="s", inputs=["question"], outputs=["answer"], found_with=found,
                                     answer=answer, adapters=("auto", "chat", "json", "plain"))
    out, err = capsys.readouterr()
    return code, got, out, err


def test_command_line_defaults_to_the_lm_it_was_found_with(capsys: pytest.CaptureFixture[str],
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(command_line.MODEL_ENV, raising=False)
    found = {"model": "openai/q", "api_base": "http://h:1/v1", "api_key_env": "K", "temperature": 0.1,
             "max_tokens": 99, "adapter": "plain", "extra": {"top_p": 0.5}}
    code, got, out, _ = _cli(["hi"], found, capsys)
    assert code == 0 and out == "HI\n"
    assert got == {"model": "openai/q", "api_base": "http://h:1/v1", "api_key_env": "K", "temperature": 0.1,
                   "max_tokens": 99, "seed": 0, "top_p": 0.5, "adapter": "plain", "inputs": {"question": "hi"}}
    # another model: masforge's defaults for it, none of the recorded endpoint settings
    code, got, _, _ = _cli(["hi", "--model", "local", "--seed", "3"], found, capsys)
    assert (got["model"], got["api_base"], got["temperature"], got["adapter"], got["seed"]) == \
        ("local", None, 0.0, "auto", 3) and "top_p" not in got
    monkeypatch.setenv(command_line.MODEL_ENV, "anthropic/x")
    assert _cli(["--field", "question=yo"], found, capsys)[1]["model"] == "anthropic/x"


def test_command_line_failures_are_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    found = {"model": "local"}
    code, _, out, err = _cli(["hi"], found, capsys, fail=connect.LMSetupError("do this\nnot this"))
    assert (code, out, err) == (1, "", "error: do this\n")
    code, _, _, err = _cli(["hi"], found, capsys, fail=RuntimeError("boom\ntrace"))
    assert (code, err) == (1, "error: RuntimeError: boom\n")
    with pytest.raises(SystemExit) as info:
        _cli([], found, capsys)
    assert info.value.code == 2 and "give the input 'question'" in capsys.readouterr().err


# ------------------------------------------------------------------------------------------------
# code genomes


def test_code_system_follows_masforges_call_rules() -> None:
    assert code_system.llm_messages("p", "s") == [{"role": "system", "content": "s"},
                                                  {"role": "user", "content": "p"}]
    assert code_system.forward_outputs("x", ["answer"]) == {"answer": "x"}
    with pytest.raises(ValueError, match="returned no 'b'"):
        code_system.forward_outputs({"a": 1}, ["a", "b"])
    seen: list[tuple[Any, ...]] = []

    def complete(messages: list[dict[str, Any]], temperature: float, sample: int, alias: str) -> str:
        seen.append((messages[-1]["content"], temperature, sample, alias))
        return "ok"

    code = ("def forward(inputs):\n"
            "    a = llm(inputs['q'], sample=2)\n"
            "    b = tool('up', a)\n"
            "    for _ in range(int(inputs.get('n', 0))):\n"
            "        tool('up', 'x')\n"
            "    return {'answer': b}\n")
    run = code_system.CodeSystem(code, "c", ["q"], ["answer"], complete, temperature=0.3,
                                 tools={"up": str.upper})
    assert run(q="hi") == {"answer": "OK"} and seen == [("hi", 0.3, 2, "worker")]
    with pytest.raises(RuntimeError, match=f"more than {code_system.MAX_TOOL_CALLS_PER_RUN} tool"):
        run(q="hi", n=code_system.MAX_TOOL_CALLS_PER_RUN + 1)
    with pytest.raises(TypeError, match="needs input 'q'"):
        run(x=1)
