"""Execution and control genes in search: the structural edits that add them, the meta-agent's proposal format,
knapsack pattern components, the inventory and the report; all offline."""

from __future__ import annotations

import json
import random
from typing import Any

import pytest

from masforge.archive.memory import MemoryArchive
from masforge.evaluators.runner import Evaluator
from masforge.evaluators.tasks import Task
from masforge.execution.compile import system_spec
from masforge.genome.schema import Genome
from masforge.genome.validate import agent_signature, problems
from masforge.lm.client import LMClient
from masforge.report.charts import lineage_svg
from masforge.report.data import LineageNode, _top_systems, execution_genes
from masforge.search.budget import SearchBudget
from masforge.search.context import SearchContext
from masforge.search.operators.execution import EXECUTION_EDITS, apply_pattern
from masforge.search.operators.hygiene import structural_name
from masforge.search.operators.proposal import parse_proposal, proposal_json_schema
from masforge.search.operators.structural import (
    EDIT_FAMILIES,
    EDITS,
    change_adapter,
    change_copies,
    change_module,
    change_temperature,
    crossover,
    mutate,
    remove_agent,
    without_agent,
)
from masforge.search.prompts import render
from masforge.search.strategies.knapsack import Knapsack, probe_genome, with_patterns
from masforge.seeds import PATTERNS, Component, load_inventory, load_seed
from masforge.testing import chat_reply

CONFIG = ["io", "cot", "self_consistency", "sample_and_test", "reflexion_code", "step_back", "debate",
          "self_debug", "codet", "escalate"]


def _executes(genome: Genome) -> list[str]:
    return [a.id for a in genome.agents if a.module == "execute"]


# ------------------------------------------------------------------------------------------------ edits


def test_edit_families_cover_every_edit_once() -> None:
    named = [e for family in EDIT_FAMILIES.values() for e in family]
    assert sorted(named) == sorted(EDITS) and len(named) == len(set(named))
    assert set(EDIT_FAMILIES["execution"]) == {"add_test_gate", "add_repair_loop", "add_escalation",
                                               "add_test_writer", "add_escalation_tier", "tune_execution"}


@pytest.mark.parametrize("name", CONFIG)
@pytest.mark.parametrize("edit", sorted(EXECUTION_EDITS))
def test_execution_edits_leave_a_valid_genome_or_decline(name: str, edit: str) -> None:
    for seed in range(3):
        genome = load_seed(name)
        what = EXECUTION_EDITS[edit](genome, random.Random(seed))
        if what is None:
            assert genome == load_seed(name), "a declined edit changes nothing"
            continue
        assert isinstance(what, str) and what
        assert problems(genome) == [], (name, edit, what)
        assert _executes(genome)


def test_a_test_gate_goes_only_where_it_chooses_among_answers() -> None:
    assert EXECUTION_EDITS["add_test_gate"](load_seed("io"), random.Random(0)) is None  # one answer
    assert EXECUTION_EDITS["add_test_gate"](load_seed("sample_and_test"), random.Random(0)) is None  # run_examples
    genome = load_seed("self_consistency")
    assert EXECUTION_EDITS["add_test_gate"](genome, random.Random(0)) == "add test gate check over solver"
    assert ("solver", "check") in genome.topology.edges and ("check", "output") in genome.topology.edges
    assert ("solver", "output") not in genome.topology.edges


def test_a_repair_loop_closes_behind_a_gate_with_the_repairer_listed_first() -> None:
    genome = load_seed("io")
    what = EXECUTION_EDITS["add_repair_loop"](genome, random.Random(1))
    assert what is not None and what.startswith("add repair loop check -> repairer on fail")
    ids = [a.id for a in genome.agents]
    assert ids == ["answerer", "repairer", "check"]
    assert genome.topology.conditions == {"check -> repairer": "fail"}
    assert {("input", "repairer"), ("check", "repairer"), ("repairer", "check")} <= set(genome.topology.edges)
    assert genome.topology.rounds in (2, 3)
    assert genome.agent("repairer").role == "debugger"  # the inventory's code_repairer


