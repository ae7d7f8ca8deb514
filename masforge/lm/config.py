"""How to reach an LM: :class:`LMConfig`, parsing a CLI/API value into one, and the early API-key check.

Genomes name LMs by alias (``worker``, ``meta``, ...); a run maps aliases to :class:`LMConfig` s, so one
genome runs on any provider litellm knows (OpenAI, Anthropic, Ollama, vLLM, ...). ``local`` means the
embedded llama.cpp model (started on demand, free); ``fake`` is the deterministic offline LM.
"""

from __future__ import annotations

import ast
import hashlib
import importlib.util
import json
import os
import sys
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from masforge.errors import ConfigError
from masforge.standalone.connect import default_sampling, missing_key_env, quiet_litellm


@dataclass(frozen=True)
class LMConfig:
    """How to reach one LM. ``model`` is a litellm model string, ``local[:name]`` or ``fake[:name]``."""

    model: str
    api_base: str | None = None
    api_key_env: str | None = None
    temperature: float = 0.7
    max_tokens: int = 1024
    price_in_per_m: float | None = None
    """Dollars per million prompt tokens; None: litellm's price table (0 for local and fake)."""
    price_out_per_m: float | None = None
    max_concurrency: int = 8
    num_retries: int = 4
    timeout_s: float = 180.0
    extra: dict[str, Any] = field(default_factory=dict)
    """Further litellm completion arguments (e.g. ``{"top_p": 0.9}``)."""
    adapter: str = "auto"
    """How dspy modules talk to this LM (``auto``, ``chat``, ``json``, ``plain``; see masforge.lm.adapters).
    A genome agent may override it."""

    @property
    def is_local(self) -> bool:
        return self.model == "local" or self.model.startswith("local:")

    @property
    def is_fake(self) -> bool:
        return self.model == "fake" or self.model.startswith("fake:")

    @property
    def resolved_adapter(self) -> str:
        """The concrete adapter ``auto`` stands for with this LM (``plain`` on the embedded model)."""
        from masforge.lm.adapters import resolve_adapter

        return resolve_adapter(self.adapter, local=self.is_local)

    def key(self) -> str:
        """Fingerprint of what changes answers (model, endpoint kind, sampling, prompt adapter); keys cached
        results."""
        base = None if (self.is_local or self.is_fake) else self.api_base
        payload = [self.model, base, self.temperature, self.max_tokens, sorted(self.extra.items())]
        if self.resolved_adapter != "chat":  # results made before adapters existed keep their key
            payload.append(self.resolved_adapter)
        digest = hashlib.sha256(json.dumps(payload, default=str).encode()).hexdigest()[:10]
        return f"{self.model}@{digest}"


LOCAL_TIMEOUT_S = 900.0
"""Per-request timeout of the embedded model (a dead server is noticed by its process, not by this)."""


def parse_lm(spec: str | LMConfig | dict[str, Any] | None) -> LMConfig:
    """Turn a CLI/API value into an :class:`LMConfig` (None: ``$MASFORGE_LM`` or the embedded local model)."""
    if spec is None:
        default = os.environ.get("MASFORGE_LM", "").strip()
        return parse_lm(default or "local")
    if isinstance(spec, LMConfig):
        return spec
    if isinstance(spec, dict):
        try:
            cfg = LMConfig(**spec)
        except TypeError as exc:
            raise ConfigError(f"bad LM configuration {spec!r}: {exc} (fields: model, api_base, temperature, "
                              "max_tokens, price_in_per_m, price_out_per_m, max_concurrency, adapter, ...)") from None
        from masforge.lm.adapters import ADAPTERS

        if cfg.adapter not in ADAPTERS:
            raise ConfigError(f"LM '{cfg.model}': unknown adapter '{cfg.adapter}'; use one of {', '.join(ADAPTERS)}")
        return cfg
    text = str(spec).strip()
    if not text:
        raise ConfigError("empty LM name: give a litellm model string like openai/gpt-4o-mini, or 'local'")
    # Greedy on the embedded model (agents that sample, copies and debate, set a temperature): connect's rule,
    # which an exported system follows too.
    temperature, max_tokens = default_sampling(text)
    if text == "local" or text.startswith("local:"):
        # A long answer on a busy 2-core machine can take minutes; a timeout would only pay for it again.
        # One request at a time on llama-cpp-python's server (it serialises them); with llama.cpp's own, its slots.
        # A server another masforge process shares with this one keeps its own slot count.
        from masforge.local_model.catalog import DEFAULT_LOCAL_MODEL, get_spec
        from masforge.local_model.llama_server import local_slots

        name = text.partition(":")[2] or DEFAULT_LOCAL_MODEL
        get_spec(name)  # an unknown name is one line now, not after the search has started
        slots = local_slots(name)
        return LMConfig(model=text, max_concurrency=slots, max_tokens=max_tokens, temperature=temperature,
                        timeout_s=LOCAL_TIMEOUT_S)
    if text == "fake" or text.startswith("fake:"):
        return LMConfig(model=text, max_concurrency=64, max_tokens=max_tokens, temperature=temperature)
    if "/" not in text:
        raise ConfigError(f"LM '{text}' needs a provider prefix (e.g. openai/{text}, anthropic/{text}, "
                          f"ollama/{text}) or use 'local'")
    return LMConfig(model=text, temperature=temperature, max_tokens=max_tokens)


