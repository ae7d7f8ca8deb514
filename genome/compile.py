"""Compile a config genome into a runnable system of dspy modules, and run it.

Execution semantics (documented in docs/genome.md):

* The agents' graph is condensed into strongly connected components that run in topological order
  (ties: the order agents are listed in). A cyclic component (debate, critique loops) runs
  ``topology.rounds`` rounds; ``sequential`` message passing lets an agent see this round's earlier
  outputs, ``synchronous`` only the previous round's.
* An agent reads the genome inputs if an edge comes from ``input``, and ``messages``: the latest
  outputs of its agent predecessors as text. Outputs of predecessors are also readable by field name.
* ``copies: k`` runs k independent samples of an agent (different sample seeds, in parallel).
* The candidates are the outputs of every copy of every agent with an edge to ``output``;
  ``aggregation`` picks the answer: ``last`` (the last candidate), ``majority_vote`` (most common
  normalised first output field) or ``judge`` (a judge agent reads the inputs and all candidates).
"""

from __future__ import annotations

import contextvars
import re
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import dspy

from masforge.errors import BudgetExceeded, GenomeError
from masforge.genome.code import CodeSystem
from masforge.genome.graph import agent_edges, execution_plan, is_cyclic, predecessors
from masforge.genome.result import SystemResult, SystemRunError
from masforge.genome.schema import Agent, Genome
from masforge.genome.validate import JUDGE_INPUT, MESSAGES_INPUT, agent_signature, validate
from masforge.runtime.adapters import make_adapter, resolve_adapter
from masforge.runtime.dspy_lm import MasforgeLM
from masforge.runtime.lm import LMClient
from masforge.runtime.prompts import render
from masforge.runtime.tools import get_tool
from masforge.runtime.trace import agent_call, recording

AgentFn = Callable[[dict[str, Any], int], dict[str, Any]]
COPIES_TEMPERATURE = 0.7
"""Temperature of an agent's copies when neither the agent nor its LM sets one above 0."""


def _plain(value: Any) -> Any:
    if isinstance(value, str | int | float | bool) or value is None:
        return value
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return str(value)


def _instructions(agent: Agent, default: str) -> str:
    parts = []
    if agent.role:
        parts.append(render("agent_role", role=agent.role))
    parts.append(agent.instructions.strip() or default)
    return " ".join(p for p in parts if p)


def _make_signature(spec: str, instructions: str) -> type[dspy.Signature]:
    try:
        return dspy.Signature(spec, instructions)
    except Exception as exc:  # a signature validate() accepted but dspy rejects
        raise GenomeError(f"signature '{spec}' is not accepted by dspy: {exc}") from None


def _with_fields(spec_inputs: list[str], extra_in: list[str], outputs: str) -> str:
    ins = [*spec_inputs, *[f for f in extra_in if f not in spec_inputs]]
    return f"{', '.join(ins)} -> {outputs}"


def agent_adapter(agent: Agent, client: LMClient) -> str:
    """The concrete prompt adapter an agent uses: its own choice, else its LM configuration's."""
    cfg = client.config(agent.lm)
    if agent.adapter != "auto":
        return resolve_adapter(agent.adapter, local=cfg.is_local)
    return cfg.resolved_adapter


