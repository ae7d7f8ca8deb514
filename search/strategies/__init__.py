"""Built-in strategies (importing this package registers them)."""

from masforge.search.strategies import coevolve, evolve, knapsack, meta, random_search, swarm, tune  # noqa: F401
from masforge.search.strategies.base import STRATEGIES, Strategy, describe_strategies, get_strategy, register

__all__ = ["STRATEGIES", "Strategy", "describe_strategies", "get_strategy", "register"]
