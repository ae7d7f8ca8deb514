"""``masforge genome``: validate, inspect and compare genome files."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

from masforge.cli.console import console, os_error_line, print_error, user_errors
from masforge.errors import MasforgeError
from masforge.seeds import resolve_genome

genome_app = typer.Typer(help="Validate, inspect and compare genome files.", no_args_is_help=True)


@genome_app.command("validate")
def genome_validate(files: Annotated[list[Path], typer.Argument(help="Genome files to check.")]) -> None:
    """Check genome files; each problem is one line naming its place."""
    from masforge.genome import load_genome, validate

    failed = 0
    for path in files:
        try:
            g = validate(load_genome(path))
            console.print(f"[green]ok[/green] {escape(str(path))}: {escape(g.name)} ({g.kind}, id {g.short_id})")
        except MasforgeError as exc:
            print_error(str(exc))
            failed += 1
        except OSError as exc:
            print_error(os_error_line(exc))
            failed += 1
    if failed:
        raise typer.Exit(1)


@genome_app.command("schema")
def genome_schema() -> None:
    """Print the genome JSON Schema (what meta-agents are asked to produce)."""
    from masforge.genome.schema import Genome

    schema = Genome.model_json_schema()
    ref = schema.pop("$ref", None)
    if ref:  # a portfolio's members are genomes, so pydantic writes the genome as a definition: put it on top
        schema = {**schema["$defs"][ref.rsplit("/", 1)[-1]], "$defs": schema["$defs"]}
    print(json.dumps(schema, indent=2))


@genome_app.command("diff")
def genome_diff(a: Annotated[str, typer.Argument(help="Old genome (file or seed).")],
                b: Annotated[str, typer.Argument(help="New genome (file or seed).")]) -> None:
    """Show what changed between two genomes, agent by agent and edge by edge."""
    from masforge.genome.diff import diff_genomes

    with user_errors():
        ga, gb = resolve_genome(a), resolve_genome(b)
        changes = diff_genomes(ga, gb)
        console.print(f"{escape(ga.name)} ({ga.short_id}) -> {escape(gb.name)} ({gb.short_id})")
        if not changes:
            console.print("no change")
        colour = {"+": "green", "-": "red", "~": "yellow"}
        for c in changes:
            console.print(f"[{colour[c.op]}]{escape(str(c))}[/{colour[c.op]}]", highlight=False, soft_wrap=True)

