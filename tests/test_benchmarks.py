"""The built-in benchmarks, pinned: each task's name, metric, split sizes, the prompt of its first test example and a
digest of every example (id, prompt, target) on the committed fixtures, and what its metric makes of a right and a
wrong answer. Written before the benchmarks moved to one module each; a change to any of these is a change of
behaviour, not a refactor."""

from __future__ import annotations

import hashlib
import importlib.util
import json
import sys

import pytest

from masforge.errors import DataError, TaskError
from masforge.evaluators.splits import SPLITS
from masforge.evaluators.tasks import describe_tasks, get_task

HAS_SANDBOX = importlib.util.find_spec("masforge.sandbox.runner") is not None


@pytest.fixture(autouse=True)
def _on_the_fixtures(monkeypatch: pytest.MonkeyPatch, fixture_data_dir) -> None:
    """The pins are of the committed fixtures: CI's full data sets beside the checkout must not replace them."""
    monkeypatch.setenv("MASFORGE_DATA_DIR", str(fixture_data_dir))

# name: (train, validation, test) sizes on the fixtures, metric name, id of the first test example, sha256 of
# every example's [split, id, prompt, target] as JSON in split order
PINNED: dict[str, tuple[tuple[int, int, int], str, str, str]] = {
    "gsm8k": ((4, 4, 4), "numeric", "gsm8k/test/0",
              "c751ac7c13928568c7641264b4d49723d65844b97e20f018132c575c3f1a379e"),
    "math500": ((3, 3, 3), "math", "math500/test/number_theory/907",
                "630d6f044c99397e57e709320d1be6177d11b6e1e23e56cb6824f1580f46fbca"),
    "drop": ((3, 3, 3), "drop_f1", "drop/dev/2", "279fb8338fff2e7ec57c9f745c8af6c2cba1051e3edbd0025559af5f0fd30513"),
    "hotpotqa": ((3, 3, 3), "f1", "hotpotqa/fixture06",
                 "5f0dd002cb0382b089f26ba309ee3818338a48aa37fc08df8338cc359e8f198b"),
    "mgsm": ((9, 9, 11), "numeric", "mgsm/ru/0", "ce3106d4b91ce61e4fdae93d965b7624dfe4f8af17b40fc52fbf44cdea3acabb"),
    "mgsm:de": ((3, 3, 3), "numeric", "mgsm/de/6",
                "f435f408dda753e03d3850af11c3354192ad729456d941203185ed55b998a0b4"),
    "mmlu": ((6, 6, 8), "mc", "mmlu/anatomy/1", "0cef5e69560e2582569a19fab3061dd6960da3a77c2f241c2ce530eef165a502"),
    "mmlu:anatomy": ((3, 3, 9), "mc", "mmlu/anatomy/14",
                     "e255216e0828b8e5e4e0b39ea26906fc867b397d8472a86a14c9aee0a6a382e6"),
    "mbpp": ((3, 3, 4), "code", "mbpp/11", "228861539f8283f4f0540b57a16377e85a440f852c36291e85fd547f225b4709"),
    "humaneval": ((2, 2, 2), "code", "humaneval/0",
                  "348904bf9c8d3d7bb73d53131edb232181528ca5d6c8e8b1593812b6ef4c48ae"),
    "arc": ((311, 105, 419), "grid", "arc/evaluation/891232d6/0",
            "68c0ea5bc36474fb1fa07133730b5957b3f1eb7a4d009f5f7584eaeae363a189"),
    "rg:leg_counting": ((300, 100, 100), "rg_score_answer", "rg:leg_counting/62680561/100",
                        "57228f3422dc1f14733341be32f795f2e33152a495a2a06a34e421135551d7e6"),
}

_GSM_INSTRUCTION = ("\n\nSolve the problem step by step. End with the final answer as a number on the last line, "
                    'written as "Answer: <number>".')


