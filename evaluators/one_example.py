"""Run a system on one example and score it: the unit of evaluation work every executor runs (in a thread
of this process, or on a Ray worker of a cluster).

An example that meets an infrastructure failure (the LM provider failed for good, the sandbox broke) is
*unscored*: kept with its error, left out of the score (see :mod:`masforge.evaluators.runner`)."""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from masforge.errors import BudgetExceeded, GenomeError, LMError, SandboxError
from masforge.evaluators.example import Example
from masforge.evaluators.tasks import Task
from masforge.execution.result import SystemRunError
from masforge.lm.trace import Incidents, Trace, watching_incidents
from masforge.redact import redact, redact_data


@dataclass
class ExampleResult:
    """One example: what the system answered, how it scored and what it cost."""

    example_id: str
    inputs: dict[str, Any]
    target: str
    outputs: dict[str, Any]
    score: float
    details: dict[str, Any] = field(default_factory=dict)
    error: str | None = None
    error_kind: str | None = None
    tokens: int = 0
    dollars: float = 0.0
    llm_calls: int = 0
    cache_hits: int = 0
    latency_s: float = 0.0
    trace: list[dict[str, Any]] = field(default_factory=list)
    trace_summary: str = ""
    unscored: bool = False
    """The provider or the sandbox failed on this example: it is left out of the score (``error`` says why)."""


def classify(exc: BaseException) -> str:
    """Failure kind of an exception raised while a system answered."""
    if isinstance(exc, LMError):
        return "lm"
    if type(exc).__name__ == "AdapterParseError":
        return "parse"
    if isinstance(exc, SystemRunError):
        text = str(exc)
        for kind in ("timeout", "memory", "cpu", "blocked", "syntax", "output", "killed"):
            if f"({kind})" in text:
                return f"code_{kind}"
        return "system"
    if isinstance(exc, GenomeError):
        return "genome"
    if isinstance(exc, SandboxError):
        return "sandbox"
    return "exception"


def is_infrastructure(exc: BaseException) -> bool:
    """Whether a failure is the provider's or the sandbox's rather than the system's."""
    return isinstance(exc, SandboxError) or (isinstance(exc, LMError) and exc.infrastructure)


_REFUSED = re.compile(r"(LMError|LocalModelError|ProviderError): .*(HTTP 40[134]\b|AuthenticationError|"
                      r"PermissionDeniedError|NotFoundError|cannot reach|does not answer GET /models|cannot be used)")


def refused_by_provider(error: str) -> bool:
    """Whether an example's recorded error is the provider refusing the run (a rejected key, an unknown model, a
    server that does not answer). Such an example says nothing about the system; earlier versions of masforge scored
    it 0, so a stored result that shows one is evaluated again instead of being reused."""
    return bool(_REFUSED.match(error or ""))


def system_inputs(mapping: dict[str, str], ex: Example) -> dict[str, Any]:
    """The system's keyword arguments for ``ex`` (genome input field -> task input field)."""
    return {g: ex.inputs.get(t, "") for g, t in mapping.items()}


def failed_example(ex: Example, mapping: dict[str, str], error: str, kind: str, latency_s: float = 0.0,
                   unscored: bool = False) -> ExampleResult:
    """An example that produced no answer for a reason outside the system (e.g. it ran out of time)."""
    return ExampleResult(ex.id, system_inputs(mapping, ex), str(ex.target)[:2000], {}, 0.0, error=redact(error),
                         error_kind=kind, latency_s=latency_s, unscored=unscored)


def run_example(system: Callable[..., Any], task: Task, mapping: dict[str, str], ex: Example,
                incidents: Incidents | None = None) -> ExampleResult:
    """Answer ``ex`` with ``system`` and score the answer. A system failing is a scored failure, one the provider
    or the sandbox failed is unscored; only a budget stop (:class:`BudgetExceeded`) escapes. ``incidents``
    (optional) lets the caller see whether the example is waiting on a provider."""
    inputs = system_inputs(mapping, ex)
    start = time.perf_counter()
    outputs: dict[str, Any] = {}
    error: str | None = None
    kind: str | None = None
    trace = Trace()
    with watching_incidents(incidents) as seen:
        try:
            result = system(**inputs)
            outputs, trace = result.outputs, result.trace
        except BudgetExceeded:
            raise
        except Exception as exc:  # a system failing on one example is a scored failure, not a crash
            error = redact(f"{type(exc).__name__}: {exc}").splitlines()[0][:500]
            kind = classify(exc)
            trace = getattr(exc, "trace", None) or trace
            if is_infrastructure(exc) and not seen.failures:
                seen.add(error)
    latency = time.perf_counter() - start
    # Any infrastructure failure, whether or not the system got over it, leaves the example out of the score:
    # keeping only the examples that happened to succeed despite it would bias the score upwards.
    unscored = bool(seen.failures)
    if unscored and error is None:
        error, kind = redact(seen.failures[0])[:500], "lm"
    if error is None:
        sc = task.score(ex, outputs)
        score, details = sc.value, sc.details
    else:
        score, details = 0.0, {}
    lm_calls = [c for call in trace.calls for c in call.lm_calls]
    return ExampleResult(
        example_id=ex.id, inputs=inputs, target=str(ex.target)[:2000], outputs=outputs, score=score,
        details={k: v for k, v in details.items() if isinstance(v, str | int | float | bool | None)},
        error=error, error_kind=kind, tokens=trace.tokens, dollars=trace.cost,
        llm_calls=sum(1 for c in lm_calls if not c.cached), cache_hits=sum(1 for c in lm_calls if c.cached),
        latency_s=latency, trace=redact_data(trace.to_dict()), trace_summary=redact(trace.summary()),
        unscored=unscored)
