"""Examples a coding question shows in prose, read as checks of the function it asks for.

Many tasks state their examples in words rather than as ``assert`` lines or doctests: "f('hi') returns 'lm'",
"f(148, 412) should return 16.", "* f(4, 8, 9) -> [12, 1]", "for f(7, 34, 12) == 34", "For s = 'abcde', c = 'ae',
the result should be ('bcd', False)", or "Input: arr = [1, 2], k = 1" followed by "Output: [2]". A reader takes
each as a check; an execution gene that misses them runs nothing and trusts the first answer it gets.

Only examples of a function the question itself defines (a ``def`` line) count, and only literal values (what
:func:`ast.literal_eval` reads): an explanation after the value ("'No' (the name should start with a letter)") is
cut off, and a line where no literal can be read is left out rather than guessed.
"""

from __future__ import annotations

import ast
import re

_DEF_LINE = re.compile(r"^\s*def\s+([A-Za-z_]\w*)\s*\((.*)\)\s*(?:->.*)?:\s*(?:#.*)?$")
# What a line may start with before the call it shows: a bullet, "for", "e.g.", "Example:".
_LEAD = re.compile(r"^\s*(?:[*\-•]\s*|(?:for|e\.g\.|example\s*\d*\s*:?|\d+[.)])\s+)?", re.IGNORECASE)
# What separates a shown call from its value.
_SAYS = re.compile(r"^\s*(?:#\s*)?(?:==>|=>|➞|->|==|=|returns?|should\s+return|should\s+be|gives|is)\s+(\S.*)$",
                   re.IGNORECASE)
_INPUT = re.compile(r"^\s*(?:[*\-•]\s*)?(?:for|input\s*\d*\s*:|example\s*\d*\s*:)\s*(.+)$", re.IGNORECASE)
_RESULT_SAME_LINE = re.compile(r"(?:,\s*|\s+)(?:then\s+)?(?:the\s+)?(?:result|output|answer|return(?:ed)?(?:\s+value)?)"
                               r"\s+(?:should\s+be|will\s+be|is)\s+(\S.*)$", re.IGNORECASE)
_OUTPUT_LINE = re.compile(r"^\s*(?:[*\-•]\s*)?(?:output|result|return)\s*\d*\s*:\s*(\S.*)$", re.IGNORECASE)


def defined_functions(question: str) -> dict[str, list[str]]:
    """The functions a question defines, by name, with the names of their parameters."""
    found: dict[str, list[str]] = {}
    for line in question.splitlines():
        m = _DEF_LINE.match(line)
        if not m:
            continue
        try:
            args = ast.parse(f"def f({m.group(2)}): pass").body[0].args  # type: ignore[attr-defined]
        except SyntaxError:
            continue
        found[m.group(1)] = [a.arg for a in [*args.posonlyargs, *args.args, *args.kwonlyargs]]
    return found


def literal_prefix(text: str) -> str | None:
    """The longest start of ``text`` that is a Python literal (explanations and end punctuation cut off)."""
    text = text.strip()
    cuts = [len(text), *sorted((i for i, ch in enumerate(text) if ch.isspace()), reverse=True)]
    for cut in cuts:
        part = text[:cut].rstrip().rstrip(".,;:").rstrip()
        if not part:
            continue
        try:
            tree = ast.parse(part, mode="eval")
        except (SyntaxError, ValueError, MemoryError, RecursionError):
            continue
        if _is_literal(tree):
            return ast.unparse(tree)  # written out again: a comment after the value goes
    return None


def _call_end(text: str, start: int) -> int | None:
    """The index just past the parenthesis that closes the one at ``start`` (strings respected), or None."""
    depth, quote, i = 0, "", start
    while i < len(text):
        ch = text[i]
        if quote:
            if ch == "\\":
                i += 1
            elif ch == quote:
                quote = ""
        elif ch in "'\"":
            quote = ch
        elif ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
            if depth == 0:
                return i + 1
        i += 1
    return None


