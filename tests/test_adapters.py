"""Prompt adapters: the plain adapter's prompts and lenient parsing, adapter choice per LM and per agent,
and the adapter as part of genome identity and of the LM key results are stored under."""

from __future__ import annotations

import dspy
import pytest

from masforge.errors import ConfigError
from masforge.evaluators.metrics import extract_code
from masforge.execution.compile import agent_adapter, compile_genome
from masforge.genome.schema import Agent, Genome
from masforge.lm.adapters import make_adapter, resolve_adapter
from masforge.lm.client import LMClient, LMConfig, parse_lm
from masforge.seeds import load_seed
from masforge.standalone.plain_adapter import PlainAdapter, split_final_answer
from masforge.testing import ScriptedResponder

CODE = "```python\ndef add(a, b):\n    return a + b\n```"


def _sig(spec: str, instructions: str = "") -> type[dspy.Signature]:
    return dspy.Signature(spec, instructions) if instructions else dspy.Signature(spec)


def _cot(instructions: str = "Solve it.") -> type[dspy.Signature]:
    return dspy.ChainOfThought(_sig("question -> answer", instructions)).predict.signature


# -- formatting ---------------------------------------------------------------------------------------


def test_single_input_single_output_is_the_question_itself():
    messages = PlainAdapter().format(_sig("question -> answer"), [], {"question": "What is 2 + 2?"})
    assert messages == [{"role": "user", "content": "What is 2 + 2?"}]


def test_instructions_come_first_and_several_inputs_are_labelled():
    sig = _sig("question, messages -> answer", "You are the critic. Check the answers.")
    content = PlainAdapter().format(sig, [], {"question": "Q?", "messages": "[a]\nanswer: 3"})[0]["content"]
    assert content.startswith("You are the critic. Check the answers.")
    assert "Question:\nQ?" in content and "Messages:\n[a]\nanswer: 3" in content
    assert "[[ ##" not in content and "{" not in content


def test_chain_of_thought_asks_for_a_final_answer_marker_in_plain_words():
    content = PlainAdapter().format(_cot(), [], {"question": "Q?"})[0]["content"]
    assert "Final answer:" in content and "[[ ##" not in content


def test_several_outputs_ask_for_labelled_sections_with_types():
    sig = _sig("question, draft -> critique, is_correct: bool")
    content = PlainAdapter().format(sig, [], {"question": "Q", "draft": "D"})[0]["content"]
    assert "Critique:" in content and "Is correct: (yes or no)" in content


def test_demos_become_user_and_assistant_turns():
    messages = PlainAdapter().format(_sig("question -> answer"), [{"question": "1+1", "answer": "2"}],
                                     {"question": "2+2"})
    assert [m["role"] for m in messages] == ["user", "assistant", "user"]
    assert messages[1]["content"] == "2"


# -- parsing --------------------------------------------------------------------------------------


def test_single_output_takes_the_whole_reply_keeping_the_code_fence():
    reply = f"Here is the function:\n{CODE}\nIt adds."
    assert PlainAdapter().parse(_sig("question -> answer"), reply) == {"answer": reply}


@pytest.mark.parametrize("reply, answer", [
    ("2 + 3 = 5.\nFinal answer: 5", "5"),
    ("Working...\n**Final Answer:** 42", "42"),
    ("Steps.\nThe final answer is: Paris", "Paris"),
    (f"Reasoning first.\n{CODE}", CODE),                      # no marker: the last code block
    ("Step one.\nStep two.\n17", "17"),                        # no marker, no code: the last line
    (f"I wrote it:\n{CODE}\nFinal answer: the function above", CODE),
])
def test_chain_of_thought_answer_is_recovered_leniently(reply, answer):
    out = PlainAdapter().parse(_cot(), reply)
    assert out["answer"] == answer
    assert isinstance(out["reasoning"], str)


def test_a_marker_inside_a_code_block_is_not_the_answer():
    reply = "```python\ndef f(x):\n    return x\n# Final answer:\nf(1)\n```"
    _, answer = split_final_answer(reply)
    assert "def f(x)" in answer


