"""The solvable set: every state from which a level can still be solved, with its distance.

A backward breadth-first search starts from every solved state (crates on the goals, the
player on any free floor cell) and follows reverse moves and pulls, one player step each, so
a state's depth is its exact fewest-moves distance to solved (solved states are terminal).

Storage, for a level with N dense indices and S solvable states: a bitset of the solvable
indices (N/8 bytes), the number of solvable states before each 64-bit word (N/16 bytes), and
the S distances in index order (one byte each, two when a distance exceeds 254). An 8x8 level
with 4 crates takes a few hundred kilobytes at most.
"""

from __future__ import annotations

__all__ = [
    "MAX_SET_INDEX", "RECENT_BYTES", "SolvableSet", "UNSEEN", "backward_kernel", "compress_kernel",
    "descend_kernel", "optimal_actions", "popcount", "position_kernel", "solvable_set",
    "within_kernel",
]

from collections import OrderedDict
from dataclasses import dataclass

import numpy as np

from engine.kernel_cache import njit
from engine.levels import Level, State
from engine.rules import (
    CRATE,
    FLOOR,
    NOT_CRATE,
    board_array,
    delta,
    is_free,
    moved_crate,
    step_kernel,
)
from engine.search.index import (
    DenseIndex,
    crate_rank,
    has_bit,
    pack,
    rank,
    unpack,
    unrank_many,
    with_player,
)

UNSEEN = 0xFFFF
RECENT_BYTES = 64 * 2**20  # solvable sets kept for boards asked for again (see solvable_set)
_recent: OrderedDict[tuple, SolvableSet] = OrderedDict()
_recent_bytes = 0
# The search holds 10 bytes per dense index (distance and queue): 2**26 of them is 640 MB.
MAX_SET_INDEX = 2**26


@njit(cache=True)
def _reach(dist: np.ndarray, codes: np.ndarray, tail: int, idx: int, code: np.uint64,
           depth: int) -> int:
    """Record a newly seen state at ``depth`` and queue it; returns the queue's length."""
    if dist[idx] != UNSEEN:
        return tail
    dist[idx] = depth
    codes[tail] = code
    return tail + 1


@njit(cache=True)
def backward_kernel(board: np.ndarray, width: int, cell_id: np.ndarray, floor_id: np.ndarray,
                    n_floor: int, binom: np.ndarray, size: int,
                    goals: np.ndarray) -> np.ndarray:
    """Fewest-moves distance to solved of every dense index (``UNSEEN`` when unsolvable).

    ``board`` holds the cell flags (a copy is used as scratch)."""
    k = goals.size
    board = board.copy()
    dist = np.full(size, UNSEEN, np.uint16)
    codes = np.empty(size, np.uint64)  # each state is queued at most once
    tail = 0
    for p in range(board.size):
        if is_free(board, goals, p):
            idx = rank(cell_id, floor_id, binom, n_floor, p, goals)
            tail = _reach(dist, codes, tail, idx, pack(p, goals), 0)
    crates = np.empty(k, np.int64)
    work = np.empty(k, np.int64)
    head, depth, layer_end = 0, 0, tail
    while head < tail:
        if head == layer_end:
            depth += 1
            layer_end = tail
            if depth >= UNSEEN:
                raise ValueError("a distance beyond 65534 moves does not fit the search")
        code = codes[head]
        p = unpack(code, crates)
        head += 1
        for i in range(k):
            board[crates[i]] |= CRATE
        base = crate_rank(cell_id, binom, crates) * n_floor
        for a in range(4):
            d = delta(a, width)
            q = p - d  # the player came from q by one step along d ...
            if board[q] & (FLOOR | CRATE) != FLOOR:
                continue
            idx = base + floor_id[q]
            tail = _reach(dist, codes, tail, idx, with_player(code, q), depth + 1)
            # ... or pushed the crate now on p + d from p
            if board[p + d] & CRATE and cell_id[p] >= 0:
                moved_crate(crates, p + d, p, work)
                idx = crate_rank(cell_id, binom, work) * n_floor + floor_id[q]
                tail = _reach(dist, codes, tail, idx, pack(q, work), depth + 1)
        for i in range(k):
            board[crates[i]] &= NOT_CRATE
    return dist


