"""Tasks, data loaders and metrics: hand-checked metric cases, every built-in task offline, splits,
error messages, custom tasks."""

from __future__ import annotations

import hashlib
import importlib.util
import io
import json
from pathlib import Path

import pytest

from masforge.cache_root import CACHE_ENV
from masforge.errors import DataError, TaskError
from masforge.evaluators import datasets
from masforge.evaluators.benchmarks.drop import Drop
from masforge.evaluators.benchmarks.gsm8k import GSM8K
from masforge.evaluators.benchmarks.hotpotqa import HotpotQA
from masforge.evaluators.benchmarks.humaneval import HumanEval
from masforge.evaluators.benchmarks.math500 import Math500
from masforge.evaluators.benchmarks.mbpp import MBPP
from masforge.evaluators.benchmarks.mgsm import MGSM
from masforge.evaluators.benchmarks.mmlu import MMLU
from masforge.evaluators.datasets import Files
from masforge.evaluators.metrics import (
    METRICS,
    Score,
    contains,
    drop_f1,
    exact_match,
    extract_boxed,
    extract_code,
    extract_number,
    f1_tokens,
    grid_match,
    math_equal,
    multiple_choice_letter,
    normalize_math,
    normalize_text,
    numeric_match,
    parse_grid,
)
from masforge.evaluators.tasks import (
    SPLITS,
    Example,
    Task,
    get_task,
    list_tasks,
    register_task,
)

HAS_SANDBOX = importlib.util.find_spec("masforge.sandbox.runner") is not None
needs_sandbox = pytest.mark.skipif(not HAS_SANDBOX, reason="masforge/sandbox/runner.py is not there yet")

# ---------------------------------------------------------------------------------------------
# Text metrics
# ---------------------------------------------------------------------------------------------


def test_normalize_text_squad_style():
    assert normalize_text("The  Cat, sat!") == "cat sat"
    assert normalize_text("An apple a day") == "apple day"
    assert normalize_text("  U.S.A.  ") == "usa"
    assert normalize_text("") == ""


def test_exact_match_and_contains():
    assert exact_match("The Eiffel Tower.", "eiffel tower") == 1.0
    assert exact_match("Eiffel", "Eiffel Tower") == 0.0
    assert exact_match("paris", ["London", "Paris"]) == 1.0
    assert contains("It is the Eiffel Tower, I think", "eiffel tower") == 1.0
    assert contains("Eiffelstein", "eiffel") == 0.0  # whole words only


def test_f1_tokens_hand_checked():
    # pred {cat, sat}, gold {cat, sat, down}: P = 2/2, R = 2/3, F1 = 0.8
    assert f1_tokens("the cat sat", "cat sat down") == pytest.approx(0.8)
    assert f1_tokens("w x y z", "w x") == pytest.approx(2 * 0.5 * 1 / 1.5)  # P 1/2, R 1
    assert f1_tokens("a b c d", "a b") == pytest.approx(0.5)  # "a" is an article: P 1/3, R 1
    assert f1_tokens("nothing shared", "other words") == 0.0
    assert f1_tokens("x y", ["z", "x y"]) == 1.0  # max over golds
    assert f1_tokens("", "") == 1.0


def test_drop_f1_hand_checked():
    assert drop_f1("3", ["3.0"]) == 1.0  # numbers normalised as floats
    assert drop_f1("the 3 cats", "3 cats") == 1.0  # articles dropped
    assert drop_f1("4 cats", "3 cats") == 0.0  # gold number missing from prediction -> 0
    assert drop_f1("New York City", "New York") == pytest.approx(0.8)  # P 2/3, R 1
    assert drop_f1("Pakistani and Filipino", ["Pakistanis and Filipinos", "Pakistani and Filipino"]) == 1.0
    assert drop_f1("1,000 people", "1000") == pytest.approx(2 * 0.5 * 1 / 1.5)
    assert drop_f1("well-known", "well known") == 1.0  # hyphen splits tokens