def _fillers(first_number: int, first: int, last: int) -> str:
    """HotpotQA fixture distractors ``first``..``last``, numbered from ``first_number`` in the prompt."""
    return "".join(f"[{first_number + k - first}] Filler paragraph {k}\nFiller paragraph {k} is a short distractor. "
                   "It mentions nothing useful.\n\n" for k in range(first, last + 1))


# The prompt of each task's first test example, as written before the move.
PROMPTS: dict[str, str] = {
    "gsm8k": "Ana has 25 marbles. She loses 7 and then finds twice as many as she lost. How many marbles does she "
             "have?" + _GSM_INSTRUCTION,
    "math500": "What is the smallest prime greater than $20$?\n\nSolve the problem step by step and put the final "
               "answer in \\boxed{}.",
    "drop": "Passage: The treaty was signed in March 1721, ending a war that had begun in 1700.\nQuestion: How many "
            "years did the war last?\n\nAnswer the question from the passage. Give only the answer: a number, a date "
            "or the exact words from the passage, as briefly as possible.",
    "hotpotqa": "Answer the question using the paragraphs below.\n\n[1] Pell Festival\nThe Pell Festival is held every "
                "summer in Grayford.\n\n" + _fillers(2, 1, 4) + "[6] Grayford\nGrayford is a town with a "
                "population of 4,200.\n\n" + _fillers(7, 5, 8) + "Question: What is the population of the "
                "town where the Pell Festival is held?\nGive only the answer, a short phrase of a few words.",
    "mgsm": "У Анны 4 яблока, она купила ещё 5. Сколько яблок у неё теперь?" + _GSM_INSTRUCTION,
    "mgsm:de": "Tim teilt 24 Bonbons gerecht unter 3 Freunden auf. Wie viele Bonbons bekommt jeder?" + _GSM_INSTRUCTION,
    "mmlu": "The following is a multiple choice question about anatomy.\n\nHow many chambers does the human heart "
            "have?\n\nA. Two\nB. Three\nC. Four\nD. Five\n\nAnswer with the letter of the correct option (A, B, C or "
            "D).",
    "mmlu:anatomy": "The following is a multiple choice question about anatomy.\n\nInsulin is secreted by cells of "
                    "the\n\nA. adrenal cortex\nB. thyroid gland\nC. pancreas\nD. pituitary gland\n\nAnswer with the "
                    "letter of the correct option (A, B, C or D).",
    "mbpp": "Write a function to find the greatest common divisor of two positive integers.\nYour code should pass "
            "this test:\nassert gcd_of(12, 18) == 6\n\nWrite the complete Python function in a ```python code block.",
    "humaneval": "Complete the following Python function. Return the complete function (its signature and body, and "
                 "any imports it needs) in a ```python code block.\n\n```python\ndef add_numbers(a: int, b: int) -> "
                 'int:\n    """ Return the sum of a and b.\n    >>> add_numbers(2, 3)\n    5\n    """\n```',
    "arc": "Find the rule that turns each input grid into its output grid in the examples below, then apply it to the "
           "test input. Grids are rows of digits 0-9 (colours).\n\nExample 1 input:\n0 0 0 7 0 0 0 0 7 0 7 0 0 0 0 0 "
           "0 0 0\n",  # (the start of it: ARC's grids are long)
    "rg:leg_counting": "Your task is to count how many legs there are in total when given a list of animals.\n\nNow, "
                       "how many legs are there in total if you have 9 grasshoppers, 12 giraffes, 10 starfishs, 3 "
                       "insects, 7 butterflys, 3 ants, 11 flatworms, 10 shrimps?\n",
}

