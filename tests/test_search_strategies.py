"""Knapsack composition, two-time-scale co-evolution, optuna tuning and the surrogate model, on fake LMs
with synthetic objectives (fast, offline)."""

from __future__ import annotations

import math
import random
from typing import Any

import pytest

from masforge.archive.memory import MemoryArchive
from masforge.errors import ConfigError
from masforge.evaluators.runner import Evaluator
from masforge.evaluators.tasks import Task
from masforge.genome.schema import Genome
from masforge.lm.client import LMClient
from masforge.lm.fake import output_fields
from masforge.search.budget import SearchBudget
from masforge.search.context import Proposal, SearchContext
from masforge.search.population import Candidate
from masforge.search.strategies import Strategy, get_strategy
from masforge.search.strategies.coevolve import Coevolve, instruction_edits, parse_instructions
from masforge.search.strategies.knapsack import Knapsack, OnlineKnapsack, agent_role, compose, zcl_threshold
from masforge.search.strategies.tune import Tune
from masforge.search.surrogate import Surrogate, SurrogateFilter
from masforge.seeds import Component, load_seed
from masforge.testing import chat_reply


def _system(messages) -> str:
    return next((str(m.get("content", "")) for m in messages if m.get("role") == "system"), "")


def _reply(messages, answer: str) -> str:
    """A well-formed ChatAdapter reply giving ``answer`` to the answer field and filler elsewhere."""
    fields = {}
    for name, typ in output_fields(messages):
        if name == "answer":
            fields[name] = answer
        elif typ.startswith("bool"):
            fields[name] = "True"
        else:
            fields[name] = "some notes"
    return chat_reply(**fields) if fields else "plain text"


def _task(target: str, name: str = "synthetic", n: int = 2) -> Task:
    def metric(outputs: dict[str, Any]) -> float:
        return 1.0 if str(outputs.get("answer", "")).strip() == target else 0.0

    metric.__name__ = name
    return Task.from_callable(metric, examples=[{"question": f"question {i}?", "id": f"q{i}"} for i in range(n)],
                              name=name)


def _ctx(task: Task, responder, *, max_candidates: int = 10, archive: Any = None, seed: int = 0) -> SearchContext:
    client = LMClient({"worker": "fake", "meta": "fake"}, cache=False, responder=responder)
    evaluator = Evaluator(task, client, limit=2, concurrency=2)
    return SearchContext(task, evaluator, client, archive if archive is not None else MemoryArchive(),
                         run_id="test", budget=SearchBudget(max_candidates=max_candidates), seed=seed)


# ---------------------------------------------------------------------------------------------- knapsack


def test_zcl_threshold_shape():
    upper, lower = 4.0, 1.0
    beta = 1 / (1 + math.log(upper / lower))
    assert zcl_threshold(0.0, upper, lower) == pytest.approx(lower)
    assert zcl_threshold(beta, upper, lower) == pytest.approx(lower)
    assert zcl_threshold(1.0, upper, lower) == pytest.approx(upper)
    values = [zcl_threshold(z / 20, upper, lower) for z in range(21)]
    assert values == sorted(values)  # the bar only rises as the budget fills
    assert zcl_threshold(0.7, 2.0, 2.0) == 2.0  # one density seen: a flat bar


def test_online_knapsack_rule_on_a_hand_made_sequence():
    ks = OnlineKnapsack(capacity=10.0, upper=4.0, lower=1.0)
    offers = [
        ("a", 4.0, 2.0, True),    # density 2 >= psi(0) = 1
        ("b", 1.0, 1.0, True),    # density 1 >= psi(0.2) = 1 (still the flat part)
        ("c", 5.0, 5.0, True),    # density 1 >= psi(0.3) = 1
        ("d", 2.0, 1.0, False),   # density 2 < psi(0.8) = (4e)^0.8 / e ~ 2.48
        ("e", 4.0, 1.0, True),    # density 4 >= 2.48
        ("f", 100.0, 2.0, False),  # would use 11 > 10: never exceed the budget
        ("g", 1.0, 0.0, True),    # free and useful
        ("h", 0.0, 0.0, False),   # free but useless
    ]
    for key, value, weight, expected in offers:
        assert ks.offer(key, value, weight) is expected, (key, ks.decisions[-1])
    assert ks.accepted == ["a", "b", "c", "e", "g"]
    assert ks.used == pytest.approx(9.0)
    assert zcl_threshold(0.8, 4.0, 1.0) == pytest.approx((4 * math.e) ** 0.8 / math.e)


