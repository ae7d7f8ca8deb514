"""Metrics: pure, hand-checkable scoring functions, and the metric registry used by tasks.

Two layers:

* text functions (`normalize_text`, `exact_match`, `f1_tokens`, `drop_f1`, `extract_number`,
  `numeric_match`, `extract_boxed`, `math_equal`, `multiple_choice_letter`, `extract_code`,
  `parse_grid`, `grid_match`) that take strings and return numbers, booleans or extracted strings.
  They follow the literature: SQuAD normalisation and token F1 (Rajpurkar et al. 2016), DROP's bag
  F1 with number normalisation (Dua et al. 2019, as in OpenAI simple-evals), the MATH answer
  normaliser (`_strip_string` of Hendrycks et al. 2021) extended with numeric comparison;
* metric functions `MetricFn = (example, outputs) -> float | Score` registered in `METRICS` by
  name. They read the scored output from `outputs["answer"]` (a `Task` maps its `output_field` onto
  that key) and the gold from `example.target` (and `example.meta` for code tests). They never raise
  on garbage model output: anything unparsable scores `Score(0.0, {"error": ...})`.

Each kind of answer has its module: `text_metrics` (exact match, F1, DROP, multiple choice), `math_metrics`
(numbers, MATH), `code_metrics` (code run in the sandbox), `grid_metrics` (ARC grids); `answer_reading` reads the
answer out of the outputs for all of them. This module gathers their public names and holds the registry.

Code is executed only through `masforge.sandbox.runner.run_tests` (an isolated, killable subprocess).
"""

from __future__ import annotations

from masforge.evaluators.answer_reading import answer_of, answer_readings
from masforge.evaluators.code_metrics import code_pass, extract_code, metric_code
from masforge.evaluators.grid_metrics import grid_match, metric_grid, parse_grid
from masforge.evaluators.math_metrics import (
    extract_boxed,
    extract_number,
    math_equal,
    metric_math,
    metric_numeric,
    normalize_math,
    numeric_match,
)
from masforge.evaluators.score import MetricFn, Score
from masforge.evaluators.text_metrics import (
    contains,
    drop_f1,
    exact_match,
    f1_tokens,
    metric_contains,
    metric_drop,
    metric_exact_match,
    metric_f1,
    metric_mc,
    multiple_choice_letter,
    normalize_text,
)

__all__ = [
    "METRICS",
    "MetricFn",
    "Score",
    "answer_of",
    "answer_readings",
    "code_pass",
    "contains",
    "drop_f1",
    "exact_match",
    "extract_boxed",
    "extract_code",
    "extract_number",
    "f1_tokens",
    "grid_match",
    "math_equal",
    "metric_code",
    "metric_contains",
    "metric_drop",
    "metric_exact_match",
    "metric_f1",
    "metric_grid",
    "metric_math",
    "metric_mc",
    "metric_numeric",
    "multiple_choice_letter",
    "normalize_math",
    "normalize_text",
    "numeric_match",
    "parse_grid",
]

METRICS: dict[str, MetricFn] = {
    "exact_match": metric_exact_match,
    "f1": metric_f1,
    "contains": metric_contains,
    "drop_f1": metric_drop,
    "numeric": metric_numeric,
    "math": metric_math,
    "mc": metric_mc,
    "code": metric_code,
    "grid": metric_grid,
}
"""Metric registry: the names `Task.from_jsonl(metric=...)` and the built-in tasks use."""
