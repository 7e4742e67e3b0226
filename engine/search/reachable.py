"""Reachable and dead state counts of a start: how much of a level a player can wander into.

Two searches give the same numbers (solved states terminal). ``reachable_stats`` follows the
definition literally: forward breadth-first search over single moves with the game's own
``step_kernel``. ``push_reachable_stats`` is several times faster: a node is a crate set with
the region its player can walk, every state of that region is reachable, and all of them
share one solvable-or-dead answer. Grading counts these for every candidate, so it uses the
fast one; the tests hold it to the literal one on levels too large for the Python oracle.
"""

from __future__ import annotations

__all__ = [
    "MAX_NODES", "ReachableStats", "flood_kernel", "push_reach_kernel", "push_reachable_stats",
    "reachable_kernel", "reachable_stats",
]

from collections.abc import Callable
from typing import NamedTuple

import numpy as np

from engine.kernel_cache import njit
from engine.levels import Level, State, check_state
from engine.rules import FLOOR, board_array, resort, step_kernel
from engine.search.index import DenseIndex, StateSpaceTooLarge, has_bit, pack, rank, set_bit, unpack
from engine.search.reverse import SolvableSet, solvable_set
from engine.search.solver import DEFAULT_MAX_STATES, all_on_goals

MAX_NODES = 20_000_000


@njit(cache=True)
def flood_kernel(board: np.ndarray, width: int, occ: np.ndarray, start: int, mark: np.ndarray,
                 stamp: int, stack: np.ndarray, visited: np.ndarray, base: int,
                 floor_id: np.ndarray) -> int:
    """Flood the player's walkable region from ``start``, marking each of its states (dense
    index ``base + floor_id[cell]``) in ``visited``; return the region's size."""
    mark[start] = stamp
    stack[0] = start
    top, count = 1, 0
    while top > 0:
        top -= 1
        cell = stack[top]
        count += 1
        set_bit(visited, base + floor_id[cell])
        for d in (-width, width, -1, 1):
            nxt = cell + d
            if board[nxt] & FLOOR and occ[nxt] == 0 and mark[nxt] != stamp:
                mark[nxt] = stamp
                stack[top] = nxt
                top += 1
    return count


@njit(cache=True)
def _is_dead(live_id: np.ndarray, floor_id: np.ndarray, live_binom: np.ndarray, n_floor: int,
             words: np.ndarray, player: int, crates: np.ndarray) -> bool:
    live = rank(live_id, floor_id, live_binom, n_floor, player, crates)
    return live < 0 or not has_bit(words, live)


