"""How a config genome runs: its agents' dspy steps, message passing, copies and aggregation.

masforge (``masforge.execution.compile``) and every exported module run systems with this code. The semantics
(documented in docs/genome.md):

* The agents' graph is condensed into strongly connected components that run in topological order
  (ties: the order agents are listed in). A cyclic component (debate, critique loops) runs ``rounds``
  rounds; ``sequential`` message passing lets an agent see this round's earlier outputs, ``synchronous``
  only the previous round's.
* An agent reads the genome inputs if an edge comes from ``input``, and ``messages``: the latest outputs of
  its agent predecessors as text. Outputs of predecessors are also readable by field name.
* ``copies: k`` runs k independent samples of an agent in parallel; sample index ``copy + 1000 * round``
  reaches the LM as dspy's ``rollout_id`` (masforge turns it into the provider seed when sampling). Copies
  on a greedy LM sample at :data:`COPIES_TEMPERATURE`, else every copy would give the same answer.
* The candidates are the outputs of every copy of every agent with an edge to ``output``; ``aggregation``
  picks the answer: ``last`` (the last candidate), ``majority_vote`` (most common normalised first output
  field), ``run_examples`` (the vote among the candidates whose code passes the most examples the inputs
  state, run with the ``python`` tool; see :mod:`.examples`) or ``judge`` (a judge agent reads the inputs and
  all candidates).
* An ``execute`` node calls no LM: it runs the code of its agent predecessors' answers (every copy) against the
  examples the question states and the ``assert`` lines test-writing predecessors wrote in a ``tests`` field
  (:mod:`.execute`), passes on the candidate that passes the most (stated examples first; then the vote among
  those; then the newest; then the earliest listed) with a ``verdict`` (``pass``: it passed every check, or
  there were none) and a ``report``. In a cycle it keeps its previous pick among the candidates, so a repair
  that makes things worse never displaces a better answer.
* A conditional edge (``conditions``: ``"check -> repairer": "fail"``) carries anything only while its source's
  verdict is the one named. An agent with conditional edges in runs only when one of them carries; an agent
  whose agent predecessors were all skipped is skipped; a skipped agent keeps no output. A cyclic component
  ends early when, after a round, none of its LM agents would run again, and in its last round an agent with
  conditional edges in does not run when nothing after it would read its output. Candidates come only
  through edges to ``output`` that carry.
* An agent talks to its LM through a prompt adapter: its own ``adapter`` choice, else (``auto``) the LM's
  (an LM object may carry ``adapter`` and ``is_local`` attributes; ``auto`` is ``plain`` on the embedded
  model and ``chat`` elsewhere).
"""

from __future__ import annotations

import contextlib
import contextvars
import re
import warnings
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, NamedTuple

import dspy

from masforge.genome.names import (
    EXECUTE_MODULE,
    JUDGE_INPUT,
    MESSAGES_INPUT,
    REPORT_FIELD,
    TESTS_FIELD,
    TOOL_ARG,
    VERDICT_FIELD,
)
from masforge.standalone.adapters import choose_adapter, make_adapter
from masforge.standalone.examples import passed_counts
from masforge.standalone.execute import CheckRun, Checks, check_report, gather_checks, run_checks
from masforge.standalone.prompts import render_prompt

# Custom dspy LMs (masforge's, the export's) implement forward(): dspy 3.4 marks that interface deprecated (removal
# in 3.5; masforge pins <3.5). A sample index on a greedy LM is expected (copies sample only when they need to).
warnings.filterwarnings("ignore", message=".*BaseLM.forward\\(\\) or aforward\\(\\) is deprecated.*")
warnings.filterwarnings("ignore", message="rollout_id has no effect when temperature=0.*")

COPIES_TEMPERATURE = 0.7
"""Temperature of an agent's copies when neither the agent nor its LM sets one above 0."""
NOT_AVAILABLE = "(not available yet)"

ToolFn = Callable[[str], str]
TraceHook = Callable[..., Any]
"""hook(agent_id, module, copy=, round=, inputs=) -> a context manager around one agent call; if it yields an
object, the agent's outputs are set as its ``.outputs``."""

