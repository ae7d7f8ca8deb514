"""A run folder as one self-contained HTML report (and the same key numbers in the terminal).

``masforge report RUN`` reads ``config.yaml``, ``summary.json``, ``events.jsonl`` and the run's archive and writes
``<run>/report.html``: best and median score against evaluations and against spend, the quality-vs-cost Pareto
front, the lineage of the best system, a per-strategy table when several strategies ran, the top systems with
their structural diffs to their parents, the held-out test scores and the spend. Every chart is an inline SVG
generated here; the page has inline CSS and a few lines of inline JavaScript (sortable tables) and loads
nothing from the network, so it opens offline.

A run that stopped before writing ``summary.json`` is reported from its events and archive.
"""

from __future__ import annotations

import html
import json
import math
import statistics
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import yaml

from masforge.errors import MasforgeError

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


@dataclass
class TopSystem:
    """A top candidate with what distinguishes it from its parent."""

    candidate: dict[str, Any]
    agents: list[str] = field(default_factory=list)
    topology: str = ""
    parent: str | None = None
    diff: str = ""


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


def _num(value: Any, default: float = 0.0) -> float:
    try:
        out = float(value)
    except (TypeError, ValueError):
        return default
    return out if math.isfinite(out) else default


def pareto_front(candidates: list[dict[str, Any]], cost_key: str) -> list[dict[str, Any]]:
    """Candidates no other one beats on both score (higher) and cost (lower), cheapest first."""
    ranked = sorted(candidates, key=lambda c: (_num(c.get(cost_key)), -_num(c.get("score"))))
    front: list[dict[str, Any]] = []
    best = -math.inf
    for cand in ranked:
        score = _num(cand.get("score"))
        if score > best + _SCORE_EPS:
            front.append(cand)
            best = score
    return front


def _progress(events: list[dict[str, Any]], spend_key: str) -> list[dict[str, Any]]:
    """Per evaluation: the score, best and median so far, and the spend so far."""
    rows = []
    scores: list[float] = []
    best = -math.inf
    for i, ev in enumerate(events, 1):
        score = _num(ev.get("score"))
        scores.append(score)
        best = max(best, score)
        rows.append({"n": i, "score": score, "best": best, "median": statistics.median(scores),
                     "spent": _num((ev.get("spent") or {}).get(spend_key)), "name": str(ev.get("name", "")),
                     "id": str(ev.get("id", ""))})
    return rows


def _strategy_rows(candidates: list[dict[str, Any]], events: list[dict[str, Any]],
                   spend_key: str) -> list[dict[str, Any]]:
    """Per strategy: candidates, best / mean score, share of the spend (from the events' running totals)."""
    spent: dict[str, float] = {}
    previous = 0.0
    for ev in events:
        now = _num((ev.get("spent") or {}).get(spend_key))
        spent[str(ev.get("strategy", "?"))] = spent.get(str(ev.get("strategy", "?")), 0.0) + max(0.0, now - previous)
        previous = max(previous, now)
    seed_best = max((_num(c.get("score")) for c in candidates if c.get("strategy") == "seed"), default=None)
    groups: dict[str, list[dict[str, Any]]] = {}
    for cand in candidates:
        groups.setdefault(str(cand.get("strategy", "?")), []).append(cand)
    rows = []
    for name, group in groups.items():
        scores = [_num(c.get("score")) for c in group]
        best = max(group, key=lambda c: _num(c.get("score")))
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
        nodes.append(LineageNode(id=gid, name=rec.name, score=result.score if result else None,
                                 operator=rec.operator, strategy=rec.strategy, generation=rec.generation,
                                 parents=[p for p in rec.parents if p in level], level=lvl,
                                 is_best=gid == best_id))
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
                else:
                    item.agents = [f"{a.id}: {a.module}" + (f" x{a.copies}" if a.copies > 1 else "")
                                   + (f" [{', '.join(a.tools)}]" if a.tools else "") for a in genome.agents]
                    topo = genome.topology
                    item.topology = (f"{len(topo.edges)} edges, {topo.rounds} round(s), {topo.message_passing}, "
                                     f"aggregation {topo.aggregation}" + (f" ({topo.judge})" if topo.judge else ""))
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
            latest[ev["id"]] = {"id": ev["id"], "name": ev.get("name", ""), "score": _num(ev.get("score")),
                                "fitness": _num(ev.get("score")), "dollars_per_example": _num(ev.get("dollars")),
                                "tokens_per_example": 0.0, "operator": ev.get("operator", ""),
                                "strategy": ev.get("strategy", ""), "parents": [], "generation": 0,
                                "seed": ev.get("strategy") == "seed", "ci": [0.0, 0.0]}
        candidates = list(latest.values())
    for cand in candidates:
        cand["score"] = _num(cand.get("score"))
        cand["fitness"] = _num(cand.get("fitness"), cand["score"])
        cand["dollars_per_example"] = _num(cand.get("dollars_per_example"))
        cand["tokens_per_example"] = _num(cand.get("tokens_per_example"))

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
    if _num(spend.get("dollars")) > 0:
        spend_key, spend_label = "dollars", "dollars spent"
    else:
        spend_key, spend_label = "tokens", "tokens spent (no dollar cost recorded)"

    ranked = sorted(candidates, key=lambda c: (-c["fitness"], c["dollars_per_example"]))
    best = ranked[0] if ranked else None
    scores = [c["score"] for c in candidates]
    median = statistics.median(scores) if scores else None
    test = [dict(t) for t in (summary or {}).get("test") or []]

    archive = _open_archive(run_dir, summary, config)
    if archive is None:
        notes.append("the run's archive was not found: no lineage and no diffs.")
    lineage: list[LineageNode] = []
    truncated = False
    try:
        if archive is not None and best is not None:
            try:
                lineage, truncated = _lineage(archive, best["id"], task, str(config.get("split") or "validation"))
            except MasforgeError as exc:
                notes.append(f"lineage unavailable: {exc}")
        top = _top_systems(archive, ranked[:TOP_K])
    finally:
        if archive is not None:
            archive.close()

    return ReportData(
        run_dir=run_dir, name=str((summary or {}).get("run") or run_dir.resolve().name), config=config, task=task,
        strategies=[str(s) for s in strategies], stop_reason=stop_reason, spend=spend, stats=stats,
        candidates=candidates, events=events, test=test, best=best, median=median,
        front=pareto_front(candidates, cost_key), cost_key=cost_key, cost_label=cost_label,
        progress=_progress(events, spend_key), spend_key=spend_key, spend_label=spend_label,
        strategy_rows=_strategy_rows(candidates, events, spend_key), top=top, lineage=lineage,
        lineage_truncated=truncated, notes=notes)


