"""Query a search's archive from Python: best systems, the quality-vs-cost front, lineage.

    python examples/browse_archive.py runs/latest
"""

from __future__ import annotations

import argparse
from pathlib import Path

import masforge


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("run", type=Path, help="a run folder written by `masforge search`")
    args = parser.parse_args()

    archive = masforge.Archive.open(args.run / "archive")
    records = archive.list()
    task = next((r.task for rec in records for r in rec.results), None)
    print(f"{len(records)} candidates; task {task}")
    for rec in archive.best(task=task, k=3):
        result = rec.result_for(task=task)
        print(f"  {rec.short_id} {rec.name:40s} score {result.score:.3f} via {rec.operator}")
    print("front:", [(rec.short_id, round(rec.result_for(task=task).score, 3)) for rec in archive.front(task=task)])
    best = archive.best(task=task, k=1)[0]
    lineage = archive.lineage(best.genome_id)
    print(f"lineage of {best.short_id}: {len(lineage.ancestors)} ancestors, {len(lineage.descendants)} descendants")


if __name__ == "__main__":
    main()
