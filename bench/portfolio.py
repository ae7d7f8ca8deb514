"""Portfolio against the single best: does a router over the systems a search found beat the best one of them?

From one or more search archives (``--archive``, repeatable), a portfolio is built for ``--task`` from the
selection split's per-example results only (members chosen greedily, router fitted with cross-validation; see
``masforge.search.portfolio``). Then, on the held-out test split (``--test-limit`` examples, default all):

* the portfolio and the archive's single best system (the best by selection fitness, which starts the portfolio)
  are evaluated on the same examples and compared paired (``masforge.compare``: difference with its bootstrap
  95% CI, won / lost / tied);
* each other member is evaluated too (``--no-member-oracle`` skips it), for the oracle bound on test (the best
  member per question) and how often the router's pick did as well as the best member;
* LM calls per question of each: answers used, generated or read from the answer cache.

The issue's goal: the portfolio beats the single best at no more LM calls per question, or matches it (CI of the
difference containing 0, at most 1 point below) at half the LM calls or fewer.

    MASFORGE_LM_CACHE=bench/cache/discovery_lm_cache.sqlite python bench/portfolio.py --task humaneval \
        --archive runs/discovery/humaneval-coevolve/archive --archive runs/discovery/humaneval-evolve/archive

Each task's numbers go to ``bench/results/portfolio/<task>.json``; ``bench/results/portfolio.md`` is written from
every task's file (a person's notes below its marker are kept).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from common import RESULTS, write_keeping_notes  # noqa: E402  (bench/ is the script's folder)

from masforge.archive.records import CandidateRecord  # noqa: E402
from masforge.archive.store import Archive  # noqa: E402
from masforge.errors import ArchiveError, MasforgeError  # noqa: E402
from masforge.evaluators.compare import compare  # noqa: E402
from masforge.evaluators.runner import EvalReport, Evaluator, input_mapping, results_key  # noqa: E402
from masforge.evaluators.tasks import get_task  # noqa: E402
from masforge.execution.portfolio_system import choose  # noqa: E402
from masforge.genome.schema import Genome  # noqa: E402
from masforge.lm.client import LMClient, parse_lm  # noqa: E402
from masforge.search.portfolio import PortfolioBuild, build_portfolio  # noqa: E402


class Archives:
    """Several archives read as one (what :func:`build_portfolio` reads: ``list`` and ``genome``); a candidate in
    more than one keeps the record with the most results."""

    def __init__(self, archives: list[Archive]) -> None:
        self.archives = archives

    def list(self, task: str | None = None, split: str | None = None, **_: Any) -> list[CandidateRecord]:
        found: dict[str, CandidateRecord] = {}
        for archive in self.archives:
            for rec in archive.list(task=task, split=split, include_pruned=True):
                if rec.genome_id not in found or len(rec.results) > len(found[rec.genome_id].results):
                    found[rec.genome_id] = rec
        return list(found.values())

    def genome(self, id_or_prefix: str) -> Genome:
        for archive in self.archives:
            if id_or_prefix in archive:
                return archive.genome(id_or_prefix)
        return self.archives[0].genome(id_or_prefix)  # the archive's own error for an unknown id

    def add(self, *args: Any, **kwargs: Any) -> Any:
        """Read-only: the bench measures a portfolio without storing it in the archives it reads."""
        raise ArchiveError("the bench's view over several archives is read-only; store a portfolio with "
                           "`masforge portfolio build`")


def calls_per_question(report: EvalReport) -> float:
    return (report.llm_calls + report.cache_hits) / report.n if report.n else 0.0


def run(args: argparse.Namespace) -> dict[str, Any]:
    task = get_task(args.task)
    client = LMClient({"worker": parse_lm(args.lm)})
    lm_key = args.lm_key or results_key(client.config("worker"))
    archives = [Archive.open(p) for p in args.archive]
    try:
        build = build_portfolio(Archives(archives), task, args.split, lm_key, args.cost_weight,
                                max_members=args.max_members, folds=args.folds, escalate=args.escalate)
    finally:
        for archive in archives:
            archive.close()
    for line in build.lines():
        print(line, flush=True)
    evaluator = Evaluator(task, client, split="test", limit=args.test_limit, concurrency=args.concurrency)
    print(f"test: {len(evaluator.examples)} held-out examples", flush=True)
    best = evaluator.evaluate(build.single_best.genome)
    routed = evaluator.evaluate(build.genome)
    members = [best] + ([evaluator.evaluate(m.genome) for m in build.members[1:]] if args.member_oracle else [])
    return state_of(args, build, task, evaluator, best, routed, members)


def shown_path(path: str) -> str:
    """An archive as the results name it: its run folder and itself (``gsm8k-evolve/archive``), never where this
    machine keeps it."""
    p = Path(os.path.abspath(path))  # not resolve(): a symlinked run folder keeps the name it was given
    return f"{p.parent.name}/{p.name}" if p.parent.name else p.name


def state_of(args: argparse.Namespace, build: PortfolioBuild, task: Any, evaluator: Evaluator, best: EvalReport,
             routed: EvalReport, members: list[EvalReport]) -> dict[str, Any]:
    c = compare(best, routed)
    genome = build.genome
    assert genome.portfolio is not None
    mapping = input_mapping(genome, task)
    picks = {ex.id: choose(genome.portfolio.router, {f: ex.inputs[mapping[f]] for f in genome.inputs})
             for ex in evaluator.examples}
    test_sends = Counter(picks.values())
    selection_sends = build.sends()
    state: dict[str, Any] = {
        "task": task.name, "date": time.strftime("%Y-%m-%d"), "lm": args.lm, "lm_key": build.lm_key,
        "archives": [shown_path(p) for p in args.archive], "cost_weight": build.cost_weight, "split": build.split,
        "selection_n": build.n, "candidates": build.candidates, "portfolio_id": genome.id, "steps": build.steps,
        "escalation": [build.members[i].name for i in genome.portfolio.escalation],
        "members": [{"name": m.name, "id": m.id, "selection_score": m.score, "selection_calls": m.calls,
                     "selection_sends": selection_sends[m.name], "test_sends": test_sends.get(i, 0)}
                    for i, m in enumerate(build.members)],
        "selection": {"cv_score": build.cv.score, "cv_calls": build.cv.calls, "cv_accuracy": build.cv.accuracy,
                      "base_accuracy": build.base_accuracy,
                      "single_best": build.single_best.score, "oracle": build.oracle_score,
                      "pool_oracle": build.pool_oracle_score},
        "test": {"n": c.n, "routed": c.mean(c.b), "single_best": c.mean(c.a), "diff": c.diff, "ci_low": c.ci_low,
                 "ci_high": c.ci_high, "wins": c.wins, "losses": c.losses, "ties": c.ties, "outcome": c.outcome,
                 "routed_calls": calls_per_question(routed), "single_best_calls": calls_per_question(best)},
    }
    for i, report in enumerate(members):
        state["members"][i]["test_score"] = report.score
        state["members"][i]["test_calls"] = calls_per_question(report)
    if len(members) == len(build.members):
        scores = [r.example_scores() for r in members]
        ids = [e for e in c.example_ids if all(e in s for s in scores)]
        oracle = [max(s[e] for s in scores) for e in ids]
        hits = [scores[picks[e]][e] >= max(s[e] for s in scores) for e in ids]
        state["test"]["oracle"] = sum(oracle) / len(ids) if ids else None
        state["test"]["router_hits"] = sum(hits) / len(ids) if ids else None
    state["test"]["goal"] = goal(state["test"])
    return state


def goal(t: dict[str, Any]) -> str:
    """The issue's goal, in words, from the paired test comparison."""
    cheaper = t["routed_calls"] <= t["single_best_calls"] + 1e-9
    half = t["routed_calls"] <= t["single_best_calls"] / 2 + 1e-9
    if t["outcome"] == "too_few":
        return "too few test examples for a verdict (30 or more are needed)"
    if t["outcome"] == "better" and cheaper:
        return "met: better than the single best at no more LM calls per question"
    if t["outcome"] == "no_difference" and t["diff"] >= -0.01 and half:
        return "met: matches the single best at half the LM calls per question or fewer"
    if t["outcome"] == "better":
        return "not met: better than the single best, but at more LM calls per question"
    if t["outcome"] == "no_difference":
        return ("not met: no difference from the single best, "
                + ("but more than a point below it" if t["diff"] < -0.01 else "at more than half its LM calls"))
    return "not met: worse than the single best"


