"""Compile every numba kernel once into the on-disk cache (``make test`` runs this first).

Solving, enumerating, playing (the panel) and drawing (frames and the vector env's boards,
with pixel noise) one small level reaches every kernel of the engine.
"""

from __future__ import annotations

__all__ = ["main"]

from engine.levels import Level, parse_xsb

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

    from engine.agents.ladder import climb
    from engine.agents.panel import play_panel
    from engine.agents.planner import plan, push_lower_bound
    from engine.agents.reference import REFERENCE_AGENTS, reference_episode
    from engine.agents.validation_agents import VALIDATION_AGENTS, play_agent
    from engine.episode import Game
    from engine.rules import replay
    from engine.search.deadlock import dead_squares, is_frozen_dead
    from engine.search.optimal_paths import optimal_paths
    from engine.search.reachable import push_reachable_stats, reachable_stats
    from engine.search.reverse import optimal_actions, solvable_set
    from engine.search.solver import solve

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
    optimal_actions(sset)
    play_panel(level, 3 * (result.moves or 10))
    reference_episode(level, 3 * (result.moves or 10), REFERENCE_AGENTS[0])
    _draw(level, result.solution or "")


def _draw(level: Level, solution: str) -> None:
    """Play ``solution`` as frames (``engine.pictures.frames``) and as one board of the vector env's
    kernels (begin, step, restart), in a noisy look: every drawing kernel."""
    import numpy as np

    from engine.pictures.frames import TileAtlas, play
    from engine.pictures.look import Look, draw_theme
    from engine.pictures.render import SIZE
    from engine.pictures.vector import (
        BoardSlots,
        begin_boards,
        frames_of,
        new_episodes,
        new_outcomes,
        restart_boards,
        step_boards,
    )
    from engine.rules import lurd_to_actions

    look = Look("themed", draw_theme(np.random.default_rng(0), noise=True), noise_key=1)
    atlas = TileAtlas.for_level(level, look)
    actions = lurd_to_actions(solution)
    play(atlas, np.asarray(actions, dtype=np.int64))
    slots = BoardSlots(1)
    slots.put(0, atlas.board_tiles(), max_steps=len(actions) + 1, index=0)
    boards, episodes = slots.flat, new_episodes(1, slots.arrays.start_crates.shape[1])
    obs, goal = (frames_of(np.zeros((1, SIZE * SIZE * 3), np.uint8)) for _ in range(2))
    out, every = new_outcomes(1), np.ones(1, np.bool_)
    episodes.over[:] = True
    begin_boards(every, boards, episodes, 1, obs, goal, out)
    for action in actions:
        step_boards(np.array([action], np.int64), boards, episodes, 1, obs, goal, out)
    restart_boards(every, boards, episodes, 1, obs, goal, out)


if __name__ == "__main__":
    main()
