"""Talking to language models: the client (:mod:`.client`: cache, retries, concurrency, ledger and budgets in one
call), its configuration (:mod:`.config`), the answer cache (:mod:`.cache`), the cost ledger (:mod:`.ledger`) and
budgets (:mod:`.budget`), direct endpoint HTTP (:mod:`.endpoint`), measured rates (:mod:`.rates`), the ``--lm fake``
model (:mod:`.fake`), the dspy bridge (:mod:`.dspy_lm`), prompt adapters (:mod:`.adapters`) and the trace an
answer leaves (:mod:`.trace`: the LM calls of each agent call).

The request itself is built by :mod:`masforge.standalone.connect`, the code an exported system carries,
so masforge and its exports send the same request."""
