"""Discovery at a real budget on the embedded model: does a search find a system that beats the best
hand-designed seed on held-out data?

For one task, the classic seeds are scored first (raced as in every search) so that their answers are in the shared
answer cache; then each strategy searches with the same budget of LM calls (``--calls``: answers it generates;
answers already in the cache are free to every strategy alike), starting from those seeds, scoring
candidates on the selection set (the task's validation + train splits, ``--limit`` examples, raced against the
incumbent) in a run folder and archive of its own (no strategy reuses another's results). Then:

* each strategy's best found system (by selection score) meets the best seed on the held-out test split
  (``--test-limit``; default all of it), paired, with a bootstrap 95% CI;
* per strategy: LM calls until a proposal first beat the best seed on the selection set, and the search's cost
  against its gain (LM calls spent searching / gain per example on the test split: the LM calls each extra
  solved problem cost);
* the best system found overall (by selection score, never by test score) meets the best seed and the
  ``--reference`` system (the team's own design, not a seed) on the whole test split (or its first
  ``--decisive-limit`` examples: GSM8K's test split holds 1,319), and is transferred to the
  ``--transfer`` task's test split; it is written to ``bench/results/discovered/<task>.yaml``.

    MASFORGE_DATA_DIR=<data> python bench/discovery.py --task humaneval --strategies random evolve coevolve ...

Resumable: a strategy whose run folder exists is resumed (finished evaluations are reused, LM answers come from
the cache) unless it finished. Each task's numbers are kept in ``bench/results/discovery/<task>.json``, and
``bench/results/discovery.md`` is written from every task's file (a person's notes below its marker are kept).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

import numpy as np  # noqa: E402
from common import write_keeping_notes  # noqa: E402  (bench/ is the script's folder)

import masforge  # noqa: E402
from masforge.errors import MasforgeError  # noqa: E402
from masforge.evaluators.runner import Evaluator  # noqa: E402
from masforge.evaluators.stats import paired_difference  # noqa: E402
from masforge.evaluators.tasks import get_task  # noqa: E402
from masforge.genome.io import dump_genome, load_genome, parse_genome_text, save_genome  # noqa: E402
from masforge.lm.client import LMClient, parse_lm  # noqa: E402
from masforge.local_model import shutdown_local_servers  # noqa: E402
from masforge.seeds import resolve_genome  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results"
CACHE_FILE = Path(__file__).resolve().parent / "cache" / "discovery_lm_cache.sqlite.gz"
CLASSIC_SEEDS = ["io", "cot", "self_consistency", "self_refine", "debate"]
CODE_SEEDS = [*CLASSIC_SEEDS, "reflexion_code"]
CODE_TASKS = ("humaneval", "mbpp")
COLOURS = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2"]
FINISHED = ("max_candidates", "llm_calls", "strategies finished", "tokens", "dollars", "seconds")


def seeds_for(task: str, chosen: list[str] | None = None) -> list[str]:
    """The seeds given (--seeds), else the classic seeds; reflexion_code (a programmer with tests and a reflector)
    only for code tasks."""
    if chosen:
        return list(chosen)
    return CODE_SEEDS if task in CODE_TASKS else CLASSIC_SEEDS


# ------------------------------------------------------------------------------------------------ scoring


def test_scores(task: Any, client: LMClient, genome: Any, limit: int | None) -> dict[str, float]:
    """Held-out score of each example by id (answers in the cache are read back, the rest generated)."""
    ev = Evaluator(task, client, split="test", limit=limit, concurrency=client.config("worker").max_concurrency,
                   example_timeout_s=3600)
    report = ev.evaluate(genome)
    if report.stopped or report.incomplete:
        raise SystemExit(f"scoring {genome.name} on the test split stopped ({report.stopped or report.outage}): "
                         "run the same command again to continue")
    return report.example_scores()


def paired(found: dict[str, float], seed: dict[str, float]) -> dict[str, Any]:
    """Found minus seed on the examples both have: mean, CI, wins and losses."""
    ids = [k for k in seed if k in found]
    f, s = [found[k] for k in ids], [seed[k] for k in ids]
    diff, low, high = paired_difference(f, s)
    return {"n": len(ids), "found": float(np.mean(f)) if f else 0.0, "seed": float(np.mean(s)) if s else 0.0,
            "diff": diff, "low": low, "high": high, "won": sum(a > b for a, b in zip(f, s, strict=True)),
            "lost": sum(a < b for a, b in zip(f, s, strict=True))}


# ------------------------------------------------------------------------------------------------ one strategy


def _summary(run_dir: Path) -> dict[str, Any] | None:
    path = run_dir / "summary.json"
    return json.loads(path.read_text()) if path.is_file() else None


def run_folder(args: argparse.Namespace, spec: str) -> Path:
    """The run folder of ``spec``: a strategy's name, or ``name:tag`` for a longer search of the same strategy."""
    name, _, tag = spec.partition(":")
    return Path(args.runs) / (f"{args.task}-{name}" + (f"-{tag}" if tag else ""))


