"""Reading and writing genome files: YAML/JSON for config genomes, ``.py`` for code genomes.

A code genome file is a Python module whose docstring is YAML front matter (name, description, source,
inputs, outputs, metadata) followed by the code (which must define ``forward(inputs)``):

    \"\"\"
    name: my-system
    inputs: [question]
    outputs: [answer]
    \"\"\"

    def forward(inputs):
        return {"answer": llm(inputs["question"])}

Every failure is a :class:`GenomeError` of one line naming the file, the place and the fix.
"""

from __future__ import annotations

import ast
import json
import os
import tempfile
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from masforge.errors import GenomeError
from masforge.files import not_a_file
from masforge.genome.schema import Genome, check_counts
from masforge.input_limits import check_bytes, check_tree, load_json, load_yaml

CONFIG_SUFFIXES = (".yaml", ".yml", ".json")
CODE_SUFFIXES = (".py",)
_FRONT_KEYS = ("name", "description", "source", "inputs", "outputs", "components", "metadata")


def format_validation_error(exc: ValidationError) -> str:
    """First pydantic error as ``place: message`` (e.g. ``agents[1].temperature: must be <= 2``)."""
    err = exc.errors()[0]
    parts: list[str] = []
    for loc in err["loc"]:
        if isinstance(loc, int):
            parts.append(f"[{loc}]")
        else:
            parts.append(("." if parts else "") + str(loc))
    place = "".join(parts) or "genome"
    msg = err["msg"]
    if err["type"] == "value_error" and err.get("ctx", {}).get("error") is not None:
        msg = str(err["ctx"]["error"])  # our own validators' messages, without pydantic's "Value error, "
    elif err["type"] == "extra_forbidden":
        msg = "unknown field (remove it or check its spelling; see `masforge genome schema`)"
    elif err["type"] == "missing":
        msg = "required field is missing"
    more = len(exc.errors()) - 1
    suffix = f" (and {more} more problem{'s' if more > 1 else ''})" if more else ""
    return f"{place}: {msg}{suffix}"


def genome_from_data(data: Any, origin: str = "genome") -> Genome:
    """Build a :class:`Genome` from parsed YAML/JSON, raising a one-line :class:`GenomeError`."""
    if data is None:
        raise GenomeError(f"{origin}: the genome is empty; write a mapping with at least agents and topology")
    if not isinstance(data, dict):
        raise GenomeError(f"{origin}: a genome must be a mapping of fields, got {type(data).__name__}")
    try:
        check_counts(data)  # before walking everything: 100k agents are refused by their number
    except ValueError as exc:
        raise GenomeError(f"{origin}: {exc}") from None
    check_tree(data, origin, GenomeError)
    try:
        return Genome.model_validate(data)
    except ValidationError as exc:
        raise GenomeError(f"{origin}: {format_validation_error(exc)}") from None
    except RecursionError:  # pragma: no cover - the size and depth limits come first
        raise GenomeError(f"{origin}: nested too deeply to validate; flatten it") from None


def parse_genome_text(text: str, origin: str = "genome", fmt: str = "yaml") -> Genome:
    """Parse genome text: ``fmt`` is ``yaml`` (also reads JSON), ``json`` or ``py`` (code genome).

    Untrusted text is bounded (size, nesting, values, string length; see :mod:`masforge.input_limits`), YAML
    anchors/aliases are refused and a key given twice is an error, each as one :class:`GenomeError` line."""
    check_bytes(len(text.encode("utf-8", "surrogatepass")), origin, "genome files", GenomeError)
    if fmt == "py":
        return _parse_code_file(text, origin)
    if fmt == "json":
        data = load_json(text, origin, GenomeError, check=False)  # genome_from_data checks, agents first
    else:
        data = load_yaml(text, origin, GenomeError, what="genome files")
    return genome_from_data(data, origin)


def _parse_code_file(text: str, origin: str) -> Genome:
    try:
        tree = ast.parse(text)
    except SyntaxError as exc:
        raise GenomeError(f"{origin}:{exc.lineno}: Python syntax error in code genome ({exc.msg})") from None
    except (ValueError, RecursionError, MemoryError) as exc:  # null bytes; absurdly nested expressions
        reason = "nested too deeply" if not isinstance(exc, ValueError) else str(exc)
        raise GenomeError(f"{origin}: cannot parse code genome ({reason})") from None
    doc = ast.get_docstring(tree, clean=True) or ""
    front: dict[str, Any] = {}
    if doc:
        try:
            loaded = load_yaml(doc, origin, GenomeError, what="genome files")
        except GenomeError:
            loaded = None  # not front matter (or not acceptable as such): the docstring is the description
        if isinstance(loaded, dict) and set(loaded) <= set(_FRONT_KEYS):
            front = loaded
        else:
            front = {"description": doc}
    body = text
    if tree.body and isinstance(tree.body[0], ast.Expr) and isinstance(tree.body[0].value, ast.Constant):
        first = tree.body[0]
        lines = text.splitlines(keepends=True)
        body = "".join(lines[first.end_lineno or 0 :])
    front.setdefault("name", Path(origin).stem if origin != "genome" else "code")
    return genome_from_data({**front, "kind": "code", "code": body.strip() + "\n"}, origin)


