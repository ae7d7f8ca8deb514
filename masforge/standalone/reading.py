"""How a model's reply is read: where its final answer is, however the model marks, repeats or nests it, and
where its code is, wherever it put it. Plain text rules (the standard library only), shared by the prompt
adapters and by masforge's metrics, and carried by an exported system."""

from __future__ import annotations

import ast
import re
from functools import cache

from masforge.standalone.prompts import PROMPTS

# A fenced code block (an unclosed last one runs to the end).
_FENCE = re.compile(r"```[A-Za-z0-9_+-]*[ \t]*\n.*?(?:```|\Z)", re.S)
_FINAL = re.compile(r"^[\s>*#_]*(?:the\s+)?final\s+answer\s*(?:is)?\s*[*_]*\s*[:\-]?[*_]*[ \t]*", re.I | re.M)
# How else a small model states its final answer when it writes no line-start label: in a list ("3. **Final
# Answer**: 42", "- Final answer: No", "Step 4: Final answer: 7"), inside a sentence ("Therefore, the final answer
# is: 50"; not in quotes, where it repeats the instructions: 'write "Final answer:" followed by ...'), or in a
# sentence that leads into it ("Here's the final answer:", "The final answer to the task ... is:").
_LISTED = re.compile(r"^[ \t]*(?:[-*•]|\d+[.)]|step[ \t]*\d+[ \t]*[:.])[ \t>*#_]*(?:the[ \t]+)?final[ \t]+answer"
                     r"(?:[ \t]+is)?[ \t]*[*_]*[ \t]*[:\-]?[*_]*[ \t]*", re.I | re.M)
_INLINE = re.compile(r"(?<![\"'`\w])(?:the[ \t]+)?final[ \t]+answer(?:[ \t]+is\b[ \t]*:?|[ \t]*[*_]*:)[*_]*[ \t]*",
                     re.I)
_LEAD_IN = re.compile(r"^[^\n]*(?<![\"'`\w])final[ \t]+answer\b[^\n\"]*?:[*_ \t]*$", re.I | re.M)
# A chain-of-thought "final answer" that points back at code written above instead of repeating it.
_POINTER = re.compile(r"\b(above|previous|preceding|provided|given)\b|\b(code|function|solution|implementation|"
                      r"program)\b", re.I)
_DEFINES = re.compile(r"^\s*(?:async\s+def|def|class)\s+\w+", re.M)
# A small model asked for a marked final answer writes the marker into its code ("Final answer: [1, 5]" as
# the block's last line, or a block opened only for it): never Python, it breaks the code.
_MARKER_LINE = re.compile(r"^[ \t]*(?:#+[ \t]*)?[*_]*final\s+answer\b", re.I)
_FENCE_LINE = re.compile(r"^[ \t]*```([A-Za-z0-9_+-]*)[ \t]*$")
# A line that starts a Python program written without a fence.
_CODE_START = re.compile(r"^(?:async\s+def|def|class|import|from)\s+\w+|^@\w+", re.M)
# A block that shows what was printed, not a program ("```output\n17\n```", text, console): an answer written as
# one is its content. A code block (python, or one with no language) stays as it is.
_OUTPUT_BLOCK = re.compile(r"\A```[ \t]*(output|outputs|result|stdout|text|txt|plain|plaintext|console|terminal|"
                    r"shell-session)[ \t]*\n(.*?)\n?[ \t]*(?:```[ \t]*)?\Z", re.S | re.I)
_TYPED_LINE = re.compile(r"^(?:\$|>>>|\.\.\.)(?:[ \t]|$)")  # a console's command lines: what was typed, not printed
# A line that repeats masforge's own instructions ('On a new line, write "Final answer:" followed by ...') is no
# answer. It echoes them when every word of it is in a run of at least this many words of one template (between
# its placeholders), or is a whole short template such as "(a number)".
_ECHO_RUN = 4
_PLACEHOLDER = re.compile(r"\$\{?\w+\}?")


def _without_markers_in_code(text: str) -> str:
    """``text`` with "Final answer" lines taken out of its code blocks, and the blocks that held nothing else
    (or only opened for the marker, before the real block) left out."""
    if "```" not in text or not any(_MARKER_LINE.match(ln) for ln in text.splitlines()):
        return text
    lines, out, in_code, i = text.split("\n"), [], False, 0
    while i < len(lines):
        fence = _FENCE_LINE.match(lines[i])
        if fence and not in_code:
            j = i + 1
            while j < len(lines) and (not lines[j].strip() or _MARKER_LINE.match(lines[j])):
                j += 1
            after = _FENCE_LINE.match(lines[j]) if j < len(lines) else None
            if j > i + 1 and after:  # only markers inside: a stray opening (the next one has a language)
                i = j if after.group(1) else j + 1  # or an empty block (the next one closes it)
                continue
            in_code = True
        elif fence:
            in_code = False
        elif in_code and _MARKER_LINE.match(lines[i]):
            i += 1
            continue
        out.append(lines[i])
        i += 1
    return "\n".join(out)