class _AgentRunner:
    """One agent's dspy module(s), callable on a dict of inputs with a sample index."""

    def __init__(self, genome: Genome, agent: Agent, client: LMClient) -> None:
        self.agent = agent
        self.client = client
        self.adapter_name = agent_adapter(agent, client)
        self.adapter = make_adapter(self.adapter_name)
        self.sig = agent_signature(genome, agent)
        sig_text = str(self.sig)
        outs = sig_text.split("->", 1)[1].strip()
        ins = self.sig.input_names
        default = f"Given the fields {', '.join(ins)}, produce the fields {', '.join(self.sig.output_names)}."
        instr = _instructions(agent, default)
        kind = agent.module
        self.steps: dict[str, dspy.Module] = {}
        if kind == "predict":
            self.steps["main"] = dspy.Predict(_make_signature(sig_text, instr))
        elif kind == "chain_of_thought":
            self.steps["main"] = dspy.ChainOfThought(_make_signature(sig_text, instr))
        elif kind == "react":
            tools = [self._dspy_tool(name) for name in agent.tools]
            self.steps["main"] = dspy.ReAct(_make_signature(sig_text, instr), tools=tools, max_iters=agent.max_iters)
        elif kind == "program_of_thought":
            self.steps["write"] = dspy.Predict(_make_signature(
                _with_fields(ins, ["feedback"], "code"), f"{instr} {render('pot_write')}"))
            self.steps["answer"] = dspy.Predict(_make_signature(
                _with_fields(ins, ["code", "code_output"], outs), f"{instr} {render('pot_answer')}"))
        elif kind == "refine":
            self.steps["main"] = dspy.ChainOfThought(_make_signature(sig_text, instr))
            self.steps["critique"] = dspy.Predict(_make_signature(
                _with_fields(ins, ["draft"], "critique, is_correct: bool"), render("refine_critique")))
            self.steps["revise"] = dspy.Predict(_make_signature(
                _with_fields(ins, ["draft", "critique"], outs), f"{instr} {render('refine_revise')}"))
        else:  # pragma: no cover - the schema forbids other kinds
            raise GenomeError(f"agent '{agent.id}': unknown module kind '{kind}'")

    def _temperature(self) -> float | None:
        """The agent's temperature; independent copies on a greedy LM sample (else every copy is the same)."""
        if self.agent.temperature is None and self.agent.copies > 1 and \
                self.client.config(self.agent.lm).temperature == 0:
            return COPIES_TEMPERATURE
        return self.agent.temperature

    @staticmethod
    def _dspy_tool(name: str) -> dspy.Tool:
        tool = get_tool(name)

        def call(arg: str) -> str:
            return tool(arg)

        return dspy.Tool(call, name=tool.name, desc=tool.description, args={"arg": {"type": "string"}})

    def __call__(self, inputs: dict[str, Any], sample: int) -> dict[str, Any]:
        lm = MasforgeLM(self.client, self.agent.lm, temperature=self._temperature(), sample=sample)
        with dspy.context(lm=lm, adapter=self.adapter):
            if self.agent.module == "program_of_thought":
                return self._program_of_thought(inputs)
            if self.agent.module == "refine":
                return self._refine(inputs)
            pred = self.steps["main"](**inputs)
        # Keep the reasoning next to the outputs: debaters and judges read it in their messages.
        extra = {"reasoning": _plain(pred["reasoning"])} if "reasoning" in pred.keys() else {}
        return {**extra, **{k: _plain(pred[k]) for k in self.sig.output_names}}

    def _program_of_thought(self, inputs: dict[str, Any]) -> dict[str, Any]:
        python = get_tool("python")
        feedback, code, output = "none", "", ""
        for _ in range(self.agent.max_iters):
            code = str(self.steps["write"](**inputs, feedback=feedback).code)
            code = re.sub(r"^```(?:python)?\s*|\s*```\s*$", "", code.strip())
            output = python(code)
            if "error (" not in output:
                break
            feedback = f"The previous program failed: {output[-500:]}"
        pred = self.steps["answer"](**inputs, code=code, code_output=output)
        return {k: _plain(pred[k]) for k in self.sig.output_names}

    def _refine(self, inputs: dict[str, Any]) -> dict[str, Any]:
        pred = self.steps["main"](**inputs)
        result = {k: _plain(pred[k]) for k in self.sig.output_names}
        for _ in range(self.agent.max_iters - 1):
            draft = "\n".join(f"{k}: {v}" for k, v in result.items())
            crit = self.steps["critique"](**inputs, draft=draft)
            if bool(crit.is_correct):
                break
            pred = self.steps["revise"](**inputs, draft=draft, critique=crit.critique)
            result = {k: _plain(pred[k]) for k in self.sig.output_names}
        return result


