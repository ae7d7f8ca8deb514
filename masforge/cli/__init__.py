"""The ``masforge`` command (``masforge = "masforge.cli:main"``; ``python -m masforge`` is the same).

:mod:`.commands` holds the top-level commands (run, evaluate, search, tasks, genome, seeds, report);
:mod:`.archive`, :mod:`.export` and :mod:`.models` are sub-apps; :mod:`.console` prints one red line per
user error.
"""

from masforge.cli.commands import app, main

__all__ = ["app", "main"]
