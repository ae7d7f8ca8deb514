"""SwarmAgentic (particle swarm optimisation in language space): a swarm of particles, each a system with
a personal best, moves towards better systems by textual "velocities".

Each step one particle (round robin) gets a velocity: a short plan of edits that the meta-agent writes
from three pulls, as in PSO's ``v = w*v + c1*r1*(pbest - x) + c2*r2*(gbest - x)``: inertia (keep the
direction of the particle's last change), cognitive (towards its personal best) and social (towards the
swarm's global best); the random factors ``r1``, ``r2`` are drawn each step and shown to the model as
strengths (weak / medium / strong). The meta-agent then rewrites the particle's genome by the plan.

Particles start from scratch: the meta-agent invents them from only the task description and objective,
so no seeds are needed (seeds already in the archive may join as particles). When the meta LM fails, the
particle still moves: a structural crossover towards its personal or the global best plus a random edit.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from masforge.search.context import Proposal, SearchContext
from masforge.search.operators.proposal import starter_genome
from masforge.search.operators.structural import crossover, mutate
from masforge.search.population import Candidate
from masforge.search.strategies.base import bad_option, register
from masforge.search.strategies.meta_driven import MetaAgentStrategy
from masforge.text import shorten

_NEW = "new"


@dataclass
class Particle:
    """One particle: where it is, the best place it has been, and its last move (its inertia)."""

    position: Candidate
    best: Candidate
    last_change: str = ""


def strength_word(value: float) -> str:
    """A PSO coefficient times its random factor, as a word a small model can follow."""
    if value < 0.3:
        return "weak"
    return "medium" if value < 0.9 else "strong"


@register
class SwarmSearch(MetaAgentStrategy):
    """SwarmAgentic particle swarm in language space: systems move by textual velocities towards the best ones."""

    name = "swarm"
    max_idle_steps = 8

    def __init__(self, particles: int = 4, inertia: float = 0.5, cognitive: float = 1.5, social: float = 1.5,
                 use_seeds: bool = True, **options: Any) -> None:
        """Options of swarm.

        Args:
            particles: systems in the swarm (each moves in turn).
            inertia: pull to keep the direction of a particle's last change.
            cognitive: pull towards the particle's own best system.
            social: pull towards the best system of the whole swarm.
            use_seeds: let the best seeds join as particles (else all particles are invented from scratch).
        """
        super().__init__(**options)
        if particles < 1:
            raise bad_option("particles", f"must be at least 1, got {particles}")
        for option, value in (("inertia", inertia), ("cognitive", cognitive), ("social", social)):
            if value < 0:
                raise bad_option(option, f"must be >= 0, got {value}")
        self.n_particles = particles
        self.inertia, self.cognitive, self.social = inertia, cognitive, social
        self.use_seeds = use_seeds
        self.particles: list[Particle] = []
        self.fallback_moves = 0
        """Moves made structurally because the meta-agent gave nothing usable."""
        self._turn = 0
        self._init_tries = 0

    def setup(self, ctx: SearchContext) -> None:
        super().setup(ctx)
        if self.use_seeds:
            self.particles = [Particle(c, c) for c in ctx.best(self.n_particles)]

    # ------------------------------------------------------------------ steps

    def step(self, ctx: SearchContext) -> list[Proposal]:
        meta = self.agent()
        if len(self.particles) < self.n_particles and self._init_tries < 3 * self.n_particles:
            self._init_tries += 1
            prop = self._new_particle(ctx)
            if prop is None:
                return []
            prop.info["particle"] = _NEW
            return [prop]
        if not self.particles:
            return []
        index = self._turn % len(self.particles)
        self._turn += 1
        particle = self.particles[index]
        gbest = ctx.best(1)[0]
        rng = ctx.rng
        strengths = (strength_word(self.inertia), strength_word(self.cognitive * rng.random()),
                     strength_word(self.social * rng.random()))
        plan = meta.velocity(particle.position, particle.best, gbest, ctx, last_change=particle.last_change,
                             strengths=strengths)
        prop = self.reflected(meta.rewrite(particle.position, plan, ctx) if plan else None, ctx)
        if prop is not None and not ctx.is_near_duplicate(prop.genome):
            prop.operator = "swarm_velocity"
            prop.rationale = f"velocity: {plan} | {prop.rationale}"
            change = " ".join((plan or "").split())
        else:
            prop = self._structural_move(particle, gbest, ctx)
            if prop is None:
                return []
            self.fallback_moves += 1
            change = prop.rationale
        prop.info.update(particle=index, change=change)
        return [prop]

    def observe(self, ctx: SearchContext, proposal: Proposal, candidate: Candidate | None) -> None:
        target = proposal.info.get("particle")
        if target is None:
            return
        if target == _NEW:
            if candidate is not None and candidate.id not in {p.position.id for p in self.particles}:
                self.particles.append(Particle(candidate, candidate))
            return
        particle = self.particles[target]
        change = shorten(proposal.info.get("change", ""), 200)
        if candidate is None:
            particle.last_change = f"{change} (rejected as invalid; try a different change)"
            return
        delta = candidate.fitness - particle.position.fitness
        particle.last_change = f"{change} (score {delta:+.2f})"
        particle.position = candidate  # a particle moves whether or not the move was an improvement
        if candidate.fitness > particle.best.fitness:
            particle.best = candidate

    # ------------------------------------------------------------------ helpers

    def _new_particle(self, ctx: SearchContext) -> Proposal | None:
        """A particle invented from the task alone; without a usable meta reply, a structural variant."""
        prop = self.agent().invent(ctx, kind="config", from_scratch=True)
        if prop is not None and not ctx.is_near_duplicate(prop.genome):
            prop.operator = "swarm_init"
            return prop
        bases = [p.position.genome for p in self.particles] or [c.genome for c in ctx.best(3)]
        if not bases:
            starter = starter_genome(ctx.task.input_fields, [ctx.task.output_field])
            if not ctx.is_near_duplicate(starter):
                return Proposal(starter, operator="swarm_init", rationale="fallback start: one step-by-step solver")
            bases = [starter]
        for _ in range(4):
            out = mutate(ctx.rng.choice(bases), ctx.rng)
            if out is not None and not ctx.is_near_duplicate(out[0]):
                return Proposal(out[0], operator="swarm_init", rationale=f"fallback start: {out[1]}")
        return None

    def _structural_move(self, particle: Particle, gbest: Candidate, ctx: SearchContext) -> Proposal | None:
        """Crossover towards the personal or global best, then one random edit (an LLM-free velocity)."""
        rng = ctx.rng
        here = particle.position
        targets = [t for t in (gbest, particle.best) if t.id != here.id]
        for _ in range(4):
            genome, notes, parents = here.genome, [], [here.id]
            if targets:
                target = rng.choice(targets)
                label = "global best" if target.id == gbest.id else "personal best"
                # Either keep our wiring and take the target's agents, or take its wiring with our agents.
                out = crossover(genome, target.genome, rng) if rng.random() < 0.5 else crossover(
                    target.genome, genome, rng)
                if out is not None:
                    genome = out[0]
                    notes.append(f"towards {label}: {out[1]}")
                    parents.append(target.id)
            out = mutate(genome, rng)
            if out is not None:
                genome = out[0]
                notes.append(out[1])
            if notes and not ctx.is_near_duplicate(genome):
                return Proposal(genome, parents=parents, operator="swarm_structural", rationale="; ".join(notes))
        return None
