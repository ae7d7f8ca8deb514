"""Load a module written by ``masforge export --format python`` back for evaluation (transfer:
``masforge evaluate exported.py``).

:func:`load_exported` turns an exported module into something :class:`~masforge.evaluators.runner.Evaluator`
can score (a *system factory*): config exports are imported and driven through masforge's LM client (cache,
ledger, budget, trace); code exports are never imported, their ``SYSTEM_CODE`` runs in masforge's sandbox.
"""

from __future__ import annotations

import ast
import importlib.util
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from masforge.errors import GenomeError, MasforgeError
from masforge.export.marker import EXPORT_FORMAT_VERSION, MARKER_NAME, read_marker
from masforge.genome.schema import Genome


def _literal(tree: ast.Module, name: str, origin: str) -> Any:
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in node.targets):
            try:
                return ast.literal_eval(node.value)
            except ValueError:
                break
    raise GenomeError(f"{origin}: exported module has no literal {name}; re-export it with `masforge export`")


@dataclass
class ExportedSystem:
    """A *system factory* for :meth:`Evaluator.evaluate`: ``factory(client)`` returns a callable system whose
    result has ``.outputs``, ``.trace`` and ``.candidates`` like :class:`~masforge.execution.result.SystemResult`."""

    path: Path
    kind: str
    id: str
    name: str
    inputs: list[str]
    outputs: list[str]
    make: Callable[[Any], Callable[..., Any]]

    @property
    def short_id(self) -> str:
        """First 12 hex digits of the genome id the module was exported from."""
        return self.id[:12]

    def __call__(self, client: Any) -> Callable[..., Any]:
        return self.make(client)


def _import_module(path: Path) -> ModuleType:
    name = f"masforge_exported_{re.sub(r'[^A-Za-z0-9_]', '_', path.stem)}_{abs(hash(str(path.resolve())))}"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise GenomeError(f"{path}: cannot import the exported module")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses and pickling look the module up by name
    try:
        spec.loader.exec_module(module)
    except Exception as exc:
        sys.modules.pop(name, None)
        raise GenomeError(f"{path}: importing the exported module failed: {type(exc).__name__}: {exc}") from None
    if not callable(getattr(module, "build", None)):
        raise GenomeError(f"{path}: an exported module must define build(lm=...)")
    return module


def load_exported(path: str | Path) -> ExportedSystem:
    """Load an exported module for evaluation.

    Config exports are imported (it is our own export) and built on a :class:`~masforge.lm.dspy_lm.MasforgeLM` per
    LM alias, so their LM calls go through the evaluator's client: cache, cost ledger, budget and trace (each
    agent call is recorded with :func:`masforge.lm.trace.agent_call`). Code exports are not imported: their
    ``SYSTEM_CODE`` is read with ``ast`` and runs in masforge's sandbox as a code genome.
    """
    p = Path(path)
    marker = read_marker(p)
    if marker is None:
        raise GenomeError(f"{p}: not a module written by `masforge export --format python` (no {MARKER_NAME})")
    if int(marker.get("format", 0)) > EXPORT_FORMAT_VERSION:
        raise GenomeError(f"{p}: export format {marker.get('format')} is newer than this masforge supports")
    tree = ast.parse(p.read_text(encoding="utf-8"))
    inputs = list(_literal(tree, "INPUTS", str(p)))
    outputs = list(_literal(tree, "OUTPUTS", str(p)))
    name = str(_literal(tree, "NAME", str(p)))
    if marker.get("kind") == "code":
        from masforge.execution.code import CodeSystem

        genome = Genome(kind="code", name=name, inputs=inputs, outputs=outputs,
                        code=str(_literal(tree, "SYSTEM_CODE", str(p))))
        return ExportedSystem(p, "code", genome.id, name, inputs, outputs,
                              lambda client: CodeSystem(genome, client))
    module = _import_module(p)
    return ExportedSystem(p, "config", str(marker.get("genome_id", "")), name, inputs, outputs,
                          lambda client: _ExportedRunner(module, client))


class _ExportedRunner:
    """An imported config export driven through masforge's LM client; returns SystemResult's."""

    def __init__(self, module: ModuleType, client: Any) -> None:
        from masforge.errors import BudgetExceeded
        from masforge.lm.dspy_lm import MasforgeLM
        from masforge.lm.trace import agent_call

        self.module = module
        aliases = {spec.get("lm", "worker") for spec in getattr(module, "AGENTS", {}).values()} | {"worker"}
        lms = {alias: MasforgeLM(client, alias) for alias in aliases}
        self.program = module.build(lm=lms["worker"], lms=lms, trace_hook=agent_call, fatal=(BudgetExceeded,))

    def __call__(self, **inputs: Any) -> Any:
        from masforge.execution.result import SystemResult, SystemRunError
        from masforge.lm.trace import recording

        with recording() as trace:
            try:
                outputs, candidates = self.program.run(**inputs)
            except MasforgeError:
                raise
            except Exception as exc:
                if type(exc).__name__ == "SystemRunError":
                    raise SystemRunError(str(exc)) from exc
                raise
        return SystemResult(outputs=outputs, trace=trace, candidates=candidates)