def test_an_escalation_samples_the_answerer_with_its_own_prompt() -> None:
    genome = load_seed("io")
    what = EXECUTION_EDITS["add_escalation"](genome, random.Random(0))
    assert what is not None
    sampler = next(a for a in genome.agents if a.id == "answerer_sampled")
    answerer = genome.agent("answerer")
    assert sampler.copies in (3, 5) and sampler.temperature is None
    assert (sampler.role, sampler.instructions, sampler.module) == (answerer.role, answerer.instructions,
                                                                     answerer.module)
    spec = system_spec(genome)
    assert spec.agents["answerer_sampled"].signature == spec.agents["answerer"].signature == "question -> answer"
    assert spec.agents["answerer_sampled"].instructions == spec.agents["answerer"].instructions
    assert genome.topology.conditions == {"first_check -> output": "pass", "first_check -> answerer_sampled": "fail"}


def test_a_test_writer_feeds_the_gates_that_can_use_it() -> None:
    genome = load_seed("escalate")
    assert EXECUTION_EDITS["add_test_writer"](genome, random.Random(0)) == \
        "add test writer tester for first_check, final_check"
    tester = genome.agent("tester")
    assert agent_signature(genome, tester).output_names == ["tests"]
    assert EXECUTION_EDITS["add_test_writer"](load_seed("codet"), random.Random(0)) is None  # it has one
    assert EXECUTION_EDITS["add_test_writer"](load_seed("io"), random.Random(0)) is None  # nothing to choose


def test_other_edits_leave_execute_nodes_alone() -> None:
    for edit in (change_copies, change_temperature, change_adapter, change_module):
        for seed in range(20):
            genome = load_seed("escalate")
            edit(genome, random.Random(seed))
            for node in ("first_check", "final_check"):
                agent = genome.agent(node)
                assert (agent.module, agent.copies, agent.temperature, agent.adapter) == ("execute", 1, None, "auto")


def test_removing_an_agent_drops_the_conditions_of_its_edges() -> None:
    seen = set()
    for seed in range(30):
        result = mutate(load_seed("self_debug"), random.Random(seed), edits={"remove_agent": remove_agent})
        if result is None:
            continue
        child, what = result
        assert problems(child) == []
        seen.add(what)
        if what == "remove debugger":
            assert child.topology.conditions == {}
    assert "remove debugger" in seen


def test_an_ablation_of_the_repairer_is_the_gate_alone() -> None:
    child = without_agent(load_seed("self_debug"), "debugger")
    assert child is not None and problems(child) == []
    assert [a.id for a in child.agents] == ["coder", "check"] and child.topology.conditions == {}


@pytest.mark.parametrize("name", ["self_debug", "codet", "escalate", "io", "self_consistency"])
def test_mutation_and_crossover_with_execution_genes_stay_valid(name: str) -> None:
    for seed in range(25):
        result = mutate(load_seed(name), random.Random(seed))
        assert result is not None
        assert problems(result[0]) == []
    for other in ("cot", "self_debug", "escalate"):
        child = crossover(load_seed(name), load_seed(other), random.Random(3))
        if child is not None:
            assert problems(child[0]) == []


def test_structural_names_say_a_system_checks() -> None:
    assert structural_name(load_seed("codet")) == "direct-x5-test-engineer-check"


# ------------------------------------------------------------------------------------------------ proposals

REPLY = {
    "rationale": "run the code and repair it", "name": "coder-check-fixer",
    "agents": [{"id": "coder", "role": "coder", "instructions": "Write the function.", "module": "predict"},
               {"id": "check", "module": "run_tests", "instructions": "Run the tests.", "copies": 3,
                "temperature": 0.3, "tools": ["python"]},
               {"id": "fixer", "role": "debugger", "instructions": "Fix the code using the report.",
                "module": "predict"}],
    "edges": ["input -> coder", "coder -> check", "check -> output", "input -> fixer", "fixer -> check"],
    "rounds": 3,
}


@pytest.mark.parametrize(("edges", "conditions"), [
    (["check -> fixer"], {"check -> fixer": "fail"}),
    (["check -> fixer"], {"Check->Fixer": "on_fail"}),
    (["check -> fixer"], [{"edge": "check -> fixer", "when": "failed"}]),
    (["check -[fail]-> fixer"], None),
    (["check -> fixer (if fail)"], None),
    ([{"from": "check", "to": "fixer", "when": "fail"}], None),
])
def test_proposals_write_execute_nodes_and_conditions(edges: list[Any], conditions: Any) -> None:
    data = {**REPLY, "edges": [*REPLY["edges"], *edges]}
    if conditions is not None:
        data["conditions"] = conditions
    genome, rationale = parse_proposal("Here it is:\n```json\n" + json.dumps(data) + "\n```", "config")
    assert rationale == "run the code and repair it"
    check = genome.agent("check")
    assert (check.module, check.instructions, check.copies, check.temperature, check.tools) == \
        ("execute", "", 1, None, [])
    assert genome.topology.conditions == {"check -> fixer": "fail"}
    assert "if check fails, fixer runs" in genome.description


