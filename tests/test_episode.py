"""The episode core (``engine.episode``): budget, solving, WAIT, restarts, the end; and the
server's run and the vector kernels playing every episode exactly as it does."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
from hypothesis import assume, event, given, settings
from hypothesis import strategies as st
from serve_support import LEVELS, write_dataset
from test_search import random_level, scrambled

from engine.episode import (
    WAIT,
    Episode,
    EpisodeOver,
    UnplayableLevel,
    begin,
    ending,
    episode_over,
    restart,
    step,
)
from engine.errors import SokoforgeError
from engine.levels import Level, State, parse_xsb
from engine.pictures.frames import TileAtlas, play
from engine.pictures.vector import (
    FRAME_BYTES,
    BoardSlots,
    begin_boards,
    frames_of,
    new_episodes,
    new_outcomes,
    step_boards,
)
from engine.rules import BadAction
from serve.games.dataset import DatasetError, load_version
from serve.games.episode import GAME_OVER, new_run

UP, DOWN, LEFT, RIGHT = 0, 1, 2, 3
DATASETS = Path(__file__).resolve().parent.parent / "datasets"
ONE_PUSH = parse_xsb("#####\n#@$.#\n#####")
ROOM = parse_xsb("######\n#@ $.#\n#    #\n######")


def test_the_budget_ends_an_episode_truncated():
    episode = begin(ROOM, max_steps=3)
    for action in (DOWN, UP):
        episode, result = step(episode, action)
        assert not result.done and not episode.over
    episode, result = step(episode, DOWN)
    assert result.done and result.truncated and not result.terminated
    assert episode.over and episode.truncated and episode.steps == 3 and not episode.solved


def test_solving_ends_an_episode_terminated_even_with_budget_left():
    episode, result = step(begin(ONE_PUSH, max_steps=10), RIGHT)
    assert (result.moved, result.pushed, result.solved, result.done) == (True, True, True, True)
    assert result.terminated and not result.truncated
    assert episode.over and not episode.truncated and episode.steps == 1


def test_wait_uses_a_step_moves_nothing_and_can_spend_the_last_one():
    start = begin(ONE_PUSH, max_steps=2)
    waited, result = step(start, WAIT)
    assert (result.moved, result.pushed, result.solved, result.done) == (False,) * 4
    assert waited.state == ONE_PUSH.start and waited.steps == 1
    over, result = step(waited, WAIT)
    assert result.truncated and over.over and over.steps == 2


def test_a_restart_puts_the_start_back_and_keeps_the_steps_used():
    episode = begin(ROOM, max_steps=10)
    for action in (RIGHT, DOWN):
        episode, _ = step(episode, action)
    assert episode.state != ROOM.start
    back = restart(episode)
    assert back.state == ROOM.start and back.steps == 2 and not back.over


def test_no_action_and_no_restart_once_the_episode_is_over():
    solved, _ = step(begin(ONE_PUSH, max_steps=10), RIGHT)
    used_up = begin(ROOM, max_steps=3, steps=3)  # a stored episode, its budget spent
    for episode in (solved, used_up):
        assert episode.over
        for action in (UP, WAIT):
            with pytest.raises(EpisodeOver, match="over"):
                step(episode, action)
        with pytest.raises(EpisodeOver):
            restart(episode)
    assert issubclass(EpisodeOver, SokoforgeError) and issubclass(EpisodeOver, ValueError)


@pytest.mark.parametrize("level, max_steps, why", [
    (parse_xsb("#####\n#@**#\n#####"), 10, "solved at its start"),
    (ROOM, 0, "step budget is 0"),
])
def test_no_episode_begins_over_so_none_is_over_unplayed(level, max_steps, why):
    with pytest.raises(UnplayableLevel, match=why):
        begin(level, max_steps)
    with pytest.raises(UnplayableLevel, match=why):  # nor a served one
        new_run([Served(level, max_steps)], [(0, 0)])
    assert issubclass(UnplayableLevel, SokoforgeError)


def test_the_server_refuses_a_version_holding_a_level_over_at_its_start(tmp_path):
    """Served, its every action would answer 500 (the episode over): it is never served."""
    write_dataset(tmp_path, "solved", ["#####\n#@**#\n#####", *LEVELS])
    with pytest.raises(DatasetError, match=r"level \d: it is solved at its start"):
        load_version(tmp_path, "solved")


@pytest.mark.parametrize("action", [5, -1, True, 1.5, 4.0, "1"])
def test_a_bad_action_is_refused_and_uses_no_step(action):
    episode = begin(ROOM, max_steps=5)
    with pytest.raises(BadAction):
        step(episode, action)
    assert episode.steps == 0 and issubclass(BadAction, SokoforgeError)


def test_an_episode_is_a_value_that_stepping_does_not_change():
    episode = begin(ROOM, max_steps=5)
    after, _ = step(episode, RIGHT)
    assert (episode.state, episode.steps) == (ROOM.start, 0)
    assert (after.state.player, after.steps) == (ROOM.start.player + 1, 1)


def test_a_stored_episode_is_put_back_with_its_state_and_steps():
    state = State(ROOM.start.player + 6, ROOM.start.crates)
    episode = begin(ROOM, max_steps=5, state=state, steps=4)
    assert (episode.state, episode.steps, episode.over) == (state, 4, False)
    assert step(episode, UP)[1].truncated


def test_the_compiled_end_is_the_python_end():
    for solved in (False, True):
        for steps in range(4):
            for max_steps in range(3):
                over = solved or steps >= max_steps
                assert episode_over(solved, steps, max_steps) == over
                assert episode_over.py_func(solved, steps, max_steps) == over
                assert ending(solved, steps, max_steps) == (solved, over and not solved)


def test_a_trajectory_stops_at_the_budget():
    atlas = TileAtlas.for_level(ROOM)
    walk = np.array([DOWN, UP] * 5, np.int64)
    assert len(play(atlas, walk, max_steps=4).actions) == 5  # 4 actions and the last frame
    assert len(play(atlas, walk).actions) == 11
    assert play(TileAtlas.for_level(ONE_PUSH), np.array([RIGHT, LEFT]), max_steps=9).solved


def test_the_gym_env_refuses_a_bad_action_and_any_action_after_the_end():
    import gymnasium

    import sokoforge_gym  # noqa: F401  (registers the environment)

    env = gymnasium.make("sokoforge/Sokoban-v0", version="public-W", datasets=DATASETS)
    _, info = env.reset(seed=0)
    for bad in (4, 7, -1):
        with pytest.raises(SokoforgeError):
            env.step(bad)
    ended, steps = False, 0
    while not ended:
        _, reward, terminated, truncated, info = env.step(steps % 2)
        steps += 1
        ended = terminated or truncated
        assert truncated == (ended and reward == 0.0) and info["steps"] == steps
    with pytest.raises(EpisodeOver):
        env.step(0)


@dataclass(frozen=True)
class Served:
    """What a served episode reads of its level, without pictures."""

    level: Level
    max_steps: int
    index: int = 0
    tier: int = 0
    optimal_moves: int = 1

    def is_dead(self, state: State) -> bool:
        return False


class VectorEpisode:
    """One board of ``engine.pictures.vector.step_boards``, stepped one action at a time."""

    def __init__(self, level: Level, max_steps: int) -> None:
        slots = BoardSlots(1, level.height * level.width, level.n_crates)
        slots.put(0, TileAtlas.for_level(level).board_tiles(), max_steps)
        self.boards, self.n = slots.flat, level.n_crates
        self.e = new_episodes(1, slots.arrays.start_crates.shape[1])
        self.out = new_outcomes(1)
        self.obs = frames_of(np.zeros((1, FRAME_BYTES), np.uint8))
        self.goal = frames_of(np.zeros((1, FRAME_BYTES), np.uint8))
        begin_boards(np.ones(1, np.bool_), self.boards, self.e, 1, self.obs, self.goal,
                     self.out)

    def step(self, action: int) -> tuple[State, int, bool, bool]:
        step_boards(np.array([action], np.int64), self.boards, self.e, 1, self.obs, self.goal,
                    self.out)
        state = State(int(self.e.player[0]), tuple(int(c) for c in self.e.crates[0, :self.n]))
        return state, int(self.e.steps[0]), bool(self.out.terminated[0]), bool(self.e.over[0])


def play_alike(level: Level, max_steps: int, actions: list[int]) -> Episode:
    """Play ``actions`` through the core, a served run and the vector kernel, checking after
    each one that all three agree on state, steps, solved and over; the core's last episode."""
    episode = begin(level, max_steps)
    run = new_run([Served(level, max_steps)], [(0, 0)])
    vector = VectorEpisode(level, max_steps)
    for action in actions:
        episode, result = step(episode, action)
        outcome = run.act(0, action)
        served = run.episodes[0]
        core = (episode.state, episode.steps, episode.solved, episode.over)
        assert (served.state, served.steps, outcome.solved, outcome.episode_done) == core
        assert (outcome.moved, outcome.pushed) == (result.moved, result.pushed)
        assert vector.step(action) == core
        assert (result.solved, result.done) == (episode.solved, episode.over)
        if episode.over:
            assert served.done and served.solved == episode.solved and run.state == GAME_OVER
            break
    return episode


