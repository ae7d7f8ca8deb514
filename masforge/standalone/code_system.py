"""Running a code genome's ``forward(inputs)`` with ``llm()`` and ``tool()``.

The rules (how ``llm()`` builds its messages, how many calls a run may make, what ``forward`` must return)
are masforge's: its sandbox (:mod:`masforge.execution.code`) applies them too. :class:`CodeSystem` is the export's
way of running the code: in this process, in a namespace of its own, so only inside a sandbox.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from masforge.standalone.connect import completion_request, connect, quiet_litellm

MAX_LLM_CALLS_PER_RUN = 50
MAX_TOOL_CALLS_PER_RUN = 50

CodeToolFn = Callable[[str], str]
Complete = Callable[[list[dict[str, Any]], float, int, str], str]
"""complete(messages, temperature, sample, lm_alias) -> reply text: the LM behind llm()."""


def llm_messages(prompt: Any, system: Any = None) -> list[dict[str, Any]]:
    """The chat messages of ``llm(prompt, system=...)``."""
    messages = [{"role": "system", "content": str(system)}] if system else []
    messages.append({"role": "user", "content": str(prompt)})
    return messages


def forward_outputs(value: Any, outputs: list[str]) -> dict[str, Any]:
    """The outputs from what ``forward`` returned (a string stands for the only output); ValueError if it
    returned something else or missed an output."""
    if isinstance(value, str) and len(outputs) == 1:
        value = {outputs[0]: value}
    if not isinstance(value, dict):
        raise ValueError(f"forward() must return a dict with {outputs}, got {type(value).__name__}")
    absent = [k for k in outputs if k not in value]
    if absent:
        raise ValueError(f"forward() returned no '{absent[0]}' (outputs: {outputs})")
    return {k: value[k] for k in outputs}


def litellm_complete(model: str = "local", *, api_base: str | None = None, api_key: str | None = None,
                     api_key_env: str | None = None, max_tokens: int = 1024, seed: int = 0, timeout_s: float = 180.0,
                     retries: int = 4, **extra: Any) -> Complete:
    """An llm() backend calling ``litellm.completion`` the way masforge does (``local``: masforge's embedded
    model, started through masforge)."""
    litellm_model, base, key, _ = connect(model, api_base=api_base, api_key=api_key, api_key_env=api_key_env)

    def complete(messages: list[dict[str, Any]], temperature: float, sample: int, alias: str) -> str:
        request = completion_request(litellm_model, messages, temperature=temperature, max_tokens=max_tokens,
                                     api_base=base, api_key=key, timeout_s=timeout_s, num_retries=retries,
                                     extra=extra, seed=seed, sample=sample)
        return quiet_litellm().completion(**request).choices[0].message.content or ""

    return complete


class CodeSystem:
    """Runs ``code``'s ``forward(inputs)`` with ``llm()`` and ``tool()`` bound to an LM backend and tools."""

    def __init__(self, code: str, name: str, inputs: list[str], outputs: list[str], complete: Complete,
                 temperature: float = 0.7, tools: dict[str, CodeToolFn] | None = None) -> None:
        self.code = code
        self.name = name
        self.inputs = inputs
        self.outputs = outputs
        self.complete = complete
        self.temperature = temperature
        self.tools: dict[str, CodeToolFn] = dict(tools or {})
        self._lock = threading.Lock()

    def __call__(self, **inputs: Any) -> dict[str, Any]:
        missing = [f for f in self.inputs if f not in inputs]
        if missing:
            raise TypeError(f"{self.name} needs input {missing[0]!r} (inputs: {', '.join(self.inputs)})")
        calls = {"llm": 0, "tool": 0}

        def count(kind: str, limit: int) -> None:
            with self._lock:
                calls[kind] += 1
                if calls[kind] > limit:
                    raise RuntimeError(f"more than {limit} {kind}() calls in one forward()")

        def llm(prompt: str, system: str | None = None, temperature: float | None = None, lm: str = "worker",
                sample: int = 0) -> str:
            count("llm", MAX_LLM_CALLS_PER_RUN)
            temp = self.temperature if temperature is None else float(temperature)
            return self.complete(llm_messages(prompt, system), temp, int(sample or 0), str(lm or "worker"))

        def tool(name: str, arg: str) -> str:
            count("tool", MAX_TOOL_CALLS_PER_RUN)
            fn = self.tools.get(str(name))
            if fn is None:
                raise RuntimeError(f"unknown tool {name!r} (known: {', '.join(sorted(self.tools))})")
            try:
                return str(fn(str(arg)))
            except Exception as exc:
                return f"error: {type(exc).__name__}: {exc}"

        namespace: dict[str, Any] = {"__name__": "__sandbox__", "llm": llm, "tool": tool}
        exec(compile(self.code, "<code>", "exec"), namespace)  # the machine-written code runs here
        value = namespace["forward"](dict(inputs))
        try:
            return forward_outputs(value, self.outputs)
        except ValueError as exc:
            raise RuntimeError(str(exc)) from None
