"""Metrics of text answers: SQuAD normalisation, exact match and token F1 (Rajpurkar et al. 2016), DROP's bag F1
with number normalisation (Dua et al. 2019, as in OpenAI simple-evals) and the letter of a multiple-choice answer;
each as a text function and as a metric over (example, outputs)."""

from __future__ import annotations

import collections
import re
import string
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from masforge.evaluators.answer_reading import answer_of, answer_readings, as_text
from masforge.evaluators.example import Example
from masforge.evaluators.score import MetricFn, Score

# --------------------------------------------------------------------------------------------
# Text answers (SQuAD)
# --------------------------------------------------------------------------------------------

_PUNCT = set(string.punctuation)
_ARTICLES = re.compile(r"\b(a|an|the)\b", re.UNICODE)


def normalize_text(text: str) -> str:
    """SQuAD normalisation: lowercase, drop punctuation and articles, collapse whitespace."""
    text = str(text).lower()
    text = "".join(ch for ch in text if ch not in _PUNCT)
    text = _ARTICLES.sub(" ", text)
    return " ".join(text.split())


def _golds(gold: Any) -> list[str]:
    if gold is None:
        return []
    if isinstance(gold, str):
        return [gold]
    if isinstance(gold, Iterable) and not isinstance(gold, Mapping):
        return [str(g) for g in gold]
    return [str(gold)]


_PLAIN_NUMBER = re.compile(r"[-+]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?|[-+]?\.\d+")


def _number(text: str) -> float | None:
    """The value of a text that is one number as written ("6.0", "-4", "1,500"), else None."""
    text = str(text).strip()
    return float(text.replace(",", "")) if _PLAIN_NUMBER.fullmatch(text) else None


def exact_match(pred: str, gold: str | Sequence[str]) -> float:
    """1.0 if the normalised prediction equals any normalised gold answer, else 0.0. A number and a gold number are
    compared by value: "6.0" matches "6" (and not "60", which dropping the full stop as punctuation would give)."""
    p, value = normalize_text(pred), _number(pred)
    for g in _golds(gold):
        expected = _number(g) if value is not None else None
        if (value == expected) if expected is not None else p == normalize_text(g):
            return 1.0
    return 0.0


def _token_f1(pred_tokens: list[str], gold_tokens: list[str]) -> float:
    common = collections.Counter(pred_tokens) & collections.Counter(gold_tokens)
    same = sum(common.values())
    if not pred_tokens or not gold_tokens:
        return float(pred_tokens == gold_tokens)
    if same == 0:
        return 0.0
    precision = same / len(pred_tokens)
    recall = same / len(gold_tokens)
    return 2 * precision * recall / (precision + recall)


def f1_tokens(pred: str, gold: str | Sequence[str]) -> float:
    """SQuAD token F1 (multiset overlap of normalised tokens), max over gold answers."""
    p = normalize_text(pred).split()
    return max((_token_f1(p, normalize_text(g).split()) for g in _golds(gold)), default=0.0)


def contains(pred: str, gold: str | Sequence[str]) -> float:
    """1.0 if some normalised gold answer occurs (as whole words) in the normalised prediction."""
    p = f" {normalize_text(pred)} "
    return float(any(normalize_text(g) and f" {normalize_text(g)} " in p for g in _golds(gold)))


# --------------------------------------------------------------------------------------------
# DROP F1 (as in the DROP paper's evaluation script and OpenAI simple-evals `drop_eval.py`)
# --------------------------------------------------------------------------------------------


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def _drop_normalize(text: str) -> str:
    parts = []
    for token in re.split(" |-", str(text)):
        token = token.lower()
        if not _is_number(token):
            token = "".join(ch for ch in token if ch not in _PUNCT)
        if _is_number(token):
            token = str(float(token))
        token = " ".join(_ARTICLES.sub(" ", token).split())
        if token.strip():
            parts.append(token)
    return " ".join(parts).strip()


def _bag_f1(pred_bag: set[str], gold_bag: set[str]) -> float:
    inter = len(pred_bag & gold_bag)
    precision = inter / len(pred_bag) if pred_bag else 1.0
    recall = inter / len(gold_bag) if gold_bag else 1.0
    if precision == 0.0 and recall == 0.0:
        return 0.0
    return 2 * precision * recall / (precision + recall)


def drop_f1(pred: str, gold: str | Sequence[str]) -> float:
    """DROP F1: bag-of-tokens F1 after DROP normalisation (numbers as floats, so "3" == "3.0"),
    zero when the gold contains numbers and none of them appears in the prediction; max over the
    gold answers (the `|`-separated alternatives of simple-evals). Not rounded."""
    pred_bag = set(_drop_normalize(pred).split())
    best = 0.0
    for g in _golds(gold):
        gold_bag = set(_drop_normalize(g).split())
        gold_nums = {w for w in gold_bag if _is_number(w)}
        pred_nums = {w for w in pred_bag if _is_number(w)}
        if gold_nums and not gold_nums & pred_nums:
            continue
        best = max(best, _bag_f1(pred_bag, gold_bag))
    return best