# ------------------------------------------------------------------------------------------------
# SVG charts


def _esc(value: Any) -> str:
    return html.escape(str(value), quote=True)


def _nice_ticks(lo: float, hi: float, n: int = 5) -> list[float]:
    """About ``n`` round tick values covering [lo, hi]."""
    if not math.isfinite(lo) or not math.isfinite(hi):
        return [0.0, 1.0]
    if hi <= lo:
        hi = lo + (abs(lo) or 1.0)
    raw = (hi - lo) / max(1, n)
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw)
    start = math.floor(lo / step) * step
    ticks = []
    value = start
    while value <= hi + step * 1e-9:
        ticks.append(round(value, 12))
        value += step
    if ticks[-1] < hi:
        ticks.append(round(value, 12))
    return ticks


def _fmt_tick(value: float) -> str:
    if value == 0:
        return "0"
    if abs(value) >= 1e6:
        return f"{value / 1e6:g}M"
    if abs(value) >= 1e4:
        return f"{value / 1e3:g}k"
    if abs(value) < 0.01:
        return f"{value:.1e}"
    return f"{value:g}"


class _Frame:
    """Plot area with linear x/y scales, axes, grid and labels."""

    def __init__(self, xs: list[float], ys: tuple[float, float], xlabel: str, ylabel: str, width: int = 600,
                 height: int = 300) -> None:
        self.w, self.h = width, height
        self.left, self.right, self.top, self.bottom = 56, 16, 14, 44
        lo, hi = (min(xs), max(xs)) if xs else (0.0, 1.0)
        self.xticks = _nice_ticks(lo, hi)
        self.x0, self.x1 = self.xticks[0], self.xticks[-1]
        self.yticks = _nice_ticks(*ys)
        self.y0, self.y1 = self.yticks[0], self.yticks[-1]
        self.xlabel, self.ylabel = xlabel, ylabel

    def x(self, value: float) -> float:
        span = (self.x1 - self.x0) or 1.0
        return self.left + (value - self.x0) / span * (self.w - self.left - self.right)

    def y(self, value: float) -> float:
        span = (self.y1 - self.y0) or 1.0
        return self.h - self.bottom - (value - self.y0) / span * (self.h - self.top - self.bottom)

    def axes(self) -> list[str]:
        parts = []
        for t in self.yticks:
            y = self.y(t)
            parts.append(f'<line class="grid" x1="{self.left}" y1="{y:.1f}" x2="{self.w - self.right}" y2="{y:.1f}"/>')
            parts.append(f'<text class="tick" x="{self.left - 6}" y="{y + 4:.1f}" text-anchor="end">'
                         f"{_fmt_tick(t)}</text>")
        for t in self.xticks:
            x = self.x(t)
            parts.append(f'<line class="grid" x1="{x:.1f}" y1="{self.top}" x2="{x:.1f}" y2="{self.h - self.bottom}"/>')
            parts.append(f'<text class="tick" x="{x:.1f}" y="{self.h - self.bottom + 16}" text-anchor="middle">'
                         f"{_fmt_tick(t)}</text>")
        base = self.h - self.bottom
        parts.append(f'<line class="axis" x1="{self.left}" y1="{base}" x2="{self.w - self.right}" y2="{base}"/>')
        parts.append(f'<line class="axis" x1="{self.left}" y1="{self.top}" x2="{self.left}" y2="{base}"/>')
        parts.append(f'<text class="label" x="{(self.left + self.w - self.right) / 2:.1f}" y="{self.h - 6}" '
                     f'text-anchor="middle">{_esc(self.xlabel)}</text>')
        parts.append(f'<text class="label" x="14" y="{(self.top + base) / 2:.1f}" text-anchor="middle" '
                     f'transform="rotate(-90 14 {(self.top + base) / 2:.1f})">{_esc(self.ylabel)}</text>')
        return parts

    def svg(self, body: list[str], title: str) -> str:
        return (f'<svg class="chart" viewBox="0 0 {self.w} {self.h}" width="{self.w}" height="{self.h}" role="img" '
                f'aria-label="{_esc(title)}" xmlns="http://www.w3.org/2000/svg">' + "".join(self.axes() + body)
                + "</svg>")


