"""Which LM a system was found with, read back from its archive results (an export's default LM).

A result is keyed by its LM configuration's :meth:`~masforge.lm.config.LMConfig.key` (``model@digest``),
which names the model but cannot be inverted into its settings. The settings are recovered from the run that
wrote the archive (``config.yaml`` beside it) or from the model's defaults, whichever gives the same key;
failing both, the model with its default settings.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import yaml

from masforge.errors import ConfigError
from masforge.lm.config import LMConfig, parse_lm


def lm_from_key(lm_key: str, known: Sequence[LMConfig] = ()) -> LMConfig:
    """The LM configuration behind ``lm_key`` (an LM's key, or a results key: the LM's key and "#read<N>"): one of
    ``known`` with that key, else the model's defaults."""
    lm_key = lm_key.split("#read", 1)[0]
    model = lm_key.rsplit("@", 1)[0]
    try:
        guesses = [*known, parse_lm(model)]
    except ConfigError:
        guesses = list(known)
    for cfg in guesses:
        if cfg.key() == lm_key:
            return cfg
    try:
        return parse_lm(model)  # the model is right; settings its key held are not readable back
    except ConfigError:
        return LMConfig(model=model)


def _run_lms(archive: Path) -> list[LMConfig]:
    """The worker and meta LMs of the run whose folder holds ``archive`` (none if unreadable)."""
    path = archive.parent / "config.yaml"
    try:
        data: Any = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError):
        return []
    if not isinstance(data, dict):
        return []
    found = []
    for field in ("lm", "meta_lm"):
        try:
            cfg = parse_lm(data.get(field))
        except ConfigError:
            continue
        if field == "lm" and data.get("api_base"):
            cfg = replace(cfg, api_base=str(data["api_base"]))
        found.append(cfg)
    return found


def found_with(genome_id: str, archive: str | Path) -> LMConfig | None:
    """The LM the candidate ``genome_id`` was first evaluated with in ``archive`` (None: no result there)."""
    from masforge.archive.store import Archive

    where = Path(archive)
    with Archive.open(where) as arch:
        record = arch.get(genome_id)
        # a portfolio is built from its members' results on one LM, before any result of its own
        built_on = arch.genome(genome_id).metadata.get("lm_key") if record.kind == "portfolio" else None
    results = sorted(record.results, key=lambda r: r.evaluated_at)
    if not results:
        return lm_from_key(str(built_on), _run_lms(where)) if built_on else None
    return lm_from_key(results[0].lm_key, _run_lms(where))
