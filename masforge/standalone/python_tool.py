"""The ``python`` tool of an exported system: run a program in a child process and return what it printed.

masforge runs such programs in its sandbox (:mod:`masforge.sandbox.tools`); an exported module has no sandbox,
so this runs them in a separate Python process with a timeout, a memory limit and a scrubbed environment, and
reports output and errors in the same words as masforge's tool (the tests compare the two).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile

PYTHON_TIMEOUT_S = 10.0
PYTHON_MEMORY_MB = 512

# The child process runs the program as module "__sandbox__" (as masforge does, so `if __name__ ==
# "__main__":` blocks do not run) and reports how it ended in a result file.
_CHILD = r"""
import json, sys
try:
    import resource
    limit = int(sys.argv[3]) * 1024 * 1024
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
except Exception:
    pass

def _line(exc):
    name = type(exc).__name__
    try:
        text = str(exc)
    except BaseException:
        text = "<exception str() failed>"
    line = f"{name}: {text}" if text else name
    line = line.strip().splitlines()[0] if line.strip() else name
    return line if len(line) <= 500 else line[:497] + "..."

def _kind(exc):
    queue, seen = [exc], set()
    while queue:
        current = queue.pop(0)
        if id(current) in seen:
            continue
        seen.add(id(current))
        if isinstance(current, MemoryError):
            return "memory"
        queue.extend(e for e in (current.__cause__, current.__context__) if e is not None)
    return "exception"

with open(sys.argv[2], encoding="utf-8") as fh:
    source = fh.read()
try:
    compiled = compile(source, "<code>", "exec", dont_inherit=True)
except (SyntaxError, ValueError) as exc:
    verdict = {"ok": False, "error": _line(exc), "kind": "syntax"}
else:
    import types
    module = types.ModuleType("__sandbox__")
    sys.modules["__sandbox__"] = sys.modules["__main__"] = module
    try:
        exec(compiled, module.__dict__)
        verdict = {"ok": True}
    except BaseException as exc:
        verdict = {"ok": False, "error": _line(exc), "kind": _kind(exc)}
sys.stdout.flush()
with open(sys.argv[1], "w", encoding="utf-8") as fh:
    json.dump(verdict, fh)
"""


def run_python(code: str) -> str:
    """The python tool: run a program and return what it printed (or its error).

    THIS IS NOT A SANDBOX. The program runs in a separate Python process, in a fresh temporary directory, with a
    scrubbed environment, a wall-clock timeout and (where the OS allows) a memory limit -- but with your user's
    permissions, file system and network. masforge runs the same programs in its sandbox; run this module in a
    container or VM if the code may do harm.
    """
    src = code.strip()
    if src.startswith("```"):
        src = src.split("\n", 1)[1] if "\n" in src else ""
        src = src.rsplit("```", 1)[0]
    with tempfile.TemporaryDirectory(prefix="masforge-export-") as tmp:
        program, result, child = (os.path.join(tmp, n) for n in ("program.py", "result.json", "child.py"))
        with open(program, "w", encoding="utf-8") as fh:
            fh.write(src)
        with open(child, "w", encoding="utf-8") as fh:
            fh.write(_CHILD)
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LANG": "C.UTF-8", "PYTHONHASHSEED": "0",
               "HOME": tmp, "TMPDIR": tmp}
        proc = subprocess.Popen([sys.executable, "-s", child, result, program, str(PYTHON_MEMORY_MB)], cwd=tmp,
                                env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                start_new_session=True)
        try:
            raw, _ = proc.communicate(timeout=PYTHON_TIMEOUT_S)
            error, kind = None, None
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            raw, _ = proc.communicate()
            error, kind = f"TimeoutError: killed after {PYTHON_TIMEOUT_S} s", "timeout"
        if kind is None:
            try:
                with open(result, encoding="utf-8") as fh:
                    verdict = json.load(fh)
                if not verdict["ok"]:
                    error, kind = verdict["error"], verdict["kind"]
                    if kind == "memory" and error == "MemoryError":
                        error = f"MemoryError: out of memory (limit {PYTHON_MEMORY_MB} MB)"
            except (OSError, ValueError, KeyError):
                kind = "killed"
                error = f"Killed: the program's process ended without a result (status {proc.returncode})"
    out = raw.decode("utf-8", errors="replace").strip()
    if kind is not None:
        return (out + "\n" if out else "") + f"error ({kind}): {error}"
    return out[-2000:] or "(no output: print the result)"
