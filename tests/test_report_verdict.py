"""The report leads with what the search is for (issue 27): its first cards compare the best found system with the
best seed on the same held-out examples, with the difference, its CI and the verdict; names stay distinguishable
in every list and box; no raw Python value is shown."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

import masforge
from masforge.report import build_report, lineage_svg, render_html
from masforge.report.data import LineageNode
from masforge.text import distinct_names, shorten_name

TASK = "rg:basic_arithmetic"


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Any:
    tmp = tmp_path_factory.mktemp("verdict_run")
    return masforge.optimize(TASK, strategy="random", budget=5, lm="fake", seeds=["io", "cot"], limit=4,
                             test_limit=40, test_top_k=1, output=tmp / "runs")


def _cards(page: str) -> list[str]:
    block = page.split('<div class="cards">', 1)[1].split("</header>", 1)[0]
    return re.findall(r'<div class="card[^"]*">.*?</div></div>', block)


def test_the_first_cards_compare_found_and_seed_on_held_out_data(run: Any) -> None:
    verdict = run.verdict
    assert verdict.compared and verdict.n == 40
    summary = json.loads((run.run_dir / "summary.json").read_text())
    assert summary["verdict"]["n"] == 40 and summary["verdict"]["verdict"] == verdict.sentence
    cards = _cards(render_html(build_report(run.run_dir)))
    assert "best new system, held-out test" in cards[0] and f"{verdict.found_score:.3f}" in cards[0]
    assert "best seed, the same examples" in cards[1] and verdict.seed in cards[1]
    assert "new - seed" in cards[2] and f"{verdict.diff:+.3f}" in cards[2]
    assert f"paired 95% CI [{verdict.ci_low:+.3f}, {verdict.ci_high:+.3f}]" in cards[2]
    assert verdict.sentence in cards[3] and "verdict on 40 held-out examples" in cards[3]
    assert "best selection score" in cards[4]


def test_a_run_without_paired_scores_says_there_is_no_verdict(run: Any, tmp_path: Path) -> None:
    import shutil

    copy = tmp_path / "older"
    shutil.copytree(run.run_dir, copy, symlinks=True)
    summary = json.loads((copy / "summary.json").read_text())
    del summary["verdict"]  # as a run of an earlier masforge wrote it
    (copy / "summary.json").write_text(json.dumps(summary))
    cards = _cards(render_html(build_report(copy)))
    assert "no verdict: this run did not keep the per-example scores" in cards[3]


def test_no_raw_python_values_in_the_report(run: Any) -> None:
    page = render_html(build_report(run.run_dir))
    cells = re.findall(r"<td[^>]*>(.*?)</td>", page)
    assert cells
    for raw in ("{}", "None", "[]", "True", "False"):
        assert raw not in cells, raw
    assert "diverged at" in page and "<td>failures</td>" in page  # the rows are there, readable


def test_names_cut_to_the_same_prefix_stay_distinguishable() -> None:
    long_a = "Multi-Agent Code Verification System with Reflection"
    long_b = "Multi-Agent Code Verification System with Voting"
    assert shorten_name(long_a, 24) != shorten_name(long_b, 24)
    assert shorten_name("chain-of-thought~379381", 18).endswith("379381")
    shown = distinct_names(["io", "io", long_a], 24, ["aaaaaaa1", "bbbbbbb2", "ccccccc3"])
    assert len(set(shown)) == 3 and shown[0] == "io (aaaaaa)"
    nodes = [LineageNode(id=f"{i:040d}", name=name, score=0.5, operator="seed" if i == 0 else "mutate",
                         strategy="evolve", generation=i, parents=[] if i == 0 else [f"{0:040d}"], level=-i,
                         is_best=i == 0) for i, name in enumerate([long_a, long_b])]
    svg = lineage_svg(nodes)
    boxes = re.findall(r'class="nname">(.*?)</text>', svg)
    assert boxes == [long_a, long_b]  # wide enough for these names, no cut at all


def test_the_terminal_report_leads_with_the_verdict_and_keeps_names_apart(run: Any) -> None:
    from rich.console import Console

    from masforge.cli.report_summary import print_summary

    console = Console(width=200, record=True)
    print_summary(build_report(run.run_dir), console)
    text = console.export_text()
    lines = [ln for ln in text.splitlines() if "│" in ln]
    assert "found vs seed" in lines[0] and "held-out examples" in lines[0] and "verdict" in lines[1]
