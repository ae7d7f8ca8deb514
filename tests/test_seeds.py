"""Seeds, the component inventory, and the execution semantics of compiled genomes, all on the offline fake LM."""

from __future__ import annotations

import json
import re
from collections import Counter
from typing import Any

import pytest

from masforge.errors import GenomeError
from masforge.execution.compile import compile_genome, normalise_answer
from masforge.genome.io import parse_genome_text
from masforge.genome.schema import Agent, Genome
from masforge.genome.validate import problems, validate
from masforge.lm.client import LMClient
from masforge.lm.fake import fake_reply, input_values, output_fields
from masforge.sandbox.tools import tool_names
from masforge.seeds import Component, load_inventory, load_seed, seed_names, seed_paths
from masforge.testing import ScriptedResponder, chat_reply

QUESTION = "What is 3 + 4 * 2?"

# --------------------------------------------------------------------------------------------------
# helpers


def _user_text(messages) -> str:
    return next((str(m["content"]) for m in reversed(messages) if m["role"] == "user"), "")


def _system_text(messages) -> str:
    return next((str(m["content"]) for m in messages if m["role"] == "system"), "")


def react_aware(messages, info):
    """fake_reply, plus the one thing it cannot do: a ReAct step (a Literal tool name and dict arguments).

    The first step calls the first real tool (the calculator on the question's arithmetic, the python
    tool on a tiny program); once the trajectory holds an observation, the agent finishes."""
    fields = dict(output_fields(messages))
    if "next_tool_name" not in fields:
        return fake_reply(messages, info)
    options = re.findall(r"'([^']+)'", fields["next_tool_name"])
    observed = "## observation_" in _user_text(messages)
    tool = "finish" if observed else next(o for o in options if o != "finish")
    if tool == "calculator":
        args = {"arg": "3 + 4 * 2"}
    elif tool == "python":
        args = {"arg": "print(6 * 7)"}
    else:
        args = {}
    return chat_reply(next_thought=f"Next I use {tool}.", next_tool_name=tool, next_tool_args=json.dumps(args))


def fake_client(responder=None) -> LMClient:
    return LMClient({"worker": "fake"}, cache=False, responder=responder or react_aware)


class Recorder:
    """A responder that remembers every prompt and answers with ``inner`` (default: react_aware)."""

    def __init__(self, inner=None) -> None:
        self.inner = inner or react_aware
        self.prompts: list[list[dict[str, Any]]] = []

    def __call__(self, messages, info):
        self.prompts.append(list(messages))
        return self.inner(messages, info)


def agents_called(result) -> Counter:
    return Counter(call.agent for call in result.trace.calls)


def run_seed(name: str, responder=None, **inputs):
    genome = load_seed(name)
    system = compile_genome(genome, fake_client(responder))
    return genome, system(**(inputs or {"question": QUESTION}))


# --------------------------------------------------------------------------------------------------
# every seed


CONFIG_SEEDS = [p.stem for p in seed_paths() if p.suffix in (".yaml", ".yml")]
CODE_SEEDS = [p.stem for p in seed_paths() if p.suffix == ".py"]


def test_enough_seeds_of_both_kinds():
    assert len(CONFIG_SEEDS) >= 10
    assert {"code_verify", "code_ensemble"} <= set(CODE_SEEDS)
    expected = {"io", "cot", "self_consistency", "self_refine", "step_back", "quality_diversity", "expert_routing",
                "program_of_thought", "reflexion_code", "react_calculator", "debate", "self_debug", "codet",
                "escalate"}
    assert expected <= set(CONFIG_SEEDS)


@pytest.mark.parametrize("name", seed_names())
def test_seed_loads_validates_and_is_documented(name):
    genome = load_seed(name)
    assert problems(genome) == []
    assert validate(genome) is genome
    assert genome.name and genome.name != "unnamed"
    assert len(genome.description) > 80, "describe the system in a paragraph"
    assert "\n\n" not in genome.description.strip(), "one paragraph"
    assert re.search(r"(19|20)\d\d", genome.source), "source names the paper or idea (with its year)"
    assert genome.kind == ("code" if name.startswith("code_") else "config")


