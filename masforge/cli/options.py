"""Options and helpers several commands share: the LM and evaluation options, the budget limits' flags (made
from :data:`masforge.lm.budget.BUDGET_LIMITS`), the LM client the options ask for and why a run stopped."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import annotated_types
import typer
from rich.markup import escape

from masforge.lm.budget import BUDGET_LIMITS, Budget, BudgetLimit

LmOption = Annotated[
    str | None,
    typer.Option("--lm", help="Worker LM: a litellm model string (openai/gpt-4o-mini, ollama/llama3, ...), "
                 "'local' (default: the embedded model) or 'fake' (offline, deterministic)."),
]
MetaLmOption = Annotated[str | None, typer.Option("--meta-lm", help="Meta-agent LM (default: same as --lm).")]
ApiBaseOption = Annotated[
    str | None, typer.Option("--api-base", help="Endpoint for --lm (e.g. a vLLM or Ollama server).")
]
ApiKeyEnvOption = Annotated[
    str | None, typer.Option("--api-key-env", help="Environment variable holding the API key of --lm (default: "
                             "the provider's own, e.g. OPENAI_API_KEY, also for an openai/ model at --api-base).")
]
# the options of an evaluation (evaluate, compare)
# Help text is rich markup: a literal "[" is written escape()d, or rich takes "[default: all]" for a style tag and
# drops it (tests/test_first_hour.py checks every command's help for text lost this way).
LimitOption = Annotated[int | None, typer.Option(min=1, help=escape(
    "Only the first N examples [default: all]; more than the split holds is capped (and said so)."))]
ConcurrencyOption = Annotated[int, typer.Option(min=1, max=256, help="Examples evaluated at once.")]
DataDirOption = Annotated[Path | None, typer.Option("--data-dir", help="Local benchmark data folder.")]
NoCacheOption = Annotated[bool, typer.Option("--no-cache", help="Do not reuse cached LM answers.")]
TaskOption = Annotated[list[str] | None, typer.Option(
    "--task-option", help="A task option as NAME=VALUE (e.g. size=1000 for rg: tasks, val_fraction=0.4 for a "
    ".jsonl file); repeat for more. Give the same ones to search, evaluate and compare: they change the split.")]

# Why a search or evaluation stopped, in the words (and flags) the user knows.
STOP_REASONS = {
    **{limit.name: limit.stopped for limit in BUDGET_LIMITS.values()},
    "interrupted": "interrupted (Ctrl-C)",
    "outage": "provider outage (see below)",
    "provider": "the LM provider refuses the run, or overran its bill (see below)",
    "sandbox": "the sandbox misses a layer generated code needs (see below)",
}


def positive(value: float | None) -> float | None:
    """A typer callback: ``value`` must be greater than 0."""
    if value is not None and value <= 0:
        raise typer.BadParameter(f"must be greater than 0, got {value}")
    return value


def _limit_parameter(limit: BudgetLimit, help_text: str, show_default: str | None) -> inspect.Parameter:
    """The command parameter of one budget limit: its flag, help and bounds (those of the :class:`Budget`
    field, so the command line refuses what the budget would)."""
    field = Budget.model_fields[limit.field]
    bounds: dict[str, Any] = {}
    for rule in field.metadata:
        if isinstance(rule, annotated_types.Ge):
            bounds["min"] = rule.ge
        elif isinstance(rule, annotated_types.Gt):
            bounds["callback"] = positive
    if show_default is not None:
        bounds["show_default"] = show_default
    option = typer.Option(limit.flag, *([limit.short] if limit.short else []), help=help_text, **bounds)
    return inspect.Parameter(limit_parameter_name(limit), inspect.Parameter.POSITIONAL_OR_KEYWORD, default=None,
                             annotation=Annotated[field.annotation, option])


def limit_parameter_name(limit: BudgetLimit) -> str:
    """The command parameter a limit's flag fills (``--budget-usd`` -> ``budget_usd``)."""
    return limit.flag.lstrip("-").replace("-", "_")


def limit_options(fields: tuple[str, ...], *, after: str, stop_help: bool = False,
                  show_defaults: dict[str, str] | None = None) -> Callable[[Callable[..., None]], Callable[..., None]]:
    """Give a command one option per budget limit in ``fields`` (in that order, after its parameter ``after``),
    each made from the limit's row of :data:`BUDGET_LIMITS`. The command takes ``limits``: the limits the user
    set, by budget field, in the budget's units. ``stop_help``: help "Stop after this many <unit>." instead of
    the search's."""
    rows = [BUDGET_LIMITS[field] for field in fields]

    def add(command: Callable[..., None]) -> Callable[..., None]:
        signature = inspect.signature(command, eval_str=True)
        own = [p for p in signature.parameters.values() if p.name != "limits"]
        at = [p.name for p in own].index(after) + 1
        added = [_limit_parameter(row, f"Stop after this many {row.unit}." if stop_help else row.help,
                                  (show_defaults or {}).get(row.field)) for row in rows]

        @functools.wraps(command)
        def with_limits(*args: Any, **kwargs: Any) -> None:
            given = {row.field: kwargs.pop(limit_parameter_name(row)) for row in rows}
            command(*args, limits={field: value * BUDGET_LIMITS[field].scale for field, value in given.items()
                                   if value is not None}, **kwargs)

        with_limits.__signature__ = signature.replace(  # type: ignore[attr-defined]
            parameters=[*own[:at], *added, *own[at:]])
        return with_limits

    return add


def make_client(lm: str | None, meta_lm: str | None = None, api_base: str | None = None,
                cache: bool = True, api_key_env: str | None = None) -> object:
    """An LMClient for the CLI's --lm/--meta-lm/--api-base/--api-key-env options (credentials checked up
    front)."""
    from dataclasses import replace

    from masforge.lm.client import LMClient, check_credentials, parse_lm

    worker = parse_lm(lm)
    if api_base:
        worker = replace(worker, api_base=api_base)
    if api_key_env:
        worker = replace(worker, api_key_env=api_key_env)
    meta = parse_lm(meta_lm) if meta_lm else worker
    for cfg in (worker, meta):
        check_credentials(cfg)
    return LMClient({"worker": worker, "meta": meta}, cache=cache)
