"""Metrics of numeric and MATH answers: the final number of a reply (GSM8K's ``####``, thousands commas, fractions)
and the MATH answer normaliser (``_strip_string`` of Hendrycks et al. 2021) extended with numeric comparison."""

from __future__ import annotations

import math
import re
from fractions import Fraction
from typing import Any

from masforge.evaluators.answer_reading import answer_of, as_text
from masforge.evaluators.example import Example
from masforge.evaluators.score import Score

# --------------------------------------------------------------------------------------------
# Numbers
# --------------------------------------------------------------------------------------------

_LATEX_FRAC = re.compile(r"\\[dt]?frac\s*\{\s*(-?[\d.,]+)\s*\}\s*\{\s*(-?[\d.,]+)\s*\}")
_NUMBER = re.compile(
    r"(?<![\w.])"  # not glued to a word or a previous number
    r"(?P<sign>[-−+])?\s?\$?\s?"
    r"(?P<num>\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?|\.\d+)"
    r"(?:\s*/\s*(?P<den>\d+(?:\.\d+)?)(?![\d/]))?"
)


def _number_value(match: re.Match[str]) -> float | None:
    value = float(match.group("num").replace(",", ""))
    if match.group("den") is not None:
        den = float(match.group("den"))
        if den == 0:
            return None
        value = value / den
    if match.group("sign") in ("-", "−"):
        value = -value
    return value


def extract_number(text: Any) -> float | None:
    """The final numeric answer in `text`, or None.

    Takes the first number after the last `####` if there is one, else the last number.
    Handles thousands commas (`1,234`), `$`, signs, decimals, simple fractions (`3/4` -> 0.75,
    `\\frac{3}{4}` -> 0.75) and numbers given as int/float objects.
    """
    if isinstance(text, bool) or text is None:
        return None
    if isinstance(text, int | float):
        return float(text) if math.isfinite(text) else None
    text = str(text)
    text = _LATEX_FRAC.sub(lambda m: f"{m.group(1)}/{m.group(2)}", text)
    text = text.replace("\\$", "$").replace("\\!", "").replace("{,}", ",")
    if "####" in text:  # GSM8K style: the first number after the last "####"
        first = _NUMBER.search(text.rsplit("####", 1)[1])
        if first is not None:
            return _number_value(first)
    last = None
    for match in _NUMBER.finditer(text):
        last = match
    if last is None:
        return None
    return _number_value(last)


def numeric_match(pred: Any, gold: Any, *, rel_tol: float = 1e-6) -> bool:
    """True if the numbers extracted from `pred` and `gold` agree within `rel_tol` (relative)."""
    p, g = extract_number(pred), extract_number(gold)
    if p is None or g is None:
        return False
    return math.isclose(p, g, rel_tol=rel_tol, abs_tol=1e-9)


# --------------------------------------------------------------------------------------------
# MATH: boxed answers and LaTeX equivalence
# --------------------------------------------------------------------------------------------


def _braced(text: str, start: int) -> tuple[str, int] | None:
    """The content of the brace group opening at text[start] == '{' and the index after it."""
    depth = 0
    for i in range(start, len(text)):
        if text[i] == "{":
            depth += 1
        elif text[i] == "}":
            depth -= 1
            if depth == 0:
                return text[start + 1 : i], i + 1
    return None


