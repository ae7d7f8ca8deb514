"""The first hour of a new user, command by command: each trap found by trying masforge in a fresh clone is
a one-line answer now (bad LM, unknown strategy, seed names as listed, readable progress, flag names in
errors, hints that can be copied, defaults shown and scaled to the search's size); and, from issue 27, no verdict
the data cannot support, the real counts and an estimate up front, help that loses nothing to markup, the options
a user looks for, and a one-line answer where an export run without its libraries gave a traceback."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from masforge.cli import app
from masforge.cli.console import masforge_command, runnable
from masforge.evaluators.estimate import Estimate, duration, estimate
from masforge.evaluators.tasks import describe_tasks, get_task
from masforge.lm import rates as lm_rates
from masforge.lm.config import LMConfig, parse_lm
from masforge.search.config import RunConfig
from masforge.search.events import Evaluating, HeldOutTest, Stage, Stalled
from masforge.search.progress import describe_event
from masforge.search.strategies import describe_strategies
from masforge.seeds import load_seed

TASK = "rg:basic_arithmetic"


@pytest.fixture(autouse=True)
def _private_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MASFORGE_CACHE", str(tmp_path / "cache"))
    monkeypatch.chdir(tmp_path)


def _invoke(*args: str) -> tuple[int, str]:
    res = CliRunner().invoke(app, list(args))
    return res.exit_code, res.output


@pytest.mark.parametrize("command", [
    ["evaluate", "cot", "--task", TASK, "--limit", "2"],
    ["search", "--task", TASK, "-n", "2", "-q"],
])
def test_an_unknown_provider_is_one_line_before_anything_starts(tmp_path: Path, command: list[str]) -> None:
    code, out = _invoke(*command, "--lm", "foobar/some-model")
    assert code == 1
    assert "litellm knows no provider 'foobar'" in out
    assert len(out.strip().splitlines()) == 1 and "Traceback" not in out
    assert not (tmp_path / "runs").exists()


@pytest.mark.parametrize("command", [["strategies"], ["search", "--strategy", "list"]])
def test_strategies_are_listed_and_described_without_a_search(tmp_path: Path, command: list[str]) -> None:
    code, out = _invoke(*command)
    assert code == 0, out
    for name in ("evolve", "knapsack", "tune", "coevolve", "swarm", "meta", "random"):
        assert name in out
    assert "population_size" in out and "surrogate" in out  # options with their defaults
    assert not (tmp_path / "runs").exists()


def test_seed_names_as_listed_work_in_evaluate() -> None:
    code, listed = _invoke("seeds")
    assert code == 0 and "reflexion-code" in listed
    for name in ("reflexion-code", "reflexion_code"):
        code, out = _invoke("evaluate", name, "--task", TASK, "--lm", "fake", "--limit", "1")
        assert code == 0, out


def test_live_progress_is_readable_text() -> None:
    lines = [describe_event(Stage(strategy="evolve", index=2, of=3)),
             describe_event(HeldOutTest(name="self-refine")),
             describe_event(Stalled(strategy="meta", steps=8)),
             describe_event(Stage(strategy="evolve", index=1, of=1))]
    assert lines == ["strategy evolve (stage 2 of 3) starts", "re-scoring self-refine on the held-out test split",
                     "meta stopped: 8 steps in a row found nothing new", "strategy evolve starts"]
    assert describe_event(Evaluating(name="x", operator="seed")) is None
    code, out = _invoke("search", "--task", TASK, "--strategy", "random", "--lm", "fake", "-n", "3", "--limit", "2",
                        "--seeds", "cot", "-o", "runs")
    assert code == 0, out
    assert "strategy random starts" in out and "{'" not in out  # no raw dicts


@pytest.mark.parametrize(("args", "flag"), [
    (["--budget-usd", "-1"], "--budget-usd"),
    (["--max-minutes", "0"], "--max-minutes"),
    (["-n", "0"], "--max-candidates"),
    (["--test-limit", "0"], "--test-limit"),
])
def test_budget_errors_name_the_flag_the_user_typed(args: list[str], flag: str) -> None:
    code, out = _invoke("search", "--task", TASK, "--lm", "fake", *args)
    assert code != 0 and flag in out and "max_dollars" not in out and "max_seconds" not in out


def test_config_errors_from_flags_name_the_flag() -> None:
    from masforge.cli.commands import SEARCH_FLAGS
    from masforge.errors import ConfigError

    with pytest.raises(ConfigError, match="command line: --budget-usd: "):
        RunConfig.from_data({"task": TASK, "budget": {"max_dollars": -1}}, "command line", SEARCH_FLAGS)
    with pytest.raises(ConfigError, match="run.yaml: budget.max_dollars: "):  # in a file, the file's own name
        RunConfig.from_data({"task": TASK, "budget": {"max_dollars": -1}}, "run.yaml")


def test_hints_use_the_command_the_user_can_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    venv_bin = tmp_path / ".venv" / "bin"
    venv_bin.mkdir(parents=True)
    (venv_bin / "masforge").write_text("#!/bin/sh\n")
    (venv_bin / "masforge").chmod(0o755)
    monkeypatch.setenv("PATH", "/usr/bin:/bin")  # not on PATH, as after `make run`
    monkeypatch.setattr(sys, "argv", [str(venv_bin / "masforge"), "search"])
    assert masforge_command() == os.path.join(".venv", "bin", "masforge")
    assert runnable("see `masforge tasks`") == f"see `{os.path.join('.venv', 'bin', 'masforge')} tasks`"
    monkeypatch.setenv("PATH", f"{venv_bin}:/usr/bin:/bin")  # activated venv: the bare name works
    assert masforge_command() == "masforge" and runnable("see `masforge tasks`") == "see `masforge tasks`"
    monkeypatch.setattr(sys, "argv", ["/somewhere/masforge/__main__.py", "search"])
    assert masforge_command().endswith(" -m masforge")


def test_help_shows_the_defaults_and_they_scale_with_the_search() -> None:
    res = CliRunner().invoke(app, ["search", "--help"], env={"COLUMNS": "250"})
    assert res.exit_code == 0
    flat = " ".join(res.output.replace("│", " ").split())
    for text in ("3 x --limit, at most 50", "-n / 5, from 1 to 3", "Examples evaluated at once. [default: (4)]"):
        assert text in flat, text
    small = RunConfig.from_data({"task": TASK, "limit": 4, "budget": {"max_candidates": 6}})
    assert (small.test_limit, small.test_top_k) == (12, 1)  # the tour's small search stays small
    default = RunConfig.from_data({"task": TASK})
    assert (default.test_limit, default.test_top_k) == (50, 3)
    given = RunConfig.from_data({"task": TASK, "limit": 4, "test_limit": 40, "test_top_k": 2})
    assert (given.test_limit, given.test_top_k) == (40, 2)
    assert RunConfig.from_data({"task": TASK, "test_limit": None}).test_limit is None  # None: all examples

# -- issue 27: the first hour, honest: verdicts only where the data supports them, the real counts up front, help
# that loses nothing to markup, the options a user looks for, a one-line answer where a traceback was -------------


def _invoke_wide(*args: str) -> tuple[int, str]:
    res = CliRunner().invoke(app, list(args), env={"COLUMNS": "250"})
    return res.exit_code, res.output


def _slow_fake_lm(monkeypatch: pytest.MonkeyPatch, seconds: float) -> None:
    """The fake LM answering after ``seconds``, and the log's progress line due every 0.3 s."""
    import time

    from masforge.lm import fake as fake_lm
    from masforge.search import progress

    real = fake_lm.fake_reply

    def slow(messages: Any, info: Any) -> str:
        time.sleep(seconds)
        return real(messages, info)

    monkeypatch.setattr(fake_lm, "fake_reply", slow)
    monkeypatch.setattr(progress, "HEARTBEAT_S", 0.3)