def run_strategy(args: argparse.Namespace, spec: str) -> Path:
    """Search with the strategy ``spec`` names (or resume its stopped search); returns its run folder. A tagged
    spec (``evolve:600``) continues the untagged run of the same strategy with this budget, in a copy: the
    equal-budget row stays as it was."""
    strategy = spec.partition(":")[0]
    run_dir = run_folder(args, spec)
    base = run_folder(args, strategy)
    if run_dir != base and not run_dir.exists() and (base / "config.yaml").is_file():
        shutil.copytree(base, run_dir, symlinks=True)
        (run_dir / "summary.json").unlink(missing_ok=True)  # not finished: the copy goes on with the new budget
    summary = _summary(run_dir)
    if summary is not None and summary.get("stop_reason") in FINISHED:
        return run_dir
    budget = {"max_calls": args.calls, "max_candidates": args.candidates}
    concurrency = parse_lm(args.lm).max_concurrency
    if (run_dir / "config.yaml").is_file():
        result = masforge.resume(run_dir, budget=budget, concurrency=concurrency, progress=args.progress)
    else:
        options = {strategy: dict(o.split("=", 1) for o in args.option if o.startswith(f"{strategy}."))}
        options = {k: {kk.split(".", 1)[1]: _value(v) for kk, v in o.items()} for k, o in options.items() if o}
        result = masforge.optimize(args.task, strategy=strategy, budget=budget, lm=args.lm,
                                   seeds=seeds_for(args.task, args.seeds),
                                   limit=args.limit, test_top_k=0, concurrency=concurrency, output=args.runs,
                                   name=run_dir.name, seed=args.seed, progress=args.progress,
                                   strategy_options=options or None)
    if result.stop_reason in ("interrupted", "outage"):
        shutdown_local_servers()
        raise SystemExit(f"{strategy} stopped ({result.stop_reason}): run the same command again to continue")
    return run_dir


def warm_seeds(args: argparse.Namespace) -> None:
    """Score the seeds once, raced as every strategy races them, before any strategy runs: their answers are then
    in the shared cache, so no strategy's budget pays for them (the first one would otherwise)."""
    run_dir = Path(args.runs) / f"{args.task}-seeds"
    summary = _summary(run_dir)
    if summary is not None and summary.get("stop_reason") in FINISHED:
        return
    budget = {"max_candidates": len(seeds_for(args.task, args.seeds))}
    concurrency = parse_lm(args.lm).max_concurrency
    if (run_dir / "config.yaml").is_file():
        result = masforge.resume(run_dir, concurrency=concurrency, progress=args.progress)
    else:
        result = masforge.optimize(args.task, strategy="random", budget=budget, lm=args.lm,
                                   seeds=seeds_for(args.task, args.seeds),
                                   limit=args.limit, test_top_k=0, concurrency=concurrency, output=args.runs,
                                   name=run_dir.name, seed=args.seed, progress=args.progress)
    if result.stop_reason in ("interrupted", "outage"):
        shutdown_local_servers()
        raise SystemExit(f"the seeds stopped ({result.stop_reason}): run the same command again to continue")