@njit(cache=True)
def compress_kernel(dist: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Bitset of seen indices, seen count before each word, and the seen distances in order."""
    n_words = dist.size // 64 + 1
    words = np.zeros(n_words, np.uint64)
    prefix = np.zeros(n_words, np.int32)
    count = 0
    for i in range(dist.size):
        if dist[i] != UNSEEN:
            count += 1
    values = np.empty(count, np.uint16)
    j = 0
    for w in range(n_words):
        prefix[w] = j
        for b in range(64):
            i = w * 64 + b
            if i < dist.size and dist[i] != UNSEEN:
                words[w] |= np.uint64(1) << np.uint64(b)
                values[j] = dist[i]
                j += 1
    return words, prefix, values


@njit(cache=True)
def popcount(x: np.uint64) -> int:
    """Number of set bits of a 64-bit word."""
    x = x - ((x >> np.uint64(1)) & np.uint64(0x5555555555555555))
    x = (x & np.uint64(0x3333333333333333)) + ((x >> np.uint64(2)) & np.uint64(0x3333333333333333))
    x = (x + (x >> np.uint64(4))) & np.uint64(0x0F0F0F0F0F0F0F0F)
    return int((x * np.uint64(0x0101010101010101)) >> np.uint64(56))


@njit(cache=True)
def within_kernel(words: np.ndarray, distances: np.ndarray, lo: int, hi: int) -> np.ndarray:
    """Dense indices of the solvable states at distance in [lo, hi], ascending (without
    unpacking every index: a generator asks several times per set)."""
    count = 0
    for j in range(distances.size):
        if lo <= distances[j] <= hi:
            count += 1
    out = np.empty(count, np.int64)
    j, k = 0, 0
    for w in range(words.size):
        word = words[w]
        if word == 0:
            continue
        for b in range(64):
            if word & (np.uint64(1) << np.uint64(b)):
                if lo <= distances[j] <= hi:
                    out[k] = w * 64 + b
                    k += 1
                j += 1
    return out


@njit(cache=True)
def position_kernel(words: np.ndarray, prefix: np.ndarray, idx: int) -> int:
    """Position of dense index ``idx`` among the solvable states, or -1 when not solvable."""
    if idx < 0 or not has_bit(words, idx):
        return -1
    below = (np.uint64(1) << np.uint64(idx & 63)) - np.uint64(1)
    return prefix[idx >> 6] + popcount(words[idx >> 6] & below)


@dataclass(frozen=True, eq=False)
class SolvableSet:
    """Every solvable state of a level with its fewest-moves distance to solved."""

    level: Level
    index: DenseIndex
    words: np.ndarray
    prefix: np.ndarray
    distances: np.ndarray

    @property
    def count(self) -> int:
        return int(self.distances.size)

    @property
    def max_distance(self) -> int:
        return int(self.distances.max())

    @property
    def nbytes(self) -> int:
        return int(self.words.nbytes + self.prefix.nbytes + self.distances.nbytes)

    def _position(self, state: State) -> int:
        return int(position_kernel(self.words, self.prefix, self.index.index_of(state)))

    def is_solvable(self, state: State) -> bool:
        """Whether the level can still be solved from ``state``."""
        return self._position(state) >= 0

    def distance(self, state: State) -> int:
        """Fewest moves from ``state`` to solved, -1 when it cannot be solved."""
        pos = self._position(state)
        return int(self.distances[pos]) if pos >= 0 else -1

    def indices(self) -> np.ndarray:
        """Dense indices of every solvable state, ascending (aligned with ``distances``)."""
        bits = np.unpackbits(self.words.view(np.uint8), bitorder="little")
        return np.flatnonzero(bits).astype(np.int64)

    def histogram(self) -> np.ndarray:
        """Number of solvable states at each distance 0..max_distance."""
        return np.bincount(self.distances)

    def states_at(self, d: int) -> list[State]:
        """Every solvable state exactly ``d`` moves from solved."""
        return self.index.states_of(self.indices()[self.distances == d])

    def start_indices(self, lo: int, hi: int, crates_off_goals: bool = True) -> np.ndarray:
        """Dense indices of the states at distance in [lo, hi] (by default with no crate on a
        goal), ascending: the candidates a generator draws starts from."""
        candidates = within_kernel(self.words, self.distances, lo, hi)
        if crates_off_goals and candidates.size:
            _, crates = self._unranked(candidates)
            candidates = candidates[~self.level.goals.ravel()[crates].any(axis=1)]
        return candidates

    def sample_start(self, rng: np.random.Generator, lo: int, hi: int,
                     crates_off_goals: bool = True) -> State | None:
        """A uniformly drawn state at distance in [lo, hi] (by default with no crate on a
        goal), or None when there is none."""
        candidates = self.start_indices(lo, hi, crates_off_goals)
        if not candidates.size:
            return None
        return self.index.states_of(candidates[[rng.integers(candidates.size)]])[0]

    def draw_start(self, rng: np.random.Generator, lo: int, hi: int,
                   tries: int = 256) -> State | None:
        """A state drawn uniformly among those at distance in [lo, hi] with no crate on a
        goal, by rejection over all solvable states: nothing is enumerated, so it suits sets
        of tens of millions of states. None after ``tries`` misses."""
        if not ((self.distances >= lo) & (self.distances <= hi)).any():
            return None
        goals = self.level.goals.ravel()
        for _ in range(tries):
            pos = int(rng.integers(self.count))
            if not lo <= int(self.distances[pos]) <= hi:
                continue
            word = int(np.searchsorted(self.prefix, pos, side="right")) - 1
            bits, skip = int(self.words[word]), pos - int(self.prefix[word])
            for _ in range(skip):
                bits &= bits - 1  # drop the lowest set bit
            index = word * 64 + (bits & -bits).bit_length() - 1
            state = self.index.states_of(np.array([index]))[0]
            if not goals[list(state.crates)].any():
                return state
        return None

    def _unranked(self, indices: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        ix = self.index
        return unrank_many(indices, ix.cells, ix.floor_cells, ix.binom, ix.n_crates)


def solvable_set(level: Level, max_size: int = MAX_SET_INDEX) -> SolvableSet:
    """Backward search from every solved state; raises ``StateSpaceTooLarge`` when the level's
    dense index has more than ``max_size`` states.

    The set depends on the board alone (walls and goals), not on the start, and the pipeline
    asks for one board several times (generate, then grade): the latest sets are kept, up
    to ``RECENT_BYTES``, and given back as they are.
    """
    key = (level.walls.shape, level.walls.tobytes(), level.goals.tobytes(), max_size)
    found = _recent.get(key)
    if found is not None:
        _recent.move_to_end(key)
        return found
    found = _search(level, max_size)
    _recent[key] = found
    global _recent_bytes
    _recent_bytes += found.nbytes
    while _recent_bytes > RECENT_BYTES and len(_recent) > 1:
        _recent_bytes -= _recent.popitem(last=False)[1].nbytes
    return found


def _search(level: Level, max_size: int) -> SolvableSet:
    index = DenseIndex.for_level(level, max_size=max_size)
    goals = np.array(level.goal_cells, dtype=np.int64)
    dist = backward_kernel(board_array(level), level.width, index.cell_id, index.floor_id,
                           index.floor_cells.size, index.binom, index.size, goals)
    words, prefix, values = compress_kernel(dist)
    if values.size and values.max() < 255:
        values = values.astype(np.uint8)
    return SolvableSet(level, index, words, prefix, values)


@njit(cache=True)
def descend_kernel(board: np.ndarray, width: int, cell_id: np.ndarray, floor_id: np.ndarray,
                   n_floor: int, binom: np.ndarray, words: np.ndarray, prefix: np.ndarray,
                   distances: np.ndarray, player: int, crates: np.ndarray) -> np.ndarray:
    """An optimal solution from (player, crates), as actions: each step goes to a successor
    one move closer to solved (the first in action order), so the result is deterministic."""
    pos = position_kernel(words, prefix, rank(cell_id, floor_id, binom, n_floor, player,
                                              crates))
    if pos < 0:
        return np.empty(0, np.int8)
    d = int(distances[pos])
    out = np.empty(d, np.int8)
    work = np.empty(crates.size, np.int64)
    for i in range(d):
        for a in range(4):
            work[:] = crates
            q, _ = step_kernel(board, width, player, work, a)
            if q == player:
                continue
            p = position_kernel(words, prefix, rank(cell_id, floor_id, binom, n_floor, q,
                                                    work))
            if p >= 0 and distances[p] == d - 1 - i:
                out[i] = a
                player = q
                crates[:] = work
                break
    return out


def optimal_actions(sset: SolvableSet, state: State | None = None) -> list[int]:
    """Actions of one optimal solution from ``state`` (default: the start); empty when the
    state is solved or cannot be solved."""
    level = sset.level
    state = level.start if state is None else state
    if sset.index.index_of(state) < 0:
        return []
    ix = sset.index
    path = descend_kernel(board_array(level), level.width, ix.cell_id, ix.floor_id,
                          ix.floor_cells.size, ix.binom, sset.words, sset.prefix,
                          sset.distances, state.player, np.array(state.crates, np.int64))
    return [int(a) for a in path]
