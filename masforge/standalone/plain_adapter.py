"""The ``plain`` prompt adapter: ordinary chat for small and local models (see :mod:`.adapters`).

One user message holds the instructions, the inputs (a single input verbatim, several as labelled blocks)
and, only when the module needs more than one output, a short note on the reply's form. Replies are read
leniently and never fail on format alone: one output takes the whole reply; chain of thought takes the
text after "Final answer:" (else the last code block, kept fenced, else the last line); several outputs
are labelled sections, and a reply with no labels at all is the main answer.
"""

from __future__ import annotations

import json
import re
import types
from typing import Any, Literal, Union, get_args, get_origin

import dspy
from dspy.signatures.signature import Signature

from masforge.genome.names import TOOL_ARG
from masforge.standalone.connect import cut_at_stop
from masforge.standalone.prompts import render_prompt
from masforge.standalone.reading import _FENCE, _FINAL, asks_for_code, keep_written_code, split_final_answer

# Output fields that carry working, not the answer: chain of thought and ReAct name them so.
_WORKING = ("reasoning", "rationale", "next_thought", "thought")
# dspy's (and masforge's) stock sentence for a signature without instructions says nothing to a model.
_DEFAULT_INSTRUCTIONS = re.compile(r"^\s*Given the fields [^\n]*?, produce the fields [^\n]*?\.(?:\s|$)")
# A ReAct step (dspy.ReAct's own signature): its tool arguments are asked for and read as plain text.
_REACT_STEP = ("next_thought", "next_tool_name", "next_tool_args")
# dspy describes a tool's arguments by their JSON schema and asks for JSON; a small model copies the schema
# ({"arg": {"type": "string"}}) instead of writing the program, so the plain adapter asks for the input as it is.
_SCHEMA_SENTENCE = re.compile(r"It takes arguments (\{.*?\})\.(?=\s|$)", re.M)
_JSON_RULE = re.compile(r"^When providing `next_tool_args`, the value inside the field must be in JSON format\s*$",
                        re.M)
# Where a small model, past its own turn, goes on to write the observation, the next turn or the prompt's
# parts itself (up to max_tokens): the LM is asked to stop there, and the reply is read only up to there.
_REACT_STOP = ("\nObservation", "\n\nNext thought:", "\nReply with", "\nTrajectory:")
_TRAJECTORY_STOP = ("\nObservation", "\nThought 0:", "\nReply with", "\nTrajectory:")
_NUMBER = re.compile(r"-?\d[\d,]*(?:\.\d+)?(?:[eE][-+]?\d+)?")


def label(name: str) -> str:
    """``is_correct`` -> ``Is correct``: how a field is named to the model."""
    text = name.replace("_", " ").strip()
    return text[:1].upper() + text[1:]


def _description(field: Any, name: str) -> str:
    desc = str(getattr(field, "json_schema_extra", {}).get("desc", "") or "")
    return "" if desc in ("", f"${{{name}}}") else desc


def _kind(annotation: Any) -> str:
    """A coarse type of an output field: str, int, float, bool, list, dict or literal."""
    if annotation in (int, float, bool, str):
        return annotation.__name__
    origin = get_origin(annotation)
    if origin is Literal:
        return "literal"
    if origin in (list, tuple, set) or annotation in (list, tuple, set):
        return "list"
    if origin is dict or annotation is dict:
        return "dict"
    if origin in (Union, types.UnionType):
        inner = [a for a in get_args(annotation) if a is not type(None)]
        return _kind(inner[0]) if len(inner) == 1 else "str"
    return "str"