# The dspy module class of each step of each module kind.
STEP_MODULES: dict[str, dict[str, str]] = {
    "predict": {"main": "Predict"},
    "chain_of_thought": {"main": "ChainOfThought"},
    "react": {"main": "ReAct"},
    "program_of_thought": {"write": "Predict", "answer": "Predict"},
    "refine": {"main": "ChainOfThought", "critique": "Predict", "revise": "Predict"},
    EXECUTE_MODULE: {},  # runs code, no dspy module
}


class SystemRunError(RuntimeError):
    """The system produced no answer (no agent with an edge to output produced one)."""


class SignatureError(ValueError):
    """A signature dspy does not accept."""


# Plain named tuples, not dataclasses: an exported module must also work when loaded without a sys.modules
# entry (importlib's spec_from_file_location), where dataclasses cannot resolve string annotations.
class AgentSpec(NamedTuple):
    """One agent as it runs: module kind, dspy signature text, full instructions (role line included), the
    LM alias it uses, and its sampling, tool, copy, iteration and prompt-adapter settings."""

    id: str
    module: str
    signature: str
    instructions: str
    inputs: list[str]
    outputs: list[str]
    tools: list[str]
    lm: str = "worker"
    temperature: float | None = None
    copies: int = 1
    max_iters: int = 3
    adapter: str = "auto"
    unchecked: str = "pass"
    """An execute node's verdict when there is nothing to run."""


class SystemSpec(NamedTuple):
    """A whole system as it runs: agents, who reads whom, the execution plan and the aggregation."""

    name: str
    inputs: list[str]
    outputs: list[str]
    agents: dict[str, AgentSpec]
    predecessors: dict[str, list[str]]
    plan: list[tuple[list[str], bool]]
    """Strongly connected components in the order they run; a cyclic one (True) runs ``rounds`` rounds."""
    output_agents: list[str]
    rounds: int = 1
    message_passing: str = "sequential"
    aggregation: str = "last"
    judge: str | None = None
    conditions: dict[str, str] | None = None
    """Conditional edges: ``"a -> b"`` -> the verdict of execute node ``a`` under which the edge carries."""

    def needed_tools(self) -> list[str]:
        """Tools the system calls (program_of_thought, execute nodes and ``run_examples`` run programs with
        ``python``)."""
        names = {t for a in self.agents.values() for t in a.tools}
        if any(a.module in ("program_of_thought", EXECUTE_MODULE) for a in self.agents.values()) or \
                self.aggregation == "run_examples":
            names.add("python")
        return sorted(names)


# ------------------------------------------------------------------------------------------------
# values and messages


def plain_value(value: Any) -> Any:
    """An output value as plain data (strings, numbers, bools, lists; anything else as text)."""
    if isinstance(value, str | int | float | bool) or value is None:
        return value
    if isinstance(value, list):
        return [plain_value(v) for v in value]
    return str(value)


def normalise_answer(value: Any) -> str:
    """Canonical text for voting: lower case, no surrounding punctuation, numbers in one form; for a code
    answer, the syntax tree of its definitions (comments, docstrings, blank lines and test prints do not
    split a vote between two copies of the same program)."""
    import ast

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


def copies_temperature(agent_temperature: float | None, copies: int, lm_temperature: float | None) -> float | None:
    """The temperature an agent's calls use (None: the LM's own): its own, else :data:`COPIES_TEMPERATURE`
    for several copies on a greedy LM (independent copies of a greedy LM would all be the same answer)."""
    if agent_temperature is None and copies > 1 and not lm_temperature:
        return COPIES_TEMPERATURE
    return agent_temperature


# ------------------------------------------------------------------------------------------------
# agents


def agent_instructions(role: str, instructions: str, inputs: list[str], outputs: list[str]) -> str:
    """The docstring of an agent's dspy signature: the role line, then its instructions (or a default)."""
    default = f"Given the fields {', '.join(inputs)}, produce the fields {', '.join(outputs)}."
    parts = [render_prompt("agent_role", role=role)] if role else []
    parts.append(instructions.strip() or default)
    return " ".join(p for p in parts if p)