def test_online_knapsack_never_exceeds_capacity():
    rng = random.Random(7)
    for _ in range(200):
        cap = rng.uniform(0.5, 5.0)
        items = [(rng.uniform(0, 3), rng.uniform(0, 2)) for _ in range(15)]
        dens = [v / w for v, w in items if v > 0 and w > 0]
        ks = OnlineKnapsack(cap, max(dens), min(dens))
        for i, (v, w) in enumerate(items):
            ks.offer(str(i), v, w)
        assert ks.used <= cap + 1e-9
        assert sum(items[int(k)][1] for k in ks.accepted) == pytest.approx(ks.used)


def _component(cid: str, cost: float, instructions: str, **agent: Any) -> Component:
    return Component(id=cid, kind="agent", description=f"test component {cid}", cost=cost,
                     agent={"role": cid, "instructions": instructions, **agent})


def _inventory() -> list[Component]:
    return [
        _component("good_solver", 0.4, "Solve it. GOOD"),
        _component("bad_solver", 0.1, "Solve it badly."),
        _component("pricey_solver", 0.9, "Solve it expensively. GOOD", module="chain_of_thought"),
        _component("checker", 0.3, "Check the proposed answer in messages. GOOD"),
        _component("planner", 0.2, "Plan the steps.", signature="question -> plan"),
        _component("broken", 0.1, "Solve it. BREAKME"),
        Component(id="calculator", kind="tool", description="arithmetic", cost=0.0, tool="calculator"),
    ]


def _knapsack_responder(messages, info=None) -> str:
    system = _system(messages)
    if "BREAKME" in system:
        return "garbage that no adapter can parse"
    return _reply(messages, "42" if "GOOD" in system else "7")


def test_knapsack_respects_budget_and_blacklists_broken_component():
    task = _task("42", "knap")
    ctx = _ctx(task, _knapsack_responder, max_candidates=8)
    budget = 1.0
    strategy = Knapsack(budget=budget, probes=2, rounds=4, components=_inventory(), surrogate=True)
    strategy.run(ctx)
    costs = {c.id: c.cost for c in _inventory()}

    assert "broken" in strategy.blacklist and "errors on" in strategy.blacklist["broken"]
    assert strategy.values["good_solver"].value == 1.0 and strategy.values["bad_solver"].value == 0.0
    assert strategy.values["checker"].value == 1.0  # a helper is worth its gain over the base solver
    assert strategy.values["planner"].value == 0.0
    assert len(strategy.selections) == 4
    for sel in strategy.selections:
        assert sum(costs[c] for c in sel["accepted"]) <= budget + 1e-12
        assert sel["used"] == pytest.approx(sum(costs[c] for c in sel["accepted"]))
        assert "broken" not in sel["accepted"]
    composed = [c for c in ctx.population if c.operator == "knapsack_compose"]
    assert composed
    for cand in composed:
        assert sum(costs[c] for c in cand.genome.components if c in costs) <= budget + 1e-12
        assert "broken" not in cand.genome.components
    assert max(c.score for c in composed) == 1.0
    # Best value per dollar first: checker (1.0 / 0.3), then good_solver (1.0 / 0.4); pricey_solver never fits next
    # to them.
    assert strategy.selections[0]["accepted"] == ["checker", "good_solver"]
    assert strategy.report()["surrogate"]["checked"] >= 0


