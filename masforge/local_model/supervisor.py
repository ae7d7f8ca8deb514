"""The process that owns a shared server: ``python -m masforge.local_model.supervisor``.

The first masforge process that needs the embedded model starts this in a session of its own (so no user's Ctrl-C
or exit reaches it). It starts the llama.cpp server as its child (which the kernel kills if the supervisor dies,
however it dies), says on stdout, in one JSON line, where the server listens or why it could not start, and then
watches the users' leases (:mod:`.registry`): when none has lived for the idle time, it retires the record and
stops the server. A SIGTERM (the last user leaving, or a process cleaning a stale record) stops it at once.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import threading
import time
from pathlib import Path
from types import FrameType

from masforge.errors import LocalModelError
from masforge.local_model.catalog import LocalModelSpec
from masforge.local_model.llama_server import started_server_kind
from masforge.local_model.registry import Registry
from masforge.local_model.server import LocalServer
from masforge.processes import process_start_time

POLL_S = 0.5
"""How often the leases are looked at."""
STOP_TIMEOUT_S = 2.0
"""A stopping server gets this long after SIGTERM (a generation in flight is not waited for), then SIGKILL."""


def _say(message: dict[str, object]) -> None:
    """One JSON line to the process that started us, then stdout is closed (it stops reading)."""
    try:
        sys.stdout.write(json.dumps(message) + "\n")
        sys.stdout.flush()
    except OSError:
        pass  # it is gone: the leases decide what happens next
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    os.close(devnull)


def watch(registry: Registry, server_id: str, server: LocalServer, idle_s: float, stop: threading.Event) -> str:
    """Keep the server while it has users; return why it ends (stopped, server exited, no users)."""
    last_user = time.monotonic()
    while not stop.wait(POLL_S):
        if not server.running:
            return "the server exited"
        with registry.try_locked() as held:
            if not held:  # a user is registering (or starting another server): look again later
                continue
            if registry.users(server_id, prune=True):
                last_user = time.monotonic()
            elif time.monotonic() - last_user >= idle_s:
                registry.remove(server_id)  # under the lock: no one can register with it after this
                return f"no user for {idle_s:g} s"
    return "asked to stop"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m masforge.local_model.supervisor",
                                     description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--spec", required=True, help="the model spec as JSON")
    parser.add_argument("--id", required=True, help="this server's name in the registry")
    parser.add_argument("--cache", required=True, type=Path, help="the cache folder holding weights and registry")
    parser.add_argument("--idle", required=True, type=float, help="seconds without a live user before stopping")
    args = parser.parse_args(argv)
    spec = LocalModelSpec.from_json(args.spec)
    registry = Registry(spec.name, args.cache)
    stop = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, on_signal)
    server = LocalServer(spec, cache=args.cache)
    try:
        server.start()
        kind, slots = started_server_kind()
    except LocalModelError as exc:
        _say({"error": str(exc)})
        return 1
    assert server.pid is not None and server.log_path is not None
    _say({"ready": {"api_base": server.api_base, "server_pid": server.pid,
                    "server_started": process_start_time(server.pid), "slots": slots, "kind": kind,
                    "log": str(server.log_path)}})
    why = "asked to stop"
    try:
        why = watch(registry, args.id, server, args.idle, stop)
    finally:
        with registry.try_locked(timeout=STOP_TIMEOUT_S) as held:
            if held:  # else a user holds the lock and finds the record stale (its owner gone) itself
                registry.remove(args.id)
        registry.forget_users(args.id)
        server.stop(STOP_TIMEOUT_S)
        print(f"{time.strftime('%Y-%m-%d %H:%M:%S')} supervisor {os.getpid()}: stopped {spec.name} server "
              f"{args.id} ({why})", file=sys.stderr, flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
