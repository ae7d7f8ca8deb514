"""Throughput of an Evaluator run against a stub LM that answers after 200 ms.

For each concurrency c the cot seed (one LM call per example) is evaluated on 4*c examples with the disk cache
off; throughput (LM calls per second) is reported as a fraction of the ideal c / 0.2 s. Target: >= 90% at
c = 64. Each level runs ``--repeats`` times (the machine may be shared): best and median are shown.

The StubServer runs in this process (as the tests use it), so its request handling competes with the
evaluator for the GIL; the second table runs the same server in a child process, like a real LM server; the
third repeats the first through litellm.completion, the path OpenAI-compatible endpoints took before masforge
called them directly (litellm's per-call CPU capped throughput near 80 calls/s).

    LITELLM_LOCAL_MODEL_COST_MAP=True .venv/bin/python bench/concurrency.py [--latency 0.2] [--levels 1,8,32,64]

Writes bench/results/concurrency.txt.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import time
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from common import RESULTS, child_stub, make_task, write_keeping_notes  # noqa: E402

from masforge.evaluators.runner import Evaluator  # noqa: E402
from masforge.lm.client import LMClient, LMConfig  # noqa: E402
from masforge.seeds import load_seed  # noqa: E402
from masforge.testing.stub_server import StubServer  # noqa: E402


def run_level(api_base: str, stub: StubServer | None, concurrency: int, latency: float, per_slot: int,
              via_litellm: bool = False) -> dict:
    n = per_slot * concurrency
    # An extra litellm-only argument routes the calls through litellm.completion (the path before the fix).
    extra = {"extra_headers": {"X-Bench": "litellm"}} if via_litellm else {}
    cfg = LMConfig(model="openai/stub", api_base=api_base, max_concurrency=64, extra=extra)
    client = LMClient({"worker": cfg}, cache=False)
    task = make_task(n, f"c{concurrency}-{time.monotonic_ns()}")
    ev = Evaluator(task, client, limit=n, concurrency=concurrency)
    genome = load_seed("cot")  # reading the seed's file is not the evaluator's work: outside the clock
    if stub is not None:
        stub.reset_counters()
    cpu0 = time.process_time()
    t0 = time.perf_counter()
    report = ev.evaluate(genome)
    wall = time.perf_counter() - t0
    cpu = time.process_time() - cpu0
    calls = report.llm_calls
    return {"examples": report.n, "calls": calls, "errors": sum(1 for e in report.examples if e.error),
            "wall_s": wall, "calls_per_s": calls / wall, "fraction": calls / wall / (concurrency / latency),
            "cpu_ms_per_call": cpu / max(calls, 1) * 1000,
            "max_in_flight": stub.max_in_flight if stub is not None else None}


def table(api_base: str, stub: StubServer | None, levels: list[int], args, via_litellm: bool = False) -> list[str]:
    run_level(api_base, stub, 4, args.latency, 1, via_litellm)  # warm-up: imports, first connections
    out = [f"{'conc':>5} {'examples':>8} {'errors':>6} {'wall s':>7} {'calls/s':>8} {'ideal/s':>8} {'best':>7} "
           f"{'median':>7} {'cpu ms/call':>11} {'max in flight':>13}"]
    print(out[0], flush=True)
    best_by_level = {}
    for c in levels:
        runs = [run_level(api_base, stub, c, args.latency, args.per_slot, via_litellm) for _ in range(args.repeats)]
        best = max(runs, key=lambda r: r["fraction"])
        med = statistics.median(r["fraction"] for r in runs)
        best_by_level[c] = best["fraction"]
        inflight = "-" if best["max_in_flight"] is None else str(best["max_in_flight"])
        out.append(f"{c:>5} {best['examples']:>8} {sum(r['errors'] for r in runs):>6} {best['wall_s']:>7.2f} "
                   f"{best['calls_per_s']:>8.1f} {c / args.latency:>8.1f} {best['fraction']:>7.1%} {med:>7.1%} "
                   f"{best['cpu_ms_per_call']:>11.2f} {inflight:>13}")
        print(out[-1], flush=True)
    top = max(levels)
    verdict = "PASS" if best_by_level[top] >= 0.9 else "BELOW TARGET"
    out.append(f"# target >= 90% of ideal at concurrency {top}: best {best_by_level[top]:.1%} -> {verdict}")
    print(out[-1], flush=True)
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--latency", type=float, default=0.2)
    parser.add_argument("--levels", default="1,8,32,64")
    parser.add_argument("--per-slot", type=int, default=4, help="examples per concurrency slot")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--skip-litellm", action="store_true", help="skip the litellm comparison table")
    parser.add_argument("--out", default=str(RESULTS / "concurrency.txt"))
    args = parser.parse_args(argv)
    levels = [int(x) for x in args.levels.split(",")]

    lines = [f"# bench/concurrency.py  {time.strftime('%Y-%m-%d %H:%M:%S')}  python {platform.python_version()}  "
             f"cpus {os.cpu_count()}  load avg {os.getloadavg()[0]:.1f}",
             f"# Evaluator(cot seed) vs StubServer(latency {args.latency * 1000:.0f} ms), cache off, "
             f"{args.per_slot} x concurrency examples, 1 LM call per example, best/median of {args.repeats}",
             "", "## StubServer in this process (shares the GIL with the evaluator)"]
    print("\n".join(lines), flush=True)
    with StubServer(latency_s=args.latency) as stub:
        lines += table(stub.api_base, stub, levels, args)
    lines += ["", "## StubServer in a child process (like a real LM server)"]
    print(lines[-1], flush=True)
    with child_stub(args.latency) as api_base:
        lines += table(api_base, None, levels, args)
    if not args.skip_litellm:
        lines += ["", "## for comparison: in-process StubServer through litellm.completion (masforge's path before "
                  "the direct OpenAI-compatible client)"]
        print(lines[-1], flush=True)
        with StubServer(latency_s=args.latency) as stub:
            lines += table(stub.api_base, stub, levels, args, via_litellm=True)
    lines.append(f"# load avg at the end {os.getloadavg()[0]:.1f}")
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    write_keeping_notes(Path(args.out), "\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