def test_knapsack_probes_leave_half_of_a_small_call_budget_to_compose_with():
    def run(share: float | None) -> Knapsack:
        ctx = _ctx(_task("42", "knap_calls"), _knapsack_responder, max_candidates=6)
        ctx.budget = SearchBudget(max_candidates=6, max_calls=20)  # 16 for the search: probes may make 8 calls
        strategy = Knapsack(budget=1.0, probes=2, rounds=1, components=_inventory(), probe_share=share)
        strategy.run(ctx)
        assert [c for c in ctx.population if c.operator == "knapsack_compose"]
        return strategy

    capped = run(0.5)
    skipped = {cid for cid, v in capped.values.items() if (v.skipped or "").startswith("probes used their share")}
    assert skipped == {"checker", "planner", "broken"}  # the base and three solvers made 2 calls each
    assert capped.values["good_solver"].value == 1.0
    uncapped = run(None)
    assert not [v for v in uncapped.values.values() if v.skipped] and "broken" in uncapped.blacklist
    with pytest.raises(ValueError, match="probe_share"):
        Knapsack(probe_share=1.5)


def test_knapsack_budget_too_small_for_anything():
    task = _task("42", "knap_small")
    ctx = _ctx(task, _knapsack_responder, max_candidates=5)
    strategy = Knapsack(budget=0.05, probes=1, rounds=2, components=_inventory())
    strategy.run(ctx)
    assert all(sel["accepted"] == [] and sel["genome"] is None for sel in strategy.selections)
    assert not [c for c in ctx.population if c.operator == "knapsack_compose"]


def test_compose_layers_and_roles():
    inv = {c.id: c for c in _inventory()}
    assert agent_role(inv["planner"].agent, ["answer"]) == "pre"
    assert agent_role(inv["checker"].agent, ["answer"]) == "post"
    assert agent_role(inv["good_solver"].agent, ["answer"]) == "solver"
    judge = _component("judge", 0.2, "Compare the candidate answers and pick the best.")
    g = compose([inv["planner"], inv["good_solver"], inv["bad_solver"], judge], ["question"], ["answer"])
    assert g is not None
    assert g.topology.aggregation == "judge" and g.topology.judge == "judge"
    assert ("planner", "good_solver") in g.topology.edges
    assert set(g.components) == {"planner", "good_solver", "bad_solver", "judge"}
    assert compose([inv["planner"]], ["question"], ["answer"]) is None  # nobody answers


# ---------------------------------------------------------------------------------------------- coevolve


def test_parse_instructions():
    assert parse_instructions("<instructions>Use the ZEBRA method always.</instructions>", "old") == (
        "Use the ZEBRA method always.")
    assert parse_instructions("no tags here at all", "old") is None
    assert parse_instructions("<instructions>short</instructions>", "old") is None
    assert parse_instructions("<instructions>Think step by step.</instructions>", "Think  step by step.") is None
    assert parse_instructions("<think>x</think><instructions>Careful and precise work.</instructions>", "a")
    assert len(instruction_edits()) >= 5


def test_coevolve_reflective_rewrite_improves_instructions():
    def responder(messages, info=None):
        user = str(messages[-1].get("content", ""))
        if "rewrite the instructions of agent" in user:
            assert "Examples it got wrong" in user and "expected" in user  # the failures are shown
            return "Here you go:\n<instructions>Think step by step with the ZEBRA method.</instructions>"
        return _reply(messages, "yes" if "ZEBRA" in _system(messages) else "no")

    task = _task("yes", "zebra")
    ctx = _ctx(task, responder, max_candidates=3)
    ctx.submit(load_seed("cot"))
    strategy = Coevolve(slow_every=3)
    strategy.run(ctx)
    best = ctx.best(1)[0]
    assert best.score == 1.0 and ctx.population[0].score == 0.0
    assert best.operator == "coevolve_rewrite"
    assert "ZEBRA" in best.genome.agents[0].instructions
    assert strategy.stats["rewrites"] >= 1 and strategy.stats["improved_fast"] >= 1


def test_coevolve_falls_back_to_instruction_edits_and_edits_topology():
    def responder(messages, info=None):
        user = str(messages[-1].get("content", ""))
        if "rewrite the instructions of agent" in user:
            return "Sorry, I cannot do that."  # unusable: no <instructions> block
        return _reply(messages, "yes" if "double-check" in _system(messages) else "no")

    task = _task("yes", "fallback")
    ctx = _ctx(task, responder, max_candidates=20)
    ctx.submit(load_seed("cot"))
    # the LM-topology edits only: this test is about the instruction fallback (the execution edits have their own)
    edits = ["add_agent", "add_sampled_branch", "remove_agent", "rewire", "change_rounds", "change_aggregation",
             "change_module", "change_copies"]
    strategy = get_strategy("coevolve", slow_every=2, surrogate=True, topology_edits=edits)
    strategy.run(ctx)
    assert strategy.stats["meta_unusable"] >= 1 and strategy.stats["fallbacks"] >= 1
    assert strategy.stats["topology"] >= 1
    assert any(c.operator == "coevolve_topology" for c in ctx.population)
    best = ctx.best(1)[0]
    assert best.score == 1.0 and best.operator == "coevolve_edit"