# ---------------------------------------------------------------------------------------------
# Numbers
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("The answer is 42.", 42.0),
        ("#### 1,234", 1234.0),
        ("She pays $1,234.50 in total", 1234.5),
        ("x = -3", -3.0),
        ("3/4", 0.75),
        ("It is \\frac{3}{4} of the cake", 0.75),
        ("5-3 = 2", 2.0),
        ("−7 degrees", -7.0),
        (".5", 0.5),
        ("#### 42\nthen 17 more words", 42.0),
        ("first 3 then 10 apples", 10.0),
        (18, 18.0),
        ("no digits here", None),
        (None, None),
    ],
)
def test_extract_number(text, expected):
    assert extract_number(text) == expected


def test_numeric_match():
    assert numeric_match("so 18 dollars", "18")
    assert numeric_match("18.0000000001", 18)
    assert numeric_match("#### 70,000", "70000")
    assert not numeric_match("17", "18")
    assert not numeric_match("none", "18")


# ---------------------------------------------------------------------------------------------
# MATH
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (r"so $\boxed{\frac{1}{\sqrt{2}}}$.", r"\frac{1}{\sqrt{2}}"),
        (r"\boxed{1} first, then \boxed{2}", "2"),
        (r"\boxed{\left( 3, \frac{\pi}{2} \right)}", r"\left( 3, \frac{\pi}{2} \right)"),
        (r"\boxed 5", "5"),
        ("x is $5$", "5"),
        ("work\nThe answer is 7.", "7"),
        (r"\fbox{12}", "12"),
        ("", None),
    ],
)
def test_extract_boxed(text, expected):
    assert extract_boxed(text) == expected


@pytest.mark.parametrize(
    ("pred", "gold"),
    [
        ("0.5", r"\frac12"),
        (r"\dfrac{1}{2}", "1/2"),
        (r"\left( 3, \frac{\pi}{2} \right)", r"(3,\frac{\pi}{2})"),
        (r"90^\circ", "90"),
        (r"10\text{ inches}", "10"),
        (r"\text{(C)}", "C"),
        ("x=5", "5"),
        ("10,000", "10000"),
        ("2,-3", "-3,2"),
        (r"\sqrt3", r"\sqrt{3}"),
        ("5.", "5"),
        (r"\text{Evelyn}", "Evelyn"),
        (r"-\frac{1}{4}", "-0.25"),
    ],
)
def test_math_equal_true(pred, gold):
    assert math_equal(pred, gold)


@pytest.mark.parametrize(
    ("pred", "gold"),
    [
        ("0.333", r"\frac13"),
        ("(1,2)", "(2,1)"),
        ("3", "4"),
        ("", "0"),
        (None, "1"),
        (r"\sqrt{2}", r"\sqrt{3}"),
    ],
)
def test_math_equal_false(pred, gold):
    assert not math_equal(pred, gold)


def test_normalize_math_basics():
    assert normalize_math(r"\frac12") == r"\frac{1}{2}"
    assert normalize_math(r"\left[ 1, 2 \right]") == "[1,2]"
    assert normalize_math(r"5\%") == "5"


# ---------------------------------------------------------------------------------------------
# Multiple choice, code, grids
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("The answer is (C)", "C"),
        ("C.", "C"),
        ("c) mitochondria", "C"),
        ("Answer: b", "B"),
        ("Answer: (b)", "B"),
        ("**Answer: D**", "D"),
        ("I think it is B.", "B"),
        (r"\boxed{D}", "D"),
        ("Options (A) and (B) are wrong, so (C)", "C"),
        ("The answer is a bit unclear, but it is D", "D"),
        ("A cell is small", None),
        ("hmm", None),
        ("", None),
    ],
)
def test_multiple_choice_letter(text, expected):
    assert multiple_choice_letter(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "text\n```python\ndef f():\n    return 1\n```\nmore\n```python\ndef g(): pass\n```",
            "def g(): pass",
        ),
        ("def h(): pass", "def h(): pass"),
        ("```\nx = 1\n```", "x = 1"),
        ("```python\ny = 2", "y = 2"),  # unclosed fence
        ("```py\nz = 3\n```\n```text\nnot code\n```", "z = 3"),  # python block preferred
        ("Here:\n```Python\nw = 4\n```", "w = 4"),
        (None, ""),
    ],
)
def test_extract_code(text, expected):
    assert extract_code(text) == expected