def test_a_proposal_names_a_test_writer_by_its_signature_only() -> None:
    data = {**REPLY, "agents": [*REPLY["agents"],
                                {"id": "tester", "role": "test engineer", "instructions": "Write asserts.",
                                 "signature": "question -> tests"}],
            "edges": [*REPLY["edges"], "check -> fixer", "input -> tester", "tester -> check"],
            "conditions": {"check -> fixer": "fail"}}
    data["agents"][0] = {**data["agents"][0], "signature": "question -> plan"}  # ignored, as before
    genome, _ = parse_proposal(json.dumps(data), "config")
    assert genome.agent("tester").signature == "question -> tests"
    assert genome.agent("coder").signature is None


def test_a_proposal_condition_on_a_plain_agent_is_sent_back() -> None:
    from masforge.search.operators.proposal import ProposalParseError

    data = {**REPLY, "edges": [*REPLY["edges"], "check -> fixer", "coder -> fixer"],
            "conditions": {"coder -> fixer": "pass"}}
    with pytest.raises(ProposalParseError, match="'coder -> fixer' starts at 'coder', which is not an execute node"):
        parse_proposal(json.dumps(data), "config")


def test_the_proposal_format_shows_the_genes() -> None:
    schema = proposal_json_schema()
    assert "execute" in schema["properties"]["agents"]["items"]["properties"]["module"]["enum"]
    assert schema["properties"]["conditions"]["additionalProperties"]["enum"] == ["pass", "fail"]
    text = render("meta_format_config", modules="predict", tools="python")
    assert '"module": "execute"' in text and '"conditions": {"check -> fixer": "fail"}' in text


# ------------------------------------------------------------------------------------------------ inventory, knapsack

QUESTION = "Write a python function to add two numbers.\nYour code should pass this test:\nassert add(2, 3) == 5"
RIGHT = "```python\ndef add(a, b):\n    return a + b\n```"
WRONG = "```python\ndef add(a, b):\n    return a - b\n```"


def test_the_inventory_holds_the_patterns_and_their_agents() -> None:
    inventory = {c.id: c for c in load_inventory()}
    patterns = {c.pattern for c in inventory.values() if c.kind == "pattern"}
    assert patterns == set(PATTERNS)
    assert inventory["code_repairer"].agent.role == "debugger"
    assert inventory["test_writer"].agent.signature == "question -> tests"
    with pytest.raises(ValueError, match="a component of kind 'pattern' needs the field 'pattern'"):
        Component(id="x", kind="pattern", description="d", cost=0.0)
    with pytest.raises(ValueError, match="Input should be 'test_gate', 'repair_loop', 'escalation' or 'test_writer'"):
        Component(id="x", kind="pattern", description="d", cost=0.0, pattern="retry")


@pytest.mark.parametrize("pattern", PATTERNS)
def test_every_pattern_probes_around_the_base_solver(pattern: str) -> None:
    comp = Component(id=f"p_{pattern}", kind="pattern", description="d", cost=0.0, pattern=pattern)
    genome, relative = probe_genome(comp, ["question"], ["answer"])
    assert relative and problems(genome) == [] and _executes(genome)
    assert genome.agent("probe_base").copies == (3 if pattern in ("test_gate", "test_writer") else 1)


def test_patterns_compose_in_order_and_skip_what_does_not_fit() -> None:
    genome = load_seed("io")
    composed, applied = with_patterns(genome, [("esc", "escalation"), ("fix", "repair_loop"),
                                               ("gate", "test_gate"), ("tests", "test_writer")])
    assert applied == ["esc", "fix", "tests"]  # nothing answers output directly after the escalation: no gate
    assert composed.components == applied and problems(composed) == []
    assert composed.topology.conditions["final_check -> repairer"] == "fail"
    judged = load_seed("debate")
    assert with_patterns(judged, [("fix", "repair_loop")]) == (judged, [])
    assert apply_pattern(load_seed("debate"), "escalation") is None


def _code_task(n: int = 2) -> Task:
    def correct(outputs: dict[str, Any]) -> float:
        return 1.0 if "a + b" in str(outputs.get("answer", "")) else 0.0

    return Task.from_callable(correct, examples=[{"question": QUESTION, "id": f"q{i}"} for i in range(n)],
                              name="adds")


