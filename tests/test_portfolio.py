"""Portfolio genomes: a router over member systems. The router's numbers predict as scikit-learn does, the form is
validated, hashed and stored like any genome, and running it runs the routed member exactly as it runs alone
(same prompts, so the same cached answers); escalation passes a question on when an answer fails its examples."""

from __future__ import annotations

import random
from collections import Counter
from typing import Any

import pytest

from masforge.errors import GenomeError
from masforge.execution.compile import compile_genome
from masforge.execution.portfolio_system import choose
from masforge.genome.hashing import genome_hash
from masforge.genome.io import dump_genome, parse_genome_text
from masforge.genome.router import Router
from masforge.genome.schema import Genome, Portfolio
from masforge.genome.validate import problems, validate
from masforge.lm.client import LMCache, LMClient
from masforge.seeds import load_seed
from masforge.standalone.router import NUMERIC_FEATURES, feature_count, question_features, route_features
from masforge.testing import chat_reply

QUESTION = """Write a python function to add two numbers.
Your code should pass these tests:
assert add(2, 3) == 5
assert add(0, 0) == 0"""
RIGHT = "```python\ndef add(a, b):\n    return a + b\n```"
WRONG = "```python\ndef add(a, b):\n    return a - b\n```"

CAREFUL = """
name: careful
agents:
  - {id: solver, role: careful solver, instructions: Check every step.}
topology: {edges: [input -> solver, solver -> output]}
"""
QUICK = """
name: quick
agents:
  - {id: solver, role: quick solver, instructions: Answer at once.}
topology: {edges: [input -> solver, solver -> output]}
"""


def _members() -> list[Genome]:
    return [parse_genome_text(QUICK), parse_genome_text(CAREFUL)]


def _constant(member: int) -> Router:
    return Router(classes=[member])


def _by_length(threshold_chars: int) -> Router:
    """A two-class router: questions longer than ``threshold_chars`` go to member 1, others to member 0."""
    import math

    coef = [0.0] * feature_count(256)
    coef[256 + NUMERIC_FEATURES.index("log_chars")] = 10.0
    return Router(classes=[0, 1], coef=[coef], intercept=[-math.log1p(threshold_chars)])


def _portfolio(router: Router, escalation: list[int] | None = None, members: list[Genome] | None = None) -> Genome:
    return Genome(kind="portfolio", name="pf", portfolio=Portfolio(members=members or _members(), router=router,
                                                                   escalation=escalation or []))


# ------------------------------------------------------------------------------------------------ the router


def _questions(n: int, seed: int = 0) -> list[str]:
    rng = random.Random(seed)
    words = ["sum", "list", "string", "reverse", "prime", "sort", "count", "vowels", "matrix", "path", "tree"]
    out = []
    for i in range(n):
        text = " ".join(rng.choice(words) for _ in range(rng.randint(3, 30)))
        if i % 3 == 0:
            text = f"def f(x):\n    '''{text}\n    >>> f({i})\n    {i * 2}\n    '''"
        elif i % 3 == 1:
            text += f"\nassert f({i}) == {i + 1}"
        out.append(text)
    return out


@pytest.mark.parametrize("classes", [2, 3, 4])
def test_the_stored_numbers_predict_what_sklearn_predicts(classes: int) -> None:
    from sklearn.linear_model import LogisticRegression

    questions = _questions(90)
    features = [question_features({"question": q}) for q in questions]
    labels = [(len(q) + q.count("a")) % classes for q in questions]
    model = LogisticRegression(C=5.0, max_iter=2000).fit(features, labels)
    router = Router(classes=[int(c) for c in model.classes_], coef=model.coef_.tolist(),
                    intercept=model.intercept_.tolist())
    validate(_portfolio(router, members=[*_members(), *_members()][:max(classes, 2)]))
    held_out = _questions(60, seed=1)
    expected = model.predict([question_features({"question": q}) for q in held_out]).tolist()
    assert [choose(router, {"question": q}) for q in held_out] == expected
    assert len(set(expected)) > 1  # the check is not about a constant


