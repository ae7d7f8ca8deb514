"""The prompt adapter as a gene (structural edit, meta-agent schema, tune), and the meta-agent's proposal
hygiene: descriptive names and instructions that do not copy task examples."""

from __future__ import annotations

import json
import random
from typing import Any

import pytest

from masforge.archive.memory import MemoryArchive
from masforge.evaluators.runner import Evaluator
from masforge.evaluators.tasks import Task
from masforge.genome.schema import PICKING_AGGREGATIONS
from masforge.lm.client import LMClient
from masforge.search.budget import SearchBudget
from masforge.search.context import SearchContext
from masforge.search.operators import structural
from masforge.search.operators.hygiene import (
    copied_example,
    descriptive_name,
    placeholder_instructions,
    structural_name,
)
from masforge.search.operators.meta import MetaAgent
from masforge.search.operators.proposal import parse_proposal, proposal_json_schema
from masforge.search.strategies.tune import Tune
from masforge.seeds import load_seed

QUESTIONS = [
    "Write a function to count lists within a list by converting each list to a tuple.",
    "Write a function to find the maximum product of two integers in a given array of numbers.",
    "Write a function to reverse the words of a sentence while keeping the punctuation in place.",
    "Write a function to check whether a string is a palindrome ignoring case and spaces entirely.",
]


def _ctx(meta_reply: Any, task_name: str = "mbpp") -> tuple[SearchContext, MetaAgent]:
    task = Task.from_callable(lambda outputs: 0.0, examples=[{"question": q} for q in QUESTIONS], name=task_name)

    def route(messages: list[dict[str, Any]], info: dict[str, Any]) -> str:
        if info.get("model") == "fake:meta":
            return meta_reply(messages) if callable(meta_reply) else meta_reply
        return "ok"

    client = LMClient({"worker": "fake", "meta": "fake:meta"}, cache=False, responder=route)
    ctx = SearchContext(task, Evaluator(task, client, limit=4), client, MemoryArchive(), run_id="t",
                        budget=SearchBudget(max_candidates=4))
    return ctx, MetaAgent(client, max_repairs=1)


def _proposal(name: str, instructions: str, **agent: Any) -> str:
    return json.dumps({"rationale": "r", "name": name, "agents": [
        {"id": "solver", "role": "coder", "instructions": instructions, "module": "chain_of_thought", **agent}],
        "edges": ["input -> solver", "solver -> output"]})


def test_structural_edit_changes_an_agents_adapter():
    child, what = structural.mutate(load_seed("cot"), random.Random(0), edits={"a": structural.change_adapter})
    assert ".adapter auto ->" in what
    assert child.agents[0].adapter in ("chat", "json", "plain")


def test_structural_children_describe_themselves_not_their_parent():
    sc, io = load_seed("self_consistency"), load_seed("io")
    child, what = structural.mutate(sc, random.Random(0), edits={"c": structural.change_copies})
    assert child.description != sc.description and "From self-consistency" in child.description
    assert f"{child.agents[0].copies} copies" in child.description or child.agents[0].copies == 1
    cross = next(r for seed in range(20) if (r := structural.crossover(sc, io, random.Random(seed))))
    assert cross[0].description.startswith("1 agent: ") and "from io" in cross[0].description
    assert cross[1] == f"agents solver (as answerer) from {io.short_id}"  # matched by position, not by id


def test_outline_reads_wiring_copies_and_aggregation():
    from masforge.genome.outline import outline

    assert outline(load_seed("self_consistency")) == ("1 agent: solver the careful solver (chain of thought; "
                                                      "5 copies); the output is a majority vote over solver.")
    assert "coder the programmer" in outline(load_seed("reflexion_code"))
    assert "reading coder" in outline(load_seed("reflexion_code"))
    assert outline(load_seed("io")) == "1 agent: answerer (predict); the output is answerer's answer."


def test_meta_agent_schema_and_parser_carry_the_adapter():
    assert proposal_json_schema()["properties"]["agents"]["items"]["properties"]["adapter"]["enum"] == [
        "auto", "chat", "json", "plain"]
    genome, _ = parse_proposal(_proposal("plain-coder", "Write the code.", adapter="plain"), "config")
    assert genome.agents[0].adapter == "plain"
    genome, _ = parse_proposal(_proposal("x-coder", "Write the code.", adapter="XML"), "config")
    assert genome.agents[0].adapter == "auto"  # an unknown format name is not worth a repair round


def test_tune_searches_the_adapter():
    tune = Tune(knobs=["adapter"])
    tune.base = load_seed("cot")
    tune._space()
    assert set(tune._adapters["solver"]) == {"auto", "chat", "json", "plain"}
    assert tune._params_of(tune.base) == {"solver.adapter": "auto"}


def test_names_that_claim_structure_the_system_lacks_are_replaced():
    # seen from the 0.5B meta-agent: the format's example name "solver-x3-vote" on one chain of thought
    cot, sc = load_seed("cot"), load_seed("self_consistency")
    assert descriptive_name("solver-x3-vote", cot) == structural_name(cot) == "careful-solver"
    assert descriptive_name("solver-r2", cot) == "careful-solver"
    assert descriptive_name("solver-judge", cot) == "careful-solver"
    assert descriptive_name("solver-x5-vote", sc) == "solver-x5-vote"  # true of self-consistency
    one_voter = sc.model_copy(deep=True)
    one_voter.agents[0].copies = 1
    assert descriptive_name("solver-vote", one_voter) == structural_name(one_voter) == "careful-solver"


