"""Search events are typed: one frozen dataclass per kind, emitted as objects only (a kind string is refused at
once), the live view dispatching on the class, and ``events.jsonl`` keeping the fields old run folders have, read
back as typed candidates."""

from __future__ import annotations

import ast
import dataclasses
import json
from pathlib import Path

import pytest
from rich.console import Console

from masforge.genome.schema import Genome
from masforge.search import events as ev
from masforge.search.config import RunConfig
from masforge.search.context import SearchContext
from masforge.search.engine import run_search
from masforge.search.population import Candidate
from masforge.search.progress import SearchProgress, describe_event
from masforge.search.replay import read_log

PACKAGE = Path(__file__).resolve().parents[1]
KINDS = {"candidate", "incumbent", "evaluating", "example_done", "rejected", "duplicate", "skipped", "surrogate_skip",
         "waiting", "incomplete", "diverged", "notice", "stage", "stalled", "note", "test", "knapsack_probe",
         "knapsack_blacklist", "knapsack_select"}
CANDIDATE_ROW = ["t", "event", "id", "name", "score", "dollars", "operator", "strategy", "reused", "seq", "rng",
                 "spent"]
"""The fields of a candidate line of events.jsonl, in order, as runs before typed events wrote them."""


@pytest.fixture(autouse=True)
def _private_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MASFORGE_CACHE", str(tmp_path / "cache"))