def test_features_are_stateless_and_read_the_stated_examples() -> None:
    plain = question_features({"question": "reverse a string"})
    assert plain == question_features({"question": "reverse a string"})
    assert len(plain) == feature_count(256)
    numbers = dict(zip(NUMERIC_FEATURES, question_features({"question": QUESTION})[256:], strict=True))
    assert numbers["assert_lines"] == 0.2 and numbers["stated_examples"] == 0.2 and numbers["doctest_lines"] == 0
    assert route_features({"classes": [3], "coef": [], "intercept": []}, plain) == 3


# ------------------------------------------------------------------------------------------------ the form


def test_a_portfolio_round_trips_as_yaml_and_json_with_the_same_id() -> None:
    genome = _portfolio(_by_length(100), escalation=[0, 1])
    for fmt in ("yaml", "json"):
        back = parse_genome_text(dump_genome(genome, fmt), fmt=fmt)
        assert back.id == genome.id and back.portfolio == genome.portfolio
    text = dump_genome(genome)
    assert "kind: portfolio" in text and "role: careful solver" in text and "input -> solver" in text
    assert len(text.splitlines()) < 80  # the router's numbers are written one row per line


def test_the_id_counts_members_router_numbers_and_escalation_not_names() -> None:
    base = _portfolio(_by_length(100))
    assert _portfolio(_by_length(100)).id == base.id
    renamed = base.model_copy(update={"name": "other", "description": "x"})
    assert renamed.id == base.id
    assert _portfolio(_by_length(101)).id != base.id
    assert _portfolio(_by_length(100), escalation=[1, 0]).id != base.id
    assert _portfolio(_by_length(100), members=list(reversed(_members()))).id != base.id
    # config and code genomes hash exactly as before portfolios existed
    assert load_seed("io").id == "f88928e932ad9596edd577d72c46af134f56dcbbb76b66328aa5a0dfba797bf9"
    assert genome_hash(base) == base.id


@pytest.mark.parametrize(("change", "message"), [
    (lambda d: d["portfolio"]["router"].update(classes=[0, 5]),
     "portfolio.router.classes: member index 5 is out of range (the portfolio has 2 members, 0 to 1)"),
    (lambda d: d["portfolio"]["router"]["coef"][0].pop(),
     "portfolio.router.coef[0]: 262 numbers, but the feature map (n_hash 256) has 263; build the portfolio again"),
    (lambda d: d["portfolio"]["router"].update(intercept=[]),
     "portfolio.router.intercept: 0 values for 1 coef rows; give one per row"),
    (lambda d: d["portfolio"].update(escalation=[0, 2]),
     "portfolio.escalation: member index 2 is out of range (0 to 1)"),
    (lambda d: d["portfolio"]["members"][1]["topology"].update(edges=["input -> solver"]),
     "portfolio.members[1] 'careful': topology.edges: nothing reaches 'output'; add an edge like 'solver -> output'"),
    (lambda d: d["portfolio"]["members"][0].update(inputs=["task"]),
     "portfolio.members[0] 'quick': inputs ['task'] differ from the portfolio's ['question']"),
    (lambda d: d.update(agents=[{"id": "x"}]),
     "agents: a portfolio genome takes no agents (its members do the work); move them into a member"),
    (lambda d: d.pop("portfolio"),
     "portfolio: a portfolio genome needs portfolio.members and portfolio.router (build one with `masforge "
     "portfolio build`)"),
    (lambda d: d.update(kind="config"),
     "portfolio: only portfolio genomes carry members and a router; remove it or set kind: portfolio"),
])
def test_a_bad_portfolio_is_one_line_naming_the_problem_and_the_fix(change: Any, message: str) -> None:
    import json

    data = json.loads(dump_genome(_portfolio(_by_length(100)), "json"))
    change(data)
    genome = parse_genome_text(json.dumps(data), fmt="json")
    found = problems(genome)
    assert found and found[0].startswith(message), found
    with pytest.raises(GenomeError, match="^genome 'pf': "):
        validate(genome)