def library_seeds(task: Any, args: argparse.Namespace) -> list[str]:
    """Every shipped seed that applies to ``task`` (valid, with inputs the task can feed): the run's seeds first,
    then ``--library-first`` (tried early so the race has a strong incumbent: the order changes only how many
    examples a raced-out seed is scored on), then the rest by name."""
    from masforge.evaluators.runner import input_mapping
    from masforge.genome.validate import problems
    from masforge.seeds import load_seed, seed_names

    def applies(name: str) -> bool:
        genome = load_seed(name)
        try:
            input_mapping(genome, task)
        except MasforgeError:
            return False
        return not problems(genome)

    first = [*seeds_for(args.task, args.seeds), *args.library_first]
    order = list(dict.fromkeys([*first, *sorted(seed_names())]))
    return [n for n in order if n in seed_names() and applies(n)]


def library_stage(args: argparse.Namespace, task: Any, client: LMClient,
                  test_cache: dict[str, dict[str, float]]) -> dict[str, Any]:
    """Race every applicable shipped seed on the selection set (answers in the shared cache are free), as a search
    races its seeds; the best (the race's incumbent) is scored on the test split: the reference a found system must
    beat. Returns the library's row."""
    names = library_seeds(task, args)
    run_dir = Path(args.runs) / f"{args.task}-library"
    summary = _summary(run_dir)
    if summary is None or summary.get("stop_reason") not in FINISHED:
        concurrency = parse_lm(args.lm).max_concurrency
        if (run_dir / "config.yaml").is_file():
            result = masforge.resume(run_dir, concurrency=concurrency, progress=args.progress)
        else:
            result = masforge.optimize(args.task, strategy="random", budget={"max_candidates": len(names)},
                                       lm=args.lm, seeds=names, limit=args.limit, test_top_k=0,
                                       concurrency=concurrency, output=args.runs, name=run_dir.name, seed=args.seed,
                                       progress=args.progress)
        if result.stop_reason in ("interrupted", "outage"):
            shutdown_local_servers()
            raise SystemExit(f"the library stopped ({result.stop_reason}): run the same command again to continue")
        summary = _summary(run_dir)
    assert summary is not None
    from masforge.archive.store import Archive

    archive = Archive.open(run_dir / summary["archive"])
    seeds = [{"name": c["name"], "id": c["id"], "selection": c["score"], "n": c["n"], "raced_out": c["pruned"],
              "calls_per_example": (c["llm_calls"] + c["cache_hits"]) / max(c["n"], 1)}
             for c in summary["candidates"]]
    best = next(c for c in summary["candidates"] if c["id"] == summary["incumbent"])
    if best["id"] not in test_cache:
        test_cache[best["id"]] = test_scores(task, client, archive.genome(best["id"]), args.test_limit)
    return {"seeds": seeds, "best": {"name": best["name"], "id": best["id"], "selection": best["score"],
                                     "test": float(np.mean(list(test_cache[best["id"]].values()))),
                                     "yaml": _genome_text(archive.genome(best["id"]))},
            "new_calls": summary["spend"].get("llm_calls", 0)}


