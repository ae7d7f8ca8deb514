"""The base of strategies whose proposals come from the meta-agent (meta, evolve, swarm): it owns the
meta-agent's options, builds the :class:`MetaAgent` at setup and applies optional self-reflection, so a
subclass only says how it uses the operators."""

from __future__ import annotations

from typing import Any

from masforge.search.context import Proposal, SearchContext
from masforge.search.operators.meta import MetaAgent
from masforge.search.strategies.base import Strategy, bad_option


class MetaAgentStrategy(Strategy):
    """A strategy driven by the meta-agent (not registered itself; meta, evolve and swarm extend it)."""

    def __init__(self, *, reflect: bool = False, alias: str = "meta", max_repairs: int = 2,
                 temperature: float | None = None, max_tokens: int | None = None, archive_k: int = 4,
                 **options: Any) -> None:
        """Options of the strategies the meta-agent drives (meta, evolve, swarm).

        Args:
            reflect: let the meta-agent critique and revise each proposal before it is paid for (ADAS self-reflection).
            alias: the LM alias the meta-agent calls (``meta``: --meta-lm).
            max_repairs: times an unparsable meta-agent reply is sent back with its problem before the proposal is
                dropped.
            temperature: the meta-agent's sampling temperature (None: the LM's own).
            max_tokens: longest meta-agent reply (None: the LM's own limit).
            archive_k: archive members (best and most diverse) shown to the meta-agent in each prompt.
        """
        super().__init__(**options)
        if max_repairs < 0:
            raise bad_option("max_repairs", f"must be >= 0, got {max_repairs}")
        if temperature is not None and not 0.0 <= temperature <= 2.0:
            raise bad_option("temperature", f"must be between 0 and 2, got {temperature}")
        if max_tokens is not None and max_tokens < 1:
            raise bad_option("max_tokens", f"must be at least 1, got {max_tokens}")
        if archive_k < 1:
            raise bad_option("archive_k", f"must be at least 1, got {archive_k}")
        self.reflect = reflect
        """Let the meta-agent critique and revise each proposal before it is paid for (ADAS self-reflection)."""
        self.agent_options: dict[str, Any] = {"alias": alias, "max_repairs": max_repairs, "temperature": temperature,
                                              "max_tokens": max_tokens, "archive_k": archive_k}
        self.meta: MetaAgent | None = None

    def setup(self, ctx: SearchContext) -> None:
        self.meta = MetaAgent(ctx.client, **self.agent_options)

    def agent(self) -> MetaAgent:
        """The meta-agent (after :meth:`setup`)."""
        if self.meta is None:
            raise RuntimeError(f"{self.name}: setup() first")
        return self.meta

    def meta_calls_per_system(self) -> float:
        """A proposal and each repair of a reply that does not parse (a small model's often do not), and the
        reflection when it is on."""
        calls = 1.0 + self.agent_options["max_repairs"]
        return calls * 2 if self.reflect else calls

    def reflected(self, proposal: Proposal | None, ctx: SearchContext) -> Proposal | None:
        """``proposal`` revised by self-reflection when ``reflect`` is on (the original if the revision fails)."""
        if proposal is None or not self.reflect:
            return proposal
        return self.agent().reflect(proposal, ctx) or proposal