# What each metric makes of two answers to the first test example (code answers are built from the gold below).
ANSWERS: dict[str, tuple[tuple[str, float], ...]] = {
    "gsm8k": (("Answer: 32", 1.0), ("Answer: 31", 0.0)),
    "math500": (("\\boxed{23}", 1.0), ("\\boxed{29}", 0.0)),
    "drop": (("21", 1.0), ("21 years or 20", 0.4)),
    "hotpotqa": (("4,200", 1.0), ("about 4,200 people", 0.5)),
    "mgsm": (("Answer: 9", 1.0), ("Answer: 8", 0.0)),
    "mgsm:de": (("8", 1.0), ("9", 0.0)),
    "mmlu": (("C", 1.0), ("B", 0.0)),
    "mmlu:anatomy": (("The answer is C.", 1.0), ("D", 0.0)),
    "arc": (("[[0, 1], [1, 0]]", 0.0),),
    "rg:leg_counting": (("330", 1.0), ("The total is 330 legs", 0.375)),
}


def _digest(task_name: str) -> str:
    task = get_task(task_name)
    digest = hashlib.sha256()
    for split in SPLITS:
        for ex in task.split(split):
            digest.update(json.dumps([split, ex.id, ex.inputs["question"], ex.target], default=str).encode())
    return digest.hexdigest()


@pytest.mark.parametrize("name", sorted(PINNED))
def test_each_builtin_task_is_what_it_was(name: str) -> None:
    sizes, metric, first_id, digest = PINNED[name]
    task = get_task(name)
    assert (task.name, task.metric_name, task.input_fields, task.output_field) == (name, metric, ("question",),
                                                                                   "answer")
    assert tuple(task.sizes()[s] for s in SPLITS) == sizes
    first = task.split("test", limit=1)[0]
    assert first.id == first_id
    prompt = first.inputs["question"]
    assert prompt.startswith(PROMPTS[name]) if name == "arc" else prompt == PROMPTS[name]
    assert _digest(name) == digest


@pytest.mark.parametrize("name", sorted(ANSWERS))
def test_each_builtin_metric_scores_as_it_did(name: str) -> None:
    task = get_task(name)
    first = task.split("test", limit=1)[0]
    if name == "arc":
        assert task.score(first, {"answer": json.dumps(first.target)}).value == 1.0
    for answer, value in ANSWERS[name]:
        assert task.score(first, {"answer": answer}).value == pytest.approx(value), answer


@pytest.mark.skipif(not HAS_SANDBOX, reason="masforge/sandbox/runner.py is not there")
@pytest.mark.parametrize("name", ["mbpp", "humaneval"])
def test_each_code_metric_scores_as_it_did(name: str) -> None:
    task = get_task(name)
    first = task.split("test", limit=1)[0]
    assert task.score(first, {"answer": f"```python\n{first.target}\n```"}).value == 1.0
    assert task.score(first, {"answer": "```python\ndef nothing_useful():\n    return None\n```"}).value == 0.0


def test_registry_lists_what_it_did() -> None:
    assert [name for name, _, _ in describe_tasks()][:12] == [
        "gsm8k", "math500", "drop", "hotpotqa", "mgsm", "mgsm:<lang>", "mmlu", "mmlu:<subject>", "mbpp", "humaneval",
        "arc", "rg:<family>"]
    arc = get_task("arc", version="kaggle")
    assert (arc.name, arc.metric_name) == ("arc@kaggle", "grid")


def test_stated_sizes_are_the_published_sets(full_data_dir) -> None:
    """What `masforge tasks` says of each whole benchmark is what the published set gives (needs the full sets)."""
    stated = {name: sizes for name, _, sizes in describe_tasks()}
    for name in ("gsm8k", "math500", "drop", "hotpotqa", "mgsm", "mmlu", "mbpp", "humaneval", "arc"):
        sizes = get_task(name, data_dir=full_data_dir).sizes()
        assert stated[name] == " / ".join(str(sizes[s]) for s in SPLITS), name
    assert stated["mgsm:<lang>"] == "50 / 50 / 150"
    sizes = get_task("mgsm:de", data_dir=full_data_dir).sizes()
    assert (sizes["train"], sizes["validation"], sizes["test"]) == (50, 50, 150)


# ------------------------------------------------------------------------------------------- a new benchmark

