"""Looks: how a board becomes the 64x64 picture an agent sees, in RGB and in ARC palette indices.

A board is drawn once per state into a grid of *elements* (floor, wall, crate...); the RGB frame
is the look's colour table indexed by that grid, and the ARC-AGI-3 face maps the same grid
through one fixed table, so both faces always show the same board.
"""

from __future__ import annotations

__all__ = [
    "ARC", "ARC_INDEX", "ELEMENTS", "ELEMENT_TO_ARC", "ElementPainter", "LOOKS", "Look",
    "LookError", "MAX_NOISE_STD", "Painter", "PalettePainter", "SHARED", "SHARED_THEME", "SIZE",
    "Theme", "add_noise", "cell_tiles", "crate_square", "disc", "draw_theme", "frame",
    "noise_table", "painter", "stored_look",
]

import json
import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields
from functools import cached_property, lru_cache
from typing import Any

import numpy as np

from engine.errors import SokoforgeError
from engine.levels import Level, State
from engine.pictures.render import PALETTE, render_goal_indices, render_indices

SIZE = 64
LOOKS = ("shared", "arc", "themed")

# The elements of the shared environment's drawing, in the order of a theme's colours.
ELEMENTS = ("floor", "floor_alt", "wall", "wall_edge", "goal", "box", "box_edge",
            "box_on_goal", "player")
FLOOR, FLOOR_ALT, WALL, WALL_EDGE, GOAL, BOX, BOX_EDGE, BOX_ON_GOAL, PLAYER = range(9)

# The ARC-AGI-3 face of an element drawing: one fixed palette index per element. White floor
# with a light-grey checker, dark-grey walls with a darker edge, a red goal ring, orange crates
# with a maroon frame, yellow crates on goals, a blue player.
ARC_INDEX = {"floor": 0, "floor_alt": 1, "wall": 3, "wall_edge": 4, "goal": 8, "box": 12,
             "box_edge": 13, "box_on_goal": 11, "player": 9}
ELEMENT_TO_ARC = np.array([ARC_INDEX[e] for e in ELEMENTS], dtype=np.uint8)
ELEMENT_TO_ARC.flags.writeable = False

# Channel offsets of a recoloured theme (DESIGN.md): each colour moves by at most this much
# from its base (floor_alt from the drawn floor), then is clipped to [20, 235].
_JITTER = {"floor": 70, "floor_alt": 18, "wall": 70, "wall_edge": 30, "goal": 45, "box": 45,
           "box_edge": 30, "box_on_goal": 45, "player": 45}
_CLIP = (20, 235)
MAX_NOISE_STD = 6.0
_WORD = 2**64 - 1


class LookError(SokoforgeError, ValueError):
    """A theme or look that cannot be drawn, with the offending field named."""


@dataclass(frozen=True)
class Theme:
    """The eleven fields of a look: nine RGB colours, the floor checker and pixel noise."""

    floor: tuple[int, int, int]
    floor_alt: tuple[int, int, int]
    wall: tuple[int, int, int]
    wall_edge: tuple[int, int, int]
    goal: tuple[int, int, int]
    box: tuple[int, int, int]
    box_edge: tuple[int, int, int]
    box_on_goal: tuple[int, int, int]
    player: tuple[int, int, int]
    checker: bool = True
    noise_std: float = 0.0

    @cached_property
    def colours(self) -> np.ndarray:
        """The (9, 3) uint8 colour table, indexed by element code."""
        table = np.array([getattr(self, e) for e in ELEMENTS], dtype=np.uint8)
        table.flags.writeable = False
        return table

    def to_dict(self) -> dict[str, Any]:
        """Plain data (colours as lists), the shape of a theme file and of cases.json."""
        return {k: list(v) if isinstance(v, tuple) else v for k, v in asdict(self).items()}

    def to_json(self) -> str:
        """Canonical JSON (sorted keys, no spaces): the bytes stored in ``levels.parquet``."""
        return json.dumps(self.to_dict(), sort_keys=True, separators=(",", ":"))

    @classmethod
    def from_dict(cls, data: Any) -> Theme:
        """Check plain data field by field; a ``LookError`` names the first bad field."""
        if not isinstance(data, dict):
            raise LookError(f"a theme is a JSON object of {len(fields(cls))} fields, "
                            f"not {type(data).__name__}")
        names = [f.name for f in fields(cls)]
        extra = sorted(set(data) - set(names))
        if extra:
            raise LookError(f"theme: unknown field {extra[0]!r}; fields are {', '.join(names)}")
        missing = [e for e in ELEMENTS if e not in data]
        if missing:
            raise LookError(f"theme: missing colour {missing[0]!r}")
        colours = {}
        for e in ELEMENTS:
            v = data[e]
            if (not isinstance(v, list | tuple) or len(v) != 3
                    or not all(isinstance(x, int) and not isinstance(x, bool) and 0 <= x <= 255
                               for x in v)):
                raise LookError(f"theme: {e} is {v!r}; expected [r, g, b] of integers 0-255")
            colours[e] = (int(v[0]), int(v[1]), int(v[2]))
        checker = data.get("checker", True)
        if not isinstance(checker, bool):
            raise LookError(f"theme: checker is {checker!r}; expected true or false")
        noise = data.get("noise_std", 0.0)
        if (not isinstance(noise, int | float) or isinstance(noise, bool)
                or not 0.0 <= noise <= MAX_NOISE_STD):
            raise LookError(f"theme: noise_std is {noise!r}; expected a number 0-{MAX_NOISE_STD:g}")
        return cls(**colours, checker=checker, noise_std=float(noise))

    @classmethod
    def from_json(cls, text: str) -> Theme:
        try:
            data = json.loads(text)
        except ValueError as e:
            raise LookError(f"theme: not valid JSON ({e})") from None
        return cls.from_dict(data)


