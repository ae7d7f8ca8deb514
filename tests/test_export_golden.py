"""An export's text does not change by accident: every seed and two portfolios export to the text recorded in
``tests/fixtures/exports`` (made by the writer before it was split by format, issue 25).

What the writer composes is compared byte for byte: the docstring, imports, marker, the system as data, the
found-with LM, the entry point and the default tools. Two things are left out, because they change with other
modules, not with the writer: masforge's version, and the inlined runtime and tool sources between the
"# Runtime:" and "# Default tool implementations" rules (their sameness with masforge is what
test_export_report.py checks by running the exports). After an intended change of an export, rewrite the
fixtures with ``MASFORGE_UPDATE_GOLDEN=1 pytest tests/test_export_golden.py`` and review their diff.
"""

from __future__ import annotations

import math
import os
import re
from pathlib import Path
from typing import Any

import pytest

from masforge import __version__
from masforge.export import export_genome
from masforge.genome.io import parse_genome_text
from masforge.genome.router import Router
from masforge.genome.schema import Genome, Portfolio
from masforge.seeds import load_seed, seed_names
from masforge.standalone.router import NUMERIC_FEATURES, feature_count

GOLDEN = Path(__file__).resolve().parent / "fixtures" / "exports"
UPDATE = os.environ.get("MASFORGE_UPDATE_GOLDEN") == "1"
# Explicit LMs: the default one depends on $MASFORGE_LM. A hosted LM shows the endpoint and key variable lines,
# the embedded model the lines on starting it.
HOSTED: dict[str, Any] = {"model": "openai/gpt-4o-mini", "api_base": "https://example.invalid/v1",
                          "api_key_env": "MY_KEY", "temperature": 0.3, "max_tokens": 512}
LMS: list[Any] = [HOSTED, "local"]
_RUNTIME = re.compile(r"(\n# Runtime: masforge's own [^\n]*\n# =+\n).*?(\n# =+\n# Default tool implementations)", re.S)

MEMBER = """
name: {name}
agents:
  - {{id: solver, role: {name} solver, instructions: {text}}}
topology: {{edges: [input -> solver, solver -> output]}}
"""


def _portfolios() -> dict[str, Genome]:
    """A two-member portfolio routed by length with escalation, and one of two seeds the router always sends to
    the second (the first never picked)."""
    coef = [0.0] * feature_count(256)
    coef[256 + NUMERIC_FEATURES.index("log_chars")] = 10.0
    members = [parse_genome_text(MEMBER.format(name="quick", text="Answer at once.")),
               parse_genome_text(MEMBER.format(name="careful", text="Check every step."))]
    by_length = Router(classes=[0, 1], coef=[coef], intercept=[-math.log1p(60)])
    return {
        "portfolio_by_length": Genome(kind="portfolio", name="pf", description="Quick or careful, by length.",
                                      portfolio=Portfolio(members=members, router=by_length, escalation=[0, 1])),
        "portfolio_constant": Genome(kind="portfolio", name="pf constant", portfolio=Portfolio(
            members=[load_seed("cot"), load_seed("react_calculator")], router=Router(classes=[1]))),
    }


def _cases() -> list[tuple[str, Genome, Any]]:
    genomes = [(name, load_seed(name)) for name in seed_names()] + list(_portfolios().items())
    return [(name, genome, LMS[i % len(LMS)]) for i, (name, genome) in enumerate(genomes)]


def _normalised(text: str) -> str:
    head, runtime_rule, tools_rule, tail = _RUNTIME.split(text, maxsplit=1)
    return (head.replace(__version__, "<version>") + runtime_rule + "<masforge's runtime and tool sources>"
            + tools_rule + tail)


@pytest.mark.parametrize(("name", "genome", "lm"), _cases(), ids=[c[0] for c in _cases()])
def test_an_export_is_the_recorded_text(name: str, genome: Genome, lm: Any) -> None:
    text = _normalised(export_genome(genome, "python", f"{name}_export.py", lm=lm))
    path = GOLDEN / f"{name}.py.txt"
    if UPDATE:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    assert path.is_file(), f"{path.name}: no recorded export; write it with MASFORGE_UPDATE_GOLDEN=1"
    assert text == path.read_text(encoding="utf-8")


def test_the_fixtures_are_the_cases_and_keep_the_writers_own_text() -> None:
    """No stale fixture, and the normalising leaves what the writer writes: the head and the tail."""
    assert sorted(p.name for p in GOLDEN.iterdir()) == sorted(f"{c[0]}.py.txt" for c in _cases())
    text = (GOLDEN / "debate.py.txt").read_text(encoding="utf-8")
    assert '"masforge": "<version>"' in text and "AGENTS: dict[str, dict[str, Any]] = {" in text
    assert "FOUND_WITH: dict[str, Any] = {" in text and "def build(" in text and "DEFAULT_TOOLS" in text
    assert "def run_python(" not in text  # the runtime's own sources are left out