NEW_BENCHMARK = '''
from masforge.evaluators.benchmark import Benchmark, Cut, Record, benchmark
from masforge.evaluators.data_files import iter_jsonl, require
from masforge.evaluators.datasets import parse_once


@benchmark
class Capitals(Benchmark):
    name = "capitals"
    description = "capital cities; exact match"
    sizes = "6 / 2 / 2"
    metric = "exact_match"
    template = "What is the capital of {country}? Answer with the city only."
    plan = (Cut("validation", "all", 2), Cut("test", "all", 2), Cut("train", "all", None))

    def load(self, files):
        path = files("capitals/capitals.jsonl")
        return {"all": parse_once("capitals", path, lambda: [
            Record(f"capitals/{i}", {"country": require(obj, "country", f"{path}:{n}")},
                   require(obj, "capital", f"{path}:{n}")) for i, (n, obj) in enumerate(iter_jsonl(path))])}
'''
CAPITALS = [("France", "Paris"), ("Japan", "Tokyo"), ("Kenya", "Nairobi"), ("Peru", "Lima"), ("Chile", "Santiago"),
            ("Egypt", "Cairo"), ("Spain", "Madrid"), ("Nepal", "Kathmandu"), ("Ghana", "Accra"), ("Cuba", "Havana")]


@pytest.fixture
def new_benchmark_package(tmp_path, monkeypatch):
    """A package holding one file, ``capitals.py`` (a benchmark), and that benchmark's data folder; the
    registry is restored after the test."""
    from masforge.evaluators import registry

    monkeypatch.setattr(registry, "_REGISTRY", dict(registry._REGISTRY))
    package = tmp_path / "more_benchmarks"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "capitals.py").write_text(NEW_BENCHMARK)
    monkeypatch.syspath_prepend(str(tmp_path))
    data = tmp_path / "data" / "capitals" / "capitals.jsonl"
    data.parent.mkdir(parents=True)
    data.write_text("".join(json.dumps({"country": c, "capital": city}) + "\n" for c, city in CAPITALS))
    yield package, data.parent.parent
    for name in ("more_benchmarks.capitals", "more_benchmarks"):
        sys.modules.pop(name, None)


def test_a_new_benchmark_is_one_file(new_benchmark_package) -> None:
    from masforge.evaluators.benchmark import import_all

    package, data_dir = new_benchmark_package
    assert import_all(package.name, [str(package)]) == ["capitals"]
    assert ("capitals", "capital cities; exact match", "6 / 2 / 2") in describe_tasks()
    task = get_task("capitals", data_dir=data_dir)
    assert (task.name, task.metric_name, task.sizes()) == ("capitals", "exact_match",
                                                           {"train": 6, "validation": 2, "test": 2})
    ids = [ex.id for split in SPLITS for ex in task.split(split)]
    assert sorted(ids) == sorted(f"capitals/{i}" for i in range(10))
    first = task.split("test", limit=1)[0]
    country, capital = CAPITALS[int(first.id.split("/")[1])]
    assert first.inputs["question"] == f"What is the capital of {country}? Answer with the city only."
    assert task.score(first, {"answer": capital}).value == 1.0
    assert task.score(first, {"answer": "Atlantis"}).value == 0.0
    with pytest.raises(TaskError, match="task capitals takes no option 'size'; options: none"):
        get_task("capitals", data_dir=data_dir, size=3)
    with pytest.raises(DataError, match="capitals.jsonl"):
        get_task("capitals", data_dir=data_dir / "elsewhere").sizes()

    from typer.testing import CliRunner

    from masforge.cli import app

    shown = CliRunner().invoke(app, ["tasks"], env={"COLUMNS": "200"}).output
    assert "capitals" in shown and "6 / 2 / 2" in shown


def test_the_builtin_benchmarks_are_the_modules_of_their_package() -> None:
    from masforge.evaluators import benchmarks

    assert benchmarks.MODULES == ["gsm8k", "math500", "drop", "hotpotqa", "mgsm", "mmlu", "mbpp", "humaneval", "arc",
                                  "reasoning_gym"]
