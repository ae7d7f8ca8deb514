"""Tools agents may call, by name. Users add their own with :func:`register_tool`.

Each tool takes one string argument and returns a string (what a ReAct agent or a code genome sees).
Built-ins: ``calculator`` (safe arithmetic, no eval, bounded: a huge power or product is refused before
it is computed, so it cannot burn the caller's CPU) and ``python`` (runs code in the sandbox and returns
what it printed).
"""

from __future__ import annotations

import ast
import math
import operator
import re
from collections.abc import Callable
from dataclasses import dataclass

from masforge.errors import ConfigError
from masforge.genome.tools import add_tool_name

ToolFn = Callable[[str], str]


@dataclass(frozen=True)
class Tool:
    """A named tool with a description the model reads."""

    name: str
    description: str
    fn: ToolFn

    def __call__(self, arg: str) -> str:
        try:
            return str(self.fn(str(arg)))
        except Exception as exc:  # a tool failure is an observation for the agent, not a crash
            return f"error: {type(exc).__name__}: {exc}"


_REGISTRY: dict[str, Tool] = {}


def register_tool(name: str, description: str) -> Callable[[ToolFn], ToolFn]:
    """Decorator: make ``fn(arg: str) -> str`` available to genomes as tool ``name``."""
    if not name.isidentifier():
        raise ConfigError(f"tool name '{name}' must be an identifier (letters, digits, underscore)")

    def deco(fn: ToolFn) -> ToolFn:
        _REGISTRY[name] = Tool(name, description, fn)
        add_tool_name(name)  # so genome validation knows it
        return fn

    return deco


def get_tool(name: str) -> Tool:
    """The registered tool ``name``; ConfigError naming the known ones otherwise."""
    try:
        return _REGISTRY[name]
    except KeyError:
        raise ConfigError(f"unknown tool '{name}' (known: {', '.join(sorted(_REGISTRY))}; "
                          "add one with masforge.sandbox.tools.register_tool)") from None


def tool_names() -> list[str]:
    """Names of all registered tools."""
    return sorted(_REGISTRY)


_BINOPS: dict[type[ast.operator], Callable[[float, float], float]] = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod, ast.Pow: operator.pow,
}
_UNARY: dict[type[ast.unaryop], Callable[[float], float]] = {ast.UAdd: operator.pos, ast.USub: operator.neg}
def _round(value: float, ndigits: int | None = None) -> float:
    """round() without its slow path: ``round(5, -10**8)`` would compute ``10**(10**8)``."""
    if ndigits is not None and abs(ndigits) > 400:
        raise ValueError("round() to more than 400 digits")
    return round(value, ndigits)


_FUNCS: dict[str, Callable[..., float]] = {
    "sqrt": math.sqrt, "abs": abs, "round": _round, "min": min, "max": max, "log": math.log,
    "exp": math.exp, "floor": math.floor, "ceil": math.ceil, "sin": math.sin, "cos": math.cos,
}
_CONSTS = {"pi": math.pi, "e": math.e}
_MAX_EXPRESSION_CHARS = 2000
_MAX_INT_BITS = 14_000
"""Largest integer result (about 4,200 digits, under Python's 4,300-digit str() limit)."""


def _check_size(op: ast.operator, left: float, right: float) -> None:
    """Refuse an integer power or product whose result would exceed `_MAX_INT_BITS` (before computing it)."""
    if not (isinstance(left, int) and isinstance(right, int)):
        return  # float arithmetic is fast and overflows by itself
    if isinstance(op, ast.Pow) and right > 0 and abs(left) > 1:
        bits = (abs(left).bit_length() - 1) * right
    elif isinstance(op, ast.Mult):
        bits = abs(left).bit_length() + abs(right).bit_length() - 1
    else:
        return
    if bits > _MAX_INT_BITS:
        raise ValueError(f"result too large (more than {_MAX_INT_BITS} bits)")


def _eval(node: ast.AST) -> float:
    if isinstance(node, ast.Expression):
        return _eval(node.body)
    if isinstance(node, ast.Constant) and isinstance(node.value, int | float) and not isinstance(node.value, bool):
        return node.value
    if isinstance(node, ast.BinOp) and type(node.op) in _BINOPS:
        left, right = _eval(node.left), _eval(node.right)
        if isinstance(node.op, ast.Pow) and abs(right) > 1000:
            raise ValueError("exponent too large")
        _check_size(node.op, left, right)
        return _BINOPS[type(node.op)](left, right)
    if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
        return _UNARY[type(node.op)](_eval(node.operand))
    if isinstance(node, ast.Name) and node.id in _CONSTS:
        return _CONSTS[node.id]
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in _FUNCS:
        return _FUNCS[node.func.id](*[_eval(a) for a in node.args])
    raise ValueError(f"unsupported expression: {ast.unparse(node)[:60]}")


_THOUSANDS = re.compile(r"(?<=\d),(?=\d{3}(?!\d))")
_ASSIGN = re.compile(r"(?<![=<>!])=(?!=)")


def calculate(expression: str) -> str:
    """Evaluate arithmetic safely (numbers, + - * / // % **, sqrt, log, max(a, b), ...).

    ``1,000`` thousands separators and a trailing ``= result`` are tolerated."""
    expr = expression.strip().strip("`").replace("^", "**")
    if len(expr) > _MAX_EXPRESSION_CHARS:
        raise ValueError(f"expression longer than {_MAX_EXPRESSION_CHARS} characters")
    expr = _ASSIGN.split(expr)[0]
    try:
        value = _eval(ast.parse(expr, mode="eval"))
    except (SyntaxError, ValueError):
        # Commas separate function arguments; only if that reading fails, try them as thousands separators.
        unseparated = _THOUSANDS.sub("", expr)
        if unseparated == expr:
            raise
        value = _eval(ast.parse(unseparated, mode="eval"))
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e15:
        return str(int(value))
    return str(round(value, 10)) if isinstance(value, float) else str(value)


def run_python_tool(code: str) -> str:
    """Run ``code`` in the sandbox (10 s) and return its printed output or its error."""
    from masforge.sandbox.runner import SandboxLimits, run_python

    src = code.strip()
    if src.startswith("```"):
        src = src.split("\n", 1)[1] if "\n" in src else ""
        src = src.rsplit("```", 1)[0]
    res = run_python(src, limits=SandboxLimits(timeout_s=10.0, memory_mb=512))
    out = res.stdout.strip()
    if not res.ok:
        return (out + "\n" if out else "") + f"error ({res.error_kind}): {res.error}"
    return out[-2000:] or "(no output: print the result)"


register_tool("calculator", "Evaluates an arithmetic expression, e.g. '(3 + 4) * 2 / 7'.")(calculate)
register_tool("python", "Runs a Python program in a sandbox and returns what it prints; print the answer.")(
    run_python_tool
)
