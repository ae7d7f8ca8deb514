"""The command-line reference as Markdown, generated from the typer app itself (the documentation site's CLI page is
made from it at build time), so the reference cannot drift from the commands."""

from __future__ import annotations

import re
from typing import Any

_MARKUP = re.compile(r"\[/?(bold|dim|italic|red|green|yellow|blue)\]")


def _text(value: str | None) -> str:
    """Help text as one Markdown table cell (rich markup dropped, pipes escaped, lines joined)."""
    return " ".join(_MARKUP.sub("", value or "").replace("\\[", "[").split()).replace("|", "\\|")


# typer carries its own copy of click, so commands and parameters are told apart by what they hold, not by class.
def _is_group(command: Any) -> bool:
    return isinstance(getattr(command, "commands", None), dict)


def _is_option(param: Any) -> bool:
    return getattr(param, "param_type_name", "") == "option"


def _subcommands(command: Any) -> list[tuple[str, Any]]:
    """Sub-commands in the order ``--help`` lists them (typer keeps the order they were added in)."""
    return [(name, sub) for name, sub in command.commands.items() if not getattr(sub, "hidden", False)]


def _default(param: Any) -> str:
    if param.required or getattr(param, "is_flag", False) and not param.default:
        return ""
    default = param.default
    if default is None or default == () or callable(default):
        return ""
    return f"`{default}`"


def _usage(command: Any, path: list[str]) -> str:
    pieces = [" ".join(path)]
    if _is_group(command):
        pieces.append("COMMAND")
    if any(_is_option(p) for p in command.params):
        pieces.append("[OPTIONS]")
    for param in command.params:
        if not _is_option(param):
            name = (param.metavar or param.name or "").upper()
            pieces.append(name if param.required else f"[{name}]")
    return " ".join(pieces)


def _params_table(command: Any) -> list[str]:
    rows = []
    for param in command.params:
        if getattr(param, "hidden", False):
            continue
        if _is_option(param):
            names = ", ".join(f"`{o}`" for o in [*param.opts, *param.secondary_opts])
        else:
            names = f"`{(param.metavar or param.name or '').upper()}`"
        rows.append(f"| {names} | {_text(getattr(param, 'help', None))} | {_default(param)} |")
    if not rows:
        return []
    return ["| argument or option | what it does | default |", "|---|---|---|", *rows, ""]


def _command(command: Any, path: list[str], level: int, out: list[str]) -> None:
    out += [f"{'#' * level} `{' '.join(path)}`", "", _text(command.help), "",
            f"```text\n{_usage(command, path)}\n```", "", *_params_table(command)]
    if _is_group(command):
        for name, sub in _subcommands(command):
            _command(sub, [*path, name], min(level + 1, 4), out)


def cli_reference() -> str:
    """Every ``masforge`` command and sub-command with its arguments, options and defaults, as Markdown, after the
    aliases an archive id may be."""
    import typer.main

    from masforge.archive.index import ALIASES
    from masforge.cli.commands import app

    out = ["Wherever a command takes an archive id, it also takes an alias:", "", "| alias | stands for |", "|---|---|",
           *(f"| `{alias}` | {_text(meaning)} |" for alias, meaning in ALIASES.items()), ""]
    for name, command in _subcommands(typer.main.get_command(app)):
        _command(command, ["masforge", name], 2, out)
    return "\n".join(out).rstrip() + "\n"