def test_a_nested_portfolio_and_bad_file_shapes_are_refused() -> None:
    inner = _portfolio(_constant(0))
    outer = _portfolio(_constant(0), members=[inner, _members()[1]])
    assert problems(outer)[0] == ("portfolio.members[0] 'pf': a member cannot itself be a portfolio; list its "
                                  "members instead")
    text = dump_genome(_portfolio(_constant(1))).replace("  router:\n", "  router:\n    weights: [1]\n")
    with pytest.raises(GenomeError, match=r"^g\.yaml: portfolio\.router\.weights: unknown field"):
        parse_genome_text(text, "g.yaml")
    pickled = "kind: portfolio\nportfolio: !!python/object/apply:os.system ['true']\n"
    with pytest.raises(GenomeError, match=r"^g\.yaml"):
        parse_genome_text(pickled, "g.yaml")


# ------------------------------------------------------------------------------------------------ running


class Counting:
    """A fake LM that answers RIGHT to the careful solver and WRONG to everyone else, counting calls."""

    def __init__(self) -> None:
        self.calls: list[str] = []
        self.messages: list[str] = []

    def __call__(self, messages: list[dict[str, Any]], info: dict[str, Any]) -> str:
        import json

        text = "\n".join(str(m.get("content", "")) for m in messages)
        self.calls.append(text)
        self.messages.append(json.dumps(messages, sort_keys=True))
        return chat_reply(answer=RIGHT if "careful solver" in text else WRONG)


def _client(lm: Counting, cache: Any = False) -> LMClient:
    return LMClient({"worker": "fake"}, cache=cache, responder=lm)


def test_the_router_picks_the_member_per_question() -> None:
    system = compile_genome(_portfolio(_by_length(60)), _client(Counting()))
    short, long = "Add 2 and 3.", QUESTION
    assert system(question=short).outputs == {"answer": WRONG}  # quick solver
    result = system(question=long)
    assert result.outputs == {"answer": RIGHT}  # careful solver
    router = result.trace.calls[0]
    assert router.agent == "router" and router.lm_calls == [] and router.outputs["members"] == ["careful"]


def test_a_routed_member_makes_the_calls_it_makes_alone_and_shares_its_cached_answers(tmp_path: Any) -> None:
    alone, routed = Counting(), Counting()
    compile_genome(_members()[1], _client(alone))(question=QUESTION)
    compile_genome(_portfolio(_constant(1)), _client(routed))(question=QUESTION)
    assert Counter(routed.calls) == Counter(alone.calls) and len(routed.calls) == 1
    # with one answer cache: the member alone after the portfolio pays nothing
    cache = LMCache(tmp_path / "c.sqlite")
    first = Counting()
    result = compile_genome(_portfolio(_constant(1)), _client(first, cache))(question=QUESTION)
    again = Counting()
    assert compile_genome(_members()[1], _client(again, cache))(question=QUESTION).outputs == result.outputs
    assert len(first.calls) == 1 and again.calls == []


def test_escalation_passes_a_failing_answer_on_to_the_next_member() -> None:
    lm = Counting()
    result = compile_genome(_portfolio(_constant(0), escalation=[0, 1]), _client(lm))(question=QUESTION)
    assert result.outputs == {"answer": RIGHT}
    assert result.trace.calls[0].outputs["members"] == ["quick", "careful"] and len(lm.calls) == 2
    # without the order, or when the first answer passes, or with no stated example: one member only
    lm = Counting()
    assert compile_genome(_portfolio(_constant(0)), _client(lm))(question=QUESTION).outputs == {"answer": WRONG}
    lm = Counting()
    result = compile_genome(_portfolio(_constant(1), escalation=[1, 0]), _client(lm))(question=QUESTION)
    assert result.outputs == {"answer": RIGHT} and len(lm.calls) == 1
    lm = Counting()
    result = compile_genome(_portfolio(_constant(0), escalation=[0, 1]), _client(lm))(question="Add 2 and 3.")
    assert result.outputs == {"answer": WRONG} and len(lm.calls) == 1


