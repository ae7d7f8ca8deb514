"""coevolve's slow loop can make every kind of structural edit, the execution genes included."""

from masforge.search.operators.execution import EXECUTION_EDITS
from masforge.search.strategies.coevolve import TOPOLOGY_EDITS, Coevolve


def test_the_slow_loop_may_add_execution_genes_by_default() -> None:
    assert set(EXECUTION_EDITS) <= set(TOPOLOGY_EDITS)
    assert set(EXECUTION_EDITS) <= set(Coevolve().edits)