def _with_fields(inputs: list[str], extra_in: list[str], outputs: str) -> str:
    ins = [*inputs, *[f for f in extra_in if f not in inputs]]
    return f"{', '.join(ins)} -> {outputs}"


def agent_steps(spec: AgentSpec) -> dict[str, tuple[str, str]]:
    """Each dspy step of an agent: step name -> (signature text, instructions)."""
    outs = spec.signature.split("->", 1)[1].strip()
    instr = spec.instructions
    if spec.module == EXECUTE_MODULE:
        return {}
    if spec.module in ("predict", "chain_of_thought", "react"):
        return {"main": (spec.signature, instr)}
    if spec.module == "program_of_thought":
        return {"write": (_with_fields(spec.inputs, ["feedback"], "code"), f"{instr} {render_prompt('pot_write')}"),
                "answer": (_with_fields(spec.inputs, ["code", "code_output"], outs),
                           f"{instr} {render_prompt('pot_answer')}")}
    if spec.module == "refine":
        return {"main": (spec.signature, instr),
                "critique": (_with_fields(spec.inputs, ["draft"], "critique, is_correct: bool"),
                             render_prompt("refine_critique")),
                "revise": (_with_fields(spec.inputs, ["draft", "critique"], outs),
                           f"{instr} {render_prompt('refine_revise')}")}
    raise ValueError(f"agent {spec.id!r}: unknown module kind {spec.module!r}")


def make_signature(text: str, instructions: str) -> Any:
    """``dspy.Signature(text, instructions)``; a signature dspy rejects raises :class:`SignatureError`."""
    try:
        return dspy.Signature(text, instructions)
    except Exception as exc:
        raise SignatureError(f"signature '{text}' is not accepted by dspy: {exc}") from None


def safe_tool(fn: ToolFn) -> ToolFn:
    """A tool that returns its error as the observation instead of raising."""

    def call(arg: str) -> str:
        try:
            return str(fn(str(arg)))
        except Exception as exc:
            return f"error: {type(exc).__name__}: {exc}"

    return call


class AgentProgram:
    """One agent's dspy module(s), called with a dict of inputs under an LM and a prompt adapter."""

    def __init__(self, spec: AgentSpec, tools: dict[str, ToolFn], descriptions: dict[str, str]) -> None:
        self.spec = spec
        self.tools = tools
        self.steps: dict[str, dspy.Module] = {}
        for name, (text, instructions) in agent_steps(spec).items():
            signature = make_signature(text, instructions)
            kind = STEP_MODULES[spec.module][name]
            if kind == "ReAct":
                react_tools = [dspy.Tool(safe_tool(tools[t]), name=t, desc=descriptions[t],
                                         args={TOOL_ARG: {"type": "string"}}) for t in spec.tools]
                self.steps[name] = dspy.ReAct(signature, tools=react_tools, max_iters=spec.max_iters)
            else:
                self.steps[name] = getattr(dspy, kind)(signature)

    def __call__(self, inputs: dict[str, Any], lm: Any, adapter: Any) -> dict[str, Any]:
        with dspy.context(lm=lm, adapter=adapter):
            if self.spec.module == "program_of_thought":
                return self._program_of_thought(inputs)
            if self.spec.module == "refine":
                return self._refine(inputs)
            pred = self.steps["main"](**inputs)
        # Keep the reasoning next to the outputs: debaters and judges read it in their messages.
        extra = {"reasoning": plain_value(pred["reasoning"])} if "reasoning" in pred.keys() else {}
        return {**extra, **{k: plain_value(pred[k]) for k in self.spec.outputs}}

    def _program_of_thought(self, inputs: dict[str, Any]) -> dict[str, Any]:
        python = safe_tool(self.tools["python"])
        feedback, code, output = "none", "", ""
        for _ in range(self.spec.max_iters):
            code = str(self.steps["write"](**inputs, feedback=feedback).code)
            code = re.sub(r"^```(?:python)?\s*|\s*```\s*$", "", code.strip())
            output = python(code)
            if "error (" not in output:
                break
            feedback = f"The previous program failed: {output[-500:]}"
        pred = self.steps["answer"](**inputs, code=code, code_output=output)
        return {k: plain_value(pred[k]) for k in self.spec.outputs}

    def _refine(self, inputs: dict[str, Any]) -> dict[str, Any]:
        pred = self.steps["main"](**inputs)
        result = {k: plain_value(pred[k]) for k in self.spec.outputs}
        for _ in range(self.spec.max_iters - 1):
            draft = "\n".join(f"{k}: {v}" for k, v in result.items())
            crit = self.steps["critique"](**inputs, draft=draft)
            if bool(crit.is_correct):
                break
            pred = self.steps["revise"](**inputs, draft=draft, critique=crit.critique)
            result = {k: plain_value(pred[k]) for k in self.spec.outputs}
        return result


