"""Compile every numba kernel once into the on-disk cache (``make test`` runs this first).

Solving and enumerating one small level reaches every kernel of the engine.
"""

from __future__ import annotations

__all__ = ["main"]

from engine.levels import parse_xsb

_LEVEL = """
#######
#.@ # #
#$* $ #
#   $ #
# ..  #
#######
"""


def main() -> None:
    import numpy as np

    from engine.deadlock import dead_squares, is_frozen_dead
    from engine.episode import Game
    from engine.ladder import climb
    from engine.optimal_paths import optimal_paths
    from engine.planner import plan, push_lower_bound
    from engine.reachable import push_reachable_stats, reachable_stats
    from engine.reverse import solvable_set
    from engine.rules import replay
    from engine.solver import solve
    from engine.validation_agents import VALIDATION_AGENTS, play_agent

    level = parse_xsb(_LEVEL)
    result = solve(level)
    replay(level, result.solution or "")
    Game(level, 10).act(0)
    sset = solvable_set(level)
    sset.distance(level.start)
    sset.sample_start(np.random.default_rng(0), 1, sset.max_distance)
    reachable_stats(level, sset=sset)
    push_reachable_stats(level, sset=sset)
    dead_squares(level)
    is_frozen_dead(level, level.start, level.start.crates[0])
    plan(level, 3 * (result.moves or 10))
    climb(level, 3 * (result.moves or 10), rungs=2)
    play_agent(level, 3 * (result.moves or 10), VALIDATION_AGENTS[0])
    push_lower_bound(level)
    optimal_paths(level)


if __name__ == "__main__":
    main()
