"""masforge.search: what to try next.

``engine`` runs a search (run folder, archive, LMs, seeds, the strategy pipeline, held-out re-scoring);
``context`` is what strategies see (submit a ``proposal``, get a scored candidate), wiring the search's parts:
the evaluation ``pipeline``, the ``population`` and its incumbent, the ``acceptance`` and ``racing`` policies,
``credit``, ``costing``, the ``replay`` of a resumed run, ``retries`` of incomplete evaluations and ``stopping``;
``fitness`` is what strategies maximise; ``selection`` picks parents; ``features`` and ``surrogate``
describe genomes numerically; ``operators/`` make new genomes (structural edits, the meta-agent, its
proposal format and prompt shaping); ``strategies/`` are the search methods, one per module.
"""