# ------------------------------------------------------------------------------------------------
# the system


class RunState:
    """What one run of a system has made so far: each agent's latest outputs and the step that made them, the
    agents skipped at their latest turn, each execute node's previous pick, and the check runs done (the same
    answer against the same checks runs once per run)."""

    def __init__(self) -> None:
        self.outputs: dict[str, list[dict[str, Any]]] = {}
        self.made: dict[str, int] = {}
        self.skipped: set[str] = set()
        self.picks: dict[str, tuple[dict[str, Any], int]] = {}
        self.checked: dict[tuple[str, tuple[str, ...], tuple[str, ...]], CheckRun] = {}
        self.step = 0


class GraphRunner:
    """Runs a :class:`SystemSpec`: ``run(**inputs)`` returns the outputs and every candidate.

    ``lm_for(alias)`` gives the dspy LM of an alias; each agent call uses a copy of it carrying the sample
    index (``rollout_id``) and the agent's temperature. ``fatal`` exception types abort the run even when
    other copies of an agent succeeded (masforge: a budget stop).
    """

    def __init__(self, spec: SystemSpec, lm_for: Callable[[str], Any], tools: dict[str, ToolFn],
                 descriptions: dict[str, str], trace_hook: TraceHook | None = None,
                 fatal: tuple[type[BaseException], ...] = ()) -> None:
        missing = [t for t in spec.needed_tools() if t not in tools]
        if missing:
            raise ValueError(f"tool {missing[0]!r} has no implementation here: "
                             f"pass build(tools={{{missing[0]!r}: fn}})")
        self.spec = spec
        self.lm_for = lm_for
        self.tools = tools
        self.trace_hook = trace_hook
        self.fatal = fatal
        self.programs = {aid: AgentProgram(a, tools, descriptions) for aid, a in spec.agents.items()}
        self.conditions = dict(spec.conditions or {})
        self.gates: dict[str, list[str]] = {}
        """Agent -> the sources of its conditional edges in."""
        for key in self.conditions:
            source, _, target = key.partition(" -> ")
            self.gates.setdefault(target, []).append(source)
        self.readers: dict[str, set[str]] = {}
        """Agent -> the agents (and ``output``) that read its outputs."""
        for aid, preds in spec.predecessors.items():
            for pid in preds:
                self.readers.setdefault(pid, set()).add(aid)
        for aid in spec.output_agents:
            self.readers.setdefault(aid, set()).add("output")
        # Without conditions or execute nodes nothing is ever skipped: such systems run exactly as they always did.
        self.controlled = bool(self.conditions) or any(a.module == EXECUTE_MODULE for a in spec.agents.values())

    def adapter_name(self, agent: AgentSpec) -> str:
        """The concrete prompt adapter ``agent`` uses with its LM."""
        lm = self.lm_for(agent.lm)
        return choose_adapter(agent.adapter, getattr(lm, "adapter", "auto"), local=bool(getattr(lm, "is_local", False)))

    def _call(self, agent: AgentSpec, ctx: dict[str, Any], sample: int) -> dict[str, Any]:
        lm = self.lm_for(agent.lm)
        temperature = copies_temperature(agent.temperature, agent.copies, lm.kwargs.get("temperature"))
        options: dict[str, Any] = {"rollout_id": sample}
        if temperature is not None:
            options["temperature"] = temperature
        return self.programs[agent.id](ctx, lm.copy(**options), make_adapter(self.adapter_name(agent)))

    def _scope(self, agent: AgentSpec, copy: int, round_: int, inputs: dict[str, Any]) -> Any:
        if self.trace_hook is None:
            return contextlib.nullcontext()
        return self.trace_hook(agent.id, agent.module, copy=copy, round=round_, inputs=inputs)

    def run_agent(self, agent: AgentSpec, ctx: dict[str, Any], round_: int) -> list[dict[str, Any]]:
        """The outputs of every copy of ``agent`` that succeeded (all failed: the first error is raised)."""

        def one(copy: int) -> dict[str, Any]:
            with self._scope(agent, copy, round_, ctx) as call:
                out = self._call(agent, ctx, sample=copy + 1000 * round_)
                if call is not None:
                    call.outputs = out
                return out

        if agent.copies == 1:
            return [one(0)]
        results: list[Any] = []
        with ThreadPoolExecutor(max_workers=min(agent.copies, 8)) as pool:
            futures = [pool.submit(contextvars.copy_context().run, one, c) for c in range(agent.copies)]
            for fut in futures:
                try:
                    results.append(fut.result())
                except BaseException as exc:  # collected; re-raised below if every copy failed
                    results.append(exc)
        for r in results:
            if isinstance(r, self.fatal):
                raise r
        ok = [r for r in results if isinstance(r, dict)]
        if not ok:
            raise results[0]
        return ok

    def context(self, agent: AgentSpec, inputs: dict[str, Any],
                state: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
        """What ``agent`` reads: the inputs (if wired from ``input``) and its predecessors' latest outputs."""
        preds = self.spec.predecessors[agent.id]
        avail: dict[str, Any] = {}
        if "input" in preds:
            avail.update({k: inputs[k] for k in self.spec.inputs})
        entries: list[tuple[str, dict[str, Any]]] = []
        for pid in preds:
            if pid == "input" or not self.carries(pid, agent.id, state):
                continue
            for copy, out in enumerate(state[pid]):
                label = pid if len(state[pid]) == 1 else f"{pid}#{copy + 1}"
                entries.append((label, out))
                for k, v in out.items():
                    avail.setdefault(k, v)
        avail[MESSAGES_INPUT] = format_messages(entries)
        return {k: avail.get(k, NOT_AVAILABLE) for k in agent.inputs}

    def carries(self, source: str, target: str, state: dict[str, list[dict[str, Any]]]) -> bool:
        """Whether the edge ``source -> target`` carries anything now: its source has outputs and, if the edge is
        conditional, the source's verdict is the one the condition names."""
        outs = state.get(source)
        if not outs:
            return False
        wanted = self.conditions.get(f"{source} -> {target}")
        return wanted is None or outs[0].get(VERDICT_FIELD) == wanted

    def may_run(self, aid: str, state: dict[str, list[dict[str, Any]]], skipped: set[str],
                comp: list[str] | None = None, rest: list[str] | None = None) -> bool:
        """Whether agent ``aid`` runs at its turn: a conditional edge into it carries (if it has any), and not every
        agent before it was skipped. ``rest`` (the last round of cyclic component ``comp``: the agents still to
        run in it) also skips an agent with conditional edges in when nothing after it would read its output."""
        gates = self.gates.get(aid)
        if gates and not any(self.carries(src, aid, state) for src in gates):
            return False
        preds = [p for p in self.spec.predecessors.get(aid, []) if p != "input"]
        if preds and all(p in skipped for p in preds):
            return False
        if gates and rest is not None:
            later = set(rest)
            return any(r == "output" or r not in (comp or []) or r in later for r in self.readers.get(aid, ()))
        return True

    def run(self, **inputs: Any) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        """The outputs and every candidate (the outputs of each copy of each agent feeding output)."""
        spec = self.spec
        run = RunState()
        state = run.outputs
        for comp, cyclic in spec.plan:
            rounds = spec.rounds if cyclic else 1
            for r in range(rounds):
                snapshot = {k: list(v) for k, v in state.items()}
                for i, aid in enumerate(comp):
                    view = state
                    if spec.message_passing == "synchronous":
                        # Inside the cycle, agents only see the previous round.
                        view = {k: v for k, v in state.items() if k not in comp}
                        view.update({k: snapshot[k] for k in comp if k in snapshot})
                    agent = spec.agents[aid]
                    rest = comp[i + 1:] if cyclic and r == rounds - 1 else None
                    if self.controlled and not self.may_run(aid, view, run.skipped, comp, rest):
                        state.pop(aid, None)
                        run.skipped.add(aid)
                        continue
                    run.skipped.discard(aid)
                    run.step += 1
                    if agent.module == EXECUTE_MODULE:
                        picked = self.execute(agent, inputs, view, run, r)
                        if picked is None:  # no answer reached it
                            state.pop(aid, None)
                            run.skipped.add(aid)
                            continue
                        state[aid] = [picked]
                    else:
                        state[aid] = self.run_agent(agent, self.context(agent, inputs, view), r)
                    run.made[aid] = run.step
                if cyclic and self.controlled and r < rounds - 1 and not any(
                        spec.agents[a].module != EXECUTE_MODULE and self.may_run(a, state, run.skipped) for a in comp):
                    break  # no LM agent of the cycle would run again (e.g. the check passed: no repair)
        candidates = [out for aid in spec.output_agents if self.carries(aid, "output", state) for out in state[aid]]
        if not candidates:
            raise SystemRunError(f"{spec.name}: no agent produced an answer")
        return self._aggregate(inputs, state, candidates), candidates

    def execute(self, agent: AgentSpec, inputs: dict[str, Any], state: dict[str, list[dict[str, Any]]],
                run: RunState, round_: int) -> dict[str, Any] | None:
        """An execute node's outputs: its pick's fields, ``verdict`` and ``report`` (None: no candidate reached it).

        Candidates: every copy's outputs of the agents before it that carry the first output field, and (in a
        cycle) its own previous pick. It picks those passing the most checks (stated examples first, then written
        tests), then the most common answer among them, then the newest, then the earliest listed."""
        spec = self.spec
        answer = spec.outputs[0]
        cands: list[tuple[dict[str, Any], int]] = []
        tests: list[str] = []
        for pid in spec.predecessors[agent.id]:
            if pid == "input" or not self.carries(pid, agent.id, state):
                continue
            for out in state[pid]:
                if answer in out:
                    cands.append((out, run.made.get(pid, 0)))
                if TESTS_FIELD in out:
                    tests.append(str(out[TESTS_FIELD]))
        previous = run.picks.get(agent.id)
        if previous is not None and not any(c is previous[0] for c, _ in cands):
            cands.insert(0, previous)
        if not cands:
            return None
        with self._scope(agent, 0, round_, self.context(agent, inputs, state)) as call:
            question = "\n\n".join(str(inputs[k]) for k in spec.inputs if k in inputs)
            checks = gather_checks(question, tests)
            runs = [self._checked(str(c.get(answer, "")), checks, run) for c, _ in cands]
            scores = [cr.score(checks) for cr in runs]
            top = [i for i, score in enumerate(scores) if score == max(scores)]
            keys = {i: normalise_answer(cands[i][0].get(answer, "")) for i in top}
            votes = Counter(keys.values())
            top = [i for i in top if votes[keys[i]] == max(votes.values())]
            newest = max(cands[i][1] for i in top)
            chosen = next(i for i in top if cands[i][1] == newest)
            pick = cands[chosen]
            run.picks[agent.id] = pick
            verdict = ("pass" if len(runs[chosen].passed) == len(checks.all) else "fail") if checks.all \
                else agent.unchecked
            out = {k: v for k, v in pick[0].items() if k not in (VERDICT_FIELD, REPORT_FIELD)}
            out.update({VERDICT_FIELD: verdict, REPORT_FIELD: check_report(runs[chosen], checks)})
            if call is not None:
                call.outputs = out
        return out

    def _checked(self, answer: str, checks: Checks, run: RunState) -> CheckRun:
        if not checks.all:
            return CheckRun(frozenset(), {})  # nothing to run
        key = (answer, tuple(checks.all), tuple(checks.imports))
        if key not in run.checked:
            run.checked[key] = run_checks(answer, checks, self.tools["python"])
        return run.checked[key]

    def _aggregate(self, inputs: dict[str, Any], state: dict[str, list[dict[str, Any]]],
                   candidates: list[dict[str, Any]]) -> dict[str, Any]:
        spec = self.spec
        if spec.aggregation == "majority_vote":
            chosen = self._vote(candidates)
        elif spec.aggregation == "run_examples":
            question = "\n\n".join(str(inputs[k]) for k in spec.inputs if k in inputs)
            answers = [str(c.get(spec.outputs[0], "")) for c in candidates]
            counts = passed_counts(answers, question, self.tools["python"]) or [0] * len(candidates)
            best = max(counts)
            chosen = self._vote([c for c, n in zip(candidates, counts, strict=True) if n == best])
        elif spec.aggregation == "judge" and spec.judge:
            entries = []
            for aid in spec.output_agents:
                if not self.carries(aid, "output", state):
                    continue
                for copy, out in enumerate(state[aid]):
                    entries.append((aid if len(state[aid]) == 1 else f"{aid}#{copy + 1}", out))
            avail = {**{k: inputs[k] for k in spec.inputs}, JUDGE_INPUT: format_messages(entries)}
            judge = spec.agents[spec.judge]
            chosen = self.run_agent(judge, {k: avail.get(k, "") for k in judge.inputs}, 0)[0]
        else:
            chosen = candidates[-1]
        return {k: chosen.get(k, "") for k in spec.outputs}

    def _vote(self, candidates: list[dict[str, Any]]) -> dict[str, Any]:
        """The candidate whose first output is the most common after normalisation (ties: the earliest)."""
        keys = [normalise_answer(c.get(self.spec.outputs[0], "")) for c in candidates]
        winner = Counter(keys).most_common(1)[0][0]
        return candidates[keys.index(winner)]


class System(dspy.Module):
    """A system as a dspy module: call it with the input fields, get a dspy.Prediction (``run`` also gives
    the candidates)."""

    def __init__(self, spec: SystemSpec, lm: Any = None, lms: dict[str, Any] | None = None,
                 tools: dict[str, ToolFn] | None = None, descriptions: dict[str, str] | None = None,
                 trace_hook: TraceHook | None = None, fatal: tuple[type[BaseException], ...] = ()) -> None:
        super().__init__()
        self.spec = spec
        self.default_lm = lm
        self.lms = dict(lms or {})
        self.runner = GraphRunner(spec, self._lm, dict(tools or {}), dict(descriptions or {}), trace_hook, fatal)

    def _lm(self, alias: str) -> Any:
        lm = self.lms.get(alias) or self.default_lm or dspy.settings.lm
        if lm is None:
            raise ValueError("no LM: pass build(lm=...) or call dspy.configure(lm=...) first")
        return lm

    def run(self, **inputs: Any) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        """The outputs and every candidate (the outputs of each copy of each agent feeding output)."""
        missing = [f for f in self.spec.inputs if f not in inputs]
        if missing:
            raise TypeError(f"{self.spec.name} needs input {missing[0]!r} (inputs: {', '.join(self.spec.inputs)})")
        return self.runner.run(**inputs)

    def forward(self, **inputs: Any) -> dspy.Prediction:
        outputs, _ = self.run(**inputs)
        return dspy.Prediction(**outputs)
