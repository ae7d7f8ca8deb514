"""The sandbox for untrusted code lives in :mod:`masforge.sandbox` (code genomes need it below the
evaluators layer); this module is its home in the evaluators' namespace."""

from masforge.sandbox import SandboxLimits, SandboxResult, network_namespace_available, run_python, run_tests

__all__ = ["SandboxLimits", "SandboxResult", "network_namespace_available", "run_python", "run_tests"]