def test_parse_grid_and_grid_match():
    assert parse_grid("here: [[1,2],[3,4]].") == [[1, 2], [3, 4]]
    assert parse_grid("[1] then [[0]] and finally [[1, 2], [3, 4]]") == [[1, 2], [3, 4]]
    assert parse_grid("grid:\n1 2\n3 4\nend") == [[1, 2], [3, 4]]
    assert parse_grid("nothing") is None
    assert grid_match("[[0, 7], [7, 0]]", [[0, 7], [7, 0]])
    assert not grid_match("[[0, 7]]", [[0, 7], [7, 0]])


def test_metric_registry_names():
    for name in ("exact_match", "f1", "numeric", "math", "mc", "contains", "drop_f1", "code", "grid"):
        assert callable(METRICS[name])


GARBAGE = [None, "", "   ", "no idea, sorry", 12345, ["a", "b"], {"x": 1}]


@pytest.mark.parametrize(
    "metric", ["exact_match", "f1", "numeric", "math", "mc", "contains", "drop_f1", "grid"]
)
def test_unparsable_output_scores_zero_with_error(metric):
    targets = {
        "mc": "C",
        "grid": [[1, 2]],
        "numeric": "7",
        "math": r"\frac{1}{2}",
        "drop_f1": ["seventeen dogs"],
    }
    task = Task("t", {"test": []}, metric)
    ex = Example("t/0", {"question": "q"}, targets.get(metric, "the gold answer"))
    for garbage in GARBAGE:
        for outputs in ({"answer": garbage}, garbage, {}):
            score = task.score(ex, outputs)
            assert isinstance(score, Score)
            assert score.value == 0.0, (metric, garbage, score)
    assert "error" in task.score(ex, {"answer": None}).details
    assert "error" in task.score(ex, {}).details


def test_code_metric_without_code_scores_zero_before_running():
    task = Task("t", {"test": []}, "code")
    ex = Example("t/0", {"question": "q"}, "", {"test": "assert True"})
    score = task.score(ex, {"answer": "   "})
    assert score.value == 0.0 and score.details["error"] == "no code found in the answer"


def test_metric_that_raises_scores_zero():
    def broken(example, outputs):
        raise ValueError("boom")

    task = Task("t", {"test": []}, broken)
    score = task.score(Example("t/0", {"question": "q"}, "x"), {"answer": "x"})
    assert score.value == 0.0 and "boom" in score.details["error"]


# ---------------------------------------------------------------------------------------------
# Built-in tasks, offline
# ---------------------------------------------------------------------------------------------


def gold_text(name: str, ex: Example) -> str:
    """A model-like reply that carries the gold answer."""
    t = ex.target
    if name == "math500":
        return f"We compute. So the answer is $\\boxed{{{t}}}$."
    if name in ("gsm8k", "mgsm", "mgsm:de"):
        return f"First 12 + 3 = 15.\nAnswer: {t}"
    if name.startswith("mmlu"):
        return f"The answer is ({t})"
    if name == "drop":
        return t[0]
    if name == "arc":
        return "The output grid is:\n" + json.dumps(t)
    if name in ("mbpp", "humaneval"):
        return f"Here is the code:\n```python\n{t}\n```"
    return str(t)


WRONG = {
    "gsm8k": "Answer: -98765.4321",
    "mgsm": "Answer: -98765.4321",
    "mgsm:de": "Answer: -98765.4321",
    "math500": r"\boxed{-98765.4321}",
    "drop": "zebra xylophone",
    "hotpotqa": "zebra xylophone",
    "mmlu": "The answer is (Z) and none of the options",
    "mmlu:anatomy": "none of them",
    "arc": "[[9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9]]",
}
DATA_TASKS = ["gsm8k", "math500", "drop", "hotpotqa", "mgsm", "mgsm:de", "mmlu", "mmlu:anatomy", "arc"]


