"""The measured seconds per LM request (masforge.lm.rates): kept per model and endpoint, in a bounded file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from masforge.lm import rates
from masforge.lm.config import LMConfig


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("MASFORGE_CACHE", str(tmp_path))
    return tmp_path / rates.RATES_FILE


def _stub(port: int) -> LMConfig:
    return LMConfig(model="openai/stub", api_base=f"http://127.0.0.1:{port}/v1")


def test_the_rates_file_keeps_only_the_most_recently_measured_endpoints(cache: Path) -> None:
    # every stub server of a test run is an endpoint of its own: the file must not grow with them
    for port in range(rates.MAX_ENTRIES + 20):
        rates.record(_stub(port), 0.2)
        rates.save()
    kept = json.loads(cache.read_text(encoding="utf-8"))
    assert len(kept) == rates.MAX_ENTRIES
    newest = _stub(rates.MAX_ENTRIES + 19)
    assert rates.seconds_per_call(newest) == (pytest.approx(0.2), True)
    assert rates.seconds_per_call(_stub(0)) == (rates.GUESSES["hosted"], False)  # the oldest made room


def test_a_rate_is_the_running_mean_of_its_requests(cache: Path) -> None:
    local = LMConfig(model="local")
    for seconds in (4.0, 6.0):
        rates.record(local, seconds)
    rates.save()
    rates.record(local, 8.0)
    rates.save()
    assert rates.seconds_per_call(local) == (pytest.approx(6.0), True)
