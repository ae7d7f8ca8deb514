"""What a run report shows, gathered from a run folder (charts: :mod:`.charts`, page: :mod:`.html`).

``masforge report RUN`` reads ``config.yaml``, ``summary.json``, ``events.jsonl`` and the run's archive and writes
``<run>/report.html``: best and median score against evaluations and against spend, the quality-vs-cost Pareto
front, the lineage of the best system, a per-strategy table when several strategies ran, the top systems with
their structural diffs to their parents, the held-out test scores and the spend. Every chart is an inline SVG
generated here; the page has inline CSS and a few lines of inline JavaScript (sortable tables) and loads
nothing from the network, so it opens offline.

A run that stopped before writing ``summary.json`` is reported from its events and archive.
"""

from __future__ import annotations

import json
import math
import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from masforge.archive.pareto import pareto_front
from masforge.errors import MasforgeError
from masforge.genome.schema import EXECUTE_MODULE

TOP_K = 5
MAX_LINEAGE_NODES = 60
MAX_DESCENDANTS = 24
DESCENDANT_DEPTH = 2
_SCORE_EPS = 1e-12


# ------------------------------------------------------------------------------------------------
# data


@dataclass
class LineageNode:
    """One node of the best system's ancestry."""

    id: str
    name: str
    score: float | None
    operator: str
    strategy: str
    generation: int
    parents: list[str]
    level: int = 0
    is_best: bool = False
    execution: str = ""
    """Its execution and control genes in words (execute nodes and conditional edges); "" if it has none."""


@dataclass
class TopSystem:
    """A top candidate with what distinguishes it from its parent."""

    candidate: dict[str, Any]
    agents: list[str] = field(default_factory=list)
    topology: str = ""
    parent: str | None = None
    diff: str = ""
    execute_nodes: list[str] = field(default_factory=list)
    """Ids of its execute nodes (drawn apart from the LM agents)."""


@dataclass
class ReportData:
    """Everything the report shows, gathered from a run folder."""

    run_dir: Path
    name: str
    config: dict[str, Any]
    task: str
    strategies: list[str]
    stop_reason: str
    spend: dict[str, Any]
    stats: dict[str, Any]
    candidates: list[dict[str, Any]]
    events: list[dict[str, Any]]
    test: list[dict[str, Any]]
    best: dict[str, Any] | None
    """The best system overall by selection fitness, seeds included."""
    median: float | None
    front: list[dict[str, Any]]
    cost_key: str
    cost_label: str
    progress: list[dict[str, Any]]
    spend_key: str
    spend_label: str
    strategy_rows: list[dict[str, Any]]
    top: list[TopSystem]
    lineage: list[LineageNode]
    lineage_truncated: bool
    notes: list[str]
    verdict: dict[str, Any] | None = None
    """The best new system against the best seed on the same held-out examples (see :func:`_verdict`)."""
    best_new: dict[str, Any] | None = None
    """The best system the search made (no seed); None when it proposed nothing new. The lineage is its own."""

    @property
    def best_test_row(self) -> dict[str, Any] | None:
        """The best candidate's held-out test result (score, ci, n), if it was re-scored on the test split."""
        if self.best is None:
            return None
        return next((t for t in self.test if t.get("genome_id") == self.best["id"]), None)

    @property
    def best_test(self) -> float | None:
        """The best candidate's held-out test score, if it was re-scored on the test split."""
        row = self.best_test_row
        return None if row is None else num(row.get("test"))


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def _read_events(path: Path) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = []
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError:
        return events
    for line in lines:
        line = line.strip()
        if not line:
            continue
        try:
            row = json.loads(line)
        except ValueError:
            continue  # a line cut short by a crash
        if isinstance(row, dict) and row.get("event") == "candidate" and row.get("id"):
            events.append(row)
    return events


def num(value: Any, default: float = 0.0) -> float:
    try:
        out = float(value)
    except (TypeError, ValueError):
        return default
    return out if math.isfinite(out) else default


def front_of(candidates: list[dict[str, Any]], cost_key: str) -> list[dict[str, Any]]:
    """Candidates no other one beats on both score (higher) and cost (lower), cheapest first."""
    return pareto_front(candidates, score=lambda c: num(c.get("score")), cost=lambda c: num(c.get(cost_key)),
                        eps=_SCORE_EPS)


