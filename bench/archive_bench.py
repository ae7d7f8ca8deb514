"""Archive throughput and query latency at scale.

Writes N random small genomes (seeds, then mutations and crossovers of recent candidates, so lineages are
deep and branchy) with one result each into a temporary archive, then times the queries a search and the CLI
make: list top-10, the Pareto front, lineage, a cold open and a full index rebuild.

    .venv/bin/python bench/archive_bench.py --n 10000
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from masforge.archive.records import ResultRecord  # noqa: E402
from masforge.archive.store import Archive  # noqa: E402
from masforge.genome.schema import Agent, Genome, Topology  # noqa: E402

WORDS = ("solve", "check", "plan", "verify", "answer", "reason", "critique", "refine", "list", "compute", "cite",
         "summarise", "compare", "decide", "explain")
MODULES = ("predict", "chain_of_thought")
TASKS = ("gsm8k", "drop")


def seed_genome(rng: random.Random, i: int) -> Genome:
    n = rng.randint(1, 3)
    agents = [Agent(id=f"a{k}", role=rng.choice(WORDS), module=rng.choice(MODULES),
                    instructions=" ".join(rng.choices(WORDS, k=8)) + f" #{i}") for k in range(n)]
    edges = [("input", "a0")] + [(f"a{k}", f"a{k + 1}") for k in range(n - 1)] + [(f"a{n - 1}", "output")]
    return Genome(name=f"seed-{i}", agents=agents, topology=Topology(edges=edges))


def mutate(rng: random.Random, parent: Genome, i: int) -> Genome:
    child = parent.model_copy(deep=True)
    agent = rng.choice(child.agents)
    what = rng.random()
    if what < 0.4:
        agent.temperature = round(rng.random() * 1.5, 2)
    elif what < 0.7:
        agent.module = rng.choice(MODULES)
    agent.instructions = agent.instructions.rsplit(" #", 1)[0] + f" {rng.choice(WORDS)} #{i}"  # unique id
    child.name = f"{parent.name.split('~')[0]}~m{i}"
    return child


def crossover(rng: random.Random, a: Genome, b: Genome, i: int) -> Genome:
    child = a.model_copy(deep=True)
    donor = rng.choice(b.agents)
    target = rng.choice(child.agents)
    target.instructions = donor.instructions.rsplit(" #", 1)[0] + f" #{i}"
    target.module = donor.module
    child.name = f"{a.name.split('~')[0]}~x{i}"
    return child


def timed(fn, repeat: int = 5) -> tuple[float, object]:
    best, value = float("inf"), None
    for _ in range(repeat):
        start = time.perf_counter()
        value = fn()
        best = min(best, time.perf_counter() - start)
    return best, value


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=10000, help="Candidates to write (default 10000).")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--keep", action="store_true", help="Keep the temporary archive and print its path.")
    parser.add_argument("--fsck", action="store_true", help="Run `git fsck` at the end (slow at large N).")
    args = parser.parse_args()

    rng = random.Random(args.seed)
    root = Path(tempfile.mkdtemp(prefix="masforge-archive-bench-"))
    path = root / "archive"
    archive = Archive.open(path, create=True)
    genomes: list[Genome] = []
    gens: list[int] = []
    add_ms: list[float] = []
    result_ms: list[float] = []
    n_seeds = max(1, min(20, args.n // 50))
    start_all = time.perf_counter()
    for i in range(args.n):
        recent = range(max(0, len(genomes) - 200), len(genomes))
        if i < n_seeds:
            genome, parents, op = seed_genome(rng, i), [], "seed"
        elif rng.random() < 0.7:
            p = rng.choice(recent)
            genome, parents, op = mutate(rng, genomes[p], i), [p], "mutate"
        else:
            p, q = rng.sample(recent, 2) if len(recent) > 1 else (recent[0], recent[0])
            genome, parents, op = crossover(rng, genomes[p], genomes[q], i), [p, q], "crossover"
        gen = 1 + max((gens[p] for p in parents), default=-1)
        t0 = time.perf_counter()
        rec = archive.add(genome, parents=[genomes[p].id for p in dict.fromkeys(parents)],
                          strategy="evolutionary" if parents else "seed", operator=op,
                          rationale=f"bench {op}", generation=gen, run="bench")
        t1 = time.perf_counter()
        score = min(1.0, max(0.0, rng.gauss(0.3 + 0.5 * min(gen, 50) / 50, 0.1)))
        archive.add_result(rec.genome_id, ResultRecord(
            task=rng.choice(TASKS), split="dev", lm_key="openai/qwen2.5-0.5b|t=0.0", score=score,
            ci_low=max(0.0, score - 0.1), ci_high=min(1.0, score + 0.1), n=50,
            dollars=round(rng.uniform(0.001, 0.05) * len(genome.agents), 5), tokens=rng.randint(1000, 20000),
            llm_calls=50 * len(genome.agents), latency_s=rng.uniform(0.5, 5.0)))
        t2 = time.perf_counter()
        add_ms.append((t1 - t0) * 1000)
        result_ms.append((t2 - t1) * 1000)
        genomes.append(genome)
        gens.append(gen)
        if (i + 1) % 1000 == 0:
            print(f"  {i + 1:>6} candidates, last 1000: add {statistics.mean(add_ms[-1000:]):.1f} ms, "
                  f"result {statistics.mean(result_ms[-1000:]):.1f} ms", flush=True)
    total = time.perf_counter() - start_all
    writes = len(add_ms) + len(result_ms)

    stats = archive.stats()
    top_s, top = timed(lambda: archive.list(task="gsm8k", limit=10))
    front_s, front = timed(lambda: archive.front("gsm8k"))
    deepest = max(range(len(genomes)), key=lambda k: gens[k])
    lin_deep_s, lin_deep = timed(lambda: archive.lineage(genomes[deepest].id))
    lin_seed_s, lin_seed = timed(lambda: archive.lineage(genomes[0].id), repeat=2)
    get_s, _ = timed(lambda: archive.get(genomes[len(genomes) // 2].id[:8]))
    res_s, _ = timed(lambda: archive.get_result(genomes[-1].id, "gsm8k", "dev", "openai/qwen2.5-0.5b|t=0.0"))
    archive.close()
    open_s, reopened = timed(lambda: Archive.open(path), repeat=1)
    assert isinstance(reopened, Archive)
    rebuild_s, count = timed(reopened.rebuild_index, repeat=1)
    reopened.close()
    objects = subprocess.run(["git", "count-objects", "-v"], cwd=path, capture_output=True, text=True).stdout
    obj = dict(line.split(": ") for line in objects.splitlines())

    print(f"archive benchmark: N={args.n} candidates ({n_seeds} seeds, then 70% mutation / 30% crossover), "
          "one result each")
    print(f"writes:           {writes} ({len(add_ms)} add + {len(result_ms)} add_result) in {total:.1f} s")
    print(f"commits/s:        {writes / total:.1f} candidate commits/s (each also writes one journal commit on main)")
    print(f"mean ms/write:    add {statistics.mean(add_ms):.1f} ms (p95 {sorted(add_ms)[int(0.95 * len(add_ms))]:.1f}),"
          f" add_result {statistics.mean(result_ms):.1f} ms (p95 {sorted(result_ms)[int(0.95 * len(result_ms))]:.1f})")
    print(f"first/last 1000:  add {statistics.mean(add_ms[:1000]):.1f} -> {statistics.mean(add_ms[-1000:]):.1f} ms,"
          f" add_result {statistics.mean(result_ms[:1000]):.1f} -> {statistics.mean(result_ms[-1000:]):.1f} ms")
    print(f"index size:       {stats['index_bytes'] / 1e6:.2f} MB ({stats['candidates']} candidates, "
          f"{stats['results']} results, {stats['events']} events)")
    print(f"git objects:      {obj.get('count')} loose ({int(obj.get('size', 0)) / 1000:.1f} MB), "
          f"{obj.get('in-pack')} packed")
    print(f"list top-10:      {top_s * 1000:.1f} ms ({len(top)} rows)")  # type: ignore[arg-type]
    print(f"front:            {front_s * 1000:.1f} ms ({len(front)} candidates on the front)")  # type: ignore[arg-type]
    print(f"lineage deepest:  {lin_deep_s * 1000:.1f} ms (generation {gens[deepest]}: "
          f"{len(lin_deep.ancestors)} ancestors, {len(lin_deep.descendants)} descendants)")  # type: ignore[union-attr]
    print(f"lineage seed:     {lin_seed_s * 1000:.1f} ms ({len(lin_seed.ancestors)} ancestors, "
          f"{len(lin_seed.descendants)} descendants)")  # type: ignore[union-attr]
    print(f"get by prefix:    {get_s * 1000:.2f} ms; get_result: {res_s * 1000:.2f} ms")
    print(f"cold open:        {open_s * 1000:.0f} ms (includes the index integrity check)")
    print(f"rebuild index:    {rebuild_s:.1f} s for {count} candidates (from git history)")
    if args.fsck:
        t0 = time.perf_counter()
        fsck = subprocess.run(["git", "fsck", "--strict", "--no-dangling"], cwd=path, capture_output=True, text=True)
        print(f"git fsck:         rc={fsck.returncode} in {time.perf_counter() - t0:.1f} s"
              f"{' (clean)' if fsck.returncode == 0 and not fsck.stdout.strip() else ': ' + fsck.stdout[:200]}")
    if args.keep:
        print(f"archive kept at {path}")
    else:
        shutil.rmtree(root)


if __name__ == "__main__":
    main()
