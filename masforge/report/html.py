"""The report as one HTML page with inline CSS, SVG and a few lines of JavaScript (sortable tables); it loads
nothing from the network, so it opens offline."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import yaml

from masforge.files import write_text_file
from masforge.redact import redact
from masforge.report.charts import esc, lineage_svg, pareto_chart, progress_chart
from masforge.report.data import DESCENDANT_DEPTH, ReportData, build_report, num

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
.card .d { color: var(--muted); font-size: 12px; font-variant-numeric: tabular-nums; }
.charts { display: flex; flex-wrap: wrap; gap: 24px; }
/* A flex item is never narrower than its content by default; min-width: 0 lets a chart shrink with the page. */
.charts > div { flex: 0 1 auto; min-width: 0; max-width: 100%; }
.chart { background: #fff; border: 1px solid var(--line); border-radius: 6px; max-width: 100%; height: auto; }
.table-wrap { overflow-x: auto; }
@media (max-width: 700px) {
  header, main, footer { padding-left: 12px; padding-right: 12px; }
  .card { min-width: 0; flex: 1 1 140px; }
}
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
.node.exec rect { stroke-dasharray: 5 3; }
.ntag { font-size: 10px; fill: #8a5a00; font-weight: 600; }
li.exec code { background: #fff4e0; border: 1px dashed #c98a00; border-radius: 4px; padding: 0 3px; }
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
.yes { color: var(--good); font-weight: 600; } .no { color: var(--muted); } .bad { color: var(--front); }
.card.verdict { max-width: 420px; } .card.verdict .v { font-size: 15px; }
.card.verdict.yes .v { color: var(--good); } .card.verdict.bad .v { color: var(--front); }
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
    head = "".join(f'<th class="num">{esc(h)}</th>' if i in numeric else f"<th>{esc(h)}</th>"
                   for i, h in enumerate(headers))
    body = []
    for row in rows:
        cells = []
        for i, value in enumerate(row):
            if isinstance(value, tuple):  # (display html, sort key)
                shown, key = value
                cells.append(f'<td class="{"num" if i in numeric else ""}" data-sort="{esc(key)}">{shown}</td>')
            else:
                cells.append(f'<td class="num">{esc(value)}</td>' if i in numeric else f"<td>{esc(value)}</td>")
        body.append("<tr>" + "".join(cells) + "</tr>")
    cls = ' class="sortable"' if sortable else ""
    # Wide tables scroll inside their box on a narrow screen instead of widening the page.
    table = f"<table{cls}><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"
    return f'<div class="table-wrap">{table}</div>'


def _money(value: float) -> str:
    return f"${value:.4f}" if value < 100 else f"${value:,.2f}"


def _card(value: str, label: str, detail: str = "") -> str:
    extra = f'<div class="d">{esc(detail)}</div>' if detail else ""
    return f'<div class="card"><div class="v">{esc(value)}</div><div class="k">{esc(label)}</div>{extra}</div>'


def _ci_text(row: dict[str, Any] | None, n: object = None) -> str:
    """``95% CI [lo, hi]`` (on n examples) of a candidate or test row; empty without a CI."""
    ci = (row or {}).get("ci")
    if not ci or len(ci) != 2:
        return ""
    on = f" on {int(num(n))} examples" if n else ""
    return f"95% CI [{num(ci[0]):.2f}, {num(ci[1]):.2f}]{on}"


_OUTCOME_CLASS = {"better": "yes", "worse": "bad", "no_difference": "no", "too_few": "no", "unpaired": "no"}


def _verdict_cards(verdict: dict[str, Any] | None) -> list[str]:
    """The first cards: the best new system and the best seed on the same held-out examples, their paired
    difference with its 95% CI, and the verdict it supports (what the search is for)."""
    if verdict is None or "n" not in verdict:  # no comparison: nothing new was proposed, or not re-scored
        why = str(verdict.get("verdict")) if verdict else "not re-scored on the test split"
        return [_card("-", "best new system vs best seed on held-out data", why)]
    n = int(num(verdict.get("n")))
    diff = f"{num(verdict.get('diff')):+.3f}"
    ci = "" if verdict.get("ci_low") is None else \
        f"paired 95% CI [{num(verdict.get('ci_low')):+.3f}, {num(verdict.get('ci_high')):+.3f}]"
    outcome = str(verdict.get("outcome", ""))
    kind = _OUTCOME_CLASS.get(outcome, "no")
    said = (f'<div class="card verdict {kind}"><div class="v">{esc(verdict.get("verdict"))}</div>'
            f'<div class="k">verdict on {n} held-out examples</div></div>')
    return [
        _card(f"{num(verdict.get('found_score')):.3f}", "best new system, held-out test",
              f"{verdict.get('found')} ({str(verdict.get('found_id', ''))[:12]}), {n} examples"),
        _card(f"{num(verdict.get('seed_score')):.3f}", "best seed, the same examples",
              f"{verdict.get('seed')} ({str(verdict.get('seed_id', ''))[:12]})"),
        _card(diff, "new - seed", ci),
        said,
    ]


def _plain(value: Any) -> str:
    """A recorded value as a reader wants it: no Python literals (``{}``, ``None``, ``True``)."""
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:.6g}"
    if isinstance(value, dict):
        return ", ".join(f"{k} {_plain(v)}" for k, v in value.items()) or "none"
    if isinstance(value, list | tuple):
        return ", ".join(_plain(v) for v in value) or "none"
    return str(value)


def render_html(data: ReportData) -> str:
    """The report as one HTML document with inline CSS, SVG and JavaScript (no external resources)."""
    sections = [
        _notes_section(data),
        _progress_section(data),
        _front_section(data),
        _lineage_section(data),
        _strategies_section(data),
        _top_section(data),
        _test_section(data),
        _spend_section(data),
        _candidates_section(data),
    ]
    return _page(data, _header_cards(data), [s for s in sections if s])


def _header_cards(data: ReportData) -> list[str]:
    """The cards under the title: the verdict first, then the best scores, the candidates and the spend."""
    spend = data.spend
    best = data.best
    best_test = data.best_test
    return [
        *_verdict_cards(data.verdict),
        _card(f"{best['score']:.3f}" if best else "-", "best selection score, overall"
              + (f": {best['name']}" + (" (a seed)" if best is not data.best_new else "") if best else ""),
              _ci_text(best, data.stats.get("selection_examples") or data.config.get("limit"))),
        _card(f"{best_test:.3f}" if best_test is not None else "-", "its held-out test score",
              _ci_text(data.best_test_row, (data.best_test_row or {}).get("n"))),
        _card(f"{data.median:.3f}" if data.median is not None else "-", "median validation score"),
        _card(str(len(data.candidates)), "candidates evaluated"),
        _card(_money(num(spend.get("dollars"))), "dollars spent"),
        _card(f"{int(num(spend.get('tokens'))):,}", "tokens"),
        _card(f"{int(num(spend.get('llm_calls'))):,} (+{int(num(spend.get('cache_hits'))):,} cached)", "LM calls"),
        _card(f"{num(spend.get('elapsed_s')):.0f} s", "wall time"),
    ]


def _notes_section(data: ReportData) -> str:
    """What the reader should know first (an unfinished run, a missing file); empty without notes."""
    if not data.notes:
        return ""
    return "<section>" + "".join(f'<p class="note">{esc(n)}</p>' for n in data.notes) + "</section>"


def _progress_section(data: ReportData) -> str:
    """The best and median score against evaluations and against spend."""
    spend_x = "spent" if any(r["spent"] > 0 for r in data.progress) else "n"
    spend_label = data.spend_label if spend_x == "spent" else "evaluations (nothing was spent)"
    return ('<section id="progress"><h2>Search progress</h2><div class="charts">'
            f"<div><h3>Score against evaluations</h3>{progress_chart(data.progress, 'n', 'evaluations')}</div>"
            f"<div><h3>Score against spend</h3>{progress_chart(data.progress, spend_x, spend_label)}</div>"
            "</div></section>")


def _front_section(data: ReportData) -> str:
    """Every candidate's score against its cost, and the Pareto front as a table."""
    front_rows = [[c["name"], c["id"][:12], f"{c['score']:.3f}", f"{c[data.cost_key]:.6g}",
                   f"{c.get('strategy', '')}/{c.get('operator', '')}"] for c in data.front]
    return ('<section id="front"><h2>Quality against cost</h2>'
            f"{pareto_chart(data.candidates, data.front, data.cost_key, data.cost_label)}"
            f"<h3>Pareto front ({len(data.front)})</h3>"
            f"{_table(['name', 'id', 'score', data.cost_label.split(' (')[0], 'made by'], front_rows, {2, 3})}"
            "</section>")


