"""Renderers: the 64x64 picture an agent sees, as palette indices and as RGB.

The picture is first drawn as indices into a 16-colour palette (what ARC-AGI-3
clients read); the RGB image is that palette looked up, so both always agree.
"""

from __future__ import annotations

__all__ = [
    "PALETTE", "SIZE", "render", "render_goal", "render_goal_indices", "render_indices", "sprites",
    "tile_kinds", "tile_size",
]

from functools import lru_cache

import numpy as np

from engine.levels import Level, State

SIZE = 64

# The ARC-AGI-3 toolkit's palette order: white, four greys light to dark, black,
# magenta, pink, red, blue, light blue, yellow, orange, maroon, green, purple.
PALETTE = np.array(
    [
        [255, 255, 255], [204, 204, 204], [153, 153, 153], [102, 102, 102],
        [51, 51, 51], [0, 0, 0], [229, 58, 163], [255, 123, 204],
        [249, 60, 49], [30, 147, 255], [136, 216, 241], [255, 220, 0],
        [255, 133, 27], [146, 18, 49], [79, 204, 48], [163, 86, 208],
    ],
    dtype=np.uint8,
)
PALETTE.flags.writeable = False

# Tile kinds, the index into the sprite sheet.
OUTSIDE, WALL, FLOOR, GOAL, CRATE, CRATE_ON_GOAL, PLAYER, PLAYER_ON_GOAL = range(8)

_BLACK, _WHITE, _MID, _DARK = 5, 0, 2, 4
_RED, _BLUE, _LIGHT_BLUE, _ORANGE, _MAROON, _GREEN = 8, 9, 10, 12, 13, 14


@lru_cache(maxsize=8)
def sprites(tile: int) -> np.ndarray:
    """The eight tile pictures at ``tile`` pixels a side, as palette indices (8, t, t)."""
    t = tile
    b = max(1, t // 8)  # line width
    s = np.empty((8, t, t), dtype=np.uint8)
    s[OUTSIDE] = _BLACK
    s[WALL] = _MID
    s[WALL, :b, :] = _DARK
    s[WALL, :, :b] = _DARK
    s[WALL, t // 2 : t // 2 + b, :] = _DARK
    s[FLOOR] = _WHITE
    s[GOAL] = _WHITE
    q = max(1, t // 4)
    s[GOAL, q : t - q, q : t - q] = _RED
    s[GOAL, q + b : t - q - b, q + b : t - q - b] = _WHITE if t - 2 * (q + b) > 0 else _RED
    for kind, body in ((CRATE, _ORANGE), (CRATE_ON_GOAL, _GREEN)):
        s[kind] = _MAROON
        s[kind, b : t - b, b : t - b] = body
    yy, xx = np.mgrid[:t, :t]
    r = (t - 1) / 2
    disc = (yy - r) ** 2 + (xx - r) ** 2 <= (t * 0.4) ** 2
    for kind, ground, body in ((PLAYER, FLOOR, _BLUE), (PLAYER_ON_GOAL, GOAL, _LIGHT_BLUE)):
        s[kind] = s[ground]
        s[kind][disc] = body
    s.flags.writeable = False
    return s


def tile_size(level: Level) -> int:
    """Integer pixels per tile: 8 on 8x8 boards, the largest that fits otherwise."""
    return SIZE // max(level.height, level.width)


def tile_kinds(level: Level, state: State | None = None, *, player: bool = True) -> np.ndarray:
    """The (H, W) grid of tile kinds for a state (the start when None)."""
    state = level.start if state is None else state
    kinds = np.where(level.walls, WALL, np.where(level.floor, FLOOR, OUTSIDE)).astype(np.uint8)
    kinds[level.goals] = GOAL
    flat = kinds.reshape(-1)
    crates = np.fromiter(state.crates, dtype=np.intp, count=len(state.crates))
    flat[crates] = np.where(flat[crates] == GOAL, CRATE_ON_GOAL, CRATE)
    if player:
        flat[state.player] = PLAYER_ON_GOAL if flat[state.player] == GOAL else PLAYER
    return kinds


def _draw(level: Level, kinds: np.ndarray) -> np.ndarray:
    t = tile_size(level)
    h, w = kinds.shape
    board = sprites(t)[kinds].transpose(0, 2, 1, 3).reshape(h * t, w * t)
    if board.shape == (SIZE, SIZE):
        return board
    out = np.full((SIZE, SIZE), _BLACK, dtype=np.uint8)
    top, left = (SIZE - h * t) // 2, (SIZE - w * t) // 2
    out[top : top + h * t, left : left + w * t] = board
    return out


def render_indices(level: Level, state: State | None = None) -> np.ndarray:
    """The observation as a (64, 64) uint8 grid of palette indices 0-15."""
    return _draw(level, tile_kinds(level, state))


def render_goal_indices(level: Level) -> np.ndarray:
    """The goal picture as palette indices: every crate on a goal, no player."""
    solved = State(level.start.player, level.goal_cells)
    return _draw(level, tile_kinds(level, solved, player=False))


def render(level: Level, state: State | None = None) -> np.ndarray:
    """The observation an agent sees: (64, 64, 3) uint8 RGB, C order."""
    return PALETTE.take(render_indices(level, state), axis=0)


def render_goal(level: Level) -> np.ndarray:
    """The goal image: (64, 64, 3) uint8 RGB with crates on goals and no player."""
    return PALETTE.take(render_goal_indices(level), axis=0)
