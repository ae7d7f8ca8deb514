"""The built-in benchmarks, one module each (a `Benchmark` subclass marked ``@benchmark``, see
`masforge.evaluators.benchmark`). Importing this package imports every module in it, which registers them: a new
benchmark is one new module here, with nothing else to edit."""

from masforge.evaluators.benchmark import import_all

# The order `masforge tasks` has always listed them in; a module not named here follows, alphabetically.
MODULES = import_all(__name__, __path__, first=("gsm8k", "math500", "drop", "hotpotqa", "mgsm", "mmlu", "mbpp",
                                                "humaneval", "arc", "reasoning_gym"))
