"""The kill-and-resume harness: SIGKILL a running ``masforge search`` at random moments (one of them while its
archive is being created), resume it each time, and check what a kill must never do.

After every kill: ``git fsck`` of the archive is clean, and its SQLite index equals one rebuilt from git. At the
end: no finished evaluation was lost (every result stored before a kill is in the final run) or repeated (no
(genome, split) result recorded twice in the archive's journal), the final candidates equal those of an
uninterrupted run with the same seed, and the ledger counts every request the (deterministic, fake-answering)
LM server received. The LM is a :class:`~masforge.testing.stub_server.StubServer` in this process, so the
requests are counted outside the process being killed. :func:`kill_trials` repeats a single kill and resume many
times over, each compared score for score with the uninterrupted run.

Used at CI size by ``tests/test_kill_resume.py`` and as a soak run by ``bench/kill_resume.py``.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from masforge.cache_root import CACHE_ENV
from masforge.lm.fake import fake_reply
from masforge.testing.stub_server import StubServer

RUN_NAME = "run"


def _fake_over_http(messages: list[dict[str, Any]], body: dict[str, Any]) -> str:
    return fake_reply(messages, {"sample": body.get("seed", 0)})


@dataclass
class KillReport:
    """What the harness saw (see the module docstring for what each check means)."""

    kills: int = 0
    """SIGKILLs sent while the search ran."""
    killed_in_creation: int = 0
    """Kills that landed while the archive was being created (its marker not yet written)."""
    finished_before_kill: int = 0
    """Sessions that ended before their planned kill moment (then resumed all the same)."""
    fsck_failures: list[str] = field(default_factory=list)
    index_mismatches: list[str] = field(default_factory=list)
    session_failures: list[str] = field(default_factory=list)
    """Sessions (resumes) that failed instead of carrying on: the harness stops at the first."""
    lost: list[str] = field(default_factory=list)
    """Results stored before a kill and missing afterwards or in the final run."""
    repeated: list[str] = field(default_factory=list)
    """(genome, split) results recorded more than once."""
    final_equal: bool = False
    """The final candidates (ids, in order), their scores and the held-out scores equal the uninterrupted run's."""
    diverged_at: int | None = None
    candidates: int = 0
    reference_requests: int = 0
    """LM requests of the uninterrupted run."""
    requests: int = 0
    """LM requests the server received over all sessions of the killed run."""
    ledger_calls: int = 0
    """LM requests the killed run's ledger counted over all its sessions."""
    tokens: int = 0
    """Tokens of the answers the LM server delivered over all sessions (some to a process killed before it read
    them)."""
    ledger_tokens: int = 0
    """Tokens the killed run's ledger counted over all its sessions."""
    unsettled: int = 0
    """Requests the ledger counted as reserved when a kill came (they may or may not have been sent)."""
    kill_times: list[float] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return not (self.session_failures or self.fsck_failures or self.index_mismatches or self.lost
                    or self.repeated) and self.final_equal \
            and self.requests <= self.ledger_calls <= self.requests + self.unsettled

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "ok": self.ok}


def run_config(stub: StubServer, output: Path, *, strategy: str, candidates: int, seed: int,
               limit: int = 4, concurrency: int = 2) -> dict[str, Any]:
    """A small search on the stub LM (answers like ``--lm fake``)."""
    return {"task": "rg:basic_arithmetic", "strategy": strategy, "seeds": ["cot", "io", "self_refine"],
            "lm": {"model": "openai/stub", "api_base": stub.api_base, "temperature": 0.0, "max_concurrency": 8,
                   "timeout_s": 30.0},
            "limit": limit, "test_top_k": 1, "test_limit": 3, "concurrency": concurrency, "seed": seed,
            "output": str(output), "name": RUN_NAME, "budget": {"max_candidates": candidates}}


def _command(cfg_path: Path, run_dir: Path, resume: bool) -> list[str]:
    if resume:
        return [sys.executable, "-m", "masforge", "search", "--resume", str(run_dir), "-q"]
    return [sys.executable, "-m", "masforge", "search", "--config", str(cfg_path), "-q"]


def _summary(run_dir: Path) -> dict[str, Any]:
    return json.loads((run_dir / "summary.json").read_text(encoding="utf-8"))