def _words(text: str) -> tuple[str, ...]:
    return tuple(re.findall(r"[a-z0-9]+", text.lower()))


@cache
def _instructions() -> tuple[tuple[tuple[str, ...], ...], frozenset[tuple[str, ...]]]:
    """(the word runs of masforge's prompt templates between their placeholders, the short templates whole)."""
    runs = {words for text in PROMPTS.values() for part in _PLACEHOLDER.split(text)
            if len(words := _words(part)) >= _ECHO_RUN}
    whole = frozenset(words for text in PROMPTS.values()
                      if not _PLACEHOLDER.search(text) and len(words := _words(text)) >= 2)
    return tuple(sorted(runs)), whole


def _echoes_instructions(line: str) -> bool:
    """Whether ``line`` only repeats masforge's own instructions (see :data:`_ECHO_RUN`)."""
    words = _words(line)
    if len(words) < 2:
        return False
    runs, whole = _instructions()
    if words in whole:
        return True
    covered = [True] + [False] * len(words)  # covered[i]: words[:i] are all instruction words, in runs
    for i in range(len(words)):
        if not covered[i]:
            continue
        for short in whole:
            if words[i: i + len(short)] == short:
                covered[i + len(short)] = True
        for run in runs:
            for start in range(len(run)):
                k = 0
                while i + k < len(words) and start + k < len(run) and words[i + k] == run[start + k]:
                    k += 1
                for end in range(i + _ECHO_RUN, i + k + 1):
                    covered[end] = True
    return covered[-1]


def _without_echoes(text: str) -> str:
    """``text`` without the lines outside code blocks that repeat masforge's own instructions."""
    out, in_code = [], False
    for line in text.split("\n"):
        if _FENCE_LINE.match(line):
            in_code = not in_code
        elif not in_code and _echoes_instructions(line):
            continue
        out.append(line)
    return "\n".join(out)


def shown_output(answer: str) -> str:
    """An answer written as one output block (```` ```output\n17\n``` ````, text, console) as its content: ``17``
    (a console's command lines left out); any other answer as it is, a code block included."""
    m = _OUTPUT_BLOCK.match(answer.strip())
    if m is None or "```" in m.group(2):
        return answer
    console = m.group(1).lower() in ("console", "terminal", "shell-session")
    shown = "\n".join(ln for ln in m.group(2).splitlines() if not (console and _TYPED_LINE.match(ln))).strip()
    return shown or answer


def split_final_answer(text: str, *, stated: bool = False) -> tuple[str, str]:
    """(reasoning, answer) from a chain-of-thought reply.

    The answer is what follows the last "Final answer:" label outside code blocks (with ``stated``, without the
    markers a small model repeats in it: "Final answer: Final answer: 29", "Final answer: Therefore, the final
    answer is: 50"); a label followed only by a sentence that leads into an answer it never gives ("The final
    answer to the task of reversing a string in Python is:") counts as no answer. Without a label, the last
    fenced code block (kept fenced, so a code metric finds it); else, with ``stated``, the answer the reply states
    in a list, a sentence or after a lead-in (:func:`_stated`); else the last line with a letter or digit. When the
    code written in the reasoning is the real answer (the final part points back at it, or shows only an example
    output in a code block, or the label led into nothing), that code is the answer or kept in it, last, where
    code metrics look. A marker written inside a code block is taken out of it, a line that repeats masforge's own
    instructions is no answer, and an answer written as an output block is its content (:func:`shown_output`).

    ``stated`` is for scoring one answer (a metric's reading), not for the answers a system passes on: copies
    that wrote no code would then agree on a short stated answer ("False") and outvote the copies that wrote the
    program a code task asks for (measured: self_consistency on MBPP)."""
    text = _without_echoes(_without_markers_in_code(text))
    marks = [m for m in _FINAL.finditer(text) if text[: m.start()].count("```") % 2 == 0]
    promised = False
    if marks:
        last = marks[-1]
        raw = text[last.end():].strip()
        reasoning = text[: last.start()].strip()
        line_end = text.find("\n", last.end())
        line = text[last.start(): None if line_end < 0 else line_end].strip()
        if ":" not in last.group(0) and _LEAD_IN.fullmatch(line):  # "The final answer to the task is:" leads in
            raw = text[len(text) if line_end < 0 else line_end:].strip()
        promised = True
        if raw:
            code = [b for b in _FENCE.findall(reasoning) if _DEFINES.search(b)]
            if code and not _DEFINES.search(raw):
                if _POINTER.search(raw) and "```" not in raw and not re.search(r"\d", raw):
                    return reasoning, code[-1].strip()  # "Final answer: the function above"
                if "```" in raw:
                    return reasoning, f"{raw}\n\n{code[-1].strip()}"  # an example output, then the code
            unnested = _unnested(raw)
            if unnested:
                return reasoning, shown_output(unnested if stated else raw)
            # else: the label only leads into an answer it never gives
        text = reasoning  # a marker with nothing after it: fall back on what came before
    blocks = list(_FENCE.finditer(text))
    if blocks:
        last_block = blocks[-1]
        return text[: last_block.start()].strip(), shown_output(last_block.group(0).strip())
    code = unfenced_code(text) if promised else None
    if code is not None:  # a label that promised an answer it never gave, after a program written without a fence
        return text.strip(), f"```python\n{code}\n```"
    said = _stated(text) if stated else None
    if said is not None:
        return said
    lines = [ln for ln in text.strip().splitlines() if ln.strip()]
    if not lines:
        return "", ""
    # The last line that says something: a closing "\]" or ")" after "\[ x = 18" is layout, not the answer.
    last = next((i for i in range(len(lines) - 1, -1, -1) if re.search(r"\w", lines[i])), len(lines) - 1)
    code = unfenced_code(text) if _LEAD_IN.fullmatch(lines[last].strip()) else None
    if code is not None:  # "Here is the final answer:" after a program written without a fence: the program
        return text.strip(), f"```python\n{code}\n```"
    return "\n".join(lines[:last]).strip(), lines[last].strip()