def _score_range(values: list[float]) -> tuple[float, float]:
    lo = min(values, default=0.0)
    hi = max(values, default=1.0)
    return (min(0.0, lo), max(1.0, hi))


def _path(points: list[tuple[float, float]], step: bool = False) -> str:
    if not points:
        return ""
    parts = [f"M{points[0][0]:.1f},{points[0][1]:.1f}"]
    for (_, y0), (x, y) in zip(points, points[1:], strict=False):
        if step:
            parts.append(f"L{x:.1f},{y0:.1f}")
        parts.append(f"L{x:.1f},{y:.1f}")
    return " ".join(parts)


def progress_chart(rows: list[dict[str, Any]], x_key: str, xlabel: str) -> str:
    """Best-so-far (step line), running median (dashed) and every candidate (dots) against ``x_key``."""
    if not rows:
        return '<p class="empty">No evaluations recorded (events.jsonl is empty).</p>'
    xs = [float(r[x_key]) for r in rows]
    frame = _Frame(xs, _score_range([r["score"] for r in rows]), xlabel, "validation score")
    best = [(frame.x(float(r[x_key])), frame.y(r["best"])) for r in rows]
    median = [(frame.x(float(r[x_key])), frame.y(r["median"])) for r in rows]
    body = [f'<path class="line best" d="{_path(best, step=True)}"/>',
            f'<path class="line median" d="{_path(median)}"/>']
    for r, (x, _) in zip(rows, best, strict=True):
        body.append(f'<circle class="dot" cx="{x:.1f}" cy="{frame.y(r["score"]):.1f}" r="3"><title>'
                    f'#{r["n"]} {_esc(r["name"])} ({_esc(r["id"][:12])}): {r["score"]:.3f}</title></circle>')
    legend = ('<div class="legend"><span class="key best"></span>best so far <span class="key median"></span>'
              'median so far <span class="key dot"></span>candidate</div>')
    return frame.svg(body, f"score against {xlabel}") + legend


def pareto_chart(candidates: list[dict[str, Any]], front: list[dict[str, Any]], cost_key: str, cost_label: str) -> str:
    """All candidates as dots (quality against cost) with the Pareto front highlighted."""
    if not candidates:
        return '<p class="empty">No candidates.</p>'
    xs = [c[cost_key] for c in candidates]
    frame = _Frame(xs, _score_range([c["score"] for c in candidates]), cost_label, "validation score")
    front_ids = {c["id"] for c in front}
    body = []
    pts = [(frame.x(c[cost_key]), frame.y(c["score"])) for c in front]
    if pts:
        body.append(f'<path class="line front" d="{_path(pts, step=False)}"/>')
    for cand in sorted(candidates, key=lambda c: c["id"] in front_ids):
        on = cand["id"] in front_ids
        body.append(f'<circle class="{"dot front" if on else "dot"}" cx="{frame.x(cand[cost_key]):.1f}" '
                    f'cy="{frame.y(cand["score"]):.1f}" r="{5 if on else 3.5}"><title>{_esc(cand["name"])} '
                    f'({_esc(cand["id"][:12])}): score {cand["score"]:.3f}, {_esc(cost_label.split(" (")[0])} '
                    f'{cand[cost_key]:.6g}, {_esc(cand.get("strategy", ""))}/{_esc(cand.get("operator", ""))}'
                    f'{" (front)" if on else ""}</title></circle>')
    legend = ('<div class="legend"><span class="key front"></span>Pareto front (nothing is both better and cheaper)'
              ' <span class="key dot"></span>other candidates</div>')
    return frame.svg(body, "quality against cost") + legend


