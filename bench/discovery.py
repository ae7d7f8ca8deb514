"""Discovery at a real budget on the embedded model: does a search find a system that beats the best
hand-designed seed on held-out data?

Each strategy searches HumanEval validation (worker and meta-agent: the embedded model), seeds included,
all runs sharing one archive (a genome two strategies both propose is paid for once). Then the best seed
and each strategy's top-k are re-scored on the held-out HumanEval test split (``--test-limit`` examples), the
(found - best seed) difference gets a paired bootstrap 95% CI over the same test examples, and the best system
found overall is transferred to the MBPP test split next to the best seed. When ``--test-limit`` cuts the test
split short (the top-k of every strategy is expensive to re-score on a 40-tokens/s model), the best found
overall and the best seed still meet on the whole split (``--final-test-limit``): the decisive check.

    MASFORGE_DATA_DIR=<data> python bench/discovery.py [--strategies random meta evolve swarm] [--candidates 26]

Resumable: a strategy whose run folder exists is resumed (finished evaluations are reused, LM answers come
from the cache), so the benchmark can be stopped and started again across sessions. A strategy that already
reached its candidate budget is read from its summary, not resumed: a resume replays the proposals, and a
meta-agent changed since would propose other systems than the ones the finished run reports. Writes
bench/results/discovery.md and bench/results/discovery.svg after every strategy.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
import urllib.request
from pathlib import Path
from types import SimpleNamespace
from typing import Any

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

import numpy as np  # noqa: E402
from common import write_keeping_notes  # noqa: E402  (bench/ is the script's folder)

import masforge  # noqa: E402
from masforge.evaluators.runner import Evaluator  # noqa: E402
from masforge.evaluators.stats import paired_difference  # noqa: E402
from masforge.evaluators.tasks import get_task  # noqa: E402
from masforge.runtime.lm import LMClient, parse_lm  # noqa: E402
from masforge.runtime.local_model import shutdown_local_servers  # noqa: E402
from masforge.search.population import Candidate  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results"
CACHE_FILE = Path(__file__).resolve().parent / "cache" / "discovery_lm_cache.sqlite.gz"
SEEDS = ["io", "cot", "self_consistency", "self_refine", "debate", "reflexion_code"]
COLOURS = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2"]


def test_scores(task, client: LMClient, genome, limit: int | None) -> list[float]:
    """Per-example held-out scores (the search's own re-scoring paid for them: these come from the cache)."""
    ev = Evaluator(task, client, split="test", limit=limit, concurrency=client.config("worker").max_concurrency,
                   example_timeout_s=3600)
    return ev.evaluate(genome).scores


def paired_check(task, client: LMClient, found, seed, limit: int | None) -> dict[str, Any]:
    """The best found and the best seed on the same held-out examples of ``task``, paired."""
    found_scores = test_scores(task, client, found, limit)
    seed_scores = test_scores(task, client, seed, limit)
    return {"found": found, "seed": seed, "found_scores": found_scores, "seed_scores": seed_scores,
            "diff": paired_difference(found_scores, seed_scores)}


def _check_line(what: str, check: dict[str, Any]) -> str:
    d, f, s = check["diff"], check["found_scores"], check["seed_scores"]
    won = sum(a > b for a, b in zip(f, s, strict=True))
    lost = sum(a < b for a, b in zip(f, s, strict=True))
    return (f"{what} ({len(f)} examples): best found overall `{check['found'].name}` {np.mean(f):.3f} vs best seed "
            f"`{check['seed'].name}` {np.mean(s):.3f}; difference {d[0]:+.3f} [{d[1]:+.3f}, {d[2]:+.3f}] "
            f"(won {won}, lost {lost}).")


def finished_run(run_dir: Path, candidates: int) -> Any | None:
    """A run that reached ``candidates`` as its summary reports it (candidates rebuilt from the archive), or None."""
    path = run_dir / "summary.json"
    if not path.is_file():
        return None
    summary = json.loads(path.read_text())
    if summary.get("stop_reason") != "max_candidates" or summary["stats"].get("evaluated", 0) < candidates:
        return None
    from masforge.archive.store import Archive

    archive = Archive.open(run_dir / summary["archive"])
    cands = [Candidate(genome=archive.genome(c["id"]), score=c["score"], fitness=c["fitness"],
                       operator=c["operator"], strategy=c["strategy"], generation=c["generation"],
                       parents=list(c["parents"]), pruned=bool(c.get("pruned", False)))
             for c in summary["candidates"]]
    return SimpleNamespace(candidates=cands, stats=summary["stats"], spend=summary["spend"], run_dir=run_dir,
                           stop_reason=summary["stop_reason"])


def run_strategy(args: argparse.Namespace, strategy: str, state: dict[str, Any]) -> Any:
    run_dir = Path(args.runs) / f"discovery-{strategy}"
    done = finished_run(run_dir, args.candidates)
    if done is not None:
        return done
    started = time.time()
    common = dict(progress=False)
    if (run_dir / "config.yaml").is_file():  # resumed, possibly with a larger budget than before
        # (the concurrency the LM allows now: a run started on llama-cpp-python's server may go on with slots)
        result = masforge.resume(run_dir, budget={"max_candidates": args.candidates},
                                 concurrency=parse_lm(args.lm).max_concurrency, **common)
    else:
        result = masforge.optimize(
            args.task, strategy=strategy, budget={"max_candidates": args.candidates}, lm=args.lm, seeds=SEEDS,
            limit=args.limit, cascade_first=args.cascade, test_top_k=0,  # held-out re-scoring: below, paired
            concurrency=parse_lm(args.lm).max_concurrency, output=args.runs, name=run_dir.name,
            archive=str(Path(args.runs) / "archive"), seed=args.seed, **common)
    minutes = state.setdefault("minutes", {})
    minutes[strategy] = minutes.get(strategy, 0.0) + (time.time() - started) / 60
    return result


def search_minutes(run_dir: Path) -> float:
    """The search's own clock from its ledger (it goes on across resumes, so killed segments count too)."""
    ledger = Path(run_dir) / "ledger.jsonl"
    if not ledger.is_file():
        return 0.0
    last = 0.0
    for line in ledger.read_text().splitlines():
        try:
            last = max(last, float(json.loads(line).get("t", 0.0)))
        except (ValueError, AttributeError):
            continue  # a line cut by a kill
    return last / 60


def events(run_dir: Path, ids: set[str]) -> list[dict[str, Any]]:
    """The run's candidates in the order they were first evaluated (only ``ids``: a killed resume that proposed
    other systems after the run had finished left rows that are not part of its result)."""
    path = run_dir / "events.jsonl"
    if not path.is_file():
        return []
    rows, seen = [], set()
    for line in path.read_text().splitlines():
        try:
            row = json.loads(line)
        except ValueError:
            continue  # a line cut by a kill
        if row.get("event") == "candidate" and row["id"] in ids and row["id"] not in seen:  # resumes replay
            seen.add(row["id"])
            rows.append(row)
    return rows


def svg_plot(curves: dict[str, list[float]], out: Path) -> None:
    """Best validation score so far against candidates evaluated, one line per strategy."""
    w, h, left, right, top, bottom = 640, 340, 56, 150, 16, 46
    n_max = max((len(c) for c in curves.values()), default=1)
    ys = [v for c in curves.values() for v in c] or [0.0, 1.0]
    lo, hi = max(0.0, min(ys) - 0.05), min(1.0, max(ys) + 0.05)

    def x(i: float) -> float:
        return left + i / max(n_max - 1, 1) * (w - left - right)

    def y(v: float) -> float:
        return h - bottom - (v - lo) / ((hi - lo) or 1) * (h - top - bottom)

    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {w} {h}" width="{w}" height="{h}" '
             'font-family="sans-serif" font-size="11">', f'<rect width="{w}" height="{h}" fill="white"/>']
    for k in range(6):
        v = lo + (hi - lo) * k / 5
        parts.append(f'<line x1="{left}" x2="{w - right}" y1="{y(v):.1f}" y2="{y(v):.1f}" stroke="#ddd"/>'
                     f'<text x="{left - 6}" y="{y(v) + 4:.1f}" text-anchor="end">{v:.2f}</text>')
    for i in range(0, n_max, max(1, n_max // 10)):
        parts.append(f'<text x="{x(i):.1f}" y="{h - bottom + 16}" text-anchor="middle">{i + 1}</text>')
    parts.append(f'<text x="{(left + w - right) / 2:.0f}" y="{h - 8}" text-anchor="middle">candidates evaluated '
                 '(seeds first)</text>')
    parts.append(f'<text x="14" y="{(top + h - bottom) / 2:.0f}" text-anchor="middle" '
                 f'transform="rotate(-90 14 {(top + h - bottom) / 2:.0f})">best validation score so far</text>')
    for k, (name, curve) in enumerate(curves.items()):
        colour = COLOURS[k % len(COLOURS)]
        pts = " ".join(f"{x(i):.1f},{y(v):.1f}" for i, v in enumerate(curve))
        parts.append(f'<polyline fill="none" stroke="{colour}" stroke-width="2" points="{pts}"/>')
        parts.append(f'<line x1="{w - right + 12}" x2="{w - right + 32}" y1="{top + 14 + 16 * k}" '
                     f'y2="{top + 14 + 16 * k}" stroke="{colour}" stroke-width="3"/>'
                     f'<text x="{w - right + 38}" y="{top + 18 + 16 * k}">{name}</text>')
    parts.append("</svg>")
    out.write_text("\n".join(parts) + "\n")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--task", default="humaneval")
    parser.add_argument("--transfer", default="mbpp")
    parser.add_argument("--strategies", nargs="+", default=["random", "meta", "evolve", "swarm"])
    parser.add_argument("--candidates", type=int, default=26, help="per strategy, seeds included")
    parser.add_argument("--limit", type=int, default=32, help="validation examples per candidate")
    parser.add_argument("--cascade", type=int, default=8, help="score this many first; stop a hopeless candidate")
    parser.add_argument("--test-limit", type=int, default=None, help="held-out examples (default: the whole split)")
    parser.add_argument("--transfer-limit", type=int, default=None)
    parser.add_argument("--final-test-limit", type=int, default=None,
                        help="the best found overall against the best seed on this many held-out examples "
                             "(default: the whole split; only run when --test-limit is smaller)")
    parser.add_argument("--top-k", type=int, default=3)
    parser.add_argument("--lm", default="local")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--runs", default="runs/discovery", help="run folders and the shared archive (not committed)")
    parser.add_argument("--out", default=str(RESULTS / "discovery.md"))
    args = parser.parse_args(argv)
    args.argv = list(sys.argv[1:] if argv is None else argv)

    state_path = Path(args.runs) / "bench_state.json"
    Path(args.runs).mkdir(parents=True, exist_ok=True)
    state = json.loads(state_path.read_text()) if state_path.is_file() else {}
    task = get_task(args.task)
    client = LMClient({"worker": parse_lm(args.lm)})
    rows: list[dict[str, Any]] = []
    curves: dict[str, list[float]] = {}
    overall: tuple[float, Any, str] | None = None  # validation fitness, genome, strategy
    best_seed_genome = None
    for strategy in args.strategies:
        result = run_strategy(args, strategy, state)
        state_path.write_text(json.dumps(state))
        if result.stop_reason == "interrupted":
            shutdown_local_servers()  # requests still generating would otherwise hold the exit for minutes
            raise SystemExit(f"interrupted during {strategy}: run the same command again to continue")
        cands = [c for c in result.candidates if not c.pruned]
        seeds = sorted((c for c in cands if c.operator == "seed"), key=lambda c: -c.fitness)
        found = sorted((c for c in cands if c.operator != "seed"), key=lambda c: -c.fitness)[: args.top_k]
        row: dict[str, Any] = {"strategy": strategy, "result": result, "best_seed": None, "top": []}
        if seeds:
            seed_scores = test_scores(task, client, seeds[0].genome, args.test_limit)
            row["best_seed"] = (seeds[0], float(np.mean(seed_scores)))
            best_seed_genome = seeds[0].genome
            for c in found:
                scores = test_scores(task, client, c.genome, args.test_limit)
                row["top"].append((c, float(np.mean(scores))))
                if c is found[0]:
                    row["diff"] = paired_difference(scores, seed_scores)
            if found and (overall is None or found[0].fitness > overall[0]):
                overall = (found[0].fitness, found[0].genome, strategy)
        stats = result.stats
        proposals = [c for c in result.candidates if c.operator != "seed"]
        tried = len(proposals) + stats.get("rejected", 0)
        row["valid_share"] = len(proposals) / tried if tried else float("nan")
        row["duplicates"] = stats.get("duplicates", 0)
        row["calls"] = result.spend.get("llm_calls", 0)
        row["cached"] = result.spend.get("cache_hits", 0)  # a run replayed from the answer cache generates nothing
        # a finished run read from its summary: its clock then (a later killed resume may have run on)
        finished_s = result.spend.get("elapsed_s") if isinstance(result, SimpleNamespace) else None
        row["minutes"] = (finished_s / 60 if finished_s else search_minutes(result.run_dir)
                          or state.get("minutes", {}).get(strategy, 0.0))
        row["operators"] = _operator_gains(result)
        rows.append(row)
        run_events = events(result.run_dir, {c.id for c in result.candidates})
        curve, best = [], 0.0
        for e in run_events:
            best = max(best, float(e["score"]))
            curve.append(best)
        curves[strategy] = curve
        write(args, rows, None, None)
        svg_plot(curves, Path(args.out).with_suffix(".svg"))
    final = transfer = None
    if overall is not None and best_seed_genome is not None:
        if args.test_limit is not None and args.final_test_limit != args.test_limit:
            final = paired_check(task, client, overall[1], best_seed_genome, args.final_test_limit)
            final["strategy"] = overall[2]
        if args.transfer:
            transfer = paired_check(get_task(args.transfer), client, overall[1], best_seed_genome,
                                    args.transfer_limit)
    write(args, rows, transfer, final)


def _command_args(argv: list[str]) -> str:
    """The command's arguments without where the runs and results went (paths of the machine that ran it)."""
    out, skip = [], False
    for arg in argv:
        if skip or arg.startswith(("--out=", "--runs=")):
            skip = False
            continue
        if arg in ("--out", "--runs"):
            skip = True
            continue
        out.append(arg)
    return " ".join(out)


def _calls(row: dict[str, Any]) -> str:
    """LM calls a search made, and the answers it read from the cache instead (if any)."""
    cached = row.get("cached", 0)
    return f"{row['calls']} + {cached} cached" if cached else str(row["calls"])


def _operator_gains(result: Any) -> str:
    """Per operator: proposals evaluated and how many beat the best seed's validation score."""
    seeds = [c.score for c in result.candidates if c.operator == "seed"]
    bar = max(seeds, default=0.0)
    counts: dict[str, list[int]] = {}
    for c in result.candidates:
        if c.operator == "seed":
            continue
        entry = counts.setdefault(c.operator, [0, 0])
        entry[0] += 1
        entry[1] += int(c.score > bar)
    return ", ".join(f"{op} {n} ({better} > best seed)" for op, (n, better) in sorted(counts.items())) or "-"


def _server() -> str:
    from masforge.runtime.llama_server import SLOTS, server_binary
    from masforge.runtime.local_model import EXTERNAL_API_BASE_ENV

    external = os.environ.get(EXTERNAL_API_BASE_ENV, "").strip()
    if external:  # a server started beside the run (shared by several benchmarks): ask it how many slots
        try:
            props = f"{external.rstrip('/').removesuffix('/v1')}/props"
            with urllib.request.urlopen(props, timeout=5) as reply:
                slots = json.load(reply).get("total_slots")
        except (OSError, ValueError):
            slots = None
        return f"a llama.cpp server started beside the run{f' with {slots} slots' if slots else ''}"
    return f"llama.cpp's server with {SLOTS} slots" if server_binary() else "llama-cpp-python's server"


def _status(args: argparse.Namespace, rows: list[dict[str, Any]]) -> list[str]:
    done = [r["strategy"] for r in rows]
    todo = [s for s in args.strategies if s not in done]
    if not todo:
        return []
    return [f"**Status: not finished.** Done: {', '.join(done) or 'none'}; still to run: {', '.join(todo)} (the "
            "same command goes on from the run folders and the answer cache), then the decisive check of the "
            f"best found on the whole test split and the transfer to {args.transfer}.", ""]


def write(args: argparse.Namespace, rows: list[dict[str, Any]], transfer: dict[str, Any] | None,
          final: dict[str, Any] | None) -> None:
    cfg = parse_lm(args.lm)
    held_out = ("the whole test split" if args.test_limit is None
                else f"the first {args.test_limit} examples of the test split")
    lines = [
        "# Discovery on the embedded model",
        "",
        f"`bench/discovery.py`, {time.strftime('%Y-%m-%d')}, python {platform.python_version()}, {os.cpu_count()} "
        f"cores (shared with other work). Worker and meta-agent: {cfg.model} (temperature {cfg.temperature}, "
        f"prompt adapter {cfg.resolved_adapter}{f'; served by {_server()}' if cfg.is_local else ''}). "
        f"Search on {args.task} validation ({args.limit} examples, cascade {args.cascade}), {args.candidates} "
        f"candidates per strategy including the seeds {', '.join(SEEDS)}; all strategies share one archive. "
        f"Held-out: {held_out}. (found - best seed) is the paired "
        "difference on the same test examples with a 95% bootstrap CI. `valid` = share of the strategy's "
        "proposals that were valid and ran; `dups` = proposals skipped as already tried; `LM calls` = answers "
        "the search generated + answers it read from the answer cache; `minutes` = the search's own clock (across "
        "resumes), without the held-out re-scoring (a search read back from the cache takes seconds).",
        "",
        f"Command: `python bench/discovery.py {_command_args(args.argv)}`. The LM answers of this run are committed "
        f"as `{CACHE_FILE.relative_to(RESULTS.parent.parent)}`: unpack it and point `MASFORGE_LM_CACHE` at it to "
        "re-run or continue the benchmark without generating any answer twice.",
        "",
        *_status(args, rows),
        "| strategy | best seed (val / test) | best found (val / test) | found - seed on test [95% CI] | "
        f"top-{args.top_k} found, test | valid | dups | LM calls | minutes |",
        "|---|---|---|---|---|---:|---:|---:|---:|",
    ]
    verdict = []
    for r in rows:
        bs, top = r["best_seed"], r["top"]
        seed_txt = f"{bs[0].genome.name} {bs[0].score:.3f} / {bs[1]:.3f}" if bs else "-"
        found_txt = f"{top[0][0].genome.name} {top[0][0].score:.3f} / {top[0][1]:.3f}" if top else "-"
        diff = r.get("diff")
        diff_txt = f"{diff[0]:+.3f} [{diff[1]:+.3f}, {diff[2]:+.3f}]" if diff else "-"
        top_txt = ", ".join(f"{t:.2f}" for _, t in top) or "-"
        valid = "-" if np.isnan(r["valid_share"]) else f"{r['valid_share']:.0%}"
        lines.append(f"| {r['strategy']} | {seed_txt} | {found_txt} | {diff_txt} | {top_txt} | "
                     f"{valid} | {r['duplicates']} | {_calls(r)} | {r['minutes']:.0f} |")
        if diff and diff[1] > 0:
            verdict.append(r["strategy"])
    lines += ["", "Operators (proposals evaluated, and how many beat the best seed on validation):", ""]
    lines += [f"- {r['strategy']}: {r['operators']}" for r in rows]
    lines += ["", "![best validation score so far per strategy](discovery.svg)", ""]
    if final:
        what = "whole" if args.final_test_limit is None else "first part of the"
        lines += [_check_line(f"Decisive check on the {what} {args.task} test split, found by {final['strategy']}",
                              final), ""]
        if final["diff"][1] > 0 and final["strategy"] not in verdict:
            verdict.append(final["strategy"])
        elif final["diff"][1] <= 0 and final["strategy"] in verdict:  # the whole split outweighs its first part
            verdict.remove(final["strategy"])
    if transfer:
        lines += [_check_line(f"Transfer to {args.transfer} test", transfer), ""]
    if rows and len(rows) < len(args.strategies):
        lines.append("**Result so far:** " + (f"{', '.join(verdict)} found a system whose held-out CI of (found - best "
                                               "seed) lies above 0." if verdict else
                                               "no finished strategy found a system whose held-out CI of (found - "
                                               "best seed) lies above 0."))
    elif rows:
        if verdict:
            lines.append(f"**Result:** {', '.join(verdict)} found a system whose held-out CI of (found - best seed) "
                         "lies above 0.")
        else:
            lines.append("**Result:** no strategy found a system whose held-out CI of (found - best seed) lies above 0 "
                         "at this budget; see the operators line for where improvements came from.")
    write_keeping_notes(Path(args.out), "\n".join(lines))
    print("\n".join(lines), flush=True)


if __name__ == "__main__":
    main()
