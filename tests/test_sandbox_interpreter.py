"""The sandbox starts this interpreter by a path it can follow: a script started as ``../x/.venv/bin/python`` (a
relative path, or one through folders the sandbox does not show) kept bubblewrap, and a bubblewrap that is
installed but fails is never answered with "install bubblewrap"."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from masforge.errors import SandboxUnavailable
from masforge.sandbox import isolation as iso_module

ROOT = Path(__file__).resolve().parents[1]
IS_ROOT = os.geteuid() == 0


def _started_through_dotdot(tmp_path: Path, script: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """Run ``script`` with this interpreter named by a path relative to a folder two levels into ``tmp_path``."""
    cwd = tmp_path / "a" / "b"
    cwd.mkdir(parents=True)
    python = os.path.relpath(os.path.abspath(sys.executable), cwd)
    assert python.startswith("..")
    env = {**env, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    env.pop("MASFORGE_SANDBOX", None)
    return subprocess.run([python, "-c", script], cwd=cwd, capture_output=True, text=True, env=env, timeout=120,
                          check=False)


def test_the_interpreter_path_is_absolute_real_and_keeps_its_environment(tmp_path: Path):
    script = ("import os, sys\nfrom masforge.sandbox.isolation import interpreter, child_command\n"
              "print(sys.executable); print(interpreter()); print(child_command([])[0][0])")
    run = _started_through_dotdot(tmp_path, script, dict(os.environ))
    assert run.returncode == 0, run.stderr
    started, resolved, child = run.stdout.strip().splitlines()
    assert ".." in started  # what Python keeps: the path it was started by
    assert resolved == child and os.path.isabs(resolved) and ".." not in resolved.split(os.sep)
    assert os.path.samefile(resolved, sys.executable)
    # the file name is kept, not resolved: a venv's python is a link whose place names its environment
    expected = os.path.join(os.path.realpath(os.path.dirname(os.path.abspath(sys.executable))),
                            os.path.basename(sys.executable))
    assert resolved == expected


def _can_hide_folders() -> bool:
    probe = subprocess.run(["unshare", "--mount", "sh", "-c", "mount -t tmpfs none /mnt"], capture_output=True,
                           check=False) if shutil.which("unshare") else None
    return probe is not None and probe.returncode == 0


@pytest.mark.skipif(not _can_hide_folders(), reason="needs `unshare --mount` (root) to hide the caller's folders")
def test_a_script_started_through_dotdot_keeps_bubblewrap(tmp_path: Path):
    # A stand-in for bubblewrap that does what matters here: the program starts in / of a mount namespace where
    # the caller's working folders are not there (bubblewrap's private /tmp), so a path through them cannot be
    # followed ("bwrap: execvp ../masforge/.venv/bin/python: No such file or directory").
    hidden = tmp_path / "a"
    fake = tmp_path / "bin" / "bwrap"
    fake.parent.mkdir()
    fake.write_text("#!/bin/sh\nwhile [ \"$1\" != -- ]; do shift; done; shift\n"
                    f"exec unshare --mount sh -c 'mount -t tmpfs none \"$0\" && cd / && exec \"$@\"' {hidden} \"$@\"\n")
    fake.chmod(0o755)
    script = ("import masforge.sandbox.isolation as iso\n"
              "i = iso.isolation()\n"
              "print(i.mode, '|', '; '.join(i.missing))\n")
    env = {**os.environ, "PATH": f"{fake.parent}{os.pathsep}{os.environ['PATH']}"}
    run = _started_through_dotdot(tmp_path, script, env)
    assert run.returncode == 0, run.stderr
    mode, missing = (part.strip() for part in run.stdout.strip().splitlines()[-1].split("|"))
    assert mode == "bwrap", run.stdout + run.stderr
    assert "private /tmp" not in missing and "No such file" not in run.stderr


def test_bubblewrap_that_fails_is_not_answered_with_install_it(monkeypatch: pytest.MonkeyPatch):
    failing = iso_module.Isolation("unshare", IS_ROOT, ("read-only file system view and private /tmp (bubblewrap "
                                                        "failed here: bwrap: execvp x: No such file)",),
                                   unshare="unshare")
    with pytest.raises(SandboxUnavailable) as info:
        failing.require_file_system_layer()
    assert "install bubblewrap" not in str(info.value) and "bwrap: execvp x" in str(info.value)
    absent = iso_module.Isolation("process", IS_ROOT, ("read-only file system view and private /tmp (bubblewrap "
                                                       "not installed: apt install bubblewrap)",))
    with pytest.raises(SandboxUnavailable, match="install bubblewrap"):
        absent.require_file_system_layer()
