"""Prompt adapters, as the rest of masforge names them: the implementation is in
:mod:`masforge.standalone.adapters` (an exported system carries it along) and the names in
:mod:`masforge.genome.names` (a genome names its adapter), re-exported here."""

from masforge.genome.names import ADAPTERS, AdapterName
from masforge.standalone.adapters import choose_adapter, make_adapter, resolve_adapter

__all__ = ["ADAPTERS", "AdapterName", "choose_adapter", "make_adapter", "resolve_adapter"]