@pytest.mark.parametrize("name", DATA_TASKS)
def test_builtin_task_scores_its_gold_and_rejects_wrong(name):
    task = get_task(name)
    assert task.input_fields == ("question",) and task.output_field == "answer"
    sizes = task.sizes()
    assert all(sizes[s] > 0 for s in SPLITS), sizes
    examples = task.split("validation", limit=3) + task.split("test", limit=2)
    assert len(examples) == 5
    for ex in examples:
        assert isinstance(ex.inputs["question"], str) and len(ex.inputs["question"]) > 20
        good = task.score(ex, {"answer": gold_text(name, ex)})
        assert good.value == 1.0, (ex.id, good)
        bad = task.score(ex, {"answer": WRONG[name]})
        assert bad.value == 0.0, (ex.id, bad)


def test_builtin_prompts_carry_instructions():
    assert "A. " in get_task("mmlu:anatomy").split("test", limit=1)[0].inputs["question"]
    assert "\\boxed{}" in get_task("math500").split("test", limit=1)[0].inputs["question"]
    hotpot = get_task("hotpotqa").split("test", limit=1)[0].inputs["question"]
    assert "[10] " in hotpot and "Question:" in hotpot
    assert "Test input:" in get_task("arc").split("test", limit=1)[0].inputs["question"]
    drop_q = get_task("drop").split("test", limit=1)[0].inputs["question"]
    assert drop_q.startswith("Passage:") and not drop_q.rstrip().endswith("Answer:")


@pytest.mark.parametrize("name", ["mbpp", "humaneval"])
def test_code_tasks_load(name):
    task = get_task(name)
    ex = task.split("test", limit=1)[0]
    assert ex.meta["test"].strip()
    if name == "humaneval":
        assert ex.meta["entry_point"] in ex.inputs["question"] and "```python" in ex.inputs["question"]
    else:
        assert "assert" in ex.inputs["question"]  # one example test names the function


def test_humaneval_ships_with_its_package(monkeypatch):
    monkeypatch.delenv(datasets.ENV_DATA_DIR)
    assert get_task("humaneval").sizes() == {"train": 32, "validation": 32, "test": 100}


@needs_sandbox
@pytest.mark.parametrize("name", ["mbpp", "humaneval"])
def test_code_tasks_canonical_solution_passes_in_sandbox(name):
    task = get_task(name)
    for ex in task.split("test", limit=3):
        good = task.score(ex, {"answer": gold_text(name, ex)})
        assert good.value == 1.0, (ex.id, good.details)
    ex = task.split("test", limit=1)[0]
    bad = task.score(ex, {"answer": "```python\ndef nothing_useful():\n    return None\n```"})
    assert bad.value == 0.0 and bad.details.get("error")


@needs_sandbox
def test_humaneval_accepts_a_body_only_completion(monkeypatch):
    monkeypatch.delenv(datasets.ENV_DATA_DIR)  # the packaged set, whatever MASFORGE_DATA_DIR holds
    task = get_task("humaneval")
    ex = next(e for e in task.split("test") if e.meta["task_id"] == "HumanEval/0")
    body = ex.target[len(ex.meta["prompt"]) :]
    assert task.score(ex, {"answer": body}).value == 1.0


def test_published_split_sizes(full_data_dir):
    def sizes(name):
        return get_task(name, data_dir=full_data_dir).sizes()

    assert sizes("gsm8k") == {"train": 7273, "validation": 200, "test": 1319}
    assert sizes("math500") == {"train": 100, "validation": 100, "test": 300}
    assert sizes("hotpotqa") == {"train": 50, "validation": 50, "test": 100}
    assert sizes("mgsm:de") == {"train": 50, "validation": 50, "test": 150}
    assert sizes("mbpp") == {"train": 127, "validation": 43, "test": 257}


def test_arc_split_sizes():
    assert get_task("arc").sizes() == {"train": 311, "validation": 105, "test": 419}


@pytest.mark.parametrize("name", ["gsm8k", "mgsm", "mmlu:anatomy", "humaneval", "arc", "rg:leg_counting"])
def test_splits_deterministic_and_disjoint(name):
    first = get_task(name)
    second = get_task(name)
    ids = {}
    for split in SPLITS:
        a = [e.id for e in first.split(split)]
        assert a == [e.id for e in second.split(split)]
        assert len(set(a)) == len(a)
        ids[split] = set(a)
    assert not ids["train"] & ids["validation"]
    assert not ids["train"] & ids["test"]
    assert not ids["validation"] & ids["test"]


