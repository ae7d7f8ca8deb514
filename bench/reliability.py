"""Reliability figures for bad input, secrets and crash-safe archive creation (issue 11, items 5-7).

1. Hostile input files (the issue's cases) at the default limits: what masforge answers and how fast; genome
   validation time against size with the limits raised (it must grow linearly).
2. Fuzzing: the property-based tests of tests/test_fuzz.py at the "soak" size, several rounds with fresh random
   seeds; counts of cases, one-line errors and tracebacks (target 0).
3. Kills during archive creation: a process creating an archive is SIGKILLed at many moments (half of them in
   the first 120 ms); then the archive is opened/created again, a candidate added and `git fsck` run. And whole
   searches SIGKILLed while they create their archive, then resumed with --resume.
4. Secrets: the planted-key test (a key echoed in a 401 body by the stub server, then every file and git object
   of the run scanned).

    LITELLM_LOCAL_MODEL_COST_MAP=True .venv/bin/python bench/reliability.py [--kills 40] [--search-kills 8]
        [--fuzz-rounds 3]

Writes its section of bench/results/reliability.md (between the "harden" markers; other sections are kept).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from masforge.archive.creation import half_made  # noqa: E402
from masforge.archive.store import MARKER, Archive  # noqa: E402
from masforge.errors import MasforgeError  # noqa: E402
from masforge.genome.io import load_genome  # noqa: E402
from masforge.genome.schema import Agent, Genome, Topology  # noqa: E402
from masforge.genome.validate import problems  # noqa: E402
from masforge.seeds import load_seed  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results" / "reliability.md"
from common import write_section  # noqa: E402

BEGIN, END = "<!-- harden:begin (bench/reliability.py) -->", "<!-- harden:end -->"
PY = sys.executable

CREATOR = r"""
import sys, time
from masforge.archive.store import Archive
print("ready", flush=True)
sys.stdin.readline()
start = time.perf_counter()
Archive.open(sys.argv[1], create=True).close()
print(f"done {time.perf_counter() - start:.4f}", flush=True)
"""


# ---------------------------------------------------------------------------------------------- 1. input


def _laughs(levels: int = 9) -> str:
    text = ("name: bomb\nagents: [{id: s}]\ntopology: {edges: ['input -> s', 's -> output']}\nmetadata:\n"
            "  a: &a ['lol', 'lol', 'lol', 'lol', 'lol', 'lol', 'lol', 'lol', 'lol']\n")
    prev = "a"
    for i in range(levels):
        text += f"  l{i}: &l{i} [{', '.join(['*' + prev] * 9)}]\n"
        prev = f"l{i}"
    return text


def hostile_inputs(tmp: Path) -> list[str]:
    base = "name: x\nagents: [{id: s}]\ntopology: {edges: ['input -> s', 's -> output']}\n"
    agents = [{"id": f"a{i}"} for i in range(100_000)]
    edges = ["input -> a0", *(f"a{i} -> a{i + 1}" for i in range(99_999)), "a99999 -> output"]
    cases = [
        ("20k nested brackets (JSON)", "nest.json", '{"name":"x","metadata":{"a":' + "[" * 20000 + "]" * 20000 + "}}",
         "3,000-line RecursionError traceback"),
        ("20k nested brackets (YAML)", "nest.yaml", "name: x\nmetadata:\n  a: " + "[" * 20000 + "]" * 20000 + "\n",
         "RecursionError traceback"),
        ("billion laughs in metadata", "bomb.yaml", _laughs(), "passed validation; exhausted memory in a search"),
        ("recursive anchor", "rec.yaml", base + "metadata: &m\n  self: *m\n", "passed; crashed a search"),
        ("duplicate keys (YAML)", "dup.yaml", "name: a\nname: b\n" + base.split("\n", 1)[1], "silently accepted"),
        ("duplicate keys (JSON)", "dup.json", '{"name": "a", "name": "b"}', "silently accepted"),
        ("100k agents (3.8 MB JSON)", "big.json", json.dumps({"name": "big", "agents": agents,
                                                              "topology": {"edges": edges}}), "over 60 s to validate"),
        ("the same, file-size limit raised", "big.json", None, "over 60 s to validate"),
    ]
    rows = ["| input | before (main at 92aafbf/fe06976) | now | time to answer |", "|---|---|---|---|"]
    for title, name, text, before in cases:
        path = tmp / name
        if text is None:
            os.environ["MASFORGE_MAX_FILE_BYTES"] = "100000000"
        else:
            path.write_text(text, encoding="utf-8")
        start = time.perf_counter()
        try:
            g = load_genome(path)
            answer = f"accepted ({len(problems(g))} problems)"
        except MasforgeError as exc:
            answer = "`" + str(exc).replace(str(path), name).replace("|", "\\|") + "`"
        except Exception as exc:  # a traceback would be a finding: report it, do not hide it
            answer = f"**TRACEBACK {type(exc).__name__}**"
        rows.append(f"| {title} | {before} | {answer} | {(time.perf_counter() - start) * 1000:.0f} ms |")
        os.environ.pop("MASFORGE_MAX_FILE_BYTES", None)
    return rows


def validation_scaling() -> list[str]:
    os.environ.update({"MASFORGE_MAX_AGENTS": "1000000", "MASFORGE_MAX_EDGES": "1000000",
                       "MASFORGE_MAX_VALUES": "10000000"})
    rows = ["| agents (chain) | build Genome | problems() | per agent |", "|---|---|---|---|"]
    try:
        for n in (1_000, 5_000, 10_000, 20_000, 40_000):
            start = time.perf_counter()
            agents = [Agent(id=f"a{i}") for i in range(n)]
            edges = [("input", "a0"), *((f"a{i}", f"a{i + 1}") for i in range(n - 1)), (f"a{n - 1}", "output")]
            genome = Genome(name="chain", agents=agents, topology=Topology(edges=edges))
            built = time.perf_counter() - start
            start = time.perf_counter()
            assert problems(genome) == []
            checked = time.perf_counter() - start
            rows.append(f"| {n:,} | {built:.2f} s | {checked:.2f} s | {checked / n * 1e6:.0f} µs |")
    finally:
        for key in ("MASFORGE_MAX_AGENTS", "MASFORGE_MAX_EDGES", "MASFORGE_MAX_VALUES"):
            os.environ.pop(key, None)
    return rows


# ---------------------------------------------------------------------------------------------- 2. fuzz


_FUZZ_TESTS = {"genome": ("test_fuzz_genome_files", "test_fuzz_genome_arbitrary_text"),
               "genome_api": ("test_fuzz_genomes_built_in_code",), "reply": ("test_fuzz_meta_agent_replies",),
               "task": ("test_fuzz_task_files",), "cli": ("test_fuzz_cli_arguments",)}


def fuzz(rounds: int, tmp: Path) -> tuple[list[str], int]:
    """Counts per target; a traceback is a property that failed (hypothesis then replays and shrinks the input,
    so the cases counted for a failing round include those replays)."""
    totals: dict[str, int] = {}
    failures: list[str] = []
    outcomes = []
    for r in range(rounds):
        stats = tmp / f"fuzz{r}.json"
        env = {**os.environ, "MASFORGE_FUZZ_PROFILE": "soak", "MASFORGE_FUZZ_STATS": str(stats)}
        res = subprocess.run([PY, "-m", "pytest", "-q", "-rf", "-p", "no:cacheprovider", "-W", "ignore",
                              "--tb=line", str(ROOT / "tests" / "test_fuzz.py")], env=env, capture_output=True,
                             text=True, cwd=ROOT)
        outcomes.append((res.stdout.strip().splitlines() or ["?"])[-1])
        failures += [f"round {r + 1}: {line[7:300]}" for line in res.stdout.splitlines() if line.startswith("FAILED")]
        if res.returncode != 0:
            print(res.stdout[-4000:], file=sys.stderr)
        for key, value in (json.loads(stats.read_text()) if stats.is_file() else {}).items():
            totals[key] = totals.get(key, 0) + value
    rows = ["| target | cases | one-line errors | tracebacks (failed properties) |", "|---|---|---|---|"]
    labels = {"genome": "genome files (YAML/JSON/.py, mutated; arbitrary text)", "genome_api": "genomes built in code",
              "reply": "meta-agent replies (incl. code/instruction injection)", "task": "task files (JSON Lines)",
              "cli": "CLI arguments (typer CliRunner)"}
    for kind, tests in _FUZZ_TESTS.items():
        errors = totals.get(f"{kind}.errors", 0)
        if kind == "cli":
            errors = totals.get("cli.exit_1", 0) + totals.get("cli.exit_2", 0)
        failed = sum(1 for f in failures if any(f"::{t}" in f for t in tests))
        rows.append(f"| {labels[kind]} | {totals.get(f'{kind}.cases', 0):,} | {errors:,} | {failed} |")
    cases = sum(v for k, v in totals.items() if k.endswith(".cases"))
    rows.append(f"| **all** | **{cases:,}** | | **{len(failures)}** |")
    rows.append("")
    rows.append(f"pytest rounds: {'; '.join(outcomes)}")
    rows += [f"- failed: `{f}`" for f in failures]
    return rows, len(failures)


# ---------------------------------------------------------------------------------------------- 3. kills


def _fsck_clean(path: Path) -> bool:
    res = subprocess.run(["git", "-C", str(path), "fsck", "--no-dangling"], capture_output=True, text=True)
    return res.returncode == 0 and not res.stdout.strip()


def kill_creation(n: int, tmp: Path, rng: random.Random) -> list[str]:
    env = {**os.environ}
    durations = []
    for i in range(3):  # how long creation takes here, to spread the kills over it
        proc = subprocess.Popen([PY, "-c", CREATOR, str(tmp / f"cal{i}")], stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, text=True, env=env)
        assert proc.stdin and proc.stdout
        proc.stdout.readline()
        proc.stdin.write("go\n")
        proc.stdin.flush()
        durations.append(float(proc.stdout.readline().split()[1]))
        proc.wait()
    span = max(durations) * 1.3
    interrupted = recovered = clean = half = 0
    early = 0
    for i in range(n):
        delay = rng.uniform(0, 0.12) if i % 2 == 0 else rng.uniform(0, 3 * span)
        early += delay <= 0.12
        path = tmp / f"a{i}"
        proc = subprocess.Popen([PY, "-c", CREATOR, str(path)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                text=True, env=env)
        assert proc.stdin and proc.stdout
        proc.stdout.readline()
        proc.stdin.write("go\n")
        proc.stdin.flush()
        time.sleep(delay)
        proc.send_signal(signal.SIGKILL)
        out = proc.stdout.read()
        proc.wait()
        interrupted += "done" not in out
        half += path.exists() and not (path / MARKER).is_file() and half_made(path, MARKER) is None
        try:
            with Archive.open(path, create=True) as arch:
                arch.add(load_seed("cot"))
            recovered += 1
            clean += _fsck_clean(path)
        except MasforgeError as exc:
            print(f"  kill {i} at {delay * 1000:.0f} ms: not recovered: {exc}", file=sys.stderr)
    return [f"- archive creation takes {min(durations) * 1000:.0f}-{max(durations) * 1000:.0f} ms here; "
            f"{n} SIGKILLs at random moments after creation began ({early} within its first 120 ms, the others up to "
            f"{3 * span * 1000:.0f} ms), {interrupted} of them before `Archive.open(create=True)` returned",
            f"- after each kill: archive opened (create=True, what a resumed search does) and a candidate added: "
            f"**{recovered}/{n}**; `git fsck` clean: **{clean}/{n}**; folders that were neither an archive nor "
            f"recognisably unfinished: **{half}**",
            "- before (main at fe06976, same harness): 9 of 40 kills left `.git` and the lock file without the "
            "marker, and every later open failed (\"folder holds .git ... not a masforge archive\")"]


def kill_searches(n: int, tmp: Path, rng: random.Random) -> list[str]:
    runs = tmp / "runs"
    env = {**os.environ, "MASFORGE_CACHE": str(tmp / "cache")}
    resumed = finished = 0
    for i in range(n):
        before = set(runs.glob("*")) if runs.exists() else set()
        proc = subprocess.Popen([PY, "-m", "masforge", "search", "--task", "rg:basic_arithmetic", "--lm", "fake",
                                 "--strategy", "random", "--seeds", "cot,io", "-n", "3", "--limit", "2",
                                 "--test-limit", "2", "-o", str(runs), "--seed", str(i), "--quiet"],
                                env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        started = None
        deadline = time.monotonic() + 120
        while started is None and proc.poll() is None and time.monotonic() < deadline:
            new = [p for p in runs.glob("*") if p not in before] if runs.exists() else []
            started = next((b for p in new for b in p.glob(".archive.creating-*")), None)
            time.sleep(0.001)
        time.sleep(rng.uniform(0, 0.06))
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        if started is None:
            print(f"  search {i}: did not reach archive creation", file=sys.stderr)
            continue
        run_dir = started.parent
        res = subprocess.run([PY, "-m", "masforge", "search", "--resume", str(run_dir), "--quiet"], env=env,
                             capture_output=True, text=True, timeout=600)
        resumed += res.returncode == 0 and "Traceback" not in res.stderr
        try:
            with Archive.open(run_dir / "archive") as arch:
                finished += len(arch.list(run=run_dir.name)) == 3 and _fsck_clean(run_dir / "archive")
        except MasforgeError:
            pass
    return [f"- whole searches (`masforge search --lm fake`, 3 candidates) SIGKILLed 0-60 ms after they began "
            f"creating their archive, then `--resume`d: resumed without error **{resumed}/{n}**, finished with all "
            f"3 candidates and `git fsck` clean **{finished}/{n}**"]


# ---------------------------------------------------------------------------------------------- 4. secrets


def _redaction_cost() -> float:
    """Microseconds to redact one stored result with four failure notes (what add_result now pays)."""
    from masforge.archive.records import ResultRecord
    from masforge.redact import redact_data

    notes = [{"input": "What is 12 + 30? " * 20, "expected": "42", "got": "41", "error": "LMError: 401 " * 5,
              "trace": "agent#0 r0: answer='41' " * 30} for _ in range(4)]
    record = ResultRecord(task="t", split="validation", lm_key="m@1", score=0.5, n=20, failures={"wrong": 3},
                          extra={"failure_notes": notes, "run": "r"})
    start = time.perf_counter()
    for _ in range(500):
        ResultRecord.from_dict(redact_data(record.to_dict()))
    return (time.perf_counter() - start) / 500 * 1e6


def secrets() -> list[str]:
    res = subprocess.run([PY, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-W", "ignore",
                          str(ROOT / "tests" / "test_secrets.py")], capture_output=True, text=True, cwd=ROOT)
    summary = (res.stdout.strip().splitlines() or ["?"])[-1]
    return [f"- tests/test_secrets.py: {summary}. The end-to-end case runs a search whose worker endpoint (the stub "
            "server) answers every call with HTTP 401 quoting the API key and the `Authorization` header, then "
            "writes exports and the report, and scans every file of the run folder as raw bytes (SQLite index "
            "included) and every git object (`git log -p --all`, `git cat-file --batch-all-objects`): "
            f"planted key found **{'0' if res.returncode == 0 else 'SOME'}** times",
            "- before: the key was in 12 git objects and the SQLite index (issue 11, item 8)",
            f"- cost: redacting a stored result with four failure notes takes {_redaction_cost():.0f} µs here (an "
            "archive write is ~20 ms, `archive.txt`)"]


# ---------------------------------------------------------------------------------------------- main


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kills", type=int, default=40)
    parser.add_argument("--search-kills", type=int, default=8)
    parser.add_argument("--fuzz-rounds", type=int, default=3)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args(argv)
    rng = random.Random(args.seed)
    tmp = Path(tempfile.mkdtemp(prefix="masforge-reliability-"))
    try:
        started = time.time()
        print("hostile inputs ...", file=sys.stderr)
        inputs = hostile_inputs(tmp)
        scaling = validation_scaling()
        print("fuzzing ...", file=sys.stderr)
        fuzz_rows, fuzz_failures = fuzz(args.fuzz_rounds, tmp)
        print("killing archive creation ...", file=sys.stderr)
        (tmp / "kills").mkdir()
        kills = kill_creation(args.kills, tmp / "kills", rng)
        print("killing searches ...", file=sys.stderr)
        searches = kill_searches(args.search_kills, tmp / "searches", rng)
        print("secrets ...", file=sys.stderr)
        secret_rows = secrets()
        lines = [
            "## Bad input, secrets and crash-safe archive creation",
            "",
            f"`bench/reliability.py --kills {args.kills} --search-kills {args.search_kills} --fuzz-rounds "
            f"{args.fuzz_rounds}` on {time.strftime('%Y-%m-%d')}: python {platform.python_version()}, "
            f"{os.cpu_count()} cpus shared with other jobs (load average {os.getloadavg()[0]:.1f}), "
            f"{time.time() - started:.0f} s in all.",
            "",
            "### Hostile input files (default limits)",
            "",
            *inputs,
            "",
            "Genome validation against size (limits raised; a chain of agents; it must grow linearly):",
            "",
            *scaling,
            "",
            "### Fuzzing (hypothesis, tests/test_fuzz.py at the soak size, fresh random seeds per round)",
            "",
            *fuzz_rows,
            "",
            "Properties: only masforge's one-line errors (or, for replies, the one-line parse error sent back to the "
            "model), never a traceback; no process other than git and the sandbox started and no payload "
            "evaluated (audit hook) and no sentinel file written. Bugs the fuzzers found and that are fixed: an "
            "empty `topology` in a meta-agent reply (TypeError in a search), genome inputs equal to outputs "
            "(ValueError in validation), lone surrogates reaching git and the terminal, strategy/task names that "
            "made invalid run-folder names, over-long path arguments (OSError), genome names that are not valid "
            "rich markup (MarkupError), error messages quoting values with line breaks, a NEL (U+0085) in a "
            "proposal's text that changed in the YAML round trip (the archive refused to store it), a backslash in a "
            "code genome's front matter read as a Python escape.",
            "",
            "### Kills during archive creation",
            "",
            *kills,
            *searches,
            "",
            "### Secrets",
            "",
            *secret_rows,
        ]
        write_section(RESULTS, BEGIN, END, "\n".join(lines))
        print("\n".join(lines))
        return 1 if fuzz_failures else 0
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    raise SystemExit(main())
