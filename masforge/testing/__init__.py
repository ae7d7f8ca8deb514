"""Test doubles and helpers for masforge's own tests and benchmarks: scripted LM replies here, an
OpenAI-compatible stub server in :mod:`masforge.testing.stub_server`, and hostile programs that prove the
sandbox holds in :mod:`masforge.testing.hostile`. Production code never imports this package (the
``--lm fake`` model is :mod:`masforge.lm.fake`)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from masforge.genome.schema import Genome


class ScriptedResponder:
    """Returns ``replies`` in order (then repeats the last); a callable reply is called with the messages."""

    def __init__(self, replies: Sequence[str | Callable[[Sequence[dict[str, Any]]], str]]) -> None:
        if not replies:
            raise ValueError("ScriptedResponder needs at least one reply")
        self.replies = list(replies)
        self.calls: list[Sequence[dict[str, Any]]] = []
        self._lock = threading.Lock()

    def __call__(self, messages: Sequence[dict[str, Any]], info: dict[str, Any] | None = None) -> str:
        with self._lock:
            i = min(len(self.calls), len(self.replies) - 1)
            self.calls.append(messages)
        reply = self.replies[i]
        return reply(messages) if callable(reply) else reply


def chat_reply(**fields: Any) -> str:
    """Format ``fields`` as a ChatAdapter reply (for scripting fake LMs)."""
    body = "\n\n".join(f"[[ ## {k} ## ]]\n{v}" for k, v in fields.items())
    return body + "\n\n[[ ## completed ## ]]"



def chain_genome(steps: int) -> Genome:
    """``steps`` agents one after another, each reading the question and the agent before it: an example that makes
    ``steps`` LM calls in a row (e.g. to outlast a timeout)."""
    from masforge.genome.io import parse_genome_text

    edges = [*(f"input -> a{i}" for i in range(steps)), *(f"a{i} -> a{i + 1}" for i in range(steps - 1)),
             f"a{steps - 1} -> output"]
    agents = "".join(f"  - id: a{i}\n" for i in range(steps))
    text = f"kind: config\nname: chain\nagents:\n{agents}topology:\n  edges: [{', '.join(edges)}]\n"
    return parse_genome_text(text, "chain.yaml", "yaml")
