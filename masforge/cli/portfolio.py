"""``masforge portfolio ...``: build a portfolio (a router over archived systems) from a run's archive.

Mounted by the main CLI as ``app.add_typer(cli_portfolio.app, name="portfolio")``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

from masforge.cli.archive import DEFAULT_ARCHIVE
from masforge.cli.console import console, task_options, user_errors
from masforge.errors import MasforgeError

app = typer.Typer(help="Build portfolios: a learned router over systems a search already found.",
                  no_args_is_help=True)


@app.command("build")
def build(
    task: Annotated[str, typer.Option("--task", "-t", help="The task the search ran on (e.g. humaneval).")],
    archive: Annotated[Path, typer.Option("--archive", "-a", help="Archive folder (a run's archive is <run "
                                          "folder>/archive).")] = DEFAULT_ARCHIVE,
    split: Annotated[str, typer.Option(help="The selection split whose per-question results are read (never "
                                       "test).")] = "validation+train",
    lm_key: Annotated[str | None, typer.Option("--lm-key", help="Whose results: the LM key they are stored "
                                               "under (default: the most common).")] = None,
    cost_weight: Annotated[float, typer.Option("--cost-weight", min=0, help="The run's fitness: score minus this "
                                               "x dollars per question.")] = 0.0,
    max_members: Annotated[int, typer.Option("--max-members", min=1, max=16, help="At most this many "
                                             "members.")] = 4,
    folds: Annotated[int, typer.Option(min=2, max=20, help="Cross-validation folds of the router.")] = 5,
    escalate: Annotated[bool, typer.Option("--escalate", help="Add an escalation order (fewest LM calls first): "
                                           "an answer failing an example its question states passes the question "
                                           "on to the next member.")] = False,
    data_dir: Annotated[Path | None, typer.Option("--data-dir", help="Local benchmark data folder.")] = None,
    task_option: Annotated[list[str] | None, typer.Option("--task-option", help="A task option as NAME=VALUE, as "
                                                          "given to the search.")] = None,
    save: Annotated[bool, typer.Option("--save/--no-save", help="Store the portfolio in the archive (its members "
                                       "as parents).")] = True,
    output: Annotated[Path | None, typer.Option("--output", "-o", help="Also write the portfolio genome to this "
                                                ".yaml or .json file.")] = None,
) -> None:
    """Build a portfolio from an archive's selection-split results: members chosen greedily, a router fitted with
    cross-validation; prints the members, where the router sends the selection questions, and the CV routed score
    against the single best system and the oracle (the best member per question)."""
    from masforge.archive.store import Archive
    from masforge.evaluators.tasks import get_task
    from masforge.genome.io import save_genome
    from masforge.search.portfolio import add_portfolio, build_portfolio

    with user_errors():
        if not archive.exists():
            raise MasforgeError(f"{archive}: no archive there (run a search first, or pass --archive PATH)")
        the_task = get_task(task, data_dir=data_dir, **task_options(task_option))
        with Archive.open(archive) as arch:
            built = build_portfolio(arch, the_task, split, lm_key, cost_weight, max_members=max_members,
                                    folds=folds, escalate=escalate)
            for line in built.lines():
                console.print(escape(line), highlight=False, soft_wrap=True)
            if save:
                record = add_portfolio(arch, built)
                console.print(f"stored as {record.short_id} in {escape(str(archive))} (`masforge archive show "
                              f"{record.short_id} --archive {escape(str(archive))}`)", highlight=False,
                              soft_wrap=True)
        if output is not None:
            if output.suffix.lower() not in (".yaml", ".yml", ".json"):
                raise MasforgeError(f"{output}: write a portfolio as .yaml or .json")
            save_genome(built.genome, output)
            console.print(f"written to {escape(str(output))}", highlight=False, soft_wrap=True)
