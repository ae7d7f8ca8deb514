"""Metrics: pure, hand-checkable scoring functions, and the metric registry used by tasks.

Two layers:

* text functions (`normalize_text`, `exact_match`, `f1_tokens`, `drop_f1`, `extract_number`,
  `numeric_match`, `extract_boxed`, `math_equal`, `multiple_choice_letter`, `extract_code`,
  `parse_grid`, `grid_match`) that take strings and return numbers, booleans or extracted strings.
  They follow the literature: SQuAD normalisation and token F1 (Rajpurkar et al. 2016), DROP's bag
  F1 with number normalisation (Dua et al. 2019, as in OpenAI simple-evals), the MATH answer
  normaliser (`_strip_string` of Hendrycks et al. 2021) extended with numeric comparison;
* metric functions `MetricFn = (example, outputs) -> float | Score` registered in `METRICS` by
  name. They read the scored output from `outputs["answer"]` (a `Task` maps its `output_field` onto
  that key) and the gold from `example.target` (and `example.meta` for code tests). They never raise
  on garbage model output: anything unparsable scores `Score(0.0, {"error": ...})`.

Code is executed only through `masforge.sandbox.runner.run_tests` (an isolated, killable subprocess).
"""

from __future__ import annotations

import ast
import collections
import json
import math
import re
import string
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from masforge.errors import SandboxError
from masforge.evaluators.example import Example
from masforge.execution.standalone.reading import split_final_answer, unfenced_code


@dataclass(frozen=True)
class Score:
    """The score of one system output on one example.

    `value` is in [0, 1]; `details` says why, e.g. `{"pred": "42", "gold": "42"}` or, for code,
    `{"error": "AssertionError", "error_kind": "exception", "traceback": "..."}`.
    """

    value: float
    details: dict[str, Any] = field(default_factory=dict)


MetricFn = Callable[[Example, dict[str, Any]], "float | Score"]

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


def exact_match(pred: str, gold: str | Sequence[str]) -> float:
    """1.0 if the normalised prediction equals any normalised gold answer, else 0.0."""
    p = normalize_text(pred)
    return float(any(p == normalize_text(g) for g in _golds(gold)))


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
# Code
# --------------------------------------------------------------------------------------------

_FENCE = re.compile(r"```[ \t]*([\w+#.-]*)[^\n]*\n(.*?)(?:```|\Z)", re.DOTALL)


def extract_code(text: Any, entry_point: str | None = None) -> str:
    """The code in a model reply, wherever the model put it: the last ```python fenced block, else the last fenced
    block of any (or no) language; with ``entry_point``, the last block that defines it when the last one does
    not (a block of example calls after the function). Without a fence, the whole text if it is a program, else
    the program inside the prose (:func:`unfenced_code`). An unclosed final fence runs to the end."""
    if text is None:
        return ""
    text = str(text)
    blocks = [(lang.lower(), body) for lang, body in _FENCE.findall(text)]
    python = [body for lang, body in blocks if lang in ("python", "py", "python3", "py3")]
    chosen = python or [body for _, body in blocks]
    if chosen:
        if entry_point and not _defines(chosen[-1], entry_point):
            defining = [b for b in chosen if _defines(b, entry_point)]
            if defining:
                return defining[-1].strip("\n")
        return chosen[-1].strip("\n")
    try:
        ast.parse(text)
    except SyntaxError:
        return unfenced_code(text) or text.strip("\n")
    return text.strip("\n")


def _defines(code: str, name: str) -> bool:
    return re.search(rf"^\s*(?:async\s+)?def\s+{re.escape(name)}\s*\(", code, re.MULTILINE) is not None


def code_pass(
    answer: Any,
    test_code: str,
    *,
    entry_point: str | None = None,
    prompt: str | None = None,
    timeout_s: float = 10.0,
) -> Score:
    """Run the code in `answer` against `test_code` in the sandbox; 1.0 if every test passes.

    HumanEval style: with `entry_point` and `prompt`, an answer that does not define the entry
    point is treated as a completion and appended to the prompt; a full function is appended after
    the prompt (so the prompt's imports and helpers exist), and `check(entry_point)` is called when
    the tests define `check`.
    """
    code = extract_code(answer, entry_point)
    if not code.strip():
        return Score(0.0, {"error": "no code found in the answer", "error_kind": "no_code"})
    try:
        from masforge.sandbox.runner import run_tests  # lazy: only code tasks need the sandbox
    except ImportError as exc:
        raise SandboxError(f"code metrics need masforge.sandbox.runner, which failed to import: {exc}") from exc
    program = code
    if prompt is not None and entry_point:
        if _defines(code, entry_point):
            program = prompt.rstrip("\n") + "\n\n\n" + code
        else:
            program = prompt + code
    tests = test_code
    if entry_point and re.search(r"^def check\(", test_code, re.MULTILINE):
        tests = f"{test_code}\n\ncheck({entry_point})\n"
    result = run_tests(program, tests, timeout_s=timeout_s)
    if result.ok:
        return Score(1.0, {"passed": True})
    return Score(
        0.0,
        {
            "passed": False,
            "error": result.error,
            "error_kind": result.error_kind,
            "traceback": result.traceback,
        },
    )


