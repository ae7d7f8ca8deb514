"""Scaling out: evaluation throughput with the local executor and with Ray, and tune trials per minute with one
and two processes on one PostgreSQL study.

Table 1: the cot seed (one LM call per example) evaluated against the OpenAI-compatible stub server in a child
process answering after 200 ms, answer cache off, candidates one after another as a search evaluates them.
Each Ray worker process gets ``--per-worker`` examples in flight
(the evaluator's concurrency is per-worker x workers), so two workers could double the throughput: scaling
efficiency = throughput with 2 workers / (2 x throughput with 1). The local executor is shown at the same
concurrencies. Ray runs on a local cluster started here (``ray.init(num_cpus=2)``).

Table 2: Ray's own cost per example: the fake LM (no network, no delay) at concurrency 1, time per example with
the local executor and with one Ray worker; the difference is what Ray adds per example (the task round trip
plus the hub round trips of its LM call: two budget checks and the ledger entry).

Table 3: ``tune`` on a shared study in a throwaway PostgreSQL server (masforge.testing.postgres): one process, then
two processes started together on one study (with an archive each, and with one shared archive), each asking
``--trials`` trials against the same 200 ms stub server; trials per minute of wall time (all processes together),
and evaluations actually paid (the rest were told for free or skipped as another process's).

    LITELLM_LOCAL_MODEL_COST_MAP=True .venv/bin/python bench/scale.py [--repeats 3] [--trials 12]

Writes bench/results/scale.txt.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from common import RESULTS, child_stub, make_task  # noqa: E402

from masforge.evaluators.executors import make_executor  # noqa: E402
from masforge.evaluators.runner import Evaluator  # noqa: E402
from masforge.lm.client import LMClient, LMConfig  # noqa: E402
from masforge.seeds import load_seed  # noqa: E402

# ------------------------------------------------------------------------------------------- throughput


def throughput(api_base: str, executor, concurrency: int, evaluations: int, per_eval: int) -> dict:
    """``evaluations`` candidates (cot, each on its own ``per_eval`` examples) one after another, as a search
    evaluates them; examples of one candidate ``concurrency`` at a time."""
    cfg = LMConfig(model="openai/stub", api_base=api_base, max_concurrency=256)
    client = LMClient({"worker": cfg}, cache=False)
    if executor is not None:
        executor.attach(client)  # the run's hub (ledger) starts once per run, outside the timing
    calls = 0
    t0 = time.perf_counter()
    for k in range(evaluations):
        task = make_task(per_eval, f"c{concurrency}-{k}-{time.monotonic_ns()}")
        ev = Evaluator(task, client, limit=per_eval, concurrency=concurrency,
                       **({"executor": executor} if executor is not None else {}))
        report = ev.evaluate(load_seed("cot"))
        calls += report.llm_calls
        assert not any(e.error for e in report.examples), [e.error for e in report.examples if e.error][:1]
    wall = time.perf_counter() - t0
    return {"wall_s": wall, "evals_per_s": evaluations / wall, "calls_per_s": calls / wall, "calls": calls}


def best_of(fn, repeats: int) -> tuple[dict, float]:
    runs = [fn() for _ in range(repeats)]
    best = max(runs, key=lambda r: r["calls_per_s"])
    return best, statistics.median(r["calls_per_s"] for r in runs)


def table_throughput(args) -> list[str]:
    import ray

    latency = args.latency
    out = [f"{'executor':<16} {'in flight':>9} {'evals/s':>8} {'calls/s':>8} {'median':>8} {'ideal/s':>8} "
           f"{'of ideal':>8}"]
    print(out[0], flush=True)
    results: dict[str, float] = {}

    def row(name: str, conc: int, best: dict, med: float) -> None:
        ideal = conc / latency
        out.append(f"{name:<16} {conc:>9} {best['evals_per_s']:>8.2f} {best['calls_per_s']:>8.1f} {med:>8.1f} "
                   f"{ideal:>8.1f} {best['calls_per_s'] / ideal:>8.1%}")
        print(out[-1], flush=True)

    with child_stub(latency) as api_base:
        for workers in (1, 2):
            conc = args.per_worker * workers
            per_eval = args.waves * conc
            throughput(api_base, None, conc, 1, per_eval)  # warm-up
            best, med = best_of(lambda conc=conc, n=per_eval: throughput(api_base, None, conc, args.evaluations, n),
                                args.repeats)
            row("local", conc, best, med)
            results[f"local{workers}"] = best["calls_per_s"]
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
        try:
            for workers in (1, 2):
                conc = args.per_worker * workers
                per_eval = args.waves * conc
                ex = make_executor("ray", workers=workers, worker_concurrency=args.per_worker)
                ex.start_workers()
                throughput(api_base, ex, conc, 1, per_eval)  # warm-up: each worker loads the task's metric
                best, med = best_of(lambda conc=conc, ex=ex, n=per_eval: throughput(api_base, ex, conc,
                                                                                     args.evaluations, n), args.repeats)
                row(f"ray {workers} worker{'s' if workers > 1 else ''}", conc, best, med)
                results[f"ray{workers}"] = best["calls_per_s"]
                ex.close()
        finally:
            ray.shutdown()
    eff = results["ray2"] / (2 * results["ray1"])
    out.append(f"# scaling efficiency, Ray 2 workers / (2 x 1 worker): {eff:.0%} "
               f"(local, same in-flight counts: {results['local2'] / (2 * results['local1']):.0%})")
    print(out[-1], flush=True)
    return out


def table_overhead(args) -> list[str]:
    import ray

    n = args.overhead_examples

    def per_example(executor) -> float:
        client = LMClient({"worker": "fake"}, cache=False)
        if executor is not None:
            executor.attach(client)
        task = make_task(n, f"o-{time.monotonic_ns()}")
        ev = Evaluator(task, client, limit=n, concurrency=1, **({"executor": executor} if executor else {}))
        t0 = time.perf_counter()
        ev.evaluate(load_seed("cot"))
        return (time.perf_counter() - t0) / n * 1000

    per_example(None)
    local = statistics.median(per_example(None) for _ in range(args.repeats))
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        ex = make_executor("ray", workers=1, worker_concurrency=4)
        ex.start_workers()
        per_example(ex)  # warm-up
        remote = statistics.median(per_example(ex) for _ in range(args.repeats))
        ex.close()
    finally:
        ray.shutdown()
    out = [f"{'executor':<16} {'ms per example':>14}",
           f"{'local':<16} {local:>14.1f}", f"{'ray 1 worker':<16} {remote:>14.1f}",
           f"# Ray's overhead per example (1 LM call, concurrency 1): {remote - local:.1f} ms"]
    print("\n".join(out), flush=True)
    return out


# ------------------------------------------------------------------------------------------- tune

TUNE = """
    import json, os, sys, time
    from masforge.archive.memory import MemoryArchive
    from masforge.archive.store import Archive
    from masforge.evaluators.runner import Evaluator
    from masforge.evaluators.tasks import Task
    from masforge.lm.client import LMClient, LMConfig
    from masforge.search.budget import SearchBudget
    from masforge.search.context import SearchContext
    from masforge.search.events import Admitted
    from masforge.search.strategies.tune import Tune
    from masforge.seeds import load_seed

    storage, archive_path, trials, api_base, go = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4], sys.argv[5]
    task = Task.from_callable(lambda o: 1.0 if o.get("answer") else 0.0,
                              examples=[{"id": f"q{i}", "question": f"What is {i} + 1?"} for i in range(4)],
                              name="bench-tune")
    client = LMClient({"worker": LMConfig(model="openai/stub", api_base=api_base, max_concurrency=64)}, cache=False)
    paid = []
    archive = MemoryArchive() if archive_path == "memory" else Archive.open(archive_path, create=True)
    ctx = SearchContext(task, Evaluator(task, client, limit=4, concurrency=8), client, archive,
                        run_id=f"p{os.getpid()}", budget=SearchBudget(),
                        on_event=lambda e: paid.append(1) if isinstance(e, Admitted) and not e.reused else None)
    base = load_seed("cot")
    Evaluator(task, client, limit=4, concurrency=8).evaluate(base)  # warm-up outside the archive: lazy imports
    ctx.submit(base)
    # Knobs that do not change what a trial costs (one LM call per example), so trials are comparable.
    tune = Tune(storage=storage, study_name="bench", knobs=["temperature", "module"],
                temperatures=[i / 20 for i in range(21)], modules=["predict", "chain_of_thought"], trials=trials,
                startup_trials=4)
    tune.setup(ctx)  # the study is opened (and its tables made) before the clock starts
    tune.setup = lambda ctx: None
    paid.clear()
    print("ready", flush=True)
    while not os.path.exists(go):
        time.sleep(0.01)
    t0 = time.time()
    if os.environ.get("SCALE_PROFILE"):
        import cProfile
        cProfile.run("tune.run(ctx)", os.environ["SCALE_PROFILE"] + f".{os.getpid()}")
    else:
        tune.run(ctx)
    print(json.dumps({"start": t0, "end": time.time(), "paid": len(paid), "report": tune.report(),
                      "waited": ctx.pipeline.tally.waited}))