def test_seed_names_are_unique():
    names = [load_seed(n).name for n in seed_names()]
    assert len(set(names)) == len(names)
    ids = [load_seed(n).id for n in seed_names()]
    assert len(set(ids)) == len(ids)


@pytest.mark.parametrize("name", seed_names())
def test_seed_runs_end_to_end_on_the_fake_lm(name):
    genome, result = run_seed(name)
    assert set(result.outputs) == set(genome.outputs)
    assert all(str(v).strip() for v in result.outputs.values())
    assert result.trace.calls, "the trace records the agent calls"
    assert all(call.error is None for call in result.trace.calls)
    assert result.trace.lm_calls >= 1
    in_graph = {n for edge in genome.topology.edges for n in edge} | {genome.topology.judge}
    for call in result.trace.calls:
        assert call.agent in in_graph or genome.kind == "code"


def _uses_react(name: str) -> bool:
    return any(a.module == "react" for a in load_seed(name).agents)


@pytest.mark.parametrize("name", seed_names())
def test_seed_runs_on_the_plain_fake_lm(name):
    genome = load_seed(name)
    result = compile_genome(genome, LMClient({"worker": "fake"}, cache=False))(question=QUESTION)
    assert set(result.outputs) == set(genome.outputs)


# expected agent calls of each config seed on one question: Counter of agent ids
EXPECTED_CALLS = {
    "io": {"answerer": 1},
    "cot": {"solver": 1},
    "take_a_deep_breath": {"solver": 1},
    "self_consistency": {"solver": 5},
    "self_refine": {"refiner": 1},
    "step_back": {"abstractor": 1, "solver": 1},
    "plan_and_solve": {"planner": 1, "solver": 1},
    "quality_diversity": {"solver_formal": 1, "solver_alt": 1, "solver_wild": 1, "decider": 1},
    "expert_routing": {"router": 1, "expert": 1},
    "program_of_thought": {"programmer": 1},
    "react_calculator": {"agent": 1},
    "reflexion_code": {"coder": 1, "tester": 2, "reviser": 2},
    "debate": {"debater_a": 2, "debater_b": 2, "debater_c": 2, "judge": 1},
    "sample_and_test": {"coder": 5},
    # execute nodes are traced (no LM call); the question states no examples, so every check passes
    "self_debug": {"coder": 1, "check": 1},
    "codet": {"coder": 5, "tester": 1, "check": 1},
    "escalate": {"answerer": 1, "first_check": 1, "final_check": 1},
}


def test_every_config_seed_has_expected_calls():
    assert set(EXPECTED_CALLS) == set(CONFIG_SEEDS)


@pytest.mark.parametrize("name", sorted(EXPECTED_CALLS))
def test_seed_trace_has_the_expected_agent_calls(name):
    _, result = run_seed(name)
    assert agents_called(result) == Counter(EXPECTED_CALLS[name])


def test_self_consistency_samples_five_copies_and_votes():
    genome, result = run_seed("self_consistency")
    assert genome.topology.aggregation == "majority_vote"
    calls = result.trace.calls
    assert sorted(c.copy for c in calls) == [0, 1, 2, 3, 4]
    assert len(result.candidates) == 5
    assert result.outputs["answer"] == "11"  # the fake LM computes arithmetic


