"""Built-in strategies (importing this package registers them)."""

from masforge.search.strategies import random_search  # noqa: F401
from masforge.search.strategies.base import STRATEGIES, Strategy, get_strategy, register

__all__ = ["STRATEGIES", "Strategy", "get_strategy", "register"]
