"""Metrics of ARC grid answers: the last grid in a reply, compared with the gold grid cell by cell."""

from __future__ import annotations

import ast
import json
import re
from typing import Any

from masforge.evaluators.answer_reading import answer_of
from masforge.evaluators.example import Example
from masforge.evaluators.score import Score


def _is_grid(obj: Any) -> bool:
    return (
        isinstance(obj, list)
        and len(obj) > 0
        and all(isinstance(row, list) and row for row in obj)
        and all(isinstance(v, int) and not isinstance(v, bool) for row in obj for v in row)
    )


def _top_groups(s: str) -> list[str]:
    groups, depth, start = [], 0, 0
    for i, ch in enumerate(s):
        if ch == "[":
            if depth == 0:
                start = i
            depth += 1
        elif ch == "]" and depth > 0:
            depth -= 1
            if depth == 0:
                groups.append(s[start : i + 1])
    return groups


def parse_grid(text: Any) -> list[list[int]] | None:
    """The last grid in `text`: a JSON/Python list of lists of ints, else the last block of lines
    of digits ("0 7 7" or "077"). None if there is none."""
    if text is None:
        return None
    if _is_grid(text):
        return [list(row) for row in text]
    text = str(text)
    for chunk in reversed(re.findall(r"\[[\[\]\d,\s-]*\]", text)):
        for group in reversed(_top_groups(chunk)):
            try:
                obj = json.loads(group)
            except ValueError:
                try:
                    obj = ast.literal_eval(group)
                except (ValueError, SyntaxError):
                    continue
            if _is_grid(obj):
                return obj
    rows: list[list[int]] = []
    best: list[list[int]] = []
    for line in text.splitlines() + [""]:
        cells = line.strip().strip("|").split()
        if cells and all(c.isdigit() for c in cells):
            rows.append([int(c) for c in cells] if len(cells) > 1 else [int(d) for d in cells[0]])
        else:
            if rows:
                best = rows
            rows = []
    return best or None


def grid_match(pred: Any, gold: Any) -> bool:
    """True if the grid parsed from `pred` equals the gold grid exactly (shape and every cell)."""
    grid = parse_grid(pred)
    return grid is not None and grid == [list(row) for row in gold]


def metric_grid(example: Example, outputs: dict[str, Any]) -> Score:
    """ARC: the grid parsed from the answer equals the gold grid exactly."""
    grid = parse_grid(answer_of(outputs))
    if grid is None:
        return Score(0.0, {"error": "no grid (JSON list of lists of ints) found in the answer"})
    return Score(float(grid == example.target), {"pred": grid, "gold": example.target})
