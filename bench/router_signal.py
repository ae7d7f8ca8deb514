"""Is there anything for a router to learn? Before a portfolio is built, this asks whether the systems' wins over
each other on a task can be told from the question.

Input: two or more systems scored on the same questions, as reports of ``masforge evaluate ... --output R.json``
(``--report name=R.json``, repeatable, cheapest first), or the scores this script kept from such reports
(``--scores bench/results/router_signal/<task>.json``: example ids and scores only, never the questions).
It prints and writes:

* each system's score, and per pair the questions only one of them solves and the pair's oracle (best per
  question);
* the router's room: the questions where the systems' scores differ (elsewhere any pick scores the same). A
  router (logistic regression over :func:`masforge.standalone.router.question_features`, the
  portfolio's own features) is fitted on those questions alone, so nothing but the wins is learned, and its
  cross-validated accuracy there (mean over 10 shuffles of 5 folds, for three regularisations) is set against the
  base rate of always picking the system that wins there most often;
* the routed score that router implies against the single best, and how many paired test questions a difference
  that size needs before its 95% CI leaves 0 (from the selection questions' paired standard deviation); the same
  for a perfect router (the oracle).

    MASFORGE_DATA_DIR=<data> python bench/router_signal.py --task gsm8k --split validation+train \\
        --report io=io.json --report cot=cot.json

Results go to ``bench/results/router_signal/<task>.json``; a person reads them in ``bench/results/portfolio.md``.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from common import RESULTS  # noqa: E402  (bench/ is the script's folder)

from masforge.errors import MasforgeError  # noqa: E402
from masforge.evaluators.runner import input_mapping  # noqa: E402
from masforge.evaluators.tasks import get_task  # noqa: E402
from masforge.search.fitness import Fitness  # noqa: E402
from masforge.search.portfolio import _Router  # noqa: E402  (the portfolio's own router fitting)
from masforge.seeds import load_seed  # noqa: E402
from masforge.standalone.router import question_features  # noqa: E402

SHUFFLES = 10
FOLDS = 5
REGULARISATIONS = (0.1, 1.0, 10.0)


def scores_from_reports(pairs: list[str]) -> dict[str, dict[str, float]]:
    """``name=report.json`` pairs -> each system's score per example id."""
    out: dict[str, dict[str, float]] = {}
    for pair in pairs:
        name, sep, path = pair.partition("=")
        if not sep or not name or not path:
            sys.exit(f"--report {pair!r}: give name=report.json (a report of `masforge evaluate ... --output`)")
        report = json.loads(Path(path).read_text(encoding="utf-8"))
        out[name] = {e["example_id"]: float(e["score"]) for e in report["examples"] if not e.get("unscored")}
    return out


def n_for_ci(mean: float, diff: np.ndarray) -> int | None:
    """Paired questions a mean difference ``mean`` needs before its 95% CI (normal) leaves 0, when the per-question
    differences spread like ``diff`` (one router's, on the selection questions)."""
    sd = float(diff.std(ddof=1)) if len(diff) > 1 else 0.0
    if mean <= 0:
        return None
    return max(1, math.ceil((1.96 * sd / mean) ** 2))


