"""Deadlocks: dead squares, the cheap frozen-crate test, and the exact test via the solvable set.

A cell is live when a lone crate on it can still be pushed to some goal (found by pulling
crates back from every goal: ``push_distance``, which the planner's heuristic also reads);
crates on any other cell can never be solved. The frozen test finds crates that can never
move again, off a goal. Both are sound: they never call a solvable state dead.
"""

from __future__ import annotations

__all__ = [
    "FAR", "dead_squares", "frozen_kernel", "frozen_square", "is_dead", "is_frozen_dead",
    "live_cells", "live_kernel", "push_distance", "push_pruned", "search_grid",
]

from typing import Protocol

import numpy as np

from engine.kernel_cache import njit
from engine.levels import Level, State
from engine.rules import CRATE, FLOOR, GOAL, LIVE, NOT_CRATE, board_array, delta

FAR = 1 << 20  # the push distance of a dead square


@njit(cache=True)
def push_distance(passable: np.ndarray, goal: np.ndarray, width: int) -> np.ndarray:
    """Fewest pushes taking a lone crate from each cell to some goal (``FAR`` if none): the
    one dead-square test, by pulling crates back from every goal (dead where ``FAR``)."""
    n = passable.size
    dist = np.full(n, FAR, np.int64)
    queue = np.empty(n, np.int64)
    head = 0
    tail = 0
    for c in range(n):
        if goal[c] and passable[c]:
            dist[c] = 0
            queue[tail] = c
            tail += 1
    while head < tail:
        y = queue[head]
        head += 1
        for a in range(4):
            d = delta(a, width)
            # pulled from y + d onto y, the player stepping on to y + 2d
            x = y + d
            if not passable[x] or dist[x] != FAR:
                continue
            if passable[x + d]:
                dist[x] = dist[y] + 1
                queue[tail] = x
                tail += 1
    return dist


@njit(cache=True)
def live_kernel(board: np.ndarray, width: int) -> np.ndarray:
    """Cells a lone crate can be pushed from to some goal, as ``uint8`` 0/1 (``push_distance``
    finite)."""
    dist = push_distance(board & FLOOR != 0, board & GOAL != 0, width)
    live = np.zeros(board.size, np.uint8)
    for c in range(board.size):
        if dist[c] != FAR:
            live[c] = 1
    return live


@njit(cache=True)
def _axis_blocked(grid: np.ndarray, cell: int, d: int) -> bool:
    """Whether a crate on ``cell`` can never usefully move along ``d``: a wall at one end, or
    dead squares at both."""
    a, b = grid[cell - d], grid[cell + d]
    return a & FLOOR == 0 or b & FLOOR == 0 or (a & LIVE == 0 and b & LIVE == 0)


@njit(cache=True)
def _crate_blocked(grid: np.ndarray, cell: int, d: int, across: int) -> bool:
    """Blocked along ``d`` by walls or dead squares, or by a neighbour crate that is itself
    blocked ``across`` (it cannot move along ``d`` while this crate stays)."""
    if _axis_blocked(grid, cell, d):
        return True
    if grid[cell - d] & CRATE and _axis_blocked(grid, cell - d, across):
        return True
    return grid[cell + d] & CRATE != 0 and _axis_blocked(grid, cell + d, across)


@njit(cache=True)
def _stuck_square(grid: np.ndarray, a: int, b: int, c: int, d: int) -> bool:
    """Whether four cells forming a 2x2 square are all walls or crates, a crate off a goal."""
    off_goal = False
    for x in (a, b, c, d):
        if grid[x] & FLOOR and not grid[x] & CRATE:
            return False
        off_goal |= grid[x] & (CRATE | GOAL) == CRATE
    return off_goal


@njit(cache=True)
def frozen_kernel(grid: np.ndarray, width: int, cell: int) -> bool:
    """Whether the crate just pushed onto ``cell`` makes the state dead.

    ``grid`` holds the cell flags with ``LIVE`` and ``CRATE`` set. Dead when the crate is
    frozen off a goal, or closes a 2x2 block of walls and crates with a crate off a goal.
    """
    if (grid[cell] & GOAL == 0 and _crate_blocked(grid, cell, 1, width)
            and _crate_blocked(grid, cell, width, 1)):
        return True
    return frozen_square(grid, width, cell)


@njit(cache=True)
def frozen_square(grid: np.ndarray, width: int, cell: int) -> bool:
    """Whether the crate on ``cell`` closes a 2x2 block of walls and crates with a crate off a
    goal (none of them can move again). ``grid`` holds the cell flags with ``CRATE`` set."""
    w = width
    return (_stuck_square(grid, cell, cell - 1, cell - w, cell - w - 1)
            or _stuck_square(grid, cell, cell + 1, cell - w, cell - w + 1)
            or _stuck_square(grid, cell, cell - 1, cell + w, cell + w - 1)
            or _stuck_square(grid, cell, cell + 1, cell + w, cell + w + 1))


@njit(cache=True)
def push_pruned(grid: np.ndarray, width: int, src: int, dst: int) -> bool:
    """Whether the searches skip pushing the crate on ``src`` to ``dst``: the push is blocked
    (wall or crate), lands on a dead square, or freezes the crate off a goal."""
    if grid[dst] & (LIVE | CRATE) != LIVE:
        return True
    grid[src] &= NOT_CRATE
    grid[dst] |= CRATE
    dead = frozen_kernel(grid, width, dst)
    grid[src] |= CRATE
    grid[dst] &= NOT_CRATE
    return dead


def live_cells(level: Level) -> np.ndarray:
    """Flat ``uint8`` mask of live cells (a lone crate there can still reach a goal)."""
    return live_kernel(board_array(level), level.width)


def dead_squares(level: Level) -> np.ndarray:
    """(H, W) bool: floor cells from which a crate can never reach any goal."""
    live = live_cells(level).reshape(level.height, level.width).astype(bool)
    return level.floor & ~live


def search_grid(level: Level) -> np.ndarray:
    """The level's cell flags with ``LIVE`` set on live cells, as the searches use them."""
    board = board_array(level)
    return board | live_kernel(board, level.width) * LIVE


def is_frozen_dead(level: Level, state: State, cell: int) -> bool:
    """The cheap frozen test for the crate on ``cell`` in ``state`` (used for pruning)."""
    grid = search_grid(level)
    grid[list(state.crates)] |= CRATE
    return bool(frozen_kernel(grid, level.width, cell))


class _Solvable(Protocol):
    def is_solvable(self, state: State) -> bool: ...


def is_dead(sset: _Solvable, state: State) -> bool:
    """Exact: the state cannot be solved any more (``sset`` is the level's solvable set)."""
    return not sset.is_solvable(state)
