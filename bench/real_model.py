"""The cot seed on the embedded local model (llama.cpp, Qwen2.5-Coder-0.5B): seconds and tokens per HumanEval
example, against the raw llama.cpp throughput measured in the same run with direct litellm calls.

Raw throughput: prompt processing (a fresh ~600-token prompt, max_tokens=1) and generation (a short prompt,
128 new tokens), best of two, measured before and after the evaluation. Per example the LM calls are counted
at the client (so failed examples count too): their tokens, the seconds spent waiting for the server, and the
rest of the example's time (dspy + masforge). "raw-rate s" is what the tokens would take at the raw rates
(llama.cpp reuses the KV cache of a shared prompt prefix, so real prompt processing can cost less).

    LITELLM_LOCAL_MODEL_COST_MAP=True .venv/bin/python bench/real_model.py [--examples 3] [--max-tokens 512]

Takes a few minutes on two cores (more on a busy machine: llama.cpp's speed follows the free CPU).
Writes bench/results/real_model.txt.
"""

from __future__ import annotations

import argparse
import os
import platform
import random
import time
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from masforge import local_model  # noqa: E402
from masforge.evaluators.runner import Evaluator  # noqa: E402
from masforge.evaluators.tasks import get_task  # noqa: E402
from masforge.lm.client import LMClient, LMConfig  # noqa: E402
from masforge.seeds import load_seed  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results"
_WORDS = ("function list string value return loop index count sort filter python integer result test case "
          "number array element key dictionary input output check prime even odd sum product").split()


def _completion(ep, prompt: str, max_tokens: int) -> tuple[float, int, int]:
    import litellm

    t0 = time.perf_counter()
    resp = litellm.completion(messages=[{"role": "user", "content": prompt}], max_tokens=max_tokens,
                              temperature=0.7, num_retries=0, **ep.litellm_kwargs())
    return time.perf_counter() - t0, int(resp.usage.prompt_tokens), int(resp.usage.completion_tokens)


def raw_throughput(ep, rng: random.Random) -> dict:
    """Prompt tokens/s and generation tokens/s of the server, best of two fresh requests each."""
    pp_rates, gen_rates = [], []
    for _ in range(2):
        prompt = " ".join(rng.choice(_WORDS) for _ in range(600))  # fresh: no KV-cache prefix reuse
        secs, pt, _ = _completion(ep, f"{rng.random()} Summarise: {prompt}", 1)
        pp_rates.append(pt / secs)
    pp = max(pp_rates)
    for _ in range(2):
        secs, pt, ct = _completion(ep, f"{rng.random()}: write a long Python tutorial about lists.", 128)
        gen_rates.append(ct / max(secs - pt / pp, 1e-6))
    return {"prompt_tps": pp, "gen_tps": max(gen_rates)}


