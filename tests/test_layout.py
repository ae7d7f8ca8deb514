"""The floor plan holds: no import cycles, dependencies point one way, test doubles stay off the production
path, every package is installed, and no product code knows about folders beside the checkout."""

from __future__ import annotations

import ast
import runpy
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
PACKAGE_DIR: dict[str, str] = PYPROJECT["tool"]["setuptools"]["package-dir"]

# Which rooms each room may import (besides itself and the leaf modules below); DESIGN.md's one-way flow:
# evaluators -> execution -> lm / sandbox -> standalone / local_model -> genome, nothing back up. The ground floor
# holds what an exported file carries or reaches: the genome's names, the standalone runtime (masforge/standalone/,
# inlined into every export; masforge's LM client sends the request it builds, so an export and masforge cannot drift
# apart) and the embedded model (masforge/local_model/, which the runtime reaches only through an optional import).
ALLOWED = {
    "genome": set(),  # what a system IS needs nothing that runs one
    "local_model": set(),  # the embedded model: catalog, weights, server; it knows no client
    "standalone": {"genome", "local_model"},  # the genome's names travel with it (an export carries both)
    "sandbox": {"genome"},  # untrusted code and the tools a model calls (tool names live in the genome)
    "lm": {"standalone", "genome", "local_model", "sandbox"},  # the fake LM computes with the calculator
    "execution": {"standalone", "genome", "lm", "sandbox"},
    # an evaluation's report is stored as what it is: the archive's typed result record (the archive imports no
    # evaluator, so the arrow points one way)
    "evaluators": {"archive", "execution", "standalone", "genome", "lm", "sandbox"},
    "archive": {"genome"},
    "seeds": {"genome", "sandbox"},
    "search": {"archive", "evaluators", "standalone", "genome", "lm", "sandbox", "seeds"},
    "export": {"archive", "execution", "standalone", "genome", "lm", "sandbox", "seeds"},
    "report": {"archive", "genome"},
    # test doubles drive the layers they test (the kill-and-resume harness reads back the archive it checks)
    "testing": {"archive", "evaluators", "execution", "genome", "lm", "local_model", "sandbox"},
    "runtime": {"local_model"},  # nothing but the old path of the embedded model, for exports already written
}
# Leaf modules every layer may use: the error types, text helpers, redaction of secrets (errors, traces, the
# archive and every file written are redacted where they are made), the bounded parsing of untrusted input,
# whether a recorded process lives, writing the files users name, loading prompt template files, the
# thread-safe ``ast.parse`` and the console that escapes what it prints. They import nothing of masforge but each
# other.
LEAVES = ("errors", "text", "redact", "input_limits", "processes", "cache_root", "ports", "files", "prompt_templates",
          "threadsafe_ast", "terminal")