def normalise_answer(value: Any) -> str:
    """Canonical text for voting: lower case, no surrounding punctuation, numbers in one form; for a code
    answer, the syntax tree of its definitions (comments, docstrings, blank lines and test prints do not
    split a vote between two copies of the same program)."""
    import ast
    import re

    raw = str(value)
    fences = re.findall(r"```[A-Za-z0-9_+-]*[ \t]*\n(.*?)(?:```|$)", raw, re.S)
    if fences or re.search(r"^\s*(?:def|class)\s+\w+", raw, re.M):
        try:
            tree = ast.parse(fences[-1] if fences else raw)
        except (SyntaxError, ValueError):
            tree = None
        if tree is not None:
            kept = [n for n in tree.body if isinstance(n, ast.Import | ast.ImportFrom | ast.FunctionDef
                                                        | ast.AsyncFunctionDef | ast.ClassDef)]
            for node in ast.walk(ast.Module(body=kept, type_ignores=[])):
                body = getattr(node, "body", None)
                if isinstance(body, list) and body and isinstance(body[0], ast.Expr) and \
                        isinstance(getattr(body[0], "value", None), ast.Constant) and \
                        isinstance(body[0].value.value, str):
                    node.body = body[1:] or [ast.Pass()]  # type: ignore[attr-defined]
            if kept:
                return "code:" + ast.dump(ast.Module(body=kept, type_ignores=[]), annotate_fields=False)
    text = " ".join(raw.strip().lower().split()).strip(" .!\"'`")
    try:
        num = float(text.replace(",", "").replace("$", ""))
        return str(int(num)) if num.is_integer() else str(num)
    except ValueError:
        return text


def format_messages(entries: list[tuple[str, dict[str, Any]]]) -> str:
    """Predecessor outputs as the text an agent reads in its ``messages`` field."""
    if not entries:
        return "(no messages yet)"
    blocks = []
    for who, outputs in entries:
        body = "\n".join(f"{k}: {v}" for k, v in outputs.items())
        blocks.append(f"[{who}]\n{body}")
    return "\n\n".join(blocks)


