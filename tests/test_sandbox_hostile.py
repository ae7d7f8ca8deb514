"""The hostile-program suite: each attack runs as a code genome and as the code answer of a code task,
through the real evaluation path, and must be contained (nothing observable on the host) and reported
as that candidate's failure with its kind, while the run goes on (a benign candidate right after it
scores 1). Plus: no sandbox process outlives a SIGKILLed ``masforge evaluate``; tools count against
the candidate's clock; the start-up line names missing layers; sandbox uids are swept before reuse.
"""

from __future__ import annotations

import ast
import logging
import os
import subprocess
import time

import pytest

from masforge.execution.code import MAX_TOOL_CALLS_PER_RUN, CodeSystem
from masforge.genome.schema import Genome
from masforge.lm.client import LMClient
from masforge.sandbox import isolation as iso_module
from masforge.sandbox import tools as tools_module
from masforge.sandbox.isolation import _UidLease, isolation, sandbox_processes, sandbox_status, startup_sweep
from masforge.sandbox.runner import SandboxLimits, run_python
from masforge.sandbox.tools import Tool, calculate
from masforge.testing.hostile import ATTACKS, Attack, forms_of, kill_masforge_mid_run, run_attack

IS_ROOT = os.geteuid() == 0
CASES = [(attack, form) for attack in ATTACKS for form in forms_of(attack)]


def _check(attack: Attack, form: str) -> None:
    outcome = run_attack(attack, form)
    assert outcome.escapes == [], (attack.name, form, outcome.escapes)
    assert outcome.kind in attack.kinds, (attack.name, form, outcome.kind, outcome.error)
    assert outcome.score == 0.0
    assert outcome.benign_ok, "the evaluation did not go on after the hostile candidate"


@pytest.mark.parametrize(("attack", "form"), CASES, ids=[f"{a.name}-{f}" for a, f in CASES])
def test_hostile_program_is_contained_and_reported(attack: Attack, form: str):
    if attack.needs_private_fs and not isolation().private_fs:
        pytest.skip("gets past the audit hook; only bubblewrap's private file system contains it (missing here)")
    _check(attack, form)


