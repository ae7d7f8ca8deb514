"""``masforge archive ...``: browse the git-versioned candidate archive.

The main CLI mounts this as ``app.add_typer(cli_archive.app, name="archive")``. Every command takes
``--archive PATH`` (default ``runs/latest/archive``) and turns a :class:`~masforge.errors.MasforgeError` into one
red line on stderr and exit code 1.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import typer
from rich.markup import escape
from rich.syntax import Syntax
from rich.table import Table
from rich.tree import Tree

from masforge.archive.records import KINDS, CandidateRecord, ResultRecord
from masforge.archive.store import SORTS, Archive, LineageNode
from masforge.cli.console import console, user_errors
from masforge.errors import MasforgeError
from masforge.genome.diff import diff_genomes
from masforge.genome.io import dump_genome
from masforge.genome.schema import Genome

app = typer.Typer(help="Browse an archive.", no_args_is_help=True)


DEFAULT_ARCHIVE = Path("runs/latest/archive")
_ARCHIVE_HELP = "Archive folder (a run's archive is <run folder>/archive)."
ID_HELP = ("Genome id or a unique prefix of it, or best (the first row of `archive list`), best-new (the best that "
           "is not a seed) or seed:<name>.")


def _archive_option() -> Any:
    return typer.Option(DEFAULT_ARCHIVE, "--archive", "-a", help=_ARCHIVE_HELP)



@contextlib.contextmanager
def _opened(path: Path) -> Iterator[Archive]:
    with user_errors():
        if not path.exists():
            raise MasforgeError(f"{path}: no archive there (run a search first, or pass --archive PATH)")
        with Archive.open(path) as archive:
            yield archive


def _score(result: ResultRecord | None) -> str:
    return "-" if result is None else f"{result.score:.3f}"


def _ci(result: ResultRecord | None) -> str:
    if result is None or result.ci_low is None or result.ci_high is None:
        return ""
    return f"{result.ci_low:.2f}-{result.ci_high:.2f}"


def _dollars(result: ResultRecord | None) -> str:
    return "-" if result is None else f"${result.dollars:.4f}"


def _status(status: str) -> str:
    return {"promoted": "[green]promoted[/green]", "pruned": "[dim]pruned[/dim]"}.get(status, status)


def _label(record: CandidateRecord, task: str | None = None) -> str:
    result = record.result_for(task)
    parts = [f"[bold]{record.short_id}[/bold] {escape(record.name)}", f"gen {record.generation}",
             escape(record.operator)]
    if result is not None:
        parts.append(f"{escape(result.task)} {result.score:.3f} ${result.dollars:.4f}")
    if record.status != "active":
        parts.append(_status(record.status))
    return "  ".join(parts)


def _members_line(genome: Genome) -> str:
    """A portfolio's members in one line (for the list)."""
    members = genome.portfolio.members if genome.portfolio else []
    return "[dim]members: " + escape(", ".join(f"{m.short_id[:8]} {m.name}" for m in members)) + "[/dim]"


def _members_table(genome: Genome) -> Table:
    """A portfolio's members: which the router may choose, and the escalation order."""
    body = genome.portfolio
    table = Table(title="portfolio members", title_justify="left")
    for name in ("#", "id", "name", "kind", "router chooses it", "escalation"):
        table.add_column(name, overflow="fold")
    if body is None:
        return table
    for i, m in enumerate(body.members):
        order = str(body.escalation.index(i) + 1) if i in body.escalation else "-"
        table.add_row(str(i), m.short_id, escape(m.name), m.kind, "yes" if i in body.router.classes else "no", order)
    return table