SHARED_THEME = Theme(
    floor=(222, 214, 186), floor_alt=(212, 204, 176), wall=(94, 84, 74), wall_edge=(64, 56, 48),
    goal=(196, 60, 60), box=(176, 122, 54), box_edge=(120, 80, 30), box_on_goal=(206, 160, 70),
    player=(48, 108, 188), checker=True, noise_std=0.0)


def draw_theme(rng: np.random.Generator, noise: bool) -> Theme:
    """A recoloured theme by DESIGN.md's jitter rules, drawn from ``rng`` in a fixed order:
    per colour (ELEMENTS order) three integer offsets, then the checker, then the noise std."""
    lo, hi = _CLIP
    drawn: dict[str, tuple[int, int, int]] = {}
    for e in ELEMENTS:
        base = drawn["floor"] if e == "floor_alt" else getattr(SHARED_THEME, e)
        k = _JITTER[e]
        offset = rng.integers(-k, k + 1, size=3)
        r, g, b = (int(v) for v in np.clip(np.array(base) + offset, lo, hi))
        drawn[e] = (r, g, b)
    checker = bool(rng.random() < 0.5)
    noise_std = float(rng.uniform(0.0, MAX_NOISE_STD)) if noise else 0.0
    return Theme(**drawn, checker=checker, noise_std=noise_std)


@dataclass(frozen=True)
class Look:
    """The look of one level: ``shared`` (the shared environment's), ``arc`` (16 colours) or
    ``themed`` with its ``theme``; ``noise_key`` fixes the pixel noise of every step."""

    name: str = "shared"
    theme: Theme | None = None
    noise_key: int | None = None

    def __post_init__(self) -> None:
        if self.name not in LOOKS:
            raise LookError(f"unknown look {self.name!r}; looks are {', '.join(LOOKS)}")
        if self.name == "themed" and self.theme is None:
            raise LookError("a themed look needs its theme")

    @property
    def colours_theme(self) -> Theme:
        """The theme the element drawing is coloured with (the shared one unless themed)."""
        return self.theme if self.theme is not None else SHARED_THEME

    @property
    def noisy(self) -> bool:
        return (self.name != "arc" and self.noise_key is not None
                and self.colours_theme.noise_std > 0)


SHARED = Look()
ARC = Look("arc")


def stored_look(version_look: str, row: Mapping[str, Any]) -> Look:
    """The look of one row of ``levels.parquet``: its own ``theme`` (JSON) and ``noise_seed``
    when it has them, else its version's look; a themed version gives every level its theme."""
    theme = row.get("theme")
    if theme is not None:
        return Look("themed", Theme.from_json(theme), row.get("noise_seed"))
    if version_look == "themed":
        raise LookError("the version's look is themed but the level has no theme")
    return Look(version_look)


def painter(level: Level, look: Look = SHARED) -> Painter:
    """The painter of ``level`` in ``look``: precomputes what every frame of the level shares."""
    return PalettePainter(level) if look.name == "arc" else ElementPainter(level, look)


