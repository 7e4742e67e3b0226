"""Rules of play: one Sokoban step as a numba kernel, and the Python API around it.

Episodes (a budget, solving, restarts) are ``engine.episode``'s.

The board is a flat ``uint8`` array of cell flags (``FLOOR``, ``GOAL``); anything that is not
floor blocks. A move into a blocked cell or a blocked push is a no-op that still costs a step.
"""

from __future__ import annotations

__all__ = [
    "ACTIONS", "CRATE", "FLOOR", "GOAL", "LIVE", "NOT_CRATE", "WAIT", "BadAction",
    "actions_to_lurd", "board_array", "check_move", "delta", "is_free", "lurd_to_actions",
    "moved_crate", "replay", "resort", "step", "step_kernel", "step_on",
]

import numpy as np

from engine.errors import SokoforgeError
from engine.kernel_cache import njit
from engine.levels import Level, State

ACTIONS = "udlr"
WAIT = 4  # not a move: an action that only uses a step (the ARC-AGI-3 face's ACTION5-7)
FLOOR = np.uint8(1)
GOAL = np.uint8(2)
LIVE = np.uint8(4)  # set by the searches: a lone crate here can still reach a goal
CRATE = np.uint8(8)  # set by the searches on the cells of the state being expanded
NOT_CRATE = np.uint8(255 - 8)


class BadAction(SokoforgeError, ValueError):
    """An action that is not a move 0-3 (the episode core adds ``WAIT``)."""


def board_array(level: Level) -> np.ndarray:
    """The level's cells as flat ``uint8`` flags: ``FLOOR`` (enclosed) and ``GOAL``."""
    floor = level.floor.ravel().astype(np.uint8)
    goals = level.goals.ravel().astype(np.uint8)
    return floor * FLOOR | goals * GOAL


@njit(cache=True)
def delta(action: int, width: int) -> int:
    """Flat cell offset of an action: up -width, down +width, left -1, right +1."""
    if action == 0:
        return -width
    if action == 1:
        return width
    if action == 2:
        return -1
    return 1


@njit(cache=True)
def resort(crates: np.ndarray, slot: int) -> None:
    """Restore ascending order after ``crates[slot]`` changed (one element out of place)."""
    i = slot
    while i > 0 and crates[i - 1] > crates[i]:
        crates[i - 1], crates[i] = crates[i], crates[i - 1]
        i -= 1
    while i + 1 < crates.size and crates[i + 1] < crates[i]:
        crates[i + 1], crates[i] = crates[i], crates[i + 1]
        i += 1


@njit(cache=True)
def moved_crate(crates: np.ndarray, old: int, new: int, out: np.ndarray) -> None:
    """``out`` = sorted ``crates`` with the crate on ``old`` moved to ``new``."""
    slot = 0
    for i in range(crates.size):
        out[i] = crates[i]
        if crates[i] == old:
            slot = i
    out[slot] = new
    resort(out, slot)


@njit(cache=True)
def is_free(board: np.ndarray, crates: np.ndarray, cell: int) -> bool:
    """Whether ``cell`` is floor with no crate on it."""
    if cell < 0 or cell >= board.size or board[cell] & FLOOR == 0:
        return False
    for i in range(crates.size):
        if crates[i] == cell:
            return False
    return True


@njit(cache=True)
def step_kernel(board: np.ndarray, width: int, player: int, crates: np.ndarray,
                action: int) -> tuple[int, int]:
    """Apply ``action``; ``crates`` (sorted) is updated in place.

    Returns the new player cell and the slot the pushed crate was in before the push
    (-1 when nothing was pushed). A blocked action returns ``player`` unchanged.
    """
    d = delta(action, width)
    target = player + d
    if target < 0 or target >= board.size or board[target] & FLOOR == 0:
        return player, -1
    slot = -1
    for i in range(crates.size):
        if crates[i] == target:
            slot = i
    if slot < 0:
        return target, -1
    if not is_free(board, crates, target + d):
        return player, -1
    crates[slot] = target + d
    resort(crates, slot)
    return target, slot


def step(level: Level, state: State, action: int) -> tuple[State, bool, bool]:
    """One action from ``state``: the next state, whether the player moved, whether it pushed."""
    return step_on(board_array(level), level.width, state, action)


def check_move(action: object) -> None:
    """``BadAction`` unless ``action`` is an integer 0-3 (a numpy integer too)."""
    # 3.0 == 3 and True == 1, but neither is an action (a float would compile a float kernel)
    if (isinstance(action, bool | np.bool_) or not isinstance(action, int | np.integer)
            or action not in (0, 1, 2, 3)):
        raise BadAction(f"action must be 0 (up), 1 (down), 2 (left) or 3 (right), not {action!r}")


def step_on(board: np.ndarray, width: int, state: State, action: int) -> tuple[State, bool, bool]:
    """``step`` on the level's cell flags (``board_array``), computed once by the caller."""
    check_move(action)
    crates = np.array(state.crates, dtype=np.int64)
    player, slot = step_kernel(board, width, state.player, crates, action)
    moved = player != state.player
    new = State(int(player), tuple(int(c) for c in crates)) if moved else state
    return new, moved, slot >= 0


def lurd_to_actions(lurd: str) -> list[int]:
    """Actions of a LURD string (case only marks pushes and is ignored here)."""
    try:
        return [ACTIONS.index(ch) for ch in lurd.lower()]
    except ValueError:
        bad = next(ch for ch in lurd if ch.lower() not in ACTIONS)
        raise ValueError(f"not a LURD letter: {bad!r}") from None


def actions_to_lurd(level: Level, state: State, actions: list[int]) -> str:
    """LURD of ``actions`` played from ``state``: upper case where the step pushed a crate."""
    board = board_array(level)
    letters = []
    for action in actions:
        state, _, pushed = step_on(board, level.width, state, action)
        letter = ACTIONS[action]
        letters.append(letter.upper() if pushed else letter)
    return "".join(letters)


def replay(level: Level, lurd: str, state: State | None = None) -> list[State]:
    """Every state of playing ``lurd`` from ``state`` (default: the start), the first included."""
    board = board_array(level)
    states = [level.start if state is None else state]
    for action in lurd_to_actions(lurd):
        states.append(step_on(board, level.width, states[-1], action)[0])
    return states
