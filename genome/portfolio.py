"""Whole-portfolio checks: a portfolio genome's members, router and escalation order, one line per problem.

A portfolio genome (``kind: portfolio``) holds k member genomes in full, a router (see
:mod:`masforge.genome.router`) and optionally an escalation order; it has no agents, code or topology of its own.
"""

from __future__ import annotations

from collections.abc import Callable

from masforge.genome.router import router_problems
from masforge.genome.schema import Genome, Topology

BUILD_HINT = "build one with `masforge portfolio build`"


def portfolio_problems(genome: Genome, member_problems: Callable[[Genome], list[str]]) -> list[str]:
    """Every problem of portfolio genome ``genome``; ``member_problems`` checks one member (validation's own
    :func:`masforge.genome.validate.problems`)."""
    out: list[str] = []
    if genome.agents:
        out.append("agents: a portfolio genome takes no agents (its members do the work); move them into a member")
    if genome.code:
        out.append("code: a portfolio genome carries no code of its own; move it into a member (kind: code)")
    if genome.topology != Topology():
        out.append("topology: a portfolio genome has no topology of its own (the router picks a member); remove it")
    body = genome.portfolio
    if body is None:
        return [*out, f"portfolio: a portfolio genome needs portfolio.members and portfolio.router ({BUILD_HINT})"]
    if out:
        return out
    for i, member in enumerate(body.members):
        place = f"portfolio.members[{i}] '{member.name}'"
        if member.kind == "portfolio":
            out.append(f"{place}: a member cannot itself be a portfolio; list its members instead")
            continue
        if member.inputs != genome.inputs:
            out.append(f"{place}: inputs {member.inputs} differ from the portfolio's {genome.inputs}; every member "
                       "answers the same question, give them the portfolio's inputs")
        elif member.outputs != genome.outputs:
            out.append(f"{place}: outputs {member.outputs} differ from the portfolio's {genome.outputs}; give every "
                       "member the portfolio's outputs")
        else:
            out += [f"{place}: {p}" for p in member_problems(member)[:1]]
    out += router_problems(body.router, len(body.members))
    k = len(body.members)
    bad = [i for i in body.escalation if not 0 <= i < k]
    if bad:
        out.append(f"portfolio.escalation: member index {bad[0]} is out of range (0 to {k - 1})")
    if len(set(body.escalation)) != len(body.escalation):
        out.append("portfolio.escalation: a member index appears twice; list each member once")
    return out
