"""The names a genome and the runtime that runs it share: the input fields the runtime fills for an agent, the
execution node's kind and fields, the verdicts and the prompt adapters an agent may ask for.

They live with the genome (the ground floor) so that the genome's schema and checks need no runtime; the runtime
and an exported system read them from here (an export carries this module, so it uses only the standard library).
"""

from typing import Literal

MESSAGES_INPUT = "messages"
"""The input field through which an agent reads its agent predecessors' outputs."""
JUDGE_INPUT = "candidates"
"""The input field through which a judge reads the candidates."""
TOOL_ARG = "arg"
"""The one argument every tool takes (a string): the program, expression or query to run."""
EXECUTE_MODULE = "execute"
"""The module kind of an execution node: it runs its predecessors' code against checks and calls no LM."""
VERDICT_FIELD = "verdict"
"""What an execution node says of the candidate it picked: ``pass`` (it passed every check) or ``fail``."""
REPORT_FIELD = "report"
"""An execution node's short account of the checks its pick passed and failed (what a repair agent reads)."""
TESTS_FIELD = "tests"
"""The output field through which a test-writing agent hands ``assert`` lines to an execution node."""
VERDICTS = ("pass", "fail")
"""The verdicts a conditional edge can route on."""
ADAPTERS = ("auto", "chat", "json", "plain")
"""How an agent's module talks to its LM (see :mod:`masforge.standalone.adapters`)."""
AdapterName = Literal["auto", "chat", "json", "plain"]

# A portfolio router's feature map (computed in :mod:`masforge.standalone.router`): its version and size,
# which a genome's checks need without the runtime.
FEATURE_VERSION = 1
NUMERIC_FEATURES = ("log_chars", "log_lines", "doctest_lines", "assert_lines", "stated_examples", "has_def",
                    "digit_share")


def feature_count(n_hash: int) -> int:
    """Length of the feature vector for ``n_hash`` hashed buckets."""
    return n_hash + len(NUMERIC_FEATURES)