def analyse(task_name: str, split: str, scores: dict[str, dict[str, float]]) -> dict[str, Any]:
    from sklearn.model_selection import KFold  # lazy: scikit-learn takes a second to import

    names = list(scores)
    if len(names) < 2:
        sys.exit("give at least two systems: a router chooses between them")
    ids = sorted(set.intersection(*(set(s) for s in scores.values())))
    if not ids:
        sys.exit("the systems share no scored example: score them on the same split and limit")
    task = get_task(task_name)
    examples = {ex.id: ex for ex in task.split(split)}
    missing = [e for e in ids if e not in examples]
    if missing:
        sys.exit(f"example {missing[0]!r} is not in task {task_name} split {split}: give the split the reports used")
    field = input_mapping(load_seed("io"), task)["question"]
    s = np.array([[scores[n][e] for e in ids] for n in names])  # systems x questions
    best_single = int(np.argmax(s.mean(axis=1)))  # first (cheapest) on ties
    room = np.flatnonzero(s.max(axis=0) > s.min(axis=0))
    labels = np.argmax(s[:, room], axis=0)  # the first system at the best score there
    x = np.array([question_features({"question": str(examples[ids[q]].inputs[field])}) for q in room])
    top = s[:, room].max(axis=0)  # the best score on each question of the room
    wins_at = [int(np.sum(s[i, room] == top)) for i in range(len(names))]
    base = max(wins_at) / len(room) if len(room) else 1.0
    routers = []
    for c in REGULARISATIONS:
        accuracy, routed = [], []
        for seed in range(SHUFFLES):
            picks = np.full(len(room), best_single)
            if len(set(labels.tolist())) > 1 and len(room) >= FOLDS:
                router = _Router(x, Fitness(0.0), FOLDS, seed, c)  # fitted as a portfolio's router is
                for train, held in KFold(FOLDS, shuffle=True, random_state=seed).split(x):
                    picks[held] = router.picks(router.fit(train, labels), held)
            chosen = s[picks, room]
            accuracy.append(float(np.mean(chosen == top)) if len(room) else 1.0)
            full = s[best_single].copy()
            full[room] = chosen
            routed.append(full)
        gain = float((np.mean(routed, axis=0) - s[best_single]).mean())
        routers.append({"C": c, "accuracy": float(np.mean(accuracy)), "routed": float(np.mean(routed)),
                        "diff": gain, "test_n_needed": n_for_ci(gain, routed[0] - s[best_single])})
    oracle_diff = s.max(axis=0) - s[best_single]
    oracle_n = n_for_ci(float(oracle_diff.mean()), oracle_diff)
    return {
        "task": task_name, "split": split, "date": time.strftime("%Y-%m-%d"), "n": len(ids), "systems": names,
        "scores": {n: float(s[i].mean()) for i, n in enumerate(names)}, "single_best": names[best_single],
        "pairs": [{"a": names[i], "b": names[j], "only_a": int(np.sum(s[i] > s[j])), "only_b": int(np.sum(s[j] > s[i])),
                   "oracle": float(np.maximum(s[i], s[j]).mean())}
                  for i in range(len(names)) for j in range(i + 1, len(names))],
        "room": len(room), "best_there": dict(zip(names, wins_at, strict=True)), "base_rate": base,
        "routers": routers, "oracle": float(s.max(axis=0).mean()), "oracle_test_n_needed": oracle_n,
        "example_scores": {n: {e: scores[n][e] for e in ids} for n in names},
    }


def lines(r: dict[str, Any]) -> list[str]:
    out = [f"{r['task']} ({r['split']}, {r['n']} questions): "
           + ", ".join(f"{n} {v:.3f}" for n, v in r["scores"].items()) + f"; single best {r['single_best']}"]
    out += [f"  {p['a']} alone right on {p['only_a']}, {p['b']} alone on {p['only_b']}; oracle {p['oracle']:.3f}"
            for p in r["pairs"]]
    out.append(f"  router's room: {r['room']} questions where the scores differ; best there: "
               + ", ".join(f"{n} {k}" for n, k in r["best_there"].items())
               + f" (base rate {r['base_rate']:.2f})")
    for row in r["routers"]:
        need = row["test_n_needed"]
        gain = row["diff"] if abs(row["diff"]) >= 5e-4 else 0.0  # not -0.000
        out.append(f"  router C={row['C']:g}: CV accuracy there {row['accuracy']:.2f} (base {r['base_rate']:.2f}), "
                   f"routed {row['routed']:.3f} ({gain:+.3f} vs single best); paired test questions to tell "
                   f"it from 0: {need if need is not None else 'no gain to tell'}")
    out.append(f"  perfect router (oracle) {r['oracle']:.3f}: paired test questions to tell it from 0: "
               f"{r['oracle_test_n_needed']}")
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--task", default="gsm8k")
    parser.add_argument("--split", default="validation+train")
    parser.add_argument("--report", action="append", default=[], help="name=report.json (cheapest system first)")
    parser.add_argument("--scores", default=None,
                        help="a kept results file (bench/results/router_signal/) to read the scores from")
    parser.add_argument("--out", default=None, help="default: bench/results/router_signal/<task>.json")
    args = parser.parse_args(argv)
    if args.scores:
        kept = json.loads(Path(args.scores).read_text(encoding="utf-8"))
        scores = kept["example_scores"]
        args.split = kept["split"]
    else:
        scores = scores_from_reports(args.report)
    try:
        result = analyse(args.task, args.split, scores)
    except MasforgeError as exc:  # an unknown task, data that cannot be found: one line, not a traceback
        sys.exit(f"router_signal: {exc}")
    for line in lines(result):
        print(line, flush=True)
    out = Path(args.out) if args.out else RESULTS / "router_signal" / f"{args.task}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
