"""A spec's fresh levels for the vector env: drawn in bulk by worker processes, held compressed.

Sub-envs go in blocks of ``LEVELS_PER_LAYOUT``; sub-env k's j-th level is level ``k % 8`` of
``fresh_levels(spec, seeds[k // 8 * 8], j)``, a function of the seed, k and j alone (not of
the number of sub-envs, nor of when a draw finished). One draw thus serves a whole block, so
a first reset draws one group per eight sub-envs, and a block's next row is drawn while the
current one is played.
"""

from __future__ import annotations

__all__ = ["AHEAD", "KEPT", "FreshLevels", "drawn_groups", "load_group"]

import pickle
import sys
import zlib
from collections.abc import Iterable, Sequence
from concurrent.futures import Future

import numpy as np

from engine.pictures.frames import TileAtlas
from engine.pictures.look import Look
from engine.pictures.vector import BoardTiles
from pipeline.spec import Spec
from pipeline.trajectories import LEVELS_PER_LAYOUT, EpisodeLevel, fresh_levels

BLOCK = LEVELS_PER_LAYOUT  # sub-envs served by one drawn group, one level each
AHEAD = 1  # rows a block has drawn (or asked for) past the furthest of its sub-envs
KEPT = 3  # rows a block holds at most; an older one is drawn again if a sub-env still needs it
CHUNK = 16  # groups one worker task draws at most (the spec is sent once per task)

Group = list[tuple[EpisodeLevel, BoardTiles]]


def drawn_groups(spec: Spec, exclude_ids: frozenset[str], asked: Sequence[tuple[int, int]]
                 ) -> list[bytes]:
    """Groups ``fresh_levels(spec, seed, group)`` of every (seed, group) asked, each with its
    tiles, as compressed pickles (run in a worker process). Levels of one board and a fixed
    look share one ``BoardTiles``, as they share their tiles."""
    out = []
    for seed, group in asked:
        atlases: dict[tuple[bytes, Look], BoardTiles] = {}
        levels: Group = []
        for chosen in fresh_levels(spec, seed, group, exclude_ids):
            level = chosen.level
            key = (level.walls.tobytes() + level.goals.tobytes(), chosen.look)
            if key not in atlases:
                atlases[key] = TileAtlas.for_level(level, chosen.look).board_tiles()
            levels.append((chosen, atlases[key]))
        out.append(zlib.compress(pickle.dumps(levels, protocol=pickle.HIGHEST_PROTOCOL), 1))
    return out


def load_group(blob: bytes) -> Group:
    """A group of ``drawn_groups`` back as levels and tiles (a tile set's ``level`` is the
    first of its board's levels: play each level from its own start)."""
    levels: Group = pickle.loads(zlib.decompress(blob))
    return levels


