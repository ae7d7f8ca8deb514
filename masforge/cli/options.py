"""Options and helpers several commands share: the LM options, the options of an evaluation (:class:`EvalOptions`),
the budget limits' flags (made from their declarations, :data:`masforge.search.budget.BUDGET_LIMITS`), the LM
client the options ask for and why a run stopped."""

from __future__ import annotations

import dataclasses
import functools
import inspect
import typing
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import annotated_types
import typer
from rich.markup import escape

from masforge.lm.budget import BudgetLimit
from masforge.search.budget import BUDGET_LIMITS, SearchBudget

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
    """The command parameter of one budget limit: its flag, help and bounds (those of the :class:`SearchBudget`
    field, so the command line refuses what the budget would)."""
    field = SearchBudget.model_fields[limit.field]
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


def _limit_parameters(fields: tuple[str, ...], stop_help: bool,
                      show_defaults: dict[str, str] | None) -> list[inspect.Parameter]:
    return [_limit_parameter(row, f"Stop after this many {row.unit}." if stop_help else row.help,
                             (show_defaults or {}).get(row.field)) for row in (BUDGET_LIMITS[f] for f in fields)]


def _given_limits(fields: tuple[str, ...], given: dict[str, Any]) -> dict[str, float]:
    """The limits the user set among ``given`` (command parameters), by budget field, in the budget's units."""
    values = {field: given[limit_parameter_name(BUDGET_LIMITS[field])] for field in fields}
    return {field: value * BUDGET_LIMITS[field].scale for field, value in values.items() if value is not None}


def _with_parameters(command: Callable[..., None], into: str, after: str, added: list[inspect.Parameter],
                     gather: Callable[[dict[str, Any]], object]) -> Callable[..., None]:
    """``command`` with the parameters ``added`` after its parameter ``after``: what the user gives them reaches
    the command as its parameter ``into``, made by ``gather`` from their values by name."""
    signature = inspect.signature(command, eval_str=True)
    own = [p for p in signature.parameters.values() if p.name != into]
    at = [p.name for p in own].index(after) + 1
    names = [p.name for p in added]

    @functools.wraps(command)
    def wrapped(*args: Any, **kwargs: Any) -> None:
        given = {name: kwargs.pop(name) for name in names}
        command(*args, **{into: gather(given)}, **kwargs)

    wrapped.__signature__ = signature.replace(  # type: ignore[attr-defined]
        parameters=[*own[:at], *added, *own[at:]])
    return wrapped


def limit_options(fields: tuple[str, ...], *, after: str,
                  show_defaults: dict[str, str] | None = None) -> Callable[[Callable[..., None]], Callable[..., None]]:
    """Give a command one option per budget limit in ``fields`` (in that order, after its parameter ``after``),
    each made from the limit's declaration in :data:`BUDGET_LIMITS` (flag, help). The command takes ``limits``:
    the limits the user set, by budget field, in the budget's units."""
    added = _limit_parameters(fields, False, show_defaults)
    return lambda command: _with_parameters(command, "limits", after, added,
                                            functools.partial(_given_limits, fields))


@dataclass(frozen=True)
class EvalOptions:
    """The options every command that evaluates a system shares (``evaluate``, ``compare``), declared once: each
    field's annotation is its command-line option and its default the option's."""

    limit: LimitOption = None
    lm: LmOption = None
    api_base: ApiBaseOption = None
    api_key_env: ApiKeyEnvOption = None
    concurrency: ConcurrencyOption = 4
    data_dir: DataDirOption = None
    task_option: TaskOption = None
    no_cache: NoCacheOption = False
    limits: dict[str, float] = dataclasses.field(default_factory=dict)
    """The budget limits the user set, by budget field, in the budget's units (their options follow
    ``--concurrency``)."""


def evaluation_options(fields: tuple[str, ...], *, after: str) -> Callable[[Callable[..., None]],
                                                                          Callable[..., None]]:
    """Give an evaluating command the options of :class:`EvalOptions` (after its parameter ``after``), with the
    budget limits ``fields`` as "Stop after this many <unit>." options; the command takes ``options``."""
    hints = typing.get_type_hints(EvalOptions, include_extras=True)
    shared = [inspect.Parameter(f.name, inspect.Parameter.POSITIONAL_OR_KEYWORD, default=f.default,
                                annotation=hints[f.name])
              for f in dataclasses.fields(EvalOptions) if f.name != "limits"]
    at = [p.name for p in shared].index("concurrency") + 1
    added = [*shared[:at], *_limit_parameters(fields, True, None), *shared[at:]]

    def gather(given: dict[str, Any]) -> EvalOptions:
        return EvalOptions(**{f.name: given[f.name] for f in dataclasses.fields(EvalOptions) if f.name != "limits"},
                           limits=_given_limits(fields, given))

    return lambda command: _with_parameters(command, "options", after, added, gather)


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