class PlainAdapter(dspy.Adapter):
    """Plain chat for small models: one ordinary user message in, leniently parsed text out."""

    def __call__(self, lm: Any, lm_kwargs: dict[str, Any], signature: type[Signature],
                 demos: list[dict[str, Any]], inputs: dict[str, Any]) -> list[dict[str, Any]]:
        outputs = super().__call__(lm, _with_stop(lm_kwargs, signature), signature, demos, inputs)
        return _with_written_code(signature, inputs, outputs)

    async def acall(self, lm: Any, lm_kwargs: dict[str, Any], signature: type[Signature],
                    demos: list[dict[str, Any]], inputs: dict[str, Any]) -> list[dict[str, Any]]:
        outputs = await super().acall(lm, _with_stop(lm_kwargs, signature), signature, demos, inputs)
        return _with_written_code(signature, inputs, outputs)

    # -- formatting -------------------------------------------------------------------------------

    def format(self, signature: type[Signature], demos: list[dict[str, Any]],
               inputs: dict[str, Any]) -> list[dict[str, Any]]:
        messages: list[dict[str, Any]] = []
        for demo in demos:
            if all(k in demo for k in signature.input_fields) and all(k in demo for k in signature.output_fields):
                messages.append({"role": "user", "content": self._request(signature, demo)})
                messages.append({"role": "assistant", "content": self.format_assistant_message_content(
                    signature, demo)})
        messages.append({"role": "user", "content": self._request(signature, inputs)})
        return messages

    def _request(self, signature: type[Signature], inputs: dict[str, Any]) -> str:
        parts = []
        instructions = _DEFAULT_INSTRUCTIONS.sub("", signature.instructions or "").strip()
        if _is_react_step(signature):
            instructions = _plain_tool_instructions(instructions)
        if instructions:
            parts.append(instructions)
        parts.append(self._inputs(signature, inputs))
        ask = self._reply_form(signature)
        if ask:
            parts.append(ask)
        return "\n\n".join(p for p in parts if p)

    @staticmethod
    def _inputs(signature: type[Signature], inputs: dict[str, Any]) -> str:
        names = [n for n in signature.input_fields if n in inputs]
        if len(names) == 1:  # the one input as it is: the model sees the task's own prompt text
            return _text(inputs[names[0]])
        return "\n\n".join(f"{label(n)}:\n{_text(inputs[n])}" for n in names)

    @staticmethod
    def _reply_form(signature: type[Signature]) -> str:
        outs = list(signature.output_fields.items())
        working = [n for n, _ in outs if n in _WORKING]
        answers = [(n, f) for n, f in outs if n not in _WORKING]
        if len(outs) == 1:
            name, field = outs[0]
            kind = _kind(field.annotation)
            return "" if kind == "str" else render_prompt(f"plain_{kind}", options=_options(field.annotation))
        if len(answers) == 1 and len(working) == 1 and outs[0][0] in _WORKING:
            # Chain of thought: reasoning, then the answer after a marker in plain words.
            annotation = answers[0][1].annotation
            kind = _kind(annotation)
            hint = "" if kind == "str" else " " + render_prompt(f"plain_{kind}", options=_options(annotation))
            return render_prompt("plain_cot", hint=hint)
        lines = []
        for name, field in outs:
            desc = _description(field, name)
            kind = _kind(field.annotation)
            form = render_prompt(f"plain_{kind}", options=_options(field.annotation)) if kind != "str" else ""
            if name == "next_tool_args" and _is_react_step(signature):
                form = render_prompt("plain_tool_args")
            lines.append(f"{label(name)}: " + " ".join(p for p in (desc, form) if p).strip())
        return render_prompt("plain_sections", sections="\n".join(lines))

    def format_assistant_message_content(self, signature: type[Signature], outputs: dict[str, Any],
                                         missing_field_message: str | None = None) -> str:
        outs = list(signature.output_fields)
        if len(outs) == 1:
            return _text(outputs.get(outs[0], missing_field_message or ""))
        return "\n".join(f"{label(n)}: {_text(outputs.get(n, missing_field_message or ''))}" for n in outs)

    def format_user_message_content(self, signature: type[Signature], inputs: dict[str, Any], prefix: str = "",
                                    suffix: str = "", main_request: bool = False) -> str:
        return "\n\n".join(p for p in (prefix, self._inputs(signature, inputs), suffix) if p)

    def format_field_description(self, signature: type[Signature]) -> str:
        return ""

    def format_field_structure(self, signature: type[Signature]) -> str:
        return self._reply_form(signature)

    def format_task_description(self, signature: type[Signature]) -> str:
        return (signature.instructions or "").strip()

    # -- parsing ----------------------------------------------------------------------------------

    def parse(self, signature: type[Signature], completion: str) -> dict[str, Any]:
        # whatever the provider did with the stop strings
        text = cut_at_stop(strip_think(completion or "").lstrip(), _stop_strings(signature))
        outs = list(signature.output_fields.items())
        if len(outs) == 1:
            name, field = outs[0]
            return {name: _coerce(text.strip(), field.annotation)}
        working = [n for n, _ in outs if n in _WORKING]
        answers = [(n, f) for n, f in outs if n not in _WORKING]
        if len(answers) == 1 and len(working) == 1 and outs[0][0] in _WORKING:
            if not _FINAL.search(text):  # no "Final answer:" marker: the answer's own label may mark it
                labelled, found = self._sections(outs, text)
                if answers[0][0] in found:
                    return labelled
            reasoning, answer = split_final_answer(text)
            return {working[0]: reasoning, answers[0][0]: _coerce(answer, answers[0][1].annotation)}
        result, found = self._sections(outs, text)
        if _is_react_step(signature):
            result["next_tool_args"] = _tool_args(str(result["next_tool_name"]), found.get("next_tool_args", ""))
        return result

    @staticmethod
    def _sections(outs: list[tuple[str, Any]], text: str) -> tuple[dict[str, Any], dict[str, str]]:
        """The values by field, and the raw text found under each label."""
        names = [n for n, _ in outs]
        alternatives = "|".join(
            re.escape(alias) for n in names for alias in sorted({label(n), n, n.replace("_", " ")}, key=len,
                                                                 reverse=True))
        header = re.compile(rf"^[\s>*#_`\-]*({alternatives})[*_`]*\s*[:\-][*_`]*[ \t]*", re.I | re.M)
        by_alias = {alias.lower(): n for n in names for alias in (label(n), n, n.replace("_", " "))}
        found: dict[str, str] = {}
        matches = list(header.finditer(text))
        for i, m in enumerate(matches):
            name = by_alias[m.group(1).lower()]
            end = matches[i + 1].start() if i + 1 < len(matches) else len(text)
            if name not in found:
                found[name] = text[m.end():end].strip()
        result: dict[str, Any] = {}
        main = next((n for n in reversed(names) if n not in _WORKING), names[-1])
        for name, field in outs:
            if name in found:
                result[name] = _coerce(found[name], field.annotation)
            elif name == main and not found:
                result[name] = _coerce(text.strip(), field.annotation)  # no labels at all: the reply is the answer
            elif name in _WORKING:
                result[name] = text[: matches[0].start()].strip() if matches else ""
            else:
                result[name] = _coerce("", field.annotation)
        return result, found


