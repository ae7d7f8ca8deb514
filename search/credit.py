"""Credit assignment: which operators, and which agents, made the systems better.

Three signals, all from this run's own evaluations:

* **Operators** are arms of a Beta-Bernoulli bandit (Thompson sampling, as in adaptive operator selection for
  evolutionary algorithms, Fialho et al. 2010): an operator *wins* when its child beats its parent on fitness
  (scored on the whole selection set: a child a race dropped lost). A strategy that asks :meth:`Credit.choose`
  draws operators in proportion to their chance of being the best one, so an edit that keeps helping is drawn
  more, one that never helps less, and every arm keeps some chance.
* **Failure kinds** set the bandit's prior for a parent: a system whose answers fail the tests (``exception``),
  do not parse (``syntax``), carry no code (``no_code``) or run out of time (``timeout``) makes the edits that
  address that failure more likely before any evidence is in (:data:`FAILURE_EDITS`).
* **Agents** get credit by ablation: the incumbent is scored again with each agent removed, and an agent's credit
  is what the system loses without it (paired, on the same examples). An agent with no credit is a candidate for
  pruning (the ablated system is itself a candidate, and a cheaper tie replaces the incumbent); instruction edits
  go first to the agents with the most credit, where a change shows.

Every draw uses the search's seeded RNG and every update follows the order candidates are admitted in, so a
resumed run rebuilds exactly the same credit.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from masforge.search.population import Candidate
from masforge.search.proposal import Proposal

FAILURE_EDITS: dict[str, tuple[str, ...]] = {
    # answers that run but fail the tests: test them before answering, sample more, repair from the report
    "exception": ("add_test_gate", "add_escalation", "add_escalation_tier", "tune_execution", "add_sampled_branch",
                  "add_repair_loop", "add_test_writer", "change_aggregation"),
    "wrong": ("add_sampled_branch", "change_copies", "change_module", "add_agent", "change_aggregation"),
    "unstated": ("add_sampled_branch", "change_copies", "change_module", "add_agent", "change_aggregation"),
    # code that does not parse, or no code at all: repair from the error, or talk to the model another way
    "syntax": ("add_repair_loop", "change_adapter", "change_module"),
    "no_code": ("change_adapter", "change_module", "remove_agent"),
    # too slow: fewer samples, fewer agents, fewer rounds
    "timeout": ("remove_agent", "change_copies", "change_rounds"),
}
"""For each kind of wrong answer, the edits that address it (names of :data:`structural.EDITS`)."""
FIRST_REMEDIES: dict[str, tuple[str, ...]] = {
    # Execution feedback is what lifts small coders most (self-debugging, CodeT, escalation on failed examples);
    # more samples without a check mostly add votes for the same wrong program.
    "exception": ("add_test_gate", "add_escalation", "add_repair_loop", "add_test_writer", "add_escalation_tier",
                  "tune_execution"),
    "syntax": ("add_repair_loop",),
}
"""Of a failure kind's edits, those tried first: they get the whole prior, its other edits half."""
FAILURE_PRIOR = 4.0
"""Pseudo-wins a first remedy of a parent's main failure starts with (against one pseudo-loss). With 14 edits,
a parent failing its tests draws one of the four execution edits in about 3 draws of 5 and each other edit in
about 1 of 35; at 2.0 with all six edits equal, HumanEval's run drew two edits without a check (2 of 2)."""


@dataclass
class Arm:
    """One operator's record in this run."""

    pulls: int = 0
    wins: int = 0
    new_calls: int = 0
    """LM answers its children generated (paid for)."""
    cached_calls: int = 0
    """LM answers its children read from the answer cache (shared with other candidates: free)."""

    def to_dict(self) -> dict[str, Any]:
        return {"pulls": self.pulls, "wins": self.wins, "win_rate": round(self.wins / self.pulls, 3) if self.pulls
                else None, "new_calls": self.new_calls, "cached_calls": self.cached_calls}


