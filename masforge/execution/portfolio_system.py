"""A runnable portfolio genome: route each question to one member and run that member as it runs alone.

Each member is compiled by the same function as any genome (:func:`masforge.execution.compile.compile_genome`),
so it sends the same prompts as when it runs by itself, and every answer it would have had from the cache is a
cache hit. The routing and escalation rules are :mod:`masforge.standalone.portfolio`, the same code an
exported portfolio runs.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from masforge.errors import GenomeError
from masforge.execution.result import SystemResult
from masforge.genome.router import Router
from masforge.genome.schema import Genome
from masforge.genome.validate import validate
from masforge.lm.client import LMClient
from masforge.lm.trace import AgentCall, Trace
from masforge.sandbox.isolation import isolation
from masforge.sandbox.tools import get_tool
from masforge.standalone.portfolio import run_portfolio
from masforge.standalone.router import route

ROUTER_AGENT = "router"
"""The trace entry of the routing decision (no LM call): its outputs name the members that ran."""


class PortfolioSystem:
    """A runnable portfolio genome: call it with the genome's input fields."""

    def __init__(self, genome: Genome, client: LMClient,
                 compile_member: Callable[[Genome, LMClient], Callable[..., SystemResult]], *,
                 validated: bool = False) -> None:
        if not validated:
            validate(genome)
        assert genome.portfolio is not None  # validate() refuses a portfolio without its body
        self.genome = genome
        self.client = client
        self.body = genome.portfolio
        self.router = self.body.router.model_dump()
        if self.body.escalation:  # escalation runs the answers' code against the stated examples
            isolation().require_file_system_layer()
        self.systems = [compile_member(member, client) for member in self.body.members]

    def __call__(self, **inputs: Any) -> SystemResult:
        missing = [f for f in self.genome.inputs if f not in inputs]
        if missing:
            raise GenomeError(f"genome '{self.genome.name}' needs input '{missing[0]}' "
                              f"(inputs: {', '.join(self.genome.inputs)})")
        trace = Trace()
        decision = AgentCall(agent=ROUTER_AGENT, module="route", inputs=dict(inputs))
        trace.calls.append(decision)
        candidates: list[dict[str, Any]] = []

        def run_member(index: int) -> dict[str, Any]:
            try:
                result = self.systems[index](**inputs)
            except Exception as exc:
                trace.calls.extend(getattr(getattr(exc, "trace", None), "calls", []))
                exc.trace = trace  # type: ignore[attr-defined]  # the evaluator keeps a failure's trace
                raise
            trace.calls.extend(result.trace.calls)
            candidates.append(dict(result.outputs))
            return dict(result.outputs)

        python = get_tool("python") if self.body.escalation else None
        ran, outputs = run_portfolio(self.router, {f: inputs[f] for f in self.genome.inputs}, run_member,
                                     escalation=self.body.escalation, question_field=self.genome.inputs[0],
                                     answer_field=self.genome.outputs[0], run_python=python)
        decision.outputs = {"members": [self.body.members[i].name for i in ran], "indices": ran}
        return SystemResult(outputs=outputs, trace=trace, candidates=candidates)


def choose(router: Router, inputs: dict[str, Any]) -> int:
    """The member index ``router`` picks for the question ``inputs`` (computed from its stored numbers)."""
    return route(router.model_dump(), inputs)