def _io_search_shows(tmp_path: Path, *, terminal: bool = False, **options: Any) -> str:
    """What a search of the io seed alone on 1 candidate shows on a console (a log, or a terminal's panel without
    its control codes); ``options`` go into its run configuration."""
    import io

    from rich.console import Console

    from masforge.search.engine import run_search

    shown = io.StringIO()
    cfg = RunConfig.from_data({"task": TASK, "lm": "fake", "seeds": ["io"], "concurrency": 1, "test_top_k": 0,
                               "budget": {"max_candidates": 1}, "output": str(tmp_path / "runs"), **options})
    run_search(cfg, progress=True, console=Console(file=shown, force_terminal=terminal, width=200))
    return re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", shown.getvalue())


def _flat(text: str) -> str:
    return " ".join(text.replace("│", " ").split())


def _twelve_lines(path: Path) -> Path:
    path.write_text("".join(json.dumps({"question": f"What is {i} + {i}?", "answer": str(2 * i)}) + "\n"
                            for i in range(12)))
    return path


def _commands(cmd: Any, path: list[str]) -> list[tuple[list[str], Any]]:
    found = [(path, cmd)]
    for name, sub in getattr(cmd, "commands", {}).items():
        found += _commands(sub, [*path, name])
    return found


def test_no_help_text_of_any_command_is_lost_to_markup() -> None:
    """Help is rich markup: "[default: all]" or "masforge[ray]" unescaped would vanish from what the user sees.
    Every command's and every option's help, as written, must appear whole in its --help."""
    commands = _commands(typer.main.get_command(app), [])
    assert len(commands) > 20
    for path, cmd in commands:
        code, out = _invoke_wide(*path, "--help")
        assert code == 0, (path, out)
        shown = _flat(out)
        texts = [p.help for p in cmd.params if getattr(p, "help", None)] + ([cmd.help] if cmd.help else [])
        for text in texts:
            written = " ".join(text.replace("\\[", "[").split())
            assert written in shown, (path, written)
    assert "pip install 'masforge[ray]'" in _flat(_invoke_wide("search", "--help")[1])
    assert "Only the first N examples [default: all]" in _flat(_invoke_wide("evaluate", "--help")[1])