def _lineage_section(data: ReportData) -> str:
    """The best system's ancestors and descendants as a graph."""
    best = data.best_new or data.best
    which = "the best new system" if data.best_new else "the best system (a seed: nothing new was found)"
    lineage_note = ('<p class="muted">Large family: only the nearest relatives are shown.</p>'
                    if data.lineage_truncated else "")
    best_title = f"{esc(best['name'])} ({esc(best['id'][:12])})" if best else "-"
    return (f'<section id="lineage"><h2>Lineage of {which}: {best_title}</h2>'
            '<p class="muted">Its ancestors above it (oldest at the top), systems bred from it (up to '
            f"{DESCENDANT_DEPTH} generations) below; each arrow goes from a parent to a system bred from it (blue: "
            f"{which.split(' (')[0]}, green: seeds). Hover a box for details.</p>"
            f'<div class="lineage-wrap">{lineage_svg(data.lineage)}</div>{lineage_note}</section>')


def _strategies_section(data: ReportData) -> str:
    """The strategies of the pipeline side by side; empty when the run used only one."""
    several = len(data.strategies) > 1 or len({r["strategy"] for r in data.strategy_rows} - {"seed"}) > 1
    if not several:
        return ""
    spent_head = "$ spent" if data.spend_key == "dollars" else "tokens spent"
    rows = []
    for r in data.strategy_rows:
        beats = r["beats_seeds"]
        mark = "-" if beats is None else ('<span class="yes">yes</span>' if beats else '<span class="no">no</span>')
        rows.append([r["strategy"], r["candidates"], f"{r['best']:.3f}", f"{r['mean']:.3f}", r["best_name"],
                     (mark, "" if beats is None else int(beats)),
                     f"{r['spent']:.4f}" if data.spend_key == "dollars" else f"{int(r['spent']):,}"])
    return ('<section id="strategies"><h2>Strategies compared</h2>'
            f"<p class=\"muted\">Pipeline: {esc(' → '.join(data.strategies))}. Spend is attributed from the "
            "running totals in events.jsonl.</p>"
            + _table(["strategy", "candidates", "best", "mean", "best system", "beats best seed?", spent_head], rows,
                     {1, 2, 3, 6})
            + "</section>")


