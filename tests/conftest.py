"""Test-suite set-up: built-in benchmark tasks read small fixture files unless full data sets are given.

``MASFORGE_DATA_DIR`` set by the caller (``.ci/run`` does when the full sets are beside the checkout) is kept,
so the suite runs on the full sets; otherwise it points at ``tests/fixtures/data`` (a handful of hand-written
records per benchmark in each set's real file format). Nothing is ever downloaded: ``MASFORGE_OFFLINE`` is
set, and ``MASFORGE_LM_CACHE`` is not passed on. Tests that need the full sets take the ``full_data_dir`` fixture
and are skipped, with the reason, without them.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

FIXTURE_DATA = Path(__file__).resolve().parent / "fixtures" / "data"
FULL_DATA = os.environ.get("MASFORGE_DATA_DIR") or None  # what the caller gave, before the default below

os.environ.setdefault("MASFORGE_DATA_DIR", str(FIXTURE_DATA))
os.environ["MASFORGE_OFFLINE"] = "1"
# An answer cache the caller points at (a benchmark's) would answer the suite's fake calls: tests that want one
# set their own.
os.environ.pop("MASFORGE_LM_CACHE", None)


@pytest.fixture
def fixture_data_dir() -> Path:
    """The committed fixture files (``tests/fixtures/data``)."""
    return FIXTURE_DATA


@pytest.fixture
def full_data_dir() -> Path:
    """The folder of full benchmark data sets given in ``MASFORGE_DATA_DIR``; the test is skipped without it."""
    if FULL_DATA is None or not Path(FULL_DATA).is_dir() or Path(FULL_DATA).resolve() == FIXTURE_DATA:
        pytest.skip("needs the full benchmark data sets: set MASFORGE_DATA_DIR to a folder holding them")
    return Path(FULL_DATA)
