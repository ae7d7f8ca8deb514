"""Exporting a found system as code that runs without masforge (:mod:`.writer`) and loading such an export
back for evaluation (:mod:`.loader`)."""

from masforge.export.loader import ExportedSystem, load_exported
from masforge.export.marker import is_exported, read_marker
from masforge.export.writer import (
    CODE_WARNING,
    EXPORT_FORMATS,
    export_genome,
    resolve_export,
    resolve_genome,
    write_export,
)

__all__ = ["CODE_WARNING", "EXPORT_FORMATS", "ExportedSystem", "export_genome", "is_exported", "load_exported",
           "read_marker", "resolve_export", "resolve_genome", "write_export"]
