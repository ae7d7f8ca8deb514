"""Aggregate generation throughput of the embedded model under concurrent requests.

Search cost on the embedded model is dominated by the local server, so this measures what concurrent streams
buy: generated tokens per second summed over 1, 2 and 4 concurrent request streams, for the server masforge
starts today (llama-cpp-python, one server using every core: it answers one request at a time) and for one
single-thread server per core with the streams spread over them; with ``--llama-server BIN``, also llama.cpp's
own server (built from the llama.cpp source llama-cpp-python vendors) with 4 parallel slots, which decodes
concurrent requests in one batch. Each request is a fixed prompt answered at
temperature 0 with ``max_tokens`` generated tokens at most; prompt processing is included (as in a search).

    LITELLM_LOCAL_MODEL_COST_MAP=True .venv/bin/python bench/throughput.py [--requests 2] [--max-tokens 160]
        [--llama-server vendor/llama.cpp/build/bin/llama-server]

Appends a section to bench/results/real_model.txt (``--write``). Run it on a quiet machine: anything else on the
cores is measured too.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import threading
import time
import urllib.request
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path

from common import RESULTS, write_section

from masforge.local_model import LocalServer, default_threads, llama_cpp_version, model_path
from masforge.ports import free_port

BEGIN, END = "<!-- throughput:begin (bench/throughput.py) -->", "<!-- throughput:end -->"


def ask(api_base: str, model: str, i: int, max_tokens: int) -> int:
    """One chat completion; its generated token count."""
    body = {"model": model, "temperature": 0.0, "max_tokens": max_tokens,
            "messages": [{"role": "user", "content": f"Write Python tutorial number {i} on sorting algorithms, "
                                                     "with code for each algorithm."}]}
    req = urllib.request.Request(f"{api_base}/chat/completions", json.dumps(body).encode(),
                                 {"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=900) as reply:
        return int(json.loads(reply.read())["usage"]["completion_tokens"])


@dataclass
class Native:
    """A running llama.cpp server: what :func:`aggregate` needs of a server."""

    api_base: str
    alias: str = "qwen"


@contextmanager
def native_server(binary: str, slots: int, threads: int) -> Iterator[Native]:
    """llama.cpp's own server on a free loopback port with ``slots`` parallel slots (continuous batching)."""
    port = free_port()
    cmd = [binary, "-m", str(model_path()), "--host", "127.0.0.1", "--port", str(port), "-t", str(threads),
           "-tb", str(threads), "-np", str(slots), "-c", str(4096 * slots), "--no-webui"]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        base = f"http://127.0.0.1:{port}"
        for _ in range(600):
            try:
                with urllib.request.urlopen(f"{base}/health", timeout=1) as r:
                    if r.status == 200:
                        break
            except OSError:
                time.sleep(0.2)
        yield Native(f"{base}/v1")
    finally:
        proc.terminate()
        proc.wait(10)


def aggregate(servers: list[LocalServer] | list[Native], streams: int, requests: int, max_tokens: int) -> float:
    """Generated tokens per second over ``streams`` concurrent streams of ``requests`` requests each, stream k
    sending to server k mod len(servers)."""
    counts: list[int] = []
    lock = threading.Lock()

    def stream(k: int) -> None:
        srv = servers[k % len(servers)]
        for j in range(requests):
            n = ask(srv.api_base, srv.alias, 100 * k + j, max_tokens)
            with lock:
                counts.append(n)

    threads = [threading.Thread(target=stream, args=(k,)) for k in range(streams)]
    start = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return sum(counts) / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=2, help="requests per stream")
    parser.add_argument("--max-tokens", type=int, default=160)
    parser.add_argument("--write", action="store_true", help="update bench/results/real_model.txt")
    parser.add_argument("--llama-server", help="a llama.cpp llama-server binary: measure it with 4 slots too")
    args = parser.parse_args()
    cores = default_threads()
    layouts = {f"1 server x {cores} threads (masforge today)": [cores],
               f"{cores} servers x 1 thread": [1] * cores} if cores > 1 else {"1 server x 1 thread": [1]}
    load0 = os.getloadavg()[0]
    rows: dict[str, dict[int, float]] = {}
    for label, threads in layouts.items():
        with ExitStack() as stack:
            servers = [stack.enter_context(LocalServer(n_threads=n)) for n in threads]
            for srv in servers:
                ask(srv.api_base, srv.alias, 0, 8)  # warm: the first request loads the weights into the page cache
            rows[label] = {s: aggregate(servers, s, args.requests, args.max_tokens) for s in (1, 2, 4)}
            print(label, {s: round(v, 1) for s, v in rows[label].items()}, flush=True)
    if args.llama_server:
        label = f"llama.cpp server x {cores} threads, 4 slots"
        with native_server(str(Path(args.llama_server)), 4, cores) as srv:
            ask(srv.api_base, srv.alias, 0, 8)
            rows[label] = {s: aggregate([srv], s, args.requests, args.max_tokens) for s in (1, 2, 4)}
        print(label, {s: round(v, 1) for s, v in rows[label].items()}, flush=True)
    single = max(by[1] for by in rows.values())  # conservative: the fastest single stream of any layout
    lines = [f"# bench/throughput.py  {time.strftime('%Y-%m-%d %H:%M:%S')}  python {platform.python_version()}  "
             f"cpus {cores}  llama-cpp-python {llama_cpp_version()}  load avg {load0:.1f} -> {os.getloadavg()[0]:.1f}",
             f"# aggregate generated tokens/s over concurrent streams ({args.requests} requests each, at most "
             f"{args.max_tokens} tokens, temperature 0, prompt processing included); x = / the fastest single "
             "stream of any layout",
             f"{'layout':40} {'1 stream':>14} {'2 streams':>14} {'4 streams':>14}"]
    for label, by in rows.items():
        lines.append(f"{label:40} " + " ".join(f"{by[s]:7.1f} {by[s] / single:4.2f}x " for s in (1, 2, 4)))
    best = max(by[4] for by in rows.values()) / single
    lines.append(f"# best at 4 concurrent requests: {best:.2f}x the fastest single stream (target 1.5x)")
    text = "\n".join(lines)
    print(text)
    if args.write:
        write_section(RESULTS / "real_model.txt", BEGIN, END, text, title="# real model")


if __name__ == "__main__":
    main()
