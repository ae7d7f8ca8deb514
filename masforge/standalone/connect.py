"""Reaching an LM: where a model string points, which API key it needs, and the litellm request masforge sends.

``local`` (or ``local:<name>``) is masforge's embedded model: where masforge is installed its llama.cpp server is
started through it; elsewhere :class:`LMSetupError` says in one line how to run it. A hosted model without its
API key is refused before any call, in one line naming the variable (no provider banners, no retries).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

# API-key environment variables by provider prefix, to say which one is missing.
KEY_ENV = {
    "openai": "OPENAI_API_KEY", "anthropic": "ANTHROPIC_API_KEY", "gemini": "GEMINI_API_KEY",
    "groq": "GROQ_API_KEY", "mistral": "MISTRAL_API_KEY", "together_ai": "TOGETHERAI_API_KEY",
    "deepseek": "DEEPSEEK_API_KEY", "openrouter": "OPENROUTER_API_KEY",
}
KEYLESS_PREFIXES = ("ollama", "ollama_chat", "hosted_vllm", "lm_studio", "llamafile")
PLACEHOLDER_KEY = "sk-none"
"""Sent to an OpenAI-compatible server when no key is set: local servers want some key, and check none."""
OPENAI_COMPATIBLE_HINT = "--model openai/<name> --api-base http://HOST:PORT/v1 (any OpenAI-compatible server)"


class LMSetupError(RuntimeError):
    """The LM cannot be reached as configured; the message is one line saying what to do."""


def is_local_model(model: str) -> bool:
    """True for masforge's embedded model (``local`` or ``local:<name>``)."""
    return model == "local" or model.startswith("local:")


def default_sampling(model: str) -> tuple[float, int]:
    """(temperature, max_tokens) an LM gets unless told otherwise: greedy on the embedded model (a 0.5B model is
    at its best greedy, and reruns give the same answers), 0.7 elsewhere."""
    if is_local_model(model) or model == "fake" or model.startswith("fake:"):
        return 0.0, 1024
    return 0.7, 1024


def missing_key_env(model: str, api_base: str | None = None, api_key_env: str | None = None) -> str | None:
    """The environment variable a hosted ``model`` needs for its API key, if it is not set (else None); a
    variable named by ``api_key_env`` is needed wherever the model is served."""
    if is_local_model(model) or model == "fake" or model.startswith("fake:"):
        return None
    if api_key_env and not os.environ.get(api_key_env):
        return api_key_env
    if api_base:
        return None
    provider = model.split("/", 1)[0]
    if provider in KEYLESS_PREFIXES:
        return None
    env = api_key_env or KEY_ENV.get(provider)
    return env if env and not os.environ.get(env) else None


def api_key_for(model: str, api_base: str | None = None, api_key_env: str | None = None) -> str | None:
    """The API key requests to ``model`` carry: the value of the variable ``api_key_env`` names, if it names one;
    for an ``openai/`` model at an ``api_base`` (any OpenAI-compatible server, hosted ones too) $OPENAI_API_KEY
    when it is set, and only then the placeholder ``sk-none``; else None (litellm reads the provider's own
    variable)."""
    if api_key_env:
        return os.environ.get(api_key_env)
    if api_base and model.startswith("openai/"):
        return os.environ.get(KEY_ENV["openai"]) or PLACEHOLDER_KEY
    return None


def _local_endpoint(model: str) -> tuple[str, str, str]:
    """(litellm model, api_base, api_key) of the embedded model, its server started by masforge."""
    try:
        from masforge.local_model import ensure_local_server
    except ImportError:
        raise LMSetupError(
            f"this system runs on masforge's embedded model ({model}), and masforge is not installed here: "
            f"`pip install masforge` then `masforge models pull`, or use {OPENAI_COMPATIBLE_HINT}") from None
    try:
        ep = ensure_local_server(model.split(":", 1)[1] if ":" in model else "qwen")
    except Exception as exc:  # masforge's own one-line error (model not pulled, llama.cpp missing, ...)
        text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise LMSetupError(f"cannot start the embedded model: {text} (or use {OPENAI_COMPATIBLE_HINT})") from None
    return ep.model, ep.api_base, ep.api_key


def connect(model: str, *, api_base: str | None = None, api_key: str | None = None,
            api_key_env: str | None = None, require_key: bool = True) -> tuple[str, str | None, str | None, bool]:
    """(litellm model, api_base, api_key, is_local) for a model string; ``require_key``: refuse a hosted model
    whose API key is missing (:class:`LMSetupError`) instead of letting the provider fail later."""
    if is_local_model(model):
        litellm_model, base, key = _local_endpoint(model)
        return litellm_model, base, key, True
    if model == "fake" or model.startswith("fake:"):
        raise LMSetupError(f"'{model}' is masforge's offline test LM, not a model: pass --model with a litellm model "
                           f"string, or use {OPENAI_COMPATIBLE_HINT}")
    if "/" not in model:
        raise LMSetupError(f"model '{model}' needs a provider prefix (e.g. openai/{model}, anthropic/{model}, "
                           f"ollama/{model}), or use {OPENAI_COMPATIBLE_HINT}")
    key = api_key or api_key_for(model, api_base, api_key_env)
    if key is None and require_key:
        env = missing_key_env(model, api_base, api_key_env)
        if env:
            raise LMSetupError(f"model '{model}' needs its API key in ${env}: export {env}=..., "
                               f"or use {OPENAI_COMPATIBLE_HINT}")
    return model, api_base, key, False


def completion_request(model: str, messages: list[dict[str, Any]], *, temperature: float | None,
                       max_tokens: int | None, api_base: str | None = None, api_key: str | None = None,
                       timeout_s: float = 180.0, num_retries: int = 0, extra: dict[str, Any] | None = None,
                       response_format: dict[str, Any] | None = None, seed: int = 0,
                       sample: int = 0, stop: Sequence[str] = ()) -> dict[str, Any]:
    """The arguments of ``litellm.completion`` for one call, as masforge sends them: unknown provider
    parameters dropped, and when sampling, the seed ``seed * 1000 + sample`` (so k samples differ from each
    other and a rerun reproduces them)."""
    request: dict[str, Any] = {"model": model, "messages": messages, "temperature": temperature,
                               "max_tokens": max_tokens, "timeout": timeout_s, "num_retries": num_retries,
                               "drop_params": True, **(extra or {})}
    if api_base:
        request["api_base"] = api_base
    if api_key:
        request["api_key"] = api_key
    if response_format is not None:
        request["response_format"] = response_format
    if stop:
        request["stop"] = list(stop)
    if temperature:
        request["seed"] = seed * 1000 + sample
    return request


def cut_at_stop(text: str, stop: Sequence[str]) -> str:
    """``text`` up to the first of the ``stop`` strings (what a provider that honours them would return)."""
    ends = [i for i in (text.find(s) for s in stop if s) if i >= 0]
    return text[: min(ends)] if ends else text


def quiet_litellm() -> Any:
    """litellm, imported without its "Give Feedback / Get Help" banners on every error."""
    import litellm

    litellm.suppress_debug_info = True
    return litellm