def _value(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return text


def read_run(run_dir: Path) -> dict[str, Any]:
    """What the benchmark needs of a finished run: its candidates in order, with the spend when each was admitted."""
    summary = _summary(run_dir)
    assert summary is not None, f"{run_dir}: no summary.json"
    spent: dict[str, int] = {}
    order: list[str] = []
    for line in (run_dir / "events.jsonl").read_text().splitlines():
        try:
            row = json.loads(line)
        except ValueError:
            continue  # a line cut by a kill
        if row.get("event") == "candidate" and row["id"] not in spent:
            spent[row["id"]] = int((row.get("spent") or {}).get("llm_calls", 0))
            order.append(row["id"])
    cands = {c["id"]: c for c in summary["candidates"]}
    return {"summary": summary, "order": [cands[i] for i in order if i in cands], "spent": spent}


def strategy_row(args: argparse.Namespace, strategy: str, run_dir: Path, task: Any, client: LMClient,
                 seed_test: dict[str, dict[str, float]], library: dict[str, Any]) -> dict[str, Any]:
    """One strategy's row: its best new system (never a seed, never a seed it rebuilt under other agent names)
    against the run's best seed and the library's best on the test split, paired; what it spent; how many of its
    candidates were scored for free or raced out; the edits that made its best system."""
    run = read_run(run_dir)
    summary, cands = run["summary"], run["order"]
    from masforge.archive.store import Archive

    archive = Archive.open(run_dir / summary["archive"])
    complete = [c for c in cands if not c["pruned"]]
    def rank(c: dict[str, Any]) -> tuple[float, float, float]:  # as the search ranks (search.population.merit)
        return (-c["fitness"], c.get("dollars_per_example") or 0.0, c.get("tokens_per_example") or 0.0)

    seeds = sorted((c for c in complete if c["seed"]), key=rank)
    found = sorted((c for c in complete if not c["seed"] and not c.get("rediscovers")), key=rank)
    row: dict[str, Any] = {"strategy": strategy, "commit": _commit(), "candidates": len(cands),
                           "proposals": sum(not c["seed"] for c in cands),
                           "race_drops": summary["stats"].get("race_drops", 0),
                           "free": summary["stats"].get("free", 0),
                           "rejected": summary["stats"].get("rejected", 0),
                           "duplicates": summary["stats"].get("duplicates", 0),
                           "rediscovered": sorted({c["rediscovers"] for c in cands if c.get("rediscovers")}),
                           "calls": summary["spend"].get("llm_calls", 0),
                           # answers read from the cache, per candidate: the ledger's own count starts at 0 in
                           # each session of a resumed run
                           "cached": sum(int(c.get("cache_hits", 0)) for c in summary["candidates"]),
                           "minutes": summary["spend"].get("elapsed_s", 0.0) / 60,
                           "credit": summary["stats"].get("credit", {}),
                           "curve": _curve(cands), "stop": summary.get("stop_reason")}
    if not seeds:
        return row
    best_seed = seeds[0]
    row["best_seed"] = {"id": best_seed["id"], "name": best_seed["name"], "selection": best_seed["score"]}
    if best_seed["id"] not in seed_test:
        seed_test[best_seed["id"]] = test_scores(task, client, archive.genome(best_seed["id"]), args.test_limit)
    row["best_seed"]["test"] = float(np.mean(list(seed_test[best_seed["id"]].values())))
    bar = max(best_seed["score"], library["best"]["selection"])
    beat = next((c for c in cands if not c["seed"] and not c.get("rediscovers") and not c["pruned"]
                 and c["score"] > bar), None)
    row["calls_to_beat"] = run["spent"].get(beat["id"]) if beat else None
    if found:
        top = found[0]
        genome = archive.genome(top["id"])
        scores = test_scores(task, client, genome, args.test_limit)
        check = paired(scores, seed_test[best_seed["id"]])
        row["found"] = {"id": top["id"], "name": top["name"], "selection": top["score"], "fitness": top["fitness"],
                        "operator": top["operator"], "test": check["found"], "check": check,
                        "versus_library": paired(scores, seed_test[library["best"]["id"]]),
                        "stack": edit_stack(archive, top["id"]), "yaml": _genome_text(genome)}
        gain = check["diff"]
        row["break_even"] = row["calls"] / gain if gain > 0 else None
    return row


def edit_stack(archive: Any, gid: str) -> list[str]:
    """The edits from a seed to ``gid``, oldest first (the first parent's line; a crossover names its edit)."""
    stack: list[str] = []
    seen: set[str] = set()
    while gid and gid not in seen:
        seen.add(gid)
        rec = archive.get(gid)
        if rec.operator == "seed" or not rec.parents:
            stack.append(f"seed {rec.name}")
            break
        stack.append(rec.rationale or rec.operator)
        gid = rec.parents[0]
    return list(reversed(stack))


def _commit() -> str:
    """The commit the benchmark runs at (the short hash of the checkout holding this script)."""
    import subprocess

    try:
        out = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=Path(__file__).resolve().parent,
                             capture_output=True, text=True, timeout=10, check=True)
    except (OSError, subprocess.SubprocessError):
        return ""
    return out.stdout.strip()


def _genome_text(genome: Any) -> str:
    return dump_genome(genome, "yaml")


def _curve(cands: list[dict[str, Any]]) -> list[float]:
    """Best selection score so far over the candidates scored on the whole set, in the order evaluated."""
    curve, best = [], 0.0
    for c in cands:
        if not c["pruned"]:
            best = max(best, float(c["score"]))
        curve.append(best)
    return curve


