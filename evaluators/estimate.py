"""How long an evaluation will take, said before it starts: LM calls (examples x each system's calls per example)
at the seconds per call measured on this machine (:mod:`masforge.lm.rates`), over the requests the LM
serves at once. Answers already in the answer cache cost nothing, so the estimate is an upper bound when some
are."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from masforge.genome.graph import lm_call_keys, lm_calls_per_example
from masforge.genome.schema import Genome
from masforge.lm.config import LMConfig
from masforge.lm.rates import seconds_per_call

FAIL_SHARE = 0.5
"""How often an estimate takes a gate to fail the code it checks (the agents behind its ``fail`` edge run only
then), and a critique to find fault with a draft (refine revises only then)."""


def calls_per_example(system: Any, *, code: bool = True) -> float:
    """LM calls a system (a Genome, or an exported module carrying one as ``.genome``) makes per example, on
    average: copies, rounds, a revision :data:`FAIL_SHARE` of the time, and the agents behind a gate's ``fail``
    edge as often on a task whose answers are code (``code``); on any other a gate has nothing to run, so no
    check fails."""
    genome = system if isinstance(system, Genome) else getattr(system, "genome", None)
    if not isinstance(genome, Genome):
        return 1.0
    return lm_calls_per_example(genome, fail_share=FAIL_SHARE if code else 0.0, fault_share=FAIL_SHARE)


def sent_calls(systems: Sequence[Genome], *, code: bool = True, seen: set[str] | None = None) -> list[float]:
    """LM calls per example that each of ``systems``, evaluated in turn on the same examples, sends to the LM: the
    calls (:func:`calls_per_example`) whose prompt no system before it asked (nor one in ``seen``, which grows),
    since the answer cache answers those (:func:`~masforge.genome.graph.lm_call_keys`)."""
    seen = set() if seen is None else seen
    out = []
    for genome in systems:
        keys = _prompts(genome, code)
        out.append(sum(weight for key, weight in keys.items() if key not in seen))
        seen.update(keys)
    return out


_PROMPTS: dict[tuple[str, bool], dict[str, float]] = {}


def _prompts(genome: Genome, code: bool) -> dict[str, float]:
    """:func:`~masforge.genome.graph.lm_call_keys` of ``genome`` as an estimate counts them, kept by genome id (the
    estimate asks for the same systems many times)."""
    found = _PROMPTS.get((genome.id, code))
    if found is None:
        if len(_PROMPTS) > 20_000:
            _PROMPTS.clear()
        found = _PROMPTS[(genome.id, code)] = lm_call_keys(genome, fail_share=FAIL_SHARE if code else 0.0,
                                                           fault_share=FAIL_SHARE)
    return found


@dataclass(frozen=True)
class Estimate:
    """LM calls and the time they take."""

    calls: float
    per_call_s: float
    parallel: int
    measured: bool
    """Whether the seconds per call were measured on this machine (else a stated guess)."""
    serial_calls: float = 0.0
    """Calls made one at a time beside those (a search's meta-agent), at ``serial_s`` each."""
    serial_s: float = 0.0
    shared: bool = False
    """The rate is a share of one server's time (the embedded model): calls in parallel do not divide it."""
    fewest_calls: float | None = None
    """Calls when a race drops every system it may after its first batch (None: no race can drop any)."""

    @property
    def seconds(self) -> float:
        at_once = 1 if self.shared else max(1, self.parallel)
        return self.calls * self.per_call_s / at_once + self.serial_calls * self.serial_s

    def more(self, calls: float = 0.0, serial_calls: float = 0.0, serial_s: float | None = None) -> Estimate:
        """This estimate with more calls (at its rate), and calls made one at a time at ``serial_s`` each."""
        return replace(self, calls=self.calls + calls, serial_calls=self.serial_calls + serial_calls,
                       serial_s=self.serial_s if serial_s is None else serial_s)

    def words(self) -> str:
        """E.g. ``up to about 4 min (24 LM calls at 10.0 s each, 1 at a time; measured on this machine; ...)``."""
        rate = "measured on this machine" if self.measured else "a guess: nothing measured on this machine yet"
        at_once = f", {self.parallel} at a time" if self.parallel > 1 else ", 1 at a time"
        if self.shared and self.parallel > 1:
            at_once = f" of the model's time, {self.parallel} at a time"
        about = "up to about " if self.seconds >= 60 else ""  # cached answers make it less
        serial = (f" and {self.serial_calls:.0f} meta-agent calls at {self.serial_s:.1f} s"
                  if self.serial_calls else "")
        fewer = (f", {self.fewest_calls:.0f} if the race drops each system after its first batch"
                 if self.fewest_calls is not None and self.fewest_calls < self.calls else "")
        return (f"{about}{duration(self.seconds)} ({self.calls:.0f} LM calls at {self.per_call_s:.1f} s each{at_once}"
                f"{serial}{fewer}; {rate}; answers already in the answer cache cost nothing)")


def duration(seconds: float) -> str:
    """``under a minute``, ``7 min``, ``1 h 20 min``."""
    minutes = round(seconds / 60)
    if seconds < 60:
        return "under a minute"
    if minutes < 60:
        return f"{minutes} min"
    return f"{minutes // 60} h {minutes % 60} min"


def estimate(systems: Sequence[Any], examples: int, lm: LMConfig, concurrency: int, *,
             code: bool = True) -> Estimate:
    """Evaluating ``systems`` on ``examples`` examples each with ``lm``, ``concurrency`` examples at once
    (``code``: the task's answers are code, see :func:`calls_per_example`)."""
    per_call, measured = seconds_per_call(lm)
    calls = sum(calls_per_example(s, code=code) for s in systems) * examples
    return Estimate(calls, per_call, max(1, min(concurrency, lm.max_concurrency)), measured, shared=lm.is_local)
