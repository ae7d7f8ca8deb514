"""The meta-agent: LLM-driven genome operators that invent, mutate, cross over, repair and reflect on
multi-agent systems (ADAS-style Meta Agent Search, feedback-driven mutation as in EvoMAS, and the
"velocity" plans of SwarmAgentic).

Config genomes come back in the proposal format of :mod:`masforge.search.operators.proposal`; a reply that
does not parse is sent back to the model with the one-line problem, at most ``max_repairs`` times. No
operator raises on garbage model output: it returns ``None`` and says why in :attr:`MetaAgent.errors` and
:attr:`MetaAgent.counters`.

Prompts are the ``search/prompts/meta_*.txt`` templates, shaped by :mod:`masforge.search.operators.prompting`;
every prompt is kept under a character budget (``prompt_chars``, about 1,500 tokens) so a 0.5B local model
with a 4,096-token context can answer.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from masforge.errors import BudgetExceeded, MasforgeError
from masforge.genome.schema import MODULE_KINDS, Genome
from masforge.lm.client import LMClient
from masforge.search.context import Proposal
from masforge.search.features import scaled_features
from masforge.search.operators.hygiene import copied_example, descriptive_name, placeholder_instructions
from masforge.search.operators.prompting import failure_text, fit_prompt, genome_brief, score_text
from masforge.search.operators.proposal import GenomeKind, ProposalParseError, parse_proposal, proposal_json_schema
from masforge.search.population import Candidate
from masforge.search.prompts import render
from masforge.standalone.plain_adapter import strip_think
from masforge.text import shorten

if TYPE_CHECKING:
    from masforge.search.context import SearchContext

__all__ = ["PROPOSAL_TEMPERATURE", "GenomeKind", "MetaAgent"]

PROPOSAL_TEMPERATURE = 0.8
"""Meta-agent temperature when its LM is configured greedy (the embedded model's default)."""


class MetaAgent:
    """LLM-driven genome operators. Each returns a :class:`Proposal` (with the model's rationale) or None.

    ``errors`` keeps the last failures as one-line strings (``operator: problem``); ``counters`` counts
    ``lm_calls``, ``lm_errors``, ``parse_errors`` (replies that were not a valid genome), ``repairs``
    (repair rounds), ``repaired`` (proposals that needed at least one), ``rejected`` (given up) and
    ``proposals`` (returned).

    ``max_tokens`` caps each reply (default: the alias's own cap, but at least 1,024 so a genome or a
    program is not cut off); ``prompt_chars`` caps each prompt; ``structured`` asks the backend to
    constrain config replies to :func:`proposal_json_schema`.
    """

    def __init__(self, client: LMClient, alias: str = "meta", max_repairs: int = 2, *,
                 temperature: float | None = None, max_tokens: int | None = None, archive_k: int = 4,
                 examples_k: int = 2, prompt_chars: int = 5000, structured: bool = True,
                 max_errors: int = 200) -> None:
        self.client = client
        self.alias = alias
        self.max_repairs = max(0, int(max_repairs))
        self.temperature = temperature
        self.max_tokens = max_tokens
        self.archive_k = archive_k
        self.examples_k = examples_k
        self.prompt_chars = prompt_chars
        """Upper bound on system + user prompt characters (~4 characters a token)."""
        self.structured = structured
        self.max_errors = max_errors
        self.errors: list[str] = []
        self.counters: Counter[str] = Counter()
        self._examples: dict[str, str] = {}
        self.last_prompt: str = ""
        """The last user prompt sent (for debugging and prompt-size checks)."""

    # ------------------------------------------------------------------ public operators

    def invent(self, ctx: SearchContext, *, kind: GenomeKind = "config", archive: Sequence[Candidate] | None = None,
               from_scratch: bool = False) -> Proposal | None:
        """A new system for the task, conditioned on the archive's best and most diverse candidates
        (``archive`` overrides the choice; ``from_scratch`` uses only the task description and objective)."""
        shown = [] if from_scratch else list(archive if archive is not None else self.select_archive(ctx))
        # Best last: the strongest example sits closest to the instruction, as in ADAS.
        shown.sort(key=lambda c: c.fitness)
        values = {**self._task_values(ctx), "examples": self._examples_text(ctx), "format": self._format(kind, ctx)}
        items = [f"# {score_text(c)}\n{genome_brief(c.genome)}" for c in shown]
        if not items:
            values["archive"] = "(none yet)"
        name = "meta_invent_scratch" if from_scratch else "meta_invent"
        prompt = self._fit(name, values, shrink=["archive", "examples", "task"],
                           items=("archive", items) if items else None)
        return self._generate(prompt, kind, ctx, operator="meta_invent", parents=[c.id for c in shown[-2:]])

    def mutate(self, candidate: Candidate, ctx: SearchContext, *, notes: Sequence[str] = (),
               kind: GenomeKind | None = None) -> Proposal | None:
        """An improved version of ``candidate`` aimed at its recorded failures (``notes``: past edits and
        their effect on the score, e.g. ``copies 1->5 on solver: +0.10``)."""
        kind = kind or candidate.genome.kind
        memory = "\n".join(f"- {n}" for n in notes) or "(nothing recorded yet)"
        values = {**self._task_values(ctx), "score": score_text(candidate), "genome": genome_brief(candidate.genome),
                  "feedback": failure_text(candidate), "memory": memory, "format": self._format(kind, ctx)}
        prompt = self._fit("meta_mutate", values, shrink=["feedback", "memory", "genome", "task"])
        return self._generate(prompt, kind, ctx, operator="meta_mutate", parents=[candidate.id],
                              base=candidate.genome)

    def crossover(self, a: Candidate, b: Candidate, ctx: SearchContext) -> Proposal | None:
        """One system combining the strengths of ``a`` and ``b`` (code if either parent is code)."""
        kind: GenomeKind = "config" if a.genome.kind == b.genome.kind == "config" else "code"
        values = {**self._task_values(ctx), "score_a": score_text(a), "genome_a": genome_brief(a.genome),
                  "score_b": score_text(b), "genome_b": genome_brief(b.genome), "format": self._format(kind, ctx)}
        prompt = self._fit("meta_crossover", values, shrink=["genome_b", "genome_a", "task"])
        return self._generate(prompt, kind, ctx, operator="meta_crossover", parents=[a.id, b.id], base=a.genome)

    def repair(self, text_or_genome: str | Genome, error: str, ctx: SearchContext | None = None, *,
               kind: GenomeKind | None = None, parents: Sequence[str] = (),
               operator: str = "meta_repair") -> Proposal | None:
        """Fix a broken reply or a genome that failed (validation, build or runtime ``error``): up to
        ``max_repairs`` rounds, each showing the model the latest attempt and its one-line problem."""
        base = text_or_genome if isinstance(text_or_genome, Genome) else None
        if base is not None:
            kind = kind or base.kind
            shown = (base.code or "") if base.kind == "code" else genome_brief(base, max_instructions=400)
            what = "This system failed when it was run or checked:"
            parents = list(parents) or [base.id]
        else:
            kind = kind or ("code" if "def forward" in str(text_or_genome) else "config")
            shown = str(text_or_genome)
            what = "Your previous reply could not be used:"
        inputs, outputs = self._io(ctx, base)
        text, problem = shown, error
        for attempt in range(self.max_repairs):
            self.counters["repairs"] += 1
            reply = self._complete(self._repair_prompt(what, text, problem, kind, ctx), kind)
            if reply is None:
                break
            try:
                genome, rationale = parse_proposal(reply, kind, inputs=inputs, outputs=outputs,
                                                   name=base.name if base else "repaired")
                self._check_general(genome, ctx)
            except ProposalParseError as exc:
                self.counters["parse_errors"] += 1
                text, problem = reply, str(exc)
                what = "Your previous reply could not be used:"
                continue
            self.counters["repaired"] += 1
            return self._accept(genome, rationale, operator, list(parents), attempt + 1)
        self.counters["rejected"] += 1
        self._note(operator, f"gave up after {self.max_repairs} repair(s): {problem}")
        return None

    def reflect(self, proposal: Proposal, ctx: SearchContext) -> Proposal | None:
        """Critique-then-revise (ADAS self-reflection) before paying for an evaluation. None if the revision
        is unusable (the caller keeps the original)."""
        kind: GenomeKind = proposal.genome.kind
        values = {**self._task_values(ctx), "genome": genome_brief(proposal.genome, max_instructions=400),
                  "rationale": shorten(proposal.rationale or "-", 400, flat=False), "format": self._format(kind, ctx)}
        prompt = self._fit("meta_reflect", values, shrink=["genome", "rationale", "task"])
        revised = self._generate(prompt, kind, ctx, operator=f"{proposal.operator}+reflect",
                                 parents=list(proposal.parents), base=proposal.genome)
        if revised is None:
            return None
        combined = f"{proposal.rationale} | reflection: {revised.rationale}".strip(" |")
        revised.rationale = shorten(combined, 1500, flat=False)
        return revised

    def velocity(self, current: Candidate, pbest: Candidate, gbest: Candidate, ctx: SearchContext, *,
                 last_change: str = "", strengths: tuple[str, str, str] = ("some", "some", "some")) -> str | None:
        """A particle's textual velocity: a short plan of edits from inertia (``last_change``), cognitive
        (``pbest``) and social (``gbest``) pulls, each weighted by a word in ``strengths``."""
        def other(c: Candidate) -> str:
            return "(the current system itself)" if c.id == current.id else genome_brief(c.genome)

        values = {**self._task_values(ctx), "score": score_text(current), "current": genome_brief(current.genome),
                  "last_change": shorten(last_change or "none yet", 300, flat=False), "pbest_score": score_text(pbest),
                  "pbest": other(pbest), "gbest_score": score_text(gbest), "gbest": other(gbest),
                  "inertia": strengths[0], "cognitive": strengths[1], "social": strengths[2]}
        prompt = self._fit("meta_velocity", values, shrink=["pbest", "gbest", "current", "task"])
        reply = self._complete(self._messages(prompt), None)
        if reply is None:
            return None
        plan = strip_think(reply).strip().strip("`").strip()
        if not plan:
            self._note("velocity", "empty plan")
            return None
        return shorten(plan, 800, flat=False)

    def rewrite(self, candidate: Candidate, plan: str, ctx: SearchContext, *,
                kind: GenomeKind | None = None) -> Proposal | None:
        """``candidate`` with a textual ``plan`` applied (a swarm particle's move)."""
        kind = kind or candidate.genome.kind
        values = {**self._task_values(ctx), "score": score_text(candidate), "genome": genome_brief(candidate.genome),
                  "plan": shorten(plan, 800, flat=False), "format": self._format(kind, ctx)}
        prompt = self._fit("meta_rewrite", values, shrink=["plan", "genome", "task"])
        prop = self._generate(prompt, kind, ctx, operator="meta_rewrite", parents=[candidate.id],
                              base=candidate.genome)
        if prop is not None and not prop.rationale:
            prop.rationale = shorten(plan, 500, flat=False)
        return prop

    def select_archive(self, ctx: SearchContext, k: int | None = None) -> list[Candidate]:
        """The best half of ``k`` candidates plus the most diverse others (farthest in feature space from
        those already chosen), so the meta-agent sees both what works and what has been explored."""
        k = k or self.archive_k
        pop = list(ctx.population)
        if len(pop) <= k:
            return pop
        chosen = ctx.best(max(1, k // 2))
        rest = [c for c in pop if c.id not in {x.id for x in chosen}]
        z = scaled_features([c.genome for c in [*chosen, *rest]])
        chosen_rows = list(range(len(chosen)))
        rest_rows = list(range(len(chosen), len(pop)))
        while rest_rows and len(chosen_rows) < k:
            dists = [float(np.min(np.linalg.norm(z[chosen_rows] - z[r], axis=1))) for r in rest_rows]
            chosen_rows.append(rest_rows.pop(int(np.argmax(dists))))
        everyone = [*chosen, *rest]
        return [everyone[i] for i in chosen_rows]

    # ------------------------------------------------------------------ internals

    def _note(self, operator: str, problem: str) -> None:
        """Keep the one-line reason an operator failed (bounded, newest last)."""
        self.errors.append(shorten(f"{operator}: {problem}", 400))
        del self.errors[: max(0, len(self.errors) - self.max_errors)]

    def _io(self, ctx: SearchContext | None, base: Genome | None) -> tuple[list[str], list[str]]:
        if base is not None:
            return list(base.inputs), list(base.outputs)
        if ctx is not None:
            return list(ctx.task.input_fields), [ctx.task.output_field]
        return ["question"], ["answer"]

    def _task_values(self, ctx: SearchContext | None) -> dict[str, str]:
        if ctx is None:
            return {"task": "(see the system)", "objective": "maximise the task score"}
        task = ctx.task
        desc = " ".join(f"{task.name}: {task.description}".split())
        return {"task": shorten(desc, 600, flat=False), "objective": ctx.fitness.describe(task.metric_name)}

    def _examples_text(self, ctx: SearchContext) -> str:
        if ctx.task.name in self._examples:  # some tasks generate their examples; do that once
            return self._examples[ctx.task.name]
        try:
            examples = ctx.task.split("train", limit=self.examples_k) or ctx.evaluator.examples[: self.examples_k]
        except MasforgeError:
            examples = []
        lines = []
        for ex in examples:
            shown = "; ".join(f"{k}: {' '.join(str(v).split())}" for k, v in ex.inputs.items() if str(v).strip())
            line = f"- input: {shorten(shown or '(empty)', 320, flat=False)}"
            if ex.target not in (None, ""):
                line += f"\n  answer: {shorten(ex.target, 120)}"
            lines.append(line)
        self._examples[ctx.task.name] = "\n".join(lines) or "(none)"
        return self._examples[ctx.task.name]

    def _format(self, kind: GenomeKind, ctx: SearchContext | None) -> str:
        from masforge.sandbox.tools import tool_names

        tools = ", ".join(tool_names())
        if kind == "code":
            inputs, outputs = self._io(ctx, None)
            return render("meta_format_code", inputs=", ".join(repr(i) for i in inputs), output=outputs[0],
                          first_input=inputs[0], tools=tools)
        return render("meta_format_config", modules=", ".join(MODULE_KINDS), tools=tools)

    def _messages(self, prompt: str) -> list[dict[str, Any]]:
        self.last_prompt = prompt
        return [{"role": "system", "content": render("meta_system")}, {"role": "user", "content": prompt}]

    def _fit(self, name: str, values: dict[str, str], *, shrink: Sequence[str],
             items: tuple[str, list[str]] | None = None) -> str:
        """Template ``name`` fitted into this agent's prompt budget (the system prompt counts too)."""
        return fit_prompt(render, name, values, budget=self.prompt_chars - len(render("meta_system")),
                          shrink=shrink, items=items)

    def _repair_prompt(self, what: str, text: str, error: str, kind: GenomeKind, ctx: SearchContext | None) -> str:
        values = {"what": what, "reply": shorten(strip_think(text).strip() or "(empty reply)", 1800, flat=False),
                  "error": shorten(error, 500), "format": self._format(kind, ctx)}
        return self._fit("meta_repair", values, shrink=["reply", "error"])

    def _response_format(self, kind: GenomeKind | None) -> dict[str, Any] | None:
        if kind != "config" or not self.structured:
            return None
        cfg = self.client.config(self.alias)
        if cfg.is_fake:
            return None
        schema = proposal_json_schema()
        if cfg.is_local:
            # The embedded llama.cpp server turns this schema into a grammar (it rejects "json_schema").
            return {"type": "json_object", "schema": schema}
        return {"type": "json_schema", "json_schema": {"name": "proposal", "schema": schema, "strict": False}}

    def _temperature(self) -> float:
        """The sampling temperature of proposals: as given, else the meta LM's own, but never greedy (a greedy
        meta-agent answers a repeated prompt with the same design, which the search then skips as a duplicate)."""
        if self.temperature is not None:
            return self.temperature
        return self.client.config(self.alias).temperature or PROPOSAL_TEMPERATURE

    def _complete(self, prompt_or_messages: str | list[dict[str, Any]], kind: GenomeKind | None) -> str | None:
        messages = self._messages(prompt_or_messages) if isinstance(prompt_or_messages, str) else prompt_or_messages
        # A distinct sample index per call: the LM cache must not hand back the same reply to a repeated
        # prompt (that would only produce duplicates), while a rerun with the same seed still replays.
        sample = self.counters["lm_calls"]
        self.counters["lm_calls"] += 1
        try:
            # A genome (or a program) needs room: at least 1,024 completion tokens unless set explicitly
            # (with prompts under ~1,500 tokens this still fits a 4,096-token local context).
            max_tokens = self.max_tokens or max(1024, self.client.config(self.alias).max_tokens)
            return self.client.complete(messages, alias=self.alias, temperature=self._temperature(),
                                        max_tokens=max_tokens, sample=sample,
                                        response_format=self._response_format(kind)).text
        except BudgetExceeded:
            raise  # the budget ends the search; it is not a bad proposal
        except MasforgeError as exc:
            self.counters["lm_errors"] += 1
            self._note("lm", str(exc))
            return None

    def _generate(self, prompt: str, kind: GenomeKind, ctx: SearchContext | None, *, operator: str,
                  parents: list[str], base: Genome | None = None) -> Proposal | None:
        reply = self._complete(prompt, kind)
        if reply is None:
            return None
        inputs, outputs = self._io(ctx, base)
        try:
            genome, rationale = parse_proposal(reply, kind, inputs=inputs, outputs=outputs, name=operator)
            self._check_general(genome, ctx)
        except ProposalParseError as exc:
            self.counters["parse_errors"] += 1
            self._note(operator, str(exc))
            if self.max_repairs == 0:
                self.counters["rejected"] += 1
                return None
            fixed = self.repair(reply, str(exc), ctx, kind=kind, parents=parents, operator=operator)
            if fixed is not None:
                fixed.operator = operator
            return fixed
        return self._accept(genome, rationale, operator, parents, 0)

    def _check_general(self, genome: Genome, ctx: SearchContext | None) -> None:
        """Refuse instructions that are the format's placeholder or copy a task example (they cannot transfer)
        and give the design a name that says what it does (not the task's name, not a name already in the run)."""
        placeholder = placeholder_instructions(genome)
        if placeholder:
            self.counters["placeholder_instructions"] += 1
            raise ProposalParseError(f"agent {placeholder}'s instructions are the format's placeholder or a name; "
                                     "write what this agent must do, in general words")
        if ctx is None:
            return
        texts = [" ".join(str(v) for v in ex.inputs.values()) for ex in ctx.evaluator.examples]
        copied = copied_example(genome, texts)
        if copied:
            self.counters["copied_examples"] += 1
            raise ProposalParseError(f"the instructions copy a task example (\"{copied}\"); write general "
                                     "instructions that work for every question of the task")
        taken = {c.genome.name for c in ctx.population}
        genome.name = descriptive_name(genome.name, genome, task_name=ctx.task.name, taken=taken)

    def _accept(self, genome: Genome, rationale: str, operator: str, parents: list[str], repairs: int) -> Proposal:
        self.counters["proposals"] += 1
        genome.metadata = {"operator": operator, **({"repairs": repairs} if repairs else {})}
        return Proposal(genome=genome, parents=list(dict.fromkeys(parents)), operator=operator,
                        rationale=rationale or f"({operator}: the model gave no rationale)")
