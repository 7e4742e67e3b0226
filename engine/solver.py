"""The optimal solver: forward breadth-first search over the dense state index.

Every action counts as one move, so the first solved state the search meets is at the fewest
moves. States are pruned only by sound tests (crates pushed onto dead squares, frozen crates
off goals), so "unsolvable" is exact; a search that would store more than ``max_states``
states, or whose index would not fit, answers "too_large" instead.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from numba import njit

from engine.deadlock import frozen_kernel
from engine.index import DenseIndex, StateSpaceTooLarge, grown, has_bit, pack, rank, set_bit, unpack
from engine.levels import Level, State
from engine.rules import ACTIONS, GOAL, board_array, step_kernel

DEFAULT_MAX_STATES = 5_000_000
SOLVED, UNSOLVABLE, TOO_LARGE = 0, 1, 2
_STATUS = ("solved", "unsolvable", "too_large")


class SolveResult(NamedTuple):
    """The solver's answer; ``moves``, ``pushes`` and ``solution`` are None unless solved."""

    status: str
    moves: int | None
    pushes: int | None
    solution: str | None
    states_expanded: int


@njit(cache=True)
def all_on_goals(board: np.ndarray, crates: np.ndarray) -> bool:
    """Whether every crate stands on a goal."""
    for i in range(crates.size):
        if board[crates[i]] & GOAL == 0:
            return False
    return True


@njit(cache=True)
def _path(parent: np.ndarray, action: np.ndarray, node: int) -> np.ndarray:
    """Actions (push flag in bit 2) from the root to ``node``."""
    length = 0
    n = node
    while n > 0:
        length += 1
        n = parent[n]
    out = np.empty(length, np.int8)
    n = node
    for i in range(length - 1, -1, -1):
        out[i] = action[n]
        n = parent[n]
    return out


@njit(cache=True)
def bfs_kernel(board: np.ndarray, width: int, live: np.ndarray, cell_id: np.ndarray,
               floor_id: np.ndarray, n_floor: int, binom: np.ndarray, size: int,
               player: int, start: np.ndarray, max_states: int) -> tuple[int, int, np.ndarray]:
    """Breadth-first search from (player, start crates) to any all-on-goals state.

    Returns (status, states expanded, actions of one optimal solution with the push flag in
    bit 2). Pushes onto non-live cells and frozen-off-goal pushes are not followed.
    """
    k = start.size
    empty = np.empty(0, np.int8)
    if all_on_goals(board, start):
        return SOLVED, 0, empty
    visited = np.zeros(size // 64 + 1, np.uint64)
    codes = np.empty(1024, np.uint64)
    parent = np.empty(1024, np.int64)
    action = np.empty(1024, np.int8)
    occ = np.zeros(board.size, np.uint8)
    crates = np.empty(k, np.int64)
    work = np.empty(k, np.int64)
    root = rank(cell_id, floor_id, binom, n_floor, player, start)
    if root < 0:
        return UNSOLVABLE, 0, empty
    set_bit(visited, root)
    codes[0] = pack(player, start)
    parent[0] = -1
    head, tail = 0, 1
    while head < tail:
        p = unpack(codes[head], crates)
        for a in range(4):
            work[:] = crates
            q, slot = step_kernel(board, width, p, work, a)
            if q == p:
                continue
            if slot >= 0:
                t = q + (q - p)
                if live[t] == 0:
                    continue
                for i in range(k):
                    occ[work[i]] = 1
                dead = frozen_kernel(board, live, occ, width, t)
                for i in range(k):
                    occ[work[i]] = 0
                if dead:
                    continue
            idx = rank(cell_id, floor_id, binom, n_floor, q, work)
            if has_bit(visited, idx):
                continue
            set_bit(visited, idx)
            if tail >= max_states:
                return TOO_LARGE, head, empty
            codes = grown(codes, tail + 1)
            parent = grown(parent, tail + 1)
            action = grown(action, tail + 1)
            codes[tail] = pack(q, work)
            parent[tail] = head
            action[tail] = a | (4 if slot >= 0 else 0)
            if slot >= 0 and all_on_goals(board, work):
                return SOLVED, head + 1, _path(parent, action, tail)
            tail += 1
        head += 1
    return UNSOLVABLE, head, empty


def solve(level: Level, state: State | None = None,
          max_states: int = DEFAULT_MAX_STATES) -> SolveResult:
    """Fewest-moves solution of ``level`` from ``state`` (default: its start)."""
    state = level.start if state is None else state
    try:
        index = DenseIndex.for_level(level)
    except StateSpaceTooLarge:
        return SolveResult("too_large", None, None, None, 0)
    board = board_array(level)
    live = np.zeros(board.size, np.uint8)
    live[index.cells] = 1
    start = np.array(state.crates, dtype=np.int64)
    status, expanded, path = bfs_kernel(
        board, level.width, live, index.cell_id, index.floor_id, index.floor_cells.size,
        index.binom, index.size, state.player, start, max_states)
    if status != SOLVED:
        return SolveResult(_STATUS[status], None, None, None, int(expanded))
    lurd = "".join(ACTIONS[a & 3].upper() if a & 4 else ACTIONS[a & 3] for a in path.tolist())
    return SolveResult("solved", len(lurd), sum(ch.isupper() for ch in lurd), lurd, int(expanded))