# All four seen from the 0.5B model through the cot seed on HumanEval (9 of 32 answers failed on syntax):
# the marker it was asked for, written into its code.
@pytest.mark.parametrize("reply", [
    "```python\ndef f(x):\n    return x + 1\n\n# Final answer:\nFinal answer: [1, 5, 653]\n```",
    "Steps.\n```python\ndef f(x):\n    return x + 1\n```\n\n4. **Final Answer**: The final answer is:\n"
    "```python\nFinal answer: True\n```",
    "Steps.\n```python\ndef f(x):\n    return x\n```\n\n```python\nFinal answer: The function f works.\n\n"
    "```python\ndef f(x):\n    return x + 1\n```",
    "Here is how:\n```python\ndef f(x):\n    return x + 1\n# Final answer\nFinal answer: List[str] -> List[str]\n```",
])
def test_a_marker_written_into_the_code_is_taken_out_of_it(reply):
    _, answer = split_final_answer(reply)
    code = extract_code(answer)
    assert code.strip() == "def f(x):\n    return x + 1"
    compile(code, "<answer>", "exec")


def test_an_example_output_as_final_answer_keeps_the_code_last():
    reply = f"{CODE}\n\nFinal answer:\n```python\n3\n```"
    _, answer = split_final_answer(reply)
    assert answer.rstrip().endswith("return a + b\n```")


def test_without_a_marker_the_answer_is_the_last_line_that_says_something():
    reply = "Janet sells 16 - 3 - 4 = 9 eggs.\n\\[\n9 \\times 2 = 18\n\\]\n)"
    reasoning, answer = split_final_answer(reply)
    assert answer == "9 \\times 2 = 18" and reasoning.endswith("\\[")
    assert split_final_answer("one\n---")[1] == "one"
    assert split_final_answer("...")[1] == "..."  # nothing says anything: the last line as before


def test_sections_are_parsed_with_markdown_and_case_noise():
    sig = _sig("question, draft -> critique, is_correct: bool")
    out = PlainAdapter().parse(sig, "**Critique:** the sum is wrong\n**Is correct:** No")
    assert out == {"critique": "the sum is wrong", "is_correct": False}


def test_an_unlabelled_reply_is_the_main_answer_not_a_failure():
    sig = _sig("question -> plan, answer")
    out = PlainAdapter().parse(sig, "The answer is 12.")
    assert out["answer"] == "The answer is 12." and out["plan"] == ""


@pytest.mark.parametrize("spec, reply, expected", [
    ("q -> n: int", "There are 1,234 apples.", 1234),
    ("q -> x: float", "about 3.5", 3.5),
    ("q -> ok: bool", "Yes, it is correct.", True),
    ("q -> ok: bool", "not correct", False),
    ("q -> items: list[str]", "- apple\n- pear", ["apple", "pear"]),
    ("q -> items: list[str]", '["a", "b"]', ["a", "b"]),
    ("q -> n: int", "no number here", 0),
])
def test_typed_outputs_are_coerced_without_raising(spec, reply, expected):
    assert PlainAdapter().parse(_sig(spec), reply)[spec.split("->")[1].split(":")[0].strip()] == expected


def test_react_step_is_parsed_from_labelled_sections():
    tool = dspy.Tool(lambda arg: arg, name="calculator", desc="evaluates arithmetic", args={"arg": {"type": "string"}})
    sig = dspy.ReAct(_sig("question -> answer"), tools=[tool]).react.signature
    content = PlainAdapter().format(sig, [], {"question": "1+1", "trajectory": ""})[0]["content"]
    assert "calculator" in content  # the tool list in the instructions survives
    out = PlainAdapter().parse(sig, 'Next thought: compute\nNext tool name: calculator\nNext tool args: {"arg": "1+1"}')
    assert out == {"next_thought": "compute", "next_tool_name": "calculator", "next_tool_args": {"arg": "1+1"}}


