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

from masforge.testing.hostile_programs import ATTACKS, Attack
from masforge.testing.kill_mid_run import (
    FILLER_GENOME,
    ORPHAN_GENOME,
    KillOutcome,
    LeftoverOutcome,
    descendants,
    kill_masforge_mid_run,
    leftover_after_kill,
)
from masforge.testing.survivors import IDENTIFY, survivors

__all__ = ["ATTACKS", "BENIGN_ANSWER", "BENIGN_GENOME", "BENIGN_TEST", "FILLER_GENOME", "IDENTIFY", "ORPHAN_GENOME",
           "WRITER_GENOME", "Attack", "KillOutcome", "LeftoverOutcome", "Listener", "Outcome", "Probe",
           "SandboxRecorder", "answer_code", "descendants", "escapes", "forms_of", "genome_code",
           "kill_masforge_mid_run", "leftover_after_kill", "run_attack", "survivors"]

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
