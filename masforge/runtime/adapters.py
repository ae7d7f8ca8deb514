"""Prompt adapters, as the rest of masforge names them: the implementation is in
:mod:`masforge.runtime.standalone.adapters` (an exported system carries it along), re-exported here."""

from masforge.runtime.standalone.adapters import (
    ADAPTERS,
    AdapterName,
    choose_adapter,
    make_adapter,
    resolve_adapter,
)

__all__ = ["ADAPTERS", "AdapterName", "choose_adapter", "make_adapter", "resolve_adapter"]