def test_names_that_only_repeat_the_task_are_replaced_by_what_the_system_is():
    sc = load_seed("self_consistency")
    assert structural_name(sc) == "careful-solver-x5-vote"
    assert descriptive_name("mbpp", sc, task_name="mbpp") == "careful-solver-x5-vote"
    assert descriptive_name("MBPP solver", sc, task_name="mbpp") == "careful-solver-x5-vote"
    assert descriptive_name("plan then code", sc, task_name="mbpp") == "plan-then-code"
    assert descriptive_name("plan then code", sc, task_name="mbpp", taken={"plan-then-code"}) == \
        "careful-solver-x5-vote"
    assert structural_name(load_seed("debate")) == "mathematician-skeptic-pragmatist-judge-r2"
    # seen from the 0.5B meta-agent: the format's placeholder, and a sentence about one validation problem
    for echoed in ("what-this-system-does-e-g-plan-then-solve-or-so", "what-the-system-does-e-g-plan-then-solve-or-sol",
                   "the-system-correctly-completes-the-function-sort"):
        assert descriptive_name(echoed, sc, task_name="humaneval") == "careful-solver-x5-vote", echoed


def test_copying_a_task_example_is_detected_but_boilerplate_is_not():
    genome, _ = parse_proposal(_proposal("x", "Count lists within a list by converting each list to a tuple."),
                               "config")
    assert copied_example(genome, QUESTIONS) == "count lists within a list by converting each list to a tuple"
    general, _ = parse_proposal(_proposal("x", "Write a function to solve the task; test it mentally."), "config")
    assert copied_example(general, QUESTIONS) is None  # "write a function to" is in every example


def test_a_paraphrase_that_keeps_one_problems_rare_words_is_a_copy_but_common_phrasing_is_not():
    # seen from the 0.5B meta-agent on HumanEval: a failing problem's "numbers sorted from smallest to largest"
    questions = [*QUESTIONS, "Return the string with numbers sorted from smallest to largest.",
                 "Write a function to return a list of integers that are even.",
                 "Write a function to return a list of integers that are prime."]
    copied, _ = parse_proposal(_proposal("x", "Parse the input string and sort numbers from smallest to largest."),
                               "config")
    assert copied_example(copied, questions) == "from smallest to largest"
    general, _ = parse_proposal(_proposal("x", "Make sure the function returns a list of integers in order."),
                                "config")
    assert copied_example(general, questions) is None


# All seen from the 0.5B meta-agent: a validation problem copied into the instructions, the proposal format's
# own placeholder kept as the instructions (those proposals scored 0), and a parent's name as the instructions.
@pytest.mark.parametrize(("bad", "counter"), [
    ("Count lists within a list by converting each list to a tuple.", "copied_examples"),
    ("what this agent does", "placeholder_instructions"),
    ("chain-of-thoughtxio~76f123", "placeholder_instructions"),
])
def test_meta_agent_sends_unusable_instructions_back_for_repair_and_names_the_design(bad, counter):
    good = "Plan the function, write it, then check it against the examples in the question."
    replies = iter([_proposal("mbpp", bad), _proposal("mbpp", good)])
    ctx, meta = _ctx(lambda messages: next(replies))
    prop = meta.invent(ctx, from_scratch=True)
    assert prop is not None and prop.genome.agents[0].instructions == good
    assert prop.genome.name == "coder"
    # the archive says what the design is before why the meta-agent liked it
    assert prop.genome.description == ("1 agent: solver the coder (chain of thought); the output is solver's answer. "
                                       "Rationale: r")
    assert meta.counters[counter] == 1
    assert placeholder_instructions(prop.genome) is None


def test_a_sampled_branch_keeps_the_original_answer_among_the_picked_ones():
    io = load_seed("io")
    child, what = structural.mutate(io, random.Random(0), edits={"b": structural.add_sampled_branch})
    original, branch = child.agents
    assert original == io.agents[0]  # the greedy answerer is untouched
    assert branch.module == original.module and branch.instructions == original.instructions
    assert branch.copies in (3, 5) and branch.temperature is None  # sampled at the runtime's temperature
    assert {("input", branch.id), (branch.id, "output"), ("answerer", "output")} <= set(child.topology.edges)
    assert child.topology.aggregation in PICKING_AGGREGATIONS
    assert what == f"add {branch.copies} samples of answerer beside it, {child.topology.aggregation}"


def test_a_sampled_branch_copies_an_answering_agent_never_the_judge():
    for seed in range(10):
        genome = load_seed("quality_diversity")
        assert genome.topology.aggregation == "judge"
        child, _ = structural.mutate(genome, random.Random(seed), edits={"b": structural.add_sampled_branch})
        judge = child.topology.judge
        new = [a for a in child.agents if a.id not in {b.id for b in genome.agents}]
        assert len(new) == 1 and not new[0].id.startswith(judge)
        assert child.topology.aggregation == "judge" and (new[0].id, "output") in child.topology.edges