"""


def tune_round(url: str, processes: int, trials: int, api_base: str, root: Path, shared_archive: bool = True) -> dict:
    tag = f"{processes}-{shared_archive}-{time.monotonic_ns()}"  # a fresh archive each round: nothing to reuse
    go = root / f"go-{tag}"
    archive = root / f"archive-{tag}" if shared_archive else "memory"
    procs = [subprocess.Popen([sys.executable, "-c", textwrap.dedent(TUNE), url, str(archive), str(trials), api_base,
                               str(go)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for _ in range(processes)]
    for p in procs:
        line = p.stdout.readline()
        if line.strip() != "ready":
            raise RuntimeError(f"tune process failed: {p.stderr.read()[-2000:]}")
    go.touch()
    results = []
    for p in procs:
        out, err = p.communicate(timeout=1800)
        if p.returncode != 0:
            raise RuntimeError(f"tune process failed: {err[-2000:]}")
        results.append(json.loads(out.strip().splitlines()[-1]))
    wall = max(r["end"] for r in results) - min(r["start"] for r in results)
    asked = sum(r["report"]["asked"] for r in results)
    paid = sum(r["paid"] for r in results)
    return {"processes": processes, "asked": asked, "paid": paid, "wall_s": wall, "per_min": asked / wall * 60,
            "paid_per_min": paid / wall * 60, "skipped": sum(r["report"].get("skipped", 0) for r in results),
            "waited": sum(r["waited"] for r in results)}


def table_tune(args) -> list[str]:
    from masforge.testing.postgres import PostgresServer, unavailable

    why = unavailable()
    if why:
        line = f"# skipped: {why}"
        print(line, flush=True)
        return [line]
    out = [f"{'processes':>9} {'archive':<14} {'trials':>6} {'paid':>5} {'skipped':>7} {'wall s':>7} "
           f"{'trials/min':>10} {'paid/min':>8}"]
    print(out[0], flush=True)
    rates = {}
    with child_stub(args.latency) as api_base, tempfile.TemporaryDirectory() as tmp:
        for processes, shared in ((1, True), (2, False), (2, True)):
            runs = []
            for _ in range(args.repeats):
                with PostgresServer() as pg:  # a fresh study for each round
                    runs.append(tune_round(pg.url, processes, args.trials, api_base, Path(tmp), shared))
            r = sorted(runs, key=lambda r: r["per_min"])[len(runs) // 2]  # the median round
            rates[(processes, shared)] = r["per_min"]
            where = "one, shared" if shared and processes > 1 else ("own" if processes == 1 else "one each")
            out.append(f"{processes:>9} {where:<14} {r['asked']:>6} {r['paid']:>5} {r['skipped']:>7} "
                       f"{r['wall_s']:>7.1f} {r['per_min']:>10.1f} {r['paid_per_min']:>8.1f}")
            print(out[-1], flush=True)
    out.append(f"# two processes on one study: {rates[(2, True)] / rates[(1, True)]:.2f}x the trials per minute of one "
               f"with one shared archive, {rates[(2, False)] / rates[(1, True)]:.2f}x with an archive each "
               f"(median of {args.repeats} rounds)")
    print(out[-1], flush=True)
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--latency", type=float, default=0.2)
    parser.add_argument("--per-worker", type=int, default=16, help="examples in flight per Ray worker")
    parser.add_argument("--waves", type=int, default=4, help="examples per evaluation, in multiples of the "
                        "examples in flight")
    parser.add_argument("--evaluations", type=int, default=4, help="evaluations per measurement")
    parser.add_argument("--overhead-examples", type=int, default=40)
    parser.add_argument("--trials", type=int, default=20, help="tune trials per process")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", default=str(RESULTS / "scale.txt"))
    args = parser.parse_args(argv)

    lines = [f"# bench/scale.py  {time.strftime('%Y-%m-%d %H:%M:%S')}  python {platform.python_version()}  "
             f"cpus {os.cpu_count()}  load avg {os.getloadavg()[0]:.1f}",
             f"# stub server in a child process, latency {args.latency * 1000:.0f} ms; best (and median calls/s) of "
             f"{args.repeats}", "",
             f"## evaluation throughput: {args.evaluations} evaluations of {args.waves} x in-flight examples each "
             f"(cot, 1 LM call per example), {args.per_worker} examples in flight per worker, answer cache off"]
    print("\n".join(lines), flush=True)
    lines += table_throughput(args)
    lines += ["", "## Ray's overhead per example (fake LM, no delay, concurrency 1)"]
    print(lines[-1], flush=True)
    lines += table_overhead(args)
    lines += ["", f"## tune on one PostgreSQL study: {args.trials} trials per process (knobs temperature and "
              "module in predict/chain_of_thought: 4 LM calls per trial), the study opened before the clock starts"]
    print(lines[-1], flush=True)
    lines += table_tune(args)
    lines.append(f"# load avg at the end {os.getloadavg()[0]:.1f}")
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