def _modules() -> dict[str, Path]:
    """Every product module by dotted name (mapped through package-dir, like the installed package)."""
    mods: dict[str, Path] = {}
    top_dirs = {ROOT / d for pkg, d in PACKAGE_DIR.items() if pkg != "masforge"}
    for pkg, folder in PACKAGE_DIR.items():
        base = ROOT / folder
        for path in base.rglob("*.py"):
            if pkg == "masforge" and any(path.is_relative_to(d) for d in top_dirs):
                continue
            parts = list(path.relative_to(base).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            mods[".".join([pkg, *parts])] = path
    return mods


MODULES = _modules()


def _imports(path: Path) -> set[str]:
    """Modules ``path`` imports, lazy (function-level) imports included."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found |= {node.module} | {f"{node.module}.{a.name}" for a in node.names}
    return found


def _graph() -> dict[str, set[str]]:
    # An import of a module's own parent package is no edge: the parent is always initialised first.
    return {m: {t for t in _imports(p) if t in MODULES and t != m and not m.startswith(t + ".")}
            for m, p in MODULES.items()}


def _layer(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "masforge"


def test_no_import_cycles() -> None:
    graph = _graph()
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    cycles: list[list[str]] = []

    def visit(v: str) -> None:  # Tarjan's strongly connected components
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                cycles.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    assert cycles == []


def test_dependencies_point_one_way() -> None:
    wrong = sorted(f"{m} -> {t}" for m, targets in _graph().items() for t in targets
                   if _layer(m) in ALLOWED and _layer(t) not in ALLOWED[_layer(m)] | {_layer(m), *LEAVES})
    assert wrong == []


def test_the_genome_imports_nothing_that_runs_it() -> None:
    """The genome is the ground floor: its modules, lazy imports included, reach no runtime, execution, sandbox,
    LM client or local model (any masforge module outside genome/ but a leaf is refused)."""
    allowed = ("masforge.genome", *(f"masforge.{leaf}" for leaf in LEAVES))
    wrong = sorted(f"{m} -> {t}" for m, p in MODULES.items() if _layer(m) == "genome"
                   for t in _imports(p) if t.split(".")[0] == "masforge" and t != "masforge"
                   and not any(t == a or t.startswith(a + ".") for a in allowed))
    assert wrong == []


def test_runtime_is_only_the_old_path_of_the_local_model() -> None:
    """masforge/runtime/ holds no code of its own: only the path the embedded model had before it moved to
    masforge/local_model/, which exported files already written still import (each job has its room)."""
    assert sorted(m for m in MODULES if _layer(m) == "runtime") == ["masforge.runtime", "masforge.runtime.local_model"]


def test_exported_files_old_and_new_find_the_embedded_model(monkeypatch: pytest.MonkeyPatch) -> None:
    """An export imports the embedded model inside a ``try``: were its path gone, the export would report "masforge
    is not installed" where it is. New exports import masforge.local_model; those written before it moved import
    masforge.runtime.local_model, which still imports (with a DeprecationWarning) and is the very same modules."""
    import importlib
    import pkgutil
    import sys

    import masforge.local_model as local_model
    from masforge.export.inline import OPTIONAL_IMPORTS

    assert OPTIONAL_IMPORTS == ("masforge.local_model",)
    for name in [n for n in sys.modules if n.split(".")[:3] == ["masforge", "runtime", "local_model"]]:
        monkeypatch.delitem(sys.modules, name)  # imported afresh, as a new process would
    with pytest.warns(DeprecationWarning, match="it is masforge.local_model now"):
        old = importlib.import_module("masforge.runtime.local_model")
    assert old is local_model and callable(old.ensure_local_server)
    subs = [s.name for s in pkgutil.iter_modules(local_model.__path__)]
    assert {"catalog", "server", "shared", "supervisor", "weights"} <= set(subs)
    for sub in subs:
        assert importlib.import_module(f"masforge.runtime.local_model.{sub}") is \
            importlib.import_module(f"masforge.local_model.{sub}"), sub


def test_leaf_modules_import_only_each_other() -> None:
    """The leaves are usable from every layer because they depend on none (errors redact their messages, and
    input_limits raises a ConfigError: leaves may use each other, without cycles)."""
    wrong = sorted(f"{m} -> {t}" for m, targets in _graph().items() for t in targets
                   if _layer(m) in LEAVES and _layer(t) not in LEAVES)
    assert wrong == []


def test_production_code_never_imports_the_test_doubles() -> None:
    users = sorted(m for m, p in MODULES.items() if _layer(m) != "testing"
                   and any(t == "masforge.testing" or t.startswith("masforge.testing.") for t in _imports(p)))
    assert users == []


def _installed_packages(root: Path = ROOT) -> list[str]:
    """The packages a wheel holds: what setup.py finds (pyproject names no list by hand)."""
    return runpy.run_path(str(ROOT / "setup.py"), run_name="masforge_setup")["masforge_packages"](root)


def test_every_package_is_installed() -> None:
    """Code packages and data folders (templates, inventory) are all found, so a wheel holds them and
    setuptools does not warn about data folders it was not told about; package data names found packages."""
    assert "packages" not in PYPROJECT["tool"]["setuptools"], "packages are found by setup.py; drop the list"
    packages = {m for m, p in MODULES.items() if p.name == "__init__.py"}
    for pkg in list(packages):
        folder = MODULES[pkg].parent
        packages |= {f"{pkg}.{sub.name}" for sub in folder.iterdir()
                     if sub.is_dir() and not (sub / "__init__.py").exists() and sub.name != "__pycache__"}
    installed = set(_installed_packages())
    assert sorted(packages - installed) == []
    assert sorted(set(PYPROJECT["tool"]["setuptools"]["package-data"]) - installed) == []


def test_a_new_sub_package_is_found_without_listing_it(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text((ROOT / "pyproject.toml").read_text(encoding="utf-8"), encoding="utf-8")
    for folder in PACKAGE_DIR.values():
        (tmp_path / folder).mkdir(exist_ok=True)
        (tmp_path / folder / "__init__.py").write_text("", encoding="utf-8")
    for new in ("search/samplers", "masforge/lm/clients", "seeds/extra"):  # the last one is a data folder
        (tmp_path / new).mkdir(parents=True)
    (tmp_path / "search/samplers/__init__.py").write_text("", encoding="utf-8")
    (tmp_path / "masforge/lm/__init__.py").write_text("", encoding="utf-8")
    (tmp_path / "masforge/lm/clients/__init__.py").write_text("", encoding="utf-8")
    (tmp_path / "masforge/__pycache__").mkdir()
    found = _installed_packages(tmp_path)
    assert {"masforge.search.samplers", "masforge.lm", "masforge.lm.clients", "masforge.seeds.extra"} <= set(found)
    assert not any("__pycache__" in p for p in found)


def test_no_product_code_knows_the_folders_beside_the_checkout() -> None:
    """Data comes from --data-dir / MASFORGE_DATA_DIR or the user cache, never from a folder next to the repo."""
    offenders = sorted(str(p.relative_to(ROOT)) for p in MODULES.values()
                       if any(s in p.read_text(encoding="utf-8") for s in ("../shared", '"shared"', "'shared'")))
    assert offenders == []


def _code_strings(path: Path) -> list[str]:
    """The string constants of a module's code (docstrings left out: they may explain where the cache is)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    docs = {id(n.value) for n in ast.walk(tree) if isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant)}
    return [n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)
            and id(n) not in docs]