# --------------------------------------------------------------------------------------------
# ARC grids
# --------------------------------------------------------------------------------------------


def _is_grid(obj: Any) -> bool:
    return (
        isinstance(obj, list)
        and len(obj) > 0
        and all(isinstance(row, list) and row for row in obj)
        and all(isinstance(v, int) and not isinstance(v, bool) for row in obj for v in row)
    )


def _top_groups(s: str) -> list[str]:
    groups, depth, start = [], 0, 0
    for i, ch in enumerate(s):
        if ch == "[":
            if depth == 0:
                start = i
            depth += 1
        elif ch == "]" and depth > 0:
            depth -= 1
            if depth == 0:
                groups.append(s[start : i + 1])
    return groups


def parse_grid(text: Any) -> list[list[int]] | None:
    """The last grid in `text`: a JSON/Python list of lists of ints, else the last block of lines
    of digits ("0 7 7" or "077"). None if there is none."""
    if text is None:
        return None
    if _is_grid(text):
        return [list(row) for row in text]
    text = str(text)
    for chunk in reversed(re.findall(r"\[[\[\]\d,\s-]*\]", text)):
        for group in reversed(_top_groups(chunk)):
            try:
                obj = json.loads(group)
            except ValueError:
                try:
                    obj = ast.literal_eval(group)
                except (ValueError, SyntaxError):
                    continue
            if _is_grid(obj):
                return obj
    rows: list[list[int]] = []
    best: list[list[int]] = []
    for line in text.splitlines() + [""]:
        cells = line.strip().strip("|").split()
        if cells and all(c.isdigit() for c in cells):
            rows.append([int(c) for c in cells] if len(cells) > 1 else [int(d) for d in cells[0]])
        else:
            if rows:
                best = rows
            rows = []
    return best or None


def grid_match(pred: Any, gold: Any) -> bool:
    """True if the grid parsed from `pred` equals the gold grid exactly (shape and every cell)."""
    grid = parse_grid(pred)
    return grid is not None and grid == [list(row) for row in gold]


# --------------------------------------------------------------------------------------------
# Metric functions over (example, outputs) and the registry
# --------------------------------------------------------------------------------------------


def answer_of(outputs: Any) -> Any:
    """The scored output: `outputs["answer"]` for a mapping, the object itself otherwise."""
    if isinstance(outputs, Mapping):
        return outputs.get("answer")
    return outputs


