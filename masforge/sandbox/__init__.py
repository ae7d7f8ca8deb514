"""Run untrusted Python (code written by an LLM) in an isolated child process.

Everything untrusted that masforge executes goes through `run_python`: code genomes (a generated
``forward(...)`` whose LLM calls come back to the parent over a narrow RPC channel), benchmark metrics
(a code answer run against its unit tests, see `run_tests`) and the agents' ``python`` tool. The code
never runs in the parent process; the parent keeps the API keys, counts cost and enforces budgets.

How a call works: a fresh interpreter (``sys.executable -S -P -s``) runs the stdlib-only bootstrap
`masforge.sandbox.child` (its parts compiled once per process, handed over in a sealed in-memory file) inside the OS
layers of `masforge.sandbox.isolation` (bubblewrap namespaces where available). The bootstrap reads its job from an
in-memory file, drops privileges, creates the private run directory and sets the limits; then it forks. The *judge* (the
bootstrap itself) keeps the channel to the parent, reads the tests (if any) from a second in-memory file only after the
fork, and never runs the code; the *worker* (the fork, with that channel and the tests' file closed) installs the audit
hook and runs the code as module ``__sandbox__`` (then the ``entry`` function, if given). The module is not named
``__main__``, so ``if __name__ == "__main__":`` blocks do not run (as in the official HumanEval harness: a solution's
demo code or ``input()`` cannot break its tests, an entry call does not run demo code); ``sys.modules["__main__"]`` is
aliased to it. With ``tests`` the judge runs the test code itself, calling the module's functions in the worker: only
plain data crosses back (an object of the code stays an opaque handle), so a test compares with the judge's own objects;
no memory of the worker ever holds the tests, and the task's own helpers the tests call (``task_code``) run in the
judge, not the answer's versions of them. The judge's result and the RPC requests it relays travel as JSON lines (at
most `MAX_MESSAGE_BYTES` each) over a dedicated pipe pair (passed with ``pass_fds``), separate from the captured
stdout/stderr; the judge's exit status confirms a success (0) or a failed set-up (70), so nothing the code writes
anywhere can claim either. The parent serves RPC requests with the caller's handler and watches the wall clock; time
spent waiting on the handler (an LM provider) does not count, the parent's own CPU time spent serving does, and
``timed_rpc_names`` (tools) run in a thread while the clock runs.

Enforced (Linux), first the OS layers (see `masforge.sandbox.isolation` for which hold on this machine; a
missing one is named once, in one line, at start-up, and recorded in a search's ``sandbox.json``). Without
bubblewrap's file-system layer, generated code does not run at all (one line with
the fix, see `masforge.errors.SandboxUnavailable`) unless the user chose a weaker mode with ``MASFORGE_SANDBOX``:

* **Namespaces** (bubblewrap, else ``unshare``): the run has its own PID namespace, so every process
  it starts dies with it, and with masforge, even when masforge is SIGKILLed (``--die-with-parent``;
  for ``unshare`` and plain processes, the *lifeline*: a pipe only the parent writes to; its EOF makes
  the bootstrap kill the run). Its own network namespace (no network at all, not even
  ``127.0.0.1``, unless ``limits.network``), IPC and UTS namespaces.
* **File system** (bubblewrap): a read-only view of the system directories, the Python installation
  and the bootstrap only (no project folder, no home directories); private ``/tmp`` (``disk_mb``)
  and ``/dev/shm`` tmpfs; ``/proc`` of the namespace only. The run directory is a fresh folder in
  that ``/tmp``: nothing a run writes is visible to another run or survives it.
* **Unprivileged uid (when the parent is root)**: each run gets its *own* uid (``1_500_000_000 +
  slot``, slots claimed with ``flock``, so exclusive across processes), not the shared ``nobody``:
  concurrent sandboxes cannot signal or read each other, and ``max_processes`` is per run. A uid is
  never handed out while a process of it lives: the bootstrap kills its uid's other processes before
  exiting, the parent sweeps the uid after an abnormal end (always, without a PID namespace), a slot
  whose holder died mid-run is swept before reuse and the first use in a process sweeps all free
  slots. When the parent is not root the uid is kept (``RLIMIT_NPROC`` then counts all processes of
  that user). Directories of ``sys.path`` the uid cannot reach stay importable read-only through
  directory fds opened before the drop.
* **Resource limits** (set by the bootstrap before any untrusted code runs, see below why not in a
  ``preexec_fn``): ``RLIMIT_AS`` (memory_mb), ``RLIMIT_CPU`` (cpu_s soft, +1 s hard),
  ``RLIMIT_FSIZE`` (file_size_mb), ``RLIMIT_NPROC`` (max_processes; counts threads too),
  ``RLIMIT_CORE=0``, ``RLIMIT_NOFILE=256``. A limit is never raised above the parent's hard limit.
  Printing far more than ``max_output_bytes`` (64 MB or 4x, whichever is more) kills the run.
* **Process group**: the child starts a new session; on wall timeout the whole group gets SIGKILL.
* **Scrubbed environment**: built from an allow-list, not filtered: ``PATH`` (fixed system value),
  ``LANG=C.UTF-8``, ``PYTHONHASHSEED=0``, ``HOME`` and ``TMPDIR``. No API keys or tokens reach the
  child. (``-E`` is not used so that ``PYTHONHASHSEED`` takes effect; the environment holds no other
  ``PYTHON*`` variable, so this is equivalent to ``-I`` plus a fixed hash seed.)
* **Fresh interpreter**: ``-S`` (no ``site``: no ``.pth`` files, so not even masforge's editable
  install is importable by default), ``-P`` (the bootstrap's directory is not on ``sys.path``),
  ``-s`` (no user site). ``sys.path`` is the private directory, the stdlib and the interpreter's
  site-packages (plain directory only, ``.pth`` files are not processed). Parent fds are closed.
* **Audit hook** (a second layer only, installed after the bootstrap's own imports and before the
  code runs): raises ``PermissionError`` on network calls (unless ``limits.network``), starting
  processes (``subprocess``, ``os.system/exec*/spawn*/posix_spawn*/fork/forkpty``, ``pty.spawn``),
  ``ctypes.dlopen``, ``gc.get_objects/get_referrers/get_referents``, new interpreters, signalling or
  ``prlimit``-ing other processes, opening a file for writing and ``remove/rename/mkdir/rmdir/chmod/
  chown/utime/truncate/link/symlink/xattr`` outside the private directory (``/dev/null``,
  ``/dev/stdout``, ``/dev/stderr`` are allowed), an sqlite database file outside it, opening
  ``/proc/<pid>/...`` of another process. Importing ``ctypes``, ``_posixsubprocess`` or the
  sub-interpreter and test C-API modules raises ``ImportError``. The hook has no switch and reads no
  global, builtin or ``os.path`` function at call time, so walking frames or patching modules does
  not turn it off. These are reported with ``error_kind="blocked"``.
* **Classification**: ``MemoryError`` -> ``"memory"``, SIGXCPU at the CPU limit -> ``"cpu"``, wall clock ->
  ``"timeout"``, blocked operation -> ``"blocked"``, ``SyntaxError`` of the code -> ``"syntax"``,
  non-JSON return value or an output flood -> ``"output"``, other exception (including
  ``SystemExit``, so a solution cannot skip its tests with ``sys.exit(0)``) -> ``"exception"``, death
  by another signal or exit without a result -> ``"killed"`` (also a signal the code sent the judge, or SIGXCPU it
  sent itself before its limit: named as such).

Not enforced / limits of this design:

* The audit hook is not a security boundary (PEP 578): code that sets out to defeat it can (e.g. a
  path object whose ``__fspath__`` answers differently to the hook and to ``open``; unaudited C-level
  calls such as ``os.mkfifo`` or ``os.open(..., dir_fd=...)``). What then holds are the OS layers:
  with bubblewrap such writes land in the run's private ``/tmp`` or fail on the read-only view;
  without it, the uid's permissions decide (world-writable host directories such as ``/tmp`` are
  then writable: the start-up line says so).
* Without bubblewrap, reading is not restricted beyond permissions: files readable by the sandbox
  uid (everyone's, when root; the user's own, when not root) are readable.
* Without bubblewrap there is no disk quota: ``RLIMIT_FSIZE`` caps each file, not their number.
* No seccomp or cgroup: ``RLIMIT_AS`` limits address space, not the machine's resident memory, and
  the private tmpfs (``disk_mb``) is memory the address-space limit does not count.
* The judge sees the code only through its worker's answers: a test passes when the values the code returns are the
  expected ones. The code sees the arguments the tests call it with, never the expected values. Without
  ``task_code``/``answer_names`` (an MBPP answer) the tests take every name they use from the code, so a helper they
  call is the answer's own (as in one process, a function of the code hides the built-in of that name); nothing it
  prints or writes counts. When the parent is not root, the judge makes itself non-dumpable with ``prctl`` (through
  ``ctypes``, if present) so that the worker, which has the same uid, cannot reach into it.
* POSIX/Linux only (``pidfd_open``, namespaces, rlimits).

Why the limits are not set in a ``preexec_fn``: ``preexec_fn`` runs Python code between ``fork`` and
``exec`` and is documented as unsafe in a multi-threaded parent (possible deadlock), and evaluations
call `run_python` from many threads. The bootstrap sets them instead, before any untrusted code runs,
which is equivalent for the code under test; `subprocess.Popen` then needs no Python code in the
forked child.

The package: the sandbox (:mod:`.runner`: limits, the child's channel and its RPC), the operating system layers
that confine it (:mod:`.isolation`), the child's bootstrap (:mod:`.child`: stdlib-only parts the child runs from
code the parent compiled) and the tools a model may call (:mod:`.tools`: the ``python`` tool runs in the sandbox, the
calculator is bounded before it computes).
"""
