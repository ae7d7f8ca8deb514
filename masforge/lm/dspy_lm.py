"""The bridge from dspy to :class:`masforge.lm.client.LMClient`: every dspy module call goes through masforge's
cache, retries, concurrency limits, cost ledger, budgets and trace."""

from __future__ import annotations

import warnings
from types import SimpleNamespace
from typing import Any

import dspy
from dspy.utils.callback import with_callbacks

from masforge.lm.client import LMClient

# dspy 3.4 marks the BaseLM.forward() interface as deprecated (removal in 3.5; we pin <3.5).
warnings.filterwarnings("ignore", message=".*BaseLM.forward\\(\\) or aforward\\(\\) is deprecated.*")


_DSPY_CALL = dspy.BaseLM.__call__.__wrapped__  # dspy's own call path, without a second round of callbacks


class MasforgeLM(dspy.BaseLM):
    """A dspy LM bound to one alias of an :class:`LMClient` (and optionally a sample index)."""

    def __init__(self, client: LMClient, alias: str = "worker", *, temperature: float | None = None,
                 sample: int = 0) -> None:
        cfg = client.config(alias)
        super().__init__(model=f"masforge/{alias}", temperature=temperature if temperature is not None
                         else cfg.temperature, max_tokens=cfg.max_tokens, cache=False, num_retries=0)
        self.client = client
        self.alias = alias
        self.sample = sample
        # What the agents' ``auto`` prompt adapter resolves against (masforge.standalone.system).
        self.adapter = cfg.adapter
        self.is_local = cfg.is_local

    @with_callbacks
    def __call__(self, prompt: Any = None, *, messages: list[dict[str, Any]] | None = None, **kwargs: Any) -> Any:
        """The outputs dspy's adapters read, straight from :meth:`forward` when dspy keeps no history (masforge's
        compiled systems: they trace every call themselves). dspy's general call path (request preparation,
        engine selection, retries, pricing) was a tenth of the CPU of an LM call with 64 in flight
        (bench/concurrency.py); masforge's client does the retries and the pricing. An explicit lm15 request,
        or a run that keeps dspy's history, takes dspy's own path."""
        if "request" in kwargs or not isinstance(prompt, str | None) or not dspy.settings.disable_history:
            return _DSPY_CALL(self, prompt, messages=messages, **kwargs)
        options = {k: v for k, v in kwargs.items() if k != "cache"}
        raw = self.forward(prompt=prompt, messages=messages, **options)
        if not raw.cache_hit and dspy.settings.usage_tracker:
            dspy.settings.usage_tracker.add_usage(self.model, dict(raw.usage))
        return self._process_completion(raw, {**self.kwargs, **options})

    def forward(self, prompt: str | None = None, messages: list[dict[str, Any]] | None = None,
                **kwargs: Any) -> Any:
        msgs = messages if messages is not None else [{"role": "user", "content": prompt or ""}]
        merged = {**self.kwargs, **kwargs}
        sample = self.sample + int(merged.get("rollout_id") or 0)
        c = self.client.complete(msgs, alias=self.alias, temperature=merged.get("temperature"),
                                 max_tokens=merged.get("max_tokens"), sample=sample,
                                 response_format=merged.get("response_format"), stop=merged.get("stop"))
        usage = {"prompt_tokens": c.prompt_tokens, "completion_tokens": c.completion_tokens,
                 "total_tokens": c.prompt_tokens + c.completion_tokens}
        message = SimpleNamespace(content=c.text, tool_calls=None, reasoning_content=None)
        choice = SimpleNamespace(message=message, finish_reason="stop", logprobs=None)
        return SimpleNamespace(choices=[choice], usage=usage, model=c.model, cache_hit=c.cached,
                               _hidden_params={"response_cost": c.cost})
