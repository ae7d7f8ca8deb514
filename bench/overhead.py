"""masforge's own time per LM call and per example, measured with a zero-latency deterministic LM.

The ``fake`` LM answers instantly, so the wall time of an evaluation is pure framework time. It is split
into: the fake responder itself, dspy's adapter (prompt formatting + reply parsing), the rest of dspy
(Predict/ChainOfThought machinery, BaseLM.__call__), the task metric, and masforge (LMClient: cache key,
semaphore, ledger, trace; the dspy bridge; compiled-genome runtime and the Evaluator). Target: masforge's
share < 2 ms per LM call.

    LITELLM_LOCAL_MODEL_COST_MAP=True .venv/bin/python bench/overhead.py [--examples 200]

Writes bench/results/overhead.txt.
"""

from __future__ import annotations

import argparse
import functools
import os
import platform
import threading
import time
from collections import defaultdict
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

import dspy  # noqa: E402
from dspy.adapters.chat_adapter import ChatAdapter  # noqa: E402
from dspy.adapters.json_adapter import JSONAdapter  # noqa: E402

from masforge.evaluators.runner import Evaluator  # noqa: E402
from masforge.evaluators.tasks import Task, get_task  # noqa: E402
from masforge.lm.client import LMClient  # noqa: E402
from masforge.lm.dspy_lm import MasforgeLM  # noqa: E402
from masforge.lm.fake import fake_reply  # noqa: E402
from masforge.seeds import load_seed  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results"

_totals: dict[str, float] = defaultdict(float)
_lock = threading.Lock()
_depth = threading.local()


