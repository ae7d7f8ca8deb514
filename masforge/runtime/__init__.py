"""What runs below a genome: the LM client (:mod:`.lm` with its configuration, cache, endpoint and ledger),
the dspy bridge (:mod:`.dspy_lm`), the embedded local model (:mod:`.local_model`), the sandbox for generated
code (:mod:`.sandbox`, its OS layers in :mod:`.isolation`), tools (:mod:`.tools`), traces (:mod:`.trace`), the
``--lm fake`` model (:mod:`.fake_lm`), prompt template files (:mod:`.prompts`), and the part an exported system
carries with it (:mod:`.standalone`: execution semantics, prompt adapters, the exported LM and command line)."""