def _emitted_events() -> list[tuple[str, ast.expr]]:
    """(file, first argument) of every ``.emit(...)`` call in the search package."""
    out = []
    for path in sorted((PACKAGE / "search").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "emit" \
                    and node.args:
                out.append((path.name, node.args[0]))
    return out


def test_every_event_kind_has_a_frozen_dataclass_and_the_search_emits_only_those() -> None:
    assert set(ev.EVENTS) == KINDS
    for kind, cls in ev.EVENTS.items():
        assert cls.kind == kind and dataclasses.is_dataclass(cls) and cls.__doc__
        assert cls.__dataclass_params__.frozen, cls.__name__  # type: ignore[attr-defined]
    emitted = _emitted_events()
    assert len(emitted) >= 18
    names = {name for name, cls in vars(ev).items() if isinstance(cls, type) and issubclass(cls, ev.Event)}
    for where, arg in emitted:
        # an event object built in place (ev.Note(...), Note(...)) or passed on (a Notice built before): no kind strings
        assert not isinstance(arg, ast.Constant), f"{where}: emits the string {arg.value!r}"
        if isinstance(arg, ast.Call):
            called = arg.func.attr if isinstance(arg.func, ast.Attribute) else getattr(arg.func, "id", "")
            assert called in names, f"{where}: emits {called}(...), not a search event class"


def _ctx(seen: list[ev.Event] | None = None) -> SearchContext:
    ctx = SearchContext.__new__(SearchContext)  # only emit() is exercised
    ctx.on_event = seen.append if seen is not None else None
    return ctx


def test_anything_but_an_event_object_is_refused_at_once_listener_or_not() -> None:
    for seen in (None, []):
        ctx = _ctx(seen)
        with pytest.raises(TypeError, match="emit\\(\\) takes a search event object, e.g. Note\\(.*not the str 'note'"):
            ctx.emit("note")  # type: ignore[arg-type]  # the kind strings older strategies emitted
        with pytest.raises(TypeError, match="not the dict"):
            ctx.emit({"event": "note"})  # type: ignore[arg-type]
        with pytest.raises(TypeError, match="extra"):
            ctx.emit(ev.Note(strategy="a", message="b"), extra=1)  # type: ignore[call-arg]
        with pytest.raises(TypeError, match="unexpected keyword argument 'text'"):
            ev.Note(strategy="evolve", text="typo'd field")  # type: ignore[call-arg]
        assert not seen
        for message in ("note", {"event": "note"}):
            with pytest.raises(TypeError) as refused:
                ctx.emit(message)  # type: ignore[arg-type]
            assert "\n" not in str(refused.value)
    with pytest.raises(TypeError, match="needs a kind"):
        type("NoKind", (ev.Event,), {})
    with pytest.raises(TypeError, match="'note' is taken by Note"):
        type("Twice", (ev.Event,), {}, kind="note")
    assert ev.EVENTS["note"] is ev.Note


def test_events_reach_the_listener_as_objects() -> None:
    seen: list[ev.Event] = []
    ctx = _ctx(seen)
    ctx.emit(ev.Stalled(strategy="meta", steps=3))
    ctx.emit(ev.Note(strategy="coevolve", message="meta LM failed"))
    assert seen == [ev.Stalled(strategy="meta", steps=3), ev.Note(strategy="coevolve", message="meta LM failed")]
    with pytest.raises(dataclasses.FrozenInstanceError):
        seen[0].steps = 4  # type: ignore[misc]
    assert seen[1].data() == {"strategy": "coevolve", "message": "meta LM failed"}


def _candidate() -> Candidate:
    g = Genome(name="solver", description="d", agents=[{"id": "a", "instructions": "solve"}],
               topology={"edges": ["input -> a", "a -> output"]})
    return Candidate(genome=g, score=0.5, fitness=0.5, operator="mutate", strategy="evolve")


def test_the_live_view_dispatches_on_the_event_class() -> None:
    console = Console(record=True, width=200, force_terminal=False)
    ui = SearchProgress(console=console, enabled=True)
    ui(ev.Notice(text="plan: 20 candidates", warning=False))
    ui(ev.Diverged(seq=3, expected="abc", got="def"))
    ui(ev.Evaluating(name="solver-2", operator="mutate"))
    out = console.export_text()
    assert "plan: 20 candidates" in out and "at candidate 3 (abc before, def now)" in out
    assert ui.working_on == "solver-2" and ui.last == ""
    ui(ev.Admitted(candidate=_candidate(), reused=True, improved=True, seq=0, rng="r", replayed=False))
    assert ui.last.endswith("solver score 0.500 (reused) *best*")
    assert describe_event(ev.KnapsackProbe(component="c", value=0.1, cost=0.2, score=0.3)) is None


def test_events_jsonl_keeps_the_candidate_fields_of_older_runs(tmp_path: Path) -> None:
    cfg = RunConfig.from_data({"task": "rg:basic_arithmetic", "strategy": ["random"], "lm": "fake",
                               "seeds": ["cot", "io"], "limit": 3, "test_top_k": 0, "output": str(tmp_path / "runs"),
                               "budget": {"max_candidates": 3}})
    result = run_search(cfg, progress=False)
    rows = [json.loads(line) for line in (result.run_dir / "events.jsonl").read_text().splitlines()]
    assert len(rows) == 3
    for seq, (row, cand) in enumerate(zip(rows, result.candidates, strict=True)):
        assert list(row) == CANDIDATE_ROW
        assert row["event"] == "candidate" and row["seq"] == seq and row["id"] == cand.id
        assert row["name"] == cand.genome.name and row["strategy"] == cand.strategy and isinstance(row["rng"], str)
        assert {"llm_calls", "dollars", "tokens"} <= set(row["spent"])
    logged = read_log(result.run_dir / "events.jsonl")
    assert [r.id for r in logged] == [c.id for c in result.candidates]
    assert [r.row() for r in logged] == rows  # read back typed, written again: the same lines
    assert all(isinstance(r, ev.LoggedCandidate) and isinstance(r.rng, str) for r in logged)


def test_a_log_read_back_keeps_older_runs_and_skips_cut_lines(tmp_path: Path) -> None:
    log = tmp_path / "events.jsonl"
    log.write_text('{"event": "candidate", "id": "aa", "score": 0.5}\n'  # before positions and RNG fingerprints
                   '{"event": "note", "message": "x"}\n{"event": "candidate", "id": "bb", "seq": 7, "rng": "r"}\n'
                   '{"event": "candidate", "id": "cc", "sc')  # cut by a kill
    old, new = read_log(log)
    assert (old.id, old.seq, old.rng, old.score, old.spent) == ("aa", 0, None, 0.5, {})
    assert (new.id, new.seq, new.rng) == ("bb", 7, "r")
    assert read_log(tmp_path / "none.jsonl") == []


def test_the_held_out_stage_keeps_the_search_panel() -> None:
    """The search and its held-out re-scoring each enter the display; on a terminal only the outermost opens and
    closes the live panel, so the held-out stage does not print a second one under the first."""
    console = Console(record=True, width=120, force_terminal=True)
    ui = SearchProgress(console=console, enabled=True)
    with ui:
        panel = ui.live
        assert panel is not None
        with ui:  # the search's stages
            pass
        assert ui.live is panel
        with ui:  # the held-out stage
            assert ui.live is panel
    assert ui.live is None