def _provider(cfg: LMConfig) -> str:
    """The provider litellm routes ``cfg.model`` to; ConfigError when it knows none (a typo such as
    ``foobar/some-model`` would otherwise fail on every call and score every system 0)."""
    prefix = cfg.model.split("/", 1)[0]
    unknown = ConfigError(f"LM '{cfg.model}': litellm knows no provider '{prefix}'; use a litellm model string "
                          "such as openai/gpt-4o-mini, anthropic/claude-3-5-haiku-latest or ollama/llama3, or 'local'")
    if _surely_unrouted(cfg):
        raise unknown
    litellm = quiet_litellm()
    try:
        return str(litellm.get_llm_provider(cfg.model, api_base=cfg.api_base)[1])
    except Exception:  # litellm raises its own BadRequestError (and others) for an unknown provider
        raise unknown from None


def _surely_unrouted(cfg: LMConfig) -> bool:
    """True when litellm routes ``cfg.model`` nowhere, told from litellm's files without importing it (the import
    takes seconds, so a typo was refused only after them): no api_base, a prefix that is none of litellm's provider
    names (its ``LlmProviders`` and its JSON-configured providers) and a name that is no model it lists (its price
    list, its constants; a name with a version after ":" may be a Replicate model). False whenever unsure (litellm
    already imported, files laid out otherwise): then litellm itself is asked."""
    if cfg.api_base or "litellm" in sys.modules or ":" in cfg.model:
        return False
    spec = importlib.util.find_spec("litellm")
    if spec is None or spec.origin is None:
        return False
    root = Path(spec.origin).parent
    try:
        tree = ast.parse((root / "types" / "utils.py").read_text(encoding="utf-8"))
        configured = root / "llms" / "openai_like" / "providers.json"
        providers = set(json.loads(configured.read_text(encoding="utf-8"))) if configured.is_file() else set()
        listed = "".join((root / name).read_text(encoding="utf-8")
                         for name in ("model_prices_and_context_window_backup.json", "constants.py"))
    except (OSError, SyntaxError, ValueError):
        return False
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == "LlmProviders":
            providers |= {item.value.value for item in node.body if isinstance(item, ast.Assign)
                          and isinstance(item.value, ast.Constant) and isinstance(item.value.value, str)}
            break
    else:
        return False
    return cfg.model.split("/", 1)[0] not in providers and f'{cfg.model}"' not in listed


def check_credentials(cfg: LMConfig) -> None:
    """Fail early, in one line, if a hosted model's provider is unknown or its API key is missing (checked
    before a run starts, so a typo does not cost a whole evaluation of failed calls)."""
    if cfg.is_local or cfg.is_fake:
        return
    _provider(cfg)
    env = missing_key_env(cfg.model, cfg.api_base, cfg.api_key_env)
    if env:
        raise ConfigError(f"LM '{cfg.model}' needs the API key in ${env}: export {env}=... "
                          "or run without --lm to use the embedded local model")


def with_temperature(cfg: LMConfig, temperature: float | None) -> LMConfig:
    """``cfg`` with another default temperature (None: unchanged)."""
    return cfg if temperature is None else replace(cfg, temperature=temperature)