def test_seed_changes_the_cut_and_limit_is_a_prefix():
    a = [e.id for e in get_task("gsm8k", seed=0).split("validation")]
    b = [e.id for e in get_task("gsm8k", seed=1).split("validation")]
    assert a != b
    assert [e.id for e in get_task("gsm8k").split("validation", limit=7)] == a[:7]
    # the official test set stays the test split whatever the seed
    assert {e.id for e in get_task("gsm8k", seed=1).split("test")} == {
        e.id for e in get_task("gsm8k").split("test")
    }


def test_arc_keeps_a_task_in_one_split():
    task = get_task("arc")
    owners = {}
    for split in SPLITS:
        for ex in task.split(split):
            assert owners.setdefault(ex.meta["arc_task"], split) == split


def test_unknown_split_and_bad_limit():
    task = get_task("hotpotqa")
    with pytest.raises(TaskError, match="train, validation, test"):
        task.split("dev")
    with pytest.raises(TaskError):
        task.split("test", limit=-1)


# ---------------------------------------------------------------------------------------------
# reasoning-gym
# ---------------------------------------------------------------------------------------------


def test_rg_task_seeded_and_scores_gold():
    task = get_task("rg:leg_counting", seed=3, size=20)
    assert task.sizes() == {"train": 12, "validation": 4, "test": 4}
    exs = task.split("validation") + task.split("test", limit=2)
    for ex in exs:
        assert task.score(ex, {"answer": str(ex.target)}).value == 1.0
        assert task.score(ex, {"answer": "not a number"}).value == 0.0
        assert task.score(ex, {"answer": None}).value == 0.0
    again = get_task("rg:leg_counting", seed=3, size=20)
    assert [e.inputs["question"] for e in again.split("validation")] == [
        e.inputs["question"] for e in exs[:4]
    ]
    other = get_task("rg:leg_counting", seed=4, size=20)
    assert [e.inputs["question"] for e in other.split("validation")] != [
        e.inputs["question"] for e in exs[:4]
    ]
    arith = get_task("rg:basic_arithmetic", size=10)
    ex = arith.split("train", limit=1)[0]
    assert arith.score(ex, {"answer": ex.target}).value == 1.0


def test_rg_unknown_family_lists_families():
    with pytest.raises(TaskError, match="leg_counting"):
        get_task("rg:no_such_family")


# ---------------------------------------------------------------------------------------------
# Registry and errors
# ---------------------------------------------------------------------------------------------


def test_unknown_task_lists_known_names():
    with pytest.raises(TaskError) as info:
        get_task("gsm9k")
    message = str(info.value)
    for name in ("gsm8k", "math500", "humaneval", "mbpp", "arc", "rg:<family>", "mgsm:<lang>"):
        assert name in message
    with pytest.raises(TaskError, match="bn, de"):
        get_task("mgsm:xx")
    with pytest.raises(TaskError, match="anatomy"):
        get_task("mmlu:astrology")
    with pytest.raises(TaskError, match="no option 'size'"):
        get_task("gsm8k", size=3)


def test_list_and_register_tasks(monkeypatch: pytest.MonkeyPatch):
    from masforge.evaluators import registry

    monkeypatch.setattr(registry, "_REGISTRY", dict(registry._REGISTRY))  # the test task leaves with the test
    names = [n for n, _ in list_tasks()]
    for name in ("gsm8k", "math500", "drop", "hotpotqa", "mgsm", "mmlu", "mbpp", "humaneval", "arc"):
        assert name in names
    register_task("tiny-test-task", lambda seed=0: Task.from_callable(lambda o: 1.0, name="tiny"), "a test")
    assert ("tiny-test-task", "a test") in list_tasks()
    assert get_task("tiny-test-task").name == "tiny"


