"""Dense state indexing: every (player, crate set) of a level as one integer in [0, size).

Crates may stand only on a chosen cell set (the live cells for search, all floor cells for
plain reachability); the crate set is ranked in the combinatorial number system over those
cells' ids, and the index is ``rank * n_floor + player_floor_id``. States also travel packed
in one ``uint64`` (8 bits per cell: the player, then the sorted crates), so search queues
never need to unrank.
"""

from __future__ import annotations

__all__ = [
    "DenseIndex", "MAX_INDEX_SIZE", "StateSpaceTooLarge", "crate_rank", "has_bit", "pack", "rank",
    "set_bit", "unpack", "unrank", "unrank_many", "with_player",
]

import math
from dataclasses import dataclass

import numpy as np

from engine.errors import SokoforgeError
from engine.kernel_cache import njit
from engine.levels import MAX_CRATES, Level, State
from engine.search.deadlock import live_cells

# A dense index larger than this is refused (a 2**29-bit visited set is 64 MB).
MAX_INDEX_SIZE = 2**29


class StateSpaceTooLarge(SokoforgeError, ValueError):
    """The level's dense state index would not fit the engine's memory bound."""


@njit(cache=True)
def pack(player: int, crates: np.ndarray) -> np.uint64:
    """Player and sorted crates in one ``uint64``, 8 bits each."""
    code = np.uint64(player)
    for i in range(crates.size):
        code |= np.uint64(crates[i]) << np.uint64(8 * (i + 1))
    return code


@njit(cache=True)
def unpack(code: np.uint64, crates: np.ndarray) -> int:
    """Fill ``crates`` from a packed state and return the player cell."""
    for i in range(crates.size):
        crates[i] = (code >> np.uint64(8 * (i + 1))) & np.uint64(255)
    return np.int64(code & np.uint64(255))  # type: ignore[return-value]  # an int in numba


@njit(cache=True)
def crate_rank(cell_id: np.ndarray, binom: np.ndarray, crates: np.ndarray) -> int:
    """Combinatorial rank of a sorted crate set, or -1 when a crate is off the indexed cells."""
    r = 0
    for i in range(crates.size):
        cid = cell_id[crates[i]]
        if cid < 0:
            return -1
        r += binom[i + 1, cid]
    return r


@njit(cache=True)
def rank(cell_id: np.ndarray, floor_id: np.ndarray, binom: np.ndarray, n_floor: int,
         player: int, crates: np.ndarray) -> int:
    """Dense index of a state, or -1 when a crate is off the indexed cells."""
    r = crate_rank(cell_id, binom, crates)
    return -1 if r < 0 else r * n_floor + floor_id[player]


@njit(cache=True)
def with_player(code: np.uint64, player: int) -> np.uint64:
    """A packed state with the player moved to ``player``."""
    return (code & ~np.uint64(255)) | np.uint64(player)


@njit(cache=True)
def unrank(index: int, cells: np.ndarray, floor_cells: np.ndarray, binom: np.ndarray,
           crates: np.ndarray) -> int:
    """Fill ``crates`` (sorted cells) for a dense index and return the player cell."""
    n_floor = floor_cells.size
    r = index // n_floor
    c = cells.size - 1
    for i in range(crates.size - 1, -1, -1):
        while binom[i + 1, c] > r:
            c -= 1
        crates[i] = cells[c]
        r -= binom[i + 1, c]
        c -= 1
    return floor_cells[index % n_floor]


@njit(cache=True)
def unrank_many(indices: np.ndarray, cells: np.ndarray, floor_cells: np.ndarray,
                binom: np.ndarray, n_crates: int) -> tuple[np.ndarray, np.ndarray]:
    """Players (n,) and crates (n, k) of many dense indices."""
    players = np.empty(indices.size, np.int64)
    crates = np.empty((indices.size, n_crates), np.int64)
    for j in range(indices.size):
        players[j] = unrank(indices[j], cells, floor_cells, binom, crates[j])
    return players, crates


