"""Execution nodes (``module: execute``): run candidate programs against checks and report on them.

An execution node calls no LM. Its checks are the examples the question states (:func:`.examples.stated_examples`)
and the ``assert`` lines a test-writing agent handed it in a ``tests`` field (:func:`written_tests`). Each
candidate's code runs with every check in the ``python`` tool (masforge's sandbox; the child process of an exported
module), one ``try`` per check (:func:`run_checks`); what the run says becomes the node's ``report``
(:func:`check_report`). Which candidate the node passes on, and its ``verdict``, are decided in :mod:`.system`.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable
from typing import NamedTuple

from masforge.standalone.examples import (
    EXAMPLE_PASSED,
    _compiles,
    answer_code,
    check_program,
    question_imports,
    read_check_report,
    stated_examples,
)
from masforge.standalone.prompts import render_prompt

WRITTEN_TESTS_LIMIT = 10
"""At most this many ``assert`` lines are taken from the tests agents wrote (the first ones)."""
REPORT_FAILURES = 5
"""A report lists at most this many failed checks (the rest are counted)."""
REPORT_CHARS = 1500
"""A report is cut to this many characters."""


class Checks(NamedTuple):
    """What an execution node runs every candidate against: the question's own examples, then the written tests
    (none repeated), and the import lines the question's code carries."""

    stated: list[str]
    written: list[str]
    imports: list[str]

    @property
    def all(self) -> list[str]:
        return [*self.stated, *self.written]


class CheckRun(NamedTuple):
    """One candidate's run: which checks passed (by number in :attr:`Checks.all`), why others failed, and the
    problem that kept the checks from running at all ("" if none)."""

    passed: frozenset[int]
    failed: dict[int, str]
    problem: str = ""

    def score(self, checks: Checks) -> tuple[int, int]:
        """(stated examples passed, written tests passed): the question's own examples count first, since a
        written test may itself be wrong."""
        stated = len(checks.stated)
        return sum(1 for n in self.passed if n < stated), sum(1 for n in self.passed if n >= stated)


def written_tests(texts: list[str]) -> list[str]:
    """The ``assert`` lines in the tests agents wrote (fenced or not), each one that compiles on its own line,
    at most :data:`WRITTEN_TESTS_LIMIT` in all, repeats dropped."""
    found: list[str] = []
    for text in texts:
        for line in str(text).splitlines():
            line = line.strip()
            if line.startswith("assert") and line[6:7] in (" ", "(") and _compiles(line):
                found.append(line)
    return list(dict.fromkeys(found))[:WRITTEN_TESTS_LIMIT]


def gather_checks(question: str, tests: list[str]) -> Checks:
    """The checks for ``question`` and the tests agents wrote (a written test equal to a stated one counts once)."""
    stated = stated_examples(question)
    written = [t for t in written_tests(tests) if t not in stated]
    return Checks(stated, written, question_imports(question))


def run_checks(answer: str, checks: Checks, run_python: Callable[[str], str]) -> CheckRun:
    """Run the code of ``answer`` with every check in ``run_python``. The report line carries a fresh random
    marker, so nothing the candidate prints can pass for it."""
    code = answer_code(answer)
    every = checks.all
    if not code:
        return CheckRun(frozenset(), {}, render_prompt("execute_no_code"))
    marker = f"{EXAMPLE_PASSED}-{secrets.token_hex(8)}"
    output = run_python(check_program(code, every, checks.imports, marker=marker, explain=True))
    found = read_check_report(output, marker, len(every))
    if found is None:
        tail = [line for line in output.replace(marker, "").splitlines() if line.strip()]
        why = tail[-1].strip() if tail else "it printed nothing"
        return CheckRun(frozenset(), {}, render_prompt("execute_crashed", error=_cut(why, 300)))
    passed, failed = found
    return CheckRun(frozenset(passed), {n: failed.get(n, "") for n in range(len(every)) if n not in passed})


def check_report(run: CheckRun, checks: Checks) -> str:
    """The report an execution node passes on: how many checks its pick passed and which failed, and why."""
    every = checks.all
    if not every:
        return render_prompt("execute_no_checks")
    parts = [render_prompt("execute_passed", passed=len(run.passed), total=len(every),
                           stated=len(checks.stated), written=len(checks.written))]
    if run.problem:
        parts.append(run.problem)
    failed = sorted(run.failed)
    for n in failed[:REPORT_FAILURES]:
        why = run.failed[n]
        parts.append(f"- {_cut(every[n], 200)}" + (f" -> {why}" if why else ""))
    if len(failed) > REPORT_FAILURES:
        parts.append(render_prompt("execute_more_failures", count=len(failed) - REPORT_FAILURES))
    return _cut("\n".join(parts), REPORT_CHARS)


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."