# --------------------------------------------------------------------------------------------
# Multiple choice
# --------------------------------------------------------------------------------------------


def multiple_choice_letter(text: Any, letters: str = "ABCD") -> str | None:
    """The chosen option letter in a free-text answer, or None.

    Recognises, in order: "The answer is (C)" / "Answer: C" (the last such phrase), `\\boxed{C}`,
    a reply that starts with the letter ("C", "C. 42", "c) mitochondria", "(C)"), the last
    parenthesised "(C)", and a letter that ends the reply ("... so it's B.").
    """
    if text is None:
        return None
    text = str(text).strip()
    if not text:
        return None
    up = re.escape(letters.upper())
    anycase = re.escape(letters.upper() + letters.lower())
    patterns = [
        rf"(?i:answer)\s*(?i:is|:|=)?\s*(?i:option|choice)?\s*[:\-]?\s*\**\s*"
        rf"(?:\(([{anycase}])\)|([{up}])\b|([{anycase}])(?=\s*$|[.)]))",
        rf"\\boxed\{{\s*\(?\s*(?:\\text\{{)?([{anycase}])\}}?\s*\)?\s*\}}",
    ]
    for pat in patterns:
        found = [next(g for g in m.groups() if g) for m in re.finditer(pat, text)]
        if found:
            return found[-1].upper()
    m = re.match(rf"^\**\s*\(?([{anycase}])\s*(?:$|[.:)*])", text)
    if m:
        return m.group(1).upper()
    found = re.findall(rf"\(([{up}])\)", text)
    if found:
        return found[-1]
    m = re.search(rf"(?:^|[\s*(])([{up}])[\s.)*]*$", text)
    if m:
        return m.group(1)
    return None


# --------------------------------------------------------------------------------------------
# Metric functions over (example, outputs)
# --------------------------------------------------------------------------------------------


def _text_metric(fn: Callable[[str, Any], float], name: str) -> MetricFn:
    def metric(example: Example, outputs: dict[str, Any]) -> Score:
        pred = as_text(answer_of(outputs))
        if pred is None or not pred.strip():
            return Score(0.0, {"error": "empty answer", "gold": example.target})
        return Score(float(fn(pred, example.target)), {"pred": pred, "gold": example.target})

    metric.__name__ = name
    metric.__doc__ = f"{fn.__name__}(outputs['answer'], example.target)"
    return metric


metric_f1 = _text_metric(f1_tokens, "f1")
metric_contains = _text_metric(contains, "contains")


def _gold_letter(target: Any) -> str:
    if isinstance(target, int) and not isinstance(target, bool):
        return "ABCDEFGHIJ"[target]
    return str(target).strip().upper()


def metric_mc(example: Example, outputs: dict[str, Any]) -> Score:
    """Multiple choice: the extracted letter equals the gold letter."""
    gold = _gold_letter(example.target)
    letters = example.meta.get("letters", "ABCD")
    pred = multiple_choice_letter(as_text(answer_of(outputs)), letters)
    if pred is None:
        return Score(0.0, {"error": f"no option letter ({', '.join(letters)}) found", "gold": gold})
    return Score(float(pred == gold), {"pred": pred, "gold": gold})


def metric_drop(example: Example, outputs: dict[str, Any]) -> Score:
    """DROP F1 (max over the gold alternatives), with exact match in the details."""
    pred = as_text(answer_of(outputs))
    if pred is None or not pred.strip():
        return Score(0.0, {"error": "empty answer", "gold": example.target})
    golds = _golds(example.target)
    em = float(any(_drop_normalize(pred) == _drop_normalize(g) for g in golds))
    return Score(drop_f1(pred, golds), {"pred": pred, "gold": golds, "em": em})


def metric_exact_match(example: Example, outputs: dict[str, Any]) -> Score:
    """Exact match (SQuAD normalisation) of the best reading of the answer (:func:`answer_readings`); a wrong one
    says why: ``extra_text`` (the gold answer is there, with more around it) or ``mismatch``."""
    pred = as_text(answer_of(outputs))
    if pred is None or not pred.strip():
        return Score(0.0, {"error": "empty answer", "gold": example.target})
    readings = answer_readings(pred)
    best = next((r for r in readings if exact_match(r, example.target)), None)
    if best is not None:
        return Score(1.0, {"pred": best, "gold": example.target})
    stated = readings[1] if len(readings) > 1 else readings[0]
    inside = contains(pred, example.target) > 0
    return Score(0.0, {"pred": stated, "gold": example.target, "error_kind": "extra_text" if inside else "mismatch"})
