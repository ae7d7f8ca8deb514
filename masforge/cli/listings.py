"""The listing commands: ``tasks``, ``strategies`` and ``seeds`` (what there is to search with; nothing is
run)."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.markup import escape
from rich.table import Table

from masforge.cli.console import console, user_errors
from masforge.errors import ConfigError
from masforge.text import shorten


def tasks(
    which: Annotated[str | None, typer.Argument(metavar="[rg]", help="rg: list the reasoning-gym families that "
                                                "rg:<family> accepts.")] = None,
) -> None:
    """List the built-in tasks with their split sizes and metrics (`masforge tasks rg`: the reasoning-gym
    families)."""
    from masforge.evaluators.tasks import describe_tasks

    if which is not None:
        with user_errors():
            if which.strip().lower().rstrip(":") != "rg":
                raise ConfigError(f"masforge tasks {which}: the only list of families is rg (masforge tasks rg)")
            _rg_families()
        return

    table = Table(title="tasks (split sizes for --seed 0; --limit takes the first N of a split)")
    for col in ("name", "description", "train / validation / test"):
        table.add_column(col)
    for name, description, splits in describe_tasks():
        table.add_row(escape(name), escape(description), splits)
    table.add_row("FILE.jsonl", "your own data: question/answer lines, exact match",
                  "the rest / 20% / 20% of the lines (at least 1 each from 3 lines; val_fraction and "
                  "test_fraction in task_options change it)")
    console.print(table)


def _rg_families() -> None:
    from masforge.evaluators.benchmarks.reasoning_gym import reasoning_gym_families

    families = reasoning_gym_families()
    table = Table(title=f"{len(families)} reasoning-gym families: use as --task rg:<family> (options: size, config)")
    for col in ("task", "category", "what it generates"):
        table.add_column(col, overflow="fold")
    for family, category, summary in families:
        table.add_row(f"rg:{family}", category, escape(shorten(summary, 90)))
    console.print(table)


def strategies() -> None:
    """List the search strategies with what each does and its options (no search is run)."""
    from masforge.search.strategies import describe_strategies

    table = Table(title="strategies (use with --strategy NAME, or a pipeline such as knapsack,evolve,tune)",
                  show_lines=True)
    table.add_column("name", overflow="fold")
    table.add_column("what it does", overflow="fold", ratio=1)
    table.add_column("options: --option NAME=VALUE (or strategy_options in a run configuration)", overflow="fold",
                     ratio=2)
    for name, summary, options in describe_strategies():
        table.add_row(name, escape(summary), "\n".join(f"[bold]{o.name}[/bold]={escape(repr(o.default))}: "
                                                         f"{escape(o.help)}" for o in options))
    console.print(table)


def seeds() -> None:
    """List the shipped seed systems."""
    from masforge.seeds import seed_paths

    table = Table(title="seeds")
    for col in ("name", "file", "kind", "agents", "description"):
        table.add_column(col)
    with user_errors():
        from masforge.genome import load_genome

        for path in seed_paths():
            g = load_genome(path)
            table.add_row(g.name, path.name, g.kind, str(len(g.agents)), shorten(g.description, 70))
    console.print(table)
