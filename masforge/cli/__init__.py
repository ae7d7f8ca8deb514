"""The ``masforge`` command (``masforge = "masforge.cli:main"``; ``python -m masforge`` is the same).

:mod:`.commands` holds the app and registers the top-level commands, which live by kind (:mod:`.evaluate`,
:mod:`.search`, :mod:`.listings`, :mod:`.genome`, :mod:`.export`); :mod:`.archive`, :mod:`.models` and
:mod:`.portfolio` are sub-apps; :mod:`.console` prints one red line per
user error. ``app`` and ``main`` are loaded on first use, so ``python -m masforge.cli.archive`` runs a
sub-app without importing the others first.
"""

from __future__ import annotations

from typing import Any

__all__ = ["app", "main"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from masforge.cli import commands

        return getattr(commands, name)
    raise AttributeError(f"module 'masforge.cli' has no attribute {name!r}")