def frame(level: Level, state: State | None = None, look: Look = SHARED,
          step: int = 0) -> np.ndarray:
    """One (64, 64, 3) uint8 RGB observation of ``state`` (the start when None) at ``step``."""
    return painter(level, look).frame(state, step)


class Painter:
    """Frames of one level in one look: element codes, their colours, their ARC indices."""

    level: Level
    look: Look
    colours: np.ndarray  # (n, 3) uint8, indexed by code
    to_arc: np.ndarray  # (n,) uint8 palette index per code

    def elements(self, state: State | None = None) -> np.ndarray:
        """The (64, 64) uint8 grid of codes of ``state`` (the start when None)."""
        raise NotImplementedError

    def goal_elements(self) -> np.ndarray:
        """The goal picture's codes: a crate on every goal, no player."""
        raise NotImplementedError

    def frame(self, state: State | None = None, step: int = 0) -> np.ndarray:
        """The RGB observation at ``step`` (0 = start, n = after n actions)."""
        return self._colour(self.elements(state), step)

    def goal(self) -> np.ndarray:
        """The RGB goal image (its noise, if any, from a stream of its own)."""
        return self._colour(self.goal_elements(), -1)

    def arc(self, state: State | None = None) -> np.ndarray:
        """The ARC-AGI-3 face of the same board: (64, 64) uint8 palette indices 0-15."""
        return self.to_arc.take(self.elements(state))

    def _colour(self, codes: np.ndarray, step: int) -> np.ndarray:
        rgb = self.colours.take(codes, axis=0)
        key = self.look.noise_key
        if self.look.noisy and key is not None:
            rgb = add_noise(rgb, self.look.colours_theme.noise_std, key, step)
        return rgb