def _debugger_fixes(messages: list[dict[str, Any]], info: dict[str, Any]) -> str:
    text = "\n".join(str(m.get("content", "")) for m in messages)
    return chat_reply(answer=RIGHT if "debugger" in text else WRONG)


def test_knapsack_values_a_repair_loop_by_what_it_adds_and_composes_it() -> None:
    task = _code_task()
    client = LMClient({"worker": "fake"}, cache=False, responder=_debugger_fixes)
    ctx = SearchContext(task, Evaluator(task, client, limit=2, concurrency=2), client, MemoryArchive(),
                        run_id="t", budget=SearchBudget(max_candidates=4), seed=0)
    components = [
        Component(id="solver", kind="agent", description="solves", cost=0.0003,
                  agent={"role": "solver", "instructions": "Answer the question."}),
        Component(id="repair", kind="pattern", description="repairs", cost=0.0003, pattern="repair_loop"),
        Component(id="gate", kind="pattern", description="gates", cost=0.0, pattern="test_gate"),
    ]
    strategy = Knapsack(budget=0.001, probes=2, rounds=1, components=components)
    strategy.run(ctx)
    assert strategy.values["repair"].value == 1.0  # the base solver alone scores 0
    assert strategy.values["gate"].value == 0.0  # three wrong answers to choose from
    assert strategy.selections[0]["accepted"] == ["repair", "solver"]  # the solver alone is worth 0: the fallback
    composed = [c for c in ctx.population if c.operator == "knapsack_compose"]
    assert composed and composed[0].score == 1.0
    assert composed[0].genome.components == ["solver", "repair"] and _executes(composed[0].genome)


def test_knapsack_probes_patterns_before_its_probe_share_runs_out_on_agents() -> None:
    # HumanEval, 300 calls: probing in inventory order (agents first) spent the probes' share before any pattern.
    task = _code_task()
    client = LMClient({"worker": "fake"}, cache=False, responder=_debugger_fixes)
    ctx = SearchContext(task, Evaluator(task, client, limit=2, concurrency=2), client, MemoryArchive(),
                        run_id="t", budget=SearchBudget(max_candidates=4, max_calls=20), seed=0)
    solvers = [Component(id=f"solver{i}", kind="agent", description="solves", cost=0.0003,
                         agent={"role": "solver", "instructions": f"Answer the question ({i})."}) for i in range(4)]
    repair = Component(id="repair", kind="pattern", description="repairs", cost=0.0003, pattern="repair_loop")
    strategy = Knapsack(budget=0.001, probes=2, rounds=1, components=[*solvers, repair], probe_share=0.5)
    strategy.run(ctx)  # 8 probe calls: the base (2), solver0 (2), then the repair loop (4)
    assert strategy.values["repair"].value == 1.0
    assert strategy.values["solver0"].skipped is None
    assert all((strategy.values[f"solver{i}"].skipped or "").startswith("probes used their share") for i in (1, 2, 3))
    composed = [c for c in ctx.population if c.operator == "knapsack_compose"]
    assert composed and composed[0].score == 1.0 and "repair" in composed[0].genome.components


def test_knapsack_probes_where_the_base_solver_fails_as_well_as_where_it_passes() -> None:
    # HumanEval's first three training problems gave every component 2 of 3, so every pattern was worth 0.
    def correct(outputs: dict[str, Any]) -> float:
        return 1.0 if "a + b" in str(outputs.get("answer", "")) else 0.0

    hard = {"q4", "q5"}
    task = Task.from_callable(correct, name="adds_some_hard", examples=[
        {"question": QUESTION + ("\n(hard)" if f"q{i}" in hard else ""), "id": f"q{i}"} for i in range(6)])

    def easy_unless_hard(messages: list[dict[str, Any]], info: dict[str, Any]) -> str:
        text = "\n".join(str(m.get("content", "")) for m in messages)
        return chat_reply(answer=RIGHT if "debugger" in text or "(hard)" not in text else WRONG)

    def probe(pool: int | None) -> Knapsack:
        client = LMClient({"worker": "fake"}, cache=False, responder=easy_unless_hard)
        ctx = SearchContext(task, Evaluator(task, client, limit=6, concurrency=2), client, MemoryArchive(),
                            run_id="t", budget=SearchBudget(max_candidates=3), seed=0)
        repair = Component(id="repair", kind="pattern", description="repairs", cost=0.0003, pattern="repair_loop")
        strategy = Knapsack(budget=0.001, probes=2, rounds=1, components=[repair], probe_split="validation",
                            probe_pool=pool)
        strategy.run(ctx)
        return strategy

    chosen = probe(None)  # the base runs on 6 examples; one it fails and one it passes are kept
    assert chosen.probe_examples == ["q0", "q4"]
    assert chosen.values["repair"].value == 0.5  # 2 of 2 against the base's 1 of 2
    assert chosen.selections[0]["accepted"] == ["repair"]
    first = probe(2)  # a pool no larger than the probes: the first two examples, both easy
    assert first.probe_examples == ["q0", "q1"] and first.values["repair"].value == 0.0
    with pytest.raises(ValueError, match="probe_pool"):
        Knapsack(probe_pool=0)