def extract_boxed(text: Any) -> str | None:
    """The answer of a MATH-style solution: the content of the last `\\boxed{...}` (or `\\fbox`),
    nested braces included; else the last `$...$` span; else the final non-empty line."""
    if text is None:
        return None
    text = str(text)
    for macro in ("\\boxed", "\\fbox"):
        idx = text.rfind(macro)
        while idx >= 0:
            rest = idx + len(macro)
            while rest < len(text) and text[rest] == " ":
                rest += 1
            if rest < len(text) and text[rest] == "{":
                got = _braced(text, rest)
                if got is not None:
                    return got[0].strip()
            elif rest < len(text) and rest > idx + len(macro):  # "\boxed 5"
                return re.split(r"[\s$]", text[rest:], maxsplit=1)[0].strip()
            idx = text.rfind(macro, 0, idx)
    spans = re.findall(r"\$\$?([^$]+?)\$?\$", text)
    if spans:
        return spans[-1].strip()
    lines = [ln.strip() for ln in text.strip().splitlines() if ln.strip()]
    if not lines:
        return None
    last = lines[-1]
    m = re.search(r"(?i)answer\s*(?:is|:)\s*(.+)$", last)
    return (m.group(1) if m else last).strip().rstrip(".").strip()


def _fix_fracs(s: str) -> str:
    parts = s.split("\\frac")
    out = parts[0]
    for sub in parts[1:]:
        out += "\\frac"
        if not sub or sub[0] == "{":
            out += sub
            continue
        if len(sub) < 2:
            return s
        a, b = sub[0], sub[1]
        if b != "{":
            out += "{" + a + "}{" + b + "}" + sub[2:]
        else:
            out += "{" + a + "}" + b + sub[2:]
    return out


def _fix_sqrt(s: str) -> str:
    parts = s.split("\\sqrt")
    out = parts[0]
    for sub in parts[1:]:
        if sub and sub[0] not in "{[":
            out += "\\sqrt{" + sub[0] + "}" + sub[1:]
        else:
            out += "\\sqrt" + sub
    return out


def _unwrap_text(s: str) -> str:
    """`5\\text{ cm}` -> `5` (units after a number); `\\text{Evelyn}` -> `Evelyn`."""
    pattern = re.compile(r"\\(?:text|textbf|mbox|mathrm|textnormal)\s*\{")
    pieces: list[tuple[int, int, str]] = []
    for m in pattern.finditer(s):
        got = _braced(s, m.end() - 1)
        if got is not None:
            pieces.append((m.start(), got[1], got[0]))
    if not pieces:
        return s
    without = s
    for start, end, _ in reversed(pieces):
        without = without[:start] + without[end:]
    if re.search(r"\d", without):
        return without  # the \text{...} parts were units
    out = s
    for start, end, inner in reversed(pieces):
        out = out[:start] + inner + out[end:]
    return out


def normalize_math(answer: Any) -> str:
    """Normalise a LaTeX answer for comparison (Hendrycks' `_strip_string`, extended)."""
    s = str(answer).strip()
    s = s.replace("\n", "").replace("\\!", "").replace("\\,", "").replace("\\;", "").replace("\\:", "")
    s = s.replace("\\\\", "\\").replace("\\displaystyle", "")
    s = s.replace("tfrac", "frac").replace("dfrac", "frac")
    s = s.replace("\\left", "").replace("\\right", "")
    s = re.sub(r"\^\s*\{\s*\\circ\s*\}|\^\s*\\circ|°|\\degree", "", s)
    s = s.replace("\\$", "").replace("$", "")
    s = _unwrap_text(s)
    s = re.sub(r"\s*(degrees?|units?|cm|inches|meters|feet)\s*$", "", s)
    s = s.replace("\\%", "").replace("%", "")
    s = s.replace(" .", " 0.").replace("{.", "{0.")
    s = s.strip().rstrip(".").strip()
    if not s:
        return s
    if s[0] == ".":
        s = "0" + s
    halves = s.split("=")
    if len(halves) == 2 and len(halves[0].strip()) <= 2:
        s = halves[1]
    s = _fix_sqrt(s)
    s = s.replace(" ", "")
    s = _fix_fracs(s)
    if s == "0.5":
        s = "\\frac{1}{2}"
    m = re.fullmatch(r"(-?\d+)/(\d+)", s)
    if m:
        s = "\\frac{" + m.group(1) + "}{" + m.group(2) + "}"
    m = re.fullmatch(r"\(?([A-Za-z])\)?", s)
    if m:  # "(C)" and "C" are the same multiple-choice answer
        s = m.group(1).upper()
    return s