def test_debate_runs_two_synchronous_rounds_in_a_full_mesh_then_the_judge():
    genome, result = run_seed("debate")
    debaters = ["debater_a", "debater_b", "debater_c"]
    for d in debaters:
        others = {a for a, b in genome.topology.edges if b == d and a != "input"}
        assert others == set(debaters) - {d}
    calls = result.trace.calls
    assert [(c.agent, c.round) for c in calls[:3]] == [(d, 0) for d in debaters]
    assert [(c.agent, c.round) for c in calls[3:6]] == [(d, 1) for d in debaters]
    assert calls[-1].agent == "judge"
    for c in calls[:3]:  # synchronous: nobody sees this round's answers
        assert c.inputs["messages"] == "(no messages yet)"
    for c in calls[3:6]:
        others = set(debaters) - {c.agent}
        assert {m for m in re.findall(r"^\[(\w+)\]$", c.inputs["messages"], re.M)} == others
    judged = calls[-1].inputs["candidates"]
    assert all(f"[{d}]" in judged for d in debaters)


def test_reflexion_code_alternates_tester_and_reviser_and_runs_the_python_tool():
    rec = Recorder()
    _, result = run_seed("reflexion_code", rec)
    order = [(c.agent, c.round) for c in result.trace.calls]
    assert order == [("coder", 0), ("tester", 0), ("reviser", 0), ("tester", 1), ("reviser", 1)]
    # round 1: the tester sees the reviser's attempt; the reviser sees its own previous attempt (memory)
    assert "[reviser]" in result.trace.calls[3].inputs["messages"]
    assert "[reviser]" in result.trace.calls[4].inputs["messages"]
    assert "[tester]" in result.trace.calls[4].inputs["messages"]
    assert "reflection" in result.trace.calls[4].outputs
    # the tester's ReAct loop ran the program in the sandbox: the observation is in its next prompt
    observed = [_user_text(p) for p in rec.prompts if "## observation_0 ## ]]\n42" in _user_text(p)]
    assert observed


def test_program_of_thought_runs_the_sandboxed_python_tool():
    def responder(messages, info):
        fields = dict(output_fields(messages))
        if "code" in fields:
            return chat_reply(code="```python\nprint(sum([3, 4 * 2]) * 2)\n```")
        if "code_output" in input_values(messages):
            return chat_reply(answer=input_values(messages)["code_output"])
        return fake_reply(messages, info)

    _, result = run_seed("program_of_thought", responder)
    assert result.outputs["answer"] == "22"  # only the executed program knows this
    assert len(result.trace.calls[0].lm_calls) == 2  # write, then answer from the output


def test_program_of_thought_feeds_errors_back_and_retries():
    rec = Recorder(ScriptedResponder([
        chat_reply(code="print(1 / 0)"),
        chat_reply(code="print(7)"),
        lambda messages: chat_reply(answer=input_values(messages)["code_output"]),
    ]))
    _, result = run_seed("program_of_thought", rec)
    assert result.outputs["answer"] == "7"
    assert "ZeroDivisionError" in input_values(rec.prompts[1])["feedback"]


def test_react_calculator_calls_the_calculator():
    rec = Recorder()
    _, result = run_seed("react_calculator", rec)
    assert any("## observation_0 ## ]]\n11" in _user_text(p) for p in rec.prompts)
    assert result.outputs["answer"] == "11"


@pytest.mark.parametrize(("expression", "expected"), [
    ("3 + 4 * 2", "11"), ("max(3, 4)", "4"), ("round(2.3456, 2)", "2.35"), ("1,000 + 5", "1005"),
    ("1,234,567 * 2", "2469134"), ("max(100,200)", "200"), ("2^10", "1024"), ("3 + 4 = 7", "7"),
    ("`10 / 4`", "2.5"),
])
def test_calculator_tool(expression, expected):
    from masforge.sandbox.tools import get_tool

    assert get_tool("calculator")(expression) == expected


@pytest.mark.parametrize("expression", ["3 == 3", "x = 3", "2 ** 5000", "__import__('os')", "(1 + 2"])
def test_calculator_tool_refuses_what_it_cannot_compute(expression):
    from masforge.sandbox.tools import get_tool

    assert get_tool("calculator")(expression).startswith("error: ")