# ------------------------------------------------------------------------------------------------ the whole task


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--task", default="humaneval")
    parser.add_argument("--strategies", nargs="+", default=["random", "evolve", "coevolve", "knapsack", "tune"])
    parser.add_argument("--calls", type=int, default=600, help="LM-call budget of each strategy (answers generated)")
    parser.add_argument("--candidates", type=int, default=60, help="candidate cap per strategy, seeds included")
    parser.add_argument("--limit", type=int, default=64, help="selection examples (validation, then train)")
    parser.add_argument("--test-limit", type=int, default=None, help="held-out examples (default: all)")
    parser.add_argument("--decisive-limit", type=int, default=None,
                        help="test examples of the best found overall's check against the best seed (default: all)")
    parser.add_argument("--library-first", nargs="*", default=["escalate", "sample_and_test", "codet", "self_debug"],
                        help="library seeds raced early (a strong incumbent early drops weak seeds sooner)")
    parser.add_argument("--headroom", action="store_true",
                        help="measure the headroom of the answer pool on the test split (bench/headroom.py)")
    parser.add_argument("--transfer", default=None, help="a second task's test split for the best found overall")
    parser.add_argument("--transfer-limit", type=int, default=None)
    parser.add_argument("--seeds", nargs="+", default=None,
                        help="the seeds every strategy starts from (default: the classic seeds of the task)")
    parser.add_argument("--option", action="append", default=[], help="strategy option, e.g. evolve.offspring=2")
    parser.add_argument("--lm", default="local")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--progress", action="store_true", help="show each search's live progress")
    parser.add_argument("--runs", default="runs/discovery", help="run folders (not committed)")
    parser.add_argument("--out", default=str(RESULTS / "discovery.md"))
    args = parser.parse_args(argv)
    args.argv = list(sys.argv[1:] if argv is None else argv)

    out = Path(args.out)
    data_dir = out.parent / "discovery"
    data_dir.mkdir(parents=True, exist_ok=True)
    state_path = data_dir / f"{args.task}.json"
    task = get_task(args.task)
    client = LMClient({"worker": parse_lm(args.lm)})
    seed_test: dict[str, dict[str, float]] = {}
    old = json.loads(state_path.read_text()) if state_path.is_file() else {}
    # Rows of strategies not run this time are kept (each says the commit it ran at).
    kept = [r for r in old.get("rows", []) if r["strategy"] not in args.strategies and r.get("commit")]
    state: dict[str, Any] = {"task": args.task, "command": _command_args(args.argv), "date": time.strftime("%Y-%m-%d"),
                             "settings": _settings(args), "rows": kept,
                             "strategies": list(dict.fromkeys([*(r["strategy"] for r in kept), *args.strategies]))}
    state["library"] = library_stage(args, task, client, seed_test)
    _save(state_path, state)
    warm_seeds(args)
    for strategy in args.strategies:
        run_dir = run_strategy(args, strategy)
        state["rows"] = [r for r in state["rows"] if r["strategy"] != strategy]
        state["rows"].append(strategy_row(args, strategy, run_dir, task, client, seed_test, state["library"]))
        _save(state_path, state)
        write_markdown(out, data_dir)
    decisive_checks(args, state, task, client)
    if args.headroom:
        from headroom import measure  # noqa: PLC0415  (bench/ is the script's folder)

        genomes = [resolve_genome("io"), parse_genome_text(state["library"]["best"]["yaml"], "library", "yaml")]
        if state.get("overall"):
            genomes.append(load_genome(out.parent / "discovered" / f"{args.task}.yaml"))
        state["headroom"] = measure(task, client, genomes, split="test", limit=args.decisive_limit)
    _save(state_path, state)
    write_markdown(out, data_dir)
    print(out.read_text(), flush=True)