def _math_number(s: str) -> Fraction | float | None:
    neg = False
    if s.startswith("-"):
        neg, s = True, s[1:]
    elif s.startswith("+"):
        s = s[1:]
    value: Fraction | float | None = None
    m = re.fullmatch(r"\\frac\{(-?[\d.]+)\}\{(-?[\d.]+)\}", s) or re.fullmatch(r"(-?[\d.]+)/(-?[\d.]+)", s)
    try:
        if m:
            den = Fraction(m.group(2))
            value = Fraction(m.group(1)) / den if den != 0 else None
        elif re.fullmatch(r"\d{1,3}(,\d{3})+(\.\d+)?", s):
            value = Fraction(s.replace(",", ""))
        elif re.fullmatch(r"\d+(\.\d*)?|\.\d+|\d+(\.\d*)?e[-+]?\d+", s):
            value = Fraction(s)
    except (ValueError, ZeroDivisionError):
        return None
    if value is None:
        return None
    return -value if neg else value


def _split_top(s: str) -> list[str]:
    parts, depth, cur = [], 0, ""
    for ch in s:
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append(cur)
            cur = ""
        else:
            cur += ch
    parts.append(cur)
    return parts


def math_equal(pred: Any, gold: Any) -> bool:
    """True if two MATH answers are equivalent: equal after LaTeX normalisation, numerically equal
    (`0.5` == `\\frac12` == `1/2`), or tuples/intervals whose elements are pairwise equal."""
    if pred is None or gold is None:
        return False
    a, b = normalize_math(pred), normalize_math(gold)
    if not a:
        return False
    if a == b:
        return True
    na, nb = _math_number(a), _math_number(b)
    if na is not None and nb is not None:
        return math.isclose(float(na), float(nb), rel_tol=1e-6, abs_tol=1e-9)
    if len(a) > 2 and len(b) > 2 and a[0] == b[0] and a[-1] == b[-1] and a[0] in "([{" and a[-1] in ")]}":
        pa, pb = _split_top(a[1:-1]), _split_top(b[1:-1])
        if len(pa) == len(pb) and len(pa) > 1:
            return all(math_equal(x, y) for x, y in zip(pa, pb, strict=True))
    pa, pb = _split_top(a), _split_top(b)
    if len(pa) == len(pb) > 1:  # unordered lists of solutions: "2,-3" == "-3,2"
        return sorted(normalize_math(x) for x in pa) == sorted(normalize_math(y) for y in pb) or all(
            math_equal(x, y) for x, y in zip(pa, pb, strict=True)
        )
    return False


# --------------------------------------------------------------------------------------------
# Metric functions over (example, outputs)
# --------------------------------------------------------------------------------------------


def metric_numeric(example: Example, outputs: dict[str, Any]) -> Score:
    """Numeric answer: last number (or the one after ####) equal to the gold within 1e-6 relative."""
    raw = answer_of(outputs)
    pred = extract_number(raw if isinstance(raw, int | float) else as_text(raw))
    gold = extract_number(example.target)
    if pred is None:
        return Score(0.0, {"error": "no number found in the answer", "gold": gold})
    ok = gold is not None and math.isclose(pred, gold, rel_tol=1e-6, abs_tol=1e-9)
    return Score(float(ok), {"pred": pred, "gold": gold})


def metric_math(example: Example, outputs: dict[str, Any]) -> Score:
    """MATH answer: the last \\boxed{} (or fallback) equivalent to the gold (`math_equal`)."""
    pred = extract_boxed(as_text(answer_of(outputs)))
    if not pred:
        return Score(0.0, {"error": "no answer found (expected \\boxed{...})", "gold": example.target})
    return Score(float(math_equal(pred, example.target)), {"pred": pred, "gold": example.target})
