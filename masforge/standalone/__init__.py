"""The part of masforge's runtime that an exported system carries with it.

``masforge export --format python`` writes one file that runs without masforge; its runtime is these modules,
inlined verbatim (:mod:`masforge.export.inline`), and masforge itself runs genomes on the very same code, so
export and masforge cannot drift apart:

* :mod:`.prompts`: the runtime's prompt templates (the files in ``templates/``: role line, plain-chat reply forms,
  program-of-thought and refine steps) and how they are filled;
* :mod:`.adapters` and :mod:`.plain_adapter`: how a dspy module's fields become a prompt (``auto``, ``chat``,
  ``json``, ``plain``);
* :mod:`.system`: a config genome's execution semantics (agent steps, message passing, copies, aggregation);
* :mod:`.code_system`: running a code genome's ``forward`` with ``llm()``/``tool()`` (the export's way; masforge
  runs it in its sandbox and shares the call rules);
* :mod:`.connect`: reaching an LM (the embedded model through masforge when it is installed, API keys, the
  litellm request masforge sends); :mod:`.litellm_lm`: that request as a dspy LM;
* :mod:`.python_tool`: the exported ``python`` tool (a child process with a timeout, not a sandbox);
* :mod:`.command_line`: the exported module's command line.

Rules that make inlining safe (checked by the tests): a module here imports only the standard library, dspy,
litellm, its siblings (``from masforge.standalone.<module> import ...``) and the names it shares with the
genome (:mod:`masforge.genome.names`, which the export carries too); top-level names are unique across them. The
embedded model (:mod:`masforge.local_model`) is reached only inside a function and a ``try``. So this package
stands on the ground floor of the house, beside the genome: it imports nothing of masforge above it, and the LM
client (:mod:`masforge.lm`) and the execution of genomes (:mod:`masforge.execution`) stand on it.
"""
