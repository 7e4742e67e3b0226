"""The optimal solver: forward breadth-first search over the dense state index.

Every action counts as one move, so the first solved state the search meets is at the fewest
moves. States are pruned only by sound tests (crates pushed onto dead squares, frozen crates
off goals), so "unsolvable" is exact; a search that would store more than ``max_states``
states, or whose index would not fit, answers "too_large" instead.
"""

from __future__ import annotations

__all__ = ["DEFAULT_MAX_STATES", "SolveResult", "all_on_goals", "bfs_kernel", "solve"]

from typing import NamedTuple

import numpy as np

from engine.kernel_cache import njit
from engine.levels import Level, State, check_state
from engine.rules import ACTIONS, CRATE, FLOOR, GOAL, NOT_CRATE, delta, moved_crate
from engine.search.deadlock import push_pruned, search_grid
from engine.search.index import (
    DenseIndex,
    StateSpaceTooLarge,
    crate_rank,
    has_bit,
    pack,
    rank,
    set_bit,
    unpack,
    with_player,
)

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

    @property
    def optimal(self) -> tuple[int, int, str]:
        """``(moves, pushes, solution)`` of a solved level; a ValueError for any other."""
        if self.moves is None or self.pushes is None or self.solution is None:
            raise ValueError(f"no solution: the search ended {self.status}")
        return self.moves, self.pushes, self.solution


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
def bfs_kernel(grid: np.ndarray, width: int, cell_id: np.ndarray,
               floor_id: np.ndarray, n_floor: int, binom: np.ndarray, size: int,
               player: int, start: np.ndarray, max_states: int) -> tuple[int, int, np.ndarray]:
    """Breadth-first search from (player, start crates) to any all-on-goals state.

    ``grid`` holds the cell flags with ``LIVE`` set (a copy is used as scratch). Returns
    (status, states expanded, actions of one optimal solution with the push flag in bit 2).
    Pushes onto non-live cells and frozen-off-goal pushes are not followed.
    """
    k = start.size
    empty = np.empty(0, np.int8)
    if all_on_goals(grid, start):
        return SOLVED, 0, empty
    grid = grid.copy()
    visited = np.zeros(size // 64 + 1, np.uint64)
    capacity = min(size, max_states)  # distinct states never outnumber the index
    codes = np.empty(capacity, np.uint64)
    parent = np.empty(capacity, np.int32)
    action = np.empty(capacity, np.int8)
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
        code = codes[head]
        p = unpack(code, crates)
        for i in range(k):
            grid[crates[i]] |= CRATE
        base = crate_rank(cell_id, binom, crates) * n_floor
        for a in range(4):
            d = delta(a, width)
            q = p + d
            if grid[q] & FLOOR == 0:
                continue
            pushed = grid[q] & CRATE != 0
            if pushed:
                t = q + d
                if push_pruned(grid, width, q, t):
                    continue
                moved_crate(crates, q, t, work)
                idx = crate_rank(cell_id, binom, work) * n_floor + floor_id[q]
                child = pack(q, work)
            else:
                idx = base + floor_id[q]
                child = with_player(code, q)
            if has_bit(visited, idx):
                continue
            set_bit(visited, idx)
            if tail >= max_states:
                return TOO_LARGE, head, empty
            codes[tail] = child
            parent[tail] = head
            action[tail] = a | (4 if pushed else 0)
            if pushed and all_on_goals(grid, work):
                return SOLVED, head + 1, _path(parent, action, tail)
            tail += 1
        for i in range(k):
            grid[crates[i]] &= NOT_CRATE
        head += 1
    return UNSOLVABLE, head, empty


def solve(level: Level, state: State | None = None,
          max_states: int = DEFAULT_MAX_STATES) -> SolveResult:
    """Fewest-moves solution of ``level`` from ``state`` (default: its start)."""
    state = level.start if state is None else state
    check_state(level, state)
    try:
        index = DenseIndex.for_level(level)
    except StateSpaceTooLarge:
        return SolveResult("too_large", None, None, None, 0)
    start = np.array(state.crates, dtype=np.int64)
    status, expanded, path = bfs_kernel(
        search_grid(level), level.width, index.cell_id, index.floor_id, index.floor_cells.size,
        index.binom, index.size, state.player, start, max_states)
    if status != SOLVED:
        return SolveResult(_STATUS[status], None, None, None, int(expanded))
    lurd = "".join(ACTIONS[a & 3].upper() if a & 4 else ACTIONS[a & 3] for a in path.tolist())
    return SolveResult("solved", len(lurd), sum(ch.isupper() for ch in lurd), lurd, int(expanded))
