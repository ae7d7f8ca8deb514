"""Seed leaderboard on the embedded model: every hand-designed seed on HumanEval and MBPP validation, with a
plain chat completion of the task's prompt as the reference row.

    MASFORGE_DATA_DIR=<data> python bench/seeds_local.py [--tasks humaneval mbpp] [--n 32] [--seeds io cot ...]

Per seed and task: score with its 95% bootstrap CI, LM calls and tokens per example, seconds per example, and
failures by kind (a seed that scores 0 because of format is a bug, not a result). LM answers go through the
normal answer cache, so a stopped run started again pays only for what is missing. Writes
bench/results/seeds_local.md after every seed, from the rows kept in bench/results/seeds_local.json: a row
there is not run again (its seconds are those of the run that generated its answers; a row re-run from the
answer cache would take about 0 s). `--rerun` runs every row again; `--write-only` writes the file from the kept
rows and runs nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from common import write_keeping_notes  # noqa: E402  (bench/ is the script's folder)
from fidelity import plain_chat, through_masforge  # noqa: E402

from masforge.evaluators.runner import READING_REVISION  # noqa: E402
from masforge.evaluators.stats import bootstrap_ci  # noqa: E402
from masforge.evaluators.tasks import get_task  # noqa: E402
from masforge.lm.client import LMClient, parse_lm  # noqa: E402
from masforge.local_model import get_spec  # noqa: E402
from masforge.seeds import seed_names  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results"
# How answers are read and scored (masforge's own revision, see evaluators/runner.py); kept rows from an older
# revision are scored again.
SCORING = READING_REVISION
# Cheapest first, so a stopped run has the most rows (calls per example: 1, 1-2, 2-3, ..., 7).
ORDER = ["io", "cot", "take_a_deep_breath", "step_back", "plan_and_solve", "expert_routing", "program_of_thought",
         "react_calculator", "self_refine", "reflexion_code", "code_verify", "code_ensemble", "sample_and_test",
         "self_consistency", "quality_diversity", "debate"]


def plain_row(task, client: LMClient, n: int) -> dict:
    return {"name": "(plain chat)", **plain_chat(task, client, n, not_failures=("ok",))}


def seed_row(task, client: LMClient, seed: str, n: int) -> dict:
    return {"name": seed, **through_masforge(task, client, seed, n, not_failures=("ok",))}


def _reasons(reasons: dict[str, int]) -> str:
    return ", ".join(f"{k.replace('_', ' ')} {v}" for k, v in sorted(reasons.items(), key=lambda kv: -kv[1]))


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
                "| system | n | score | 95% CI | LM calls/ex | from cache | tokens/ex | s/ex | failures |",
                "|---|---:|---:|---|---:|---:|---:|---:|---|"]
        for r in sorted(rows, key=lambda r: -sum(r["scores"]) / max(len(r["scores"]), 1)):
            n = max(len(r["scores"]), 1)
            lo, hi = bootstrap_ci(r["scores"])
            fails = ", ".join(f"{k} {v}" + (f" ({_reasons(r['reasons'])})" if k == "wrong" and r.get("reasons") else "")
                              for k, v in sorted(r["failures"].items())) or "-"
            cached = r.get("cached")  # rows from before the count was kept have none
            share = "?" if cached is None else f"{cached / max(r['calls'], 1):.0%}"
            out.append(f"| {r['name']} | {len(r['scores'])} | {sum(r['scores']) / n:.3f} | [{lo:.2f}, {hi:.2f}] | "
                       f"{r['calls'] / n:.1f} | {share} | {r['tokens'] / n:.0f} | {r['seconds'] / n:.1f} | {fails} |")
    return "\n".join(out) + "\n"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", nargs="+", default=["humaneval", "mbpp"])
    parser.add_argument("--n", type=int, default=32)
    parser.add_argument("--seeds", nargs="+", default=None)
    parser.add_argument("--lm", default="local")
    parser.add_argument("--out", default=str(RESULTS / "seeds_local.md"))
    parser.add_argument("--rerun", action="store_true", help="run rows again that the state file already has")
    parser.add_argument("--write-only", action="store_true", help="write the file from the kept rows, run nothing")
    args = parser.parse_args(argv)
    state_path = Path(args.out).with_suffix(".json")
    seeds = args.seeds or [s for s in ORDER if s in seed_names()] + [s for s in seed_names() if s not in ORDER]
    cfg = parse_lm(args.lm)
    model = f"the embedded model ({get_spec().alias}, {cfg.model!r})" if cfg.is_local else cfg.model
    header = [f"# Seed leaderboard on {model}",
              "",
              f"`bench/seeds_local.py`, {time.strftime('%Y-%m-%d')}, python {platform.python_version()}, "
              f"{os.cpu_count()} cores. First {args.n} validation examples per task; temperature "
              f"{cfg.temperature}, max_tokens {cfg.max_tokens}, prompt adapter {cfg.resolved_adapter}. "
              "Score = mean of Task.score (tests passed in the sandbox), 95% bootstrap CI. "
              "Failures: `wrong` = ran but failed the tests, with the metric's reasons in brackets (syntax = the "
              "answer's code does not parse, no code = the answer has no code, exception = a test failed or the "
              "code raised, timeout = the tests ran out of time); other kinds are errors of the system (parse = "
              "the reply could not be read, lm = the model server failed, code_* = a program the system ran "
              "failed). "
              "Seconds are wall time on a shared 2-core machine; `from cache` is the share of LM calls answered "
              "from the answer cache (generated by an earlier benchmark, e.g. fidelity's, so they took about 0 s "
              "here: see that benchmark for their time).",
              "", "(plain chat) is the task's prompt as one chat message: the reference a seed should not fall "
              "below without a reason."]
    # rows of earlier runs with the same settings, keyed "task/system"
    settings = {"n": args.n, "lm": cfg.key()}
    state = json.loads(state_path.read_text()) if state_path.is_file() and not args.rerun else {}
    kept: dict[str, dict] = state.get("rows", {}) if state.get("settings") == settings else {}
    tables: dict[str, list[dict]] = {t: [] for t in args.tasks}
    client = LMClient({"worker": cfg})
    tasks = {name: get_task(name) for name in args.tasks}

    def add(task_name: str, label: str, run) -> None:
        key = f"{task_name}/{label}"
        if args.write_only and key not in kept:
            return
        old = kept.get(key)
        if old is not None and old.get("scoring") != SCORING and old["scores"]:
            # kept from an older way of reading answers: scored again (from the answer cache, except where a
            # step now reads its input differently), keeping the time and cache share of the first run
            again = run()
            kept[key] = {**again, "seconds": old["seconds"] + again["seconds"], "cached": old.get("cached"),
                         "scoring": SCORING}
            state_path.write_text(json.dumps({"settings": settings, "rows": kept}, indent=1) + "\n")
        if key not in kept:
            try:
                kept[key] = {**run(), "scoring": SCORING}
            except Exception as exc:  # a seed that cannot run is a row to fix, not the end of the benchmark
                kept[key] = {"name": f"{label} (error: {exc})"[:120], "scores": [], "calls": 0, "cached": 0,
                             "tokens": 0, "seconds": 0.0, "failures": {}}
            state_path.write_text(json.dumps({"settings": settings, "rows": kept}, indent=1) + "\n")
            print(task_name, kept[key]["name"], sum(kept[key]["scores"]), flush=True)
        tables[task_name].append(kept[key])
        write_keeping_notes(Path(args.out), render(header, tables, seeds))

    for name, task in tasks.items():
        add(name, "(plain chat)", lambda task=task: plain_row(task, client, args.n))
    # Seed by seed over all tasks (not task by task): a stopped run has whole rows, cheapest seeds first.
    for seed in seeds:
        for name, task in tasks.items():
            add(name, seed, lambda task=task, seed=seed: seed_row(task, client, seed, args.n))


if __name__ == "__main__":
    main()
