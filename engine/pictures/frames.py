"""Episodes played and drawn at speed: one numba loop steps the rules and paints each frame.

Every look draws a board cell by cell (DESIGN.md, "Observations and looks"), so a level's
frames are made of per-cell tiles. ``TileAtlas.for_level`` cuts those tiles out of pictures
drawn by the look's own function (``draw``) for the level itself: empty, crate and player on
every floor cell. ``play`` runs ``engine.pictures.vector.play_board``, the vector env's kernel: it
applies each action as the episode core does (``engine.episode``: the same stepper and the
same end) and repaints only the cells that changed. ``TileAtlas.for_level`` checks the start
frame it composes against the look's drawing, so a look that is not cell by cell is refused.
"""

from __future__ import annotations

__all__ = [
    "FRAME_BYTES", "LookNotCellLocal", "NO_ACTION", "PlayedEpisode", "TileAtlas", "draw",
    "draw_goal", "draw_state", "play",
]

from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import cached_property

import numpy as np

from engine.levels import Level, State
from engine.pictures.look import SHARED, Look, painter
from engine.pictures.render import SIZE
from engine.pictures.vector import (
    CRATE,
    EMPTY,
    FRAME_BYTES,
    PLAYER,
    BoardSlots,
    BoardTiles,
    LookNotCellLocal,
    board_tiles,
    frames_of,
    play_board,
)

NO_ACTION = -1  # the action column of an episode's last frame


def draw(level: Level, state: State | None = None, look: Look = SHARED,
         step: int = 0) -> np.ndarray:
    """The (64, 64, 3) uint8 observation of ``state`` (default: the start) in ``look`` at
    ``step`` (which fixes a noisy look's noise)."""
    return painter(level, look).frame(state, step)


def draw_goal(level: Level, look: Look = SHARED) -> np.ndarray:
    """The goal picture (every crate on a goal, no player) in ``look``."""
    return painter(level, look).goal()


@dataclass(frozen=True, eq=False)
class TileAtlas:
    """A board's tiles: ``tiles[cell, content]`` is the picture of a floor cell holding
    nothing, a crate or the player, as t rows of t*3 bytes; ``origin[cell]`` is the byte
    offset of its top-left pixel in a flat frame; ``board`` the flat frame with every floor
    cell empty. Tiles depend on walls and goals alone, so one atlas serves every start of a
    board."""

    level: Level
    origin: np.ndarray
    tiles: np.ndarray
    board: np.ndarray
    look: Look = SHARED

    @classmethod
    def for_level(cls, level: Level, look: Look = SHARED,
                  drawer: Callable[[Level, State | None], np.ndarray] | None = None
                  ) -> TileAtlas:
        """Cut the tiles of ``level``'s board from the look's noise-free pictures (or
        ``drawer``'s): one per floor cell, plus two with crates everywhere; then check the
        composed start frame against the drawn one. A noisy look's noise is added per step
        by ``play``."""
        if drawer is None:
            clean = painter(level, replace(look, noise_key=None))
            drawer = lambda _level, state: clean.frame(state)  # noqa: E731
        h, w = level.height, level.width
        t = SIZE // max(h, w)
        top, left = (SIZE - h * t) // 2, (SIZE - w * t) // 2
        rows, cols = np.divmod(np.arange(h * w), w)
        ys, xs = top + rows * t, left + cols * t
        floor = np.flatnonzero(level.floor.ravel())
        tiles = np.zeros((h * w, 3, t, t * 3), np.uint8)

        def cut(picture: np.ndarray, cells: np.ndarray, content: int) -> None:
            for c in cells.tolist():
                tiles[c, content] = picture[ys[c]:ys[c] + t, xs[c]:xs[c] + t].reshape(t, -1)

        for cell in floor.tolist():
            alone = draw_state(drawer, level, State(cell, ()))
            cut(alone, np.array([cell]), PLAYER)
            if cell == floor[0]:
                cut(alone, floor[1:], EMPTY)
            elif cell == floor[1]:
                cut(alone, floor[:1], EMPTY)
        for player, others in ((floor[0], floor[1:]), (floor[1], floor[:1])):
            crowded = draw_state(drawer, level, State(int(player), tuple(others.tolist())))
            cut(crowded, others, CRATE)
        start = draw_state(drawer, level, level.start).reshape(-1)
        origin = ((ys * SIZE + xs) * 3).astype(np.int64)
        board = start.copy()
        for cell in floor.tolist():
            _paste(board, tiles, origin, cell, EMPTY)
        atlas = cls(level, origin, tiles, board, look)
        if not np.array_equal(atlas.frame(level.start), start):
            raise LookNotCellLocal("the look's start frame differs from its tiles: it does not"
                                   " draw cell by cell, so frames cannot be composed")
        return atlas

    def frame(self, state: State) -> np.ndarray:
        """The flat picture (64 * 64 * 3 bytes) of any state of the board, from the tiles."""
        out = self.board.copy()
        for cell in state.crates:
            _paste(out, self.tiles, self.origin, cell, CRATE)
        _paste(out, self.tiles, self.origin, state.player, PLAYER)
        return out

    @cached_property
    def slots(self) -> BoardSlots:
        """The board as the one slot of a ``BoardSlots``: what ``play`` steps and draws."""
        slots = BoardSlots(1, self.level.height * self.level.width,
                           len(self.level.start.crates))
        slots.put(0, self.board_tiles(), max_steps=0)
        return slots

    def board_tiles(self) -> BoardTiles:
        """The tiles as the vector kernels hold them: the few distinct ones."""
        return board_tiles(self.level, self.look, self.tiles, self.board)


