"""Compile a config genome into a runnable system, and run it.

A genome becomes a :class:`~masforge.standalone.system.SystemSpec` (:func:`system_spec`): each agent's
module kind, dspy signature and full instructions, who reads whom, the execution plan and the aggregation.
It runs on :class:`~masforge.standalone.system.GraphRunner`, the same code an exported module runs, with
masforge's LM client behind every call (cache, ledger, budgets) and every agent call traced. The execution
semantics are described in that module and in docs/genome.md.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import dspy

from masforge.errors import BudgetExceeded, GenomeError
from masforge.execution.code import CodeSystem
from masforge.execution.result import SystemResult, SystemRunError
from masforge.genome.cycles import is_cyclic
from masforge.genome.graph import agent_edges, execution_plan, output_agents, predecessors
from masforge.genome.names import EXECUTE_MODULE
from masforge.genome.schema import Agent, Genome
from masforge.genome.validate import agent_signature, validate
from masforge.lm.adapters import choose_adapter
from masforge.lm.client import LMClient
from masforge.lm.dspy_lm import MasforgeLM
from masforge.lm.trace import agent_call, recording
from masforge.sandbox.isolation import isolation
from masforge.sandbox.tools import get_tool
from masforge.standalone import system as _system
from masforge.standalone.system import (
    COPIES_TEMPERATURE,
    AgentSpec,
    GraphRunner,
    SignatureError,
    SystemSpec,
    agent_instructions,
    format_messages,
    normalise_answer,
)

__all__ = ["COPIES_TEMPERATURE", "CompiledSystem", "agent_adapter", "agent_spec", "compile_genome",
           "format_messages", "normalise_answer", "system_spec"]


def agent_spec(genome: Genome, agent: Agent) -> AgentSpec:
    """How ``agent`` runs: its signature (its own or the default from the wiring) and full instructions."""
    sig = agent_signature(genome, agent)
    return AgentSpec(
        id=agent.id, module=agent.module, signature=str(sig),
        instructions="" if agent.module == EXECUTE_MODULE else  # it sends no prompt
        agent_instructions(agent.role, agent.instructions, sig.input_names, sig.output_names),
        inputs=list(sig.input_names), outputs=list(sig.output_names), lm=agent.lm, temperature=agent.temperature,
        tools=list(agent.tools), copies=agent.copies, max_iters=agent.max_iters, adapter=agent.adapter,
        unchecked=agent.unchecked)


def system_spec(genome: Genome) -> SystemSpec:
    """How a (valid) config genome runs, as plain data: what masforge runs and what an export writes out."""
    edges = agent_edges(genome)
    topo = genome.topology
    return SystemSpec(
        name=genome.name, inputs=list(genome.inputs), outputs=list(genome.outputs),
        agents={a.id: agent_spec(genome, a) for a in genome.agents},
        predecessors={a.id: predecessors(genome, a.id) for a in genome.agents},
        plan=[(comp, is_cyclic(comp, edges)) for comp in execution_plan(genome)],
        output_agents=output_agents(genome),
        rounds=topo.rounds, message_passing=topo.message_passing, aggregation=topo.aggregation,
        judge=topo.judge if topo.aggregation == "judge" else None, conditions=dict(topo.conditions))


def agent_adapter(agent: Agent, client: LMClient) -> str:
    """The concrete prompt adapter an agent uses: its own choice, else its LM configuration's."""
    cfg = client.config(agent.lm)
    return choose_adapter(agent.adapter, cfg.adapter, local=cfg.is_local)


class CompiledSystem:
    """A runnable config genome: call it with the genome's input fields."""

    def __init__(self, genome: Genome, client: LMClient, *, validated: bool = False) -> None:
        if not validated:
            validate(genome)
        self.genome = genome
        self.client = client
        self.spec = system_spec(genome)
        self._lms: dict[str, MasforgeLM] = {}
        names = self.spec.needed_tools()
        try:
            self.runner = GraphRunner(self.spec, self._lm, {n: get_tool(n) for n in names},
                                      {n: get_tool(n).description for n in names}, trace_hook=agent_call,
                                      fatal=(BudgetExceeded,))
        except SignatureError as exc:  # a signature validate() accepted but dspy rejects
            raise GenomeError(str(exc)) from None

    def _lm(self, alias: str) -> MasforgeLM:
        lm = self._lms.get(alias)
        if lm is None:
            lm = self._lms[alias] = MasforgeLM(self.client, alias)
        return lm

    def __call__(self, **inputs: Any) -> SystemResult:
        missing = [f for f in self.genome.inputs if f not in inputs]
        if missing:
            raise GenomeError(f"genome '{self.genome.name}' needs input '{missing[0]}' "
                              f"(inputs: {', '.join(self.genome.inputs)})")
        # masforge keeps its own trace of every call: dspy's history entries (a timestamped copy of each request
        # and answer) would only cost time per call and memory over a search
        with recording() as trace, dspy.context(disable_history=True):
            try:
                try:
                    outputs, candidates = self.runner.run(**inputs)
                except _system.SystemRunError as exc:
                    raise SystemRunError(f"genome '{self.genome.name}': no agent produced an answer") from exc
            except Exception as exc:
                exc.trace = trace  # type: ignore[attr-defined]  # the evaluator keeps a failure's trace
                raise
        return SystemResult(outputs=outputs, trace=trace, candidates=candidates)


def compile_genome(genome: Genome, client: LMClient, *, validated: bool = False) -> Callable[..., SystemResult]:
    """A callable system for ``genome`` (config: dspy modules; code: the sandboxed forward); ``validated``: the
    caller has validated it already (a search does, once per evaluation), else it is validated here. A system that
    runs generated code (a code genome, an agent with the ``python`` tool) is refused here, before anything is
    paid, when the sandbox lacks a layer the user has not agreed to go without (:class:`SandboxUnavailable`)."""
    if genome.kind == "portfolio":  # each member compiles here, as it would alone (validated with the portfolio)
        from masforge.execution.portfolio_system import PortfolioSystem

        return PortfolioSystem(genome, client, lambda member, c: compile_genome(member, c, validated=True),
                               validated=validated)
    if genome.kind == "code" or any("python" in a.tools for a in genome.agents):
        isolation().require_file_system_layer()
    if genome.kind == "code":
        return CodeSystem(genome, client, validated=validated)
    return CompiledSystem(genome, client, validated=validated)