@dataclass
class Credit:
    """The run's credit per operator and per agent (see the module docstring)."""

    arms: dict[str, Arm] = field(default_factory=dict)
    agents: dict[str, dict[str, float]] = field(default_factory=dict)
    """System id -> agent id -> what the system loses without that agent (its ablation's paired difference)."""
    ablated: set[str] = field(default_factory=set)
    """Systems whose ablations were proposed."""
    proposed: set[str] = field(default_factory=set)
    """Edits that have made a child in this run (observed or still being scored)."""

    def arm(self, name: str) -> Arm:
        return self.arms.setdefault(name, Arm())

    def choose(self, names: Iterable[str], rng: random.Random, prior: Mapping[str, float] | None = None) -> str:
        """Thompson sampling over ``names``: each arm's win rate is drawn from Beta(1 + wins + prior, 1 + losses)
        and the highest draw is chosen (ties: the first name in sorted order)."""
        options = sorted(set(names))
        if not options:
            raise ValueError("no operator to choose from")
        prior = prior or {}
        best, best_draw = options[0], -1.0
        for name in options:
            a = self.arms.get(name, Arm())
            draw = rng.betavariate(1.0 + a.wins + prior.get(name, 0.0), 1.0 + a.pulls - a.wins)
            if draw > best_draw:
                best, best_draw = name, draw
        return best

    def choose_family(self, families: Mapping[str, Iterable[str]], rng: random.Random,
                      prior: Mapping[str, float] | None = None) -> str:
        """Thompson sampling over families of operators (each family's arms pooled), e.g. structural edits against
        the meta-agent's operators; ``prior`` adds pseudo-wins per family."""
        pooled = Credit()
        for family, names in families.items():
            arm = pooled.arm(family)
            for name in set(names):
                mine = self.arms.get(name)
                if mine is not None:
                    arm.pulls += mine.pulls
                    arm.wins += mine.wins
        return pooled.choose(list(families), rng, prior)

    def chooser(self, rng: random.Random, failures: Mapping[str, int] | None = None) -> Callable[[list[str]], str]:
        """A function picking one of the given edit names for a parent with these failure counts: a first remedy
        of its main failure that has made no child in this run yet, else Thompson sampling (:meth:`choose`).

        Each first remedy is tried once before any is tried twice, as a bandit plays every arm once before it
        exploits (UCB1 does): with children scored on 64 examples, one lucky +1/64 win would otherwise make the
        first remedy drawn the favourite and leave the others untried for the whole budget."""
        prior = failure_prior(failures or {})

        def pick(names: list[str]) -> str:
            untried = sorted(n for n in set(names)
                             if prior.get(n, 0.0) >= FAILURE_PRIOR and n not in self.arms and n not in self.proposed)
            return untried[rng.randrange(len(untried))] if untried else self.choose(names, rng, prior)

        return pick

    def note_proposed(self, name: str) -> None:
        """Edit ``name`` made a child (call once per child, before it is scored)."""
        self.proposed.add(name)

    def observe(self, name: str, won: bool, *, new_calls: int = 0, cached_calls: int = 0) -> None:
        """Record one use of operator ``name``: whether its child beat its parent, and what it cost."""
        arm = self.arm(name)
        arm.pulls += 1
        arm.wins += int(won)
        arm.new_calls += new_calls
        arm.cached_calls += cached_calls

    def credit_proposal(self, proposal: Proposal, parents: Sequence[Candidate], cand: Candidate | None, *,
                        new: bool) -> None:
        """Credit the operator that made ``proposal`` from its ``parents`` (none: nothing to credit). It wins with a
        ``new`` child, scored on the whole set, fitter than its parents; an ablation's loss is its agent's credit."""
        if not parents:
            return
        won = bool(new and cand is not None and not cand.pruned and cand.fitness > max(c.fitness for c in parents))
        fresh = new and cand is not None and not cand.reused
        self.observe(str(proposal.info.get("arm") or proposal.operator), won,
                     new_calls=cand.llm_calls if fresh and cand else 0,
                     cached_calls=cand.cache_hits if fresh and cand else 0)
        ablated = proposal.info.get("ablated")
        if ablated and cand is not None:
            system = parents[0]
            common = sorted(set(system.example_values) & set(cand.example_values))
            if common:
                loss = sum(system.example_values[k] - cand.example_values[k] for k in common) / len(common)
                self.record_ablation(system.id, str(ablated), loss)

    def ablations(self, incumbent: Candidate | None) -> list[Proposal]:
        """Once per incumbent with several agents: the incumbent without each of its agents (an ablation study).
        What each loses is the agent's credit; an ablation that loses nothing and costs less replaces the
        incumbent (pruning). Answers of the agents kept are mostly in the answer cache already."""
        from masforge.search.operators.structural import without_agent

        inc = incumbent
        if inc is None or inc.genome.kind != "config" or len(inc.genome.agents) < 2 or inc.id in self.ablated:
            return []
        self.ablated.add(inc.id)
        out = []
        for agent in inc.genome.agents:
            child = without_agent(inc.genome, agent.id)
            if child is not None:
                out.append(Proposal(child, [inc.id], "ablate", f"{inc.genome.name} without {agent.id}",
                                    info={"arm": "ablate", "ablated": agent.id}))
        return out

    def record_ablation(self, system: str, agent: str, loss: float) -> None:
        """``system`` loses ``loss`` (paired mean fitness) when ``agent`` is removed."""
        self.agents.setdefault(system, {})[agent] = loss

    def agent_credit(self, system: str) -> dict[str, float]:
        """What each ablated agent of ``system`` is worth (empty when it was not ablated)."""
        return dict(self.agents.get(system, {}))

    def summary(self) -> dict[str, Any]:
        """JSON-ready credit: per operator (pulls, wins, win rate, new and cached LM calls) and per agent."""
        return {"operators": {k: v.to_dict() for k, v in sorted(self.arms.items())},
                "agents": {k: {a: round(v, 4) for a, v in sorted(d.items())} for k, d in sorted(self.agents.items())}}


def failure_prior(failures: Mapping[str, int]) -> dict[str, float]:
    """Pseudo-wins per edit for a parent with these failure counts (kinds of wrong answers, see
    :data:`FAILURE_EDITS`): the first remedies of its most common failure get :data:`FAILURE_PRIOR`, that
    failure's other edits half of it, the edits of its other failures a quarter."""
    ranked = sorted(((n, kind) for kind, n in failures.items() if kind in FAILURE_EDITS and n > 0), reverse=True)
    prior: dict[str, float] = {}
    for rank, (_, kind) in enumerate(ranked):
        first = FIRST_REMEDIES.get(kind, FAILURE_EDITS[kind]) if rank == 0 else ()
        for edit in FAILURE_EDITS[kind]:
            weight = FAILURE_PRIOR if edit in first else FAILURE_PRIOR / (2 if rank == 0 else 4)
            prior[edit] = max(prior.get(edit, 0.0), weight)
    return prior
