"""One embedded model server per machine: a second process finds and uses the first one's server, a stale record is
cleaned, a server of other weights is not used, the server stops when its last user has gone (killed or not), every
process keeps to its slots, and ``masforge models status`` lists its users. A stub stands in for llama.cpp's server
(``masforge.testing.fake_llama``): no model is loaded."""

from __future__ import annotations

import json
import os
import selectors
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from masforge.errors import LocalModelError
from masforge.lm.config import parse_lm
from masforge.local_model import (
    EXTERNAL_API_BASE_ENV,
    ensure_local_server,
    get_spec,
    running_servers,
    shutdown_local_servers,
)
from masforge.local_model.registry import Registry, ServerRecord
from masforge.local_model.server import answers
from masforge.local_model.shared import IDLE_ENV, idle_seconds
from masforge.ports import free_port
from masforge.processes import pid_alive, process_start_time
from masforge.testing.fake_llama import fake_llama_env

SPEC = get_spec("qwen")
IDLE_S = 1.0

# A masforge process using the embedded model: it says which server it got, then keeps it until its stdin closes.
USER = r"""
import json, sys
from masforge.local_model import ensure_local_server, running_servers
ep = ensure_local_server("qwen")
(record,) = running_servers()
print(json.dumps({"api_base": ep.api_base, "server_pid": record.server_pid, "owner_pid": record.owner_pid}), flush=True)
sys.stdin.readline()
"""


