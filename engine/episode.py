"""The episode core: a level, a step budget and actions give the state, what each action did,
and when the episode is over.

Shaped like Gymnasium's functional envs: ``begin`` gives an immutable ``Episode``, ``step`` the
next one with its ``StepResult``, ``restart`` the level's start with the steps used kept.
``episode_over`` is the one definition of the end (solved, or the budget used): the Python core
calls it and so do the numba kernels of ``engine.pictures.vector``. ``Game`` holds the current
``Episode`` for callers that act on one object.
"""

from __future__ import annotations

__all__ = [
    "Episode", "EpisodeOver", "Game", "StepResult", "UnplayableLevel", "WAIT", "act_kernel",
    "begin", "check_playable", "ending", "episode_over", "restart", "step",
]

from collections.abc import Callable
from typing import NamedTuple

import numpy as np

from engine.errors import SokoforgeError
from engine.kernel_cache import njit
from engine.levels import Level, State
from engine.rules import WAIT, board_array, step_kernel, step_on


class EpisodeOver(SokoforgeError, ValueError):
    """An action or restart asked of an episode that is over."""


class UnplayableLevel(SokoforgeError, ValueError):
    """A level whose episode would be over before its first action: solved at its start, or
    given no step to play. No episode of it begins, so none can be over unplayed."""


@njit(cache=True)
def episode_over(solved: bool, steps: int, max_steps: int) -> bool:
    """Whether an episode is over: solved, or all ``max_steps`` of its budget used."""
    return solved or steps >= max_steps


@njit(cache=True)
def ending(solved: bool, steps: int, max_steps: int) -> tuple[bool, bool]:
    """(terminated, truncated) in Gymnasium's sense: an over episode is terminated when solved,
    else truncated (its budget ran out)."""
    over = episode_over(solved, steps, max_steps)
    return solved, over and not solved


@njit(cache=True)
def act_kernel(board: np.ndarray, width: int, player: int, crates: np.ndarray,
               action: int) -> tuple[int, int]:
    """``engine.rules.step_kernel`` for an episode's actions: a move 0-3, or ``WAIT``, which
    leaves the player and ``crates`` where they are."""
    if action == WAIT:
        return player, -1
    return step_kernel(board, width, player, crates, action)


# Python callers call the functions uncompiled (a compiled call costs more than the body).
_over: Callable[[bool, int, int], bool] = episode_over.py_func
_ending: Callable[[bool, int, int], tuple[bool, bool]] = ending.py_func


class Episode(NamedTuple):
    """One episode as it stands: the level and budget, the state, the steps used, solved.

    Immutable: ``step`` and ``restart`` return a new one. ``board`` is ``level``'s cell flags
    (``engine.rules.board_array``), computed once by ``begin``.
    """

    level: Level
    max_steps: int
    board: np.ndarray
    state: State
    steps: int
    solved: bool

    @property
    def over(self) -> bool:
        return _over(self.solved, self.steps, self.max_steps)

    @property
    def truncated(self) -> bool:
        """Over without being solved: the budget ran out."""
        return _ending(self.solved, self.steps, self.max_steps)[1]


class StepResult(NamedTuple):
    """What one action did to an episode: ``done`` is ``episode_over`` after it."""

    moved: bool
    pushed: bool
    solved: bool
    done: bool

    @property
    def terminated(self) -> bool:
        """The action ended the episode by solving it (Gymnasium's ``terminated``)."""
        return self.solved

    @property
    def truncated(self) -> bool:
        """The action used the budget's last step without solving (Gymnasium's ``truncated``)."""
        return self.done and not self.solved


def check_playable(level: Level, max_steps: int) -> None:
    """``UnplayableLevel`` when an episode of ``level`` with ``max_steps`` would be over before
    its first action (solved at its start, or a budget under one step)."""
    if level.is_solved(level.start):
        raise UnplayableLevel("it is solved at its start: an episode of it would be over "
                              "before its first action")
    if max_steps < 1:
        raise UnplayableLevel(f"its step budget is {max_steps}: an episode of it would be over "
                              "before its first action")


def begin(level: Level, max_steps: int, state: State | None = None, steps: int = 0) -> Episode:
    """An episode of ``level`` with a budget of ``max_steps`` actions, from ``state`` (default
    the level's start) with ``steps`` already used (a stored episode put back).

    Args:
        level: the level played.
        max_steps: the budget of actions (moves and waits).
        state: where play stands; None for the level's start.
        steps: the steps already used (0 for a new episode).

    Raises:
        UnplayableLevel: a new episode (no step used) would be over already (solved at its
            start, or a budget under one step).

    >>> from engine.levels import parse_xsb
    >>> episode = begin(parse_xsb("#####\\n#@$.#\\n#####"), max_steps=10)
    >>> episode, result = step(episode, 3)  # right: the crate onto the goal
    >>> result
    StepResult(moved=True, pushed=True, solved=True, done=True)
    >>> restart(episode)
    Traceback (most recent call last):
    engine.episode.EpisodeOver: the episode is over: it cannot be restarted
    """
    if steps == 0:
        check_playable(level, max_steps)
    state = level.start if state is None else state
    return Episode(level, max_steps, board_array(level), state, steps, level.is_solved(state))


def step(episode: Episode, action: int) -> tuple[Episode, StepResult]:
    """One action: a move 0-3 (up, down, left, right), or ``WAIT``, which only uses a step.

    Raises:
        EpisodeOver: the episode is over (solved, or its budget used).
        BadAction: ``action`` is none of those (``engine.rules``); no step is used.
    """
    if _over(episode.solved, episode.steps, episode.max_steps):
        raise EpisodeOver("the episode is over: no more actions")
    if action == WAIT and isinstance(action, int | np.integer) and not isinstance(action, bool):
        state, moved, pushed = episode.state, False, False
    else:
        state, moved, pushed = step_on(episode.board, episode.level.width, episode.state,
                                       action)
    # only a push moves a crate, so only a push can change whether the level is solved
    solved = episode.level.is_solved(state) if pushed else episode.solved
    steps = episode.steps + 1
    after = Episode(episode.level, episode.max_steps, episode.board, state, steps, solved)
    return after, StepResult(moved, pushed, solved, _over(solved, steps, episode.max_steps))


def restart(episode: Episode) -> Episode:
    """The level back at its start; the steps already used stay used.

    Raises:
        EpisodeOver: the episode is over (solved, or its budget used).
    """
    if episode.over:
        raise EpisodeOver("the episode is over: it cannot be restarted")
    start = episode.level.start
    return episode._replace(state=start, solved=episode.level.is_solved(start))


class Game:
    """An ``Episode`` to act on in place: the current one, and the actions taken so far."""

    def __init__(self, level: Level, max_steps: int, state: State | None = None) -> None:
        self.episode = begin(level, max_steps, state)
        self.actions: list[int] = []

    @property
    def level(self) -> Level:
        return self.episode.level

    @property
    def max_steps(self) -> int:
        return self.episode.max_steps

    @property
    def state(self) -> State:
        return self.episode.state

    @property
    def steps(self) -> int:
        return self.episode.steps

    @property
    def solved(self) -> bool:
        return self.episode.solved

    @property
    def done(self) -> bool:
        return self.episode.over

    def act(self, action: int) -> StepResult:
        """Play one action (0-3, or ``WAIT``); ``ValueError`` on a bad action or after the
        episode ended."""
        self.episode, result = step(self.episode, action)
        self.actions.append(int(action))
        return result

    def wait(self) -> StepResult:
        """Use one step without moving, like a blocked move; ``ValueError`` after the end."""
        return self.act(WAIT)