def test_the_core_the_served_run_and_the_vector_kernel_end_alike_solved_and_truncated():
    assert play_alike(ROOM, 5, [WAIT, DOWN, UP, RIGHT, RIGHT, LEFT]).solved
    assert play_alike(ROOM, 3, [RIGHT, WAIT, LEFT, RIGHT]).truncated
    assert play_alike(ONE_PUSH, 1, [RIGHT]).solved  # the last step of the budget solves


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), side=st.integers(5, 7), n_crates=st.integers(1, 2),
       max_steps=st.integers(1, 30),
       actions=st.lists(st.integers(0, 4), min_size=1, max_size=40))
def test_the_core_the_served_run_and_the_vector_kernel_play_alike(seed, side, n_crates,
                                                                   max_steps, actions):
    rng = np.random.default_rng(seed)
    drawn = random_level(rng, side, n_crates, 0.2)
    # a few moves and pulls back from the solved state, so random actions solve it at times
    level = scrambled(drawn, rng, int(rng.integers(2, 8)))
    if level.is_solved(level.start):
        level = drawn
    assume(not level.is_solved(level.start))  # the vector env's levels start unsolved
    episode = play_alike(level, max_steps, actions)
    event("solved" if episode.solved else "truncated" if episode.over else "still in play")


def test_the_episode_cores_doctest_passes():
    import doctest

    import engine.episode

    result = doctest.testmod(engine.episode)
    assert result.attempted >= 5 and result.failed == 0