def test_step_back_and_expert_routing_pass_named_fields():
    _, result = run_seed("step_back")
    solver = next(c for c in result.trace.calls if c.agent == "solver")
    abstractor = next(c for c in result.trace.calls if c.agent == "abstractor")
    assert solver.inputs["principles"] == abstractor.outputs["principles"]
    _, result = run_seed("expert_routing")
    expert = next(c for c in result.trace.calls if c.agent == "expert")
    router = next(c for c in result.trace.calls if c.agent == "router")
    assert expert.inputs["expert_role"] == router.outputs["expert_role"]
    assert set(expert.inputs) == {"question", "expert_role"}


def test_quality_diversity_later_solvers_read_earlier_attempts_and_the_judge_reads_all():
    _, result = run_seed("quality_diversity")
    by_agent = {c.agent: c for c in result.trace.calls}
    assert "[solver_formal]" in by_agent["solver_alt"].inputs["messages"]
    wild = by_agent["solver_wild"].inputs["messages"]
    assert "[solver_formal]" in wild and "[solver_alt]" in wild
    cands = by_agent["decider"].inputs["candidates"]
    assert all(f"[{s}]" in cands for s in ("solver_formal", "solver_alt", "solver_wild"))
    assert result.trace.calls[-1].agent == "decider"


def test_self_refine_iterates_until_the_critique_is_satisfied():
    script = ScriptedResponder([
        chat_reply(reasoning="3 + 4 = 7, times 2 is 14", answer="14"),
        chat_reply(critique="Multiplication binds tighter: 4 * 2 = 8, so 3 + 8 = 11.", is_correct="False"),
        chat_reply(answer="11"),
        chat_reply(critique="Correct now.", is_correct="True"),
    ])
    _, result = run_seed("self_refine", script)
    assert result.outputs["answer"] == "11"
    assert len(script.calls) == 4  # draft, critique, revision, critique (stop: correct)
    assert "4 * 2 = 8" in input_values(script.calls[2])["critique"]


def test_code_ensemble_makes_three_samples_and_returns_the_majority():
    script = ScriptedResponder(["... FINAL ANSWER: 12", "... FINAL ANSWER: 11.0", "... FINAL ANSWER: 11"])
    _, result = run_seed("code_ensemble", script)
    assert result.outputs["answer"] == "11.0"  # 11.0 and 11 agree; the earliest of them is returned
    assert [c.agent for c in result.trace.calls] == ["forward"]
    assert len(result.trace.calls[0].lm_calls) == 3


def test_code_ensemble_samples_differ_on_the_fake_lm():
    seen: list[int] = []

    def responder(messages, info):
        seen.append(info["sample"])
        return fake_reply(messages, info)

    run_seed("code_ensemble", responder)
    assert sorted(seen) == [0, 1, 2]


def test_code_verify_fixes_the_draft_when_the_verifier_objects():
    script = ScriptedResponder(["work... FINAL ANSWER: 14", "The order of operations is wrong.",
                                "fixed work... FINAL ANSWER: 11"])
    _, result = run_seed("code_verify", script)
    assert result.outputs["answer"] == "11"
    script = ScriptedResponder(["work... FINAL ANSWER: 11", "CORRECT"])
    _, result = run_seed("code_verify", script)
    assert result.outputs["answer"] == "11"
    assert len(script.calls) == 2


def test_unknown_seed_is_a_one_line_error():
    with pytest.raises(GenomeError, match="unknown seed 'nope'") as info:
        load_seed("nope")
    assert "\n" not in str(info.value)


# --------------------------------------------------------------------------------------------------
# inventory