def add_noise(rgb: np.ndarray, std: float, key: int, step: int) -> np.ndarray:
    """Gaussian pixel noise of ``std`` added to every channel, rounded, clipped to 0-255.

    A function of (key, step) alone: each step reads 16-bit uniforms from its own Philox
    stream keyed by both and maps them through the inverse CDF of the rounded Gaussian
    (``noise_table``), several times faster than drawing normals per frame.
    """
    words = np.array([key & _WORD, step & _WORD], dtype=np.uint64)
    raw = np.random.Philox(key=words).random_raw(-(-rgb.size // 4))
    noise = noise_table(std).take(raw.view(np.uint16)[:rgb.size]).reshape(rgb.shape)
    noisy = rgb.astype(np.int16)
    noisy += noise
    return np.clip(noisy, 0, 255, out=noisy).astype(np.uint8)


@lru_cache(maxsize=512)
def noise_table(std: float) -> np.ndarray:
    """Inverse CDF of ``round(std * Z)``, Z standard normal, at the 65536 midpoints
    ``(u + 0.5) / 65536``: a uniform 16-bit index draws that rounded Gaussian."""
    reach = int(np.ceil(6 * std)) + 1
    k = np.arange(-reach, reach + 1)
    cdf = np.array([0.5 * (1.0 + math.erf((v + 0.5) / (std * math.sqrt(2.0)))) for v in k])
    u = (np.arange(1 << 16) + 0.5) / (1 << 16)
    table = k[np.minimum(np.searchsorted(cdf, u, side="right"), k.size - 1)].astype(np.int16)
    table.flags.writeable = False
    return table


class PalettePainter(Painter):
    """The ``arc`` look: the 16-colour sprites of ``engine.pictures.render``; codes are palette
    indices."""

    def __init__(self, level: Level) -> None:
        self.level, self.look = level, ARC
        self.colours = PALETTE
        self.to_arc = np.arange(len(PALETTE), dtype=np.uint8)

    def elements(self, state: State | None = None) -> np.ndarray:
        return render_indices(self.level, state)

    def goal_elements(self) -> np.ndarray:
        return render_goal_indices(self.level)

    def arc(self, state: State | None = None) -> np.ndarray:
        return self.elements(state)


class ElementPainter(Painter):
    """The shared environment's drawing rules (DESIGN.md), coloured by the look's theme.

    The static board (floor, checker, walls, goal rings) is drawn once; a frame copies it and
    stamps a crate square per crate and the player's disc over its cell.
    """

    def __init__(self, level: Level, look: Look = SHARED) -> None:
        self.level, self.look = level, look
        theme = look.colours_theme
        self.colours = theme.colours
        self.to_arc = ELEMENT_TO_ARC
        h, w = level.height, level.width
        c = self.cell = SIZE // max(h, w)
        self.top, self.left = (SIZE - h * c) // 2, (SIZE - w * c) // 2
        tiles = cell_tiles(c)
        parity = (np.add.outer(np.arange(h), np.arange(w)) % 2).astype(np.intp)
        if not theme.checker:
            parity[:] = 0
        kinds = np.where(level.walls, _T_WALL, np.where(level.goals, _T_GOAL, _T_FLOOR) + parity)
        board = tiles[kinds].transpose(0, 2, 1, 3).reshape(h * c, w * c)
        static = np.full((SIZE, SIZE), FLOOR, dtype=np.uint8)
        static[self.top:self.top + h * c, self.left:self.left + w * c] = board
        static.flags.writeable = False
        self.static = static
        self.crate = crate_square(c, BOX)
        self.crate_on_goal = crate_square(c, BOX_ON_GOAL)
        self.disc = disc(c)
        self.inset = max(1, c // 8)
        self._goals = level.goals.reshape(-1)

    def _origin(self, cell: int) -> tuple[int, int]:
        r, col = divmod(cell, self.level.width)
        return self.top + r * self.cell, self.left + col * self.cell

    def _crates(self, grid: np.ndarray, crates: tuple[int, ...] | list[int]) -> None:
        e, c = self.inset, self.cell
        for cell in crates:
            y, x = self._origin(cell)
            grid[y + e:y + c - e, x + e:x + c - e] = (
                self.crate_on_goal if self._goals[cell] else self.crate)

    def elements(self, state: State | None = None) -> np.ndarray:
        state = self.level.start if state is None else state
        grid = self.static.copy()
        self._crates(grid, state.crates)
        y, x = self._origin(state.player)
        grid[y:y + self.cell, x:x + self.cell][self.disc] = PLAYER
        return grid

    def goal_elements(self) -> np.ndarray:
        grid = self.static.copy()
        self._crates(grid, self.level.goal_cells)
        return grid


# Kinds of static cell: floor and goal on an even (r + c) cell, then the same on an odd one.
_T_FLOOR, _T_FLOOR_ODD, _T_GOAL, _T_GOAL_ODD, _T_WALL = range(5)


@lru_cache(maxsize=32)
def cell_tiles(c: int) -> np.ndarray:
    """The static cells at ``c`` pixels a side as element codes, (5, c, c) by ``_T_*`` kind."""
    tiles = np.empty((5, c, c), dtype=np.uint8)
    tiles[_T_FLOOR] = FLOOR
    tiles[_T_FLOOR_ODD] = FLOOR_ALT
    tiles[_T_WALL] = WALL
    tiles[_T_WALL, [0, -1], :] = WALL_EDGE
    tiles[_T_WALL, :, [0, -1]] = WALL_EDGE
    m = max(1, c // 4)
    m2 = m + max(1, c // 6)
    for goal, ground in ((_T_GOAL, FLOOR), (_T_GOAL_ODD, FLOOR_ALT)):
        tiles[goal] = ground
        tiles[goal, m:c - m, m:c - m] = GOAL
        if c - 2 * m2 > 0:
            tiles[goal, m2:c - m2, m2:c - m2] = ground
    tiles.flags.writeable = False
    return tiles


@lru_cache(maxsize=64)
def crate_square(c: int, body: int) -> np.ndarray:
    """A crate's square ``[e, c-e)`` in ``body``, with its one-pixel ``box_edge`` frame."""
    e = max(1, c // 8)
    b = e + 1
    square = np.full((c - 2 * e, c - 2 * e), body, dtype=np.uint8)
    if c - 2 * b > 0:
        square[[0, -1], :] = BOX_EDGE
        square[:, [0, -1]] = BOX_EDGE
    square.flags.writeable = False
    return square


@lru_cache(maxsize=32)
def disc(c: int) -> np.ndarray:
    """The player's pixels of a cell: ``(y - k)^2 + (x - k)^2 <= (0.38 c)^2``, ``k = (c-1)/2``."""
    yy, xx = np.mgrid[:c, :c]
    k = (c - 1) / 2
    mask = (yy - k) ** 2 + (xx - k) ** 2 <= (0.38 * c) ** 2
    mask.flags.writeable = False
    return mask