def _paste(frame: np.ndarray, tiles: np.ndarray, origin: np.ndarray, cell: int,
           content: int) -> None:
    t = tiles.shape[2]
    picture = frame.reshape(SIZE, SIZE * 3)
    y, x = divmod(int(origin[cell]), SIZE * 3)
    picture[y:y + t, x:x + t * 3] = tiles[cell, content]


def draw_state(drawer: Callable[[Level, State | None], np.ndarray], level: Level,
               state: State) -> np.ndarray:
    """``drawer``'s picture of any arrangement on the board (crate count free)."""
    return np.ascontiguousarray(drawer(level, state), dtype=np.uint8)


@dataclass(frozen=True)
class PlayedEpisode:
    """Frames (n + 1, 64, 64, 3) and per-frame action, pushed and no-op flags of one run."""

    frames: np.ndarray
    actions: np.ndarray
    pushed: np.ndarray
    invalid: np.ndarray
    solved: bool
    final: State


def play(atlas: TileAtlas, actions: np.ndarray, state: State | None = None,
         out: np.ndarray | None = None, max_steps: int | None = None) -> PlayedEpisode:
    """Play ``actions`` (0-3) from ``state`` (default: the atlas level's start) until they run
    out or the episode is over (``engine.episode``: solved, or ``max_steps`` used; no budget
    but the actions when None). ``out`` (at least len(actions) + 1 rows of 64 * 64 * 3 bytes)
    receives the frames when given, so a caller can gather many episodes in one buffer."""
    level = atlas.level
    state = level.start if state is None else state
    acts = np.asarray(actions, dtype=np.int64)
    if acts.size and (acts.min() < 0 or acts.max() > 3):
        raise ValueError("actions must be 0 (up), 1 (down), 2 (left) or 3 (right)")
    crates = np.array(state.crates, dtype=np.int64)
    frames = np.empty((acts.size + 1, FRAME_BYTES), np.uint8) if out is None else out
    taken = np.empty(acts.size + 1, np.int8)
    pushed = np.empty(acts.size + 1, np.bool_)
    invalid = np.empty(acts.size + 1, np.bool_)
    budget = acts.size if max_steps is None else max_steps
    n, solved, player = play_board(atlas.slots.flat, 0, state.player, crates, acts, budget,
                                   frames_of(frames), taken, pushed, invalid)
    pictures = frames[:n + 1].reshape(-1, SIZE, SIZE, 3)
    return PlayedEpisode(pictures, taken[:n + 1], pushed[:n + 1], invalid[:n + 1],
                         bool(solved), State(int(player), tuple(int(c) for c in crates)))