def test_inventory_loads_typed_components():
    inv = load_inventory()
    assert 12 <= len(inv) <= 26
    assert all(isinstance(c, Component) for c in inv)
    assert len({c.id for c in inv}) == len(inv)
    kinds = Counter(c.kind for c in inv)
    assert kinds["agent"] >= 8 and kinds["tool"] >= 2 and kinds["model"] >= 1 and kinds["pattern"] >= 4
    for c in inv:
        assert c.description.strip() and c.cost >= 0
        if c.kind == "agent":
            assert isinstance(c.agent, Agent) and c.agent.id == c.id and c.tool is None and c.model is None
        elif c.kind == "tool":
            assert c.tool in tool_names()
        elif c.kind == "pattern":
            assert c.pattern and c.agent is None
        else:
            assert c.model
    ids = {c.id for c in inv}
    for wanted in ("critic", "verifier", "judge", "planner", "summariser", "step_back_abstractor", "python",
                   "calculator", "python_solver", "calculator_solver"):
        assert wanted in ids
    by_id = {c.id: c for c in inv}
    assert by_id["sampled_solvers"].cost > by_id["cot_solver"].cost > by_id["direct_answerer"].cost


def _pipeline(*agents: Agent, judge: Agent | None = None) -> Genome:
    """A chain input -> a1 -> a2 -> ... -> output where every agent also reads the input."""
    ids = [a.id for a in agents]
    edges = [f"input -> {i}" for i in ids] + [f"{a} -> {b}" for a, b in zip(ids, ids[1:], strict=False)]
    edges.append(f"{ids[-1]} -> output")
    topo: dict[str, Any] = {"edges": edges}
    all_agents = list(agents)
    if judge is not None:
        topo.update(aggregation="judge", judge=judge.id)
        all_agents.append(judge)
    return Genome.model_validate({"name": "composed", "agents": [a.model_dump() for a in all_agents],
                                  "topology": topo})


def test_inventory_fragments_compose_into_runnable_genomes():
    by_id = {c.id: c.agent for c in load_inventory() if c.kind == "agent"}
    pipelines = [
        [by_id["step_back_abstractor"], by_id["cot_solver"]],
        [by_id["planner"], by_id["cot_solver"], by_id["critic"], by_id["reviser"]],
        [by_id["python_solver"], by_id["verifier"]],
        [by_id["calculator_solver"], by_id["summariser"], by_id["reviser"]],
        [by_id["direct_answerer"]],
        [by_id["self_refiner"]],
        [by_id["sampled_solvers"]],
    ]
    client = fake_client()
    for agents in pipelines:
        genome = _pipeline(*agents, judge=by_id["judge"])
        assert problems(genome) == [], [a.id for a in agents]
        result = compile_genome(genome, client)(question=QUESTION)
        assert result.outputs["answer"]
        assert result.trace.calls[-1].agent == "judge"


def test_inventory_errors_name_the_file_and_the_entry(tmp_path):
    good = {"id": "solver", "kind": "agent", "description": "solves", "cost": 0.001, "agent": {"module": "predict"}}
    cases = [
        ([{**good, "cost": -1}], "components[0] 'solver': cost: Input should be greater than or equal to 0"),
        ([{**good, "kind": "robot"}],
         "components[0] 'solver': kind: Input should be 'agent', 'tool', 'model' or 'pattern'"),
        ([{**good, "agent": {"module": "magic"}}], "components[0] 'solver': agent.module: Input should be"),
        ([{**good, "agent": {"tools": ["browser"]}}], "components[0] 'solver': agent.tools: unknown tool 'browser'"),
        ([{**good, "colour": "red"}], "components[0] 'solver': colour: unknown field"),
        ([good, good], "components[1] 'solver': duplicate component id 'solver'"),
        ([{k: v for k, v in good.items() if k != "agent"}],
         "components[0] 'solver': a component of kind 'agent' needs the field 'agent'"),
        ([{**good, "tool": "python"}], "components[0] 'solver': a component of kind 'agent' takes no 'tool' field"),
        ([{"id": "t", "kind": "tool", "description": "x", "cost": 0, "tool": "hammer"}],
         "components[0] 't': tool: unknown tool 'hammer'"),
        ([{"kind": "model", "description": "x", "cost": 0, "model": "worker"}],
         "components[0] (no id): id: required field is missing"),
        ([good, "just text"], "components[1] (no id): a component is a mapping"),
    ]
    for i, (entries, expected) in enumerate(cases):
        path = tmp_path / f"inv{i}.yaml"
        path.write_text(json.dumps({"components": entries}))
        with pytest.raises(GenomeError) as info:
            load_inventory(path)
        message = str(info.value)
        assert expected in message, (expected, message)
        assert message.startswith(str(path)) and "\n" not in message
    bad = tmp_path / "broken.yaml"
    bad.write_text("components:\n  - id: a\n    kind: [agent\n")
    with pytest.raises(GenomeError, match=r"broken\.yaml:\d+: invalid YAML"):
        load_inventory(bad)
    with pytest.raises(GenomeError, match="cannot read the inventory"):
        load_inventory(tmp_path / "missing.yaml")
    (tmp_path / "list.yaml").write_text("- id: a\n")
    with pytest.raises(GenomeError, match="list under 'components'"):
        load_inventory(tmp_path / "list.yaml")


