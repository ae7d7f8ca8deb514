"""``best``, ``best-new`` and ``seed:<name>`` are accepted wherever an archive id is (issue 39): the README's tour
copies no id by hand."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

import masforge
from masforge.archive.store import Archive
from masforge.cli import app
from masforge.errors import ArchiveError


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Any:
    out = tmp_path_factory.mktemp("aliases") / "runs"
    return masforge.optimize("rg:basic_arithmetic", strategy="random", budget=5, lm="fake",
                             seeds=["io", "self_consistency"], limit=4, test_top_k=0, output=out)


def test_aliases_name_the_candidates_archive_list_shows(run: Any) -> None:
    with Archive.open(run.archive_path) as archive:
        listed = archive.list()
        assert archive.resolve("best") == listed[0].genome_id
        new = [r for r in listed if r.operator != "seed"]
        assert archive.resolve("best-new") == new[0].genome_id and archive.get("BEST-NEW").operator != "seed"
        assert archive.get("seed:io").name == "io" and archive.get("seed:io").operator == "seed"
        # a seed's file name where its genome name differs only by - and _
        assert archive.get("seed:self_consistency").name == "self-consistency"
        with pytest.raises(ArchiveError, match="no seed named 'cot' in this archive; its seeds: io, self-consistency"):
            archive.resolve("seed:cot")
        assert archive.lineage("best-new").ancestors  # a new system has a parent


def test_every_command_that_takes_an_id_takes_an_alias(run: Any, tmp_path: Path) -> None:
    arch = str(run.archive_path)
    runner = CliRunner()
    env = {**os.environ, "COLUMNS": "200"}
    with Archive.open(run.archive_path) as archive:
        best_new = archive.get("best-new")
    for args in (["archive", "show", "best", "-a", arch], ["archive", "lineage", "best-new", "-a", arch],
                 ["archive", "diff", "seed:io", "best-new", "-a", arch],
                 ["export", "best-new", "-a", arch, "-o", str(tmp_path / "x.py")]):
        result = runner.invoke(app, args, env=env)
        assert result.exit_code == 0, (args, result.output)
    assert best_new.genome_id in (tmp_path / "x.py").read_text()
    shown = runner.invoke(app, ["archive", "show", "best-new", "-a", arch], env=env).output
    assert best_new.short_id in shown
    wrong = runner.invoke(app, ["archive", "show", "seed:nosuch", "-a", arch], env=env)
    assert wrong.exit_code == 1 and "no seed named 'nosuch'" in wrong.output