class CompiledSystem:
    """A runnable config genome: call it with the genome's input fields."""

    def __init__(self, genome: Genome, client: LMClient) -> None:
        validate(genome)
        self.genome = genome
        self.client = client
        self.plan = execution_plan(genome)
        self.runners = {a.id: _AgentRunner(genome, a, client) for a in genome.agents}
        self.edges = agent_edges(genome)

    def __call__(self, **inputs: Any) -> SystemResult:
        missing = [f for f in self.genome.inputs if f not in inputs]
        if missing:
            raise GenomeError(f"genome '{self.genome.name}' needs input '{missing[0]}' "
                              f"(inputs: {', '.join(self.genome.inputs)})")
        with recording() as trace:
            try:
                outputs, candidates = self._run(inputs)
            except Exception as exc:
                exc.trace = trace  # type: ignore[attr-defined]  # the evaluator keeps a failure's trace
                raise
        return SystemResult(outputs=outputs, trace=trace, candidates=candidates)

    def _context(self, agent: Agent, inputs: dict[str, Any], state: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
        preds = predecessors(self.genome, agent.id)
        avail: dict[str, Any] = {}
        if "input" in preds:
            avail.update({k: inputs[k] for k in self.genome.inputs})
        entries: list[tuple[str, dict[str, Any]]] = []
        for pid in preds:
            if pid == "input":
                continue
            for copy, out in enumerate(state.get(pid, [])):
                label = pid if len(state[pid]) == 1 else f"{pid}#{copy + 1}"
                entries.append((label, out))
                for k, v in out.items():
                    avail.setdefault(k, v)
        avail[MESSAGES_INPUT] = format_messages(entries)
        needed = self.runners[agent.id].sig.input_names
        return {k: avail.get(k, "(not available yet)") for k in needed}

    def _run_agent(self, agent: Agent, ctx: dict[str, Any], round_: int) -> list[dict[str, Any]]:
        runner = self.runners[agent.id]

        def one(copy: int) -> dict[str, Any]:
            with agent_call(agent.id, agent.module, copy=copy, round=round_, inputs=ctx) as call:
                out = runner(ctx, sample=copy + 1000 * round_)
                call.outputs = out
                return out

        if agent.copies == 1:
            return [one(0)]
        results: list[dict[str, Any] | BaseException] = []
        with ThreadPoolExecutor(max_workers=min(agent.copies, 8)) as pool:
            futures = [pool.submit(contextvars.copy_context().run, one, c) for c in range(agent.copies)]
            for fut in futures:
                try:
                    results.append(fut.result())
                except BaseException as exc:  # noqa: BLE001 - collected, re-raised below if all failed
                    results.append(exc)
        for r in results:
            if isinstance(r, BudgetExceeded):
                raise r
        ok = [r for r in results if isinstance(r, dict)]
        if not ok:
            raise results[0]  # type: ignore[misc]
        return ok

    def _run(self, inputs: dict[str, Any]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        state: dict[str, list[dict[str, Any]]] = {}
        for comp in self.plan:
            rounds = self.genome.topology.rounds if is_cyclic(comp, self.edges) else 1
            for r in range(rounds):
                snapshot = {k: list(v) for k, v in state.items()}
                for aid in comp:
                    agent = self.genome.agent(aid)
                    view = state
                    if self.genome.topology.message_passing == "synchronous":
                        # Inside the cycle, agents only see the previous round.
                        view = {k: v for k, v in state.items() if k not in comp}
                        view.update({k: snapshot[k] for k in comp if k in snapshot})
                    ctx = self._context(agent, inputs, view)
                    state[aid] = self._run_agent(agent, ctx, r)
        feeders = [a.id for a in self.genome.agents if (a.id, "output") in set(self.genome.topology.edges)]
        candidates = [out for aid in feeders for out in state.get(aid, [])]
        if not candidates:
            raise SystemRunError(f"genome '{self.genome.name}': no agent produced an answer")
        return self._aggregate(inputs, feeders, state, candidates), candidates

    def _aggregate(self, inputs: dict[str, Any], feeders: list[str], state: dict[str, list[dict[str, Any]]],
                   candidates: list[dict[str, Any]]) -> dict[str, Any]:
        outs = self.genome.outputs
        topo = self.genome.topology
        if topo.aggregation == "majority_vote":
            keys = [normalise_answer(c.get(outs[0], "")) for c in candidates]
            winner = Counter(keys).most_common(1)[0][0]
            chosen = candidates[keys.index(winner)]
        elif topo.aggregation == "judge" and topo.judge:
            judge = self.genome.agent(topo.judge)
            entries = []
            for aid in feeders:
                for copy, out in enumerate(state.get(aid, [])):
                    entries.append((aid if len(state[aid]) == 1 else f"{aid}#{copy + 1}", out))
            avail = {**{k: inputs[k] for k in self.genome.inputs}, JUDGE_INPUT: format_messages(entries)}
            needed = self.runners[judge.id].sig.input_names
            chosen = self._run_agent(judge, {k: avail.get(k, "") for k in needed}, 0)[0]
        else:
            chosen = candidates[-1]
        return {k: chosen.get(k, "") for k in outs}


def compile_genome(genome: Genome, client: LMClient) -> Callable[..., SystemResult]:
    """A callable system for ``genome`` (config: dspy modules; code: the sandboxed forward)."""
    if genome.kind == "code":
        return CodeSystem(genome, client)
    return CompiledSystem(genome, client)