# ------------------------------------------------------------------------------------------------ building


def _kinds_task(n: int = 40) -> Any:
    """A task of two kinds of questions: code questions that state examples, and word questions."""
    from masforge.evaluators.example import Example
    from masforge.evaluators.tasks import Task

    def example(i: int, split: str) -> Example:
        if i % 2:
            q = f"def f{i}(x):\n    '''Return x plus {i}.\n    >>> f{i}(1)\n    {i + 1}\n    '''"
        else:
            q = f"How many apples are left if Tom has {i} apples and eats one of them today?"
        return Example(id=f"{split}/{i}", inputs={"question": q}, target=str(i))

    splits = {s: [example(i, s) for i in range(n)] for s in ("validation", "train", "test")}
    return Task("kinds", splits, metric="exact_match")


def _archive_with_results(tmp_path: Any, task: Any, solvers: dict[str, tuple[Any, ...]], n: int | None = None,
                          split: str = "validation+train") -> Any:
    """An archive whose candidates (one per name: a scorer of examples, LM calls and optionally dollars per
    question) are scored on the selection questions."""
    from masforge.archive.records import ResultRecord
    from masforge.archive.store import Archive

    archive = Archive.open(tmp_path / "archive", create=True)
    examples = task.split(split)[:n] if n else task.split(split)
    for name, (scorer, calls, *dollars) in solvers.items():
        genome = parse_genome_text(QUICK.replace("name: quick", f"name: {name}").replace(
            "Answer at once.", f"Answer as {name} would."))
        archive.add(genome)
        scores = {ex.id: float(scorer(ex)) for ex in examples}
        archive.add_result(genome.id, ResultRecord(
            task=task.name, split=split, lm_key="fake", score=sum(scores.values()) / len(scores), n=len(scores),
            llm_calls=int(calls * len(scores)), example_scores=scores,
            dollars=sum(dollars) * len(scores), example_dollars={e: sum(dollars) for e in scores if dollars}))
    return archive


def _is_code(ex: Any) -> bool:
    return ">>>" in ex.inputs["question"]


SOLVERS = {
    "coder": (lambda ex: _is_code(ex), 1.0),                # solves the code questions only
    "talker": (lambda ex: not _is_code(ex), 1.0),           # solves the word questions only
    "allround": (lambda ex: int(ex.id.split("/")[1]) % 5 != 0, 5.0),  # 80% of both, five calls each
    "nothing": (lambda ex: False, 1.0),
}


def test_a_portfolio_of_complementary_systems_routes_each_question_to_the_one_that_solves_it(tmp_path: Any) -> None:
    import masforge
    from masforge.search.portfolio import add_portfolio, build_portfolio

    assert masforge.build_portfolio is build_portfolio
    task = _kinds_task()
    with _archive_with_results(tmp_path, task, SOLVERS) as archive:
        build = build_portfolio(archive, task)
        names = [m.name for m in build.members]
        assert names[0] == "allround" and build.single_best.name == "allround"  # the best single system starts it
        assert {"coder", "talker"} <= set(names) and "nothing" not in names
        assert build.oracle_score == 1.0 and build.cv.score > 0.95 and build.cv.accuracy > 0.95
        assert build.base_accuracy is not None and build.base_accuracy < 0.5  # the one-call solvers are the picks
        assert build.cv.calls < 1.5  # the router sends (almost) nothing to the five-call system
        sends = build.sends()
        assert sends["coder"] == sends["talker"] == 40 and sum(sends.values()) == 80
        text = "\n".join(build.lines())
        assert "single best: allround 0.800" in text and "oracle (best member per question): 1.000" in text
        # the router routes new questions of each kind the same way, from the stored numbers alone
        genome = build.genome
        def pick(inputs: dict) -> int:
            return choose(genome.portfolio.router, inputs)

        assert genome.portfolio.members[pick({"question": task.split("test")[1].inputs["question"]})].name == "coder"
        assert genome.portfolio.members[pick({"question": task.split("test")[0].inputs["question"]})].name == "talker"
        escalating = build_portfolio(archive, task, escalate=True).genome.portfolio
        assert escalating is not None and [escalating.members[i].name for i in escalating.escalation][-1] == "allround"
        record = add_portfolio(archive, build)
        assert record.kind == "portfolio" and set(record.parents) == {m.id for m in build.members}
        assert archive.genome(record.genome_id).id == genome.id


