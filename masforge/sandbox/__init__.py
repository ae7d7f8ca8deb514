"""Running untrusted code: the sandbox (:mod:`.runner`: limits, the child's channel and its RPC), the operating
system layers that confine it (:mod:`.isolation`), the child's bootstrap (``_sandbox_child.py``, run as a script,
never imported) and the tools a model may call (:mod:`.tools`: the ``python`` tool runs in the sandbox, the
calculator is bounded before it computes)."""
