"""A cheap stand-in for evaluation: a regressor from :func:`genome_features` to the score a genome got,
fitted on the candidates a search has already paid for, used to skip proposals that are hopeless.

Evaluating a genome costs many LM calls; predicting its score from ~16 structural numbers costs
microseconds. The prediction is crude (two genomes with the same shape but different instructions look
identical to it), so it is only trusted to say "this cannot win": a proposal is skipped when even an
optimistic prediction (mean plus the spread of the forest's trees) plus a margin stays below the best
score. A small exploration rate lets some skipped-looking proposals through anyway, so the surrogate
keeps seeing evidence against its own mistakes.

Any strategy uses it with the option ``surrogate: true``: :class:`masforge.search.strategies.Strategy`
screens each proposal through a :class:`SurrogateFilter` before the context pays for it.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from masforge.genome.schema import Genome
from masforge.search.events import SurrogateSkip
from masforge.search.features import genome_features
from masforge.search.population import Candidate

if TYPE_CHECKING:
    from masforge.search.context import Proposal, SearchContext

Target = Literal["score", "fitness"]


class Surrogate:
    """A scikit-learn regressor on genome features predicting a candidate's score (or fitness).

    ``model`` is ``"forest"`` (RandomForest: gives a spread across trees, used for optimism) or
    ``"boosting"`` (GradientBoosting: no spread). Nothing is predicted before ``min_samples`` distinct
    candidates have been seen.
    """

    def __init__(self, *, model: Literal["forest", "boosting"] = "forest", min_samples: int = 8,
                 target: Target = "score", seed: int = 0, n_estimators: int = 60) -> None:
        if model not in ("forest", "boosting"):
            raise ValueError(f"surrogate model must be 'forest' or 'boosting', got {model!r}")
        self.model_kind = model
        self.min_samples = max(2, int(min_samples))
        self.target = target
        self.seed = seed
        self.n_estimators = n_estimators
        self._model: Any = None
        self._x: np.ndarray = np.zeros((0, 0))
        self._y: np.ndarray = np.zeros(0)
        self.n_fitted = 0
        """How many candidates the current model was fitted on (0: not fitted)."""

    def _new_model(self) -> Any:
        from sklearn.ensemble import GradientBoostingRegressor, RandomForestRegressor

        if self.model_kind == "boosting":
            return GradientBoostingRegressor(n_estimators=self.n_estimators, max_depth=3, random_state=self.seed)
        # Shallow leaves would over-smooth a few dozen samples; min_samples_leaf=1 keeps them.
        return RandomForestRegressor(n_estimators=self.n_estimators, random_state=self.seed)

    @property
    def ready(self) -> bool:
        """True once fitted (enough candidates seen)."""
        return self._model is not None

    def _dataset(self, candidates: Sequence[Candidate]) -> tuple[np.ndarray, np.ndarray]:
        # One row per distinct genome: a duplicate would weigh one system twice.
        seen: dict[str, Candidate] = {}
        for c in candidates:
            seen.setdefault(c.id, c)
        rows = [genome_features(c.genome) for c in seen.values()]
        ys = [c.score if self.target == "score" else c.fitness for c in seen.values()]
        return np.asarray(rows, dtype=float).reshape(len(rows), -1), np.asarray(ys, dtype=float)

    def fit(self, candidates: Sequence[Candidate]) -> bool:
        """Fit on ``candidates`` if there are at least ``min_samples`` distinct ones; True if fitted."""
        x, y = self._dataset(candidates)
        if len(y) < self.min_samples:
            return False
        model = self._new_model()
        model.fit(x, y)
        self._model, self._x, self._y, self.n_fitted = model, x, y, len(y)
        return True

    def update(self, ctx: SearchContext) -> bool:
        """Refit on ``ctx.population`` when it has grown since the last fit; True if a model is ready."""
        if len({c.id for c in ctx.population}) != self.n_fitted:
            self.fit(ctx.population)
        return self.ready

    def predict_with_spread(self, genome: Genome) -> tuple[float, float]:
        """(mean prediction, spread) for ``genome``; the spread is the std across a forest's trees (0 for
        boosting). Raises RuntimeError when not fitted."""
        if self._model is None:
            raise RuntimeError("surrogate not fitted yet: call fit() with at least min_samples candidates")
        row = np.asarray([genome_features(genome)], dtype=float)
        mean = float(self._model.predict(row)[0])
        spread = 0.0
        if self.model_kind == "forest":
            per_tree = [float(t.predict(row)[0]) for t in self._model.estimators_]
            spread = float(np.std(per_tree))
        return mean, spread

    def predict(self, genome: Genome) -> float | None:
        """Predicted score of ``genome`` (None before the model is fitted)."""
        if not self.ready:
            return None
        return self.predict_with_spread(genome)[0]

    def should_skip(self, genome: Genome, best_score: float, margin: float = 0.1) -> bool:
        """True when ``genome`` looks hopeless: optimistic prediction + ``margin`` < ``best_score``.

        Never skips before the model is fitted (no evidence, no verdict)."""
        if not self.ready:
            return False
        mean, spread = self.predict_with_spread(genome)
        return mean + spread + margin < best_score

    def accuracy(self, max_loo: int = 40) -> dict[str, Any]:
        """How well the model predicts unseen candidates, measured on the data it was fitted on.

        Leave-one-out for up to ``max_loo`` samples, 5-fold cross-validation above. Returns ``n``,
        ``method``, ``mae`` and ``spearman`` (None when undefined, e.g. all scores equal)."""
        n = len(self._y)
        if self._model is None or n < 3:
            return {"n": n, "method": "none", "mae": None, "spearman": None}
        from scipy.stats import spearmanr
        from sklearn.model_selection import KFold, LeaveOneOut, cross_val_predict

        splitter: Any = LeaveOneOut() if n <= max_loo else KFold(5, shuffle=True, random_state=self.seed)
        pred = cross_val_predict(self._new_model(), self._x, self._y, cv=splitter)
        mae = float(np.mean(np.abs(pred - self._y)))
        rho: float | None = None
        if np.ptp(self._y) > 0 and np.ptp(pred) > 0:
            value = float(spearmanr(pred, self._y).statistic)
            rho = None if math.isnan(value) else value
        return {"n": n, "method": "loo" if n <= max_loo else "5-fold", "mae": mae, "spearman": rho}


class SurrogateFilter:
    """Drops proposals the surrogate calls hopeless before the context pays for them, and counts them.

    Genomes the search already knows pass (they are free); before the model is fitted everything
    passes; a skipped-looking proposal still passes with probability ``explore``.
    """

    def __init__(self, surrogate: Surrogate | None = None, *, margin: float = 0.1, explore: float = 0.1,
                 seed: int = 0) -> None:
        self.surrogate = surrogate or Surrogate(seed=seed)
        self.margin = margin
        self.explore = explore
        self.rng = random.Random(f"surrogate:{seed}")  # its own stream: the strategy's rng stays reproducible
        self.checked = 0
        self.skipped = 0
        self.explored = 0

    def _best(self, ctx: SearchContext) -> float:
        best = ctx.best(1)
        if not best:
            return -math.inf
        return best[0].score if self.surrogate.target == "score" else best[0].fitness

    def admit(self, ctx: SearchContext, genome: Genome) -> bool:
        """True if ``genome`` should be evaluated."""
        if ctx.known(genome) is not None or not self.surrogate.update(ctx):
            return True
        self.checked += 1
        best = self._best(ctx)
        if not self.surrogate.should_skip(genome, best, self.margin):
            return True
        if self.rng.random() < self.explore:
            self.explored += 1
            return True
        self.skipped += 1
        ctx.emit(SurrogateSkip(name=genome.name, predicted=self.surrogate.predict(genome), best=best))
        return False

    def filter(self, ctx: SearchContext, proposals: Sequence[Proposal]) -> list[Proposal]:
        """The proposals worth evaluating, in order."""
        return [p for p in proposals if self.admit(ctx, p.genome)]

    def stats(self) -> dict[str, Any]:
        """Counts of checked, skipped and explored proposals plus the model's accuracy."""
        return {"checked": self.checked, "skipped": self.skipped, "explored": self.explored,
                "accuracy": self.surrogate.accuracy()}
