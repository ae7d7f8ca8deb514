"""Finds masforge's packages: every folder under the roots that pyproject's ``package-dir`` maps (``genome/`` is
``masforge.genome``, ...). setuptools' own discovery cannot rename folders like that, and a hand-kept list forgot
new sub-packages; folders without ``__init__.py`` (templates, the seed inventory) are data packages and count too.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

from setuptools import find_namespace_packages, setup

ROOT = Path(__file__).resolve().parent


def masforge_packages(root: Path = ROOT) -> list[str]:
    """Every package and data folder under the mapped roots, by its installed dotted name."""
    mapping: dict[str, str] = tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8"))[
        "tool"]["setuptools"]["package-dir"]
    found: set[str] = set()
    for name, folder in mapping.items():
        found.add(name)
        for sub in find_namespace_packages(where=str(root / folder), exclude=["*__pycache__*"]):
            found.add(f"{name}.{sub}")
    return sorted(found)


if __name__ == "__main__":
    setup(packages=masforge_packages())
