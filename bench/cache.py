"""The disk cache: evaluate the cot seed twice on the same examples against a stub LM answering after 200 ms.

The second run should make no LM call (every answer comes from the SQLite cache) and take a small fraction
of the first run's time.

    LITELLM_LOCAL_MODEL_COST_MAP=True .venv/bin/python bench/cache.py [--examples 32] [--concurrency 8]

Writes bench/results/cache.txt.
"""

from __future__ import annotations

import argparse
import os
import platform
import tempfile
import time
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from masforge.evaluators.runner import Evaluator  # noqa: E402
from masforge.evaluators.tasks import Task  # noqa: E402
from masforge.lm.client import LMCache, LMClient, LMConfig  # noqa: E402
from masforge.seeds import load_seed  # noqa: E402
from masforge.testing.stub_server import StubServer  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results"


def make_task(n: int) -> Task:
    examples = [{"id": f"q{i}", "question": f"What is {i} + {i}?", "answer": str(2 * i)} for i in range(n)]

    def answered(outputs) -> float:
        return 1.0 if str(outputs.get("answer", "")).strip() else 0.0

    return Task.from_callable(answered, examples=examples, name="bench-cache")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--examples", type=int, default=32)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--latency", type=float, default=0.2)
    parser.add_argument("--out", default=str(RESULTS / "cache.txt"))
    args = parser.parse_args(argv)
    task = make_task(args.examples)
    genome = load_seed("cot")
    lines = [f"# bench/cache.py  {time.strftime('%Y-%m-%d %H:%M:%S')}  python {platform.python_version()}  "
             f"cpus {os.cpu_count()}  load avg {os.getloadavg()[0]:.1f}",
             f"# cot seed, {args.examples} examples, concurrency {args.concurrency}, StubServer latency "
             f"{args.latency * 1000:.0f} ms, LMCache in a temporary directory (a fresh LMClient per run)",
             f"{'run':<7} {'wall s':>7} {'LM calls':>8} {'cache hits':>10} {'stub requests':>13} {'score':>6}"]
    with tempfile.TemporaryDirectory() as tmp, StubServer(latency_s=args.latency) as stub:
        cache_path = Path(tmp) / "lm_cache.sqlite"
        cfg = LMConfig(model="openai/stub", api_base=stub.api_base, max_concurrency=64)
        # Warm-up outside the measurement (imports, price lookup, connection): the first run is then steady state.
        LMClient({"worker": cfg}, cache=False).complete([{"role": "user", "content": "warm-up"}])
        runs = []
        for name in ("first", "second"):
            # A new client and cache object each time: the second run only shares the file on disk.
            client = LMClient({"worker": cfg}, cache=LMCache(cache_path))
            ev = Evaluator(task, client, limit=args.examples, concurrency=args.concurrency)
            before = stub.requests
            t0 = time.perf_counter()
            report = ev.evaluate(genome)
            wall = time.perf_counter() - t0
            runs.append((name, wall, report.llm_calls, report.cache_hits, stub.requests - before, report.score))
            lines.append(f"{name:<7} {wall:>7.3f} {report.llm_calls:>8} {report.cache_hits:>10} "
                         f"{stub.requests - before:>13} {report.score:>6.3f}")
        size_kb = cache_path.stat().st_size / 1024
    (_, w1, *_), (_, w2, calls2, hits2, req2, _) = runs
    lines.append(f"# second run: {calls2} LM calls (target 0), {req2} requests reached the server, {hits2} cache "
                 f"hits; time {w2 / w1:.1%} of the first ({w2 * 1000 / args.examples:.2f} ms per example); "
                 f"cache file {size_kb:.0f} KiB -> {'PASS' if calls2 == 0 and req2 == 0 else 'FAIL'}")
    print("\n".join(lines))
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