def _results(archive_dir: Path) -> set[tuple[str, str, str]]:
    """(genome, split, lm_key) of every result in the archive's index."""
    from masforge.archive.store import Archive

    with Archive.open(archive_dir) as archive:
        return {(rec.genome_id, r.split, r.lm_key) for rec in archive.list(include_pruned=True) for r in rec.results}


def _index_snapshot(archive_dir: Path) -> list[tuple[Any, ...]]:
    from masforge.archive.store import Archive

    with Archive.open(archive_dir) as archive:
        return sorted((rec.genome_id, tuple(rec.parents), rec.status, rec.run,
                       tuple(sorted((r.task, r.split, r.lm_key, round(r.score, 9), r.n) for r in rec.results)))
                      for rec in archive.list(include_pruned=True))


def check_archive(archive_dir: Path) -> tuple[str | None, str | None]:
    """(git fsck problem, index-vs-git problem), each None when clean."""
    if not (archive_dir / ".git").is_dir():
        return None, None
    fsck = subprocess.run(["git", "fsck", "--no-dangling"], cwd=archive_dir, capture_output=True, text=True)
    fsck_problem = None if fsck.returncode == 0 else (fsck.stderr or fsck.stdout).strip()[:300]
    if not (archive_dir / ".masforge-archive").is_file():
        return fsck_problem, None  # killed during creation: the next open finishes it
    with tempfile.TemporaryDirectory() as tmp:
        copy = Path(tmp) / "archive"
        shutil.copytree(archive_dir, copy, symlinks=True)
        for stale in copy.glob(".masforge-index.sqlite*"):
            stale.unlink()
        rebuilt = _index_snapshot(copy)
    current = _index_snapshot(archive_dir)
    index_problem = None if current == rebuilt else f"index has {len(current)} candidates, git {len(rebuilt)}"
    return fsck_problem, index_problem


def repeated_results(archive_dir: Path) -> list[str]:
    """Results recorded more than once in the archive's journal (by genome and task/split)."""
    subjects = subprocess.run(["git", "log", "--first-parent", "--format=%s", "main"], cwd=archive_dir,
                              capture_output=True, text=True, check=True).stdout.splitlines()
    seen = Counter(" ".join(s.split()[1:3]).rstrip(":") for s in subjects if s.startswith("result "))
    return [key for key, n in seen.items() if n > 1]


def _logged(run_dir: Path) -> int:
    """Candidate rows in the run's events.jsonl."""
    try:
        return (run_dir / "events.jsonl").read_text(encoding="utf-8").count('"event": "candidate"')
    except OSError:
        return 0


def _wait_for(path: Path, proc: subprocess.Popen[bytes], deadline: float) -> bool:
    while time.monotonic() < deadline and proc.poll() is None:
        if path.exists():
            return True
        time.sleep(0.0005)
    return False


def outcome(summary: dict[str, Any]) -> list[tuple[str, str, float]]:
    """What a run found: each candidate with its validation score, then each finalist with its held-out score, in
    order (scores rounded to 9 places: the same evaluations give the same numbers)."""
    return [("candidate", c["id"], round(float(c["score"]), 9)) for c in summary["candidates"]] + \
        [("test", t["genome_id"], round(float(t["test"]), 9)) for t in summary["test"]]


def _reference(work: Path, *, strategy: str, candidates: int, seed: int, latency_s: float,
               env: dict[str, str]) -> tuple[dict[str, Any], int, float]:
    """The uninterrupted run (its own LM server, cache and output): (summary, LM requests, seconds)."""
    with StubServer(responder=_fake_over_http, latency_s=latency_s) as ref_stub:
        cfg_path = work / "reference.json"
        cfg_path.write_text(json.dumps(run_config(ref_stub, work / "reference", strategy=strategy,
                                                  candidates=candidates, seed=seed)))
        t0 = time.monotonic()
        done = subprocess.run(_command(cfg_path, work / "reference" / RUN_NAME, False), capture_output=True,
                              env={**env, CACHE_ENV: str(work / "cache-reference")})
        duration = time.monotonic() - t0
        if done.returncode != 0:
            raise RuntimeError(f"the reference run failed: {done.stderr.decode()[-500:]}")
        requests = ref_stub.requests
    return _summary(work / "reference" / RUN_NAME), requests, duration


