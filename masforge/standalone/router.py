"""A portfolio's router as plain numbers: which member system answers a question.

A router is a linear classifier (fitted by scikit-learn's LogisticRegression when a portfolio is built) over a
stateless feature map of the question, stored as plain numbers: no pickle, nothing to unpickle, and the same
choice is computed here, with the standard library only, by masforge and by an exported portfolio alike.

The feature map (``FEATURE_VERSION`` 1): for each input field, its words (lower case runs of letters, digits
and ``_``) and word pairs, each hashed with md5 into ``n_hash`` signed buckets (the sign from another bit of the
hash, so collisions tend to cancel), the bucket vector scaled to unit length; then a few cheap numbers about
the whole question (``NUMERIC_FEATURES``): its length and lines (log-scaled), the examples it states (doctest
and ``assert`` lines, as the ``run_examples`` check reads them), whether it holds a ``def`` and its share of
digits. The router's data is a dict::

    {"n_hash": 256, "ngrams": 2, "version": 1,
     "classes": [0, 2],            # member indices the classifier chooses among (one: always that member)
     "coef": [[...]],              # one row per class, or one row when there are two classes (sklearn's form)
     "intercept": [...]}
"""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Mapping, Sequence
from typing import Any

from masforge.genome.names import FEATURE_VERSION, NUMERIC_FEATURES, feature_count  # noqa: F401 - re-exported
from masforge.standalone.examples import stated_examples

_WORD = re.compile(r"[a-z0-9_]+")


def _bucket(token: str, n_hash: int) -> tuple[int, float]:
    h = int.from_bytes(hashlib.md5(token.encode("utf-8")).digest()[:8], "little")
    return h % n_hash, (1.0 if (h >> 63) & 1 == 0 else -1.0)


def _numbers(text: str) -> list[float]:
    lines = text.splitlines()
    doctests = sum(1 for ln in lines if ln.lstrip().startswith(">>>"))
    asserts = sum(1 for ln in lines if ln.lstrip().startswith("assert"))
    stated = len(stated_examples(text))
    digits = sum(ch.isdigit() for ch in text)
    return [math.log1p(len(text)) / 10.0, math.log1p(len(lines)) / 5.0, min(doctests, 10) / 10.0,
            min(asserts, 10) / 10.0, min(stated, 10) / 10.0, 1.0 if "def " in text else 0.0,
            digits / len(text) if text else 0.0]


def question_features(inputs: Mapping[str, Any], n_hash: int = 256, ngrams: int = 2) -> list[float]:
    """The router's feature vector of one question (the system's input fields by name)."""
    hashed = [0.0] * n_hash
    texts = []
    for name in sorted(inputs):
        text = str(inputs[name])
        texts.append(text)
        words = _WORD.findall(text.lower())
        for n in range(1, ngrams + 1):
            for i in range(len(words) - n + 1):
                index, sign = _bucket(f"{name}:{' '.join(words[i:i + n])}", n_hash)
                hashed[index] += sign
    norm = math.sqrt(sum(v * v for v in hashed))
    if norm > 0:
        hashed = [v / norm for v in hashed]
    return hashed + _numbers("\n".join(texts))


def route_scores(router: Mapping[str, Any], features: Sequence[float]) -> list[float]:
    """The linear decision values: one per coefficient row (``coef . x + intercept``)."""
    return [sum(w * x for w, x in zip(row, features, strict=True)) + b
            for row, b in zip(router["coef"], router["intercept"], strict=True)]


def route_features(router: Mapping[str, Any], features: Sequence[float]) -> int:
    """The member index the router chooses for this feature vector (as sklearn's ``predict`` would: with two
    classes the second when the decision value is positive; with more the first row of the highest value)."""
    classes = list(router["classes"])
    if len(classes) == 1:
        return int(classes[0])
    scores = route_scores(router, features)
    if len(classes) == 2:
        return int(classes[1] if scores[0] > 0 else classes[0])
    best = max(range(len(scores)), key=lambda i: (scores[i], -i))
    return int(classes[best])


def route(router: Mapping[str, Any], inputs: Mapping[str, Any]) -> int:
    """The member index that answers the question ``inputs``."""
    return route_features(router, question_features(inputs, int(router["n_hash"]), int(router["ngrams"])))
