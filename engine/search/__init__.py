"""Searches over a level's states: the dense state index, deadlocks, the optimal solver,
the solvable set (reverse), reachable and dead state counts, and optimal paths.

May import the engine's top (levels, rules, kernel_cache, errors) and nothing else of it.
"""
