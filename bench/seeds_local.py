"""Seed leaderboard on the embedded model: every hand-designed seed on HumanEval and MBPP validation, with a
plain chat completion of the task's prompt as the reference row.

    MASFORGE_DATA_DIR=<data> python bench/seeds_local.py [--tasks humaneval mbpp] [--n 32] [--seeds io cot ...]

Per seed and task: score with its 95% bootstrap CI, LM calls and tokens per example, seconds per example, and
failures by kind (a seed that scores 0 because of format is a bug, not a result). LM answers go through the
normal answer cache, so a stopped run started again pays only for what is missing. Writes
bench/results/seeds_local.md after every seed.
"""

from __future__ import annotations

import argparse
import os
import platform
import time
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from fidelity import plain_chat, through_masforge  # noqa: E402  (bench/ is the script's folder)

from masforge.evaluators.stats import bootstrap_ci  # noqa: E402
from masforge.evaluators.tasks import get_task  # noqa: E402
from masforge.runtime.lm import LMClient, parse_lm  # noqa: E402
from masforge.seeds import seed_names  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results"
# Cheapest first, so a stopped run has the most rows (calls per example: 1, 1-2, 2-3, ..., 7).
ORDER = ["io", "cot", "take_a_deep_breath", "step_back", "plan_and_solve", "expert_routing", "program_of_thought",
         "react_calculator", "self_refine", "reflexion_code", "code_verify", "code_ensemble", "self_consistency",
         "quality_diversity", "debate"]


def plain_row(task, client: LMClient, n: int) -> dict:
    return {"name": "(plain chat)", **plain_chat(task, client, n)}


def seed_row(task, client: LMClient, seed: str, n: int) -> dict:
    return {"name": seed, **through_masforge(task, client, seed, n, not_failures=("ok",))}


def render(header: list[str], tables: dict[str, list[dict]], seeds: list[str] | None = None) -> str:
    out = [*header]
    # a seed is done when every task has its row (an error row counts: it is a result to fix)
    ran = [{r["name"].split(" (error")[0] for r in rows} for rows in tables.values()]
    todo = [s for s in seeds or [] if not all(s in names for names in ran)]
    if todo:
        out += ["", f"**Status: not finished.** Still to run: {', '.join(todo)} (the same command goes on; "
                    "answers already generated come from the answer cache)."]
    for task, rows in tables.items():
        out += ["", f"## {task}", "",
                "| system | n | score | 95% CI | LM calls/ex | tokens/ex | s/ex | failures |",
                "|---|---:|---:|---|---:|---:|---:|---|"]
        for r in sorted(rows, key=lambda r: -sum(r["scores"]) / max(len(r["scores"]), 1)):
            n = max(len(r["scores"]), 1)
            lo, hi = bootstrap_ci(r["scores"])
            fails = ", ".join(f"{k} {v}" for k, v in sorted(r["failures"].items())) or "-"
            out.append(f"| {r['name']} | {len(r['scores'])} | {sum(r['scores']) / n:.3f} | [{lo:.2f}, {hi:.2f}] | "
                       f"{r['calls'] / n:.1f} | {r['tokens'] / n:.0f} | {r['seconds'] / n:.1f} | {fails} |")
    return "\n".join(out) + "\n"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", nargs="+", default=["humaneval", "mbpp"])
    parser.add_argument("--n", type=int, default=32)
    parser.add_argument("--seeds", nargs="+", default=None)
    parser.add_argument("--lm", default="local")
    parser.add_argument("--out", default=str(RESULTS / "seeds_local.md"))
    args = parser.parse_args(argv)
    seeds = args.seeds or [s for s in ORDER if s in seed_names()] + [s for s in seed_names() if s not in ORDER]
    cfg = parse_lm(args.lm)
    header = [f"# Seed leaderboard on {cfg.model}",
              "",
              f"`bench/seeds_local.py`, {time.strftime('%Y-%m-%d')}, python {platform.python_version()}, "
              f"{os.cpu_count()} cores. First {args.n} validation examples per task; temperature "
              f"{cfg.temperature}, max_tokens {cfg.max_tokens}, prompt adapter {cfg.resolved_adapter}. "
              "Score = mean of Task.score (tests passed in the sandbox), 95% bootstrap CI. "
              "Failures: `wrong` = ran but failed the tests; other kinds are errors (code_syntax = the answer's "
              "code does not parse, parse = the reply could not be read, lm = the model server failed). "
              "Seconds are wall time on a shared 2-core machine.",
              "", "(plain chat) is the task's prompt as one chat message: the reference a seed should not fall "
              "below without a reason."]
    tables: dict[str, list[dict]] = {t: [] for t in args.tasks}
    client = LMClient({"worker": cfg})
    tasks = {name: get_task(name) for name in args.tasks}
    for name, task in tasks.items():
        tables[name].append(plain_row(task, client, args.n))
        Path(args.out).write_text(render(header, tables, seeds))
    # Seed by seed over all tasks (not task by task): a stopped run has whole rows, cheapest seeds first.
    for seed in seeds:
        for name, task in tasks.items():
            try:
                tables[name].append(seed_row(task, client, seed, args.n))
            except Exception as exc:  # a seed that cannot run is a row to fix, not the end of the benchmark
                tables[name].append({"name": f"{seed} (error: {exc})"[:120], "scores": [], "calls": 0, "tokens": 0,
                                     "seconds": 0.0, "failures": {}})
            print(name, tables[name][-1]["name"], sum(tables[name][-1]["scores"]), flush=True)
            Path(args.out).write_text(render(header, tables, seeds))


if __name__ == "__main__":
    main()