def _top_section(data: ReportData) -> str:
    """The top systems by validation score: their numbers, agents, wiring and what changed from their parent."""
    systems = []
    for i, item in enumerate(data.top, 1):
        c = item.candidate
        ci = c.get("ci") or [0.0, 0.0]
        meta = _table(["score", "95% CI", "$ / example", "tokens / example", "made by", "generation"],
                      [[f"{c['score']:.3f}", f"[{num(ci[0]):.2f}, {num(ci[1]):.2f}]",
                        f"{c['dollars_per_example']:.6f}", f"{c['tokens_per_example']:.0f}",
                        f"{c.get('strategy', '')}/{c.get('operator', '')}", c.get("generation", 0)]],
                      {0, 2, 3, 5}, sortable=False)
        agents = "".join(f'<li class="exec"><code>{esc(a)}</code></li>' if a.split(":")[0] in item.execute_nodes
                         else f"<li><code>{esc(a)}</code></li>" for a in item.agents)
        parent = f"<p>Parent: {esc(item.parent)}</p>" if item.parent else ""
        systems.append(
            f'<div class="system"><h3>{i}. {esc(c["name"])} <span class="muted">({esc(c["id"][:12])})</span></h3>'
            f"{meta}" + (f"<ul>{agents}</ul>" if agents else "")
            + (f'<p class="muted">{esc(item.topology)}</p>' if item.topology else "")
            + f"{parent}<pre>{esc(item.diff)}</pre></div>")
    return ('<section id="top"><h2>Top systems (validation) and what changed from their parents</h2>'
            + ("".join(systems) or '<p class="empty">No candidates.</p>') + "</section>")


