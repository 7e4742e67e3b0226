"""How many optimal solutions a level has, and how bushy its search is, by layered BFS.

A forward breadth-first search that carries, for every state, the number of shortest action
sequences reaching it; at the first layer holding a solved state the sum of those counts is the
number of optimal solutions. Counts saturate at a cap. The mean number of live successors per
expanded state is the level's branching factor. Both are difficulty features.
"""

from __future__ import annotations

__all__ = [
    "MAX_COUNTED_STATES", "OptimalPaths", "SOLUTION_COUNT_CAP", "layered_count_kernel",
    "optimal_paths",
]

from typing import NamedTuple

import numpy as np

from engine.kernel_cache import njit
from engine.levels import Level
from engine.rules import CRATE, FLOOR, NOT_CRATE, delta, moved_crate
from engine.search.deadlock import push_pruned, search_grid
from engine.search.index import DenseIndex, pack, rank, unpack
from engine.search.solver import all_on_goals

SOLUTION_COUNT_CAP = 1_000_000_000
# The count table holds one int32 per indexed state; larger indices are refused.
MAX_COUNTED_STATES = 1 << 26


class OptimalPaths(NamedTuple):
    """Optimum (-1 if none), optimal solutions (capped), states expanded, mean live successors."""

    moves: int
    solutions: int
    expanded: int
    branching: float


@njit(cache=True)
def layered_count_kernel(grid: np.ndarray, width: int, cell_id: np.ndarray,
                         floor_id: np.ndarray, n_floor: int, binom: np.ndarray, size: int,
                         player: int, start: np.ndarray, cap: int) -> tuple[int, int, int, int]:
    """Return (optimal moves or -1, optimal solutions capped at ``cap``, states expanded, live
    successors generated). ``grid`` holds the cell flags with ``LIVE`` set."""
    k = start.size
    grid = grid.copy()
    pos = np.full(size, -1, np.int32)
    codes = np.empty(min(size, 1 << 16), np.uint64)
    counts = np.empty(codes.size, np.int64)
    crates = np.empty(k, np.int64)
    work = np.empty(k, np.int64)
    root = rank(cell_id, floor_id, binom, n_floor, player, start)
    if root < 0:
        return -1, 0, 0, 0
    pos[root] = 0
    codes[0] = pack(player, start)
    counts[0] = 1
    lo, hi, tail = 0, 1, 1
    depth = 0
    expanded = 0
    branches = 0
    while lo < hi:
        total = 0
        for i in range(lo, hi):
            unpack(codes[i], crates)
            if all_on_goals(grid, crates):
                total = min(cap, total + counts[i])
        if total > 0:
            return depth, total, expanded, branches
        for i in range(lo, hi):
            p = unpack(codes[i], crates)
            expanded += 1
            for j in range(k):
                grid[crates[j]] |= CRATE
            for a in range(4):
                d = delta(a, width)
                q = p + d
                if grid[q] & FLOOR == 0:
                    continue
                if grid[q] & CRATE:
                    t = q + d
                    if push_pruned(grid, width, q, t):
                        continue
                    moved_crate(crates, q, t, work)
                else:
                    work[:] = crates
                branches += 1
                idx = rank(cell_id, floor_id, binom, n_floor, q, work)
                at = pos[idx]
                if at < 0:
                    if tail == codes.size:
                        codes = _doubled(codes)
                        counts = _doubled(counts)
                    pos[idx] = tail
                    codes[tail] = pack(q, work)
                    counts[tail] = counts[i]
                    tail += 1
                elif at >= hi:
                    counts[at] = min(cap, counts[at] + counts[i])
            for j in range(k):
                grid[crates[j]] &= NOT_CRATE
        lo, hi = hi, tail
        depth += 1
    return -1, 0, expanded, branches


@njit(cache=True)
def _doubled(a: np.ndarray) -> np.ndarray:
    b = np.empty(2 * a.size, a.dtype)
    b[:a.size] = a
    return b


def optimal_paths(level: Level, cap: int = SOLUTION_COUNT_CAP) -> OptimalPaths:
    """Count the optimal solutions of ``level`` from its start and its mean branching factor.

    Raises ``engine.search.index.StateSpaceTooLarge`` when the level's state index exceeds
    ``MAX_COUNTED_STATES``.
    """
    index = DenseIndex.for_level(level, max_size=MAX_COUNTED_STATES)
    start = np.array(level.start.crates, dtype=np.int64)
    if index.index_of(level.start) < 0:
        return OptimalPaths(-1, 0, 0, 0.0)
    moves, solutions, expanded, branches = layered_count_kernel(
        search_grid(level), level.width, index.cell_id, index.floor_id, index.floor_cells.size,
        index.binom, index.size, level.start.player, start, cap)
    branching = branches / expanded if expanded else 0.0
    return OptimalPaths(int(moves), int(solutions), int(expanded), float(branching))