@dataclass
class TrialsReport:
    """Independent kill-and-resume trials against one uninterrupted run."""

    trials: int = 0
    matched: int = 0
    """Trials whose final candidates, validation scores and held-out scores equal the uninterrupted run's."""
    killed: int = 0
    """Trials whose session was SIGKILLed (the others ended before their kill moment)."""
    mismatches: list[str] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)
    seconds: float = 0.0


def kill_trials(workdir: str | Path, *, trials: int = 20, seed: int = 0, strategy: str = "evolve",
                candidates: int = 12, latency_s: float = 0.01, progress: Any = None) -> TrialsReport:
    """``trials`` times: start the search afresh (its own LM server and cache), SIGKILL it at a random moment,
    resume it to the end and compare what it found, score for score, with an uninterrupted run's."""
    work = Path(workdir)
    work.mkdir(parents=True, exist_ok=True)
    rng = random.Random(seed)
    say = progress or (lambda text: None)
    started = time.monotonic()
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True", "MASFORGE_OFFLINE": "1"}
    reference, _, _ = _reference(work, strategy=strategy, candidates=candidates, seed=seed, latency_s=latency_s,
                                 env=env)
    expected = outcome(reference)
    report = TrialsReport()
    for t in range(trials):
        trial = work / f"trial-{t}"
        run_dir = trial / RUN_NAME
        trial_env = {**env, CACHE_ENV: str(trial / "cache")}
        with StubServer(responder=_fake_over_http, latency_s=latency_s) as stub:
            cfg_path = trial / "config.json"
            trial.mkdir(parents=True, exist_ok=True)
            cfg_path.write_text(json.dumps(run_config(stub, trial, strategy=strategy, candidates=candidates,
                                                      seed=seed)))
            proc = subprocess.Popen(_command(cfg_path, run_dir, False), env=trial_env, stdout=subprocess.DEVNULL,
                                    stderr=subprocess.DEVNULL)
            target = rng.randint(0, max(0, candidates - 1))
            while proc.poll() is None and _logged(run_dir) < target:
                time.sleep(0.005)
            deadline = time.monotonic() + rng.uniform(0.0, 1.0)
            while time.monotonic() < deadline and proc.poll() is None:
                time.sleep(0.002)
            if proc.poll() is None:
                proc.send_signal(signal.SIGKILL)
                report.killed += 1
            proc.wait()
            final = subprocess.run(_command(cfg_path, run_dir, (run_dir / "config.yaml").is_file()), env=trial_env,
                                   capture_output=True)
        report.trials += 1
        if final.returncode != 0:
            report.failures.append(f"trial {t + 1}: {final.stderr.decode().strip()[-300:]}")
            continue
        got = outcome(_summary(run_dir))
        if got == expected:
            report.matched += 1
        else:
            first = next((i for i, (a, b) in enumerate(zip(got, expected, strict=False)) if a != b),
                         min(len(got), len(expected)))
            report.mismatches.append(f"trial {t + 1}: first difference at {first}: "
                                     f"{got[first] if first < len(got) else '-'} vs "
                                     f"{expected[first] if first < len(expected) else '-'}")
        say(f"trial {t + 1}/{trials}: killed after {target} logged candidates; "
            f"{report.matched}/{report.trials} equal the uninterrupted run")
        shutil.rmtree(trial, ignore_errors=True)
    report.seconds = round(time.monotonic() - started, 1)
    return report