def load_genome(path: str | os.PathLike[str]) -> Genome:
    """Read a genome file (``.yaml``/``.yml``/``.json`` config or ``.py`` code genome)."""
    p = Path(path)
    try:
        exists = p.is_file()
    except OSError as exc:  # e.g. a name longer than the file system allows
        raise GenomeError(f"{p}: cannot read genome file ({exc.strerror}); check the path") from None
    if not exists:
        what = not_a_file(p)
        if what is not None:
            raise GenomeError(f"{p} is {what}, not a file: give the path of a .yaml, .json or .py genome file")
        raise GenomeError(f"{p}: no such genome file (give a .yaml, .json or .py path; seeds: `masforge seeds`)")
    suffix = p.suffix.lower()
    if suffix not in CONFIG_SUFFIXES + CODE_SUFFIXES:
        raise GenomeError(f"{p}: unknown genome file type '{suffix}' (use .yaml, .yml, .json or .py)")
    try:
        check_bytes(p.stat().st_size, str(p), "genome files", GenomeError)
        text = p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise GenomeError(f"{p}: cannot read genome file ({exc})") from None
    fmt = "py" if suffix == ".py" else ("json" if suffix == ".json" else "yaml")
    return parse_genome_text(text, str(p), fmt)


class _Dumper(yaml.SafeDumper):
    """YAML dumper that writes multi-line strings as readable ``|`` blocks."""

    def ignore_aliases(self, data: Any) -> bool:
        return True  # genome files may not hold anchors/aliases, so never write any (a shared value is repeated)


def _str_presenter(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    if "\x85" in value:
        # NEL: YAML readers take it for a line break in plain and block text, so only an escape keeps it.
        return dumper.represent_scalar("tag:yaml.org,2002:str", value, style='"')
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


class _Row(list):  # type: ignore[type-arg]
    """A list of numbers written on one line (a router's coefficients: hundreds of numbers per row)."""


_Dumper.add_representer(str, _str_presenter)
_Dumper.add_representer(_Row, lambda d, v: d.represent_sequence("tag:yaml.org,2002:seq", list(v), flow_style=True))
_Dumper.add_representer(tuple, lambda d, v: d.represent_list(list(v)))


def genome_to_data(genome: Genome) -> dict[str, Any]:
    """Plain dict without default-valued noise (what a person would write by hand)."""
    data = genome.model_dump(mode="json", exclude_defaults=True)
    data["kind"] = genome.kind
    data["name"] = genome.name
    order = ["kind", "name", "description", "source", "inputs", "outputs", "agents", "topology", "code",
             "components", "portfolio", "metadata"]
    if genome.portfolio is not None:  # members in full, each as a person would write it
        data["portfolio"]["members"] = [genome_to_data(m) for m in genome.portfolio.members]
    return {k: data[k] for k in order if k in data}


def dump_genome(genome: Genome, fmt: str = "yaml") -> str:
    """Genome as text: ``yaml``, ``json`` or ``py`` (code genomes only)."""
    if fmt == "json":
        return json.dumps(genome_to_data(genome), indent=2, ensure_ascii=False) + "\n"
    if fmt == "py":
        if genome.kind != "code":
            raise GenomeError(f"genome {genome.name}: only code genomes can be written as .py (use yaml)")
        front = {k: v for k, v in genome_to_data(genome).items() if k in _FRONT_KEYS}
        header = yaml.dump(front, Dumper=_Dumper, sort_keys=False, allow_unicode=True).replace('"""', "'''")
        prefix = "r" if "\\" in header else ""  # YAML escapes (\N, \x85) must reach YAML, not Python
        return f'{prefix}"""\n{header}"""\n\n{(genome.code or "").strip()}\n'
    if fmt != "yaml":
        raise GenomeError(f"unknown genome format '{fmt}' (use yaml, json or py)")
    data = genome_to_data(genome)
    for part in [data, *(data.get("portfolio") or {}).get("members", [])]:
        if "topology" in part and "edges" in part["topology"]:
            part["topology"]["edges"] = [f"{a} -> {b}" for a, b in part["topology"]["edges"]]
    router = (data.get("portfolio") or {}).get("router")
    if router:
        router.update({k: _Row(router[k]) for k in ("classes", "intercept") if k in router})
        router["coef"] = [_Row(row) for row in router.get("coef", [])]
    return yaml.dump(data, Dumper=_Dumper, sort_keys=False, allow_unicode=True, width=110)


def default_suffix(genome: Genome) -> str:
    """File suffix a genome is saved with: ``.py`` for code, ``.yaml`` for config."""
    return ".py" if genome.kind == "code" else ".yaml"


def save_genome(genome: Genome, path: str | os.PathLike[str]) -> Path:
    """Write ``genome`` atomically (temp file + rename); format from the suffix."""
    p = Path(path)
    suffix = p.suffix.lower()
    fmt = "py" if suffix == ".py" else ("json" if suffix == ".json" else "yaml")
    text = dump_genome(genome, fmt)
    p.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=p.parent, prefix=f".{p.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, p)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return p
