"""Running a portfolio: the router sends the question to one member; with an escalation order, an answer that
fails an example the question states passes the question on to the next member of the order.

The members run exactly as they would alone (the caller runs member ``i`` with the same inputs), so their
prompts, and hence their cached answers, are theirs. Escalation only runs what the question shows (its
``assert`` lines, doctests and prose examples, like the ``run_examples`` aggregation), never a hidden test; with
no stated example nothing escalates. Of the answers tried, the first that passes every stated example is kept,
else the one that passes the most (the earliest on ties).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from masforge.standalone.examples import passed_counts, stated_examples
from masforge.standalone.router import route


def escalation_after(routed: int, escalation: Sequence[int]) -> list[int]:
    """The members that may answer after member ``routed``: those after it in the escalation order (all of the
    order when the routed member is not in it)."""
    order = list(escalation)
    if routed in order:
        return order[order.index(routed) + 1:]
    return [m for m in order if m != routed]


def run_portfolio(router: Mapping[str, Any], inputs: Mapping[str, Any], run_member: Callable[[int], dict[str, Any]],
                  *, escalation: Sequence[int] = (), question_field: str = "question", answer_field: str = "answer",
                  run_python: Callable[[str], str] | None = None) -> tuple[list[int], dict[str, Any]]:
    """Answer ``inputs``: the members that ran, in order (the routed one first), and the outputs kept.

    ``run_member(i)`` runs member ``i`` on the inputs and returns its outputs; ``run_python`` runs a check
    program (needed only with an escalation order)."""
    first = route(router, inputs)
    outputs = run_member(first)
    ran = [first]
    rest = escalation_after(first, escalation)
    if not rest or run_python is None:
        return ran, outputs
    question = str(inputs.get(question_field, ""))
    need = len(stated_examples(question))
    if not need:
        return ran, outputs

    def passed(out: dict[str, Any]) -> int:
        counts = passed_counts([str(out.get(answer_field, ""))], question, run_python)
        return counts[0] if counts else 0

    best, best_outputs = passed(outputs), outputs
    for member in rest:
        if best >= need:
            break
        out = run_member(member)
        ran.append(member)
        score = passed(out)
        if score > best:
            best, best_outputs = score, out
    return ran, best_outputs