def kill_and_resume(workdir: str | Path, *, kills: int = 20, seed: int = 0, strategy: str = "evolve",
                    candidates: int = 12, latency_s: float = 0.01, kill_in_creation: bool = True,
                    progress: Any = None) -> KillReport:
    """Run the whole harness in ``workdir`` (created; left behind for inspection). With ``kill_in_creation``
    the first kill comes as soon as the archive's ``.git`` appears."""
    work = Path(workdir)
    work.mkdir(parents=True, exist_ok=True)
    rng = random.Random(seed)
    report = KillReport()
    started = time.monotonic()
    say = progress or (lambda text: None)
    base_env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True", "MASFORGE_OFFLINE": "1"}

    # The uninterrupted run, for reference (its own LM server, cache and output).
    reference, report.reference_requests, duration = _reference(work, strategy=strategy, candidates=candidates,
                                                                seed=seed, latency_s=latency_s, env=base_env)
    say(f"reference run: {len(reference['candidates'])} candidates, {report.reference_requests} LM requests, "
        f"{duration:.1f}s")

    # The same run killed `kills` times and resumed after each kill.
    run_dir = work / "killed" / RUN_NAME
    archive_dir = run_dir / "archive"
    env = {**base_env, CACHE_ENV: str(work / "cache-killed")}
    with StubServer(responder=_fake_over_http, latency_s=latency_s) as stub:
        cfg_path = work / "killed.json"
        cfg_path.write_text(json.dumps(run_config(stub, work / "killed", strategy=strategy, candidates=candidates,
                                                  seed=seed)))
        stored: set[tuple[str, str, str]] = set()
        for k in range(kills):
            resume = (run_dir / "config.yaml").is_file()
            proc = subprocess.Popen(_command(cfg_path, run_dir, resume), env=env, stdout=subprocess.DEVNULL,
                                    stderr=subprocess.PIPE)
            moment = time.monotonic()
            if k == 0 and kill_in_creation:  # while the archive is being created: as soon as its .git appears
                _wait_for(archive_dir / ".git", proc, moment + 120)
            else:  # after 0-2 more candidates were logged, plus up to a second: start-up, replay, evaluation
                target = _logged(run_dir) + rng.randint(0, 2)
                while proc.poll() is None and _logged(run_dir) < target:
                    time.sleep(0.005)
                deadline = time.monotonic() + rng.uniform(0.0, 1.0)
                while time.monotonic() < deadline and proc.poll() is None:
                    time.sleep(0.002)
            if proc.poll() is None:
                proc.send_signal(signal.SIGKILL)
                report.kills += 1
                report.kill_times.append(round(time.monotonic() - moment, 3))
                if k == 0 and (archive_dir / ".git").exists() and not (archive_dir / ".masforge-archive").exists():
                    report.killed_in_creation += 1
            else:
                report.finished_before_kill += 1
            _, err = proc.communicate()
            if proc.returncode not in (0, -signal.SIGKILL):
                report.session_failures.append(f"session {k + 1}: {err.decode().strip()[-300:]}")
                break
            fsck_problem, index_problem = check_archive(archive_dir)
            if fsck_problem:
                report.fsck_failures.append(f"kill {k}: {fsck_problem}")
            if index_problem:
                report.index_mismatches.append(f"kill {k}: {index_problem}")
            if (archive_dir / ".masforge-archive").is_file():
                now = _results(archive_dir)
                report.lost += [f"kill {k}: {g[:12]} {s}" for g, s, _ in sorted(stored - now)]
                stored |= now
            when = f"after {report.kill_times[-1]}s" if proc.returncode else "the session ended first"
            say(f"kill {k + 1}/{kills}: {when}, {len(stored)} results stored")
        final = subprocess.run(_command(cfg_path, run_dir, (run_dir / "config.yaml").is_file()), env=env,
                               capture_output=True)
        report.requests = stub.requests
        report.tokens = stub.delivered_tokens["total_tokens"]
        if final.returncode != 0:
            report.session_failures.append(f"final resume: {final.stderr.decode().strip()[-300:]}")
            report.seconds = round(time.monotonic() - started, 1)
            return report
    summary = _summary(run_dir)
    final_ids = [c["id"] for c in summary["candidates"]]
    report.candidates = len(final_ids)
    report.final_equal = outcome(summary) == outcome(reference)
    report.diverged_at = summary["stats"].get("diverged_at")
    now = _results(archive_dir)
    report.lost += [f"final: {g[:12]} {s}" for g, s, _ in sorted(stored - now)]
    in_run = set(final_ids) | {t["genome_id"] for t in summary["test"]}
    report.lost += [f"not in the final run: {g[:12]} {s}" for g, s, _ in sorted(now) if g not in in_run]
    report.repeated = repeated_results(archive_dir)
    fsck_problem, index_problem = check_archive(archive_dir)
    if fsck_problem:
        report.fsck_failures.append(f"final: {fsck_problem}")
    if index_problem:
        report.index_mismatches.append(f"final: {index_problem}")
    report.ledger_calls = int(summary["spend"]["llm_calls"])
    report.ledger_tokens = int(summary["spend"]["tokens"])
    report.unsettled = int(summary["spend"].get("failures", {}).get("unsettled", 0))
    report.seconds = round(time.monotonic() - started, 1)
    return report
