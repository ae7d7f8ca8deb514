"""Cost probes: a dry run on the answer cache tells a free candidate from a paid one before anything is sent, and a
search tries free candidates first (offline, fake LM)."""

from __future__ import annotations

from pathlib import Path

from masforge.archive.memory import MemoryArchive
from masforge.evaluators.runner import Evaluator
from masforge.evaluators.tasks import Task
from masforge.lm.cache import LMCache
from masforge.lm.client import LMClient
from masforge.lm.fake import output_fields
from masforge.search.budget import SearchBudget
from masforge.search.context import Proposal, SearchContext
from masforge.search.costing import CostProbe
from masforge.seeds import load_seed
from masforge.testing import chat_reply


def _ctx(tmp_path: Path, sent: list[str]) -> SearchContext:
    def responder(messages, *args, **kw) -> str:
        sent.append(str(messages[-1]["content"])[:60])
        return chat_reply(**{name: "4" for name, _ in output_fields(messages)})

    task = Task.from_callable(lambda out: float(str(out.get("answer", "")).strip() == "4"),
                              examples=[{"question": f"what is 2+{i}?", "id": f"q{i}"} for i in range(4)],
                              name="arith")
    client = LMClient({"worker": "fake", "meta": "fake"}, cache=LMCache(tmp_path / "cache.sqlite"),
                      responder=responder)
    return SearchContext(task, Evaluator(task, client, limit=4, concurrency=2), client, MemoryArchive(),
                         run_id="t", budget=SearchBudget(max_candidates=10), seed=0)


def test_a_probe_sends_nothing_and_tells_free_from_paid(tmp_path: Path) -> None:
    sent: list[str] = []
    ctx = _ctx(tmp_path, sent)
    io = load_seed("io")
    before = ctx.costs.cost(io)
    assert before is not None and not before.free and before.missing == 4 and before.examples_missing == 4
    assert sent == [] and ctx.client.ledger.calls == 0  # a probe never reaches the provider nor the ledger
    ctx.try_submit(Proposal(io, [], "seed"))
    assert len(sent) == 4
    assert ctx.costs.cost(io) == before  # probed once in a run: a resumed run decides on the same costs
    after = CostProbe(ctx.evaluator).cost(io)
    assert after is not None and after.free and after.cached == 4
    cot = CostProbe(ctx.evaluator).cost(load_seed("cot"))
    assert cot is not None and cot.missing == 4  # another prompt: nothing of io's answers helps it
    assert len(sent) == 4


def test_free_candidates_are_tried_first(tmp_path: Path) -> None:
    sent: list[str] = []
    ctx = _ctx(tmp_path, sent)
    io = ctx.try_submit(Proposal(load_seed("io"), [], "seed"))
    paid = Proposal(load_seed("cot"), [io.id], "mutate")
    twin_free = load_seed("io")
    twin_free.agents[0].max_iters = 4  # not used by predict: same prompts, another genome id
    assert twin_free.id != io.id
    order = ctx.cheapest_first([paid, Proposal(twin_free, [io.id], "mutate")])
    assert [p.genome.id for p in order] == [twin_free.id, paid.genome.id]
    assert ctx.costs.known[twin_free.id].free and not ctx.costs.known[paid.genome.id].free


def test_a_resumed_run_reads_the_costs_its_probes_found(tmp_path: Path) -> None:
    sent: list[str] = []
    ctx = _ctx(tmp_path, sent)
    record = tmp_path / "costs.jsonl"
    first = CostProbe(ctx.evaluator, record).cost(load_seed("io"))
    ctx.try_submit(Proposal(load_seed("io"), [], "seed"))  # now io's answers are cached
    again = CostProbe(ctx.evaluator, record)
    assert again.cost(load_seed("io")) == first and not first.free
    record.write_text(record.read_text() + '{"id": "cut by a ki')  # a kill mid-line loses only that line
    assert CostProbe(ctx.evaluator, record).cost(load_seed("io")) == first