def decisive_checks(args: argparse.Namespace, state: dict[str, Any], task: Any, client: LMClient) -> None:
    """The best new system overall (by selection score, never by test score) against the library's best and against
    io on the whole test split, and transferred to ``--transfer``'s test split; written to
    ``bench/results/discovered/<task>.yaml``. A best found that is not above the library's best on the selection
    set leaves the library's seed as the search's answer (``kept_seed``); it is still checked and written, for the
    record, since a system the search made is worth comparing on held-out data even when selection cannot tell it
    from the seed."""
    out = Path(args.out)
    rows = [r for r in state["rows"] if r.get("found")]
    lib = state["library"]["best"]
    above = [r for r in rows if r["found"]["selection"] > lib["selection"]]
    state.pop("decisive", None)
    state.pop("versus_io", None)
    state.pop("transfer", None)
    if not rows:
        return
    best = max(above or rows, key=lambda r: r["found"]["fitness"])  # by selection, never by test
    found = parse_genome_text(best["found"]["yaml"], "discovered", "yaml")
    library = parse_genome_text(lib["yaml"], "library", "yaml")
    io = resolve_genome("io")
    state["overall"] = {"strategy": best["strategy"], "name": found.name, "id": found.id,
                        "selection": best["found"]["selection"], "stack": best["found"].get("stack", [])}
    if not above:
        state["overall"]["kept_seed"] = lib["name"]
    found_all = test_scores(task, client, found, args.decisive_limit)
    state["decisive"] = paired(found_all, test_scores(task, client, library, args.decisive_limit)) | {
        "seed_name": library.name, "limit": args.decisive_limit}
    state["versus_io"] = paired(found_all, test_scores(task, client, io, args.decisive_limit)) | {"name": io.name}
    if args.transfer:
        other = get_task(args.transfer)
        there = test_scores(other, client, found, args.transfer_limit)
        other_state = out.parent / "discovery" / f"{args.transfer}.json"
        other_lib = (json.loads(other_state.read_text()).get("library") or {}).get("best") \
            if other_state.is_file() else None
        ref = parse_genome_text(other_lib["yaml"], "library", "yaml") if other_lib else library
        state["transfer"] = {
            "task": args.transfer,
            "versus_io": paired(there, test_scores(other, client, io, args.transfer_limit)) | {"name": io.name},
            "versus_library": paired(there, test_scores(other, client, ref, args.transfer_limit)) | {
                "name": ref.name}}
    target = out.parent / "discovered" / f"{args.task}.yaml"
    target.parent.mkdir(parents=True, exist_ok=True)
    save_genome(found, target)


def _genome_by_id(args: argparse.Namespace, strategy: str, gid: str) -> Any:
    from masforge.archive.store import Archive

    return Archive.open(run_folder(args, strategy) / "archive").genome(gid)


def _save(path: Path, state: dict[str, Any]) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(state, indent=1, default=str))
    os.replace(tmp, path)


def _settings(args: argparse.Namespace) -> str:
    cfg = parse_lm(args.lm)
    return (f"Worker and meta-agent: {cfg.model} (temperature {cfg.temperature}, prompt adapter "
            f"{cfg.resolved_adapter}{f'; served by {_server()}' if cfg.is_local else ''}). Each strategy: a budget "
            f"of {args.calls} LM calls (answers generated; answers already in the shared answer cache are free to "
            f"every strategy), at most {args.candidates} candidates, seeds "
            f"{', '.join(seeds_for(args.task, args.seeds))}; "
            f"selection on {args.limit} examples of validation+train, raced against the incumbent; an archive of its "
            f"own. Held-out: {'all' if args.test_limit is None else f'the first {args.test_limit}'} test examples.")


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


def _server() -> str:
    from masforge.local_model import EXTERNAL_API_BASE_ENV
    from masforge.local_model.llama_server import configured_slots, server_binary

    external = os.environ.get(EXTERNAL_API_BASE_ENV, "").strip()
    if external:  # a server started beside the run: ask it how many slots
        try:
            props = f"{external.rstrip('/').removesuffix('/v1')}/props"
            with urllib.request.urlopen(props, timeout=5) as reply:
                slots = json.load(reply).get("total_slots")
        except (OSError, ValueError):
            slots = None
        return f"a llama.cpp server started beside the run{f' with {slots} slots' if slots else ''}"
    return f"llama.cpp's server with {configured_slots()} slots" if server_binary() else "llama-cpp-python's server"


# ------------------------------------------------------------------------------------------------ the report


def _ci(check: dict[str, Any] | None) -> str:
    if not check:
        return "-"
    return f"{check['diff']:+.3f} [{check['low']:+.3f}, {check['high']:+.3f}]"


def _check_line(what: str, check: dict[str, Any], a: str, b: str) -> str:
    verdict = ("above 0: better" if check["low"] > 0 else "below 0: worse" if check["high"] < 0
               else "contains 0: not shown to differ")
    return (f"{what} ({check['n']} examples): `{a}` {check['found']:.3f} vs `{b}` {check['seed']:.3f}; difference "
            f"{_ci(check)} (won {check['won']}, lost {check['lost']}; the CI {verdict}).")