# --------------------------------------------------------------------------------------------------
# execution semantics


def role_responder(log: list[tuple[str, dict[str, str]]]):
    """Answers ``<role>#<n>`` (n counts that role's calls) and logs (role, inputs) for every call."""
    counts: Counter = Counter()

    def respond(messages, info):
        role = re.search(r"You are the (\w+) in a team", _system_text(messages)).group(1)
        counts[role] += 1
        log.append((role, input_values(messages)))
        return chat_reply(answer=f"{role}#{counts[role]}")

    return respond


def two_agent_cycle(passing: str, rounds: int = 2) -> Genome:
    return parse_genome_text(f"""
agents:
  - {{id: a, role: alpha}}
  - {{id: b, role: beta}}
topology:
  edges: [input -> a, input -> b, a -> b, b -> a, b -> output]
  rounds: {rounds}
  message_passing: {passing}
""")


def test_synchronous_rounds_see_only_the_previous_round():
    log: list = []
    result = compile_genome(two_agent_cycle("synchronous"), fake_client(role_responder(log)))(question="q")
    seen = [(role, inputs["messages"]) for role, inputs in log]
    assert seen == [
        ("alpha", "(no messages yet)"),
        ("beta", "(no messages yet)"),  # alpha#1 exists already but belongs to this round
        ("alpha", "[b]\nanswer: beta#1"),
        ("beta", "[a]\nanswer: alpha#1"),  # not alpha#2 from this round
    ]
    assert result.outputs == {"answer": "beta#2"}
    assert [(c.agent, c.round) for c in result.trace.calls] == [("a", 0), ("b", 0), ("a", 1), ("b", 1)]


def test_sequential_rounds_see_this_rounds_earlier_outputs():
    log: list = []
    result = compile_genome(two_agent_cycle("sequential"), fake_client(role_responder(log)))(question="q")
    seen = [(role, inputs["messages"]) for role, inputs in log]
    assert seen == [
        ("alpha", "(no messages yet)"),
        ("beta", "[a]\nanswer: alpha#1"),
        ("alpha", "[b]\nanswer: beta#1"),
        ("beta", "[a]\nanswer: alpha#2"),
    ]
    assert result.outputs == {"answer": "beta#2"}


def test_rounds_repeat_only_the_cyclic_part():
    log: list = []
    genome = parse_genome_text("""
agents:
  - {id: p, role: planner}
  - {id: a, role: alpha}
  - {id: b, role: beta}
  - {id: f, role: finisher}
topology:
  edges: [input -> p, p -> a, input -> a, a -> b, b -> a, b -> f, f -> output]
  rounds: 3
""")
    result = compile_genome(genome, fake_client(role_responder(log)))(question="q")
    assert [r for r, _ in log] == ["planner"] + ["alpha", "beta"] * 3 + ["finisher"]
    assert result.outputs == {"answer": "finisher#1"}
    # the finisher reads only its predecessor's latest output, the planner's output reaches alpha every round
    assert log[-1][1]["messages"] == "[b]\nanswer: beta#3"
    assert all("[p]\nanswer: planner#1" in inputs["messages"] for role, inputs in log if role == "alpha")
    # the finisher has no edge from input: it does not see the question
    assert "question" not in log[-1][1]


