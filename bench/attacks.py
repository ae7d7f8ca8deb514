"""The hostile-program suite at a larger size: every attack of `masforge.testing.hostile`, as a code genome and as a
code answer, ``--repeats`` times in the default mode and in each mode this machine has (bubblewrap, unshare, plain
process; chosen with ``MASFORGE_SANDBOX``, i.e. accepted by the user), plus ``--kills`` SIGKILLs of ``masforge
evaluate`` while two sandboxes run and while one fills its run directory. Each run is checked from the host (files
outside the run directory, connections to a TCP or Unix-socket listener, a planted key or run folder read back,
sandbox processes alive afterwards, parent CPU burnt by tool calls, a pass or an infrastructure failure claimed).
Then the forged passes of `masforge.testing.forged_pass` (reading the hidden tests, shadowing the prompt's helpers)
answer all of HumanEval's test problems ``--repeats`` times in each mode, beside a control (the wrong answer without
the forgery) and the canonical solutions (honest code must still pass).

    LITELLM_LOCAL_MODEL_COST_MAP=True .venv/bin/python bench/attacks.py [--repeats 5] [--kills 5] [--write]

Prints the tables (markdown); ``--write`` puts them into the section of bench/results/reliability.md for where this
checkout is: under the system temp folder, or outside it (run it in one clone of each kind).
"""

from __future__ import annotations

import argparse
import os
import platform
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from dataclasses import dataclass
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from masforge.evaluators.tasks import get_task  # noqa: E402
from masforge.sandbox.isolation import MODES, isolation  # noqa: E402
from masforge.sandbox.runner import run_python  # noqa: E402
from masforge.testing.forged_pass import FORGED_PASSES, ForgedPass, control_answer, forged_scores  # noqa: E402
from masforge.testing.hostile import (  # noqa: E402
    ATTACKS,
    Outcome,
    forms_of,
    kill_masforge_mid_run,
    leftover_after_kill,
    run_attack,
)

RESULTS = Path(__file__).resolve().parent / "results"
from common import write_section  # noqa: E402

CHECKOUT = Path(__file__).resolve().parent.parent
IN_TEMP = CHECKOUT.is_relative_to(Path(tempfile.gettempdir()).resolve())
WHERE = "a clone under the system temp folder" if IN_TEMP else "a clone outside the system temp folder"
SLUG = "in-temp" if IN_TEMP else "outside-temp"
SHORTEN = re.compile(r"masforge-(escape|service|run|keys)-[A-Za-z0-9_]+\S*")
BEGIN, END = f"<!-- sandbox-{SLUG}:begin (bench/attacks.py) -->", f"<!-- sandbox-{SLUG}:end -->"


def default_mode() -> str:
    """The mode masforge picks with ``MASFORGE_SANDBOX`` unset, asked of a fresh process (as a user gets it)."""
    env = {k: v for k, v in os.environ.items() if k != "MASFORGE_SANDBOX"}
    out = subprocess.run([sys.executable, "-c", "from masforge.sandbox.isolation import isolation; "
                          "print(isolation().mode)"], capture_output=True, text=True, env=env, check=True)
    return out.stdout.strip().splitlines()[-1]


def available_modes() -> list[str]:
    """``auto`` (the default) first, then every mode this machine has, each as if the user had chosen it."""
    modes = ["auto"]
    for mode in MODES:
        os.environ["MASFORGE_SANDBOX"] = mode
        try:
            isolation()
        except Exception:
            continue
        modes.append(mode)
    return modes


def start_latency(n: int = 20) -> float:
    """Median wall time of an empty sandboxed run, in ms."""
    run_python("pass")
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        run_python("pass")
        times.append(time.perf_counter() - t0)
    return 1000 * statistics.median(times)


@dataclass
class ForgedRun:
    """One answer given to every HumanEval test problem in one mode."""

    mode: str
    answer: str
    score: float
    passed: list[str]
    unscored: int
    seconds: float


CONTROL = ForgedPass("control", "the shadowing answer's wrong entry point alone", control_answer)


def forged_passes(mode: str, repeats: int, with_references: bool) -> list[ForgedRun]:
    """Each forged pass over HumanEval's test problems ``repeats`` times (and, with ``with_references``, the control
    and the canonical solutions, which show that the judge still tells right from wrong)."""
    problems = get_task("humaneval").split("test")
    solutions = {e.meta["prompt"]: str(e.target) for e in problems}  # by prompt: two problems share an entry name
    answers = list(FORGED_PASSES)
    if with_references:
        answers += [CONTROL, ForgedPass("canonical", "the reference solution", lambda p, _e: solutions[p])]
    runs = []
    for _ in range(repeats):
        for answer in answers:
            t0 = time.monotonic()
            results = forged_scores(answer.answer, problems)
            runs.append(ForgedRun(mode, answer.name, statistics.mean(r.score for r in results),
                                  [r.example_id for r in results if r.score > 0], sum(r.unscored for r in results),
                                  time.monotonic() - t0))
            print("h", end="", flush=True, file=sys.stderr)
    return runs


