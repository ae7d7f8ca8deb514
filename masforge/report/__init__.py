"""A run folder as one self-contained HTML report.

``masforge report RUN`` reads ``config.yaml``, ``summary.json``, ``events.jsonl`` and the run's archive
(:mod:`.data`), draws the charts as inline SVG (:mod:`.charts`) and writes ``<run>/report.html``
(:mod:`.html`). ``masforge report`` prints the same key numbers as tables (:mod:`masforge.cli.report_summary`).
"""

from masforge.report.charts import lineage_svg, pareto_chart, progress_chart
from masforge.report.data import ReportData, build_report, front_of
from masforge.report.html import generate_report, render_html, write_report

__all__ = ["ReportData", "build_report", "front_of", "generate_report", "lineage_svg", "pareto_chart",
           "progress_chart", "render_html", "write_report"]
