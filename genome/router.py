"""A portfolio genome's router as data: the numbers of a linear classifier over a stateless question feature map.

The numbers are what scikit-learn's LogisticRegression learned (``coef_``, ``intercept_``, ``classes_``); the
feature map and the prediction are plain Python in :mod:`masforge.standalone.router`, so a router loads
safely (no pickle) and an exported portfolio computes the same choice without scikit-learn.
"""

from __future__ import annotations

import math

from pydantic import BaseModel, ConfigDict, Field

from masforge.genome.names import FEATURE_VERSION, feature_count


class Router(BaseModel):
    """Which member answers a question: ``classes`` (member indices) and a linear model over the features."""

    model_config = ConfigDict(extra="forbid")

    version: int = Field(default=FEATURE_VERSION, description="Version of the feature map.")
    n_hash: int = Field(default=256, ge=8, le=65536, description="Hashed word buckets of the feature map.")
    ngrams: int = Field(default=2, ge=1, le=3, description="Word n-grams hashed (1: words, 2: words and pairs).")
    classes: list[int] = Field(min_length=1, description="Member indices the router chooses among.")
    coef: list[list[float]] = Field(default_factory=list, description="One row per class (one row for two "
                                    "classes, none for one), each as long as the feature vector.")
    intercept: list[float] = Field(default_factory=list, description="One per coefficient row.")



def router_problems(router: Router, members: int) -> list[str]:
    """What is wrong with ``router`` for a portfolio of ``members`` systems, one line each (empty: fine)."""
    place = "portfolio.router"
    if router.version != FEATURE_VERSION:
        return [f"{place}.version: feature map version {router.version} is unknown (this masforge reads "
                f"{FEATURE_VERSION}); build the portfolio again"]
    out: list[str] = []
    bad = [c for c in router.classes if not 0 <= c < members]
    if bad:
        out.append(f"{place}.classes: member index {bad[0]} is out of range (the portfolio has {members} members, "
                   f"0 to {members - 1})")
    if len(set(router.classes)) != len(router.classes):
        out.append(f"{place}.classes: a member index appears twice; list each once")
    rows = 0 if len(router.classes) == 1 else 1 if len(router.classes) == 2 else len(router.classes)
    if len(router.coef) != rows:
        out.append(f"{place}.coef: {len(router.coef)} rows for {len(router.classes)} classes (want {rows}: none "
                   "for one class, one for two, one per class for more)")
    if len(router.intercept) != len(router.coef):
        out.append(f"{place}.intercept: {len(router.intercept)} values for {len(router.coef)} coef rows; give one "
                   "per row")
    width = feature_count(router.n_hash)
    for i, row in enumerate(router.coef):
        if len(row) != width:
            out.append(f"{place}.coef[{i}]: {len(row)} numbers, but the feature map (n_hash {router.n_hash}) "
                       f"has {width}; build the portfolio again")
            break
    numbers = [x for row in router.coef for x in row] + list(router.intercept)
    if not all(math.isfinite(x) for x in numbers):
        out.append(f"{place}: holds a number that is not finite (nan or inf); build the portfolio again")
    return out