def _progress(events: list[dict[str, Any]], spend_key: str) -> list[dict[str, Any]]:
    """Per evaluation: the score, best and median so far, and the spend so far."""
    rows = []
    scores: list[float] = []
    best = -math.inf
    for i, ev in enumerate(events, 1):
        score = num(ev.get("score"))
        scores.append(score)
        best = max(best, score)
        rows.append({"n": i, "score": score, "best": best, "median": statistics.median(scores),
                     "spent": num((ev.get("spent") or {}).get(spend_key)), "name": str(ev.get("name", "")),
                     "id": str(ev.get("id", ""))})
    return rows


def _strategy_rows(candidates: list[dict[str, Any]], events: list[dict[str, Any]],
                   spend_key: str) -> list[dict[str, Any]]:
    """Per strategy: candidates, best / mean score, share of the spend (from the events' running totals)."""
    spent: dict[str, float] = {}
    previous = 0.0
    for ev in events:
        now = num((ev.get("spent") or {}).get(spend_key))
        spent[str(ev.get("strategy", "?"))] = spent.get(str(ev.get("strategy", "?")), 0.0) + max(0.0, now - previous)
        previous = max(previous, now)
    seed_best = max((num(c.get("score")) for c in candidates if c.get("strategy") == "seed"), default=None)
    groups: dict[str, list[dict[str, Any]]] = {}
    for cand in candidates:
        groups.setdefault(str(cand.get("strategy", "?")), []).append(cand)
    rows = []
    for name, group in groups.items():
        scores = [num(c.get("score")) for c in group]
        best = max(group, key=lambda c: num(c.get("score")))
        rows.append({"strategy": name, "candidates": len(group), "best": max(scores),
                     "mean": sum(scores) / len(scores), "best_name": str(best.get("name", "")),
                     "beats_seeds": None if name == "seed" or seed_best is None else max(scores) > seed_best + 1e-9,
                     "spent": spent.get(name, 0.0)})
    rows.sort(key=lambda r: (r["strategy"] != "seed", -r["best"]))
    return rows


def _open_archive(run_dir: Path, summary: dict[str, Any] | None, config: dict[str, Any]) -> Any:
    from masforge.archive.store import Archive

    candidates = []
    if summary and summary.get("archive"):
        candidates.append(run_dir / str(summary["archive"]))
    if config.get("archive"):
        candidates.append(Path(str(config["archive"])))
    candidates.append(run_dir / "archive")
    for path in candidates:
        if path.is_dir():
            try:
                return Archive.open(path)
            except MasforgeError:
                continue
    return None


def execution_genes(genome: Any) -> str:
    """A genome's execute nodes and conditional edges in words, e.g. ``runs code: check; check -[fail]-> fixer``
    ("" for a genome without them)."""
    if genome.kind != "config":
        return ""
    nodes = [a.id for a in genome.agents if a.module == EXECUTE_MODULE]
    routes = [f"{src} -[{verdict}]-> {dst}" for key, verdict in sorted(genome.topology.conditions.items())
              for src, _, dst in [key.partition(" -> ")]]
    if not nodes:
        return ""
    return "runs code: " + ", ".join(nodes) + ("; " + ", ".join(routes) if routes else "")


def _lineage(archive: Any, best_id: str, task: str, split: str) -> tuple[list[LineageNode], bool]:
    """The best system, its ancestors (level > 0: generations up) and descendants (level < 0, a few generations)."""
    up = archive.lineage(best_id).ancestors
    down = archive.lineage(best_id, depth=DESCENDANT_DEPTH).descendants
    focus = archive.get(best_id)
    records = {r.genome_id: r for r in [*up, *down, focus]}
    children: dict[str, list[str]] = {}
    for rec in down:
        for pid in rec.parents:
            children.setdefault(pid, []).append(rec.genome_id)
    level = {best_id: 0}
    truncated = False
    for direction, limit in ((1, MAX_LINEAGE_NODES), (-1, MAX_DESCENDANTS)):
        # Breadth first from the best system: shortest distance through parent (or child) links, nearest first.
        order, i = [best_id], 0
        while i < len(order):
            gid = order[i]
            i += 1
            nxt = records[gid].parents if direction == 1 else children.get(gid, [])
            for other in nxt:
                if other in records and other not in level:
                    if len(order) > limit:
                        truncated = True
                        break
                    level[other] = level[gid] + direction
                    order.append(other)
    nodes = []
    for gid, lvl in level.items():
        rec = records[gid]
        result = rec.result_for(task, split) or rec.result_for(task)
        try:
            genes = execution_genes(archive.genome(gid))
        except MasforgeError:
            genes = ""
        nodes.append(LineageNode(id=gid, name=rec.name, score=result.score if result else None,
                                 operator=rec.operator, strategy=rec.strategy, generation=rec.generation,
                                 parents=[p for p in rec.parents if p in level], level=lvl,
                                 is_best=gid == best_id, execution=genes))
    return nodes, truncated


