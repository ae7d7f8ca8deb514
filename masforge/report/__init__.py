"""A run folder as one self-contained HTML report (and the same key numbers in the terminal).

``masforge report RUN`` reads ``config.yaml``, ``summary.json``, ``events.jsonl`` and the run's archive
(:mod:`.data`), draws the charts as inline SVG (:mod:`.charts`) and writes ``<run>/report.html``
(:mod:`.html`); :mod:`.summary` prints the same key numbers as tables.
"""

from masforge.report.charts import lineage_svg, pareto_chart, progress_chart
from masforge.report.data import ReportData, build_report, pareto_front
from masforge.report.html import generate_report, render_html, write_report
from masforge.report.summary import print_summary

__all__ = ["ReportData", "build_report", "generate_report", "lineage_svg", "pareto_chart", "pareto_front",
           "print_summary", "progress_chart", "render_html", "write_report"]