def test_dag_runs_in_topological_order_with_ties_by_agent_order():
    log: list = []
    genome = parse_genome_text("""
agents:
  - {id: z, role: last}
  - {id: y, role: second}
  - {id: x, role: first}
topology:
  edges: [input -> x, input -> y, x -> z, y -> z, z -> output]
""")
    compile_genome(genome, fake_client(role_responder(log)))(question="q")
    assert [r for r, _ in log] == ["second", "first", "last"]
    assert log[-1][1]["messages"] == "[y]\nanswer: second#1\n\n[x]\nanswer: first#1"


def vote_genome(aggregation: str = "majority_vote", copies: int = 5) -> Genome:
    return parse_genome_text(f"""
agents:
  - {{id: s, role: solver, copies: {copies}}}
topology:
  edges: [input -> s, s -> output]
  aggregation: {aggregation}
""")


def test_majority_vote_picks_the_most_common_normalised_answer():
    answers = {0: "Forty-two", 1: " 42.0 ", 2: "41", 3: "$42", 4: "42"}

    def respond(messages, info):
        return chat_reply(answer=answers[info["sample"]])

    result = compile_genome(vote_genome(), fake_client(respond))(question="q")
    # "42.0", "$42" and "42" normalise to "42" (3 votes); the first candidate with the winning key is returned
    assert result.outputs == {"answer": "42.0"}
    assert len(result.candidates) == 5


def test_majority_vote_ties_go_to_the_earliest_candidate():
    answers = {0: "blue", 1: "red", 2: "Red", 3: "BLUE"}

    def respond(messages, info):
        return chat_reply(answer=answers[info["sample"]])

    result = compile_genome(vote_genome(copies=4), fake_client(respond))(question="q")
    assert result.outputs == {"answer": "blue"}


def test_majority_vote_clear_winner_and_normalisation():
    answers = {0: "Paris.", 1: "london", 2: " paris", 3: "PARIS", 4: "London"}

    def respond(messages, info):
        return chat_reply(answer=answers[info["sample"]])

    result = compile_genome(vote_genome(), fake_client(respond))(question="q")
    assert normalise_answer(result.outputs["answer"]) == "paris"
    assert normalise_answer("1,000.0") == "1000" and normalise_answer(" The End! ") == "the end"


def test_last_aggregation_takes_the_last_candidate():
    answers = {0: "first", 1: "second", 2: "third"}

    def respond(messages, info):
        return chat_reply(answer=answers[info["sample"]])

    result = compile_genome(vote_genome("last", copies=3), fake_client(respond))(question="q")
    assert result.outputs == {"answer": "third"}


def test_judge_gets_all_candidates_and_decides():
    log: list = []
    genome = parse_genome_text("""
agents:
  - {id: a, role: alpha, copies: 2}
  - {id: b, role: beta}
  - {id: c, role: gamma}
  - {id: j, role: judge}
topology:
  edges: [input -> a, input -> b, input -> c, c -> b, a -> output, b -> output]
  aggregation: judge
  judge: j
""")
    result = compile_genome(genome, fake_client(role_responder(log)))(question="the question")
    role, judge_inputs = log[-1]
    assert role == "judge"
    assert set(judge_inputs) == {"question", "candidates"}
    assert judge_inputs["question"] == "the question"
    cands = judge_inputs["candidates"]
    blocks = re.findall(r"^\[([\w#]+)\]$", cands, re.M)
    assert sorted(blocks) == ["a#1", "a#2", "b"]  # every copy of every output feeder; c feeds b, not output
    assert "answer: beta#1" in cands
    assert result.outputs == {"answer": "judge#1"}
    assert len(result.candidates) == 3
    assert result.trace.calls[-1].agent == "j"