class FreshLevels:
    """The drawn rows of every block of ``envs`` sub-envs, taken one level at a time.

    ``take(k)`` returns sub-env k's next level, waiting only if its row is not drawn yet;
    taking a row's first level asks for the block's next row. Rows are held compressed and
    dropped once every sub-env of the block is past them (or ``KEPT`` newer rows are held).
    """

    def __init__(self, spec: Spec, exclude_ids: frozenset[str], envs: int, workers: int) -> None:
        self.spec, self.exclude_ids, self.envs = spec, exclude_ids, envs
        self.blocks = -(-envs // BLOCK)
        # loky's processes, as the pipeline's workers: no fork of this process, and no
        # ``if __name__ == "__main__"`` needed in the user's script
        from joblib.externals.loky import ProcessPoolExecutor

        self.pool = ProcessPoolExecutor(max(1, workers))
        self.workers = max(1, workers)
        self.pending: dict[tuple[int, int], tuple[Future, int]] = {}
        self.restart(np.zeros(envs, np.uint64))

    def restart(self, seeds: np.ndarray) -> None:
        """Forget every drawn level; block q now draws from ``seeds[8 q]``."""
        for future, _ in self.pending.values():
            future.cancel()
        self.seeds = [int(seeds[q * BLOCK]) for q in range(self.blocks)]
        self.taken = np.zeros(self.envs, np.int64)  # levels each sub-env has taken
        self.rows: list[dict[int, bytes]] = [{} for _ in range(self.blocks)]
        self.pending = {}
        self.wanted: dict[tuple[int, int], None] = {}  # rows to send, in order
        self.playing: list[tuple[bytes, int] | None] = [None] * self.envs

    def ask_next(self, ks: Iterable[int]) -> None:
        """Ask, in bulk, for the rows the next levels of sub-envs ``ks`` are in."""
        for k in ks:
            self._want(k // BLOCK, int(self.taken[k]))
        self.flush()

    def take(self, k: int) -> tuple[EpisodeLevel, BoardTiles]:
        """Sub-env k's next level and its tiles (waits for its row if not drawn yet)."""
        q, r = divmod(k, BLOCK)
        j = int(self.taken[k])
        blob = self._row(q, j)
        self.taken[k] = j + 1
        self.playing[k] = (blob, r)
        self._want(q, j + AHEAD)
        self._forget(q)
        return load_group(blob)[r]

    def playing_level(self, k: int) -> EpisodeLevel:
        """The level sub-env k took last."""
        held = self.playing[k]
        assert held is not None, "no level taken yet"
        return load_group(held[0])[held[1]][0]

    @property
    def nbytes(self) -> int:
        """Bytes of the drawn levels held (each row counted once), with their containers."""
        blobs = {id(b): b for rows in self.rows for b in rows.values()}
        blobs.update((id(p[0]), p[0]) for p in self.playing if p is not None)
        return (sum(sys.getsizeof(b) for b in blobs.values()) + self.taken.nbytes
                + sys.getsizeof(self.playing) + sum(sys.getsizeof(r) for r in self.rows))

    def flush(self) -> None:
        """Send the rows asked for to the workers, a few groups per task."""
        self._harvest()
        wanted, self.wanted = list(self.wanted), {}
        if not wanted:
            return
        size = max(1, min(CHUNK, -(-len(wanted) // self.workers)))
        for i in range(0, len(wanted), size):
            chunk = wanted[i:i + size]
            future = self.pool.submit(drawn_groups, self.spec, self.exclude_ids,
                                      [(self.seeds[q], j) for q, j in chunk])
            for n, key in enumerate(chunk):
                self.pending[key] = (future, n)

    def _want(self, q: int, j: int) -> None:
        if j not in self.rows[q] and (q, j) not in self.pending and (q, j) not in self.wanted:
            self.wanted[q, j] = None

    def _row(self, q: int, j: int) -> bytes:
        """Row j of block q, drawn now (with the rows asked for so far) if not asked yet."""
        while j not in self.rows[q]:
            if (q, j) in self.pending:
                future, n = self.pending.pop((q, j))
                self.rows[q][j] = future.result()[n]
            else:
                self._want(q, j)
                self.flush()
        return self.rows[q][j]

    def _harvest(self) -> None:
        """Move the rows drawn since the last look into ``rows`` (and under its bounds)."""
        done = [key for key, (future, _) in self.pending.items() if future.done()]
        for q, j in done:
            future, n = self.pending.pop((q, j))
            self.rows[q][j] = future.result()[n]
        for q in {q for q, _ in done}:
            self._forget(q)

    def _forget(self, q: int) -> None:
        """Drop the rows of block q that none of its sub-envs will take, and all but the
        ``KEPT`` newest."""
        rows = self.rows[q]
        first = int(self.taken[q * BLOCK:(q + 1) * BLOCK].min())
        for j in sorted(rows):
            if j < first or len(rows) > KEPT:
                del rows[j]

    def close(self) -> None:
        for future, _ in self.pending.values():
            future.cancel()
        self.pool.shutdown(wait=True)