def _top_systems(archive: Any, top: list[dict[str, Any]]) -> list[TopSystem]:
    from masforge.genome.diff import format_diff

    out = []
    for cand in top:
        item = TopSystem(candidate=cand)
        parents = [str(p) for p in cand.get("parents") or []]
        if archive is not None:
            try:
                genome = archive.genome(cand["id"])
                if genome.kind == "code":
                    item.agents = [f"code genome ({len((genome.code or '').splitlines())} lines of forward())"]
                elif genome.portfolio is not None:
                    item.agents = [f"member {i}: {m.name} ({m.short_id})"
                                   for i, m in enumerate(genome.portfolio.members)]
                else:
                    item.agents = [f"{a.id}: execute (runs code against checks; no LM)" if a.module == EXECUTE_MODULE
                                   else f"{a.id}: {a.module}" + (f" x{a.copies}" if a.copies > 1 else "")
                                   + (f" [{', '.join(a.tools)}]" if a.tools else "") for a in genome.agents]
                    item.execute_nodes = [a.id for a in genome.agents if a.module == EXECUTE_MODULE]
                    topo = genome.topology
                    routes = [f"{k.replace(' -> ', f' -[{v}]-> ')}" for k, v in sorted(topo.conditions.items())]
                    item.topology = (f"{len(topo.edges)} edges, {topo.rounds} round(s), {topo.message_passing}, "
                                     f"aggregation {topo.aggregation}" + (f" ({topo.judge})" if topo.judge else "")
                                     + (f"; conditional edges: {', '.join(routes)}" if routes else ""))
                if parents:
                    parent = archive.genome(parents[0])
                    item.parent = f"{parent.name} ({parents[0][:12]})"
                    item.diff = format_diff(parent, genome)
                    if len(parents) > 1:
                        item.diff = f"(crossover of {len(parents)} parents; diff to the first)\n{item.diff}"
                else:
                    item.diff = "seed (no parent)" if cand.get("seed") or cand.get("operator") == "seed" else \
                        "no parent recorded"
            except MasforgeError as exc:
                item.diff = f"(not in the archive: {exc})"
        else:
            item.diff = "(archive not available)"
        out.append(item)
    return out


