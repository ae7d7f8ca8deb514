"""The report page does not change by accident: the same report data renders to the page recorded in
``tests/fixtures/report`` (made by render_html before it was split by section, issue 25).

``report_data.json`` is the report data of a small fake-LM run (random + evolve over four seeds; its events left
out, which the page does not show), with the verdict of another such run. A second page renders the same data
with notes, no verdict, no test scores, no top systems and spend counted in tokens, and a third with one strategy
(no comparison), so every branch of every section is drawn. After an intended change of the page, rewrite the
fixtures with ``MASFORGE_UPDATE_GOLDEN=1 pytest tests/test_report_golden.py`` and review their diff.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import os
from pathlib import Path
from typing import Any

import pytest

from masforge.report import html
from masforge.report.data import LineageNode, ReportData, TopSystem

GOLDEN = Path(__file__).resolve().parent / "fixtures" / "report"
UPDATE = os.environ.get("MASFORGE_UPDATE_GOLDEN") == "1"


class _FixedClock(dt.datetime):
    """The footer's time stamp, fixed."""

    @classmethod
    def now(cls, tz: dt.tzinfo | None = None) -> _FixedClock:
        return cls(2026, 1, 2, 3, 4, tzinfo=tz)


def _data() -> ReportData:
    raw: dict[str, Any] = json.loads((GOLDEN / "report_data.json").read_text(encoding="utf-8"))
    raw["run_dir"] = Path(raw["run_dir"])
    raw["top"] = [TopSystem(**t) for t in raw["top"]]
    raw["lineage"] = [LineageNode(**n) for n in raw["lineage"]]
    return ReportData(**raw)


def _variant(data: ReportData) -> ReportData:
    """Notes, no verdict, no test scores, no top systems, a cut lineage, spend counted in tokens."""
    return dataclasses.replace(data, notes=["The run stopped early <interrupted>.", "summary.json is missing."],
                               verdict=None, test=[], top=[], lineage_truncated=True, strategies=data.strategies[:1],
                               spend_key="tokens", spend_label="tokens spent")


def _one_strategy(data: ReportData) -> ReportData:
    """A run of one strategy besides the seeds: no strategies compared."""
    rows = [r for r in data.strategy_rows if r["strategy"] in ("seed", data.strategies[0])]
    return dataclasses.replace(data, strategies=data.strategies[:1], strategy_rows=rows)


CASES = {"run": _data, "variant": lambda: _variant(_data()), "one_strategy": lambda: _one_strategy(_data())}


def _without_style(page: str) -> str:
    """The page with its constant style sheet and script left out (the fixtures need not repeat them)."""
    return page.replace(html._CSS, "<the report's CSS>").replace(html._JS, "<the report's script>")


@pytest.mark.parametrize("case", sorted(CASES))
def test_the_report_is_the_recorded_page(case: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(html, "datetime", _FixedClock)
    page = _without_style(html.render_html(CASES[case]()))
    path = GOLDEN / f"{case}.html"
    if UPDATE:
        path.write_text(page, encoding="utf-8")
    assert path.is_file(), f"{path.name}: no recorded page; write it with MASFORGE_UPDATE_GOLDEN=1"
    assert page == path.read_text(encoding="utf-8")


def test_the_recorded_pages_hold_every_section_and_branch() -> None:
    run = (GOLDEN / "run.html").read_text(encoding="utf-8")
    variant = (GOLDEN / "variant.html").read_text(encoding="utf-8")
    for section in ("progress", "front", "lineage", "strategies", "top", "test", "spend", "candidates"):
        assert f'id="{section}"' in run
    assert "verdict on 40 held-out examples" in run and 'class="note"' not in run
    assert variant.count('class="note"') == 2 and "No candidates." in variant and "No held-out test scores" in variant
    assert "Large family" in variant and "not re-scored on the test split" in variant
    assert 'id="strategies"' in variant and "tokens spent" in variant  # two strategies in its rows: compared
    assert 'id="strategies"' not in (GOLDEN / "one_strategy.html").read_text(encoding="utf-8")
    assert "2026-01-02 03:04 UTC" in run and "<style><the report's CSS></style>" in run