# ---------------------------------------------------------------------------------------------- tune


def _tune_responder(messages, info=None):
    info = info or {}
    # Good answers need a low temperature and a copy index >= 2, i.e. enough copies.
    ok = float(info.get("temperature", 1.0)) <= 0.35 and int(info.get("sample", 0)) % 1000 >= 2
    return _reply(messages, "good" if ok else "bad")


def _tune_base() -> Genome:
    base = load_seed("cot")
    base.agents[0].temperature = 1.0
    return base


def test_tune_finds_better_knobs():
    task = _task("good", "knobs")
    ctx = _ctx(task, _tune_responder, max_candidates=16)
    base_cand = ctx.submit(_tune_base())
    assert base_cand is not None and base_cand.score == 0.0
    strategy = Tune(knobs=["temperature", "copies", "aggregation"], startup_trials=4)
    strategy.run(ctx)
    best = ctx.best(1)[0]
    assert best.score == 1.0 and best.operator == "tune"
    agent = best.genome.agents[0]
    assert (agent.temperature or 0.0) <= 0.35 and agent.copies >= 3
    report = strategy.report()
    assert report["trials"] >= ctx.evaluated - 1 and report["told_free"] >= 1  # the base trial came free


def test_tune_does_not_pay_for_a_trial_expected_to_cost_more_than_its_share_of_the_call_budget():
    def run(share: float | None) -> tuple[Tune, list[int]]:
        ctx = _ctx(_task("good", "costly"), _tune_responder, max_candidates=8)
        ctx.budget = SearchBudget(max_candidates=8, max_calls=10)  # 8 for the search: a trial may cost 4 calls
        ctx.submit(_tune_base())
        strategy = Tune(knobs=["copies"], max_copies=5, startup_trials=20, max_trial_share=share)
        strategy.run(ctx)
        return strategy, [c.genome.agents[0].copies for c in ctx.population if c.operator == "tune"]

    capped, copies = run(0.5)
    assert copies and max(copies) <= 2  # 2 examples x 3 copies = 6 expected calls: more than half of 8
    assert capped.too_costly >= 1 and capped.report()["too_costly"] == capped.too_costly
    free, copies = run(None)
    assert max(copies) >= 3 and free.too_costly == 0
    with pytest.raises(ValueError, match="max_trial_share"):
        Tune(max_trial_share=0.0)


class RecordingArchive(MemoryArchive):
    def __init__(self) -> None:
        super().__init__()
        self.evaluated: list[str] = []

    def add_result(self, genome_id: str, result: Any) -> None:
        self.evaluated.append(genome_id)
        super().add_result(genome_id, result)


def test_tune_study_resumes_from_sqlite_without_repeating(tmp_path):
    task = _task("good", "resume")
    storage = str(tmp_path / "run" / "optuna.sqlite3")
    archive = RecordingArchive()
    knobs = ["temperature", "copies", "aggregation"]

    ctx1 = _ctx(task, _tune_responder, max_candidates=6, archive=archive)
    ctx1.submit(_tune_base())
    first = Tune(storage=storage, knobs=knobs, startup_trials=20)
    first.run(ctx1)
    n1 = len(first.study.trials)
    paid1 = len(archive.evaluated)
    evaluated1 = set(archive.evaluated)
    assert (tmp_path / "run" / "optuna.sqlite3").exists() and n1 >= 5

    ctx2 = _ctx(task, _tune_responder, max_candidates=6, archive=archive, seed=0)
    ctx2.submit(_tune_base())  # restored from the archive: nothing paid
    second = Tune(storage=storage, knobs=knobs, startup_trials=20)
    second.run(ctx2)
    assert second.base is not None and second.base.id == _tune_base().id  # the space was read back
    trials = second.study.trials
    assert len(trials) > n1 and [t.number for t in trials] == list(range(len(trials)))
    evaluated2 = archive.evaluated[paid1:]
    assert evaluated2 and not set(evaluated2) & evaluated1  # no trial of run 1 was paid for again
    assert ctx2.reused >= 1