def lineage_svg(nodes: list[LineageNode]) -> str:
    """The best system's family as a layered graph: ancestors above it, systems bred from it below."""
    if not nodes:
        return '<p class="empty">No lineage (the archive is missing).</p>'
    levels: dict[int, list[LineageNode]] = {}
    for node in nodes:
        levels.setdefault(node.level, []).append(node)
    depth, bottom = max(levels), min(levels)
    box_w, box_h, gap_x, gap_y = 220, 50, 20, 34
    widest = max(len(v) for v in levels.values())
    width = max(box_w + 20, widest * (box_w + gap_x) + gap_x)
    height = (depth - bottom + 1) * (box_h + gap_y)
    # Order each level by the mean position of its already placed neighbours (fewer crossing edges): ancestors
    # by their children one level down, descendants by their parents one level up.
    index: dict[str, float] = {}
    by_id = {n.id: n for n in nodes}
    for lvl in sorted(levels, key=lambda v: (abs(v), -v)):
        group = levels[lvl]

        def anchor(node: LineageNode, lvl: int = lvl) -> float:
            if lvl > 0:
                near = [index[n.id] for n in levels.get(lvl - 1, []) if node.id in n.parents and n.id in index]
            else:
                near = [index[p] for p in node.parents if p in index and by_id[p].level == lvl + 1]
            return sum(near) / len(near) if near else float(len(index))

        group.sort(key=lambda n: (anchor(n), n.generation, n.name, n.id))
        for i, node in enumerate(group):
            index[node.id] = i - (len(group) - 1) / 2
    pos: dict[str, tuple[float, float]] = {}
    for lvl, group in levels.items():
        row = depth - lvl
        total = len(group) * box_w + (len(group) - 1) * gap_x
        x = (width - total) / 2
        for node in group:
            pos[node.id] = (x, gap_y / 2 + row * (box_h + gap_y))
            x += box_w + gap_x
    parts = ['<defs><marker id="arrow" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" markerHeight="7" '
             'orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" class="arrowhead"/></marker></defs>']
    for node in nodes:
        cx, cy = pos[node.id]
        for pid in node.parents:
            px, py = pos[pid]
            parts.append(f'<line class="edge" x1="{px + box_w / 2:.1f}" y1="{py + box_h:.1f}" '
                         f'x2="{cx + box_w / 2:.1f}" y2="{cy:.1f}" marker-end="url(#arrow)"/>')
    for node in nodes:
        x, y = pos[node.id]
        cls = "node best" if node.is_best else ("node seed" if node.operator == "seed" else "node")
        name = node.name if len(node.name) <= 27 else node.name[:26] + "…"
        score = "-" if node.score is None else f"{node.score:.3f}"
        parts.append(f'<g class="{cls}"><title>{_esc(node.name)} ({_esc(node.id[:12])}) made by '
                     f"{_esc(node.strategy)}/{_esc(node.operator)}, generation {node.generation}, score {score}</title>"
                     f'<rect x="{x:.1f}" y="{y:.1f}" width="{box_w}" height="{box_h}" rx="6"/>'
                     f'<text x="{x + 8:.1f}" y="{y + 18:.1f}" class="nname">{_esc(name)}</text>'
                     f'<text x="{x + 8:.1f}" y="{y + 36:.1f}" class="nmeta">{_esc(node.id[:8])} · {score} · '
                     f"{_esc(node.operator if len(node.operator) <= 12 else node.operator[:11] + '…')}</text></g>")
    return (f'<svg class="lineage" viewBox="0 0 {width} {height}" width="{width}" height="{height}" role="img" '
            f'aria-label="lineage of the best system" xmlns="http://www.w3.org/2000/svg">' + "".join(parts) + "</svg>")


# ------------------------------------------------------------------------------------------------
# HTML