def test_react_step_asks_for_the_tool_input_as_it_is_not_its_json_schema():
    """Shown {'arg': {'type': 'string'}} and asked for JSON, the 0.5B model copied the schema as the arguments."""
    tool = dspy.Tool(lambda arg: arg, name="python", desc="runs a program", args={"arg": {"type": "string"}})
    sig = dspy.ReAct(_sig("question -> test_report"), tools=[tool]).react.signature
    content = PlainAdapter().format(sig, [], {"question": "Test it.", "trajectory": ""})[0]["content"]
    assert "'type'" not in content and "JSON format" not in content
    assert "python, whose description is <desc>runs a program</desc>. It takes one input" in content
    assert "It takes no input." in content  # finish
    assert "Next tool args: (the tool's input as it is, not JSON" in content


@pytest.mark.parametrize(("args", "expected"), [
    ("\n```python\nprint(1)\n```", {"arg": "```python\nprint(1)\n```"}),  # the program as it is
    (' ["python", "f"]\n\n```python\nprint(1)\n```\nObservation 0: made up', {"arg": "```python\nprint(1)\n```"}),
    (' {"arg": "print(2)"}', {"arg": "print(2)"}),                            # the JSON dspy asks for
    (' {"code": "print(3)"}', {"arg": "print(3)"}),                           # one argument under another name
    (' {"arg": {"type": "string"}}', {"arg": '{"arg": {"type": "string"}}'}),  # an echoed schema: run, not raised
])
def test_react_tool_input_is_read_leniently(args, expected):
    tool = dspy.Tool(lambda arg: arg, name="python", desc="runs a program", args={"arg": {"type": "string"}})
    sig = dspy.ReAct(_sig("question -> test_report"), tools=[tool]).react.signature
    out = PlainAdapter().parse(sig, f"Next thought: run it\nNext tool name: python\nNext tool args:{args}")
    assert out["next_tool_args"] == expected
    finish = PlainAdapter().parse(sig, "Next thought: done\nNext tool name: finish\nNext tool args: none")
    assert finish["next_tool_args"] == {}


def test_a_react_tester_runs_a_program_given_as_a_code_block():
    replies = ScriptedResponder([
        "Next thought: run the tests\nNext tool name: python\nNext tool args:\n```python\nprint(6 * 7)\n```",
        "Next thought: I have the output\nNext tool name: finish\nNext tool args:",
        "Reasoning: the program printed it.\nTest report: prints 42",
    ])
    client = LMClient({"worker": LMConfig(model="fake", adapter="plain")}, cache=False, responder=replies)
    genome = Genome(agents=[Agent(id="tester", module="react", tools=["python"], signature="question -> answer",
                                  instructions="Run the program.")],
                    topology={"edges": ["input -> tester", "tester -> output"]})
    compile_genome(genome, client)(question="What does 6 * 7 print?")
    assert "Observation 0:\n42" in replies.calls[1][0]["content"]  # the sandbox ran the block


def test_a_react_step_stops_where_a_small_model_would_write_the_observation_itself():
    seen: list[dict] = []

    class Recorder(dspy.BaseLM):
        def forward(self, prompt=None, messages=None, **kwargs):
            seen.append(kwargs)
            text = ("Next thought: run\nNext tool name: python\nNext tool args: print(2 + 2)\n"
                    "Observation 0: 5\n\nNext thought: done" if len(seen) == 1 else
                    "Next thought: done\nNext tool name: finish\nNext tool args:" if len(seen) == 2 else
                    "Reasoning: it printed 4\nTest report: 4\n\nTrajectory:\nThought 0: made up")
            msg = type("M", (), {"content": text, "tool_calls": None, "reasoning_content": None})()
            choice = type("C", (), {"message": msg, "finish_reason": "stop", "logprobs": None})()
            return type("R", (), {"choices": [choice], "usage": {}, "model": "r", "_hidden_params": {}})()

    tool = dspy.Tool(lambda arg: "4", name="python", desc="runs a program", args={"arg": {"type": "string"}})
    react = dspy.ReAct(_sig("question -> test_report"), tools=[tool], max_iters=3)
    with dspy.context(lm=Recorder(model="r"), adapter=PlainAdapter()):
        out = react(question="What does 2 + 2 print?")
    assert seen[0]["stop"][0] == "\nObservation" and "\nTrajectory:" in seen[2]["stop"]
    assert out.trajectory["tool_args_0"] == {"arg": "print(2 + 2)"} and out.trajectory["observation_0"] == "4"
    assert out.test_report == "4"  # read only up to where the made-up trajectory starts