def test_one_module_owns_the_cache_root() -> None:
    """``masforge.cache_root`` alone knows where the cache folder is (``$MASFORGE_CACHE``, ``~/.cache``)."""
    owners = sorted(m for m, p in MODULES.items() if m != "masforge.cache_root"
                    and any(s == ".cache" or "MASFORGE_CACHE" in s or "/.cache" in s for s in _code_strings(p)))
    assert owners == []


def test_everything_cached_lives_under_the_one_root(tmp_path: Path, monkeypatch) -> None:
    from masforge.cache_root import CACHE_ENV, cache_root
    from masforge.evaluators.datasets import cache_data_dir
    from masforge.lm import cache as lm_cache
    from masforge.lm import rates as lm_rates
    from masforge.local_model import llama_server, weights

    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "c"))
    monkeypatch.delenv("MASFORGE_LM_CACHE", raising=False)
    root = tmp_path / "c"
    assert cache_root() == root
    for path in (cache_data_dir(), lm_cache.default_cache_path(), lm_rates._path(), weights._root(None),
                 llama_server.built_path("0.0.0")):
        assert path is not None and path.is_relative_to(root), path


MAX_FILE_LINES = 700
MAX_FUNCTION_LINES = 100
# Product code over the limits, each with why it is still there: the list may only shrink (a stale entry fails).
LONG_FILES: dict[str, str] = {}
LONG_FUNCTIONS = {
    "masforge/sandbox/child/confine.py:_make_audit_hook": "the audit hook may call no helper of its own and read no "
                                                          "global: split, it would become patchable",
    "masforge/sandbox/child/confine.py:hook": "the audit hook itself (same reason)",
}


def _sizes(paths: list[Path], root: Path = ROOT) -> tuple[dict[str, int], dict[str, int]]:
    """(lines of each file, lines of each function by ``path:name``), paths relative to ``root``."""
    files: dict[str, int] = {}
    functions: dict[str, int] = {}
    for path in paths:
        rel = str(path.relative_to(root))
        text = path.read_text(encoding="utf-8")
        files[rel] = len(text.splitlines())
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.end_lineno is not None:
                key = f"{rel}:{node.name}"
                functions[key] = max(functions.get(key, 0), node.end_lineno - node.lineno + 1)
    return files, functions


def test_no_file_or_function_grows_past_the_limits() -> None:
    """No product file over 700 lines and no function over 100, but the listed ones; a listed one that is back
    under the limit must leave the list, so it only shrinks."""
    files, functions = _sizes(list(MODULES.values()))
    assert sorted(f for f, n in files.items() if n > MAX_FILE_LINES and f not in LONG_FILES) == []
    assert sorted(f for f, n in functions.items() if n > MAX_FUNCTION_LINES and f not in LONG_FUNCTIONS) == []
    assert sorted(f for f in LONG_FILES if files.get(f, 0) <= MAX_FILE_LINES) == []
    assert sorted(f for f in LONG_FUNCTIONS if functions.get(f, 0) <= MAX_FUNCTION_LINES) == []


def test_the_size_check_sees_long_files_and_functions(tmp_path: Path) -> None:
    body = "".join(f"        x{i} = {i}\n" for i in range(MAX_FUNCTION_LINES))
    (tmp_path / "m.py").write_text(f"class C:\n    def long(self):\n{body}\n\ndef short():\n    pass\n"
                                   + "\n" * MAX_FILE_LINES, encoding="utf-8")
    files, functions = _sizes([tmp_path / "m.py"], tmp_path)
    assert files["m.py"] > MAX_FILE_LINES
    assert functions == {"m.py:long": MAX_FUNCTION_LINES + 1, "m.py:short": 2}