def _as_text(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    if isinstance(value, str):
        return value
    if isinstance(value, list | dict | tuple):
        try:
            return json.dumps(value)
        except (TypeError, ValueError):
            return str(value)
    return str(value)


_WRAPPED = [re.compile(p, re.DOTALL) for p in (
    r"\\boxed\s*\{(.*)\}", r"\$\$?(.*?)\$?\$", r"\\\((.*)\\\)", r"\\\[(.*)\\\]", r"\*\*(.*)\*\*", r"__(.*)__",
    r"`+(.*?)`+", r'"(.*)"', r"'(.*)'", r"\\text(?:bf)?\s*\{(.*)\}")]
_VALUE_AFTER = re.compile(r"(?:\bis|=|:)[ \t]*([^\s=:][^=:\n]{0,40}?)[ \t]*[.;]?$")


def _unwrapped(text: str) -> str:
    """``text`` without the layout around a short answer: ``**-4**``, ``$-4$``, ``\\(\\boxed{-4}\\)``, ``"Paris"``,
    a closing full stop."""
    while True:
        before = text
        text = text.strip().rstrip(".;,。").strip()
        for wrapper in _WRAPPED:
            m = wrapper.fullmatch(text)
            if m:
                text = m.group(1)
                break
        if text == before:
            return text


def answer_readings(text: Any) -> list[str]:
    """The ways to read the one answer a reply states, as written first: the whole text, the final answer it
    states (after "Final answer:" however marked, see :func:`split_final_answer`), each without layout (bold,
    LaTeX, \\boxed{}, quotes, a full stop) and the short value a sentence ends on ("The result is -4", "x = -4").
    A metric that compares text takes the best reading: the answer as written, not its typography."""
    readings: list[str] = []

    def add(value: str) -> None:
        value = value.strip()
        if value and value not in readings:
            readings.append(value)

    raw = "" if text is None else str(text)
    add(raw)
    add(split_final_answer(raw, stated=True)[1])
    for reading in list(readings):
        plain = _unwrapped(reading)
        add(plain)
        value = _VALUE_AFTER.search(plain)
        if value:
            add(_unwrapped(value.group(1)))
    return readings


def _text_metric(fn: Callable[[str, Any], float], name: str) -> MetricFn:
    def metric(example: Example, outputs: dict[str, Any]) -> Score:
        pred = _as_text(answer_of(outputs))
        if pred is None or not pred.strip():
            return Score(0.0, {"error": "empty answer", "gold": example.target})
        return Score(float(fn(pred, example.target)), {"pred": pred, "gold": example.target})

    metric.__name__ = name
    metric.__doc__ = f"{fn.__name__}(outputs['answer'], example.target)"
    return metric


def metric_numeric(example: Example, outputs: dict[str, Any]) -> Score:
    """Numeric answer: last number (or the one after ####) equal to the gold within 1e-6 relative."""
    raw = answer_of(outputs)
    pred = extract_number(raw if isinstance(raw, int | float) else _as_text(raw))
    gold = extract_number(example.target)
    if pred is None:
        return Score(0.0, {"error": "no number found in the answer", "gold": gold})
    ok = gold is not None and math.isclose(pred, gold, rel_tol=1e-6, abs_tol=1e-9)
    return Score(float(ok), {"pred": pred, "gold": gold})


def metric_math(example: Example, outputs: dict[str, Any]) -> Score:
    """MATH answer: the last \\boxed{} (or fallback) equivalent to the gold (`math_equal`)."""
    pred = extract_boxed(_as_text(answer_of(outputs)))
    if not pred:
        return Score(0.0, {"error": "no answer found (expected \\boxed{...})", "gold": example.target})
    return Score(float(math_equal(pred, example.target)), {"pred": pred, "gold": example.target})


def _gold_letter(target: Any) -> str:
    if isinstance(target, int) and not isinstance(target, bool):
        return "ABCDEFGHIJ"[target]
    return str(target).strip().upper()


def metric_mc(example: Example, outputs: dict[str, Any]) -> Score:
    """Multiple choice: the extracted letter equals the gold letter."""
    gold = _gold_letter(example.target)
    letters = example.meta.get("letters", "ABCD")
    pred = multiple_choice_letter(_as_text(answer_of(outputs)), letters)
    if pred is None:
        return Score(0.0, {"error": f"no option letter ({', '.join(letters)}) found", "gold": gold})
    return Score(float(pred == gold), {"pred": pred, "gold": gold})


def metric_code(example: Example, outputs: dict[str, Any]) -> Score:
    """Code: runs the answer against `example.meta["test"]` in the sandbox (see `code_pass`)."""
    return code_pass(
        _as_text(answer_of(outputs)),
        example.meta["test"],
        entry_point=example.meta.get("entry_point"),
        prompt=example.meta.get("prompt"),
        timeout_s=float(example.meta.get("timeout_s", 10.0)),
    )


def metric_grid(example: Example, outputs: dict[str, Any]) -> Score:
    """ARC: the grid parsed from the answer equals the gold grid exactly."""
    grid = parse_grid(answer_of(outputs))
    if grid is None:
        return Score(0.0, {"error": "no grid (JSON list of lists of ints) found in the answer"})
    return Score(float(grid == example.target), {"pred": grid, "gold": example.target})


def metric_drop(example: Example, outputs: dict[str, Any]) -> Score:
    """DROP F1 (max over the gold alternatives), with exact match in the details."""
    pred = _as_text(answer_of(outputs))
    if pred is None or not pred.strip():
        return Score(0.0, {"error": "empty answer", "gold": example.target})
    golds = _golds(example.target)
    em = float(any(_drop_normalize(pred) == _drop_normalize(g) for g in golds))
    return Score(drop_f1(pred, golds), {"pred": pred, "gold": golds, "em": em})


def metric_exact_match(example: Example, outputs: dict[str, Any]) -> Score:
    """Exact match (SQuAD normalisation) of the best reading of the answer (:func:`answer_readings`); a wrong one
    says why: ``extra_text`` (the gold answer is there, with more around it) or ``mismatch``."""
    pred = _as_text(answer_of(outputs))
    if pred is None or not pred.strip():
        return Score(0.0, {"error": "empty answer", "gold": example.target})
    readings = answer_readings(pred)
    best = next((r for r in readings if exact_match(r, example.target)), None)
    if best is not None:
        return Score(1.0, {"pred": best, "gold": example.target})
    stated = readings[1] if len(readings) > 1 else readings[0]
    inside = contains(pred, example.target) > 0
    return Score(0.0, {"pred": stated, "gold": example.target, "error_kind": "extra_text" if inside else "mismatch"})


METRICS: dict[str, MetricFn] = {
    "exact_match": metric_exact_match,
    "f1": _text_metric(f1_tokens, "f1"),
    "contains": _text_metric(contains, "contains"),
    "drop_f1": metric_drop,
    "numeric": metric_numeric,
    "math": metric_math,
    "mc": metric_mc,
    "code": metric_code,
    "grid": metric_grid,
}
"""Metric registry: the names `Task.from_jsonl(metric=...)` and the built-in tasks use."""
