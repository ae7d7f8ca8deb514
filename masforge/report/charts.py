"""The report's charts as inline SVG: score progress, the quality-vs-cost Pareto front, the lineage tree."""

from __future__ import annotations

import html
import math
from typing import Any

from masforge.report.data import LineageNode
from masforge.text import distinct_names


def esc(value: Any) -> str:
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
                     f'text-anchor="middle">{esc(self.xlabel)}</text>')
        parts.append(f'<text class="label" x="14" y="{(self.top + base) / 2:.1f}" text-anchor="middle" '
                     f'transform="rotate(-90 14 {(self.top + base) / 2:.1f})">{esc(self.ylabel)}</text>')
        return parts

    def svg(self, body: list[str], title: str) -> str:
        return (f'<svg class="chart" viewBox="0 0 {self.w} {self.h}" width="{self.w}" height="{self.h}" role="img" '
                f'aria-label="{esc(title)}" xmlns="http://www.w3.org/2000/svg">' + "".join(self.axes() + body)
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
                    f'#{r["n"]} {esc(r["name"])} ({esc(r["id"][:12])}): {r["score"]:.3f}</title></circle>')
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
                    f'cy="{frame.y(cand["score"]):.1f}" r="{5 if on else 3.5}"><title>{esc(cand["name"])} '
                    f'({esc(cand["id"][:12])}): score {cand["score"]:.3f}, {esc(cost_label.split(" (")[0])} '
                    f'{cand[cost_key]:.6g}, {esc(cand.get("strategy", ""))}/{esc(cand.get("operator", ""))}'
                    f'{" (front)" if on else ""}</title></circle>')
    legend = ('<div class="legend"><span class="key front"></span>Pareto front (nothing is both better and cheaper)'
              ' <span class="key dot"></span>other candidates</div>')
    return frame.svg(body, "quality against cost") + legend


NAME_BOX_MAX = 380
"""Widest lineage box, in pixels (a name of about 50 characters)."""


def lineage_svg(nodes: list[LineageNode]) -> str:
    """The best system's family as a layered graph: ancestors above it, systems bred from it below."""
    if not nodes:
        return '<p class="empty">No lineage (the archive is missing).</p>'
    levels: dict[int, list[LineageNode]] = {}
    for node in nodes:
        levels.setdefault(node.level, []).append(node)
    depth, bottom = max(levels), min(levels)
    # Boxes as wide as the longest name needs (about 7 px a character at 12 px), within bounds; a name still too
    # long is cut in the middle, where variants of one system do not differ.
    box_w = min(NAME_BOX_MAX, max(220, 16 + 7 * max(len(n.name) for n in nodes)))
    box_h, gap_x, gap_y = 50, 20, 34
    names = dict(zip([n.id for n in nodes], distinct_names([n.name for n in nodes], (box_w - 16) // 7,
                                                           [n.id for n in nodes]), strict=True))
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
        cls += " exec" if node.execution else ""  # runs code: dashed box, tagged
        name = names[node.id]
        room = (box_w - 16) // 7 - 9  # the "runs code" tag takes the end of the name's line
        if node.execution and len(name) > room:
            name = name[:room - 1] + "…"
        score = "-" if node.score is None else f"{node.score:.3f}"
        tag = (f'<text x="{x + box_w - 8:.1f}" y="{y + 13:.1f}" class="ntag" text-anchor="end">runs code</text>'
               if node.execution else "")
        genes = f"; {esc(node.execution)}" if node.execution else ""
        parts.append(f'<g class="{cls}"><title>{esc(node.name)} ({esc(node.id[:12])}) made by '
                     f"{esc(node.strategy)}/{esc(node.operator)}, generation {node.generation}, score {score}{genes}"
                     f'</title><rect x="{x:.1f}" y="{y:.1f}" width="{box_w}" height="{box_h}" rx="6"/>{tag}'
                     f'<text x="{x + 8:.1f}" y="{y + 18:.1f}" class="nname">{esc(name)}</text>'
                     f'<text x="{x + 8:.1f}" y="{y + 36:.1f}" class="nmeta">{esc(node.id[:8])} · {score} · '
                     f"{esc(node.operator if len(node.operator) <= 12 else node.operator[:11] + '…')}</text></g>")
    return (f'<svg class="lineage" viewBox="0 0 {width} {height}" width="{width}" height="{height}" role="img" '
            f'aria-label="lineage of the best system" xmlns="http://www.w3.org/2000/svg">' + "".join(parts) + "</svg>")