_CSS = """
:root { --fg: #1d2430; --muted: #5b6575; --line: #d9dee6; --bg: #ffffff; --panel: #f6f8fb; --accent: #2456c7;
        --good: #1a8f4c; --warn: #b25e09; --front: #d2452f; }
* { box-sizing: border-box; }
body { margin: 0; font: 14px/1.45 -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial, sans-serif;
       color: var(--fg); background: var(--bg); }
header { padding: 22px 32px 14px; border-bottom: 1px solid var(--line); background: var(--panel); }
header h1 { margin: 0 0 4px; font-size: 22px; }
header .sub { color: var(--muted); }
main { padding: 8px 32px 40px; max-width: 1320px; }
section { margin-top: 26px; }
h2 { font-size: 17px; margin: 0 0 10px; padding-bottom: 4px; border-bottom: 1px solid var(--line); }
.cards { display: flex; flex-wrap: wrap; gap: 12px; margin-top: 16px; }
.card { background: var(--panel); border: 1px solid var(--line); border-radius: 8px; padding: 10px 14px;
        min-width: 150px; }
.card .v { font-size: 20px; font-weight: 600; }
.card .k { color: var(--muted); font-size: 12px; }
.charts { display: flex; flex-wrap: wrap; gap: 24px; }
.chart { background: #fff; border: 1px solid var(--line); border-radius: 6px; max-width: 100%; height: auto; }
.grid { stroke: #eef1f5; stroke-width: 1; }
.axis { stroke: #8a94a6; stroke-width: 1; }
.tick { fill: var(--muted); font-size: 11px; }
.label { fill: var(--fg); font-size: 12px; }
.line { fill: none; stroke-width: 2; }
.line.best { stroke: var(--accent); }
.line.median { stroke: var(--warn); stroke-dasharray: 5 4; }
.line.front { stroke: var(--front); stroke-width: 1.5; }
.dot { fill: #7f8ba0; fill-opacity: .75; }
.dot.front { fill: var(--front); fill-opacity: 1; stroke: #fff; stroke-width: 1.5; }
.legend { color: var(--muted); font-size: 12px; margin: 4px 0 0; }
.key { display: inline-block; width: 18px; height: 3px; vertical-align: middle; margin: 0 4px 0 10px; }
.key.best { background: var(--accent); } .key.median { background: var(--warn); }
.key.front { background: var(--front); height: 8px; width: 8px; border-radius: 50%; }
.key.dot { background: #7f8ba0; height: 8px; width: 8px; border-radius: 50%; }
.lineage-wrap { overflow-x: auto; border: 1px solid var(--line); border-radius: 6px; background: #fff; }
.node rect { fill: #f3f5f9; stroke: #9aa5b8; }
.node.seed rect { fill: #eef7f0; stroke: var(--good); }
.node.best rect { fill: #e8efff; stroke: var(--accent); stroke-width: 2; }
.nname { font-size: 12px; font-weight: 600; fill: var(--fg); }
.nmeta { font-size: 11px; fill: var(--muted); font-family: ui-monospace, Menlo, Consolas, monospace; }
.edge { stroke: #9aa5b8; stroke-width: 1.3; }
.arrowhead { fill: #9aa5b8; }
table { border-collapse: collapse; width: 100%; margin: 6px 0 10px; }
th, td { text-align: left; padding: 5px 8px; border-bottom: 1px solid var(--line); vertical-align: top; }
th { background: var(--panel); font-weight: 600; white-space: nowrap; }
th.sortable { cursor: pointer; }
th.sortable::after { content: " \\2195"; color: #b3bac6; }
td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; }
code, pre { font-family: ui-monospace, Menlo, Consolas, monospace; font-size: 12px; }
pre { background: var(--panel); border: 1px solid var(--line); border-radius: 6px; padding: 8px 10px;
      white-space: pre-wrap; margin: 4px 0; }
.system { border: 1px solid var(--line); border-radius: 8px; padding: 10px 14px; margin-bottom: 12px; }
.system h3 { margin: 0 0 4px; font-size: 15px; }
.muted { color: var(--muted); }
.note { color: var(--warn); }
.empty { color: var(--muted); font-style: italic; }
.yes { color: var(--good); font-weight: 600; } .no { color: var(--muted); }
footer { color: var(--muted); font-size: 12px; padding: 0 32px 24px; }
"""

_JS = """
(function () {
  function cellValue(row, index) {
    var cell = row.children[index];
    if (!cell) { return ""; }
    var raw = cell.getAttribute("data-sort");
    if (raw === null) { raw = cell.textContent.trim(); }
    var num = parseFloat(raw);
    return isNaN(num) || !/^[-+0-9.eE]+$/.test(raw) ? raw.toLowerCase() : num;
  }
  document.querySelectorAll("table.sortable").forEach(function (table) {
    table.querySelectorAll("th").forEach(function (th, index) {
      th.classList.add("sortable");
      th.addEventListener("click", function () {
        var body = table.tBodies[0];
        var rows = Array.prototype.slice.call(body.rows);
        var asc = th.getAttribute("data-dir") !== "asc";
        rows.sort(function (a, b) {
          var x = cellValue(a, index), y = cellValue(b, index);
          if (x === y) { return 0; }
          return (x < y ? -1 : 1) * (asc ? 1 : -1);
        });
        th.setAttribute("data-dir", asc ? "asc" : "desc");
        rows.forEach(function (row) { body.appendChild(row); });
      });
    });
  });
  document.documentElement.setAttribute("data-report-ready", "1");
})();
"""