def _test_section(data: ReportData) -> str:
    """The held-out test scores of the systems re-scored on the test split."""
    if data.test:
        rows = [[t.get("name", ""), str(t.get("genome_id", ""))[:12], f"{num(t.get('validation')):.3f}",
                 f"{num(t.get('test')):.3f}",
                 f"[{num((t.get('ci') or [0, 0])[0]):.2f}, {num((t.get('ci') or [0, 0])[1]):.2f}]",
                 f"{num(t.get('dollars_per_example')):.6f}", "seed" if t.get("is_seed") else ""] for t in data.test]
        test_html = _table(["name", "id", "validation", "test", "95% CI", "$ / example", "seed?"], rows, {2, 3, 5})
    else:
        test_html = '<p class="empty">No held-out test scores (test_top_k was 0 or the run was interrupted).</p>'
    return ('<section id="test"><h2>Held-out test split (never seen by the search)</h2>'
            f"{test_html}</section>")


def _spend_section(data: ReportData) -> str:
    """What the run spent, its statistics and its configuration."""
    spend_rows = [[k.replace("_", " "), f"{num(v):.6f}" if k == "dollars" else
                   (f"{num(v):.1f}" if k == "elapsed_s" else _plain(v))] for k, v in data.spend.items()]
    stats_rows = [[k.replace("_", " "), _plain(v)] for k, v in data.stats.items()]
    return ('<section id="spend"><h2>Spend and run statistics</h2><div class="charts"><div>'
            + _table(["spend", "value"], spend_rows, {1}, sortable=False) + "</div><div>"
            + _table(["statistic", "value"], stats_rows, {1}, sortable=False) + "</div></div>"
            + f'<h3>Configuration</h3><pre>{esc(yaml.safe_dump(data.config, sort_keys=False).strip())}</pre>'
            + "</section>")


def _candidates_section(data: ReportData) -> str:
    """Every candidate in one sortable table."""
    all_rows = [[c["name"], c["id"][:12], (f"{c['score']:.3f}", c["score"]), (f"{c['fitness']:.3f}", c["fitness"]),
                 (f"{c['dollars_per_example']:.6f}", c["dollars_per_example"]),
                 (f"{c['tokens_per_example']:.0f}", c["tokens_per_example"]), c.get("strategy", ""),
                 c.get("operator", ""), c.get("generation", 0)] for c in data.candidates]
    return ('<section id="candidates"><h2>All candidates</h2><p class="muted">Click a column to sort.</p>'
            + _table(["name", "id", "score", "fitness", "$ / example", "tokens / example", "strategy",
                      "operator", "generation"], all_rows, {2, 3, 4, 5, 8}) + "</section>")


def _page(data: ReportData, cards: list[str], sections: list[str]) -> str:
    """The document around the cards and sections: title, the run's header line, styles, footer and script."""
    lm = data.config.get("lm")
    lm_text = lm.get("model", lm) if isinstance(lm, dict) else (lm or "local")
    stamp = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    title = f"masforge report: {data.name}"
    return (
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{esc(title)}</title><style>{_CSS}</style></head><body>"
        f"<header><h1>{esc(title)}</h1><div class=\"sub\">task <b>{esc(data.task)}</b> · strategy "
        f"<b>{esc(' → '.join(data.strategies) or '-')}</b> · worker LM <b>{esc(lm_text)}</b> · stopped: "
        f"<b>{esc(data.stop_reason)}</b></div><div class=\"cards\">{''.join(cards)}</div></header>"
        f"<main>{''.join(sections)}</main>"
        f"<footer>Generated by masforge on {stamp} from {esc(data.run_dir)}. Self-contained: no network needed."
        f"</footer><script>{_JS}</script></body></html>\n")


def write_report(data: ReportData, output: str | Path) -> Path:
    """Render ``data`` and write it to ``output``."""
    return write_text_file(output, redact(render_html(data)))


def generate_report(run: str | Path, output: str | Path | None = None) -> Path:
    """Build and write the report of run folder ``run`` (default output ``<run>/report.html``)."""
    data = build_report(run)
    return write_report(data, output or Path(run) / "report.html")