# ------------------------------------------------------------------------------------------------ report


def test_the_report_draws_execute_nodes_and_conditional_edges_apart() -> None:
    assert execution_genes(load_seed("self_debug")) == "runs code: check; check -[fail]-> debugger"
    assert execution_genes(load_seed("io")) == ""

    class Archive:
        def genome(self, gid: str) -> Genome:
            return load_seed("escalate")

    [item] = _top_systems(Archive(), [{"id": "e" * 64, "parents": [], "operator": "seed", "seed": True}])
    assert "first_check: execute (runs code against checks; no LM)" in item.agents
    assert item.execute_nodes == ["first_check", "final_check"]
    assert "conditional edges: first_check -[pass]-> output, first_check -[fail]-> sampler" in item.topology

    nodes = [LineageNode("a" * 64, "escalate", 0.5, "seed", "seed", 0, [], level=1),
             LineageNode("b" * 64, "escalate~1", 0.6, "add_repair_loop", "evolve", 1, ["a" * 64], level=0,
                         is_best=True, execution="runs code: check; check -[fail]-> repairer")]
    svg = lineage_svg(nodes)
    assert svg.count("runs code</text>") == 1 and 'class="node best exec"' in svg
    assert "check -[fail]-&gt; repairer" in svg


def test_tune_leaves_execute_nodes_alone():
    """Tune's knobs are LM settings: an execute node has none, so no trial changes it (or makes it invalid)."""
    import optuna

    from masforge.genome.validate import problems
    from masforge.search.strategies import get_strategy
    from masforge.seeds import load_seed

    base = load_seed("escalate")
    tune = get_strategy("tune")
    tune.base = base
    tune._space()
    assert not [k for k in tune._params_of(base) if k.startswith(("first_check", "final_check"))]
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=0))
    for _ in range(12):
        g = tune.build(study.ask())
        assert not problems(g)
        execute = [a for a in g.agents if a.module == "execute"]
        assert execute and all(a.copies == 1 and a.temperature is None for a in execute)


def test_execution_numbers_are_genes_an_edit_tunes() -> None:
    from masforge.search.operators.execution import tune_execution

    seen = set()
    for seed in range(12):
        genome = load_seed("escalate")
        what = tune_execution(genome, random.Random(seed))
        assert what is not None and problems(genome) == []
        seen.add(what.split()[0].split(".")[-1])
        sampler = genome.agent("sampler")
        unchecked = genome.agent("first_check").unchecked
        assert (sampler.copies, sampler.temperature, unchecked) != (5, None, "pass")
    assert seen == {"copies", "temperature", "unchecked"}
    debug = {tune_execution(load_seed("self_debug"), random.Random(seed)).split(" -> ")[0] for seed in range(12)}
    assert debug == {"repair rounds 3", "check.unchecked"}
    assert tune_execution(load_seed("io"), random.Random(0)) is None  # no execution gene


def test_a_graft_keeps_the_execution_part_and_takes_the_other_parents_answering() -> None:
    from masforge.search.operators.execution import answering_part, graft

    cot = load_seed("cot")
    for seed in range(6):
        made = graft(load_seed("escalate"), cot, random.Random(seed))
        assert made is not None
        child, what = made
        assert [a.id for a in child.agents] == [a.id for a in load_seed("escalate").agents]
        assert child.topology == load_seed("escalate").topology
        changed = [a.id for a in child.agents if a.module == "chain_of_thought"]
        assert changed and set(changed) <= {"answerer", "sampler"} and child.agent("sampler").copies == 5
        assert what.split()[0] in ("all", "greedy", "sampled")
    assert graft(cot, load_seed("escalate"), random.Random(0)) is None  # cot has no execution part
    # a repairer answers reports, not the question: it keeps its own way of answering
    assert answering_part(load_seed("self_debug")) == ["coder"]
