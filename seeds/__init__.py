"""Hand-designed starting systems, shipped as genome files (YAML config genomes, ``.py`` code genomes)."""

from __future__ import annotations

from importlib import resources
from pathlib import Path

from masforge.errors import GenomeError
from masforge.genome.io import load_genome
from masforge.genome.schema import Genome

_SUFFIXES = (".yaml", ".yml", ".py")


def seed_paths() -> list[Path]:
    """Paths of every shipped seed genome, sorted by file name."""
    root = Path(str(resources.files("masforge.seeds")))
    return sorted(p for p in root.iterdir() if p.suffix in _SUFFIXES and not p.name.startswith("_"))


def seed_names() -> list[str]:
    """Seed names as accepted by :func:`load_seed` (file stems)."""
    return [p.stem for p in seed_paths()]


def load_seed(name: str) -> Genome:
    """The seed genome called ``name`` (a file stem such as ``cot``)."""
    for path in seed_paths():
        if path.stem == name:
            return load_genome(path)
    raise GenomeError(f"unknown seed '{name}' (seeds: {', '.join(seed_names())})")


def load_seeds(names: list[str] | None = None) -> list[Genome]:
    """Several seeds (all when ``names`` is None)."""
    return [load_seed(n) for n in (names or seed_names())]