def test_think_blocks_are_dropped():
    assert PlainAdapter().parse(_sig("q -> a"), "<think>hmm</think>Paris") == {"a": "Paris"}


# -- choice of adapter ----------------------------------------------------------------------------


def test_auto_is_plain_on_the_local_model_and_chat_elsewhere():
    assert resolve_adapter("auto", local=True) == "plain"
    assert resolve_adapter("auto", local=False) == "chat"
    assert resolve_adapter("json", local=True) == "json"
    assert parse_lm("local").resolved_adapter == "plain"
    assert parse_lm("openai/gpt-4o-mini").resolved_adapter == "chat"
    assert isinstance(make_adapter("plain"), PlainAdapter)
    assert isinstance(make_adapter("json"), dspy.JSONAdapter)


def test_lm_configuration_and_agent_override_the_choice():
    client = LMClient({"worker": LMConfig(model="fake", adapter="plain")}, cache=False)
    assert agent_adapter(Agent(id="a"), client) == "plain"
    assert agent_adapter(Agent(id="a", adapter="chat"), client) == "chat"


def test_unknown_adapter_in_an_lm_configuration_is_one_line():
    with pytest.raises(ConfigError, match="unknown adapter 'xml'"):
        parse_lm({"model": "fake", "adapter": "xml"})


def test_adapter_is_part_of_the_lm_key_but_old_keys_stay():
    assert LMConfig(model="fake").key() == LMConfig(model="fake", adapter="chat").key()
    assert LMConfig(model="fake").key() != LMConfig(model="fake", adapter="plain").key()
    assert LMConfig(model="local").key() != LMConfig(model="local", adapter="chat").key()


def test_adapter_gene_changes_the_genome_id_and_auto_keeps_old_ids():
    base = load_seed("io")
    same = base.model_copy(deep=True)
    same.agents[0].adapter = "auto"
    plain = base.model_copy(deep=True)
    plain.agents[0].adapter = "plain"
    assert same.id == base.id
    assert plain.id != base.id


def test_a_genome_runs_end_to_end_through_the_plain_adapter():
    replies = ScriptedResponder(["Let me add: 3 + 4 = 7.\nFinal answer: 7"])
    client = LMClient({"worker": LMConfig(model="fake", adapter="plain")}, cache=False, responder=replies)
    genome = Genome(agents=[Agent(id="solver", module="chain_of_thought", instructions="Solve it.")],
                    topology={"edges": ["input -> solver", "solver -> output"]})
    result = compile_genome(genome, client)(question="What is 3 + 4?")
    assert result.outputs == {"answer": "7"}
    sent = replies.calls[0]
    assert len(sent) == 1 and sent[0]["role"] == "user" and "What is 3 + 4?" in sent[0]["content"]


def test_every_seed_runs_on_the_fake_lm_through_the_plain_adapter():
    from masforge.seeds import seed_names

    client = LMClient({"worker": LMConfig(model="fake", adapter="plain")}, cache=False)
    for name in seed_names():
        genome = load_seed(name)
        if genome.kind != "config":
            continue
        result = compile_genome(genome, client)(question="What is 3 + 4 * 2?")
        assert "answer" in result.outputs, name


@pytest.mark.parametrize("inputs", [
    {"question": "What is 2 + 2?"},
    {"question": "Write a function.", "context": "def f(x):\n    pass\n"},
    {"question": "Which?", "context": ["a list", "of strings"]},  # not plain strings: dspy formats them
    {"question": "How many?", "context": {"n": 3}},
    {"question": ""},
])
@pytest.mark.parametrize("main_request", [True, False])
def test_the_chat_adapter_formats_plain_string_inputs_as_dspy_does(inputs: dict, main_request: bool) -> None:
    sig = _sig("question, context -> answer", "Answer the question.")
    kept = make_adapter("chat")
    plain = dspy.ChatAdapter()
    assert kept.format_user_message_content(sig, inputs, "pre", "post", main_request) == \
        plain.format_user_message_content(sig, inputs, "pre", "post", main_request)
    assert kept.format(sig, [], inputs) == plain.format(sig, [], inputs)