def _with_written_code(signature: type[Signature], inputs: dict[str, Any],
                       outputs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Chain of thought asked for a program: an answer that only states what the program printed keeps the code
    its reasoning wrote (:func:`keep_written_code`). Parsing sees the reply alone; the question decides this."""
    outs = list(signature.output_fields.items())
    if len(outs) != 2 or outs[0][0] not in _WORKING or _kind(outs[1][1].annotation) != "str":
        return outputs
    # the first input is the question; later ones (context, another agent's reasoning, a trajectory) may hold code
    first = next(iter(signature.input_fields), None)
    question = inputs.get(first) if first is not None else None
    if not isinstance(question, str) or not asks_for_code(question):
        return outputs
    working, answer = outs[0][0], outs[1][0]
    for out in outputs:
        if isinstance(out.get(working), str) and isinstance(out.get(answer), str):
            out[answer] = keep_written_code(out[working], out[answer])
    return outputs


def _is_react_step(signature: type[Signature]) -> bool:
    return tuple(signature.output_fields) == _REACT_STEP


def _stop_strings(signature: type[Signature]) -> tuple[str, ...]:
    """Stop strings for a step that reads a ReAct trajectory (the step itself, or the answer drawn from it)."""
    if _is_react_step(signature):
        return _REACT_STOP
    return _TRAJECTORY_STOP if "trajectory" in signature.input_fields else ()


def _with_stop(lm_kwargs: dict[str, Any], signature: type[Signature]) -> dict[str, Any]:
    stop = _stop_strings(signature)
    return {**lm_kwargs, "stop": list(stop)} if stop else lm_kwargs


def _plain_tool_instructions(instructions: str) -> str:
    """dspy.ReAct's instructions with each tool's argument schema said in words and the JSON rule left out."""
    def sentence(m: re.Match[str]) -> str:
        return render_prompt("plain_tool_input") if TOOL_ARG in m.group(1) else render_prompt("plain_tool_no_input")

    return _JSON_RULE.sub("", _SCHEMA_SENTENCE.sub(sentence, instructions)).strip()


def _tool_args(tool: str, raw: str) -> dict[str, Any]:
    """A tool's arguments from what a model wrote: the JSON object dspy asks for, or the input as it is (a
    small model writes a program far more reliably than a program inside a JSON string)."""
    if tool.strip() == "finish":
        return {}
    raw = raw.strip()
    fence = _FENCE.search(raw)
    if fence and not raw.startswith("{"):  # the program, without what a small model adds around it
        return {TOOL_ARG: fence.group(0).strip()}
    parsed = _json_fragment(raw, "{", "}") if raw.startswith("{") else None
    if isinstance(parsed, dict):
        value = parsed.get(TOOL_ARG, next(iter(parsed.values())) if len(parsed) == 1 else None)
        if isinstance(value, str):
            return {TOOL_ARG: value}
    return {TOOL_ARG: raw}


def _text(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, dict | list):
        try:
            return json.dumps(value, ensure_ascii=False, default=str)
        except (TypeError, ValueError):
            return str(value)
    return str(value)


def _options(annotation: Any) -> str:
    if get_origin(annotation) is Literal:
        return ", ".join(str(a) for a in get_args(annotation))
    return ""


def strip_think(text: str) -> str:
    """``text`` without a reasoning model's ``<think>...</think>`` blocks (an unclosed one runs to the end).
    The one place this is done: masforge's meta-agent parsing uses it too."""
    return re.sub(r"<think>.*?(?:</think>|\Z)", "", text, flags=re.S).strip() if "<think>" in text else text