def _table(headers: list[str], rows: list[list[Any]], numeric: set[int] | None = None, sortable: bool = True) -> str:
    numeric = numeric or set()
    head = "".join(f'<th class="num">{_esc(h)}</th>' if i in numeric else f"<th>{_esc(h)}</th>"
                   for i, h in enumerate(headers))
    body = []
    for row in rows:
        cells = []
        for i, value in enumerate(row):
            if isinstance(value, tuple):  # (display html, sort key)
                shown, key = value
                cells.append(f'<td class="{"num" if i in numeric else ""}" data-sort="{_esc(key)}">{shown}</td>')
            else:
                cells.append(f'<td class="num">{_esc(value)}</td>' if i in numeric else f"<td>{_esc(value)}</td>")
        body.append("<tr>" + "".join(cells) + "</tr>")
    cls = ' class="sortable"' if sortable else ""
    return f"<table{cls}><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


def _money(value: float) -> str:
    return f"${value:.4f}" if value < 100 else f"${value:,.2f}"


def _card(value: str, label: str) -> str:
    return f'<div class="card"><div class="v">{_esc(value)}</div><div class="k">{_esc(label)}</div></div>'


def _best_test(data: ReportData) -> float | None:
    if data.best is None:
        return None
    for t in data.test:
        if t.get("genome_id") == data.best["id"]:
            return _num(t.get("test"))
    return None


