"""The hostile-program suite at a larger size: every attack of `masforge.testing.hostile`, as a code genome and as a
code answer, ``--repeats`` times in each sandbox mode this machine has (bubblewrap, unshare, plain process),
plus ``--kills`` SIGKILLs of ``masforge evaluate`` while two sandboxes run. Each run is checked from the host
(files outside the run directory, connections to a listener, a planted key in anything returned or printed,
sandbox processes alive afterwards, parent CPU burnt by tool calls).

    LITELLM_LOCAL_MODEL_COST_MAP=True .venv/bin/python bench/attacks.py [--repeats 5] [--kills 5] [--write]

Prints the tables (markdown); ``--write`` puts them into the sandbox section of bench/results/reliability.md.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import tempfile
import time
from collections import Counter, defaultdict
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from masforge.runtime.isolation import MODES, isolation  # noqa: E402
from masforge.runtime.sandbox import run_python  # noqa: E402
from masforge.testing.hostile import ATTACKS, Outcome, forms_of, kill_masforge_mid_run, run_attack  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results"
from common import write_section  # noqa: E402

BEGIN, END = "<!-- sandbox:begin (bench/attacks.py) -->", "<!-- sandbox:end -->"


def available_modes() -> list[str]:
    modes = []
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
    for mode in modes:
        os.environ["MASFORGE_SANDBOX"] = mode
        missing[mode] = list(isolation().missing)
        private[mode] = isolation().private_fs
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
    print(file=sys.stderr)
    os.environ.pop("MASFORGE_SANDBOX", None)

    expected = {a.name: a.kinds for a in ATTACKS}
    out = ["## Sandbox: attacks and escapes (`bench/attacks.py`)", "",
           f"Measured {time.strftime('%Y-%m-%d %H:%M')} on {os.cpu_count()} CPUs (load avg "
           f"{os.getloadavg()[0]:.1f}), python {platform.python_version()}, {args.repeats} runs of each of "
           f"{len(ATTACKS)} attacks per form and mode, {args.kills} SIGKILLs of `masforge evaluate` per mode; "
           f"{time.time() - started:.0f} s in all. Target: 0 escapes.", ""]
    rows = []
    for mode in modes:
        got = outcomes[mode]
        esc = [o for o in got if o.escapes]
        wrong_kind = [o for o in got if o.kind not in expected[o.attack]]
        # without a private file system, writes to world-writable host directories are the declared gap
        shared = ("file /tmp/", "file /var/tmp/", "file /dev/shm/")
        declared = [o for o in esc if not private[mode] and all(e.startswith(shared) for e in o.escapes)]
        killed = kills[mode]
        rows.append([f"`{mode}`", len(got), sum(not o.escapes for o in got), len(esc),
                     f"{len(declared)} of {len(esc)}" if esc else "-", len(wrong_kind),
                     sum(o.benign_ok for o in got), f"{len(killed)} / {sum(len(k.survivors) for k in killed)}",
                     f"{latency[mode]:.0f}"])
    out += [table(["mode", "attacks run", "contained", "escapes", "of which a declared missing layer",
                   "unexpected kind", "benign after it scored 1", "SIGKILLs / survivors", "empty run ms"], rows), ""]
    for mode in modes:
        if missing[mode]:
            out.append(f"- `{mode}` says at start-up that it is missing: {'; '.join(missing[mode])}.")
    if any(not private[m] for m in modes):
        out += ["", "Without bubblewrap's private file system, `os.mkfifo` and `os.open(..., dir_fd=...)` (which "
                "Python does not audit) still create entries in world-writable host directories: those are the "
                "escapes counted as a declared missing layer above. With bubblewrap they land in the run's "
                "private `/tmp` or fail on the read-only view."]
    out += ["", f"Per attack in `{modes[0]}` mode (the default here): the failure kinds masforge reported "
            "(genome form / answer form), the escapes and the median seconds per run.", ""]
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
        out += ["Escapes seen (host paths shortened to the directory):", ""]
        seen = Counter((m, a, e.rsplit("masforge-escape-", 1)[0]) for m, a, e in details)
        out += [f"- `{m}` / `{a}`: {e}... ({n} distinct)" for (m, a, e), n in sorted(seen.items())]
        out.append("")
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
