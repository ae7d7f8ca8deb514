"""masforge.search: what to try next.

``engine`` runs a search (run folder, archive, LMs, seeds, the strategy pipeline, held-out re-scoring);
``context`` is what strategies see (submit a genome, get a scored candidate); ``fitness`` is what they
maximise; ``selection`` picks parents; ``population`` holds candidates; ``features`` and ``surrogate``
describe genomes numerically; ``operators/`` make new genomes (structural edits, the meta-agent, its
proposal format and prompt shaping); ``strategies/`` are the search methods, one per module.
"""