def _mode_available(mode: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MASFORGE_SANDBOX", mode)
    try:
        isolation()
    except Exception as exc:  # e.g. no user namespaces on this machine
        pytest.skip(f"MASFORGE_SANDBOX={mode} is not available here: {exc}")


FALLBACK = [a for a in ATTACKS if a.name in ("infinite-loop", "ignore-sigterm", "fork-bomb", "tamper-frames")]


@pytest.mark.parametrize("mode", ["unshare", "process"])
@pytest.mark.parametrize("attack", FALLBACK, ids=[a.name for a in FALLBACK])
def test_fallback_layers_still_contain_the_basics(mode: str, attack: Attack, monkeypatch: pytest.MonkeyPatch):
    _mode_available(mode, monkeypatch)
    _check(attack, "genome")


@pytest.mark.parametrize("mode", ["auto", "process"])
def test_no_sandbox_process_outlives_a_sigkilled_masforge(mode: str, tmp_path, monkeypatch: pytest.MonkeyPatch):
    _mode_available(mode, monkeypatch)
    outcome = kill_masforge_mid_run(str(tmp_path), env={"MASFORGE_SANDBOX": mode})
    assert outcome.sandboxes == 2, "both sandboxes should have been running when masforge was killed"
    assert outcome.survivors == []


# --------------------------------------------------------------------------------------------------
# tools from sandboxed code


def _code_system(code: str, timeout_s: float) -> CodeSystem:
    genome = Genome(kind="code", name="tools", code=code)
    return CodeSystem(genome, LMClient({"worker": "fake"}, cache=False), limits=SandboxLimits(timeout_s=timeout_s))


def test_a_slow_tool_counts_against_the_candidates_time(monkeypatch: pytest.MonkeyPatch):
    sleepy = Tool("test_sleepy", "Sleeps (a test tool).", lambda arg: (time.sleep(float(arg)), "slept")[1])
    monkeypatch.setitem(tools_module._REGISTRY, "test_sleepy", sleepy)
    system = _code_system("def forward(inputs):\n    return {'answer': tool('test_sleepy', '8')}\n", 1.0)
    # if tool time did not count, the run would succeed with "slept" after 8 s
    with pytest.raises(Exception, match=r"code genome failed \(timeout\)"):
        system(question="q")
    fast = _code_system("def forward(inputs):\n    return {'answer': tool('test_sleepy', '0.05')}\n", 5.0)
    assert fast(question="q").outputs == {"answer": "slept"}


def test_tool_calls_per_run_are_capped():
    code = "def forward(inputs):\n    n = 0\n    while True:\n        tool('calculator', '1 + 1')\n        n += 1\n"
    with pytest.raises(Exception, match=f"more than {MAX_TOOL_CALLS_PER_RUN} tool"):
        _code_system(code, 20.0)(question="q")


def test_calculator_refuses_results_too_large_to_compute():
    for bomb in ("((9**99)**999)**99", "(2**999)**999", "round(5, -10**9)", "9**9**9**9"):
        with pytest.raises(ValueError, match="too large|more than 400|too long|exponent"):
            calculate(bomb)
    assert calculate("9**99").startswith("29512665430652752148")  # big but fine
    assert calculate("2 ** 0.5") == "1.4142135624"


# --------------------------------------------------------------------------------------------------
# the start-up line and the run record


def test_missing_layers_are_named_once(monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture):
    monkeypatch.setenv("MASFORGE_SANDBOX", "process")
    monkeypatch.setattr(iso_module, "_state", {})
    with caplog.at_level(logging.WARNING, logger="masforge.sandbox.runner"):
        isolation()
        isolation()
        assert run_python("print(1)").ok
    lines = [r.getMessage() for r in caplog.records
             if r.name == "masforge.sandbox.runner" and "missing" in r.getMessage()]
    assert len(lines) == 1
    assert "pid and network namespaces" in lines[0] and "private /tmp" in lines[0]
    status = sandbox_status()
    assert status["isolation"] == "process" and "pid namespace" not in status["layers"]
    assert "audit hook" in status["layers"] and len(status["missing"]) == 2


def test_unknown_mode_is_one_clear_error(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("MASFORGE_SANDBOX", "chroot")
    with pytest.raises(Exception, match="MASFORGE_SANDBOX='chroot' is not one of auto, bwrap, unshare, process"):
        isolation()


@pytest.mark.skipif(not isolation().private_fs, reason="bubblewrap is not available here")
def test_private_file_system_view():
    code = (
        "import os\nprint(sorted(os.listdir('/')))\nprint(os.listdir('/tmp'))\n"
        "print(os.path.exists(os.path.expanduser('~')))\nprint(len([p for p in os.listdir('/proc') if p.isdigit()]))\n"
    )
    r = run_python(code)
    assert r.ok, r.error
    top, tmp, home, pids = r.stdout.splitlines()
    assert "home" not in top and "var" not in top and "tmp" in top
    # only this run's own directory, and the installation itself where it lives under the temp folder (a clone in
    # /tmp, a CI runner's checkout): bound read-only so the interpreter runs (see isolation._bwrap_prefix)
    from masforge.sandbox.isolation import _python_dirs

    installed = {d.split("/")[2] for d in _python_dirs() if d.startswith("/tmp/")}
    listed = ast.literal_eval(tmp)
    own = [n for n in listed if n not in installed]
    assert len(own) == 1 and own[0].startswith("masforge-sbx-"), listed
    assert home == "True"
    assert int(pids) <= 3  # /proc shows the namespace's processes only (init, the child, maybe a helper)


@pytest.mark.skipif(not IS_ROOT, reason="per-run uids need root")
def test_a_uid_whose_last_run_died_is_swept_before_reuse():
    lease = _UidLease()
    uid = lease.uid
    orphan = subprocess.Popen(["sleep", "60"], user=uid, group=uid, extra_groups=[], start_new_session=True)
    try:
        assert lease._fd is not None
        os.close(lease._fd)  # the holder dies mid-run: the lock goes, the "in use" mark stays
        lease._fd = None
        again = _UidLease()
        try:
            if again.uid != uid:
                pytest.skip("another sandbox run took the slot in between")
            assert again.stale_killed == 1
            assert orphan.wait(timeout=5) == -9
        finally:
            again.release()
    finally:
        if orphan.poll() is None:
            orphan.kill()
            orphan.wait()


@pytest.mark.skipif(not IS_ROOT, reason="per-run uids need root")
def test_startup_sweep_kills_processes_of_free_sandbox_uids():
    lease = _UidLease()
    uid = lease.uid
    lease.release()
    orphan = subprocess.Popen(["sleep", "60"], user=uid, group=uid, extra_groups=[], start_new_session=True)
    try:
        assert orphan.pid in sandbox_processes(range(uid, uid + 1))
        if startup_sweep() == 0:
            pytest.skip("another sandbox run took the slot in between (its uid is then not free)")
        assert orphan.wait(timeout=5) == -9
    finally:
        if orphan.poll() is None:
            orphan.kill()
            orphan.wait()


# --------------------------------------------------------------------------------------------------
# wherever masforge is installed, with no silent downgrade


@pytest.mark.skipif(not isolation().private_fs, reason="bubblewrap is not available here")
def test_bubblewrap_works_for_an_installation_under_the_temp_folder():
    # A clone in the temp folder, as on a CI runner: its environment and the bootstrap live under /tmp, which is
    # the sandbox's private /tmp too.
    import shutil
    import sys
    import tempfile
    from pathlib import Path

    clone = Path(tempfile.mkdtemp(prefix="masforge-clone-"))
    try:
        clone.chmod(0o755)  # readable by the sandbox's uid: only the bind decides what it sees
        venv = clone / ".venv"
        subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
        child = clone / "child"
        shutil.copytree(iso_module.CHILD_DIR, child, ignore=shutil.ignore_patterns("__pycache__"))
        ledger = clone / "runs" / "latest" / "ledger.jsonl"  # the run folder beside the environment
        ledger.parent.mkdir(parents=True)
        ledger.write_text("{}\n")
        for folder in (ledger.parent, ledger.parent.parent):
            folder.chmod(0o755)
        probe = (f"import os, sys\nprint(sys.executable, os.path.exists({str(ledger)!r}), "
                 f"os.path.isdir({str(venv / 'bin')!r}))")
        script = (
            "import masforge.sandbox.isolation as iso, masforge.sandbox.runner as sb\n"
            f"iso.CHILD_DIR = {str(child)!r}\n"
            f"assert all(p.startswith({str(child)!r}) for _, _, p, _ in iso._bootstrap_code())\n"
            "i = iso.isolation()\n"
            f"r = sb.run_python({probe!r})\n"
            "print(i.mode, '|', '; '.join(i.missing), '|', r.ok, r.error, r.stdout.strip())\n"
        )
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
        env.pop("MASFORGE_SANDBOX", None)
        out = subprocess.run([str(venv / "bin" / "python"), "-c", script], capture_output=True, text=True, env=env,
                             timeout=120, check=True).stdout
    finally:
        shutil.rmtree(clone, ignore_errors=True)
    mode, missing, result = (part.strip() for part in out.strip().splitlines()[-1].split("|"))
    assert mode == "bwrap" and "private /tmp" not in missing, out
    # the environment is there (read-only), the run folder beside it is not
    assert result == f"True None {venv / 'bin' / 'python'} False True", out


def test_an_interpreter_started_through_a_dotdot_path_still_gets_bubblewrap(tmp_path):
    """``bench/../.venv/bin/python`` named a folder the sandbox's file system view lacks: bubblewrap "failed"."""
    import sys

    if not isolation().private_fs:
        pytest.skip("no bubblewrap here")
    (tmp_path / "elsewhere").mkdir()
    detour = os.path.relpath(sys.executable, str(tmp_path / "elsewhere"))  # Python keeps a relative path's ".."
    assert detour.startswith("..")
    probe = "from masforge.sandbox.isolation import isolation; print(isolation().mode)"
    done = subprocess.run([detour, "-c", probe], capture_output=True, text=True, timeout=120,
                          cwd=tmp_path / "elsewhere", env={**os.environ, "MASFORGE_SANDBOX": "auto"})
    assert done.stdout.strip().splitlines()[-1:] == ["bwrap"], done.stderr


def test_a_fallback_names_its_true_cause(tmp_path, monkeypatch: pytest.MonkeyPatch):
    fake = tmp_path / "bin" / "bwrap"
    fake.parent.mkdir()
    fake.write_text("#!/bin/sh\necho 'bwrap: setting up uid map: Permission denied' >&2\nexit 1\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{fake.parent}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setattr(iso_module, "_state", {})
    found = isolation()
    assert found.mode in ("unshare", "process")
    assert any("bubblewrap failed here: bwrap: setting up uid map: Permission denied" in m for m in found.missing)
    assert not any("cannot create namespaces" in m for m in found.missing)


def test_generated_code_refuses_weaker_isolation_unless_accepted(monkeypatch: pytest.MonkeyPatch):
    from masforge.errors import SandboxUnavailable
    from masforge.evaluators.runner import Evaluator
    from masforge.evaluators.tasks import get_task
    from masforge.execution.compile import compile_genome
    from masforge.seeds import load_seed

    weaker = iso_module.Isolation("unshare", IS_ROOT, ("read-only file system view and private /tmp (bubblewrap "
                                                       "failed here: bwrap: no user namespaces)",), unshare="unshare")
    monkeypatch.setattr(iso_module, "_state", {"auto": weaker, "swept": 0, "swept_dirs": 0})
    monkeypatch.delenv("MASFORGE_SANDBOX", raising=False)
    with pytest.raises(SandboxUnavailable) as info:
        run_python("print(1)")
    message = str(info.value)
    assert "\n" not in message and "bwrap: no user namespaces" in message
    assert "make bubblewrap work here" in message and "MASFORGE_SANDBOX=unshare" in message
    code = Genome(kind="code", name="c", code="def forward(inputs):\n    return {'answer': '1'}\n")
    with pytest.raises(SandboxUnavailable):
        compile_genome(code, LMClient({"worker": "fake"}, cache=False))
    # code answers: the evaluation stops at once instead of scoring every answer 0
    client = LMClient({"worker": "fake"}, cache=False)
    with pytest.raises(SandboxUnavailable):
        Evaluator(get_task("humaneval"), client, limit=2).evaluate(load_seed("io"))
    # the user accepts less by choosing the mode
    monkeypatch.setenv("MASFORGE_SANDBOX", "unshare")
    monkeypatch.setattr(iso_module, "_state", {})
    assert run_python("print(1)").ok


def test_leftover_run_folders_are_removed_at_the_next_start(tmp_path, monkeypatch: pytest.MonkeyPatch):
    dead = subprocess.Popen(["true"])
    dead.wait()
    leftover = tmp_path / f"masforge-sbx-{dead.pid}-12345-abcd1234"
    (leftover / "sub").mkdir(parents=True)
    (leftover / "sub" / "big").write_bytes(b"x" * 1_000_000)
    (leftover / "sub").chmod(0o500)  # the code made it hard to remove
    own = iso_module.host_run_dir()
    try:
        mine = tmp_path / os.path.basename(own)
        os.rename(own, mine)  # a live run of this process
        other = tmp_path / "masforge-sbx-notes"  # not a run folder's name
        other.mkdir()
        monkeypatch.setattr(iso_module.tempfile, "gettempdir", lambda: str(tmp_path))
        monkeypatch.setattr(iso_module, "_state", {})
        isolation()
        assert not leftover.exists() and mine.exists() and other.exists()
        assert sandbox_status()["leftover_run_dirs_removed"] == 1
    finally:
        iso_module.remove_tree(str(mine))


def test_any_masforge_command_removes_leftover_run_folders_as_it_starts(tmp_path):
    """Not only the next sandbox: ``masforge tasks`` runs no code, and still clears what a killed run left (a run
    folder of the opt-in unshare mode holds hundreds of MB). A folder whose masforge still runs stays."""
    import sys

    dead = subprocess.Popen(["true"])
    dead.wait()
    leftover = tmp_path / f"masforge-sbx-{dead.pid}-12345-abcd1234"
    (leftover / "sub").mkdir(parents=True)
    (leftover / "sub" / "big").write_bytes(b"x" * 1_000_000)
    live = tmp_path / f"masforge-sbx-{os.getpid()}-{iso_module._start_time(os.getpid())}-abcd1234"
    live.mkdir()
    env = {**os.environ, "TMPDIR": str(tmp_path)}
    done = subprocess.run([sys.executable, "-m", "masforge", "tasks"], env=env, capture_output=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert not leftover.exists() and live.exists()


# --------------------------------------------------------------------------------------------------
# tools and the fake LM under threads


def test_python_parsing_is_serialised_across_threads():
    # CPython 3.11 converts a parsed tree with one depth counter per interpreter (gh-106905): a second thread
    # parsing while the first is mid-conversion (here: stopped in a garbage collection) breaks the first one
    # ("AST constructor recursion depth mismatch"), which made the calculator and the fake LM answer at random.
    import ast
    import gc
    import sys
    import threading

    def attempt() -> list[bool]:
        inside, other_done = threading.Event(), threading.Event()
        overlapped: list[bool] = []
        armed = [True]

        def in_ast_parse() -> bool:
            frame = sys._getframe(2)
            while frame is not None:
                if frame.f_code.co_name == "parse" and frame.f_code.co_filename == ast.__file__:
                    return True
                frame = frame.f_back
            return False

        def pause(phase: str, info: dict) -> None:
            if phase == "start" and armed[0] and threading.current_thread() is first and in_ast_parse():
                armed[0] = False
                inside.set()
                overlapped.append(other_done.wait(1.5))  # does the other thread's parse finish meanwhile?

        def second() -> None:
            inside.wait(10)
            calculate("6 * 7")
            other_done.set()

        expression = "+".join(f"({i} * 2)" for i in range(150))
        first = threading.Thread(target=lambda: calculate(expression))
        other = threading.Thread(target=second)
        threshold = gc.get_threshold()
        gc.callbacks.append(pause)
        gc.set_threshold(1)
        try:
            other.start()
            first.start()
            first.join(20)
            inside.set()  # if no collection stopped the first parse, let the other thread go
            other.join(20)
        finally:
            gc.set_threshold(*threshold)
            gc.callbacks.remove(pause)
        return overlapped

    # A collection must start in the first thread while it parses. Threads left over from other tests can hold the
    # collector at that moment (it does not start while another collection runs), so a few attempts may be needed.
    for _ in range(10):
        overlapped = attempt()
        if overlapped:
            break
    assert overlapped == [False]  # the other parse waited until the first one had finished
    assert ast.parse("1 + 1", mode="eval").body.op.__class__ is ast.Add


def test_the_fake_lm_raises_a_fault_instead_of_answering_otherwise(monkeypatch: pytest.MonkeyPatch):
    from masforge.lm import fake as fake_lm

    question = [{"role": "user", "content": "What is 12 * 7?\nFinal answer:"}]
    assert fake_lm.fake_reply(question).endswith("Final answer: 84")

    def broken(expression: str) -> str:
        raise SystemError("AST constructor recursion depth mismatch (before=18, after=2)")

    monkeypatch.setattr(tools_module, "calculate", broken)
    with pytest.raises(SystemError):  # was: "fake answer <digest>", a different reply cached for good
        fake_lm.fake_reply(question)


def test_a_killed_masforge_leaves_no_run_folder_after_the_next_start(tmp_path, monkeypatch: pytest.MonkeyPatch):
    from masforge.testing.hostile import leftover_after_kill

    _mode_available("unshare", monkeypatch)  # the only mode whose run folders live in the host's temp folder
    outcome = leftover_after_kill(str(tmp_path), env={"MASFORGE_SANDBOX": "unshare"})
    assert outcome.written >= 48 << 20  # the sandbox had filled its folder when masforge was killed
    assert outcome.after_next_start == 0