def test_a_member_joins_only_when_it_raises_the_routed_score_or_cuts_cost(tmp_path: Any) -> None:
    from masforge.search.portfolio import build_portfolio

    task = _kinds_task()
    same = {"first": (lambda ex: _is_code(ex), 1.0), "copy": (lambda ex: _is_code(ex), 1.0),
            "worse": (lambda ex: False, 1.0)}
    with _archive_with_results(tmp_path, task, same) as archive:
        build = build_portfolio(archive, task)
        assert [m.name for m in build.members] in (["first"], ["copy"])
        assert build.genome.portfolio.router.classes == [0]
    # quality against cost by the run's fitness: "pricey" solves everything at $0.05 a question, "cheap" the code
    # questions for free at half a call
    priced = {"pricey": (lambda ex: True, 1.0, 0.05), "cheap": (lambda ex: _is_code(ex), 0.5)}
    with _archive_with_results(tmp_path / "b", task, priced) as archive:
        free = build_portfolio(archive, task, cost_weight=0.0)  # same score, fewer calls: cheap joins for code
        assert [m.name for m in free.members] == ["pricey", "cheap"]
        assert free.cv.score == 1.0 and free.cv.calls < 1.0
        some = build_portfolio(archive, task, cost_weight=10.0)  # pricey's fitness 0.5 a question, still worth it
        assert [m.name for m in some.members] == ["cheap", "pricey"] and some.cv.fitness > 0.7
        dear = build_portfolio(archive, task, cost_weight=20.0)  # a solved word question is worth nothing now
        assert [m.name for m in dear.members] == ["cheap"]


def test_only_candidates_scored_on_every_selection_question_count_and_test_is_refused(tmp_path: Any) -> None:
    from masforge.archive.records import ResultRecord
    from masforge.search.portfolio import PortfolioError, build_portfolio

    task = _kinds_task()
    with _archive_with_results(tmp_path, task, {"allround": SOLVERS["allround"]}) as archive:
        raced = parse_genome_text(CAREFUL)
        archive.add(raced)
        part = {ex.id: 1.0 for ex in task.split("validation+train")[:16]}  # dropped by the race after 16
        archive.add_result(raced.id, ResultRecord(task="kinds", split="validation+train", lm_key="fake", score=1.0,
                                                  n=16, example_scores=part))
        build = build_portfolio(archive, task)
        assert [m.name for m in build.members] == ["allround"] and build.candidates == 1
        with pytest.raises(PortfolioError, match="selection split only"):
            build_portfolio(archive, task, split="test")
        with pytest.raises(PortfolioError, match="no result for task kinds split validation"):
            build_portfolio(archive, task, split="validation")
        # results of another LM key (e.g. an earlier reading revision) are named, with the way to use them
        with pytest.raises(PortfolioError, match=r"with lm other; it holds results of fake .*\(--lm-key\)"):
            build_portfolio(archive, task, lm_key="other")


# ------------------------------------------------------------------------------------------------ CLI