def _forged_row(mode: str, chosen: str, got: list[ForgedRun], what: str) -> list[object]:
    low, high = min(r.score for r in got), max(r.score for r in got)
    passed = sorted({p for r in got for p in r.passed}, key=lambda p: int(p.rsplit("/", 1)[-1]))
    shown = ", ".join(passed) if len(passed) <= 6 else f"{len(passed)} problems"
    return [f"`{mode}`" + (f" (= `{chosen}`)" if mode == "auto" else ""), f"`{got[0].answer}`", what, len(got),
            f"{low:.3f}" + (f"-{high:.3f}" if high > low else ""), shown or "none", sum(r.unscored for r in got),
            f"{statistics.median(r.seconds for r in got):.0f}"]


def forged_table(runs: list[ForgedRun], modes: list[str], chosen: str) -> list[str]:
    what = {a.name: a.what for a in (*FORGED_PASSES, CONTROL)} | {"canonical": "the reference solution"}
    rows = []
    for mode in modes:
        for name in dict.fromkeys(r.answer for r in runs if r.mode == mode):
            rows.append(_forged_row(mode, chosen, [r for r in runs if r.mode == mode and r.answer == name], what[name]))
    problems = len(get_task("humaneval").split("test"))
    return [f"Forged passes on HumanEval's {problems} test problems (issue 37), through the real evaluation path (a "
            "code genome asks a fake LM, which answers with the fixed text; the task's own metric). On main at 60c64c2 "
            "reading the tests scored 0.910 (validation 0.969) and shadowing the helpers 0.030 (humaneval/32, 38, "
            "50). Target: 0.000 for both in every mode, the canonical solutions 1.000.", "",
            table(["mode", "answer", "what it does", "runs", "score (min-max over runs)", "problems passed in any run",
                   "unscored", "s per run"], rows), ""]