def render_html(data: ReportData) -> str:
    """The report as one HTML document with inline CSS, SVG and JavaScript (no external resources)."""
    spend = data.spend
    best = data.best
    best_test = _best_test(data)
    lm = data.config.get("lm")
    lm_text = lm.get("model", lm) if isinstance(lm, dict) else (lm or "local")
    cards = [
        _card(f"{best['score']:.3f}" if best else "-", "best validation score"),
        _card(f"{best_test:.3f}" if best_test is not None else "-", "its held-out test score"),
        _card(f"{data.median:.3f}" if data.median is not None else "-", "median validation score"),
        _card(str(len(data.candidates)), "candidates evaluated"),
        _card(_money(_num(spend.get("dollars"))), "dollars spent"),
        _card(f"{int(_num(spend.get('tokens'))):,}", "tokens"),
        _card(f"{int(_num(spend.get('llm_calls'))):,} (+{int(_num(spend.get('cache_hits'))):,} cached)", "LM calls"),
        _card(f"{_num(spend.get('elapsed_s')):.0f} s", "wall time"),
    ]
    sections: list[str] = []
    if data.notes:
        sections.append("<section>" + "".join(f'<p class="note">{_esc(n)}</p>' for n in data.notes) + "</section>")

    spend_x = "spent" if any(r["spent"] > 0 for r in data.progress) else "n"
    spend_label = data.spend_label if spend_x == "spent" else "evaluations (nothing was spent)"
    sections.append(
        '<section id="progress"><h2>Search progress</h2><div class="charts">'
        f"<div><h3>Score against evaluations</h3>{progress_chart(data.progress, 'n', 'evaluations')}</div>"
        f"<div><h3>Score against spend</h3>{progress_chart(data.progress, spend_x, spend_label)}</div>"
        "</div></section>")

    front_rows = [[c["name"], c["id"][:12], f"{c['score']:.3f}", f"{c[data.cost_key]:.6g}",
                   f"{c.get('strategy', '')}/{c.get('operator', '')}"] for c in data.front]
    sections.append(
        '<section id="front"><h2>Quality against cost</h2>'
        f"{pareto_chart(data.candidates, data.front, data.cost_key, data.cost_label)}"
        f"<h3>Pareto front ({len(data.front)})</h3>"
        f"{_table(['name', 'id', 'score', data.cost_label.split(' (')[0], 'made by'], front_rows, {2, 3})}"
        "</section>")

    lineage_note = ('<p class="muted">Large family: only the nearest relatives are shown.</p>'
                    if data.lineage_truncated else "")
    best_title = f"{_esc(best['name'])} ({_esc(best['id'][:12])})" if best else "-"
    sections.append(
        f'<section id="lineage"><h2>Lineage of the best system: {best_title}</h2>'
        '<p class="muted">Its ancestors above it (oldest at the top), systems bred from it (up to '
        f"{DESCENDANT_DEPTH} generations) below; each arrow goes from a parent to a system bred from it (blue: the "
        "best system, green: seeds). Hover a box for details.</p>"
        f'<div class="lineage-wrap">{lineage_svg(data.lineage)}</div>{lineage_note}</section>')

    several = len(data.strategies) > 1 or len({r["strategy"] for r in data.strategy_rows} - {"seed"}) > 1
    if several:
        spent_head = "$ spent" if data.spend_key == "dollars" else "tokens spent"
        rows = []
        for r in data.strategy_rows:
            beats = r["beats_seeds"]
            mark = "-" if beats is None else ('<span class="yes">yes</span>' if beats else '<span class="no">no</span>')
            rows.append([r["strategy"], r["candidates"], f"{r['best']:.3f}", f"{r['mean']:.3f}", r["best_name"],
                         (mark, "" if beats is None else int(beats)),
                         f"{r['spent']:.4f}" if data.spend_key == "dollars" else f"{int(r['spent']):,}"])
        sections.append(
            '<section id="strategies"><h2>Strategies compared</h2>'
            f"<p class=\"muted\">Pipeline: {_esc(' → '.join(data.strategies))}. Spend is attributed from the "
            "running totals in events.jsonl.</p>"
            + _table(["strategy", "candidates", "best", "mean", "best system", "beats best seed?", spent_head], rows,
                     {1, 2, 3, 6})
            + "</section>")

    systems = []
    for i, item in enumerate(data.top, 1):
        c = item.candidate
        ci = c.get("ci") or [0.0, 0.0]
        meta = _table(["score", "95% CI", "$ / example", "tokens / example", "made by", "generation"],
                      [[f"{c['score']:.3f}", f"[{_num(ci[0]):.2f}, {_num(ci[1]):.2f}]",
                        f"{c['dollars_per_example']:.6f}", f"{c['tokens_per_example']:.0f}",
                        f"{c.get('strategy', '')}/{c.get('operator', '')}", c.get("generation", 0)]],
                      {0, 2, 3, 5}, sortable=False)
        agents = "".join(f"<li><code>{_esc(a)}</code></li>" for a in item.agents)
        parent = f"<p>Parent: {_esc(item.parent)}</p>" if item.parent else ""
        systems.append(
            f'<div class="system"><h3>{i}. {_esc(c["name"])} <span class="muted">({_esc(c["id"][:12])})</span></h3>'
            f"{meta}" + (f"<ul>{agents}</ul>" if agents else "")
            + (f'<p class="muted">{_esc(item.topology)}</p>' if item.topology else "")
            + f"{parent}<pre>{_esc(item.diff)}</pre></div>")
    sections.append('<section id="top"><h2>Top systems (validation) and what changed from their parents</h2>'
                    + ("".join(systems) or '<p class="empty">No candidates.</p>') + "</section>")

    if data.test:
        rows = [[t.get("name", ""), str(t.get("genome_id", ""))[:12], f"{_num(t.get('validation')):.3f}",
                 f"{_num(t.get('test')):.3f}",
                 f"[{_num((t.get('ci') or [0, 0])[0]):.2f}, {_num((t.get('ci') or [0, 0])[1]):.2f}]",
                 f"{_num(t.get('dollars_per_example')):.6f}", "seed" if t.get("is_seed") else ""] for t in data.test]
        test_html = _table(["name", "id", "validation", "test", "95% CI", "$ / example", "seed?"], rows, {2, 3, 5})
    else:
        test_html = '<p class="empty">No held-out test scores (test_top_k was 0 or the run was interrupted).</p>'
    sections.append('<section id="test"><h2>Held-out test split (never seen by the search)</h2>'
                    f"{test_html}</section>")

    spend_rows = [[k, f"{_num(v):.6f}" if k == "dollars" else (f"{_num(v):.1f}" if k == "elapsed_s" else v)]
                  for k, v in spend.items()]
    stats_rows = [[k, v] for k, v in data.stats.items()]
    sections.append('<section id="spend"><h2>Spend and run statistics</h2><div class="charts"><div>'
                    + _table(["spend", "value"], spend_rows, {1}, sortable=False) + "</div><div>"
                    + _table(["statistic", "value"], stats_rows, {1}, sortable=False) + "</div></div>"
                    + f'<h3>Configuration</h3><pre>{_esc(yaml.safe_dump(data.config, sort_keys=False).strip())}</pre>'
                    + "</section>")

    all_rows = [[c["name"], c["id"][:12], (f"{c['score']:.3f}", c["score"]), (f"{c['fitness']:.3f}", c["fitness"]),
                 (f"{c['dollars_per_example']:.6f}", c["dollars_per_example"]),
                 (f"{c['tokens_per_example']:.0f}", c["tokens_per_example"]), c.get("strategy", ""),
                 c.get("operator", ""), c.get("generation", 0)] for c in data.candidates]
    sections.append('<section id="candidates"><h2>All candidates</h2><p class="muted">Click a column to sort.</p>'
                    + _table(["name", "id", "score", "fitness", "$ / example", "tokens / example", "strategy",
                              "operator", "generation"], all_rows, {2, 3, 4, 5, 8}) + "</section>")

    stamp = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    title = f"masforge report: {data.name}"
    return (
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{_esc(title)}</title><style>{_CSS}</style></head><body>"
        f"<header><h1>{_esc(title)}</h1><div class=\"sub\">task <b>{_esc(data.task)}</b> · strategy "
        f"<b>{_esc(' → '.join(data.strategies) or '-')}</b> · worker LM <b>{_esc(lm_text)}</b> · stopped: "
        f"<b>{_esc(data.stop_reason)}</b></div><div class=\"cards\">{''.join(cards)}</div></header>"
        f"<main>{''.join(sections)}</main>"
        f"<footer>Generated by masforge on {stamp} from {_esc(data.run_dir)}. Self-contained: no network needed."
        f"</footer><script>{_JS}</script></body></html>\n")


