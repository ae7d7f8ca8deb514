"""The command line of an exported system: ``python exported.py "question" [--model ...]``.

Without ``--model`` it runs on the LM the system was found with (recorded at export time; ``local`` is
masforge's embedded model). Every failure is one line on stderr and exit code 1.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable
from typing import Any

from masforge.standalone.connect import LMSetupError, default_sampling

MODEL_ENV = "MASFORGE_EXPORT_MODEL"
Answer = Callable[[dict[str, str], dict[str, Any]], dict[str, Any]]
"""answer(inputs, lm_options) -> outputs: builds the system on an LM made from the options and runs it."""


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else ""


def command_line(argv: list[str] | None, *, name: str, inputs: list[str], outputs: list[str],
                 found_with: dict[str, Any], answer: Answer, adapters: tuple[str, ...] = (),
                 machine_written: bool = False) -> int:
    """Parse ``argv``, answer one input and print the outputs; returns the exit code.

    ``found_with``: the LM settings the system was found with (model, api_base, api_key_env, temperature,
    max_tokens, adapter, extra); they apply while ``--model`` is that model, another model gets its defaults.
    ``adapters``: the prompt adapter choices ``--adapter`` offers (none: no such option).
    """
    what = "machine-written code exported from masforge; run it only in a sandbox" if machine_written else \
        "a multi-agent system exported from masforge"
    recorded = str(found_with.get("model") or "local")
    default_model = os.environ.get(MODEL_ENV) or recorded
    parser = argparse.ArgumentParser(description=f"Run {name} ({what}).")
    parser.add_argument("input", nargs="?", help=f"Text of the input field {inputs[0]!r}.")
    parser.add_argument("--field", "-f", action="append", default=[], metavar="NAME=VALUE",
                        help=f"An input field by name (inputs: {', '.join(inputs)}).")
    parser.add_argument("--model", default=default_model,
                        help=f"litellm model string, or 'local' for masforge's embedded model (default: {recorded}, "
                        f"the LM this system was found with, or ${MODEL_ENV}).")
    parser.add_argument("--api-base", help="Endpoint of an OpenAI-compatible server (vLLM, Ollama, llama.cpp, ...).")
    parser.add_argument("--api-key-env", help="Environment variable that holds the API key.")
    parser.add_argument("--temperature", type=float,
                        help="Default sampling temperature (default: as found; another --model: its default).")
    parser.add_argument("--max-tokens", type=int, help="Reply length limit (default: as found).")
    parser.add_argument("--seed", type=int, default=0, help="Base of the provider seeds of sampled calls.")
    if adapters:
        parser.add_argument("--adapter", choices=adapters,
                            help="Prompt format of agents that leave it to the LM (default: as found; auto: plain on "
                            "the embedded model, chat elsewhere).")
    parser.add_argument("--json", action="store_true", help="Print the outputs as JSON.")
    args = parser.parse_args(argv)
    values: dict[str, str] = {}
    for item in args.field:
        field, sep, value = item.partition("=")
        if not sep:
            parser.error(f"--field {item!r} must look like name=value")
        values[field.strip()] = value
    if args.input is not None:
        values.setdefault(inputs[0], args.input)
    missing = [f for f in inputs if f not in values]
    if missing:
        parser.error(f"give the input {missing[0]!r} (as the argument or --field {missing[0]}=...)")
    # The recorded settings belong to the recorded model; another model gets the defaults masforge gives it.
    found = found_with if args.model == recorded else {}
    temperature, max_tokens = default_sampling(args.model)
    options: dict[str, Any] = {
        "model": args.model,
        "api_base": args.api_base or found.get("api_base"),
        "api_key_env": args.api_key_env or found.get("api_key_env"),
        "temperature": args.temperature if args.temperature is not None else found.get("temperature", temperature),
        "max_tokens": args.max_tokens or found.get("max_tokens", max_tokens),
        "seed": args.seed,
        **dict(found.get("extra") or {}),
    }
    if adapters:
        options["adapter"] = args.adapter or found.get("adapter") or "auto"
    try:
        result = answer(values, options)
    except LMSetupError as exc:
        print(f"error: {_first_line(exc)}", file=sys.stderr)
        return 1
    except Exception as exc:
        print(f"error: {type(exc).__name__}: {_first_line(exc)}", file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps(result, ensure_ascii=False, indent=2, default=str))
    else:
        for field in outputs:
            print(result[field] if len(outputs) == 1 else f"{field}: {result[field]}")
    return 0
