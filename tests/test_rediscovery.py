"""A design the search already holds, or a shipped seed rebuilt under other agent names, is recognised before it
is paid for: structure ids, duplicates up to renaming, and rediscovered seeds marked as such (offline)."""

from __future__ import annotations

import json

from masforge.archive.memory import MemoryArchive
from masforge.evaluators.runner import Evaluator
from masforge.evaluators.tasks import Task
from masforge.genome.io import dump_genome, parse_genome_text
from masforge.genome.schema import Genome
from masforge.lm.client import LMClient
from masforge.lm.fake import output_fields
from masforge.search.budget import SearchBudget
from masforge.search.context import Proposal, SearchContext, library_twin
from masforge.search.operators.execution import insert_escalation
from masforge.seeds import load_seed
from masforge.testing import chat_reply


def _renamed(genome: Genome, names: dict[str, str]) -> Genome:
    """``genome`` with its agents renamed (edges, conditions, judge), read back from text with its fields in
    another order."""
    g = genome.model_copy(deep=True)

    def rename(node: str) -> str:
        return names.get(node, node)

    for agent in g.agents:
        agent.id = rename(agent.id)
    topo = g.topology
    topo.edges = [(rename(a), rename(b)) for a, b in topo.edges]
    topo.conditions = {" -> ".join(rename(x) for x in k.split(" -> ")): v for k, v in topo.conditions.items()}
    topo.judge = rename(topo.judge) if topo.judge else None
    data = json.loads(dump_genome(g, "json"))
    return parse_genome_text(json.dumps(dict(reversed(list(data.items())))), "renamed", "json")


def test_structure_id_ignores_agent_names_but_not_design() -> None:
    escalate = load_seed("escalate")
    twin = _renamed(escalate, {"sampler": "drafts", "final_check": "last_gate"})
    assert twin.id != escalate.id
    assert twin.structure_id == escalate.structure_id
    more = twin.model_copy(deep=True)
    more.agent("drafts").copies = 8
    assert more.structure_id != escalate.structure_id
    reordered = escalate.model_copy(deep=True)
    reordered.agents.reverse()  # listing order breaks ties: another design
    assert reordered.structure_id != escalate.structure_id


def test_io_with_five_samples_escalated_is_the_escalate_seed() -> None:
    genome = load_seed("io")
    insert_escalation(genome, "answerer", 5)
    assert genome.id != load_seed("escalate").id
    assert library_twin(genome) is not None and library_twin(genome).name == "escalate"
    insert_escalation(io3 := load_seed("io"), "answerer", 3)
    assert library_twin(io3) is None


def _ctx(calls: list[str]) -> SearchContext:
    def responder(messages, *args, **kw) -> str:
        calls.append(str(messages[-1]["content"])[:40])
        return chat_reply(**{name: "4" for name, _ in output_fields(messages)})

    task = Task.from_callable(lambda out: float(str(out.get("answer", "")).strip() == "4"),
                              examples=[{"question": f"what is 2+{i}?", "id": f"q{i}"} for i in range(3)],
                              name="arith")
    client = LMClient({"worker": "fake", "meta": "fake"}, cache=False, responder=responder)
    return SearchContext(task, Evaluator(task, client, limit=3, concurrency=1), client, MemoryArchive(),
                         run_id="t", budget=SearchBudget(max_candidates=10), seed=0)


def test_a_renamed_twin_of_a_candidate_is_a_duplicate_and_costs_nothing() -> None:
    calls: list[str] = []
    ctx = _ctx(calls)
    cot = ctx.try_submit(Proposal(load_seed("cot"), [], "seed"))
    assert cot is not None
    paid = len(calls)
    twin = _renamed(load_seed("cot"), {"solver": "thinker"})
    assert twin.id != cot.id
    got = ctx.try_submit(Proposal(twin, [cot.id], "mutate"))
    assert got is cot and ctx.duplicates == 1 and len(calls) == paid


def test_a_rebuilt_seed_enters_as_that_seed_marked_rediscovered() -> None:
    ctx = _ctx([])
    io = ctx.try_submit(Proposal(load_seed("io"), [], "seed"))
    child = load_seed("io")
    insert_escalation(child, "answerer", 5)
    cand = ctx.try_submit(Proposal(child, [io.id], "add_escalation"))
    assert cand is not None and cand.rediscovers == "escalate"
    assert cand.genome.name == "escalate" and cand.id == load_seed("escalate").id
    assert cand.rationale.startswith("rediscovered escalate")
    # proposing it again, under yet other names, pays nothing
    again = _renamed(child, {"answerer_sampled": "more"})
    assert ctx.try_submit(Proposal(again, [io.id], "add_escalation")) is cand
    # a real variation of it is new
    other = load_seed("escalate")
    other.agent("sampler").copies = 8
    new = ctx.try_submit(Proposal(other, [cand.id], "change_copies"))
    assert new is not None and new.rediscovers == "" and new is not cand



def test_an_adapter_pinned_to_what_auto_picks_is_the_same_design_in_that_run() -> None:
    # tune's io with 5 copies, run_examples and adapter "plain" is sample-and-test on the embedded model, where
    # "auto" means "plain"; on an LM where "auto" means "chat" the pinned adapter changes the prompts.
    pinned = load_seed("sample-and-test").model_copy(deep=True)
    pinned.agents[0].adapter = "plain"
    assert library_twin(pinned) is None
    assert library_twin(pinned, {"worker": "chat"}) is None
    twin = library_twin(pinned, {"worker": "plain"})
    assert twin is not None and twin.name == "sample-and-test"
    # an agent on another alias resolves with that alias's LM
    other = pinned.model_copy(deep=True)
    other.agents[0].lm = "coder"
    assert library_twin(other, {"worker": "plain", "coder": "chat"}) is None
    assert library_twin(other, {"worker": "chat", "coder": "plain"}) is None  # the seed itself runs on worker


def test_the_search_sees_a_pinned_local_adapter_as_the_seed_it_runs_as() -> None:
    ctx = _ctx([])
    ctx.state.auto_adapters = {"worker": "plain"}  # as on the embedded model (the fake LM resolves auto to chat)
    io = ctx.try_submit(Proposal(load_seed("io"), [], "seed"))
    pinned = load_seed("io")
    pinned.agents[0].copies = 5
    pinned.topology.aggregation = "run_examples"
    pinned.agents[0].adapter = "plain"
    cand = ctx.try_submit(Proposal(pinned, [io.id], "tune"))
    assert cand is not None and cand.rediscovers == "sample-and-test"
    again = load_seed("sample-and-test")
    assert ctx.try_submit(Proposal(again, [io.id], "tune")) is cand and ctx.duplicates == 1