@njit(cache=True)
def has_bit(bits: np.ndarray, idx: int) -> bool:
    """Whether dense index ``idx`` is in a ``uint64`` bitset."""
    return bits[idx >> 6] & (np.uint64(1) << np.uint64(idx & 63)) != 0


@njit(cache=True)
def set_bit(bits: np.ndarray, idx: int) -> None:
    """Add dense index ``idx`` to a ``uint64`` bitset."""
    bits[idx >> 6] |= np.uint64(1) << np.uint64(idx & 63)


def _binomials(n: int, k: int) -> np.ndarray:
    table = np.zeros((k + 1, n + 1), np.int64)
    for j in range(k + 1):
        for c in range(n + 1):
            table[j, c] = math.comb(c, j)
    return table


@dataclass(frozen=True, eq=False)
class DenseIndex:
    """The dense state index of one level (see the module text).

    ``cells`` are the cells crates may stand on, ``cell_id`` maps a cell to its position in
    ``cells`` (-1 elsewhere); ``floor_cells`` and ``floor_id`` do the same for the player.
    """

    width: int
    n_crates: int
    cells: np.ndarray
    cell_id: np.ndarray
    floor_cells: np.ndarray
    floor_id: np.ndarray
    binom: np.ndarray
    size: int

    @classmethod
    def for_level(cls, level: Level, crates_on: str = "live",
                  max_size: int = MAX_INDEX_SIZE) -> DenseIndex:
        """Index over live cells (``"live"``) or all floor cells (``"floor"``) for the crates.

        Raises ``StateSpaceTooLarge`` when the index would exceed ``max_size`` states.
        """
        if crates_on not in ("live", "floor"):
            raise ValueError(f"crates_on must be 'live' or 'floor', not {crates_on!r}")
        if level.height * level.width > 256 or level.n_crates > MAX_CRATES:
            raise StateSpaceTooLarge("board over 256 cells or too many crates to pack a state")
        floor = level.floor.ravel()
        mask = floor if crates_on == "floor" else live_cells(level).astype(bool) & floor
        cells = np.flatnonzero(mask).astype(np.int64)
        floor_cells = np.flatnonzero(floor).astype(np.int64)
        size = math.comb(cells.size, level.n_crates) * floor_cells.size
        if size > max_size:
            raise StateSpaceTooLarge(
                f"{size} indexed states (crates on {cells.size} cells, player on "
                f"{floor_cells.size}) exceed the bound of {max_size}")
        return cls(level.width, level.n_crates, cells, _ids(cells, floor.size),
                   floor_cells, _ids(floor_cells, floor.size),
                   _binomials(cells.size, level.n_crates), size)

    def index_of(self, state: State) -> int:
        """Dense index of ``state``, or -1 when it is outside the index (a crate off the cells,
        the player off the floor or on a crate, two crates on one cell)."""
        n = self.floor_id.size
        cells = (state.player, *state.crates)
        # checked here: the kernels trust their cells and would read past the arrays
        if (len(state.crates) != self.n_crates or len(set(cells)) != len(cells)
                or not all(0 <= c < n for c in cells) or self.floor_id[state.player] < 0):
            return -1
        crates = np.array(sorted(state.crates), dtype=np.int64)
        return int(rank(self.cell_id, self.floor_id, self.binom, self.floor_cells.size,
                        state.player, crates))

    def states_of(self, indices: np.ndarray) -> list[State]:
        """The states of dense indices."""
        players, crates = unrank_many(np.asarray(indices, np.int64), self.cells,
                                      self.floor_cells, self.binom, self.n_crates)
        pairs = zip(players.tolist(), crates.tolist(), strict=True)
        return [State(p, tuple(row)) for p, row in pairs]


def _ids(cells: np.ndarray, n: int) -> np.ndarray:
    ids = np.full(n, -1, np.int64)
    ids[cells] = np.arange(cells.size)
    return ids