def table(header: list[str], rows: list[list[object]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5, help="runs of every attack and form per mode")
    parser.add_argument("--kills", type=int, default=5, help="SIGKILLs of masforge evaluate per mode")
    parser.add_argument("--write", action="store_true", help="update bench/results/reliability.md")
    args = parser.parse_args(argv)

    started = time.time()
    modes = available_modes()
    outcomes: dict[str, list[Outcome]] = defaultdict(list)
    latency: dict[str, float] = {}
    missing: dict[str, list[str]] = {}
    private: dict[str, bool] = {}
    kills: dict[str, list[object]] = defaultdict(list)
    leftovers: dict[str, list[object]] = defaultdict(list)
    forged: list[ForgedRun] = []
    chosen = default_mode()
    for mode in modes:
        os.environ["MASFORGE_SANDBOX"] = mode
        missing[mode] = list(isolation().missing)
        private[mode] = isolation().private_fs
        if not isolation().private_fs and not isolation().accepted:
            continue  # the default refuses generated code here (no bubblewrap): nothing runs, nothing escapes
        latency[mode] = start_latency()
        for _ in range(args.repeats):
            for attack in ATTACKS:
                for form in forms_of(attack):
                    outcomes[mode].append(run_attack(attack, form))
                    print(".", end="", flush=True, file=sys.stderr)
        with tempfile.TemporaryDirectory() as work:
            for _ in range(args.kills):
                kills[mode].append(kill_masforge_mid_run(work, env={"MASFORGE_SANDBOX": mode}))
                print("k", end="", flush=True, file=sys.stderr)
            for _ in range(max(1, args.kills // 2)):
                leftovers[mode].append(leftover_after_kill(work, env={"MASFORGE_SANDBOX": mode}))
                print("d", end="", flush=True, file=sys.stderr)
        forged += forged_passes(mode, args.repeats, with_references=mode == "auto")
    print(file=sys.stderr)
    os.environ.pop("MASFORGE_SANDBOX", None)

    expected = {a.name: a.kinds for a in ATTACKS}
    needs_fs = {a.name for a in ATTACKS if a.needs_private_fs}
    out = [f"## Sandbox: attacks and escapes, {WHERE} (`bench/attacks.py`)", "",
           f"Measured {time.strftime('%Y-%m-%d %H:%M')} in {WHERE} (its own virtual environment inside it) on "
           f"{os.cpu_count()} CPUs (load avg {os.getloadavg()[0]:.1f}), python {platform.python_version()}, "
           f"{args.repeats} runs of each of {len(ATTACKS)} attacks per form and mode, {args.kills} SIGKILLs of "
           f"`masforge evaluate` while two sandboxes run and {max(1, args.kills // 2)} while one fills its run "
           f"directory with 48 MB, per mode; {time.time() - started:.0f} s in all. `auto` is the default (here it "
           f"is `{chosen}`); the other modes are as a user gets them by choosing one with `MASFORGE_SANDBOX`, i.e. "
           "accepting less. Target: 0 escapes in the default mode.", ""]
    rows = []
    for mode in [m for m in modes if m in latency]:
        got = outcomes[mode]
        esc = [o for o in got if o.escapes]
        wrong_kind = [o for o in got if o.kind not in expected[o.attack]]
        # without a private file system, what gets past the audit hook reaches the host's files: the declared gap
        declared = [o for o in esc if not private[mode] and o.attack in needs_fs]
        killed, filled = kills[mode], leftovers[mode]
        left = f"{sum(f.written for f in filled) / 2**20:.0f} / {sum(f.after_next_start for f in filled) / 2**20:.0f}"
        rows.append([f"`{mode}`" + (f" (= `{chosen}`)" if mode == "auto" else ""), len(got),
                     sum(not o.escapes for o in got), len(esc), f"{len(declared)} of {len(esc)}" if esc else "-",
                     len(wrong_kind), sum(o.benign_ok for o in got),
                     f"{len(killed)} / {sum(len(k.survivors) for k in killed)}", left, f"{latency[mode]:.0f}"])
    out += [table(["mode", "attacks run", "contained", "escapes", "of which a declared missing layer",
                   "unexpected kind", "benign after it scored 1", "SIGKILLs / survivors",
                   "MB left in the host's temp folder at the kill / after the next start", "empty run ms"], rows), ""]
    for mode in modes:
        if missing[mode]:
            out.append(f"- `{mode}` says at start-up that it is missing: {'; '.join(missing[mode])}.")
    if any(not private[m] for m in modes):
        out += ["", "Without bubblewrap's private file system, what Python does not audit (`os.mkfifo`, "
                "`os.open(..., dir_fd=...)`, reading files, native code loaded through cffi's backend) reaches the "
                "host: entries in world-writable folders, the run's ledger and archive, a Unix-socket service. "
                "Those are the escapes counted as a declared missing layer above, in modes the user chose; by "
                "default such a machine refuses to run generated code and says how to get bubblewrap. With "
                "bubblewrap they land in the run's private `/tmp`, fail on the read-only view or find nothing."]
    out += ["", "Per attack in the default mode: the failure kinds masforge reported (genome form / answer form), the "
            "escapes and the median seconds per run.", ""]
    rows = []
    best = outcomes[modes[0]]
    for attack in ATTACKS:
        cells = [f"`{attack.name}`", attack.what]
        for form in ("genome", "answer"):
            runs = [o for o in best if o.attack == attack.name and o.form == form]
            kinds = Counter(o.kind for o in runs)
            cells.append(", ".join(f"{k} x{n}" for k, n in kinds.items()) if runs else "n/a")
        runs = [o for o in best if o.attack == attack.name]
        cells += [sum(bool(o.escapes) for o in runs), f"{statistics.median(o.seconds for o in runs):.2f}"]
        rows.append(cells)
    out += [table(["attack", "what it does", "genome form", "answer form", "escapes", "median s"], rows), ""]
    details = sorted({(mode, o.attack, e) for mode in modes for o in outcomes[mode] for e in o.escapes})
    if details:
        out += ["Escapes seen (the random part of each planted name shortened to ...):", ""]
        seen = Counter((m, a, SHORTEN.sub(r"masforge-\1-...", e)) for m, a, e in details)
        out += [f"- `{m}` / `{a}`: {e} ({n} distinct)" for (m, a, e), n in sorted(seen.items())]
        out.append("")
    out += forged_table(forged, [m for m in modes if m in latency], chosen)
    calc = [o for o in best if o.attack == "calculator-bomb"]
    out += [f"Calculator bombs (`((9**99)**999)**99` x7 and four more via `tool()` from a code genome): refused in "
            f"{statistics.median(o.seconds for o in calc):.2f} s per candidate including the sandbox start "
            "(issue 11 measured 68 s of parent CPU for the seven before the bound)."] if calc else []
    text = "\n".join(out).rstrip() + "\n"
    print(text)
    if args.write:
        path = RESULTS / "reliability.md"
        write_section(path, BEGIN, END, text)
        print(f"written to {path}", file=sys.stderr)


if __name__ == "__main__":
    main()