def _coerce(text: str, annotation: Any) -> Any:
    """A field value from text, as lenient as possible; never raises."""
    kind = _kind(annotation)
    if kind == "str":
        return text
    if kind == "bool":
        low = text.lower()
        neg = re.search(r"\b(no|false|incorrect|wrong|not correct|needs? (?:a )?change)\b", low)
        pos = re.search(r"\b(yes|true|correct|right)\b", low)
        if neg and (not pos or neg.start() <= pos.start()):
            return False
        return bool(pos)
    if kind in ("int", "float"):
        numbers = _NUMBER.findall(text)
        if not numbers:
            return 0 if kind == "int" else 0.0
        raw = numbers[-1].replace(",", "")
        try:
            value = float(raw)
        except ValueError:
            return 0 if kind == "int" else 0.0
        return int(value) if kind == "int" else value
    if kind == "literal":
        allowed = [str(a) for a in get_args(annotation)]
        low = text.strip().strip("`'\"*").lower()
        for option in allowed:
            if low == option.lower():
                return option
        hits = [(low.find(o.lower()), o) for o in allowed if o.lower() in low]
        return min(hits)[1] if hits else allowed[-1]
    if kind == "list":
        parsed = _json_fragment(text, "[", "]")
        if isinstance(parsed, list):
            return [_text(v) for v in parsed]
        items = [re.sub(r"^\s*(?:[-*•]|\d+[.)])\s*", "", ln).strip() for ln in text.splitlines()]
        return [i for i in items if i]
    if kind == "dict":
        parsed = _json_fragment(text, "{", "}")
        return parsed if isinstance(parsed, dict) else {}
    return text


def _json_fragment(text: str, open_: str, close: str) -> Any:
    start, end = text.find(open_), text.rfind(close)
    if start < 0 or end <= start:
        return None
    fragment = text[start: end + 1]
    try:
        return json.loads(fragment)
    except ValueError:
        try:
            import json_repair

            return json_repair.loads(fragment)
        except Exception:
            return None
