"""Bootstrap of a sandbox child process (see `masforge.sandbox.runner` and `masforge.sandbox.isolation`).

A fresh interpreter runs it (``python -S -P -s -c LAUNCHER CHAN REPLY JOB JUDGE LIFELINE CODE``, all six file
descriptors), usually inside the namespaces of `masforge.sandbox.isolation`. The parent compiles the parts of this
package once per process and hands their code objects over in a sealed in-memory file (CODE); the launcher
(`masforge.sandbox.isolation.child_command`) runs each part as a module of a private package, in the order of
`PARTS`, takes them out of ``sys.modules`` again (the code under test finds no bootstrap module there) and calls
``main.main()``. The parts import only the standard library and each other, with relative imports at the top of a
module (once the launcher has removed them, nothing can import them again), so the child starts fast and shares
nothing with the parent; the parent can import them all the same (tests do).

The parts, by job: ``errors`` (the audit hook's exception types, an error as one line and a kind, tracebacks
without the bootstrap's frames), ``wire`` (JSON lines, the judge's channel to the parent, values between worker and
judge, exit statuses), ``confine`` (limits, privileges, import paths, the audit hook), ``worker`` (runs the code,
answers the judge), ``judge`` (relays, runs the tests, reports) and ``main`` (the run).

Two processes, so that the judged code never speaks for itself:

* the **judge** (the process the launcher runs in): reads the job, sets the sandbox up, then forks the worker and
  never runs the code under test. Only then does it read the tests (from a file of their own, JUDGE, which the worker
  closes unread): no memory of the worker ever held them, so the code cannot look them up and answer from them. It alone
  holds the channel to the parent; it relays the worker's RPC calls, and it reports the result. Whether the run
  succeeded is also its exit status (0: success, 1: the code failed, 70: the sandbox could not be set up), which the
  worker cannot set: the parent believes a success or a set-up failure only when the exit status agrees. For a test run
  (tests in JUDGE) the judge runs the test code itself, against functions of the worker: every call crosses the
  process boundary, and what comes back is plain data (numbers, strings, containers of them) rebuilt in the judge, or an
  opaque handle; so the comparisons of a test are made by the judge's own objects, and an answer can pass only by
  returning what the tests expect. The task's own code the tests rely on (a HumanEval prompt's helpers) runs in the
  judge too, so an answer that redefines them changes nothing the tests see. A signal sent to the judge (the worker may
  signal its process group) is handled by the judge and fails the run, named as such.
* the **worker** (forked by the judge after the set-up, with the channel to the parent closed): runs the code as
  module ``__sandbox__`` (then the ``entry`` function, if given) and answers the judge's calls.

Steps of the judge, in order:

1. read the job (JSON, from an in-memory file the parent filled; never the tests);
2. when the parent asks for it (parent runs as root), drop to the run's uid/gid for good (which also makes this
   process non-dumpable: the worker cannot read or write its memory or open its descriptors through /proc; when
   not root, ``prctl(PR_SET_DUMPABLE, 0)`` does it). Directories on ``sys.path`` that this uid cannot reach (e.g.
   a Python installed under ``/root``) stay importable through directory descriptors opened before the drop
   (``/proc/self/fd/N`` paths);
3. create the private run directory (unless the parent did) and write the job's files into it, as that uid;
4. set resource limits (address space, CPU, file size, processes, core dumps, open files);
5. fork the worker; handle the signals meant to end the judge; start the lifeline thread (kills the run when the
   parent dies); read the tests; install the audit hook in both processes; the worker compiles and runs
   the code;
6. report one JSON result line on the channel, kill every other process of the sandbox uid (only when that uid
   is exclusive to this run) and ``os._exit`` with the status that matches the result.

Protocol on the channel (JSON lines, judge -> parent on CHAN, parent -> judge on REPLY):

* ``{"type": "started"}`` once the worker exists;
* ``{"type": "rpc", "method": m, "args": [...], "kwargs": {...}}`` answered by
  ``{"ok": true, "result": r}`` or ``{"ok": false, "error": "..."}``;
* ``{"type": "result", "ok": ..., "value": ..., "error": ..., "error_kind": ..., "traceback": ...}``;
* ``{"type": "fatal", "error": "..."}`` when the sandbox could not be set up (then exit status 70).

Between judge and worker (two pipes, JSON lines, at most ``job["max_message_bytes"]`` each): the judge sends
``{"op": "run"}``, ``{"op": "globals"}``, ``{"op": "names", "want": [...]}``, ``{"op": "call", ...}``,
``{"op": "iter"|"next", "h": id}`` and ``{"rpc_reply": {...}}``; the worker answers each op with
``{"r": 1, "ok": ...}`` and may send ``{"rpc": m, "args": [...], "kwargs": {...}}`` while it works.
"""

PARTS = ("errors", "wire", "confine", "worker", "judge", "main")
"""The modules of the bootstrap, each after the ones it imports: the launcher runs them in this order, then the
last one's ``main()``."""