def test_judge_reads_only_output_feeders():
    log: list = []
    genome = parse_genome_text("""
agents:
  - {id: a, role: alpha}
  - {id: b, role: beta}
  - {id: j, role: judge}
topology:
  edges: [input -> a, a -> b, b -> output]
  aggregation: judge
  judge: j
""")
    compile_genome(genome, fake_client(role_responder(log)))(question="q")
    assert log[-1][1]["candidates"] == "[b]\nanswer: beta#1"


def test_named_fields_of_predecessors_and_copies_in_messages():
    log: list = []

    def respond(messages, info):
        fields = [n for n, _ in output_fields(messages)]
        log.append(input_values(messages))
        if fields == ["plan"]:
            return chat_reply(plan=f"plan {info['sample']}")
        return chat_reply(answer="done")

    genome = parse_genome_text("""
agents:
  - {id: p, signature: question -> plan, copies: 2}
  - {id: s, signature: "question, plan, messages -> answer"}
topology:
  edges: [input -> p, input -> s, p -> s, s -> output]
""")
    compile_genome(genome, fake_client(respond))(question="q")
    solver = log[-1]
    assert solver["plan"] == "plan 0"  # the first copy's value under the field name
    assert solver["messages"] == "[p#1]\nplan: plan 0\n\n[p#2]\nplan: plan 1"


def test_copies_get_distinct_samples_and_rounds_shift_them():
    samples: list[int] = []

    def respond(messages, info):
        samples.append(info["sample"])
        return chat_reply(answer="x")

    genome = parse_genome_text("""
agents:
  - {id: a, copies: 3}
  - {id: b}
topology:
  edges: [input -> a, a -> b, b -> a, b -> output]
  rounds: 2
""")
    compile_genome(genome, fake_client(respond))(question="q")
    assert sorted(samples) == [0, 0, 1, 2, 1000, 1000, 1001, 1002]


def test_agent_temperature_and_lm_alias_reach_the_client():
    seen: list[tuple[str, float]] = []

    def respond(messages, info):
        seen.append((info["model"], info["temperature"]))
        return chat_reply(answer="x")

    genome = parse_genome_text("""
agents:
  - {id: a, temperature: 1.3, lm: drafter}
  - {id: b}
topology:
  edges: [input -> a, a -> b, b -> output]
""")
    client = LMClient({"worker": "fake", "drafter": "fake:drafter"}, cache=False, responder=respond)
    compile_genome(genome, client)(question="q")
    assert seen == [("fake:drafter", 1.3), ("fake", 0.0)]


def test_missing_input_is_a_one_line_error():
    system = compile_genome(load_seed("cot"), fake_client())
    with pytest.raises(GenomeError, match="needs input 'question'"):
        system(query="x")


def test_votes_on_code_compare_programs_not_their_comments_or_test_prints():
    commented = '```python\ndef f(x):\n    """Add one."""\n    # add one\n    return x + 1\n\nprint(f(2))\n```'
    plain = "Here it is:\n```python\ndef f(x):\n    return x+1\n```"
    other = "```python\ndef f(x):\n    return x + 2\n```"
    assert normalise_answer(commented) == normalise_answer(plain)
    assert normalise_answer(commented) != normalise_answer(other)
    assert normalise_answer("```python\ndef broken(:\n```") != normalise_answer(plain)  # unparsable: text vote


def test_code_ensemble_keeps_a_program_whole():
    program = "```python\ndef f(x):\n    return x + 1\n```"
    replies = [f"Here is the code:\n{program}", f"Step 1...\n{program}\n", f"FINAL ANSWER:\n{program}"]
    _, result = run_seed("code_ensemble", ScriptedResponder(replies))
    assert result.outputs["answer"] == program  # not its last line, "```"
    # a reply that ends in prose is read by its last line, even with code above it
    _, result = run_seed("code_ensemble", ScriptedResponder(["```python\nprint(6 * 7)\n```\nSo it is 42"] * 3))
    assert result.outputs["answer"] == "So it is 42"