def _credit_line(row: dict[str, Any]) -> str:
    ops = (row.get("credit") or {}).get("operators") or {}
    used = sorted(((v["pulls"], k, v) for k, v in ops.items() if v["pulls"]), reverse=True)
    if not used:
        return "-"
    return ", ".join(f"{k} {v['wins']}/{v['pulls']}" for _, k, v in used[:8])


def task_section(state: dict[str, Any]) -> list[str]:
    task = state["task"]
    lines = [f"## {task}", "", f"`python bench/discovery.py {state['command']}`, {state['date']}. {state['settings']}",
             ""]
    lib = state.get("library")
    if lib:
        b = lib["best"]
        lines += [f"**The library.** Every shipped seed that applies, raced on the selection set as a search races its "
                  f"seeds ({lib['new_calls']} new LM calls; the rest from the answer cache). Best: `{b['name']}` "
                  f"{b['selection']:.3f} on selection, {b['test']:.3f} on the test split: the reference below.", "",
                  "| seed | selection | examples | raced out | LM calls / example |", "|---|---:|---:|---|---:|"]
        for x in sorted(lib["seeds"], key=lambda x: (x["raced_out"], -x["selection"])):
            lines.append(f"| {x['name']} | {x['selection']:.3f} | {x['n']} | {'yes' if x['raced_out'] else ''} | "
                         f"{x['calls_per_example']:.1f} |")
        lines.append("")
    lines += ["| strategy | best found (sel / test) | found - library best on test [95% CI] | found - run's best seed "
              "[95% CI] | calls to pass the library | LM calls | cached | candidates (free / raced out) | minutes |",
              "|---|---|---|---|---:|---:|---:|---:|---:|"]
    for r in state["rows"]:
        f = r.get("found")
        found_txt = f"{f['name']} {f['selection']:.3f} / {f['test']:.3f}" if f else "-"
        beat = r.get("calls_to_beat")
        lines.append(f"| {r['strategy']} | {found_txt} | {_ci(f.get('versus_library') if f else None)} | "
                     f"{_ci(f['check'] if f else None)} | {'-' if beat is None else beat} | {r['calls']} | "
                     f"{r['cached']} | {r['candidates']} ({r.get('free', 0)} / {r['race_drops']}) | "
                     f"{r['minutes']:.0f} |")
    lines += ["", "`found`: the best new system by selection score (never a seed, nor a seed rebuilt under other agent "
              "names: those are listed below as rediscovered). `calls to pass the library`: LM calls the search had "
              "made when a new system first scored above the library's best on the whole selection set. `cached`: "
              "answers read from the answer cache instead of generated. `free`: new systems scored with no new LM "
              "call. "
              "Each row ran at the commit it names; every strategy starts from the same seeds, budget and answer "
              "cache.", "", "Per strategy (commit; operator credit: children that beat their parent / children made; "
              "rediscovered seeds; the edits that made its best system):", ""]
    for r in state["rows"]:
        stack = " > ".join((r.get("found") or {}).get("stack") or []) or "-"
        redis = ", ".join(r.get("rediscovered") or []) or "none"
        lines.append(f"- {r['strategy']} ({r.get('commit') or '?'}): {_credit_line(r)}; rediscovered: {redis}; "
                     f"best: {stack}")
    lines.append("")
    o = state.get("overall")
    if o and o.get("kept_seed") and not state.get("decisive"):
        lines += [f"Best found overall (by selection score): `{o['name']}` from {o['strategy']} ({o['selection']:.3f} "
                  f"on the selection set), not above the library's best `{o['kept_seed']}` there: the search's answer "
                  "stays that seed.", "",
                  f"**Verdict ({task}):** no system found by the search beat the library's best seed on the selection "
                  "set.", ""]
    elif o and state.get("decisive"):
        kept = (f" It is not above the library's best `{o['kept_seed']}` there, so the search's answer stays that "
                "seed; the checks below are for the record." if o.get("kept_seed") else "")
        lines.append(f"Best found overall (by selection score): `{o['name']}` from {o['strategy']} "
                     f"({o['selection']:.3f} on the selection set), in `bench/results/discovered/{task}.yaml`; "
                     f"made by: {' > '.join(o.get('stack') or []) or '-'}.{kept}")
        lines.append("")
        limit = state["decisive"].get("limit")
        split = "the whole" if limit is None else f"the first {limit} of the"
        lines.append("- " + _check_line(f"Against the library's best on {split} {task} test split",
                                        state["decisive"], o["name"], state["decisive"]["seed_name"]))
        if state.get("versus_io"):
            lines.append("- " + _check_line("Against io on the same split", state["versus_io"], o["name"], "io"))
        t = state.get("transfer")
        if t:
            lines.append("- " + _check_line(f"Transfer to the {t['task']} test split, against io", t["versus_io"],
                                            o["name"], "io"))
            lines.append("- " + _check_line(f"Transfer to the {t['task']} test split, against the library's best there",
                                            t["versus_library"], o["name"], t["versus_library"]["name"]))
        d = state["decisive"]
        if o.get("kept_seed"):
            verdict = ("no system found by the search beat the library's best seed on the selection set, so the "
                       "search's answer stays that seed; on held-out data its best found is "
                       + ("better than that seed (CI above 0, " if d["low"] > 0 else "not shown to differ from it (")
                       + f"{d['n']} examples)")
        elif d["low"] > 0:
            verdict = (f"the search found a system better than the library's best seed on held-out data (CI above 0, "
                       f"{d['n']} examples)")
        else:
            verdict = (f"no system found by the search is shown better than the library's best seed on held-out data "
                       f"({d['n']} examples)")
        v = state.get("versus_io")
        if v and v["low"] > 0:
            verdict += f"; the found system is better than io there (+{v['diff']:.3f}, CI above 0)"
        lines += ["", f"**Verdict ({task}):** {verdict}.", ""]
    else:
        todo = [x for x in state["strategies"] if x not in {r["strategy"] for r in state["rows"]}]
        lines += [f"**Status: not finished.** Still to run: {', '.join(todo) or 'the final checks'}.", ""]
    if state.get("headroom"):
        from headroom import headroom_lines  # noqa: PLC0415  (bench/ is the script's folder)

        lines += [*headroom_lines(state["headroom"]), ""]
    lines += [f"![best selection score so far per strategy](discovery_{task}.svg)", ""]
    return lines


