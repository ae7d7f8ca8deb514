"""Build a portfolio from an archive: member systems chosen greedily, and a router fitted with cross-validation.

Only the per-example results of the selection split are read (a search's ``validation+train``; the test split is
refused: it is held out to judge the portfolio). Candidates qualify when scored on every selection example (a
raced candidate dropped early has too few to route on). Fitness is the run's: score minus ``cost_weight`` x
dollars, per question. Then:

1. the single best candidate (mean fitness; fewer LM calls per question on ties) starts the portfolio;
2. a candidate joins when it raises the cross-validated routed fitness (k-fold: the router is fitted on the
   other folds' questions and picks for the held-out ones) or keeps it and cuts the LM calls per question; the one
   that helps most joins first, up to ``max_members``;
3. the router (scikit-learn's LogisticRegression over :func:`masforge.standalone.router.question_features`)
   learns, for each question, the member with the best fitness there (cheapest on ties) and is refitted on all
   questions; its numbers go into the portfolio genome.

:class:`PortfolioBuild` reports the members, how many selection questions the router sends to each, the
cross-validated routed score against the single best and the oracle (the best member per question), and the
routing accuracy against that oracle.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from masforge.archive.protocol import ResumableArchive
from masforge.errors import MasforgeError
from masforge.evaluators.runner import input_mapping
from masforge.evaluators.splits import split_parts
from masforge.evaluators.tasks import Task, get_task
from masforge.genome.router import Router
from masforge.genome.schema import Genome, Portfolio
from masforge.genome.validate import validate
from masforge.search.fitness import Fitness
from masforge.standalone.router import question_features, route_features

SELECTION_SPLIT = "validation+train"
_EPS = 1e-9


class PortfolioError(MasforgeError):
    """A portfolio cannot be built from what the archive holds (the message says why and what to do)."""


@dataclass
class Member:
    """One candidate's per-question record on the selection set."""

    id: str
    name: str
    genome: Genome
    scores: np.ndarray
    dollars: np.ndarray
    calls: float
    """LM answers per question (generated or read from the cache): what running it costs on a free model."""

    @property
    def score(self) -> float:
        return float(self.scores.mean())


@dataclass
class Routing:
    """What a router over some members does on the selection questions (cross-validated or not)."""

    picks: np.ndarray
    """The member index chosen for each question."""
    score: float
    fitness: float
    calls: float
    accuracy: float
    """Share of questions where the pick is the oracle's (the member with the best fitness there)."""


@dataclass
class PortfolioBuild:
    """A built portfolio and how it did on the selection set."""

    genome: Genome
    members: list[Member]
    single_best: Member
    cv: Routing
    """Cross-validated: each question routed by a router that never saw it."""
    fitted: Routing
    """The final router (fitted on every question) on the same questions: where it sends them."""
    oracle_score: float
    """Mean score of the best member per question: what a perfect router would reach."""
    task: str
    split: str
    lm_key: str
    cost_weight: float
    n: int
    candidates: int
    """Candidates scored on every selection question (the pool members were chosen from)."""
    folds: int = 5
    steps: list[str] = field(default_factory=list)
    """One line per greedy step: what joined and what the CV routed fitness became."""
    base_accuracy: float | None = None
    """Share of selection questions where the single best is already the oracle's pick: the routing accuracy of
    always answering with it, the mark a router's accuracy has to pass to have learned anything."""
    pool_oracle_score: float | None = None
    """Mean score of the best candidate per question over every candidate scored on all selection questions (the
    score, not the fitness): what the archive holds for a router that knew each answer in advance."""

    def sends(self) -> dict[str, int]:
        """How many selection questions the final router sends to each member (by member name)."""
        counts = Counter(int(i) for i in self.fitted.picks)
        return {m.name: counts.get(i, 0) for i, m in enumerate(self.members)}

    def lines(self) -> list[str]:
        """The build as text: members, routing, CV routed score against the single best and the oracle."""
        out = [f"portfolio {self.genome.short_id} for {self.task} from {self.candidates} candidates scored on all "
               f"{self.n} {self.split} questions (lm {self.lm_key}, cost weight {self.cost_weight:g})"]
        sends = self.sends()
        for i, m in enumerate(self.members):
            out.append(f"  member {i}: {m.name} ({m.id[:12]}): score {m.score:.3f}, {m.calls:.1f} LM calls/question, "
                       f"router sends {sends[m.name]} of {self.n}")
        out += [
            f"  single best: {self.single_best.name} {self.single_best.score:.3f} "
            f"({self.single_best.calls:.1f} LM calls/question)",
            f"  routed ({self.folds}-fold CV): {self.cv.score:.3f} ({self.cv.calls:.1f} LM calls/question), "
            f"routing accuracy against the oracle {self.cv.accuracy:.0%}"
            + (f" (always the single best: {self.base_accuracy:.0%})" if self.base_accuracy is not None else ""),
            f"  oracle (best member per question): {self.oracle_score:.3f}",
        ]
        if self.pool_oracle_score is not None:
            out.append(f"  oracle over all {self.candidates} candidates (best per question): "
                       f"{self.pool_oracle_score:.3f}")
        return out