def test_cli_builds_stores_lists_and_shows_a_portfolio(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    from typer.testing import CliRunner

    from masforge.cli import app
    from masforge.evaluators import registry

    monkeypatch.setattr(registry, "_REGISTRY", dict(registry._REGISTRY))
    registry.register_task("kinds", lambda **_: _kinds_task(), "two kinds of questions")
    _archive_with_results(tmp_path, _kinds_task(), SOLVERS).close()
    where = str(tmp_path / "archive")
    runner = CliRunner()
    out = tmp_path / "pf.yaml"
    result = runner.invoke(app, ["portfolio", "build", "--task", "kinds", "--archive", where, "-o", str(out)],
                           env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    text = result.output
    assert "from 4 candidates scored on all 80 validation+train questions" in text
    assert "talker" in text and "router sends 40 of 80" in text and "single best: allround 0.800" in text
    assert "oracle (best member per question): 1.000" in text and "routing accuracy against the oracle" in text
    assert "(always the single best: " in text
    genome = parse_genome_text(out.read_text(), str(out))
    assert genome.kind == "portfolio"
    listed = runner.invoke(app, ["archive", "list", "--archive", where, "--kind", "portfolio"],
                           env={"COLUMNS": "200"})
    assert listed.exit_code == 0, listed.output
    assert "1 of 5 candidates" in listed.output and "members:" in listed.output and "coder" in listed.output
    shown = runner.invoke(app, ["archive", "show", genome.short_id, "--archive", where], env={"COLUMNS": "200"})
    assert shown.exit_code == 0, shown.output
    assert "portfolio members" in shown.output and "talker" in shown.output and "portfolio / route" in shown.output
    exported = runner.invoke(app, ["export", genome.short_id, "--archive", where, "-o", str(tmp_path / "pf.py")])
    assert exported.exit_code == 0, exported.output
    assert '"model": "fake"' in (tmp_path / "pf.py").read_text()  # the LM its members were scored with
    refused = runner.invoke(app, ["portfolio", "build", "--task", "kinds", "--archive", where, "--split", "test"])
    assert refused.exit_code == 1 and "selection split only" in refused.output


# ------------------------------------------------------------------------------------------------ export

EXPORT_HARNESS = r'''
import importlib.util
import json
import sys
from types import SimpleNamespace

spec = importlib.util.spec_from_file_location("exported_portfolio", sys.argv[1])
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
standalone = not any(m == "masforge" or m.startswith("masforge.") for m in sys.modules)

import dspy

RIGHT, WRONG = json.loads(sys.argv[3])


class ScriptedLM(dspy.BaseLM):
    """Answers RIGHT to the careful solver, WRONG to everyone else; records each call's messages."""

    def __init__(self):
        super().__init__(model="test/scripted", temperature=0.0, max_tokens=1024, cache=False, num_retries=0)
        self.calls = []

    def forward(self, prompt=None, messages=None, **kwargs):
        msgs = messages if messages is not None else [{"role": "user", "content": prompt or ""}]
        self.calls.append(json.dumps(msgs, sort_keys=True))
        text = "\n".join(str(m.get("content", "")) for m in msgs)
        reply = "[[ ## answer ## ]]\n%s\n\n[[ ## completed ## ]]" % (RIGHT if "careful solver" in text else WRONG)
        message = SimpleNamespace(content=reply, tool_calls=None, reasoning_content=None)
        choice = SimpleNamespace(message=message, finish_reason="stop", logprobs=None)
        return SimpleNamespace(choices=[choice], usage={"prompt_tokens": 0, "completion_tokens": 0,
                                                        "total_tokens": 0}, model="test/scripted")


out = {"standalone": standalone, "results": {}}
for q in json.loads(sys.argv[2]):
    lm = ScriptedLM()
    program = module.build(lm=lm)
    outputs, answers = program.run(question=q)
    out["results"][q] = {"outputs": outputs, "calls": lm.calls, "choice": program.choose(question=q),
                         "prediction": dict(module.build(lm=ScriptedLM())(question=q))}
print(json.dumps(out))
'''


def test_an_exported_portfolio_runs_standalone_and_answers_as_masforge_does(tmp_path: Any) -> None:
    import json
    import os
    import subprocess
    import sys

    from masforge.export import export_genome, read_marker

    genome = _portfolio(_by_length(60), escalation=[0, 1])
    path = tmp_path / "pf.py"
    path.write_text(export_genome(genome, "python", path.name), encoding="utf-8")
    assert read_marker(path)["kind"] == "portfolio" and read_marker(path)["genome_id"] == genome.id
    escalated = "Write add.\nassert add(2, 3) == 5"  # short: the quick solver, whose answer fails the example
    questions = ["Add 2 and 3.", QUESTION, escalated]
    harness = tmp_path / "harness.py"
    harness.write_text(EXPORT_HARNESS)
    proc = subprocess.run([sys.executable, str(harness), str(path), json.dumps(questions), json.dumps([RIGHT, WRONG])],
                          cwd=tmp_path, capture_output=True, text=True, timeout=600,
                          env={**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = json.loads(proc.stdout.strip().splitlines()[-1])
    assert report["standalone"]
    for q in questions:
        lm = Counting()
        mine = compile_genome(genome, _client(lm))(question=q)
        theirs = report["results"][q]
        assert theirs["outputs"] == mine.outputs == theirs["prediction"]
        assert theirs["choice"] == mine.trace.calls[0].outputs["indices"][0]
        assert Counter(theirs["calls"]) == Counter(lm.messages)  # the same prompts, so the same cached answers
    short, long, passed_on = (report["results"][q] for q in questions)
    assert short["outputs"] == {"answer": WRONG} and len(short["calls"]) == 1
    assert long["outputs"] == {"answer": RIGHT} and long["choice"] == 1
    assert passed_on["outputs"] == {"answer": RIGHT} and passed_on["choice"] == 0 and len(passed_on["calls"]) == 2


def test_a_portfolio_with_a_code_member_refuses_a_python_export_in_one_line() -> None:
    from masforge.export import export_genome

    genome = _portfolio(_constant(0), members=[load_seed("code_verify"), _members()[1]])
    genome = genome.model_copy(update={"inputs": load_seed("code_verify").inputs})
    with pytest.raises(GenomeError, match="is a code genome, which a portfolio export cannot carry yet"):
        export_genome(genome, "python", "x.py")


def test_an_exported_portfolio_evaluates_like_its_genome(tmp_path: Any) -> None:
    from masforge.evaluators.runner import Evaluator
    from masforge.evaluators.tasks import Task
    from masforge.export import export_genome, load_exported

    coef = [0.0] * feature_count(256)
    coef[256 + NUMERIC_FEATURES.index("doctest_lines")] = 10.0  # questions with doctests go to the careful solver
    genome = _portfolio(Router(classes=[0, 1], coef=[coef], intercept=[-0.5]))
    path = tmp_path / "pf.py"
    path.write_text(export_genome(genome, "python", path.name), encoding="utf-8")
    kinds = _kinds_task(12)
    task = Task("right", {"test": kinds.split("test")}, metric=lambda ex, out: float("a + b" in str(out.get("answer"))))
    mine = Evaluator(task, _client(Counting()), split="test").evaluate(genome)
    theirs = Evaluator(task, _client(Counting()), split="test").evaluate(load_exported(path))
    assert mine.example_scores() == theirs.example_scores()
    assert mine.score == theirs.score == 0.5  # the code questions (half) are solved, by the careful solver
    assert mine.llm_calls == theirs.llm_calls == len(task.split("test"))


def test_the_run_report_lists_a_portfolios_members(tmp_path: Any) -> None:
    from masforge.archive.store import Archive
    from masforge.report.data import _top_systems

    genome = _portfolio(_constant(1))
    with Archive.open(tmp_path / "archive", create=True) as archive:
        archive.add(genome)
        [item] = _top_systems(archive, [{"id": genome.id, "parents": []}])
    assert item.agents == [f"member 0: quick ({_members()[0].short_id})",
                           f"member 1: careful ({_members()[1].short_id})"]


def test_the_call_estimate_of_a_portfolio_is_its_costliest_pick_or_its_whole_escalation() -> None:
    from masforge.genome.graph import lm_calls_per_example

    five = parse_genome_text(CAREFUL.replace("instructions: Check every step.}", "copies: 5}"))
    assert lm_calls_per_example(_portfolio(_constant(0), members=[_members()[0], five])) == 1.0
    assert lm_calls_per_example(_portfolio(_by_length(10), members=[_members()[0], five])) == 5.0
    assert lm_calls_per_example(_portfolio(_constant(0), [0, 1], members=[_members()[0], five])) == 6.0