def markdown(states: list[dict[str, Any]]) -> str:
    lines = ["# Portfolio: a learned router over a search's archive, against its single best system", "",
             "Written by `bench/portfolio.py` (its docstring says how). A portfolio is built from each task's "
             "selection-split results only; both systems then answer the same held-out test examples.", ""]
    for s in states:
        t, sel = s["test"], s["selection"]
        lines += [f"## {s['task']}", "",
                  f"{s['date']}, lm `{s['lm']}`, cost weight {s['cost_weight']:g}; built from {s['candidates']} "
                  f"candidates scored on all {s['selection_n']} {s['split']} questions of "
                  + ", ".join(f"`{a}`" for a in s["archives"]) + f"; portfolio `{s['portfolio_id'][:12]}`.", "",
                  "| member | id | selection score | LM calls/q | router sends (selection) | router sends (test) "
                  "| test score | test LM calls/q |",
                  "|---|---|---|---|---|---|---|---|"]
        for m in s["members"]:
            test = f"{m['test_score']:.3f}" if "test_score" in m else "-"
            calls = f"{m['test_calls']:.1f}" if "test_calls" in m else "-"
            lines.append(f"| {m['name']} | `{m['id'][:12]}` | {m['selection_score']:.3f} | {m['selection_calls']:.1f} "
                         f"| {m['selection_sends']} of {s['selection_n']} | {m['test_sends']} of {t['n']} | {test} "
                         f"| {calls} |")
        oracle = f"{t['oracle']:.3f}" if t.get("oracle") is not None else "not measured (--no-member-oracle)"
        hits = f"; the router's pick did as well as the best member on {t['router_hits']:.0%}" \
            if t.get("router_hits") is not None else ""
        lines += ["", f"Selection ({s['selection_n']} questions): cross-validated routed score {sel['cv_score']:.3f} "
                  f"({sel['cv_calls']:.1f} LM calls/q), single best {sel['single_best']:.3f}, oracle "
                  f"{sel['oracle']:.3f}, routing accuracy against the oracle {sel['cv_accuracy']:.0%}"
                  + (f" (always the single best: {sel['base_accuracy']:.0%})"
                     if sel.get("base_accuracy") is not None else "") + "; "
                  f"best candidate per question over all {s['candidates']}: "
                  + (f"{sel['pool_oracle']:.3f}." if sel.get("pool_oracle") is not None else "not measured."), "",
                  f"Test ({t['n']} paired examples): routed **{t['routed']:.3f}** ({t['routed_calls']:.1f} LM calls/q) "
                  f"vs single best **{t['single_best']:.3f}** ({t['single_best_calls']:.1f} LM calls/q): difference "
                  f"{t['diff']:+.3f} [{t['ci_low']:+.3f}, {t['ci_high']:+.3f}] (95% paired bootstrap CI), won "
                  f"{t['wins']}, lost {t['losses']}, tied {t['ties']}: {t['outcome']}. Oracle bound (best member per "
                  f"question): {oracle}{hits}.", "", f"Goal: {t['goal']}.", "",
                  "Greedy steps: " + "; ".join(s["steps"]) + "."
                  + (" Escalation order: " + " -> ".join(s["escalation"]) + "." if s.get("escalation") else ""), ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--task", required=True)
    parser.add_argument("--archive", action="append", required=True, help="a search's archive (repeat for more)")
    parser.add_argument("--lm", default="local")
    parser.add_argument("--lm-key", default=None, help="whose archived results (default: those of --lm)")
    parser.add_argument("--split", default="validation+train", help="the selection split (never test)")
    parser.add_argument("--cost-weight", type=float, default=0.0)
    parser.add_argument("--max-members", type=int, default=4)
    parser.add_argument("--folds", type=int, default=5)
    parser.add_argument("--escalate", action="store_true",
                        help="give the portfolio an escalation order (fewest LM calls first)")
    parser.add_argument("--test-limit", type=int, default=None, help="held-out examples (default: all)")
    parser.add_argument("--no-member-oracle", dest="member_oracle", action="store_false",
                        help="do not evaluate the other members on test (no oracle bound on test)")
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--out", default=str(RESULTS / "portfolio.md"))
    args = parser.parse_args(argv)
    out = Path(args.out)
    data_dir = out.parent / "portfolio"
    data_dir.mkdir(parents=True, exist_ok=True)
    try:
        state = run(args)
    except MasforgeError as exc:  # a bad archive, task or LM: one line, as the CLI says it
        print(f"error: {exc}", file=sys.stderr)
        return 1
    (data_dir / f"{state['task'].replace('/', '_')}.json").write_text(json.dumps(state, indent=1), encoding="utf-8")
    states = [json.loads(p.read_text(encoding="utf-8")) for p in sorted(data_dir.glob("*.json"))]
    write_keeping_notes(out, markdown(states))
    print(out.read_text(encoding="utf-8"), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
