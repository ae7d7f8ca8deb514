"""Fidelity: does masforge keep the embedded model's competence? The io and cot seeds, run through masforge
(dspy + the prompt adapter + the evaluator), against a plain chat completion of the task's own prompt text
on the same server, same LM settings and the same metric (``Task.score``). io also runs through dspy's
ChatAdapter, to show what a heavy structured format costs a 0.5B model.

    MASFORGE_DATA_DIR=<data> python bench/fidelity.py [--tasks humaneval mbpp gsm8k rg:basic_arithmetic jsonl]
        [--n 32]

Tasks are task names (``rg:<family>`` for reasoning-gym), a .jsonl file of question/answer lines (exact match,
as a user's own data is scored), or ``jsonl``: such a file written from the first GSM8K test problems (the
question as asked, the number as the answer; the bench writes 5 x n lines so the file's validation split holds n).

Target (issues 9 and 27): masforge io >= plain chat - 2 points on every task. LM answers go through the normal
answer cache, so a rerun (or a stopped run started again) pays only for what is missing.
Writes bench/results/fidelity.txt.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import platform
import tempfile
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from masforge.evaluators.runner import Evaluator  # noqa: E402
from masforge.evaluators.stats import bootstrap_ci  # noqa: E402
from masforge.evaluators.tasks import get_task  # noqa: E402
from masforge.lm.client import LMClient, parse_lm  # noqa: E402
from masforge.seeds import load_seed  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results"


def plain_chat(task, client: LMClient, n: int, *, not_failures: tuple[str, ...] = ("ok", "wrong")) -> dict:
    """The baseline: the task's prompt as one user message, the reply scored as the answer (``wrong`` counted
    as a failure unless ``not_failures`` names it)."""
    start = time.perf_counter()
    examples = task.split("validation", limit=n)

    def ask(ex):
        return client.complete([{"role": "user", "content": "\n\n".join(str(v) for v in ex.inputs.values())}])

    # As many requests in flight as the LM serves at once, the same as the seeds' evaluator gets.
    with ThreadPoolExecutor(max_workers=client.config("worker").max_concurrency) as pool:
        replies = list(pool.map(ask, examples))
    graded = [task.score(ex, {"answer": c.text}) for ex, c in zip(examples, replies, strict=True)]
    scores = [g.value for g in graded]
    reasons = Counter(str(g.details.get("error_kind") or "unstated") for g in graded if g.value < 1.0)
    tokens = sum(c.prompt_tokens + c.completion_tokens for c in replies)
    return {"scores": scores, "tokens": tokens, "seconds": time.perf_counter() - start, "calls": len(scores),
            "cached": sum(c.cached for c in replies), "reasons": dict(reasons),
            "failures": {"wrong": n} if (n := sum(reasons.values())) and "wrong" not in not_failures else {}}


def through_masforge(task, client: LMClient, seed: str, n: int, *,
                     not_failures: tuple[str, ...] = ("ok", "wrong")) -> dict:
    """The seed run through masforge on the same examples (failures by kind, leaving out ``not_failures``)."""
    start = time.perf_counter()
    report = Evaluator(task, client, limit=n, concurrency=client.config("worker").max_concurrency,
                       example_timeout_s=3600).evaluate(load_seed(seed))
    return {"scores": report.scores, "tokens": report.tokens, "seconds": time.perf_counter() - start,
            "calls": report.llm_calls + report.cache_hits, "cached": report.cache_hits,
            "reasons": report.wrong_reasons,
            "failures": {k: v for k, v in report.failures.items() if k not in not_failures}}


JSONL_ROW = "jsonl"


def numbers_jsonl(n: int, folder: Path) -> Path:
    """A .jsonl task of a user's own kind: the first ``5 * n`` GSM8K test questions, each with its number as the
    answer, scored by exact match (its validation split then holds ``n``)."""
    from masforge.evaluators.benchmarks.gsm8k import GSM8K

    records = GSM8K().records(os.environ.get("MASFORGE_DATA_DIR"))["test"][: 5 * n]
    path = folder / "gsm8k_numbers.jsonl"
    path.write_text("".join(json.dumps({"question": r.fields["question"], "answer": str(r.target)}) + "\n"
                            for r in records), encoding="utf-8")
    return path


def resolve_task(name: str, n: int, folder: Path):
    """The task a --tasks entry names, and the label of its row."""
    if name == JSONL_ROW:
        return get_task(str(numbers_jsonl(n, folder))), "gsm8k.jsonl"
    return get_task(name), Path(name).name if name.endswith(".jsonl") else name


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", nargs="+", default=["humaneval", "mbpp", "gsm8k", "rg:basic_arithmetic", JSONL_ROW])
    parser.add_argument("--n", type=int, default=32, help="first N validation examples of each task")
    parser.add_argument("--lm", default="local")
    parser.add_argument("--out", default=str(RESULTS / "fidelity.txt"))
    args = parser.parse_args(argv)

    cfg = parse_lm(args.lm)
    plain_cfg = dataclasses.replace(cfg, adapter="plain")
    chat_cfg = dataclasses.replace(cfg, adapter="chat")
    runs = [("plain chat", None, cfg), ("io", "io", plain_cfg), ("cot", "cot", plain_cfg),
            ("io (ChatAdapter)", "io", chat_cfg)]
    header = [f"# bench/fidelity.py  {time.strftime('%Y-%m-%d %H:%M')}  python {platform.python_version()}  "
              f"cpus {os.cpu_count()}",
              f"# LM {cfg.model}: temperature {cfg.temperature}, max_tokens {cfg.max_tokens}; first {args.n} "
              "validation examples per task; score = mean of Task.score, 95% bootstrap CI",
              "# plain chat = the task's prompt text as one chat message; io/cot = the seeds through masforge "
              "(plain adapter); io (ChatAdapter) = io with dspy's ChatAdapter",
              "# io's message through the plain adapter is the task's prompt text itself, so it is the same request "
              "as plain chat: its answers come from the answer cache (same replies, 0 s)",
              ""]
    rows: list[str] = []
    verdicts: list[str] = []
    folder = Path(tempfile.mkdtemp(prefix="fidelity-"))
    for entry in args.tasks:
        task, name = resolve_task(entry, args.n, folder)
        results = {}
        for label, seed, run_cfg in runs:
            client = LMClient({"worker": run_cfg})
            results[label] = plain_chat(task, client, args.n) if seed is None else \
                through_masforge(task, client, seed, args.n)
            r = results[label]
            lo, hi = bootstrap_ci(r["scores"])
            mean = sum(r["scores"]) / len(r["scores"])
            fails = ", ".join(f"{k} {v}" for k, v in sorted(r["failures"].items())) or "-"
            rows.append(f"{name:<19} {label:<17} {len(r['scores']):>3} {mean:>6.3f} [{lo:.2f}, {hi:.2f}] "
                        f"{sum(r['scores']):>6.1f} {r['calls']:>6} {r['tokens']:>8} "
                        f"{r['seconds'] / len(r['scores']):>7.1f}  {fails}")
            print(rows[-1], flush=True)
        plain = sum(results["plain chat"]["scores"]) / len(results["plain chat"]["scores"])
        io = sum(results["io"]["scores"]) / len(results["io"]["scores"])
        ok = io >= plain - 0.02
        verdicts.append(f"{name:<19} io - plain chat = {100 * (io - plain):+.1f} points: "
                        f"{'target met' if ok else 'TARGET MISSED'}")
        write(args.out, header, rows, verdicts)
    write(args.out, header, rows, verdicts)


def write(out: str, header: list[str], rows: list[str], verdicts: list[str]) -> None:
    table = [f"{'task':<19} {'system':<17} {'n':>3} {'score':>6} {'95% CI':<12} {'solved':>6} {'calls':>6} "
             f"{'tokens':>8} {'s/ex':>7}  failures (not counting wrong answers)"]
    text = "\n".join([*header, *table, *rows, "", "## target: masforge io >= plain chat - 2 points", *verdicts])
    Path(out).parent.mkdir(parents=True, exist_ok=True)
    Path(out).write_text(text + "\n")


if __name__ == "__main__":
    main()