def _calls_per_question(result: Any) -> float:
    return (result.llm_calls + result.cache_hits) / result.n if result.n else 0.0


def _load_members(archive: ResumableArchive, task: Task, split: str, lm_key: str | None
                  ) -> tuple[list[Member], list[dict[str, str]], str]:
    """The candidates scored on every selection question, their question inputs (by the members' input names)
    and the LM key."""
    records = archive.list(task=task.name, split=split)
    results = [(rec, r) for rec in records for r in rec.results
               if r.task == task.name and r.split == split and (lm_key is None or r.lm_key == lm_key)]
    if not results:
        held = sorted({r.lm_key for rec in records for r in rec.results if r.task == task.name and r.split == split})
        fix = (f"; it holds results of {', '.join(held)} (an earlier reading revision or another LM): pass one as "
               f"the lm key (--lm-key)" if held else "; run a search on that task first")
        raise PortfolioError(f"the archive holds no result for task {task.name} split {split}"
                             + (f" with lm {lm_key}" if lm_key else "") + fix)
    if lm_key is None:
        lm_key = Counter(r.lm_key for _, r in results).most_common(1)[0][0]
        results = [(rec, r) for rec, r in results if r.lm_key == lm_key]
    examples = {ex.id: ex for ex in task.split(split)}
    n = max(r.n for _, r in results)
    ids = sorted({e for _, r in results if r.n == n for e in r.example_scores})
    missing = [e for e in ids if e not in examples]
    if missing:
        raise PortfolioError(f"example {missing[0]!r} of the archived results is not in task {task.name} split "
                             f"{split}; build with the task (and task options) the search ran on")
    members: list[Member] = []
    for rec, r in results:
        if r.n != n or set(r.example_scores) != set(ids) or rec.kind == "portfolio":
            continue
        genome = archive.genome(rec.genome_id)
        members.append(Member(rec.genome_id, rec.name, genome,
                              np.array([r.example_scores[e] for e in ids], dtype=float),
                              np.array([r.example_dollars.get(e, 0.0) for e in ids], dtype=float),
                              _calls_per_question(r)))
    if not members:
        raise PortfolioError(f"no candidate was scored on all {n} {split} questions; search with --no-race or "
                             "evaluate the candidates you want on the whole selection set")
    inputs = members[0].genome.inputs
    members = [m for m in members if m.genome.inputs == inputs]
    mapping = input_mapping(members[0].genome, task)
    questions = [{f: str(examples[e].inputs[mapping[f]]) for f in inputs} for e in ids]
    return members, questions, lm_key


class _Router:
    """Fits routers over the selection questions' features (computed once)."""

    def __init__(self, features: np.ndarray, fitness: Fitness, folds: int, seed: int, c: float) -> None:
        self.x = features
        self.fitness = fitness
        self.folds = folds
        self.seed = seed
        self.c = c

    def labels(self, members: Sequence[Member]) -> np.ndarray:
        """The oracle's member per question: best fitness, then fewer dollars, then fewer calls, then order."""
        fit = np.array([m.scores - self.fitness.cost_weight * m.dollars for m in members])
        out = []
        for q in range(self.x.shape[0]):
            out.append(min(range(len(members)),
                           key=lambda i: (-round(fit[i, q], 12), members[i].dollars[q], members[i].calls, i)))
        return np.array(out, dtype=int)

    def fit(self, rows: np.ndarray, labels: np.ndarray) -> Router:
        classes = sorted(set(labels[rows].tolist()))
        if len(classes) == 1:
            return Router(classes=[int(classes[0])])
        from sklearn.linear_model import LogisticRegression  # lazy: scikit-learn takes a second to import

        model = LogisticRegression(C=self.c, max_iter=2000).fit(self.x[rows], labels[rows])
        return Router(classes=[int(c) for c in model.classes_], coef=model.coef_.tolist(),
                      intercept=model.intercept_.tolist())

    def picks(self, router: Router, rows: np.ndarray) -> np.ndarray:
        data = router.model_dump()
        return np.array([route_features(data, self.x[q].tolist()) for q in rows], dtype=int)

    def routing(self, members: Sequence[Member], picks: np.ndarray, labels: np.ndarray) -> Routing:
        qs = np.arange(len(picks))
        scores = np.array([members[p].scores[q] for q, p in zip(qs, picks, strict=True)])
        dollars = np.array([members[p].dollars[q] for q, p in zip(qs, picks, strict=True)])
        calls = np.array([members[p].calls for p in picks])
        return Routing(picks, float(scores.mean()), self.fitness(float(scores.mean()), float(dollars.mean())),
                       float(calls.mean()), float((picks == labels).mean()))

    def cross_validated(self, members: Sequence[Member]) -> Routing:
        from sklearn.model_selection import KFold

        labels = self.labels(members)
        n = len(labels)
        picks = np.zeros(n, dtype=int)
        folds = KFold(n_splits=min(self.folds, n), shuffle=True, random_state=self.seed)
        for train, held in folds.split(self.x):
            picks[held] = self.picks(self.fit(train, labels), held)
        return self.routing(members, picks, labels)


