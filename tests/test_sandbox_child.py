"""The sandbox child's bootstrap as parts (masforge/sandbox/child/): what the launcher loads, in which order, what the
code under test can find of it, and the parts themselves imported in this process."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

from masforge.sandbox.child import PARTS
from masforge.sandbox.isolation import CHILD_DIR, CHILD_MARKER, CHILD_PACKAGE, _bootstrap_code, child_command
from masforge.sandbox.runner import run_python, run_tests

FOLDER = Path(CHILD_DIR)


def _relative_imports(tree: ast.Module) -> list[tuple[ast.ImportFrom, bool]]:
    """Each relative import of a part, and whether it runs when the module does (not under TYPE_CHECKING)."""
    checking = {id(n) for node in ast.walk(tree) if isinstance(node, ast.If)
                and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING" for n in ast.walk(node)}
    return [(n, id(n) not in checking) for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.level]


def _tree(path: Path) -> ast.Module:
    return ast.parse(path.read_text(encoding="utf-8"))


def test_every_part_is_loaded_after_the_parts_it_imports_and_main_last() -> None:
    on_disk = sorted(p.stem for p in FOLDER.glob("*.py") if p.stem != "__init__")
    assert sorted(PARTS) == on_disk  # a part left out of PARTS would be missing in the child
    assert PARTS[-1] == "main"  # the launcher calls the last part's main()
    for i, part in enumerate(PARTS):
        for node, at_run_time in _relative_imports(_tree(FOLDER / f"{part}.py")):
            assert node.level == 1 and node.module in PARTS, (part, ast.unparse(node))
            if at_run_time:
                assert PARTS.index(node.module) < i, f"{part} imports {node.module}, which is loaded after it"


def test_the_parts_import_only_the_standard_library_and_at_the_top() -> None:
    """Stdlib only (nothing of masforge is importable in the child), and every import of a sibling at module level:
    once the launcher took the parts out of sys.modules, a lazy one would fail."""
    for path in [FOLDER / "__init__.py", *(FOLDER / f"{part}.py" for part in PARTS)]:
        tree = _tree(path)
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and not node.level:
                names = [node.module or ""]
            else:
                continue
            assert all(n.split(".")[0] in sys.stdlib_module_names for n in names), (path.name, ast.unparse(node))
        at_top = {id(n) for n in tree.body}  # and what runs under TYPE_CHECKING only never runs
        at_top |= {id(n) for n, at_run_time in _relative_imports(tree) if not at_run_time}
        lazy = [ast.unparse(n) for n, _ in _relative_imports(tree) if id(n) not in at_top]
        assert lazy == [], (path.name, lazy)


def test_the_bootstrap_is_compiled_from_its_files_in_import_order() -> None:
    code = _bootstrap_code()
    assert [name for name, *_ in code] == [CHILD_PACKAGE, *(f"{CHILD_PACKAGE}.{p}" for p in PARTS)]
    assert [package for _, package, _, _ in code] == [True] + [False] * len(PARTS)
    for _, _, path, compiled in code:
        assert Path(path).parent == FOLDER and compiled.co_filename == path
    command, fd = child_command([])
    assert child_command([])[1] == fd  # compiled once per process
    assert any(CHILD_MARKER in arg for arg in command)  # how kill_mid_run and the fuzz tests recognise a child


def test_the_code_finds_no_bootstrap_module() -> None:
    r = run_python("import sys\n"
                   f"print([n for n, m in sys.modules.items() if {CHILD_PACKAGE!r} in n\n"
                   f"       or str(getattr(m, '__file__', '')).startswith({CHILD_DIR!r})])\n")
    assert r.ok and r.stdout.strip() == "[]", (r.error, r.stdout)


def test_a_traceback_of_the_code_has_no_frame_of_the_bootstrap() -> None:
    code = "def helper(x):\n    return x / 0\n\ndef f():\n    return helper(1)\n"
    tracebacks = [run_python(code, entry="f").traceback,
                  run_python(code + "f()\n").traceback,
                  run_tests(code, "f()\n").traceback,  # the code failed, called by the tests
                  run_tests(code, "assert abs(-1) == 2, 'no'\n").traceback]  # the test failed
    assert all(tb and 'File "<code>", line 2, in helper' in tb for tb in tracebacks[:3]), tracebacks
    assert 'File "<tests>", line 1' in (tracebacks[3] or ""), tracebacks[3]
    assert not [tb for tb in tracebacks if CHILD_DIR in (tb or "") or "sandbox/child/" in (tb or "")], tracebacks


def test_the_parts_import_and_run_in_this_process_too() -> None:
    """Relative imports make them a normal package here: a part can be tried without a child."""
    from masforge.sandbox.child import wire, worker

    value = {"a": [1, 2.5, "x", (3, None)], "b": {4, 5}, "c": b"\x00", "d": 2**70}
    assert wire._decode(wire._encode(value, None), lambda tag: None) == value
    answer = worker._run_code({"code": "def f():\n    return 1 / 0\n", "entry": "f", "args": [], "kwargs": {}}, {})
    assert not answer["ok"] and answer["error"] == "ZeroDivisionError: division by zero"
    assert answer["traceback"].startswith('Traceback (most recent call last):\n  File "<code>", line 2, in f')
