"""A run report's key numbers as terminal tables (``masforge report``; the HTML page is :mod:`masforge.report`)."""

from __future__ import annotations

from typing import Any

from masforge.report.data import ReportData, num


def print_summary(data: ReportData, console: Any) -> None:
    """The report's key numbers as rich tables."""
    from rich.table import Table

    from masforge.text import distinct_names, shorten_name

    spend = data.spend
    head = Table(title=f"run {data.name}", show_header=False)
    head.add_column("", style="bold")
    head.add_column("")
    best = data.best
    best_test = data.best_test
    verdict = data.verdict
    rows = [
        ("found vs seed", _versus(verdict)), ("verdict", str(verdict.get("verdict")) if verdict else "-"),
        ("task", data.task), ("strategy", " -> ".join(data.strategies) or "-"), ("stopped", data.stop_reason),
        ("candidates", str(len(data.candidates))),
        ("best overall", f"{best['name']} ({best['id'][:12]}) {best['score']:.3f}" if best else "-"),
        ("best new", f"{data.best_new['name']} ({data.best_new['id'][:12]}) {data.best_new['score']:.3f}"
         if data.best_new else "none: nothing new was proposed"),
        ("best on test", f"{best_test:.3f}" if best_test is not None else "-"),
        ("median score", f"{data.median:.3f}" if data.median is not None else "-"),
        ("spent", f"${num(spend.get('dollars')):.4f}, {int(num(spend.get('tokens')))} tokens, "
                  f"{int(num(spend.get('llm_calls')))} LM calls (+{int(num(spend.get('cache_hits')))} cached), "
                  f"{num(spend.get('elapsed_s')):.0f}s"),
        ("Pareto front", ", ".join(f"{name} {c['score']:.2f}" for name, c in zip(
            distinct_names([c["name"] for c in data.front], 28, [c["id"] for c in data.front]), data.front,
            strict=True)) or "-"),
    ]
    for k, v in rows:
        head.add_row(k, v)
    console.print(head)
    top = Table(title="top systems (validation)")
    for col in ("id", "name", "score", "$/example", "tokens/ex", "made by"):
        top.add_column(col, justify="right" if col in ("score", "$/example", "tokens/ex") else "left")
    shown = distinct_names([item.candidate["name"] for item in data.top], 36,
                           [item.candidate["id"] for item in data.top])
    for item, name in zip(data.top, shown, strict=True):
        c = item.candidate
        top.add_row(c["id"][:12], name, f"{c['score']:.3f}", f"{c['dollars_per_example']:.5f}",
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
            test.add_row(shorten_name(t.get("name", ""), 36), f"{num(t.get('validation')):.3f}",
                         f"{num(t.get('test')):.3f}",
                         f"[{num(ci[0]):.2f}, {num(ci[1]):.2f}]", "seed" if t.get("is_seed") else "")
        console.print(test)
    for note in data.notes:
        console.print(f"[yellow]note:[/yellow] {note}")


def _versus(verdict: dict[str, Any] | None) -> str:
    """``found 0.500 vs seed 0.562 on 50 held-out examples, -0.062 [-0.140, +0.020]``."""
    if verdict is None:
        return "- (not re-scored on the held-out test split)"
    ci = "" if verdict.get("ci_low") is None else \
        f" [{num(verdict.get('ci_low')):+.3f}, {num(verdict.get('ci_high')):+.3f}]"
    return (f"{verdict.get('found')} {num(verdict.get('found_score')):.3f} vs {verdict.get('seed')} "
            f"{num(verdict.get('seed_score')):.3f} on {int(num(verdict.get('n')))} held-out examples, "
            f"{num(verdict.get('diff')):+.3f}{ci}")