def write_report(data: ReportData, output: str | Path) -> Path:
    """Render ``data`` and write it to ``output``."""
    path = Path(output)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(render_html(data), encoding="utf-8")
    return path


def generate_report(run: str | Path, output: str | Path | None = None) -> Path:
    """Build and write the report of run folder ``run`` (default output ``<run>/report.html``)."""
    data = build_report(run)
    return write_report(data, output or Path(run) / "report.html")


# ------------------------------------------------------------------------------------------------
# terminal


def print_summary(data: ReportData, console: Any) -> None:
    """The report's key numbers as rich tables."""
    from rich.table import Table

    from masforge.console import short

    spend = data.spend
    head = Table(title=f"run {data.name}", show_header=False)
    head.add_column("", style="bold")
    head.add_column("")
    best = data.best
    best_test = _best_test(data)
    rows = [
        ("task", data.task), ("strategy", " -> ".join(data.strategies) or "-"), ("stopped", data.stop_reason),
        ("candidates", str(len(data.candidates))),
        ("best", f"{best['name']} ({best['id'][:12]}) {best['score']:.3f}" if best else "-"),
        ("best on test", f"{best_test:.3f}" if best_test is not None else "-"),
        ("median score", f"{data.median:.3f}" if data.median is not None else "-"),
        ("spent", f"${_num(spend.get('dollars')):.4f}, {int(_num(spend.get('tokens')))} tokens, "
                  f"{int(_num(spend.get('llm_calls')))} LM calls (+{int(_num(spend.get('cache_hits')))} cached), "
                  f"{_num(spend.get('elapsed_s')):.0f}s"),
        ("Pareto front", ", ".join(f"{short(c['name'], 24)} {c['score']:.2f}" for c in data.front) or "-"),
    ]
    for k, v in rows:
        head.add_row(k, v)
    console.print(head)
    top = Table(title="top systems (validation)")
    for col in ("id", "name", "score", "$/example", "tokens/ex", "made by"):
        top.add_column(col, justify="right" if col in ("score", "$/example", "tokens/ex") else "left")
    for item in data.top:
        c = item.candidate
        top.add_row(c["id"][:12], short(c["name"], 36), f"{c['score']:.3f}", f"{c['dollars_per_example']:.5f}",
                    f"{c['tokens_per_example']:.0f}", f"{c.get('strategy', '')}/{c.get('operator', '')}")
    console.print(top)
    if len(data.strategy_rows) > 1:
        strat = Table(title="strategies")
        for col in ("strategy", "candidates", "best", "mean", "spent"):
            strat.add_column(col, justify="left" if col == "strategy" else "right")
        for r in data.strategy_rows:
            spent = f"${r['spent']:.4f}" if data.spend_key == "dollars" else f"{int(r['spent'])} tok"
            strat.add_row(r["strategy"], str(r["candidates"]), f"{r['best']:.3f}", f"{r['mean']:.3f}", spent)
        console.print(strat)
    if data.test:
        test = Table(title="held-out test split")
        for col in ("name", "validation", "test", "95% CI", "seed?"):
            test.add_column(col)
        for t in data.test:
            ci = t.get("ci") or [0, 0]
            test.add_row(short(t.get("name", ""), 36), f"{_num(t.get('validation')):.3f}", f"{_num(t.get('test')):.3f}",
                         f"[{_num(ci[0]):.2f}, {_num(ci[1]):.2f}]", "seed" if t.get("is_seed") else "")
        console.print(test)
    for note in data.notes:
        console.print(f"[yellow]note:[/yellow] {note}")