def test_version() -> None:
    from masforge import __version__

    code, out = _invoke("--version")
    assert code == 0 and out.strip() == f"masforge {__version__}"


def test_tasks_show_their_split_sizes_and_they_are_true() -> None:
    code, out = _invoke("tasks")
    assert code == 0
    shown = _flat(out)
    stated = {name: splits for name, _, splits in describe_tasks()}
    assert all(s != "-" for s in stated.values())
    for name, loaded in (("arc", "arc"), ("rg:<family>", TASK)):  # (the others load test fixtures here)
        sizes = get_task(loaded).sizes()
        numbers = f"{sizes['train']} / {sizes['validation']} / {sizes['test']}"
        assert stated[name].startswith(numbers) and numbers in shown, name
    assert "FILE.jsonl" in shown


def test_every_strategy_option_is_explained() -> None:
    for name, _, options in describe_strategies():
        for option in options:
            assert len(option.help) > 15, (name, option.name)
    code, out = _invoke("strategies")
    options_column = " ".join(cells[3] for line in out.splitlines() if len(cells := line.split("│")) > 4)
    assert code == 0 and "population_size=6: systems kept in the pool that parents are drawn from." in _flat(
        options_column)


def test_search_takes_split_data_dir_no_cache_cost_weight_and_strategy_options(tmp_path: Path) -> None:
    code, out = _invoke("search", "--task", TASK, "--lm", "fake", "--seeds", "cot", "-n", "3", "--limit", "2",
                        "--test-top-k", "0", "--split", "train", "--data-dir", str(tmp_path / "data"), "--no-cache",
                        "--cost-weight", "2", "-O", "population_size=3", "-O", "evolve.offspring=1", "-o", "runs",
                        "-q")
    assert code == 0, out
    run = tmp_path / "runs" / "latest"
    config = (run / "config.yaml").read_text()
    for line in ("split: train", "cost_weight: 2.0", "cache: false", "population_size: 3", "offspring: 1",
                 f"data_dir: {tmp_path / 'data'}"):
        assert line in config, line
    assert (run / "lm_cache.sqlite").is_file()  # --no-cache: the run's own answers only
    assert "top systems (train)" in out
    code, out = _invoke("search", "--task", TASK, "--lm", "fake", "-O", "nosuch=1", "-o", "runs")
    assert code == 1 and "no strategy of the pipeline (evolve) has an option 'nosuch'" in out
    code, out = _invoke("search", "--task", TASK, "--lm", "fake", "--split", "test", "-o", "runs")
    assert code == 1 and "--split" in out