def _write(path: Path, lines: list[str]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_broken_jsonl_line_is_named(tmp_path):
    path = _write(
        tmp_path / "data.jsonl",
        ['{"question": "a", "answer": "1"}', '{"question": "b", "answer": "2"}', '{"question": "c", "answ'],
    )
    with pytest.raises(DataError) as info:
        Task.from_jsonl(path)
    assert f"{path}:3:" in str(info.value)

    path = _write(
        tmp_path / "missing.jsonl", ['{"question": "a", "answer": "1"}', '{"q": "b", "answer": "2"}']
    )
    with pytest.raises(DataError, match=r"missing\.jsonl:2: missing field 'question'"):
        Task.from_jsonl(path)


def test_broken_builtin_files_are_named(tmp_path):
    _write(
        tmp_path / "gsm8k" / "train.jsonl",
        ['{"question": "q", "answer": "x\\n#### 4"}', '{"question": "q", "answer": "x\\n#### 4"}', "{oops"],
    )
    _write(tmp_path / "gsm8k" / "test.jsonl", ['{"question": "q", "answer": "no final answer"}'])
    with pytest.raises(DataError, match=r"train\.jsonl:3: invalid JSON"):
        get_task("gsm8k", data_dir=tmp_path).sizes()
    _write(tmp_path / "gsm8k" / "train.jsonl", ['{"question": "q", "answer": "x\\n#### 4"}'])
    with pytest.raises(DataError, match=r"test\.jsonl:1: .*####"):
        get_task("gsm8k", data_dir=tmp_path).sizes()

    _write(tmp_path / "mgsm" / "mgsm_en.tsv", ["q one\t1", "q two\t2", "q three without answer"])
    with pytest.raises(DataError, match=r"mgsm_en\.tsv:3: expected 2 tab-separated columns"):
        get_task("mgsm:en", data_dir=tmp_path).sizes()

    _write(
        tmp_path / "mmlu" / "test" / "anatomy_test.csv",
        ["question,choice0,choice1,choice2,choice3,answer", "q,a,b,c,d,0", "q,a,b,c,1"],
    )
    with pytest.raises(DataError, match=r"anatomy_test\.csv:3: expected 6 columns"):
        get_task("mmlu:anatomy", data_dir=tmp_path).sizes()


def test_missing_file_names_path_and_fix(tmp_path):
    with pytest.raises(DataError) as info:
        get_task("math500", data_dir=tmp_path).sizes()
    message = str(info.value)
    assert str(tmp_path / "math500" / "test.jsonl") in message
    assert "--data-dir" in message and "MASFORGE_DATA_DIR" in message


def test_env_data_dir_takes_precedence(tmp_path, monkeypatch):
    _write(tmp_path / "hotpotqa" / "hotpotqa_validate.jsonl", [])
    rows = [
        json.dumps({"_id": f"id{i}", "question": f"Q{i}?", "answer": f"ans {i}", "context": [["T", ["S."]]]})
        for i in range(10)
    ]
    _write(tmp_path / "hotpotqa" / "hotpotqa_validate.jsonl", rows)
    monkeypatch.setenv(datasets.ENV_DATA_DIR, str(tmp_path))
    task = get_task("hotpotqa")
    all_ids = {e.id for s in SPLITS for e in task.split(s)}
    assert all_ids == {f"hotpotqa/id{i}" for i in range(10)}


def test_loaders_read_the_fixture_files(fixture_data_dir):
    """Every file loader on the committed fixtures (each set's real file format)."""
    d = fixture_data_dir
    gsm = GSM8K().records(d)
    assert (len(gsm["train"]), len(gsm["test"])) == (8, 4)
    assert gsm["train"][7].target == "1030" and gsm["test"][0].target == "32"  # '#### 1,030' loses its comma
    math = Math500().records(d)["test"]
    assert len(math) == 9 and math[0].target == "\\frac{5}{6}" and math[0].id == "math500/test/prealgebra/901"
    drop = Drop().records(d)["dev"]  # gzipped
    assert len(drop) == 9 and drop[1].target == ["2800", "2,800"]
    hotpot = HotpotQA().records(d)["validate"]
    assert len(hotpot) == 9 and len(hotpot[0].fields["paragraphs"]) == 10 and hotpot[0].id == "hotpotqa/fixture00"
    assert [len(MGSM().records(d, lang)["test"]) for lang in ("de", "en", "ja")] == [9, 2, 2]
    assert MGSM().records(d, "de")["test"][8].target == "24000"
    assert len(MGSM().records(d)["test"]) == 9 + 10 * 2  # every language in turn
    assert MMLU().parts(Files("mmlu", None, d)) == ["abstract_algebra", "anatomy"]
    mmlu = MMLU().records(d, "abstract_algebra")["test"]
    assert mmlu[2].fields["choices"][0] == "True, True" and mmlu[2].target == "C"  # a quoted CSV field
    mbpp = MBPP().records(d)  # the sanitized set is preferred
    assert {k: sorted(r.meta["task_id"] for r in v) for k, v in mbpp.items()} == {
        "train": [2, 7, 605], "validation": [512, 530, 545], "test": [11, 17, 101, 230]}
    assert "import math" in next(r for r in mbpp["test"] if r.meta["task_id"] == 11).meta["test"]
    humaneval = HumanEval().records(d)["test"]
    assert len(humaneval) == 6 and humaneval[0].meta["entry_point"] == "add_numbers"
    with pytest.raises(TaskError, match="MGSM languages: bn, de"):
        MGSM().records(d, "xx")


def test_mbpp_full_set_format(fixture_data_dir, tmp_path):
    (tmp_path / "mbpp").mkdir()
    (tmp_path / "mbpp" / "mbpp.jsonl").write_bytes((fixture_data_dir / "mbpp" / "mbpp.jsonl").read_bytes())
    mbpp = MBPP().records(tmp_path)
    assert sum(len(v) for v in mbpp.values()) == 10
    gcd = next(r for r in mbpp["test"] if r.meta["task_id"] == 11)
    assert gcd.fields["prompt"].startswith("Write a function to find the greatest")
    assert "import math" in gcd.meta["test"]


def test_data_comes_from_the_cache_when_no_folder_is_given(fixture_data_dir, tmp_path, monkeypatch):
    monkeypatch.delenv(datasets.ENV_DATA_DIR)
    monkeypatch.setenv(CACHE_ENV, str(tmp_path))
    cached = tmp_path / "data" / "math500" / "test.jsonl"
    cached.parent.mkdir(parents=True)
    cached.write_bytes((fixture_data_dir / "math500" / "test.jsonl").read_bytes())
    assert datasets.locate("math500", ["math500/test.jsonl"]) == cached


class _Response(io.BytesIO):
    """What urlopen returns, for a download that serves ``data``."""


def _serve(monkeypatch, data=None, error=None):
    calls = []

    def urlopen(request, timeout=None):
        calls.append(request.full_url)
        if error is not None:
            raise error
        return _Response(data)

    monkeypatch.setattr(datasets.urllib.request, "urlopen", urlopen)
    return calls


@pytest.fixture
def online(tmp_path, monkeypatch):
    """No data folder, an empty cache, downloads allowed (urlopen is replaced by each test)."""
    monkeypatch.delenv(datasets.ENV_DATA_DIR)
    monkeypatch.delenv(datasets.ENV_OFFLINE, raising=False)
    monkeypatch.setenv(CACHE_ENV, str(tmp_path))
    return tmp_path / "data"


def test_download_is_checked_against_its_sha256(online, fixture_data_dir, monkeypatch):
    body = (fixture_data_dir / "math500" / "test.jsonl").read_bytes()
    source = datasets.Source("math500/test.jsonl", "https://example.invalid/test.jsonl",
                             hashlib.sha256(body).hexdigest())
    monkeypatch.setattr(Math500, "download", datasets.Download((source,)))
    calls = _serve(monkeypatch, data=body)
    assert len(get_task("math500").split("test")) > 0
    assert calls == [source.url] and (online / "math500" / "test.jsonl").read_bytes() == body

    (online / "math500" / "test.jsonl").unlink()
    _serve(monkeypatch, data=body + b"{}\n")  # the source changed
    with pytest.raises(DataError) as info:
        datasets.locate("math500", ["math500/test.jsonl"], download=Math500.download)
    message = str(info.value)
    assert "sha256" in message and datasets.ENV_DATA_DIR in message and "\n" not in message
    assert not (online / "math500").exists() or not any((online / "math500").iterdir())


def test_failed_download_is_one_line_saying_how_to_use_a_local_copy(online, monkeypatch):
    import urllib.error

    _serve(monkeypatch, error=urllib.error.URLError(OSError(-3, "Temporary failure in name resolution")))
    with pytest.raises(DataError) as info:
        get_task("gsm8k").sizes()
    message = str(info.value)
    assert "\n" not in message and len(message) < 200, message
    assert "gsm8k" in message and datasets.ENV_DATA_DIR in message and "--data-dir" in message
    assert "name resolution" in message


def test_offline_never_downloads(online, monkeypatch):
    monkeypatch.setenv(datasets.ENV_OFFLINE, "1")
    calls = _serve(monkeypatch, data=b"")
    with pytest.raises(DataError, match=datasets.ENV_OFFLINE):
        get_task("drop").sizes()
    assert calls == []


# ---------------------------------------------------------------------------------------------
# Custom tasks
# ---------------------------------------------------------------------------------------------


def test_from_jsonl(tmp_path):
    rows = [{"q": f"What is {i}+{i}?", "ctx": "math", "a": str(2 * i), "id": i} for i in range(10)]
    path = _write(tmp_path / "add.jsonl", [json.dumps(r) for r in rows])
    task = Task.from_jsonl(path, input={"question": "q", "context": "ctx"}, target="a", metric="numeric")
    assert task.name == "add" and task.input_fields == ("question", "context")
    assert task.sizes() == {"train": 6, "validation": 2, "test": 2}
    again = Task.from_jsonl(path, input={"question": "q", "context": "ctx"}, target="a", metric="numeric")
    assert [e.id for e in task.split("train")] == [e.id for e in again.split("train")]
    ex = task.split("test")[0]
    assert ex.inputs["context"] == "math"
    assert task.score(ex, {"answer": f"It is {ex.target}"}).value == 1.0
    assert task.score(ex, {"answer": "It is 999"}).value == 0.0

    simple = Task.from_jsonl(path, input="q", target="a", metric="exact_match", name="x", seed=5)
    ex = simple.split("train")[0]
    assert simple.score(ex, {"answer": ex.target}).value == 1.0

    custom = Task.from_jsonl(path, input="q", target="a", metric=lambda e, o: float(o["answer"] == e.target))
    ex = custom.split("train")[0]
    assert custom.score(ex, {"answer": ex.target}).value == 1.0
    with pytest.raises(TaskError, match="exact_match"):
        Task.from_jsonl(path, input="q", target="a", metric="bleu")


def test_from_callable_pure_objective():
    task = Task.from_callable(lambda outputs: len(str(outputs.get("answer", ""))) / 10)
    assert task.sizes() == {"train": 1, "validation": 1, "test": 1}
    ex = task.split("train")[0]
    assert ex.inputs == {"question": ""}
    assert task.score(ex, {"answer": "abcde"}).value == pytest.approx(0.5)
    clipped = task.score(ex, {"answer": "x" * 50})
    assert clipped.value == 1.0 and clipped.details["raw"] == pytest.approx(5.0)
    assert task.score(ex, {"answer": 3}).value == pytest.approx(0.1)


def test_from_callable_with_examples_and_other_output_field():
    def right(outputs, example):
        return float(outputs.get("answer") == example.target)

    examples = [{"question": "2+2", "target": "4"}, {"question": "3+3", "answer": "6", "id": "six"}]
    task = Task.from_callable(right, examples=examples, name="sums")
    test = task.split("test")
    assert [e.id for e in test] == ["sums/0", "six"]
    assert task.score(test[0], {"answer": "4"}).value == 1.0
    assert task.score(test[1], {"answer": "5"}).value == 0.0
    task.output_field = "result"
    assert task.score(test[1], {"result": "6"}).value == 1.0
    with pytest.raises(TaskError, match="lacks input field"):
        Task.from_callable(right, examples=[{"prompt": "x"}])
