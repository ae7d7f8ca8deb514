"""The splits every task has, and split names that unite several of them (``validation+train``)."""

from __future__ import annotations

from masforge.errors import TaskError

SPLITS = ("train", "validation", "test")


def split_parts(name: str, task: str = "") -> list[str]:
    """The splits a split name unites (``"validation+train"`` -> both; one-line TaskError for an unknown one)."""
    parts = [p.strip() for p in str(name).split("+")]
    for part in parts:
        if part not in SPLITS:
            where = f" for task {task}" if task else ""
            raise TaskError(f"unknown split {part!r}{where}; use one of {', '.join(SPLITS)}, or several joined "
                            "with + (e.g. validation+train)")
    if len(set(parts)) != len(parts):
        raise TaskError(f"split {name!r} names a split twice")
    return parts
