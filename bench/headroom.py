"""Headroom: what more samples, better selection or repair could still win on a task, measured from the answer pool.

Each system given runs on the split (answers come from the answer cache when they are there: with the committed
cache, none is generated). Every draft answer a system produced is kept, not only its final pick: the output of
every copy of every LM agent that writes the task's output field (from the trace of each example), and the final
answer itself. Each distinct draft of an example is scored once with the task's own metric (code runs in the
sandbox, as in any evaluation). Then, per task:

* pool solves: problems some drawn answer solves (pass@k over everything any of the systems generated);
* each system's solves (its final answer) and how many problems its own drafts solve;
* for the main system (the found one, by default the last given): the problems it lost by picking a failing answer
  while one of its own drafts passed, those it lost because none of its own drafts passed but another system's did,
  and those no system ever had a right answer for.

    MASFORGE_LM_CACHE=<cache> python bench/headroom.py --task humaneval --genomes io escalate found.yaml

``measure`` is what bench/discovery.py calls; ``headroom_lines`` renders its result as markdown.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from masforge.errors import MasforgeError  # noqa: E402
from masforge.evaluators.example import Example  # noqa: E402
from masforge.evaluators.one_example import ExampleResult  # noqa: E402
from masforge.evaluators.runner import Evaluator  # noqa: E402
from masforge.evaluators.tasks import Task, get_task  # noqa: E402
from masforge.genome.names import EXECUTE_MODULE  # noqa: E402
from masforge.genome.schema import Genome  # noqa: E402
from masforge.lm.client import LMClient, parse_lm  # noqa: E402
from masforge.seeds import resolve_genome  # noqa: E402

PASS = 1.0
"""A draft passes when the metric gives it full marks (a code answer: every test passes)."""


def draft_field(genome: Genome, task: Task) -> str:
    """The genome output the task scores: the task's output field, or the genome's only output."""
    if task.output_field in genome.outputs or len(genome.outputs) != 1:
        return task.output_field
    return genome.outputs[0]


def _key(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, sort_keys=True, default=str)


def drafts_of(result: ExampleResult, field: str) -> dict[str, Any]:
    """Every distinct answer one system drew for one example, by its text: each LM agent call's output ``field``
    (every copy, every round; execute nodes pick among them and write nothing new) and the final answer."""
    out: dict[str, Any] = {}
    for call in result.trace:
        value = (call.get("outputs") or {}).get(field)
        if call.get("module") != EXECUTE_MODULE and value is not None:
            out.setdefault(_key(value), value)
    final = result.outputs.get(field)
    if final is not None:
        out.setdefault(_key(final), final)
    return out


def _names(genomes: Sequence[Genome]) -> list[str]:
    """Each genome's name, with its id's first characters where two share one."""
    names = [g.name for g in genomes]
    return [f"{g.name} ({g.id[:6]})" if names.count(g.name) > 1 else g.name for g in genomes]


def _evaluate(task: Task, client: LMClient, genome: Genome, split: str, limit: int | None,
              concurrency: int) -> dict[str, ExampleResult]:
    ev = Evaluator(task, client, split=split, limit=limit, concurrency=concurrency, example_timeout_s=3600)
    report = ev.evaluate(genome)
    if report.stopped or report.incomplete:
        raise MasforgeError(f"headroom: running {genome.name} on the {split} split stopped "
                            f"({report.stopped or report.outage}); run the same command again to continue")
    return {e.example_id: e for e in report.examples if not e.unscored}


def measure(task: Task, client: LMClient, genomes: Sequence[Genome], *, split: str = "test",
            limit: int | None = None, main: Genome | None = None, concurrency: int | None = None) -> dict[str, Any]:
    """Headroom of ``genomes`` on ``split`` (first ``limit`` examples): see the module's doc. ``main`` is the
    system whose losses are broken down (default: the last genome). Deterministic; with every answer in the
    answer cache it sends no LM request."""
    if not genomes:
        raise MasforgeError("headroom: give at least one genome")
    main = main if main is not None else genomes[-1]
    if main.id not in {g.id for g in genomes}:
        raise MasforgeError(f"headroom: the main system {main.name} is not among the genomes given; add it")
    workers = concurrency or client.config("worker").max_concurrency
    names = _names(genomes)
    runs = [_evaluate(task, client, g, split, limit, workers) for g in genomes]
    examples = [ex for ex in task.split(split, limit=limit) if all(ex.id in run for run in runs)]
    drafts = [{ex.id: drafts_of(run[ex.id], draft_field(g, task)) for ex in examples}
              for g, run in zip(genomes, runs, strict=True)]
    passed = _score_drafts(task, examples, drafts, workers)

    per_example = []
    for ex in examples:
        own = [any(passed[ex.id][k] for k in d[ex.id]) for d in drafts]
        finals = [run[ex.id].score >= PASS for run in runs]
        per_example.append({"id": ex.id, "pool": any(own), "own": dict(zip(names, own, strict=True)),
                            "final": dict(zip(names, finals, strict=True))})
    m = names[[g.id for g in genomes].index(main.id)]
    rows = [{"name": name, "id": g.id, "solves": sum(e["final"][name] for e in per_example),
             "own_pool": sum(e["own"][name] for e in per_example),
             "drafts": sum(len(d[ex.id]) for ex in examples)}
            for name, g, d in zip(names, genomes, drafts, strict=True)]
    return {
        "task": task.name, "split": split, "examples": len(examples),
        "left_out": len(task.split(split, limit=limit)) - len(examples),
        "drafts_scored": sum(len(v) for v in passed.values()),
        "pool_solves": sum(e["pool"] for e in per_example),
        "genomes": rows,
        "main": {"name": m, "id": main.id,
                 "solves": sum(e["final"][m] for e in per_example),
                 "lost_by_picking": sum(e["own"][m] and not e["final"][m] for e in per_example),
                 "lost_to_others": sum(e["pool"] and not e["own"][m] for e in per_example),
                 "never_right": sum(not e["pool"] for e in per_example)},
        "per_example": per_example,
    }


def _score_drafts(task: Task, examples: list[Example], drafts: list[dict[str, dict[str, Any]]],
                  workers: int) -> dict[str, dict[str, bool]]:
    """Whether each distinct draft of each example passes, scored once each by the task's metric (in the sandbox
    for code), in parallel."""
    jobs: list[tuple[Example, str, Any]] = []
    for ex in examples:
        pool: dict[str, Any] = {}
        for d in drafts:
            for key, value in d[ex.id].items():
                pool.setdefault(key, value)
        jobs += [(ex, key, pool[key]) for key in sorted(pool)]
    with ThreadPoolExecutor(max(1, workers)) as threads:
        scores = list(threads.map(lambda job: task.score(job[0], {task.output_field: job[2]}).value, jobs))
    out: dict[str, dict[str, bool]] = {ex.id: {} for ex in examples}
    for (ex, key, _), score in zip(jobs, scores, strict=True):
        out[ex.id][key] = score >= PASS
    return out


def headroom_lines(result: dict[str, Any]) -> list[str]:
    """The headroom of one task as markdown: a row per system, the pool, and where the main system lost."""
    n = result["examples"]
    m = result["main"]
    lines = [f"Headroom on {result['task']} ({result['split']}, {n} problems; every draft answer of every system "
             f"scored, {result['drafts_scored']} distinct):", "",
             "| system | solves (final answer) | solved by some draft of its own | distinct drafts |",
             "|---|---:|---:|---:|"]
    lines += [f"| {r['name']} | {r['solves']} | {r['own_pool']} | {r['drafts']} |" for r in result["genomes"]]
    lines += [f"| **pool** (any draft of any system) | - | {result['pool_solves']} | - |", "",
              f"`{m['name']}` solves {m['solves']} of {n}; of the {n - m['solves']} it misses, "
              f"{m['lost_by_picking']} were lost by picking a failing answer while one of its own drafts passed, "
              f"{m['lost_to_others']} because none of its own drafts passed but another system's did, and "
              f"{m['never_right']} had no passing draft anywhere."]
    if result["left_out"]:
        lines.append(f"({result['left_out']} problems left out: some system's run of them was unscored.)")
    return lines


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--task", default="humaneval")
    parser.add_argument("--split", default="test")
    parser.add_argument("--limit", type=int, default=None, help="first examples of the split (default: all)")
    parser.add_argument("--genomes", nargs="+", required=True, help="seed names or genome files")
    parser.add_argument("--main", default=None, help="the system whose losses are broken down (default: the last)")
    parser.add_argument("--lm", default="local")
    parser.add_argument("--cache-only", action="store_true",
                        help="answer only from the answer cache (a missing answer leaves its example unscored)")
    parser.add_argument("--json", default=None, help="also write the result as JSON here")
    args = parser.parse_args(argv)

    try:
        genomes = [resolve_genome(ref) for ref in args.genomes]
        main_genome = resolve_genome(args.main) if args.main else None
        client = LMClient({"worker": parse_lm(args.lm)}, cache_only=args.cache_only)
        result = measure(get_task(args.task), client, genomes, split=args.split, limit=args.limit, main=main_genome)
    except MasforgeError as exc:
        raise SystemExit(f"error: {exc}") from None
    finally:
        from masforge.local_model import shutdown_local_servers

        shutdown_local_servers()
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    print("\n".join(headroom_lines(result)), flush=True)
    sent = client.ledger.snapshot().get("llm_calls", 0)
    missing = f"; answers not in the cache: {client.misses}" if args.cache_only else ""
    print(f"\nLM calls sent: {sent}{missing}", file=sys.stderr)


if __name__ == "__main__":
    main()