def test_tune_multi_objective_uses_nsga2(tmp_path):
    task = _task("good", "mo")
    ctx = _ctx(task, _tune_responder, max_candidates=5)
    ctx.submit(_tune_base())
    strategy = Tune(multi_objective=True, knobs=["temperature", "copies"], storage=str(tmp_path / "mo.sqlite3"))
    strategy.run(ctx)
    assert type(strategy.study.sampler).__name__ == "NSGAIISampler"
    assert len(strategy.study.directions) == 2 and strategy.report()["best"]


# ---------------------------------------------------------------------------------------------- surrogate


def _cands() -> list[Candidate]:
    out = []
    for copies in range(1, 6):
        for temp in (0.0, 1.0):
            g = load_seed("cot")
            g.agents[0].copies, g.agents[0].temperature = copies, temp
            out.append(Candidate(genome=g, score=0.2 * copies, fitness=0.2 * copies))
    return out


def _probe(copies: int) -> Genome:
    g = load_seed("cot")
    g.agents[0].copies, g.agents[0].temperature = copies, 0.3
    return g


def test_surrogate_fits_predicts_and_reports_accuracy():
    s = Surrogate(min_samples=5, seed=0)
    assert not s.ready and s.predict(_probe(3)) is None and not s.should_skip(_probe(1), 1.0)
    assert not s.fit(_cands()[:3])  # too few
    assert s.fit(_cands())
    assert s.predict(_probe(5)) > 0.8 and s.predict(_probe(1)) < 0.4
    acc = s.accuracy()
    assert acc["n"] == 10 and acc["method"] == "loo"
    assert acc["mae"] < 0.2 and acc["spearman"] > 0.7
    assert s.should_skip(_probe(1), best_score=1.0, margin=0.1)
    assert not s.should_skip(_probe(5), best_score=1.0, margin=0.1)
    boost = Surrogate(model="boosting", min_samples=5)
    assert boost.fit(_cands()) and boost.predict(_probe(5)) > boost.predict(_probe(1))


def test_surrogate_filter_skips_hopeless_and_counts():
    task = _task("x", "surr")
    ctx = _ctx(task, _tune_responder)
    for c in _cands():
        ctx.population.append(c)
        ctx.by_id[c.id] = c
    filt = SurrogateFilter(Surrogate(min_samples=5), margin=0.1, explore=0.0)
    known = ctx.population[0].genome
    props = [Proposal(_probe(1)), Proposal(_probe(5)), Proposal(known)]
    kept = filt.filter(ctx, props)
    assert [p.genome.id for p in kept] == [_probe(5).id, known.id]  # known genomes are free: never skipped
    assert filt.stats()["skipped"] == 1 and filt.stats()["checked"] == 2


def test_any_strategy_screens_its_proposals_through_the_surrogate():
    """surrogate=True is an option of every strategy: a hopeless proposal is screened out before it is paid."""
    task = _task("x", "surr")
    ctx = _ctx(task, _tune_responder, max_candidates=len(_cands()) + 1)
    for c in _cands():
        ctx.population.append(c)
        ctx.by_id[c.id] = c
        ctx.evaluated += 1

    class Fixed(Strategy):
        name = "fixed"
        max_idle_steps = 1

        def step(self, ctx):
            return [Proposal(_probe(1)), Proposal(_probe(5))]

    strategy = Fixed(surrogate=True)
    strategy.filter = SurrogateFilter(Surrogate(min_samples=5), explore=0.0)
    strategy.run(ctx)
    assert strategy.filter.skipped == 1
    assert ctx.known(_probe(1)) is None  # screened out: never evaluated
    assert ctx.known(_probe(5)) is not None
    with pytest.raises(ConfigError, match="strategy 'random': option 'surrogate_margin'"):
        get_strategy("random", surrogate=True, surrogate_margin=-1)