def write_markdown(out: Path, data_dir: Path) -> None:
    states = [json.loads(p.read_text()) for p in sorted(data_dir.glob("*.json"))]
    lines = ["# Discovery on the embedded model", "",
             f"`bench/discovery.py`, python {platform.python_version()}, {os.cpu_count()} cores. Does a search find "
             "a system that beats the best hand-designed seed on held-out data? Paired differences on the same test "
             "examples with 95% bootstrap CIs. The LM answers are committed as "
             f"`{CACHE_FILE.relative_to(RESULTS.parent.parent)}`: unpack it and point `MASFORGE_LM_CACHE` at it to "
             "replay every number here without generating an answer.", ""]
    for state in states:
        lines += task_section(state)
        svg_plot({r["strategy"]: r["curve"] for r in state["rows"]}, out.parent / f"discovery_{state['task']}.svg")
    write_keeping_notes(out, "\n".join(lines))


def svg_plot(curves: dict[str, list[float]], out: Path) -> None:
    """Best selection score so far against candidates evaluated, one line per strategy."""
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
                 f'transform="rotate(-90 14 {(top + h - bottom) / 2:.0f})">best selection score so far</text>')
    for k, (name, curve) in enumerate(curves.items()):
        colour = COLOURS[k % len(COLOURS)]
        pts = " ".join(f"{x(i):.1f},{y(v):.1f}" for i, v in enumerate(curve))
        parts.append(f'<polyline fill="none" stroke="{colour}" stroke-width="2" points="{pts}"/>')
        parts.append(f'<line x1="{w - right + 12}" x2="{w - right + 32}" y1="{top + 14 + 16 * k}" '
                     f'y2="{top + 14 + 16 * k}" stroke="{colour}" stroke-width="3"/>'
                     f'<text x="{w - right + 38}" y="{top + 18 + 16 * k}">{name}</text>')
    parts.append("</svg>")
    out.write_text("\n".join(parts) + "\n")


if __name__ == "__main__":
    main()
