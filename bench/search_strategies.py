"""Does search beat the seeds? For each strategy (random search is the baseline), a fixed budget of
candidate evaluations on the embedded local model, then the held-out test score of the best discovered
system against the best seed's. Numbers are reported as measured, whatever they are.

    python bench/search_strategies.py --tasks rg:basic_arithmetic humaneval --candidates 4

Results are appended to bench/results/search_strategies.txt as each run finishes.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import masforge

STRATEGIES = ["random", "evolve", "meta", "swarm", "knapsack", "coevolve", "tune"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--tasks", nargs="+", default=["rg:basic_arithmetic", "humaneval"])
    parser.add_argument("--strategies", nargs="+", default=STRATEGIES)
    parser.add_argument("--candidates", type=int, default=4)
    parser.add_argument("--limit", type=int, default=4)
    parser.add_argument("--test-limit", type=int, default=6)
    parser.add_argument("--lm", default="local")
    parser.add_argument("--output", default="/tmp/masforge-bench-runs")
    parser.add_argument("--results", type=Path, default=Path(__file__).parent / "results" / "search_strategies.txt")
    args = parser.parse_args()

    args.results.parent.mkdir(parents=True, exist_ok=True)
    with args.results.open("a") as out:
        out.write(f"\n# {time.strftime('%Y-%m-%d %H:%M')} lm={args.lm} candidates={args.candidates} "
                  f"validation examples={args.limit} test examples={args.test_limit} seeds=io,cot\n")
        out.write(f"{'task':22s} {'strategy':9s} {'best seed test':>14s} {'best found test':>15s} "
                  f"{'found is seed':>13s} {'LM calls':>8s} {'tokens':>8s} {'minutes':>7s}\n")
    for task in args.tasks:
        for strategy in args.strategies:
            start = time.time()
            try:
                result = masforge.optimize(task, strategy=strategy, budget=args.candidates, lm=args.lm,
                                           seeds=["io", "cot"], limit=args.limit, test_limit=args.test_limit,
                                           test_top_k=1, concurrency=1, output=args.output)
            except Exception as exc:  # a strategy failing is a result to report, not a reason to stop the bench
                line = f"{task:22s} {strategy:9s} failed: {exc}\n"
            else:
                seeds = [t for t in result.test_scores if t.is_seed]
                found = [t for t in result.test_scores if t.genome_id == result.best.id]
                seed_test = max((t.test for t in seeds), default=float("nan"))
                found_test = found[0].test if found else float("nan")
                is_seed = "yes" if found and found[0].is_seed else "no"
                line = (f"{task:22s} {strategy:9s} {seed_test:14.3f} {found_test:15.3f} {is_seed:>13s} "
                        f"{result.spend['llm_calls']:8d} {result.spend['tokens']:8d} "
                        f"{(time.time() - start) / 60:7.1f}\n")
            print(line, end="", flush=True)
            with args.results.open("a") as out:
                out.write(line)


if __name__ == "__main__":
    main()