def _shown_call(line: str, functions: dict[str, list[str]]) -> tuple[str, str] | None:
    """``(call, check)`` for a line showing a call of a defined function and its value; the check is
    ``assert __masforge_same(f(x), 'y')``."""
    text = line[_LEAD.match(line).end():]  # type: ignore[union-attr]
    m = re.match(r"([A-Za-z_]\w*)\(", text)
    if not m or m.group(1) not in functions:
        return None
    end = _call_end(text, m.end() - 1)
    if end is None:
        return None
    call, rest = text[:end], _SAYS.match(text[end:])
    value = literal_prefix(worked_value(rest.group(1))) if rest else None
    if value is None or not literal_args(call):
        return None
    return call, f"assert __masforge_same({call}, {value!r})"


def worked_value(text: str) -> str:
    """The value a shown example ends on: "1 + (2 / 2) = 2" is 2, not the 1 it starts with."""
    return re.split(r"\s=\s", text)[-1].strip()


def literal_args(call: str) -> bool:
    """True if every argument of ``call`` is a literal (so the check cannot run anything but the answer)."""
    try:
        node = ast.parse(call, mode="eval").body
        args = [*node.args, *(k.value for k in node.keywords)] if isinstance(node, ast.Call) else None
        return args is not None and all(_is_literal(a) for a in args)
    except SyntaxError:
        return False


def _is_literal(node: ast.AST) -> bool:
    try:
        ast.literal_eval(node)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return False
    return True


def _named_inputs(text: str, functions: dict[str, list[str]]) -> tuple[str, str] | None:
    """``(call, rest of the line)`` for inputs given by parameter name ("s = 'abc', c = 'a'") or, for a function
    of one parameter, as one bare value ("[4, 2, 3]"): the function is the last defined one they fit."""
    assigned = [(m.start(), m.end(), m.group(1)) for m in re.finditer(r"\b([A-Za-z_]\w*)\s*=(?!=)\s*", text)]
    for name, params in reversed(list(functions.items())):
        starts = [a for a in assigned if a[2] in params]
        if starts and starts[0][0] <= 1 and {p for *_, p in starts} == set(params) and len(starts) == len(params):
            args, rest = [], ""
            for n, (_, value_start, param) in enumerate(starts):
                stop = starts[n + 1][0] if n + 1 < len(starts) else len(text)
                chunk = text[value_start:stop]
                said = _RESULT_SAME_LINE.search(chunk)
                if said:
                    rest, chunk = chunk[said.start():], chunk[:said.start()]
                value = literal_prefix(chunk)
                if value is None:
                    break
                args.append(f"{param}={value}")
            else:
                return f"{name}({', '.join(args)})", rest
        if len(params) == 1 and not starts:
            said = _RESULT_SAME_LINE.search(text)
            value = literal_prefix(text[:said.start()] if said else text)
            if value is not None:
                return f"{name}({value})", text[said.start():] if said else ""
    return None


def prose_examples(question: str) -> list[tuple[str, str]]:
    """``(call, check)`` for each example ``question`` shows in prose (see the module's doc), in order."""
    functions = defined_functions(question)
    if not functions:
        return []
    lines = question.splitlines()
    checks: list[tuple[str, str]] = []
    for i, line in enumerate(lines):
        shown = _shown_call(line, functions)
        if shown:
            checks.append(shown)
            continue
        given = _INPUT.match(line)
        inputs = _named_inputs(given.group(1).strip(), functions) if given else None
        if inputs is None:
            continue
        call, rest = inputs
        said = _RESULT_SAME_LINE.search(rest) if rest else None
        value = literal_prefix(said.group(1)) if said else None
        for later in lines[i + 1:i + 3]:
            if value is not None:
                break
            out = _OUTPUT_LINE.match(later)
            value = literal_prefix(out.group(1)) if out else None
        if value is not None:
            checks.append((call, f"assert __masforge_same({call}, {value!r})"))
    return checks