def _timed(name: str, fn, *, outermost: bool = False):
    """Wrap ``fn`` to add its inclusive wall time to ``_totals[name]`` (only the outermost call if asked)."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        if outermost:
            depth = getattr(_depth, name, 0)
            setattr(_depth, name, depth + 1)
            if depth:
                try:
                    return fn(*args, **kwargs)
                finally:
                    setattr(_depth, name, depth)
        t0 = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            dt = time.perf_counter() - t0
            with _lock:
                _totals[name] += dt
            if outermost:
                setattr(_depth, name, 0)

    return wrapper


def _patch(owner, attr: str, name: str, *, outermost: bool = False) -> tuple:
    original = owner.__dict__[attr]
    setattr(owner, attr, _timed(name, original, outermost=outermost))
    return owner, attr, original


def instrument() -> list[tuple]:
    """Install the timers; returns what to restore."""
    return [
        _patch(dspy.Predict, "__call__", "predict", outermost=True),
        # dspy wraps format/parse with its callback decorator in every Adapter subclass: time each one.
        _patch(ChatAdapter, "format", "adapter_format"),
        _patch(ChatAdapter, "parse", "adapter_parse"),
        _patch(JSONAdapter, "format", "adapter_format"),
        _patch(JSONAdapter, "parse", "adapter_parse"),
        _patch(dspy.BaseLM, "__call__", "dspy_lm_call"),
        _patch(MasforgeLM, "forward", "bridge_forward"),
        _patch(LMClient, "complete", "client_complete"),
        _patch(Task, "score", "metric"),
    ]


def restore(patches: list[tuple]) -> None:
    for owner, attr, original in reversed(patches):
        setattr(owner, attr, original)


def run(seed: str, task: Task, n: int, instrumented: bool) -> dict:
    _totals.clear()
    responder = _timed("responder", fake_reply) if instrumented else fake_reply
    client = LMClient({"worker": "fake"}, cache=False, responder=responder)
    ev = Evaluator(task, client, limit=n, concurrency=1)
    genome = load_seed(seed)
    patches = instrument() if instrumented else []
    try:
        t0 = time.perf_counter()
        report = ev.evaluate(genome)
        wall = time.perf_counter() - t0
    finally:
        restore(patches)
    assert report.n == n and not any(e.error for e in report.examples), "fake LM run had errors"
    return {"wall": wall, "calls": report.llm_calls, "examples": report.n, "score": report.score, **_totals}


def breakdown(r: dict) -> list[tuple[str, float]]:
    """Exclusive seconds per layer from the inclusive timers."""
    r = defaultdict(float, r)
    responder = r["responder"]
    client = r["client_complete"] - responder
    bridge = r["bridge_forward"] - r["client_complete"]
    dspy_lm = r["dspy_lm_call"] - r["bridge_forward"]
    adapter = r["adapter_format"] + r["adapter_parse"]
    dspy_module = r["predict"] - r["dspy_lm_call"] - adapter
    metric = r["metric"]
    runtime = r["wall"] - r["predict"] - metric
    return [("fake responder", responder), ("dspy adapter (format + parse)", adapter),
            ("dspy module + BaseLM machinery", dspy_module + dspy_lm), ("task metric", metric),
            ("masforge LMClient (key, semaphore, ledger, trace)", client), ("masforge dspy bridge", bridge),
            ("masforge runtime (compile, agents, trace, evaluator)", runtime)]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--examples", type=int, default=200)
    parser.add_argument("--repeats", type=int, default=3, help="best of N (the machine may be shared)")
    parser.add_argument("--out", default=str(RESULTS / "overhead.txt"))
    args = parser.parse_args(argv)
    n = args.examples
    task = get_task("rg:basic_arithmetic", size=max(5 * n, 100))
    load = os.getloadavg()[0]
    lines = [f"# bench/overhead.py  {time.strftime('%Y-%m-%d %H:%M:%S')}  python {platform.python_version()}  "
             f"dspy {dspy.__version__}  cpus {os.cpu_count()}  load avg {load:.1f}",
             f"# fake LM (zero latency), cache off, concurrency 1, {n} examples of {task.name}, best of {args.repeats}"]
    for seed in ("cot", "debate"):
        run(seed, task, n, instrumented=False)  # warm-up: imports, dspy signature caches, generated examples
        plains, timeds = [], []
        for _ in range(args.repeats):  # interleaved, so both see the same machine load
            plains.append(run(seed, task, n, instrumented=False))
            timeds.append(run(seed, task, n, instrumented=True))
        plain = min(plains, key=lambda r: r["wall"])
        timed = min(timeds, key=lambda r: r["wall"])
        calls, examples = plain["calls"], plain["examples"]
        parts = breakdown(timed)
        masforge = sum(v for k, v in parts if k.startswith("masforge"))
        scale = plain["wall"] / timed["wall"]  # the timers' own cost, spread proportionally
        lines.append("")
        lines.append(f"## seed {seed}: {examples} examples, {calls} LM calls ({calls / examples:.0f} per example)")
        lines.append(f"total wall (uninstrumented)   {plain['wall']:.3f} s   {plain['wall'] / calls * 1e3:.3f} ms/call"
                     f"   {plain['wall'] / examples * 1e3:.3f} ms/example")
        lines.append(f"total wall (instrumented)     {timed['wall']:.3f} s   (timers add "
                     f"{(timed['wall'] / plain['wall'] - 1) * 100:.0f}%; shares below are scaled back)")
        lines.append(f"{'component':<55} {'ms/call':>8} {'ms/example':>10} {'share':>6}")
        for name, secs in parts:
            lines.append(f"{name:<55} {secs * scale / calls * 1e3:>8.3f} {secs * scale / examples * 1e3:>10.3f} "
                         f"{secs / timed['wall']:>6.1%}")
        per_call = masforge * scale / calls * 1e3
        verdict = "PASS" if per_call < 2.0 else "ABOVE TARGET"
        lines.append(f"{'masforge own time (the three masforge rows)':<55} {per_call:>8.3f} "
                     f"{masforge * scale / examples * 1e3:>10.3f} {masforge / timed['wall']:>6.1%}"
                     f"   target < 2 ms/call: {verdict}")
        print("\n".join(lines[-(len(parts) + 5):]), flush=True)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