@app.command("list")
def list_candidates(
    task: str | None = typer.Option(None, "--task", "-t", help="Only candidates evaluated on this task."),
    split: str | None = typer.Option(None, "--split", help="Only results on this split (e.g. dev, test)."),
    strategy: str | None = typer.Option(None, "--strategy", help="Only candidates made by this search strategy."),
    kind: str | None = typer.Option(None, "--kind", help="config, code or portfolio."),
    run: str | None = typer.Option(None, "--run", help="Only candidates created by this run id."),
    sort: str = typer.Option("score", "--sort", "-s", help="One of: " + ", ".join(SORTS) + "."),
    top: int = typer.Option(20, "--top", "-n", help="How many rows (0: all)."),
    include_pruned: bool = typer.Option(False, "--all", help="Include pruned candidates."),
    archive: Path = _archive_option(),
) -> None:
    """List candidates, best first (or cheapest, newest generation, newest)."""
    with _opened(archive) as arch:
        if kind is not None and kind not in KINDS:
            raise typer.BadParameter(f"use {', '.join(KINDS)}", param_hint="--kind")
        rows = arch.list(task=task, split=split, strategy=strategy, kind=kind, run=run, sort=sort,
                         limit=top or None, include_pruned=include_pruned)
        total = len(arch)
        # Numbers and ids never wrap; on narrow terminals the least useful columns go first.
        wide = console.width >= 120
        table = Table(title=f"{len(rows)} of {total} candidates, by {sort}", title_justify="left", show_edge=wide)
        table.add_column("id", no_wrap=True)
        table.add_column("name", overflow="fold", min_width=10)
        if wide:
            table.add_column("kind", no_wrap=True)
        table.add_column("gen", justify="right", no_wrap=True)
        table.add_column("made by", overflow="fold")
        if task is None:
            table.add_column("task", overflow="fold")
        table.add_column("score", justify="right", no_wrap=True)
        if wide:
            table.add_column("95% CI", justify="right", no_wrap=True)
        table.add_column("cost", justify="right", no_wrap=True)
        table.add_column("n", justify="right", no_wrap=True)
        if wide:
            table.add_column("status", no_wrap=True)
        for rec in rows:
            result = rec.result_for(task, split)
            name = escape(rec.name) if wide or rec.status == "active" else f"{escape(rec.name)} ({_status(rec.status)})"
            if rec.kind == "portfolio":
                name += "\n" + _members_line(arch.genome(rec.genome_id))
            cells = [rec.short_id, name] + ([rec.kind] if wide else []) + [
                str(rec.generation), escape(f"{rec.strategy}/{rec.operator}")]
            if task is None:
                cells.append(escape(f"{result.task}/{result.split}") if result else "-")
            cells.append(_score(result))
            if wide:
                cells.append(_ci(result))
            cells += [_dollars(result), str(result.n) if result else "-"] + ([_status(rec.status)] if wide else [])
            table.add_row(*cells)
        console.print(table)


@app.command()
def show(
    candidate: str = typer.Argument(..., help=ID_HELP),
    archive: Path = _archive_option(),
) -> None:
    """Show one candidate: provenance, parents, rationale, genome and results."""
    with _opened(archive) as arch:
        rec = arch.get(candidate)
        genome = arch.genome(rec.genome_id)
        children = arch.lineage(rec.genome_id, depth=1).descendants
        console.print(f"[bold]{rec.genome_id}[/bold]  {escape(rec.name)}", highlight=False, soft_wrap=True)
        info = Table.grid(padding=(0, 2))
        info.add_column(style="dim", no_wrap=True)
        info.add_column(overflow="fold")
        info.add_row("kind", rec.kind)
        info.add_row("status", _status(rec.status))
        info.add_row("made by", escape(f"{rec.strategy} / {rec.operator}, generation {rec.generation}"))
        info.add_row("run", escape(rec.run or "-"))
        info.add_row("created", rec.created_at)
        info.add_row("commit", rec.commit)
        if rec.tags:
            info.add_row("tags", escape(", ".join(rec.tags)))
        parents = [arch.get(p) for p in rec.parents]
        info.add_row("parents", "\n".join(f"{p.short_id} {escape(p.name)}" for p in parents) or "- (seed)")
        shown = [f"{c.short_id} {escape(c.name)}" for c in children[:10]]
        if len(children) > 10:
            shown.append(f"... and {len(children) - 10} more (`masforge archive lineage {rec.short_id}`)")
        info.add_row("children", "\n".join(shown) or "-")
        if rec.rationale:
            info.add_row("rationale", escape(rec.rationale))
        console.print(info)
        if genome.kind == "portfolio":
            console.print(_members_table(genome))
        fmt = "py" if genome.kind == "code" else "yaml"
        console.print(f"\n[bold]genome[/bold] (genome.{fmt})")
        console.print(Syntax(dump_genome(genome, fmt), "python" if fmt == "py" else "yaml", word_wrap=True))
        if not rec.results:
            console.print("no results yet")
            return
        table = Table(title="results", title_justify="left")
        for name, justify in (("task", "left"), ("split", "left"), ("lm", "left"), ("score", "right"),
                              ("95% CI", "right"), ("n", "right"), ("cost", "right"), ("tokens", "right"),
                              ("calls", "right"), ("s/example", "right"), ("failures", "left"),
                              ("evaluated", "left")):
            table.add_column(name, justify=justify, overflow="fold")
        for r in rec.results:
            failures = ", ".join(f"{k}={v}" for k, v in sorted(r.failures.items())) or "-"
            table.add_row(escape(r.task), escape(r.split), escape(r.lm_key), _score(r), _ci(r), str(r.n),
                          _dollars(r), str(r.tokens), str(r.llm_calls), f"{r.latency_s:.2f}", escape(failures),
                          r.evaluated_at)
        console.print(table)


