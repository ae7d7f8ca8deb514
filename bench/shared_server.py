"""Two masforge evaluations started together on one machine: do they share one embedded model server, and what share of
its solo rate does each keep? (Two servers fighting over 2 cores kept about 8% each; the target is at least 45%.)

    LITELLM_LOCAL_MODEL_COST_MAP=True .venv/bin/python bench/shared_server.py [--limit 8] [--seed io] [--task humaneval]

Each evaluation is its own process, ``masforge evaluate <seed> --task <task> --split <split> --limit N --lm local
--no-cache -o <report>``: A on the first split, B on the second (different questions, so neither finds the other's
prompt in the server's cache). Each runs once alone, then both start at the same moment. A run's rate is its examples
per minute over the evaluation's wall time (the same examples alone and together, so the fraction is the ratio of
the two wall times); tokens per second are shown beside it. While the pair runs, the machine's server record is
watched: both evaluations must be users of one server. Writes bench/results/shared_server.txt.

``--stub`` runs the same with a stub standing in for llama.cpp's server (no model is loaded, each request takes
``--stub-latency`` s): it checks this script, not the speed, and says so in its output.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from masforge.local_model.shared import shared_servers  # noqa: E402
from masforge.testing.fake_llama import fake_llama_env  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results"
TARGET = 0.45
HEADER = (f"{'run':<12}{'split':<12}{'examples':>8}{'wall s':>9}{'examples/min':>14}{'tok/s':>10}"
          f"{'fraction of solo':>18}")


@dataclass
class Run:
    """One evaluation process and what its report says."""

    label: str
    split: str
    examples: int = 0
    wall_s: float = 0.0
    tokens: int = 0
    pid: int = 0

    @property
    def per_minute(self) -> float:
        return 60.0 * self.examples / self.wall_s if self.wall_s else 0.0

    @property
    def tokens_per_s(self) -> float:
        return self.tokens / self.wall_s if self.wall_s else 0.0


@dataclass
class Watch:
    """The machine's shared servers seen while the pair ran: server id -> pids of the users seen on it."""

    users: dict[str, set[int]] = field(default_factory=dict)
    kinds: dict[str, str] = field(default_factory=dict)
    """server id -> what it runs, as its record says"""
    most_at_once: int = 0
    stop: threading.Event = field(default_factory=threading.Event)

    def run(self, model: str) -> None:
        while not self.stop.wait(0.2):
            for record, users in shared_servers():
                if record.model == model:
                    self.users.setdefault(record.id, set()).update(u.pid for u in users)
                    self.kinds[record.id] = f"{record.kind} server, {record.slots} slot{'s' * (record.slots != 1)}"
                    self.most_at_once = max(self.most_at_once, len(users))

    def shared_by(self, pids: set[int]) -> str | None:
        """The server every one of ``pids`` used, if there was one."""
        return next((sid for sid, seen in self.users.items() if pids <= seen), None)


def _start(run: Run, args: argparse.Namespace, out: Path) -> subprocess.Popen[bytes]:
    cmd = [sys.executable, "-m", "masforge", "evaluate", args.seed, "--task", args.task, "--split", run.split,
           "--limit", str(args.limit), "--lm", "local", "--no-cache", "--concurrency", str(args.concurrency),
           "-o", str(out / f"{run.label}.json")]
    with (out / f"{run.label}.log").open("wb") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
    run.pid = proc.pid
    return proc


def _finish(run: Run, proc: subprocess.Popen[bytes], out: Path) -> None:
    if proc.wait() != 0:
        output = (out / f"{run.label}.log").read_text(encoding="utf-8", errors="replace")
        raise SystemExit(f"{run.label}: masforge evaluate failed (exit {proc.returncode}):\n{output[-3000:]}")
    report = json.loads((out / f"{run.label}.json").read_text(encoding="utf-8"))
    run.examples = len(report["examples"])
    run.wall_s = float(report["wall_s"])
    run.tokens = int(report["tokens"])


def _row(run: Run, solo: Run | None) -> str:
    fraction = f"{run.per_minute / solo.per_minute:.2f}" if solo and solo.per_minute else "-"
    return (f"{run.label:<12}{run.split:<12}{run.examples:>8}{run.wall_s:>9.1f}{run.per_minute:>14.2f}"
            f"{run.tokens_per_s:>10.1f}{fraction:>18}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", default="io")
    parser.add_argument("--task", default="humaneval")
    parser.add_argument("--splits", default="validation,test", help="A's split and B's, comma-separated")
    parser.add_argument("--limit", type=int, default=8, help="examples per evaluation")
    parser.add_argument("--concurrency", type=int, default=4, help="examples each evaluation runs at once")
    parser.add_argument("--stub", action="store_true", help="a stub in place of the model: checks the script only")
    parser.add_argument("--stub-latency", type=float, default=1.0, help="seconds a stub request takes")
    parser.add_argument("--out", type=Path, default=RESULTS / "shared_server.txt")
    args = parser.parse_args()
    split_a, split_b = (s.strip() for s in args.splits.split(","))
    model = "qwen"

    with tempfile.TemporaryDirectory(prefix="masforge-bench-shared-") as tmp:
        work = Path(tmp)
        if args.stub:
            os.environ.update(fake_llama_env(work, latency_s=args.stub_latency))  # the children inherit it
        before = [(r, u) for r, u in shared_servers() if r.model == model]
        alone: dict[str, Run] = {}
        for label, split in (("alone A", split_a), ("alone B", split_b)):
            run = alone[label[-1]] = Run(label, split)
            _finish(run, _start(run, args, work), work)
            print(_row(run, None), flush=True)
        watch = Watch()
        watcher = threading.Thread(target=watch.run, args=(model,), daemon=True)
        watcher.start()
        pair = [Run("together A", split_a), Run("together B", split_b)]
        procs = [_start(run, args, work) for run in pair]
        for run, proc in zip(pair, procs, strict=True):
            _finish(run, proc, work)
        watch.stop.set()
        watcher.join()

    shared = watch.shared_by({run.pid for run in pair})
    fractions = [run.per_minute / alone[run.label[-1]].per_minute if alone[run.label[-1]].per_minute else 0.0
                 for run in pair]
    met = shared is not None and all(f >= TARGET for f in fractions)
    lines = [
        f"# bench/shared_server.py  {time.strftime('%Y-%m-%d %H:%M:%S')}  python {platform.python_version()}  "
        f"cpus {os.cpu_count()}  load avg {os.getloadavg()[0]:.1f}",
        f"# {'STUB in place of the model (checks the script, not the speed)' if args.stub else 'embedded model'}: "
        f"{', '.join(sorted(set(watch.kinds.values()))) or 'no server seen'}; seed {args.seed} on {args.task}, "
        f"{args.limit} examples per evaluation, concurrency {args.concurrency}, answer cache off",
        f"# other users of the model's server when the bench began: {sum(len(u) for _, u in before)}",
        "",
        HEADER,
        *(_row(run, None) for run in alone.values()),
        *(_row(run, alone[run.label[-1]]) for run in pair),
        "",
        f"one server for both: {'yes' if shared else 'NO'} ({len(watch.users)} server"
        f"{'s' if len(watch.users) != 1 else ''} seen, at most {watch.most_at_once} users at once)",
        f"target: each keeps at least {TARGET:.0%} of its solo rate: {'met' if met else 'NOT met'} "
        f"(A {fractions[0]:.2f}, B {fractions[1]:.2f})",
    ]
    text = "\n".join(lines) + "\n"
    print(text, end="")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text, encoding="utf-8")


if __name__ == "__main__":
    main()