def build_portfolio(archive: ResumableArchive, task: Task | str, split: str = SELECTION_SPLIT,
                    lm_key: str | None = None, cost_weight: float = 0.0, *, max_members: int = 4, pool: int = 24,
                    folds: int = 5, seed: int = 0, c: float = 1.0, name: str | None = None,
                    escalate: bool = False) -> PortfolioBuild:
    """Build a portfolio for ``task`` from ``archive``'s per-example results on ``split`` (the selection set; the
    test split is refused). ``lm_key``: whose results (default: the most common); ``cost_weight``: the run's
    fitness; ``pool``: how many of the best candidates (distinct per-question scores) may join; ``folds``: the
    cross-validation of the router; ``c``: its regularisation (sklearn's C); ``escalate``: give the portfolio an
    escalation order, its members from the fewest LM calls per question to the most (an answer failing an example
    its question states then passes the question on; the archive has no record of which answers pass, so the
    cross-validated score does not count it)."""
    if "test" in split_parts(split):
        raise PortfolioError("a portfolio is built from the selection split only (validation+train); the test "
                             "split is held out to judge it")
    if max_members < 1 or folds < 2:
        raise PortfolioError(f"max_members must be at least 1 and folds at least 2 (got {max_members}, {folds})")
    the_task = get_task(task) if isinstance(task, str) else task
    fitness = Fitness(cost_weight)
    candidates, questions, lm_key = _load_members(archive, the_task, split, lm_key)
    ranked = sorted(candidates, key=lambda m: (-fitness(m.score, float(m.dollars.mean())), m.calls, m.id))
    seen: set[bytes] = set()
    distinct = []
    for m in ranked:  # one per per-question score vector: the cheapest of equals
        key = m.scores.tobytes()
        if key not in seen:
            seen.add(key)
            distinct.append(m)
    distinct = distinct[:pool]
    router = _Router(np.array([question_features(q) for q in questions]), fitness, folds, seed, c)
    chosen = [distinct[0]]
    current = router.cross_validated(chosen)
    steps = [f"start: {chosen[0].name} ({chosen[0].id[:12]}), fitness {current.fitness:.3f}"]
    while len(chosen) < max_members:
        best: tuple[Member, Routing] | None = None
        for m in distinct:
            if m in chosen:
                continue
            trial = router.cross_validated([*chosen, m])
            better = trial.fitness > current.fitness + _EPS
            cheaper = trial.fitness >= current.fitness - _EPS and trial.calls < current.calls - _EPS
            if (better or cheaper) and (best is None or (trial.fitness, -trial.calls) > (best[1].fitness,
                                                                                          -best[1].calls)):
                best = (m, trial)
        if best is None:
            break
        chosen.append(best[0])
        current = best[1]
        steps.append(f"+ {best[0].name} ({best[0].id[:12]}): CV routed fitness {current.fitness:.3f}, "
                     f"{current.calls:.1f} LM calls/question")
    labels = router.labels(chosen)
    final = router.fit(np.arange(len(labels)), labels)
    fitted = router.routing(chosen, router.picks(final, np.arange(len(labels))), labels)
    oracle = float(np.mean([chosen[best].scores[q] for q, best in enumerate(labels)]))
    pool_oracle = float(np.max([m.scores for m in candidates], axis=0).mean())
    genome = Genome(
        kind="portfolio", name=name or f"portfolio-{the_task.name}",
        description=(f"Routes each question to one of {len(chosen)} systems found on {the_task.name} ("
                     + ", ".join(m.name for m in chosen) + "), by a router fitted on their per-question results on "
                     f"the {split} split."),
        inputs=list(chosen[0].genome.inputs), outputs=list(chosen[0].genome.outputs),
        portfolio=Portfolio(members=[m.genome for m in chosen], router=final,
                            escalation=sorted(range(len(chosen)), key=lambda i: (chosen[i].calls, i))
                            if escalate and len(chosen) > 1 else []),
        metadata={"members": [m.id for m in chosen], "task": the_task.name, "split": split, "lm_key": lm_key,
                  "cost_weight": cost_weight, "questions": len(labels), "cv_score": round(current.score, 4),
                  "single_best_score": round(chosen[0].score, 4), "oracle_score": round(oracle, 4),
                  "routing_accuracy": round(current.accuracy, 4)})
    validate(genome)
    return PortfolioBuild(genome, chosen, chosen[0], current, fitted, oracle, the_task.name, split, lm_key,
                          cost_weight, len(labels), len(candidates), folds, steps, float(np.mean(labels == 0)),
                          pool_oracle)


def add_portfolio(archive: ResumableArchive, build: PortfolioBuild, run: str = "") -> Any:
    """Store the built portfolio in ``archive`` as a candidate whose parents are its members."""
    return archive.add(build.genome, parents=[m.id for m in build.members], strategy="portfolio",
                       operator="route", rationale="; ".join(build.steps), run=run)
