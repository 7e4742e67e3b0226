"""Deadlocks: dead squares, the cheap frozen-crate test, and the exact test via the solvable set.

A cell is live when a lone crate on it can still be pushed to some goal (found by pulling
crates back from every goal); crates on any other cell can never be solved. The frozen test
finds crates that can never move again, off a goal. Both are sound: they never call a
solvable state dead.
"""

from __future__ import annotations

from typing import Protocol

import numpy as np
from numba import njit

from engine.levels import Level, State
from engine.rules import FLOOR, GOAL, board_array, delta


@njit(cache=True)
def live_kernel(board: np.ndarray, width: int) -> np.ndarray:
    """Cells a lone crate can be pushed from to some goal, as ``uint8`` 0/1 (reverse pulls)."""
    live = np.zeros(board.size, np.uint8)
    stack = np.empty(board.size, np.int64)
    top = 0
    for c in range(board.size):
        if board[c] & GOAL and board[c] & FLOOR:
            live[c] = 1
            stack[top] = c
            top += 1
    while top > 0:
        top -= 1
        c = stack[top]
        for a in range(4):
            d = delta(a, width)
            # pulled one cell along d, the player stepping on to c + 2d
            if board[c + d] & FLOOR and board[c + 2 * d] & FLOOR and not live[c + d]:
                live[c + d] = 1
                stack[top] = c + d
                top += 1
    return live


@njit(cache=True)
def _axis_blocked(board: np.ndarray, live: np.ndarray, cell: int, d: int) -> bool:
    """Whether a crate on ``cell`` can never usefully move along ``d``: a wall at one end, or
    dead squares at both."""
    if board[cell - d] & FLOOR == 0 or board[cell + d] & FLOOR == 0:
        return True
    return live[cell - d] == 0 and live[cell + d] == 0


@njit(cache=True)
def _crate_blocked(board: np.ndarray, live: np.ndarray, occ: np.ndarray, cell: int, d: int,
                   across: int) -> bool:
    """Blocked along ``d`` by walls or dead squares, or by a neighbour crate that is itself
    blocked ``across`` (it cannot move along ``d`` while this crate stays)."""
    if _axis_blocked(board, live, cell, d):
        return True
    for n in (cell - d, cell + d):
        if occ[n] and _axis_blocked(board, live, n, across):
            return True
    return False


@njit(cache=True)
def frozen_kernel(board: np.ndarray, live: np.ndarray, occ: np.ndarray, width: int,
                  cell: int) -> bool:
    """Whether the crate just pushed onto ``cell`` makes the state dead.

    Dead when it is frozen off a goal, or it closes a 2x2 block of walls and crates with a
    crate off a goal. ``occ`` marks the cells holding crates.
    """
    frozen = (_crate_blocked(board, live, occ, cell, 1, width)
              and _crate_blocked(board, live, occ, cell, width, 1))
    if frozen and board[cell] & GOAL == 0:
        return True
    for dx in (-1, 1):
        for dy in (-width, width):
            block = True
            off_goal = False
            for c in (cell, cell + dx, cell + dy, cell + dx + dy):
                if board[c] & FLOOR and not occ[c]:
                    block = False
                elif occ[c] and board[c] & GOAL == 0:
                    off_goal = True
            if block and off_goal:
                return True
    return False


def live_cells(level: Level) -> np.ndarray:
    """Flat ``uint8`` mask of live cells (a lone crate there can still reach a goal)."""
    return live_kernel(board_array(level), level.width)


def dead_squares(level: Level) -> np.ndarray:
    """(H, W) bool: floor cells from which a crate can never reach any goal."""
    live = live_cells(level).reshape(level.height, level.width).astype(bool)
    return level.floor & ~live


def is_frozen_dead(level: Level, state: State, cell: int) -> bool:
    """The cheap frozen test for the crate on ``cell`` in ``state`` (used for pruning)."""
    occ = np.zeros(level.height * level.width, np.uint8)
    occ[list(state.crates)] = 1
    return bool(frozen_kernel(board_array(level), live_cells(level), occ, level.width, cell))


class _Solvable(Protocol):
    def is_solvable(self, state: State) -> bool: ...


def is_dead(sset: _Solvable, state: State) -> bool:
    """Exact: the state cannot be solved any more (``sset`` is the level's solvable set)."""
    return not sset.is_solvable(state)