@app.command()
def diff(
    old: str = typer.Argument(..., help="From: " + ID_HELP),
    new: str = typer.Argument(..., help="To: " + ID_HELP),
    archive: Path = _archive_option(),
) -> None:
    """Structural diff between two candidates: agents, fields, edges, topology."""
    with _opened(archive) as arch:
        a, b = arch.get(old), arch.get(new)
        changes = diff_genomes(arch.genome(a.genome_id), arch.genome(b.genome_id))
        console.print(f"[bold]{a.short_id}[/bold] {escape(a.name)} -> [bold]{b.short_id}[/bold] {escape(b.name)}",
                      highlight=False, soft_wrap=True)
        if not changes:
            console.print("no change")
        colours = {"+": "green", "-": "red", "~": "yellow"}
        for change in changes:
            console.print(f"[{colours[change.op]}]{escape(str(change))}[/{colours[change.op]}]", highlight=False,
                          soft_wrap=True)


def _add_nodes(tree: Tree, node: LineageNode) -> None:
    for child in node.children:
        if child.repeated:  # a shared ancestor (crossover) already expanded elsewhere in this tree
            tree.add(f"[dim]{child.record.short_id} {escape(child.record.name)} (shown above)[/dim]")
        else:
            _add_nodes(tree.add(_label(child.record)), child)


@app.command()
def lineage(
    candidate: str = typer.Argument(..., help=ID_HELP),
    depth: int = typer.Option(6, "--depth", "-d", help="Generations to show each way (0: all)."),
    archive: Path = _archive_option(),
) -> None:
    """Ancestors and descendants of a candidate as trees."""
    with _opened(archive) as arch:
        rec = arch.get(candidate)
        lin = arch.lineage(rec.genome_id, depth=depth or None)
        up = Tree(f"ancestors of {_label(rec)}  ({len(lin.ancestors)})")
        _add_nodes(up, lin.ancestor_tree(rec))
        down = Tree(f"descendants of {_label(rec)}  ({len(lin.descendants)})")
        _add_nodes(down, lin.descendant_tree(rec))
        console.print(up)
        console.print(down)


@app.command()
def front(
    task: str = typer.Option(..., "--task", "-t", help="Task whose results define the front."),
    split: str | None = typer.Option(None, "--split", help="Only results on this split."),
    archive: Path = _archive_option(),
) -> None:
    """Quality-vs-cost Pareto front on a task (no candidate is both better and cheaper), cheapest first."""
    with _opened(archive) as arch:
        rows = arch.front(task, split=split)
        table = Table(title=f"Pareto front on {escape(task)}: {len(rows)} candidates", title_justify="left")
        for name in ("id", "name", "gen", "made by", "score", "95% CI", "cost", "n"):
            table.add_column(name, justify="right" if name in ("gen", "score", "cost", "n") else "left",
                             no_wrap=name not in ("name", "made by"), overflow="fold", min_width=None)
        for rec in rows:
            r = rec.result_for(task, split)
            table.add_row(rec.short_id, escape(rec.name), str(rec.generation), escape(rec.operator), _score(r),
                          _ci(r), _dollars(r), str(r.n) if r else "-")
        console.print(table)


@app.command()
def promote(
    candidate: str = typer.Argument(..., help=ID_HELP),
    archive: Path = _archive_option(),
) -> None:
    """Mark a candidate promoted (git tag promoted/<id> and the index)."""
    with _opened(archive) as arch:
        rec = arch.promote(candidate)
        console.print(f"[green]promoted[/green] {rec.short_id} {escape(rec.name)}", highlight=False)


@app.command()
def prune(
    candidate: str = typer.Argument(..., help=ID_HELP),
    archive: Path = _archive_option(),
) -> None:
    """Mark a candidate pruned: hidden from list and front (use --all), kept in git forever."""
    with _opened(archive) as arch:
        rec = arch.prune(candidate)
        console.print(f"[yellow]pruned[/yellow] {rec.short_id} {escape(rec.name)}", highlight=False)


@app.command()
def log(
    limit: int = typer.Option(20, "--limit", "-n", help="How many events (0: all)."),
    archive: Path = _archive_option(),
) -> None:
    """Recent archive events (add, result, promote, prune), newest first."""
    with _opened(archive) as arch:
        events = arch.log(limit or None)
        table = Table(title=f"last {len(events)} events", title_justify="left")
        wide = console.width >= 110  # the summary names the candidate anyway; drop the name column if narrow
        table.add_column("time (UTC)", no_wrap=True)
        table.add_column("event", no_wrap=True)
        table.add_column("id", no_wrap=True)
        if wide:
            table.add_column("name", overflow="fold", min_width=8)
        table.add_column("summary", overflow="fold", min_width=20)
        for e in events:
            when = e.at.replace("T", " ").replace("+00:00", "")
            table.add_row(when, e.kind, e.short_id, *([escape(e.name)] if wide else []), escape(e.summary))
        console.print(table)


def main() -> None:
    """Run this sub-app on its own (``python -m masforge.cli.archive``)."""
    app(prog_name="masforge archive")


if __name__ == "__main__":
    main()