def build_report(run: str | Path) -> ReportData:
    """Gather what the report shows from the run folder ``run``."""
    run_dir = Path(run)
    if not run_dir.is_dir():
        raise MasforgeError(f"{run_dir}: no such run folder (give the folder `masforge search` printed)")
    try:
        config = yaml.safe_load((run_dir / "config.yaml").read_text(encoding="utf-8")) or {}
    except (OSError, yaml.YAMLError):
        config = {}
    summary = _read_json(run_dir / "summary.json")
    summary = summary if isinstance(summary, dict) else None
    events = _read_events(run_dir / "events.jsonl")
    if not config and summary is None and not events:
        raise MasforgeError(f"{run_dir}: not a masforge run folder (no config.yaml, summary.json or events.jsonl)")
    notes: list[str] = []
    if summary is None:
        notes.append("summary.json is missing (the run did not finish): numbers come from events.jsonl.")

    if summary and summary.get("candidates"):
        candidates = [dict(c) for c in summary["candidates"]]
    else:
        latest: dict[str, dict[str, Any]] = {}
        for ev in events:
            latest[ev["id"]] = {"id": ev["id"], "name": ev.get("name", ""), "score": num(ev.get("score")),
                                "fitness": num(ev.get("score")), "dollars_per_example": num(ev.get("dollars")),
                                "tokens_per_example": 0.0, "operator": ev.get("operator", ""),
                                "strategy": ev.get("strategy", ""), "parents": [], "generation": 0,
                                "seed": ev.get("strategy") == "seed", "ci": [0.0, 0.0]}
        candidates = list(latest.values())
    for cand in candidates:
        cand["score"] = num(cand.get("score"))
        cand["fitness"] = num(cand.get("fitness"), cand["score"])
        cand["dollars_per_example"] = num(cand.get("dollars_per_example"))
        cand["tokens_per_example"] = num(cand.get("tokens_per_example"))

    spend = dict((summary or {}).get("spend") or (events[-1].get("spent") if events else {}) or {})
    stats = dict((summary or {}).get("stats") or {})
    task = str((summary or {}).get("task") or config.get("task") or "?")
    strategies = list((summary or {}).get("strategy") or config.get("strategy") or [])
    if isinstance(strategies, str):
        strategies = [strategies]
    stop_reason = str((summary or {}).get("stop_reason") or ("unfinished" if summary is None else "?"))

    if any(c["dollars_per_example"] > 0 for c in candidates):
        cost_key, cost_label = "dollars_per_example", "$ per example"
    else:
        cost_key, cost_label = "tokens_per_example", "tokens per example (no dollar cost recorded)"
    if num(spend.get("dollars")) > 0:
        spend_key, spend_label = "dollars", "dollars spent"
    else:
        spend_key, spend_label = "tokens", "tokens spent (no dollar cost recorded)"

    # ranked as the search ranks them (search.population.merit): fitness, then cheaper in dollars, then in tokens
    ranked = sorted(candidates, key=lambda c: (-c["fitness"], c["dollars_per_example"], c["tokens_per_example"]))
    best = ranked[0] if ranked else None
    stated = (summary or {}).get("best_new", "absent")
    if stated != "absent":  # the run's own word (a rediscovered seed is no new system)
        best_new = next((c for c in ranked if isinstance(stated, dict) and c["id"] == stated.get("id")), None)
    else:  # a run from before the summary kept it
        best_new = next((c for c in ranked if not (c.get("seed") or c.get("strategy") == "seed")), None)
    focus = best_new or best  # the lineage of a seed is the seed alone: the best new system's says more
    scores = [c["score"] for c in candidates]
    median = statistics.median(scores) if scores else None
    test = [dict(t) for t in (summary or {}).get("test") or []]

    archive = _open_archive(run_dir, summary, config)
    if archive is None:
        notes.append("the run's archive was not found: no lineage and no diffs.")
    lineage: list[LineageNode] = []
    truncated = False
    try:
        if archive is not None and focus is not None:
            try:
                lineage, truncated = _lineage(archive, focus["id"], task, str(config.get("split") or "validation"))
            except MasforgeError as exc:
                notes.append(f"lineage unavailable: {exc}")
        top = _top_systems(archive, ranked[:TOP_K])
    finally:
        if archive is not None:
            archive.close()

    verdict = _verdict(summary, test)
    return ReportData(
        run_dir=run_dir, name=str((summary or {}).get("run") or run_dir.resolve().name), config=config, task=task,
        strategies=[str(s) for s in strategies], stop_reason=stop_reason, spend=spend, stats=stats,
        candidates=candidates, events=events, test=test, best=best, best_new=best_new, median=median,
        front=front_of(candidates, cost_key), cost_key=cost_key, cost_label=cost_label,
        progress=_progress(events, spend_key), spend_key=spend_key, spend_label=spend_label,
        strategy_rows=_strategy_rows(candidates, events, spend_key), top=top, lineage=lineage,
        lineage_truncated=truncated, notes=notes, verdict=verdict)


def _verdict(summary: dict[str, Any] | None, test: list[dict[str, Any]]) -> dict[str, Any] | None:
    """What the search is for, as the run's summary states it: the best new system against the best seed on the
    same held-out examples (paired difference, its 95% CI and what it supports). A run from before the summary
    kept it: the two held-out scores only, with no CI (``outcome`` ``unpaired``). None without both."""
    stated = (summary or {}).get("verdict")
    if isinstance(stated, dict) and stated.get("outcome"):
        return dict(stated)
    found = [t for t in test if not t.get("is_seed")]
    seeds = [t for t in test if t.get("is_seed")]
    if not found or not seeds:
        return None
    f = max(found, key=lambda t: num(t.get("validation")))
    s = max(seeds, key=lambda t: num(t.get("validation")))
    return {"found": f.get("name", ""), "found_id": f.get("genome_id", ""), "seed": s.get("name", ""),
            "seed_id": s.get("genome_id", ""), "n": int(num(f.get("n"))), "found_score": num(f.get("test")),
            "seed_score": num(s.get("test")), "diff": num(f.get("test")) - num(s.get("test")), "ci_low": None,
            "ci_high": None, "outcome": "unpaired",
            "verdict": "no verdict: this run did not keep the per-example scores that pair the two"}
