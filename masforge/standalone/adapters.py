"""Prompt adapters: how a dspy module talks to its LM, as a named, swappable choice.

* ``chat``: dspy's ChatAdapter (``[[ ## field ## ]]`` sections; falls back to JSON on a parse failure).
* ``json``: dspy's JSONAdapter (one JSON object; structured output where the provider supports it).
* ``plain``: :class:`PlainAdapter`, for small and local models. The role, instructions and inputs go out
  as one ordinary chat message, and the reply is read leniently: a single-output module takes the whole
  reply (a code answer keeps its fenced block), chain of thought reads the text after a plain-words
  "Final answer:" marker (else the last code block, else the last line), and several outputs are
  labelled sections. Format alone never fails an example when an answer can be recovered.
* ``auto``: ``plain`` for the embedded local model, ``chat`` for everything else.

A small model loses most of its skill inside a heavy structured format (measured on the 0.5B embedded
model: HumanEval 0/8 through ChatAdapter against 4/8 in plain chat, ``bench/results/fidelity.txt``).
"""

from __future__ import annotations

import threading
import weakref
from typing import Any

from masforge.genome.names import ADAPTERS


def resolve_adapter(name: str | None, *, local: bool) -> str:
    """The concrete adapter for ``name`` (``auto``/None: ``plain`` on the local model, else ``chat``)."""
    if name in (None, "", "auto"):
        return "plain" if local else "chat"
    if name not in ADAPTERS:
        raise ValueError(f"unknown adapter '{name}'; use one of {', '.join(ADAPTERS)}")
    return name


def choose_adapter(agent_choice: str | None, lm_choice: str | None, *, local: bool) -> str:
    """The concrete adapter an agent uses: its own choice, else (``auto``) its LM configuration's choice."""
    return resolve_adapter(lm_choice if agent_choice in (None, "", "auto") else agent_choice, local=local)


_SYSTEM_MESSAGES: weakref.WeakKeyDictionary[Any, dict[type, str]] = weakref.WeakKeyDictionary()
_SYSTEM_LOCK = threading.Lock()


def _with_kept_system_message(base: type) -> type:
    """``base`` (a dspy adapter class) building its system message once per signature. The message is a function
    of the signature alone (field descriptions, structure, instructions), yet dspy builds it on every call, type
    adapters and all: a tenth of masforge's time per LM call with 64 calls in flight (bench/concurrency.py)."""

    class Kept(base):  # type: ignore[misc, valid-type]
        if base.__name__ == "ChatAdapter":

            def format_user_message_content(self, signature: Any, inputs: dict[str, Any], prefix: str = "",
                                            suffix: str = "", main_request: bool = False) -> str:
                # dspy formats each input through a new pydantic TypeAdapter (serialize_for_json), which leaves a
                # plain string as it is; such inputs are formatted here without it, the rest by dspy (the same text:
                # tests/test_adapters.py checks it against dspy's own method).
                if any(type(inputs[k]) is not str for k in signature.input_fields if k in inputs):
                    return super().format_user_message_content(signature, inputs, prefix, suffix, main_request)
                parts = [prefix] + [f"[[ ## {k} ## ]]\n{inputs[k]}" for k in signature.input_fields if k in inputs]
                if main_request:
                    wanted = self.user_message_output_requirements(signature)
                    if wanted is not None:
                        parts.append(wanted)
                parts.append(suffix)
                return "\n\n".join(parts).strip()

        def format_system_message(self, signature: Any) -> str:
            with _SYSTEM_LOCK:
                known = _SYSTEM_MESSAGES.get(signature, {}).get(base)
            if known is None:
                known = super().format_system_message(signature)
                with _SYSTEM_LOCK:
                    _SYSTEM_MESSAGES.setdefault(signature, {})[base] = known
            return known

    Kept.__name__ = Kept.__qualname__ = base.__name__
    return Kept


_KEPT: dict[str, type] = {}


def make_adapter(name: str) -> Any:
    """A dspy adapter instance for a concrete adapter name (see :func:`resolve_adapter`)."""
    import dspy

    if name == "plain":
        from masforge.standalone.plain_adapter import PlainAdapter

        return PlainAdapter()
    if name in ("json", "chat"):
        if name not in _KEPT:
            _KEPT[name] = _with_kept_system_message(dspy.JSONAdapter if name == "json" else dspy.ChatAdapter)
        return _KEPT[name]()
    raise ValueError(f"adapter '{name}' is not concrete; resolve it first (chat, json or plain)")