def test_a_small_jsonl_search_says_its_real_counts_and_gives_no_verdict(tmp_path: Path) -> None:
    """The issue's run: 12 lines, io and cot, -n 4 --limit 2. The split is said, the counts are the real ones, and
    the end line pairs found and seed on the same held-out examples without claiming a difference."""
    _twelve_lines(tmp_path / "my12lines.jsonl")
    code, out = _invoke("search", "--task", "my12lines.jsonl", "--seeds", "io,cot", "-n", "4", "--limit", "100000",
                        "--lm", "fake", "-o", "runs")
    assert code == 0, out
    shown = _flat(out)
    assert "my12lines.jsonl: 12 lines, shuffled (seed 0) and split into 8 train / 2 validation / 2 test" in shown
    # the selection set is validation and train together (8 + 2 lines), never the test lines
    assert ("each candidate is scored on 10 validation+train examples of my12lines (--limit 100000 capped: the "
            "validation and train splits hold 10)") in shown
    assert "re-scored on 2 held-out examples each (--test-limit 50 capped: the test split holds 2)" in shown
    assert "2 held-out examples cannot tell the found system from the seeds" in shown
    assert "time: under a minute" in shown
    assert "held-out test, the same 2 examples for both" in shown
    assert "(paired 95% CI): too few examples to tell (2;" in shown and "better than the seeds" not in shown
    # 2 test lines: no limit can score more of them (issue 39: the end line said "raise --test-limit")
    assert "the test split holds 2: give the task more data" in shown and "raise --test-limit" not in shown
    assert "validation+train (10 examples)" in shown and "100000" not in shown.split("held-out test, the same")[1]
    summary = json.loads((tmp_path / "runs" / "latest" / "summary.json").read_text())
    assert summary["verdict"]["n"] == 2 and summary["verdict"]["outcome"] == "too_few"
    assert summary["stats"]["selection_examples"] == 10 and summary["stats"]["test_examples"] == 2


def test_the_split_of_a_jsonl_file_can_be_chosen(tmp_path: Path) -> None:
    data = _twelve_lines(tmp_path / "q.jsonl")
    task = get_task(str(data), val_fraction=0.5)
    assert task.sizes() == {"train": 4, "validation": 6, "test": 2}
    code, out = _invoke("evaluate", "io", "--task", str(data), "--lm", "fake", "--task-option", "val_fraction=0.5")
    assert code == 0 and "6 examples (all of q/validation)" in _flat(out)
    assert "q.jsonl: 12 lines, shuffled (seed 0) and split into 4 train / 6 validation / 2 test" in _flat(out)
    code, out = _invoke("evaluate", "io", "--task", str(data), "--lm", "fake", "--task-option", "foo=1")
    assert code == 1 and "takes no option 'foo'" in out and "Traceback" not in out


def test_n_below_the_seeds_says_no_new_system_will_be_proposed() -> None:
    code, out = _invoke("search", "--task", TASK, "--lm", "fake", "-n", "4", "--limit", "2", "-o", "runs")
    assert code == 0, out
    assert "-n 4 leaves no room for new systems: the 5 seeds use it up" in _flat(out)


def test_an_evaluation_says_what_it_will_do_and_caps_a_large_limit() -> None:
    code, out = _invoke("evaluate", "cot", "--task", TASK, "--lm", "fake", "--limit", "100000")
    shown = _flat(out)
    assert code == 0
    assert (f"evaluating chain-of-thought on {TASK}/validation: 100 examples (--limit 100000 is more than the 100 "
            f"that {TASK}/validation holds: all of them)") in shown
    assert "100 LM calls" in shown


def test_the_estimate_is_calls_times_the_measured_rate() -> None:
    local = parse_lm("local")
    guess = estimate([load_seed("sample_and_test"), load_seed("io")], 10, local, 4)
    assert guess.calls == 60 and not guess.measured  # 5 + 1 calls per example
    assert guess.per_call_s == lm_rates.GUESSES["local"]
    for _ in range(4):
        lm_rates.record(local, 6.0)
    lm_rates.save()
    measured = estimate([load_seed("io")], 20, local, 4)
    assert measured.measured and measured.per_call_s == 6.0
    # The embedded model's rate is a share of its server's time: requests at once do not divide it.
    assert measured.shared and measured.seconds == 20 * 6.0
    assert "measured on this machine" in measured.words()
    hosted = LMConfig(model="openai/some-model", api_base="http://127.0.0.1:9/v1", max_concurrency=8)
    for _ in range(4):
        lm_rates.record(hosted, 6.0)
    lm_rates.save()
    served = estimate([load_seed("io")], 20, hosted, 4)
    assert not served.shared and served.parallel == 4 and served.seconds == 20 * 6.0 / 4
    assert Estimate(10, 6.0, 1, True, serial_calls=2, serial_s=30.0).seconds == 120
    assert [duration(s) for s in (30, 150, 4000)] == ["under a minute", "2 min", "1 h 7 min"]


