"""Export a genome as something that runs without masforge (loading it back: :mod:`masforge.export.loader`).

Formats (``masforge export ID --format ...``):

* ``yaml`` / ``json``: the genome file itself (same text as the archive stores; same genome id).
* ``python``: ONE standalone Python module that needs only ``dspy`` and ``litellm``.

  - A **config** genome becomes readable code: the agents' full instructions as constants, the wiring as plain
    data, and masforge's own runtime inlined (:mod:`masforge.standalone`, see :mod:`.inline`): the same
    code masforge runs genomes on, so the prompt adapters, message passing, sample indices and aggregation are
    masforge's by construction and on the same deterministic LM the export gives the same outputs (the tests
    check this for every config seed). ``build()`` returns a ``dspy.Module``; ``python exported.py "question"``
    answers from the command line.
  - A **code** genome becomes a module that states at the top that its code came from an automated search and
    must be run in a sandbox; ``llm()`` and ``tool()`` are implemented with litellm. The searched code is kept
    verbatim in ``SYSTEM_CODE`` and executed in its own namespace.

Both default to the LM the system was found with (``FOUND_WITH``: model, endpoint, sampling, prompt adapter),
recorded from its archive result at export time (:mod:`.found_with`); ``local`` is masforge's embedded model,
started through masforge where it is installed.

Each format is written by a module of its own (:mod:`.config_export`, :mod:`.portfolio_export`,
:mod:`.code_export`) in the frame they share (:mod:`.frame`: head, usage notes, runtime and tail).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from masforge.errors import ArchiveError, GenomeError
from masforge.export.code_export import CODE_WARNING, export_code
from masforge.export.config_export import export_config
from masforge.export.marker import is_exported
from masforge.export.portfolio_export import export_portfolio
from masforge.files import write_text_file
from masforge.genome.schema import Genome
from masforge.lm.config import LMConfig, parse_lm
from masforge.redact import redact

__all__ = ["CODE_WARNING", "EXPORT_FORMATS", "export_genome", "found_with_settings", "resolve_export",
           "resolve_genome", "write_export"]

EXPORT_FORMATS = ("python", "yaml", "json")


# ------------------------------------------------------------------------------------------------
# resolving what to export


def resolve_genome(ref: str, archive: str | Path | None = None) -> Genome:
    """The genome ``ref`` names: a genome file or a seed name (as everywhere, :func:`masforge.seeds.resolve_genome`),
    or a genome id prefix in ``archive``. An already exported module is refused with the way out."""
    from masforge.archive.index import is_alias
    from masforge.seeds import resolve_genome as resolve_file_or_seed
    from masforge.seeds import seed_names

    path = Path(ref)
    if path.is_file() and is_exported(path):
        raise GenomeError(f"{path}: is already an exported module; export the genome it came from "
                          "(its id is in MASFORGE_EXPORT) instead")
    if not path.is_file() and ref not in seed_names() and (re.fullmatch(r"[0-9a-fA-F]{1,64}", ref) or is_alias(ref)):
        from masforge.archive.store import Archive

        where = Path(archive) if archive is not None else Path("runs/latest/archive")
        if not where.exists():
            raise ArchiveError(f"{where}: no archive there to look up id '{ref}' (pass --archive PATH, "
                               "a run's archive is <run folder>/archive)")
        with Archive.open(where) as arch:
            return arch.genome(ref)
    return resolve_file_or_seed(ref, also="a genome id (hex digits), best, best-new or seed:<name>")


def resolve_export(ref: str, archive: str | Path | None = None) -> tuple[Genome, LMConfig | None]:
    """The genome ``ref`` names (see :func:`resolve_genome`) and, for a candidate looked up in ``archive``, the LM
    it was found with (None for a genome file or a seed, or a candidate with no result yet)."""
    from masforge.export.found_with import found_with
    from masforge.seeds import seed_names

    genome = resolve_genome(ref, archive)
    if Path(ref).is_file() or ref in seed_names():
        return genome, None
    return genome, found_with(genome.id, archive if archive is not None else Path("runs/latest/archive"))


def export_genome(genome: Genome, fmt: str = "python", filename: str | None = None,
                  lm: LMConfig | str | dict[str, Any] | None = None) -> str:
    """The text of ``genome`` exported as ``python``, ``yaml`` or ``json``. For a Python export, ``filename``
    names the module in its usage notes and ``lm`` is the LM the system was found with, its default LM (None:
    masforge's default, ``$MASFORGE_LM`` or the embedded model)."""
    from masforge.genome.io import dump_genome
    from masforge.genome.validate import validate

    if fmt not in EXPORT_FORMATS:
        raise GenomeError(f"unknown export format '{fmt}' (use {', '.join(EXPORT_FORMATS)})")
    if fmt in ("yaml", "json"):
        return dump_genome(genome, fmt)
    validate(genome)
    name = filename or f"{_module_name(genome.name)}.py"
    found = found_with_settings(parse_lm(lm))
    if genome.kind == "code":
        return export_code(genome, name, found)
    if genome.kind == "portfolio":
        return export_portfolio(genome, name, found)
    return export_config(genome, name, found)


def found_with_settings(cfg: LMConfig) -> dict[str, Any]:
    """What an export records of the LM its system was found with (never a key: at most the name of the
    environment variable that holds it)."""
    local = cfg.is_local or cfg.is_fake
    return {"model": cfg.model, "api_base": None if local else cfg.api_base,
            "api_key_env": None if local else cfg.api_key_env, "temperature": cfg.temperature,
            "max_tokens": cfg.max_tokens, "adapter": cfg.adapter, "extra": dict(cfg.extra)}


def _module_name(name: str) -> str:
    text = re.sub(r"[^A-Za-z0-9_]+", "_", name).strip("_").lower() or "system"
    return text if text[0].isalpha() else f"system_{text}"


def write_export(text: str, output: str | Path) -> Path:
    """Write an export to ``output`` (parents created; a symlink there is replaced, never followed); returns the
    path."""
    return write_text_file(output, redact(text))
