"""A dspy LM that sends each call the way masforge's LM client does (the LM of an exported system)."""

from __future__ import annotations

from typing import Any

import dspy

from masforge.standalone.connect import completion_request, connect, quiet_litellm


class LiteLLM(dspy.BaseLM):
    """A dspy LM calling ``litellm.completion`` as masforge does: no response cache, unknown provider parameters
    dropped, the sample index (dspy's ``rollout_id``) as the provider seed when sampling.

    ``model`` is a litellm model string or ``local`` (masforge's embedded model, started through masforge when
    it is installed). ``adapter`` is the LM configuration's prompt adapter choice: ``auto`` means ``plain`` on
    the embedded model and ``chat`` elsewhere; an agent's own choice wins.
    """

    def __init__(self, model: str = "local", *, api_base: str | None = None, api_key: str | None = None,
                 api_key_env: str | None = None, temperature: float = 0.7, max_tokens: int = 1024, seed: int = 0,
                 timeout_s: float = 180.0, retries: int = 4, adapter: str = "auto", **extra: Any) -> None:
        litellm_model, base, key, local = connect(model, api_base=api_base, api_key=api_key, api_key_env=api_key_env)
        super().__init__(model=litellm_model, temperature=temperature, max_tokens=max_tokens, cache=False,
                         num_retries=0)
        self.api_base = base
        self.api_key = key
        self.is_local = local
        self.adapter = adapter
        self.seed = seed
        self.timeout_s = timeout_s
        self.retries = retries
        self.extra = extra

    def forward(self, prompt: str | None = None, messages: list[dict[str, Any]] | None = None,
                **kwargs: Any) -> Any:
        merged = {**self.kwargs, **kwargs}
        msgs = messages if messages is not None else [{"role": "user", "content": prompt or ""}]
        request = completion_request(
            self.model, msgs, temperature=merged.get("temperature"), max_tokens=merged.get("max_tokens"),
            api_base=self.api_base, api_key=self.api_key, timeout_s=self.timeout_s, num_retries=self.retries,
            extra=self.extra, response_format=merged.get("response_format"), seed=self.seed,
            sample=int(merged.get("rollout_id") or 0), stop=merged.get("stop") or ())
        return quiet_litellm().completion(**request)