def test_an_export_run_without_its_libraries_says_so_in_one_line(tmp_path: Path) -> None:
    code, out = _invoke("export", "cot", "-o", "cot_system.py")
    assert code == 0, out
    # -S: no site-packages, as with a Python that has no dspy installed
    run = subprocess.run([sys.executable, "-S", "cot_system.py", "What is 2 + 2?"], capture_output=True, text=True,
                         cwd=tmp_path, timeout=60)
    assert run.returncode == 1
    assert run.stderr.strip() == "cot_system.py needs the Python package dspy (pip install dspy)"
    imported = subprocess.run([sys.executable, "-S", "-c", "import cot_system"], capture_output=True, text=True,
                              cwd=tmp_path, timeout=60)
    assert "ImportError: this exported system needs the Python package dspy (pip install dspy)" in imported.stderr
    assert not re.search(r"ModuleNotFoundError", run.stderr + imported.stderr)


def test_a_log_shows_the_search_working_before_the_first_candidate_ends(tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """Piped to a log, a search printed nothing until its first candidate was scored (17 minutes in the issue's
    `make run`): a heartbeat line now says what it is evaluating while nothing else is printed."""
    _slow_fake_lm(monkeypatch, 0.4)
    text = _io_search_shows(tmp_path, limit=3)
    beat = re.search(r"\ds: evaluating io: [0-2]/3 examples, ETA \d+s \(0 candidates done;", text)
    assert beat is not None, text
    assert beat.start() < text.find("io score"), text  # before the first candidate's line


def test_the_embedded_models_rate_is_its_share_of_the_server() -> None:
    from masforge.lm.client import ServerShare

    now = [100.0]
    share = ServerShare(now=lambda: now[0])
    # A runs alone 1 s, then beside B for 2 s (each gets half), then alone 1 s after B ended: 1 + 1 + 1 = 3 s.
    a = share.enter()
    now[0] += 1
    b = share.enter()
    now[0] += 2
    assert share.leave(b) == pytest.approx(1.0)  # B's 2 s beside A: a half of it
    now[0] += 1
    assert share.leave(a) == pytest.approx(3.0)
    # not mixed with the latencies kept before, nor across servers with different slots
    one, four = LMConfig(model="local", max_concurrency=1), LMConfig(model="local", max_concurrency=4)
    assert (lm_rates.rate_key(one), lm_rates.rate_key(four)) == ("local#shared/1", "local#shared/4")


def test_an_evaluation_piped_to_a_log_writes_a_progress_line(monkeypatch: pytest.MonkeyPatch) -> None:


    _slow_fake_lm(monkeypatch, 0.2)
    code, out = _invoke("evaluate", "io", "--task", TASK, "--lm", "fake", "--limit", "6", "--concurrency", "1",
                        "--no-cache")
    assert code == 0, out
    assert re.search(r"\ds: io on \S+ [1-5]/6 examples, score \d\.\d{3}", out), out


def test_a_log_shows_the_held_out_rescoring_working(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The held-out re-scoring ran after the progress display had closed: `make run` printed nothing for its last
    8 minutes. The heartbeat goes on through it."""
    _slow_fake_lm(monkeypatch, 0.15)
    text = _io_search_shows(tmp_path, limit=2, test_limit=8, test_top_k=1)
    start = text.find("re-scoring io on the held-out test split")
    assert start >= 0, text
    # where it is out of the 8 held-out examples, and when it ends (issue 39: no position was shown)
    assert re.search(r"\d+s: re-scoring io on the held-out test split: [0-7]/8 examples, ETA \d+s \(1 candidates "
                     r"done;", text[start:]), text


def test_an_evaluation_piped_to_a_log_writes_a_line_while_one_long_example_runs(
        monkeypatch: pytest.MonkeyPatch) -> None:
    _slow_fake_lm(monkeypatch, 1.2)
    code, out = _invoke("evaluate", "io", "--task", TASK, "--lm", "fake", "--limit", "1", "--no-cache")
    assert code == 0, out
    assert re.search(r"\ds: io on \S+ 0/1 examples, no example finished yet", out), out


# -- issue 39: small first-hour defects, each a one-line answer at once ------------------------------------------


@pytest.mark.parametrize("command", [
    ["evaluate", "cot", "--task", TASK, "--limit", "2"],
    ["search", "--task", TASK, "-n", "2"],
])
def test_an_unknown_local_model_is_one_line_before_the_plan(tmp_path: Path, command: list[str]) -> None:
    code, out = _invoke(*command, "--lm", "local:nosuchmodel")
    assert code == 1
    assert out.strip() == "error: unknown local model 'nosuchmodel': choose one of qwen, smollm2", out
    assert not (tmp_path / "runs").exists()


def test_an_unknown_provider_is_refused_without_importing_litellm(tmp_path: Path) -> None:
    """Importing litellm takes seconds (17 s in all on a busy machine): a provider name that litellm lists nowhere
    is refused before it is imported. A name it may route is still asked of litellm itself."""
    script = ("import sys\nsys.argv = ['masforge', 'search', '--task', 'rg:basic_arithmetic', '--lm', 'nosuch/model']\n"
              "from masforge.cli import main\ntry:\n    main()\nexcept SystemExit as stop:\n"
              "    print('exit', stop.code, 'litellm imported:', 'litellm' in sys.modules)\n")
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=tmp_path, timeout=120,
                         env={**os.environ, "COLUMNS": "250"})
    assert "litellm knows no provider 'nosuch'" in run.stderr, run.stderr
    assert run.stdout.strip() == "exit 1 litellm imported: False", run.stdout
    from masforge.lm.config import _surely_unrouted

    for model in ("openai/gpt-4o-mini", "ollama/llama3", "hosted_vllm/my-model", "meta/llama-2-70b-chat"):
        assert not _surely_unrouted(parse_lm(model)), model
    assert not _surely_unrouted(LMConfig(model="nosuch/model", api_base="http://127.0.0.1:9/v1"))


def test_export_to_a_folder_says_so_in_one_line(tmp_path: Path) -> None:
    (tmp_path / "adir").mkdir()
    code, out = _invoke("export", "cot", "-o", "adir")
    assert code == 1
    assert out.strip() == f"error: -o adir is a folder: give the file to write, e.g. -o {Path('adir', 'system.py')}"
    assert ".tmp" not in out and list((tmp_path / "adir").iterdir()) == []


# -- issue 39: progress that always moves: examples done of planned and an ETA, in every stage ------------------


def test_the_eta_of_an_evaluation_counts_down_from_the_best_evidence_so_far() -> None:
    from masforge.search.progress import Underway

    job = Underway("evaluating io", planned=16, calls=32, seconds=160.0, answered_before=5, started=100.0)
    assert job.eta(now=130.0) == 130.0  # nothing answered yet: the estimate, counting down
    job.see(answered=7, now=140.0)  # 2 LM answers in 40 s, 30 to go
    assert job.eta(now=140.0) == pytest.approx(20 * 30) and job.eta(now=150.0) == pytest.approx(20 * 30 - 10)
    job.finished(4, 16, now=180.0)  # 4 examples in 80 s, 12 to go
    assert job.eta(now=180.0) == pytest.approx(20 * 12) and job.eta(now=200.0) == pytest.approx(20 * 12 - 20)
    assert job.line(now=200.0) == "evaluating io: 4/16 examples, ETA 4 min"
    stuck = Underway("evaluating io", planned=8, calls=8, seconds=60.0, answered_before=0, started=0.0)
    assert stuck.line(now=400.0) == "evaluating io: 0/8 examples, no LM answer yet, 6 min over the 60s estimated"


def test_before_its_first_example_a_log_line_counts_the_eta_down(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """The issue's `make run`: "evaluating io (0 candidates done; 3 LM calls answered)" six minutes unchanged.
    Before any example ends, the line says 0 of the examples planned and an ETA from the measured rate."""
    for _ in range(4):
        lm_rates.record(parse_lm("fake"), 1.0)  # the rate measured here: 1 s per call
    lm_rates.save()
    _slow_fake_lm(monkeypatch, 3.0)  # time for several log lines before the first example ends, on a busy machine too
    text = _io_search_shows(tmp_path, limit=3)
    waiting = re.findall(r"evaluating io: 0/3 examples, ETA (\d+)s \(0 candidates done; 0 LM calls answered", text)
    assert len(waiting) >= 2 and int(waiting[0]) > int(waiting[-1]), text  # it moves


def test_the_live_panel_shows_the_examples_and_eta_of_each_stage(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    _slow_fake_lm(monkeypatch, 0.3)
    drawn = _io_search_shows(tmp_path, terminal=True, limit=3, test_limit=4, test_top_k=1)
    assert re.search(r"now\s+evaluating io: [0-2]/3 examples, ETA \d+s", drawn), drawn
    assert re.search(r"now\s+re-scoring io on the held-out test split: [0-3]/4 examples, ETA \d+s", drawn), drawn
