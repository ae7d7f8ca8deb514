"""Code genomes: an ADAS-style ``forward(inputs)`` written by a meta-agent, run only in the sandbox.

Inside the sandbox the code sees two functions, served by the parent over the sandbox's RPC channel
(so keys, cost accounting and budgets stay in the parent):

* ``llm(prompt, system=None, temperature=None, lm="worker", sample=0) -> str``
* ``tool(name, arg) -> str`` for any registered tool (``calculator``, ``python``, ...). Unlike ``llm()``,
  time spent in a tool counts against the run's wall clock (a tool is served in a thread while the
  sandbox keeps the clock, so a slow tool ends the run as a timeout), and calls are capped per run.

``forward`` returns a dict of the genome's outputs (a plain string is accepted when there is one output).
"""

from __future__ import annotations

from typing import Any

from masforge.errors import BudgetExceeded, GenomeError, MasforgeError
from masforge.execution.result import SystemResult, SystemRunError
from masforge.genome.schema import Genome
from masforge.genome.validate import validate
from masforge.lm.client import LMClient
from masforge.lm.trace import agent_call, recording
from masforge.sandbox.runner import SandboxLimits, run_python
from masforge.sandbox.tools import get_tool
from masforge.standalone.code_system import (
    MAX_LLM_CALLS_PER_RUN,
    MAX_TOOL_CALLS_PER_RUN,
    forward_outputs,
    llm_messages,
)

RPC_NAMES = ("llm", "tool")
TIMED_RPC_NAMES = ("tool",)


class CodeSystem:
    """A runnable code genome: each call runs ``forward`` in a fresh sandboxed process."""

    def __init__(self, genome: Genome, client: LMClient, limits: SandboxLimits | None = None, *,
                 validated: bool = False) -> None:
        if not validated:
            validate(genome)
        self.genome = genome
        self.client = client
        self.limits = limits or SandboxLimits(timeout_s=60.0, memory_mb=1024)

    def _handler(self, counter: list[int]) -> Any:
        tool_calls = [0]

        def rpc(method: str, payload: dict[str, Any]) -> Any:
            args, kwargs = payload.get("args", []), payload.get("kwargs", {})
            if method == "tool":
                tool_calls[0] += 1
                if tool_calls[0] > MAX_TOOL_CALLS_PER_RUN:
                    raise RuntimeError(f"more than {MAX_TOOL_CALLS_PER_RUN} tool() calls in one forward()")
                name, arg = (list(args) + [kwargs.get("name"), kwargs.get("arg")])[:2] if args else (
                    kwargs.get("name"), kwargs.get("arg"))
                return get_tool(str(name))(str(arg))
            counter[0] += 1
            if counter[0] > MAX_LLM_CALLS_PER_RUN:
                raise RuntimeError(f"more than {MAX_LLM_CALLS_PER_RUN} llm() calls in one forward()")
            names = ["prompt", "system", "temperature", "lm", "sample"]
            call = dict(zip(names, args, strict=False)) | kwargs
            unknown = set(call) - set(names)
            if unknown:
                raise TypeError(f"llm() got unexpected argument {sorted(unknown)[0]!r}")
            temp = call.get("temperature")
            messages = llm_messages(call.get("prompt", ""), call.get("system"))
            return self.client.complete(messages, alias=str(call.get("lm") or "worker"),
                                        temperature=float(temp) if temp is not None else None,
                                        sample=int(call.get("sample") or 0)).text
        return rpc

    def __call__(self, **inputs: Any) -> SystemResult:
        missing = [f for f in self.genome.inputs if f not in inputs]
        if missing:
            raise GenomeError(f"genome '{self.genome.name}' needs input '{missing[0]}'")
        counter = [0]
        with recording() as trace, agent_call("forward", "code", inputs=inputs) as call:
            res = run_python(self.genome.code or "", entry="forward", args=[inputs], limits=self.limits,
                             rpc=self._handler(counter), rpc_names=RPC_NAMES, timed_rpc_names=TIMED_RPC_NAMES)
            if not res.ok:
                tb = (res.traceback or "").strip().splitlines()[-3:]
                detail = f" | {' / '.join(tb)}" if tb else ""
                raise SystemRunError(f"code genome failed ({res.error_kind}): {res.error}{detail}"[:800])
            try:
                call.outputs = forward_outputs(res.value, self.genome.outputs)
            except ValueError as exc:
                raise SystemRunError(str(exc)) from None
        return SystemResult(outputs=dict(call.outputs), trace=trace, candidates=[dict(call.outputs)])


__all__ = ["MAX_LLM_CALLS_PER_RUN", "MAX_TOOL_CALLS_PER_RUN", "RPC_NAMES", "BudgetExceeded", "CodeSystem",
           "MasforgeError"]
