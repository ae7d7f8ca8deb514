"""Credit assignment: the operator bandit, failure-kind priors, ablations and the credit they record."""

from __future__ import annotations

import random
from collections import Counter

from masforge.genome.schema import Genome
from masforge.search.context import Proposal
from masforge.search.credit import FAILURE_EDITS, FAILURE_PRIOR, FIRST_REMEDIES, Credit, failure_prior
from masforge.search.operators.structural import EDITS, mutate, mutate_with, without_agent
from masforge.search.population import Candidate
from masforge.seeds import load_seed


def test_the_bandit_draws_a_winning_operator_more_often_and_a_losing_one_less():
    credit = Credit()
    for _ in range(10):
        credit.observe("good", True)
        credit.observe("bad", False)
    rng = random.Random(0)
    picks = Counter(credit.choose(["good", "bad", "new"], rng) for _ in range(300))
    assert picks["good"] > picks["new"] > picks["bad"]
    assert picks["bad"] < 30  # never helped in 10 tries: drawn rarely, but still drawn sometimes


def test_the_bandit_is_deterministic_for_a_seeded_rng():
    credit = Credit()
    credit.observe("a", True)
    draws = [[credit.choose(["a", "b", "c"], random.Random(7)) for _ in range(5)] for _ in range(2)]
    assert draws[0] == draws[1]


def test_failure_kinds_favour_the_edits_that_address_them():
    prior = failure_prior({"exception": 9, "syntax": 2, "unknown_kind": 5})
    assert prior["add_test_gate"] == prior["add_repair_loop"] == FAILURE_PRIOR  # execution feedback, first
    assert prior["add_sampled_branch"] == FAILURE_PRIOR / 2  # addresses failing tests too, without a check
    assert prior["change_adapter"] == FAILURE_PRIOR / 4  # syntax: the second most common failure
    assert all(set(FIRST_REMEDIES[kind]) <= set(FAILURE_EDITS[kind]) for kind in FIRST_REMEDIES)
    assert all(edit in EDITS or edit.startswith("add_") for kind in FAILURE_EDITS for edit in FAILURE_EDITS[kind])
    rng = random.Random(1)
    picks = Counter(Credit().choose(["add_test_gate", "rewire"], rng, prior) for _ in range(300))
    assert picks["add_test_gate"] > 2 * picks["rewire"]
    # A parent failing its tests draws an execution edit most of the time, and every edit keeps a chance.
    names = sorted(EDITS)
    rng = random.Random(2)
    picks = Counter(Credit().choose(names, rng, failure_prior({"exception": 30})) for _ in range(2000))
    execution = sum(picks[e] for e in FIRST_REMEDIES["exception"])
    assert 0.6 * 2000 < execution < 0.95 * 2000 and picks["rewire"] > 0


def test_each_first_remedy_is_tried_once_before_the_bandit_exploits():
    credit = Credit()
    credit.observe("add_repair_loop", True)  # a lucky first win must not starve the other remedies
    choose = credit.chooser(random.Random(4), {"exception": 30})
    names = sorted(EDITS)
    firsts = []
    for _ in range(len(FIRST_REMEDIES["exception"]) - 1):
        name = choose(names)
        credit.note_proposed(name)  # proposed (being scored) counts as tried
        firsts.append(name)
    assert sorted(firsts) == sorted(set(FIRST_REMEDIES["exception"]) - {"add_repair_loop"})
    # All tried: back to Thompson sampling, which still draws every edit sometimes.
    picks = Counter(choose(names) for _ in range(500))
    assert len(picks) > 4
    # A remedy a genome cannot take is not forced: the untried rule only picks among the names offered.
    fresh = Credit().chooser(random.Random(0), {"exception": 30})
    assert fresh(["rewire", "add_test_gate"]) == "add_test_gate" and fresh(["rewire"]) == "rewire"


def test_mutate_with_a_chooser_reports_the_edit_and_uniform_mutate_is_unchanged():
    io = load_seed("io")
    out = mutate_with(io, random.Random(3), choose=lambda names: "add_sampled_branch")
    assert out is not None and out.edit == "add_sampled_branch" and len(out.genome.agents) == 2
    # The uniform draw consumes the RNG exactly as before the chooser existed (resume replays depend on it).
    a, b = random.Random(5), random.Random(5)
    plain = mutate(io, a)
    again = mutate_with(io, b)
    assert plain is not None and again is not None and plain[0].id == again.genome.id
    assert a.getstate() == b.getstate()


def test_an_edit_that_cannot_apply_is_not_drawn_again_for_that_genome():
    io = load_seed("io")  # one agent: remove_agent cannot apply
    tried: list[str] = []

    def choose(names: list[str]) -> str:
        pick = "remove_agent" if "remove_agent" in names else "change_copies"
        tried.append(pick)
        return pick

    out = mutate_with(io, random.Random(0), choose=choose)
    assert out is not None and out.edit == "change_copies" and tried == ["remove_agent", "change_copies"]


def test_without_agent_is_an_ablation_that_keeps_the_system_valid():
    debate = load_seed("debate")
    children = [without_agent(debate, agent.id) for agent in debate.agents]
    assert children[-1] is None  # the judge: the system cannot answer without it
    for agent, child in zip(debate.agents[:-1], children[:-1], strict=True):
        assert child is not None and agent.id not in {a.id for a in child.agents}
        assert "Ablation" in child.description
    assert without_agent(load_seed("io"), "answerer") is None  # the only agent


def _cand(genome: Genome, values: dict[str, float], **kw: object) -> Candidate:
    score = sum(values.values()) / len(values)
    return Candidate(genome=genome, score=score, fitness=score, example_values=values, **kw)  # type: ignore[arg-type]


def test_ablations_are_proposed_once_per_incumbent_and_credit_its_agents():
    g = load_seed("debate")
    inc = _cand(g, {"a": 1.0, "b": 1.0, "c": 0.0})
    credit = Credit()
    props = credit.ablations(inc)
    assert props and all(p.operator == "ablate" and p.parents == [inc.id] for p in props)
    assert credit.ablations(inc) == []  # once per incumbent
    p = props[0]
    weaker = _cand(p.genome, {"a": 1.0, "b": 0.0, "c": 0.0})
    credit.credit_proposal(p, [inc], weaker, new=True)
    ablated = p.info["ablated"]
    assert credit.agent_credit(inc.id) == {ablated: 1 / 3}
    assert credit.summary()["operators"]["ablate"]["pulls"] == 1


def test_an_operator_wins_only_with_a_fitter_child_scored_on_the_whole_set():
    parent = _cand(load_seed("io"), {"a": 0.0, "b": 1.0})
    credit = Credit()
    child = _cand(load_seed("cot"), {"a": 1.0, "b": 1.0}, llm_calls=3, cache_hits=1)
    credit.credit_proposal(Proposal(child.genome, [parent.id], "structural_mutate", info={"arm": "add_test_gate"}),
                           [parent], child, new=True)
    dropped = _cand(load_seed("self_refine"), {"a": 1.0, "b": 1.0}, pruned=True)
    credit.credit_proposal(Proposal(dropped.genome, [parent.id], "structural_mutate", info={"arm": "rewire"}),
                           [parent], dropped, new=True)
    ops = credit.summary()["operators"]
    assert ops["add_test_gate"]["wins"] == 1 and ops["add_test_gate"]["new_calls"] == 3
    assert ops["add_test_gate"]["cached_calls"] == 1
    assert ops["rewire"]["wins"] == 0 and ops["rewire"]["pulls"] == 1
