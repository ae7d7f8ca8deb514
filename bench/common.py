"""Pieces several benchmark scripts share: a marked section of a results file rewritten in place, a results file
rewritten above a person's notes, a trivial task
whose examples are all different (so nothing is cached between them) and the stub LM server in a child process."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from masforge.evaluators.tasks import Task

RESULTS = Path(__file__).resolve().parent / "results"
NOTES_MARKER = "<!-- notes: kept when the tables are written again -->"


def write_keeping_notes(path: Path, text: str) -> None:
    """Write ``text`` to ``path``, keeping whatever a person wrote below :data:`NOTES_MARKER` in it: a reading
    of the results outlives the tables it was written about."""
    previous = path.read_text(encoding="utf-8") if path.is_file() else ""
    kept = previous.split(NOTES_MARKER, 1)[1] if NOTES_MARKER in previous else ""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text.rstrip("\n") + "\n" + (f"\n{NOTES_MARKER}{kept}" if kept else ""), encoding="utf-8")


def write_section(path: Path, begin: str, end: str, text: str, title: str = "# Reliability and security") -> None:
    """Put ``text`` between the ``begin`` and ``end`` markers of ``path`` (appended with them if absent), so
    each script refreshes its own part of a results file several scripts write."""
    old = path.read_text(encoding="utf-8") if path.is_file() else f"{title}\n"
    block = f"{begin}\n{text.rstrip()}\n{end}"
    if begin in old and end in old:
        head, rest = old.split(begin, 1)
        new = head + block + rest.split(end, 1)[1]
    else:
        new = old.rstrip("\n") + "\n\n" + block + "\n"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(new, encoding="utf-8")


def make_task(n: int, tag: str) -> Task:
    """``n`` distinct arithmetic questions; an example scores 1 when the system answered anything."""
    examples = [{"id": f"{tag}/{i}", "question": f"[{tag}] What is {i} + {i}?", "answer": str(2 * i)}
                for i in range(n)]

    def answered(outputs: dict) -> float:
        return 1.0 if str(outputs.get("answer", "")).strip() else 0.0

    return Task.from_callable(answered, examples=examples, name=f"bench-{tag}")


@contextmanager
def child_stub(latency: float) -> Iterator[str]:
    """``python -m masforge.testing.stub_server`` in a child process (its own CPU); yields its api_base."""
    proc = subprocess.Popen([sys.executable, "-m", "masforge.testing.stub_server", "--port", "0",
                             "--latency", str(latency)], stdout=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline() if proc.stdout else ""
        if "listening on" not in line:
            raise RuntimeError(f"stub server did not start: {line!r}")
        yield line.split("listening on", 1)[1].split()[0]
    finally:
        proc.terminate()
        proc.wait(10)
