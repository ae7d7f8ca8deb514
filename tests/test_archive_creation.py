"""Archive creation is crash-safe: a process SIGKILLed at any moment while it creates an archive (including its
first 120 ms) leaves no archive or a whole one, and opening or resuming afterwards always works. Half-made
archives of older versions are rebuilt; anything else without a marker is never touched."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from masforge.archive.creation import half_made, sweep_stale_builds
from masforge.archive.store import LOCK_FILE, MARKER, Archive
from masforge.errors import ArchiveError
from masforge.seeds import load_seed

CREATOR = r"""
import sys, time
from masforge.archive.store import Archive
print("ready", flush=True)
sys.stdin.readline()
start = time.perf_counter()
Archive.open(sys.argv[1], create=True).close()
print(f"done {time.perf_counter() - start:.4f}", flush=True)
"""


def _env() -> dict[str, str]:
    return {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}


def kill_while_creating(path: Path, delay_s: float) -> bool:
    """Start a process that creates an archive at ``path``, SIGKILL it ``delay_s`` after it begins (imports
    done); True if it finished before the kill."""
    proc = subprocess.Popen([sys.executable, "-c", CREATOR, str(path)], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True, env=_env())
    assert proc.stdin is not None and proc.stdout is not None
    assert proc.stdout.readline().strip() == "ready"
    proc.stdin.write("go\n")
    proc.stdin.flush()
    time.sleep(delay_s)
    proc.send_signal(signal.SIGKILL)
    out = proc.stdout.read()
    proc.wait()
    return "done" in out


def _fsck(path: Path) -> None:
    res = subprocess.run(["git", "-C", str(path), "fsck", "--no-dangling"], capture_output=True, text=True)
    assert res.returncode == 0 and not res.stdout.strip(), res.stdout + res.stderr


def test_sigkill_at_any_moment_of_creation_leaves_an_openable_archive(tmp_path: Path) -> None:
    rng = random.Random(11)
    delays = [i * 0.01 for i in range(13)] + [rng.uniform(0.0, 0.25) for _ in range(5)]  # 0-120 ms, then later
    interrupted = 0
    for i, delay in enumerate(delays):
        path = tmp_path / f"archive{i}"
        interrupted += not kill_while_creating(path, delay)
        # Never a folder that is neither an archive nor recognisably unfinished.
        assert not path.exists() or (path / MARKER).is_file() or half_made(path, MARKER) is not None
        with Archive.open(path, create=True) as arch:  # what a resumed search does
            arch.add(load_seed("cot"))
            assert len(arch) == 1
        _fsck(path)
    # Some kills land before creation ends (it takes ~50 ms, more on a loaded machine); how many depends on
    # the machine's load, so only "at least one" is certain. Every kill above was checked either way.
    assert interrupted >= 1
    leftovers = [p.name for p in tmp_path.iterdir() if ".creating-" in p.name]
    for i in range(len(delays)):
        sweep_stale_builds(tmp_path / f"archive{i}")
    time.sleep(0.2)  # a `git init` orphaned by a kill may still have been writing in its private folder
    for i in range(len(delays)):
        sweep_stale_builds(tmp_path / f"archive{i}")
    assert not [p.name for p in tmp_path.iterdir() if ".creating-" in p.name], leftovers


def _legacy_half_made(path: Path, with_init_commit: bool) -> None:
    """What the in-place initialisation of earlier versions left when killed: lock file, .git, no marker."""
    path.mkdir()
    (path / LOCK_FILE).touch()
    subprocess.run(["git", "init", "-q", "-b", "main", str(path)], check=True)
    if with_init_commit:
        (path / "README.md").write_text("x")
        subprocess.run(["git", "-C", str(path), "add", "README.md"], check=True)
        subprocess.run(["git", "-C", str(path), "-c", "user.name=m", "-c", "user.email=m@x", "commit", "-q", "-m",
                        "init masforge archive (format 1)"], check=True)


@pytest.mark.parametrize("with_init_commit", [False, True])
def test_half_made_archive_of_an_older_version_is_rebuilt(tmp_path: Path, with_init_commit: bool) -> None:
    path = tmp_path / "archive"
    _legacy_half_made(path, with_init_commit)
    with pytest.raises(ArchiveError, match="creation was interrupted.*resume the search"):
        Archive.open(path)
    with Archive.open(path, create=True) as arch:
        arch.add(load_seed("io"))
    _fsck(path)
    assert (path / MARKER).is_file()


def test_folders_that_are_not_ours_are_never_touched(tmp_path: Path) -> None:
    repo = tmp_path / "someone-elses-repo"
    repo.mkdir()
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    with pytest.raises(ArchiveError, match=r"holds \.git .* not a masforge archive"):
        Archive.open(repo, create=True)
    assert (repo / ".git" / "HEAD").is_file()
    # An archive whose marker was deleted still holds candidates: refused, not rebuilt.
    with Archive.open(tmp_path / "real", create=True) as arch:
        arch.add(load_seed("cot"))
    (tmp_path / "real" / MARKER).unlink()
    assert half_made(tmp_path / "real", MARKER) is None
    with pytest.raises(ArchiveError, match="not a masforge archive"):
        Archive.open(tmp_path / "real", create=True)
    subprocess.run(["git", "-C", str(tmp_path / "real"), "checkout", "-q", "main", "--", MARKER], check=True)
    with Archive.open(tmp_path / "real") as arch:
        assert len(arch) == 1


def test_concurrent_creators_share_one_archive(tmp_path: Path) -> None:
    path = tmp_path / "shared"
    errors: list[BaseException] = []

    def create() -> None:
        try:
            Archive.open(path, create=True).close()
        except BaseException as exc:  # collected and asserted below
            errors.append(exc)

    threads = [threading.Thread(target=create) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    procs = [subprocess.Popen([sys.executable, "-c", "import sys\nfrom masforge.archive.store import Archive\n"
                               "Archive.open(sys.argv[1], create=True).close()", str(path)], env=_env(),
                              stderr=subprocess.PIPE, text=True) for _ in range(3)]
    for proc in procs:
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
    assert not errors
    _fsck(path)
    assert not [p for p in tmp_path.iterdir() if p.name != "shared"]


def test_killed_search_resumes_after_a_kill_during_archive_creation(tmp_path: Path) -> None:
    """A search SIGKILLed while it creates its archive resumes with --resume and finishes."""
    runs = tmp_path / "runs"
    cmd = [sys.executable, "-m", "masforge", "search", "--task", "rg:basic_arithmetic", "--lm", "fake",
           "--strategy", "random", "--seeds", "cot,io", "-n", "3", "--limit", "2", "--test-limit", "2", "-o",
           str(runs), "--quiet"]
    env = {**_env(), "MASFORGE_CACHE": str(tmp_path / "cache")}
    for attempt, delay in enumerate((0.01,)):  # more kills, at more moments: bench/reliability.py
        proc = subprocess.Popen([*cmd, "--seed", str(attempt)], env=env, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 120
        started = None
        while time.monotonic() < deadline and proc.poll() is None:
            started = next((p for p in runs.glob("*/.archive.creating-*")), None) if runs.exists() else None
            if started is not None:
                break
            time.sleep(0.001)
        assert started is not None, "the search never began to create its archive"
        time.sleep(delay)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        run_dir = started.parent
        assert not (run_dir / "archive").exists() or (run_dir / "archive" / MARKER).is_file()
        res = subprocess.run([sys.executable, "-m", "masforge", "search", "--resume", str(run_dir), "--quiet"],
                             env=env, capture_output=True, text=True, timeout=300)
        assert res.returncode == 0, res.stdout + res.stderr
        assert "Traceback" not in res.stderr
        with Archive.open(run_dir / "archive") as arch:
            assert len(arch.list(run=run_dir.name)) == 3
        _fsck(run_dir / "archive")
