"""What runs below a genome: the LM client (:mod:`.lm` with its configuration, cache, endpoint and ledger),
the dspy bridge (:mod:`.dspy_lm`), prompt adapters (:mod:`.adapters`, :mod:`.plain_adapter`), the prompt
templates (:mod:`.prompts`), the embedded local model (:mod:`.local_model`), the sandbox for generated code
(:mod:`.sandbox`, its OS layers in :mod:`.isolation`), tools (:mod:`.tools`), traces (:mod:`.trace`) and
the ``--lm fake`` model (:mod:`.fake_lm`)."""