class CallMeter:
    """Wraps ``client.complete`` to sum LM calls, tokens and server seconds (examples run one at a time)."""

    def __init__(self, client: LMClient) -> None:
        self.reset()
        self._complete = client.complete
        client.complete = self  # type: ignore[method-assign]

    def reset(self) -> None:
        self.calls, self.prompt_tokens, self.completion_tokens, self.seconds = 0, 0, 0, 0.0

    def __call__(self, *args, **kwargs):
        start = time.perf_counter()
        c = self._complete(*args, **kwargs)
        self.calls += 1
        self.prompt_tokens += c.prompt_tokens
        self.completion_tokens += c.completion_tokens
        self.seconds += time.perf_counter() - start
        return c


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--examples", type=int, default=3)
    parser.add_argument("--max-tokens", type=int, default=512, help="the local LM's default")
    parser.add_argument("--out", default=str(RESULTS / "real_model.txt"))
    args = parser.parse_args(argv)
    rng = random.Random(time.time_ns())
    load_start = os.getloadavg()[0]
    rows: list[dict] = []

    try:
        t0 = time.perf_counter()
        ep = local_model.ensure_local_server("qwen")
        startup = time.perf_counter() - t0
        _completion(ep, "Say hi.", 4)  # warm-up (weights paged in, litellm imported)
        before = raw_throughput(ep, rng)
        print(f"raw before: {before}", flush=True)

        cfg = LMConfig(model="local", max_tokens=args.max_tokens, max_concurrency=1)
        client = LMClient({"worker": cfg}, cache=False)
        meter = CallMeter(client)
        # No per-example timeout to speak of: on a busy machine llama.cpp can be 10x slower than usual.
        ev = Evaluator(get_task("humaneval"), client, limit=args.examples, concurrency=1, example_timeout_s=3600)

        def progress(done: int, total: int, rep) -> None:
            e = rep.examples[-1]
            rows.append({"id": e.example_id, "calls": meter.calls, "pt": meter.prompt_tokens,
                         "ct": meter.completion_tokens, "lm_s": meter.seconds, "s": e.latency_s, "score": e.score,
                         "kind": e.error_kind})
            meter.reset()
            print(f"example {done}/{total}: {rows[-1]}", flush=True)

        t0 = time.perf_counter()
        report = ev.evaluate(load_seed("cot"), progress=progress)
        wall = time.perf_counter() - t0

        after = raw_throughput(ep, rng)
        print(f"raw after: {after}", flush=True)
    finally:
        local_model.shutdown_local_servers()
    pp = (before["prompt_tps"] + after["prompt_tps"]) / 2
    gen = (before["gen_tps"] + after["gen_tps"]) / 2

    lines = [f"# bench/real_model.py  {time.strftime('%Y-%m-%d %H:%M:%S')}  python {platform.python_version()}  "
             f"cpus {os.cpu_count()}  llama-cpp-python {local_model.llama_cpp_version()}  "
             f"threads {local_model.default_threads()}  load avg {load_start:.1f} -> {os.getloadavg()[0]:.1f}",
             f"# model {ep.model} (server start {startup:.1f} s); cot seed on humaneval validation, "
             f"{args.examples} examples, max_tokens {args.max_tokens}, temperature {cfg.temperature}, cache off, "
             "concurrency 1",
             "",
             "## raw llama.cpp throughput (direct litellm.completion to the same server)",
             f"{'when':<8} {'prompt tok/s':>12} {'gen tok/s':>10}",
             f"{'before':<8} {before['prompt_tps']:>12.1f} {before['gen_tps']:>10.1f}",
             f"{'after':<8} {after['prompt_tps']:>12.1f} {after['gen_tps']:>10.1f}",
             "",
             "## cot seed per example (LM calls metered at the client)",
             f"{'example':<15} {'calls':>5} {'prompt tok':>10} {'gen tok':>7} {'seconds':>8} {'in LM s':>8} "
             f"{'other s':>7} {'gen tok/s':>9} {'raw-rate s':>10} {'score':>5} {'failure':<8}"]
    for r in rows:
        raw_s = r["pt"] / pp + r["ct"] / gen
        lines.append(f"{r['id']:<15} {r['calls']:>5} {r['pt']:>10} {r['ct']:>7} {r['s']:>8.2f} {r['lm_s']:>8.2f} "
                     f"{r['s'] - r['lm_s']:>7.2f} {r['ct'] / r['lm_s'] if r['lm_s'] else 0:>9.1f} {raw_s:>10.2f} "
                     f"{r['score']:>5.2f} {r['kind'] or '-':<8}")
    n = max(len(rows), 1)
    tot = {k: sum(r[k] for r in rows) for k in ("calls", "pt", "ct", "s", "lm_s")}
    lines += [f"{'mean':<15} {tot['calls'] / n:>5.1f} {tot['pt'] / n:>10.0f} {tot['ct'] / n:>7.0f} "
              f"{tot['s'] / n:>8.2f} {tot['lm_s'] / n:>8.2f} {(tot['s'] - tot['lm_s']) / n:>7.2f} "
              f"{tot['ct'] / tot['lm_s'] if tot['lm_s'] else 0:>9.1f} {(tot['pt'] / pp + tot['ct'] / gen) / n:>10.2f}",
              "",
              f"evaluation wall {wall:.1f} s for {report.n} examples ({wall / n:.1f} s/example incl. sandboxed "
              f"scoring); score {report.score:.3f} CI [{report.ci[0]:.2f}, {report.ci[1]:.2f}]; "
              f"failures {report.failures or '-'}",
              f"time outside the LM server (dspy + masforge + scoring excluded): {(tot['s'] - tot['lm_s']) / n:.3f} "
              f"s/example = {(tot['s'] - tot['lm_s']) / tot['s'] if tot['s'] else 0:.2%} of the example time"]
    print("\n".join(lines))
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