def _unnested(answer: str) -> str:
    """The text after a label without the markers repeated in its first line ("Final answer: 29", "Therefore, the
    final answer is: 50" -> "29", "50"); empty when that line only leads into an answer it never gives ("The
    final answer to the task of reversing a string in Python is:")."""
    first, _, rest = answer.partition("\n")
    inner = list(_INLINE.finditer(first))
    if inner:
        first = first[inner[-1].end():]
    elif _LEAD_IN.fullmatch(first.strip()):
        first = ""
    if not first.strip():
        return rest.strip()
    return (first.strip() + ("\n" + rest if rest.strip() else "")).strip()


def _stated(text: str) -> tuple[str, str] | None:
    """(reasoning, answer) of a reply with no label and no code block that still states its final answer: what
    follows the last listed label, marker inside a sentence or lead-in (the rest of its line, else the lines
    below it up to a blank line); None when it states none."""
    spans = sorted(((m.start(), m.end()) for rx in (_LISTED, _INLINE, _LEAD_IN) for m in rx.finditer(text)),
                   reverse=True)
    for start, end in spans:
        line, _, rest = text[end:].partition("\n")
        answer = line.strip() or rest.strip().split("\n\n")[0].strip()
        if answer:
            return text[:start].strip(), answer
    return None


_STATEMENT = re.compile(r"^(?:assert|print|return|if|for|while|with|try|raise|async|await)\b|^[\w.\[\]]+\s*[-+*/]?=|"
                        r"^\w[\w.]*\(")


def unfenced_code(text: str) -> str | None:
    """The Python program in a reply that wrote it without a code fence: from the first line that starts one
    (``def``, ``class``, ``import``, ``from``, a decorator) to the last line that still belongs to it (indented, or
    another definition or statement), stopping at the first line of prose; None when there is none or it does not
    parse."""
    if "```" in text:
        return None
    lines = text.splitlines()
    start = next((i for i, ln in enumerate(lines) if _CODE_START.match(ln)), None)
    if start is None:
        return None
    end = start
    for i in range(start + 1, len(lines)):
        line = lines[i]
        if not line.strip():
            continue
        if line[0] in " \t" or _CODE_START.match(line) or _STATEMENT.match(line):
            end = i
            continue
        break
    code = "\n".join(lines[start:end + 1])
    try:
        ast.parse(code)
    except SyntaxError:
        return None
    return code


# A request for a program in words: "Write a Python function that ...", "Implement a class Stack ...". Only an
# imperative aimed at a program counts: a question that shows code (a maze drawn in a fence, a function to trace)
# or a word problem ("create a class of 24 students", "define the function f(x) = 3x + 2") asks for a value.
_ASKS_FOR_CODE = re.compile(r"\b(?:write|implement)\b[^\n.?!]{0,40}?\b(?:function|method|class|program|script|code)\b|"
                            r"\bpython\s+(?:function|program|script|code)\b", re.I)


def asks_for_code(question: str) -> bool:
    """Whether a question asks in words for a program (so its answer is the code, not what running it prints)."""
    return bool(_ASKS_FOR_CODE.search(question))


def keep_written_code(reasoning: str, answer: str) -> str:
    """A code question's answer with the code its reasoning wrote: a small model writes the function, runs its
    own example, then states the example's output as its final answer ("Final answer: The reversed string of
    "Hello, World!" is "!dlroW ,olleH"."). When the answer defines nothing and the reasoning's code blocks do, the
    last of them is kept after the answer, where code metrics look; else the answer is unchanged."""
    if "```" in answer or _CODE_START.search(answer) or _DEFINES.search(answer) or _STATEMENT.match(answer.strip()):
        return answer  # it holds code of its own (a script, a lambda): the reasoning's drafts stay out
    code = [b for b in _FENCE.findall(reasoning) if _DEFINES.search(b)]
    if not code:
        return answer
    return f"{answer.strip()}\n\n{code[-1].strip()}".strip()