@njit(cache=True)
def reachable_kernel(board: np.ndarray, width: int, cell_id: np.ndarray, floor_id: np.ndarray,
                     n_floor: int, binom: np.ndarray, size: int, player: int,
                     start: np.ndarray, live_id: np.ndarray, live_binom: np.ndarray,
                     words: np.ndarray, max_states: int) -> tuple[int, int]:
    """(reachable states, dead ones among them) from (player, start), by forward
    breadth-first search over single moves without pruning; (-1, -1) past ``max_states``."""
    k = start.size
    visited = np.zeros(size // 64 + 1, np.uint64)
    codes = np.empty(min(size, max_states), np.uint64)
    crates = np.empty(k, np.int64)
    work = np.empty(k, np.int64)
    set_bit(visited, rank(cell_id, floor_id, binom, n_floor, player, start))
    codes[0] = pack(player, start)
    head, tail, dead = 0, 1, 0
    while head < tail:
        p = unpack(codes[head], crates)
        head += 1
        if _is_dead(live_id, floor_id, live_binom, n_floor, words, p, crates):
            dead += 1
        if all_on_goals(board, crates):
            continue
        for a in range(4):
            work[:] = crates
            q, _ = step_kernel(board, width, p, work, a)
            if q == p:
                continue
            idx = rank(cell_id, floor_id, binom, n_floor, q, work)
            if has_bit(visited, idx):
                continue
            set_bit(visited, idx)
            if tail >= codes.size:
                return -1, -1
            codes[tail] = pack(q, work)
            tail += 1
    return tail, dead


@njit(cache=True)
def push_reach_kernel(board: np.ndarray, width: int, cell_id: np.ndarray, floor_id: np.ndarray,
                      n_floor: int, binom: np.ndarray, size: int, player: int,
                      start: np.ndarray, live_id: np.ndarray, live_binom: np.ndarray,
                      words: np.ndarray, max_nodes: int) -> tuple[int, int]:
    """(reachable states, dead ones) from (player, start); (-1, -1) past ``max_nodes``.

    The queue holds entry states (the player just after a push). Expanding one floods its
    region once, counting and marking every state of it in ``flooded``; an entry state that a
    flood already marked belongs to a counted region and is dropped with one bit test. The
    board has a closed wall ring, so flooding never leaves the array.
    """
    k = start.size
    n = board.size
    occ = np.zeros(n, np.uint8)
    mark = np.zeros(n, np.int64)
    stack = np.empty(n, np.int64)
    flooded = np.zeros(size // 64 + 1, np.uint64)
    queued = np.zeros(size // 64 + 1, np.uint64)
    codes = np.empty(min(size, max_nodes), np.uint64)
    crates = np.empty(k, np.int64)
    moved = np.empty(k, np.int64)
    if all_on_goals(board, start):
        return 1, 0
    set_bit(queued, rank(cell_id, floor_id, binom, n_floor, player, start))
    codes[0] = pack(player, start)
    head, tail, stamp, reachable, dead = 0, 1, 0, 0, 0
    while head < tail:
        p = unpack(codes[head], crates)
        head += 1
        idx = rank(cell_id, floor_id, binom, n_floor, p, crates)
        if has_bit(flooded, idx):
            continue
        if all_on_goals(board, crates):
            # Solved states are terminal: only the state entered is reached.
            reachable += 1
            continue
        for i in range(k):
            occ[crates[i]] = 1
        stamp += 1
        cells = flood_kernel(board, width, occ, p, mark, stamp, stack, flooded,
                             idx - floor_id[p], floor_id)
        reachable += cells
        if _is_dead(live_id, floor_id, live_binom, n_floor, words, p, crates):
            dead += cells
        for i in range(k):
            c = crates[i]
            for d in (-width, width, -1, 1):
                to = c + d
                if mark[c - d] != stamp or board[to] & FLOOR == 0 or occ[to] != 0:
                    continue
                moved[:] = crates
                moved[i] = to
                resort(moved, i)
                nxt = rank(cell_id, floor_id, binom, n_floor, c, moved)
                if has_bit(queued, nxt) or has_bit(flooded, nxt):
                    continue
                set_bit(queued, nxt)
                if tail >= codes.size:
                    return -1, -1
                codes[tail] = pack(c, moved)
                tail += 1
        for i in range(k):
            occ[crates[i]] = 0
    return reachable, dead


class ReachableStats(NamedTuple):
    """States reachable from a start (solved ones are terminal) and how many are dead."""

    reachable: int
    dead: int


def reachable_stats(level: Level, state: State | None = None, sset: SolvableSet | None = None,
                    max_states: int = DEFAULT_MAX_STATES) -> ReachableStats:
    """States reachable from ``state`` (default: the start) and how many are dead, counted
    move by move: the reference ``push_reachable_stats`` is tested against.

    Raises ``StateSpaceTooLarge`` when the search would pass ``max_states`` states and
    ``ValueError`` for a state not of the level.
    """
    sset = solvable_set(level) if sset is None else sset
    reachable, dead = _count(reachable_kernel, level, sset, state, max_states)
    if reachable < 0:
        raise StateSpaceTooLarge(f"more than {max_states} states reachable")
    return ReachableStats(reachable, dead)


def push_reachable_stats(level: Level, sset: SolvableSet, state: State | None = None,
                         max_nodes: int = MAX_NODES) -> ReachableStats:
    """States reachable from ``state`` (default: the start) and how many are dead.

    ``sset`` is the level's solvable set. Raises ``StateSpaceTooLarge`` past ``max_nodes``
    and ``ValueError`` for a state not of the level.
    """
    reachable, dead = _count(push_reach_kernel, level, sset, state, max_nodes)
    if reachable < 0:
        raise StateSpaceTooLarge(f"more than {max_nodes} push-level nodes reachable")
    return ReachableStats(reachable, dead)


def _count(kernel: Callable, level: Level, sset: SolvableSet, state: State | None,
           bound: int) -> tuple[int, int]:
    """One of the two counting kernels run from ``state`` (default: the start)."""
    state = level.start if state is None else state
    check_state(level, state)
    index = DenseIndex.for_level(level, crates_on="floor")
    reachable, dead = kernel(
        board_array(level), level.width, index.cell_id, index.floor_id,
        index.floor_cells.size, index.binom, index.size, state.player,
        np.array(state.crates, dtype=np.int64), sset.index.cell_id, sset.index.binom,
        sset.words, bound)
    return int(reachable), int(dead)