@pytest.fixture
def machine(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A cache folder with the stand-in server as the embedded model (3 slots, 1 s idle time); yields the folder."""
    for key, value in fake_llama_env(tmp_path).items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("MASFORGE_LOCAL_SLOTS", "3")
    monkeypatch.setenv(IDLE_ENV, str(IDLE_S))
    monkeypatch.delenv(EXTERNAL_API_BASE_ENV, raising=False)
    shutdown_local_servers()
    yield tmp_path
    shutdown_local_servers()
    for pid in _processes_mentioning(str(tmp_path)):  # a failed test's leftovers
        os.kill(pid, signal.SIGKILL)


class User:
    """Another masforge process using the embedded model."""

    def __init__(self) -> None:
        self.proc = subprocess.Popen([sys.executable, "-c", USER], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True)
        self.pid = self.proc.pid

    def ready(self, timeout: float = 60.0) -> dict:
        assert self.proc.stdout is not None
        with selectors.DefaultSelector() as sel:
            sel.register(self.proc.stdout, selectors.EVENT_READ)
            assert sel.select(timeout), f"user {self.pid} said nothing in {timeout} s"
        line = self.proc.stdout.readline()
        assert line, self.proc.stderr.read() if self.proc.stderr else ""
        return json.loads(line)

    def leave(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        assert self.proc.wait(30) == 0

    def kill(self) -> None:
        self.proc.kill()
        self.proc.wait(10)


def _processes_mentioning(text: str) -> list[int]:
    """Live processes whose command line mentions ``text``."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and int(entry.name) != os.getpid():
            try:
                cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode("utf-8", "replace")
            except OSError:
                continue
            if text in cmdline and pid_alive(int(entry.name)):
                found.append(int(entry.name))
    return found


def _eventually(check: Callable[[], bool], timeout: float = 15.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.05)
    return check()


def _status() -> str:
    from masforge.cli import app

    result = CliRunner().invoke(app, ["models", "status"], env={"COLUMNS": "250"})
    assert result.exit_code == 0, result.output
    return result.output


def _record(**changes: object) -> ServerRecord:
    base = {"id": "old0000000", "model": SPEC.name, "alias": SPEC.alias, "api_base": f"http://127.0.0.1:{free_port()}/v1",
            "sha256": SPEC.sha256, "slots": 1, "kind": "llama-cpp-python", "owner_pid": 0, "owner_started": None,
            "server_pid": 0, "server_started": None, "started_by": 0, "started_at": time.time(), "idle_s": IDLE_S,
            "log": ""}
    return ServerRecord(**{**base, **changes})  # type: ignore[arg-type]


def _live(cmd: list[str]) -> tuple[subprocess.Popen[str], dict[str, object]]:
    """A process to stand as a record's owner or server, and its identity as a record holds it."""
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
    return proc, {"pid": proc.pid, "started": process_start_time(proc.pid)}


def test_processes_started_together_share_one_server_and_status_lists_them(machine: Path) -> None:
    a, b = User(), User()
    got_a, got_b = a.ready(), b.ready()
    assert got_a == got_b  # same address, same server process, same owner
    assert len(_processes_mentioning(f"{machine}/cache/models")) == 1  # one server was started, not two
    record = Registry("qwen").read()
    assert record is not None and record.api_base == got_a["api_base"] and record.sha256 == SPEC.sha256
    assert record.slots == 3 and record.kind == "llama.cpp" and record.started_by in (a.pid, b.pid)

    out = _status()
    assert f"shared server: qwen at {record.api_base} (llama.cpp, 3 slots, pid {record.server_pid}" in out
    assert "used by 2 processes:" in out and f"pid {a.pid}  since" in out and f"pid {b.pid}  since" in out
    assert "idle time 1 s (MASFORGE_LOCAL_IDLE_S)" in out

    first = a if record.started_by == a.pid else b  # the process that started it leaves first: the server stays
    other = b if first is a else a
    first.leave()
    time.sleep(IDLE_S + 1.0)
    assert answers(record.api_base) and Registry("qwen").read() == record
    out = _status()
    assert "used by 1 process:" in out and f"pid {other.pid}  since" in out and f"pid {first.pid} " not in out

    other.leave()  # the last user leaves: the server and its supervisor stop, the record goes
    assert _eventually(lambda: not pid_alive(record.server_pid) and not pid_alive(record.owner_pid))
    assert Registry("qwen").read() is None
    assert "shared server: none running" in _status()


def test_a_server_whose_users_were_killed_stops(machine: Path) -> None:
    a, b = User(), User()
    record = a.ready()
    b.ready()
    a.kill()  # SIGKILL: no exit hook runs
    time.sleep(IDLE_S + 1.5)
    assert pid_alive(record["server_pid"]) and answers(record["api_base"])  # b still uses it
    b.kill()
    assert _eventually(lambda: not pid_alive(record["server_pid"]) and not pid_alive(record["owner_pid"]))
    assert Registry("qwen").read() is None
    assert _processes_mentioning(str(machine)) == []


def test_a_process_killed_while_its_server_starts_leaves_nothing_running(machine: Path, monkeypatch) -> None:
    slow = machine / "slow-server"  # loads for 2 s, as a real model does
    slow.write_text(f"#!/bin/sh\nsleep 2\nexec {machine / 'fake-llama-server'} \"$@\"\n")
    slow.chmod(0o755)
    monkeypatch.setenv("MASFORGE_LLAMA_SERVER", str(slow))
    starter = User()
    assert _eventually(lambda: len(_processes_mentioning(f"{machine}/cache")) >= 2, timeout=10)  # its supervisor too
    starter.kill()  # before the server is up: nobody will ever use it
    assert _eventually(lambda: _processes_mentioning(str(machine)) == [], timeout=20)
    assert Registry("qwen").read() is None


def test_this_process_and_a_later_one_share_and_the_last_to_leave_stops_it(machine: Path) -> None:
    ep = ensure_local_server("qwen")
    (mine,) = running_servers()
    b = User()
    assert b.ready()["api_base"] == ep.api_base
    shutdown_local_servers()  # not the last user: it runs on for b
    assert answers(ep.api_base) and pid_alive(mine.server_pid)
    b.leave()
    assert _eventually(lambda: not pid_alive(mine.server_pid))


def test_a_record_whose_owner_is_gone_is_replaced(machine: Path) -> None:
    gone = subprocess.Popen(["true"])
    gone.wait()
    registry = Registry("qwen")
    with registry.locked():
        registry.write(_record(owner_pid=gone.pid, server_pid=gone.pid))
    ep = ensure_local_server("qwen")
    record = registry.read()
    assert record is not None and record.id != "old0000000" and record.owner_alive
    assert ep.api_base == record.api_base and answers(ep.api_base)


def test_a_server_that_does_not_answer_is_stopped_and_replaced(machine: Path) -> None:
    hung, who = _live([sys.executable, "-c", "import time; time.sleep(60)"])  # alive, listening nowhere
    try:
        registry = Registry("qwen")
        with registry.locked():
            registry.write(_record(owner_pid=who["pid"], owner_started=who["started"], server_pid=who["pid"],
                                   server_started=who["started"]))
        ep = ensure_local_server("qwen")
        assert hung.wait(10) == -signal.SIGTERM  # its owner was told to stop
        record = registry.read()
        assert record is not None and record.id != "old0000000" and ep.api_base == record.api_base
    finally:
        hung.kill()
        hung.wait()


def _stub_server() -> tuple[subprocess.Popen[str], dict[str, object], str]:
    """A stub serving the embedded model's alias in a process of its own (a server of other weights, say)."""
    proc, who = _live([sys.executable, "-m", "masforge.testing.stub_server", "--alias", SPEC.alias, "--port", "0"])
    line = proc.stdout.readline() if proc.stdout else ""
    assert "listening on" in line, line
    return proc, who, line.split("listening on", 1)[1].split()[0]


def test_a_server_of_other_weights_is_not_used(machine: Path) -> None:
    other, server, api_base = _stub_server()
    owner, owner_id = _live([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        registry = Registry("qwen")
        old = _record(api_base=api_base, sha256="0" * 64, owner_pid=owner_id["pid"], owner_started=owner_id["started"],
                      server_pid=server["pid"], server_started=server["started"])
        with registry.locked():
            registry.write(old)
            lease = registry.lease(old.id)  # a user of its own
        assert answers(api_base)
        ep = ensure_local_server("qwen")
        assert ep.api_base != api_base
        record = registry.read()
        assert record is not None and record.id != old.id and record.sha256 == SPEC.sha256
        assert owner.poll() is None and other.poll() is None  # it runs on for its own user
        lease.release()
        shutdown_local_servers()

        with registry.locked():
            registry.write(old)  # recorded again, now with no user: it is stopped as well as passed over
        assert ensure_local_server("qwen").api_base != api_base
        assert owner.wait(10) == -signal.SIGTERM
        assert _eventually(lambda: other.poll() is not None)
    finally:
        for proc in (other, owner):
            proc.kill()
            proc.wait()


def test_every_process_keeps_to_the_slots_of_the_shared_server(machine: Path, monkeypatch) -> None:
    ensure_local_server("qwen")  # started with 3 slots
    monkeypatch.setenv("MASFORGE_LOCAL_SLOTS", "5")  # this process would start a 5-slot server
    assert parse_lm("local").max_concurrency == 3
    shutdown_local_servers()
    assert parse_lm("local").max_concurrency == 5


def test_a_server_that_died_is_retired_by_its_supervisor_and_started_again(machine: Path) -> None:
    ensure_local_server("qwen")
    (first,) = running_servers()
    os.kill(first.server_pid, signal.SIGKILL)
    assert _eventually(lambda: not pid_alive(first.owner_pid) and Registry("qwen").read() is None)
    ep = ensure_local_server("qwen")  # this process notices its server is gone and takes a new one
    (second,) = running_servers()
    assert second.id != first.id and answers(ep.api_base)


def test_a_server_that_cannot_start_says_why_and_leaves_nothing(machine: Path, monkeypatch) -> None:
    broken = machine / "broken-server"
    broken.write_text("#!/bin/sh\necho 'error: cannot load gguf magic'\nexit 3\n")
    broken.chmod(0o755)
    monkeypatch.setenv("MASFORGE_LLAMA_SERVER", str(broken))
    with pytest.raises(LocalModelError, match=r"exited with code 3 while starting: .*cannot load gguf magic"):
        ensure_local_server("qwen")
    assert Registry("qwen").read() is None and running_servers() == []
    assert _eventually(lambda: _processes_mentioning(str(machine)) == [], timeout=10)


@pytest.mark.parametrize("raw", ["-1", "soon", "inf"])
def test_a_bad_idle_time_is_one_line(monkeypatch, raw: str) -> None:
    monkeypatch.setenv(IDLE_ENV, raw)
    with pytest.raises(LocalModelError, match=f"MASFORGE_LOCAL_IDLE_S={raw}: give the seconds"):
        idle_seconds()
