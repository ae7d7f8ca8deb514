"""masforge: a self-evolving designer of multi-agent LLM systems.

Public API (imported lazily so ``import masforge`` stays fast)::

    import masforge
    result = masforge.optimize("rg:basic_arithmetic", strategy="evolve", budget=10, lm="fake")
    result.best, result.best_new, result.verdict.sentence, result.test_scores
"""

from __future__ import annotations

import os
from typing import Any

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # litellm must never fetch its cost map

from masforge.threadsafe_ast import install as _serialise_ast_parse  # noqa: E402

_serialise_ast_parse()  # before any thread of masforge or of the libraries it drives parses Python

__version__ = "0.1.0"

_LAZY = {
    "optimize": ("masforge.api", "optimize"),
    "resume": ("masforge.api", "resume"),
    "Genome": ("masforge.genome.schema", "Genome"),
    "Agent": ("masforge.genome.schema", "Agent"),
    "Topology": ("masforge.genome.schema", "Topology"),
    "load_genome": ("masforge.genome.io", "load_genome"),
    "save_genome": ("masforge.genome.io", "save_genome"),
    "validate": ("masforge.genome.validate", "validate"),
    "compile_genome": ("masforge.execution.compile", "compile_genome"),
    "Task": ("masforge.evaluators.tasks", "Task"),
    "get_task": ("masforge.evaluators.tasks", "get_task"),
    "register_task": ("masforge.evaluators.tasks", "register_task"),
    "evaluate": ("masforge.evaluators.runner", "evaluate"),
    "Evaluator": ("masforge.evaluators.runner", "Evaluator"),
    "compare": ("masforge.evaluators.compare", "compare"),
    "LMClient": ("masforge.lm.client", "LMClient"),
    "LMConfig": ("masforge.lm.client", "LMConfig"),
    "Budget": ("masforge.search.budget", "SearchBudget"),  # every limit of a search, spending ones included
    "register_tool": ("masforge.sandbox.tools", "register_tool"),
    "Archive": ("masforge.archive.store", "Archive"),
    "RunConfig": ("masforge.search.config", "RunConfig"),
    "load_seed": ("masforge.seeds", "load_seed"),
    "build_portfolio": ("masforge.search.portfolio", "build_portfolio"),
}

__all__ = sorted(_LAZY)


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        module, attr = _LAZY[name]
        value = getattr(importlib.import_module(module), attr)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'masforge' has no attribute {name!r}")
