"""Levels: the XSB text form, the immutable ``Level`` and the ``State`` of play.

Cells are numbered row-major (``row * width + col``); a state is the player's
cell and the sorted tuple of crate cells. Everything else in the engine
works on these flat indices.
"""

from __future__ import annotations

__all__ = [
    "Level", "LevelError", "MAX_CRATES", "MAX_SIDE", "State", "canonical_id", "check_state",
    "parse_levels", "parse_xsb", "symmetries", "to_xsb", "wall_layout_id", "write_levels",
]

import hashlib
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np

from engine.errors import SokoforgeError

MAX_SIDE = 16
MAX_CRATES = 6
_KNOWN = "# $.*@+"


class LevelError(SokoforgeError, ValueError):
    """A level text that cannot be played, with the reason in words."""


class State(NamedTuple):
    """Player cell and sorted crate cells, as flat row-major indices."""

    player: int
    crates: tuple[int, ...]


@dataclass(frozen=True, eq=False)
class Level:
    """One enclosed board: walls, goals and the start state.

    ``floor`` marks the enclosed cells the engine plays on; cells outside the
    enclosure are neither wall nor floor and only matter for drawing and for
    writing the level back.
    """

    height: int
    width: int
    walls: np.ndarray
    goals: np.ndarray
    start: State
    title: str = ""
    floor: np.ndarray = field(init=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "walls", _frozen(self.walls))
        object.__setattr__(self, "goals", _frozen(self.goals))
        object.__setattr__(self, "floor", _frozen(_enclosed(self.walls)))

    @property
    def n_crates(self) -> int:
        return len(self.start.crates)

    @property
    def goal_cells(self) -> tuple[int, ...]:
        return tuple(int(c) for c in np.flatnonzero(self.goals))

    def is_solved(self, state: State) -> bool:
        return all(self.goals.flat[c] for c in state.crates)

    def with_start(self, state: State) -> Level:
        """The same board with another start state."""
        return Level(self.height, self.width, self.walls, self.goals, state, self.title)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Level):
            return NotImplemented
        return to_xsb(self) == to_xsb(other)

    def __hash__(self) -> int:
        return hash(to_xsb(self))


def check_state(level: Level, state: State) -> None:
    """Raise ``ValueError`` unless ``state`` fits ``level``: its crate count, crates sorted,
    every cell on the enclosed floor, no two things on one cell. The searches trust states."""
    floor = level.floor.ravel()
    cells = (state.player, *state.crates)
    if (len(state.crates) != level.n_crates or list(state.crates) != sorted(state.crates)
            or len(set(cells)) != len(cells)
            or not all(0 <= c < floor.size and floor[c] for c in cells)):
        raise ValueError(f"not a state of this level: {state}")


def _frozen(a: np.ndarray) -> np.ndarray:
    a = np.array(a, dtype=bool, copy=True)
    a.flags.writeable = False
    return a


def _enclosed(walls: np.ndarray) -> np.ndarray:
    """Non-wall cells that cannot reach the board's edge through non-wall cells."""
    h, w = walls.shape
    outside = np.zeros_like(walls, dtype=bool)
    stack = [(r, c) for r in range(h) for c in range(w)
             if (r in (0, h - 1) or c in (0, w - 1)) and not walls[r, c]]
    for r, c in stack:
        outside[r, c] = True
    while stack:
        r, c = stack.pop()
        for dr, dc in ((-1, 0), (1, 0), (0, -1), (0, 1)):
            rr, cc = r + dr, c + dc
            if 0 <= rr < h and 0 <= cc < w and not walls[rr, cc] and not outside[rr, cc]:
                outside[rr, cc] = True
                stack.append((rr, cc))
    return ~walls & ~outside


def parse_xsb(text: str, title: str = "") -> Level:
    """Parse one level in XSB; raise ``LevelError`` saying what is wrong."""
    rows = [line.rstrip("\r") for line in text.split("\n")]
    rows = [r for r in rows if not r.lstrip().startswith(";")]
    # "-" and "_" spell floor; read first, so a row of them is empty (as written back)
    rows = [r.replace("-", " ").replace("_", " ").rstrip() for r in rows]
    while rows and not rows[0]:
        rows.pop(0)
    while rows and not rows[-1]:
        rows.pop()
    if not rows:
        raise LevelError("empty level: no board rows")
    if "" in rows:
        raise LevelError(f"row {rows.index('') + 1} is empty: a board has no blank rows")
    height, width = len(rows), max(len(r) for r in rows)
    if height > MAX_SIDE or width > MAX_SIDE:
        raise LevelError(
            f"board is {height}x{width}; the engine supports at most {MAX_SIDE}x{MAX_SIDE}")
    walls = np.zeros((height, width), dtype=bool)
    goals = np.zeros((height, width), dtype=bool)
    crates: list[int] = []
    players: list[int] = []
    for r, row in enumerate(rows):
        for c, ch in enumerate(row):
            if ch not in _KNOWN:
                raise LevelError(f"unknown character {ch!r} at row {r + 1}, column {c + 1}")
            cell = r * width + c
            walls[r, c] = ch == "#"
            goals[r, c] = ch in ".*+"
            if ch in "$*":
                crates.append(cell)
            if ch in "@+":
                players.append(cell)
    if not players:
        raise LevelError("no player: the level needs exactly one '@' or '+'")
    if len(players) > 1:
        raise LevelError(f"{len(players)} players: the level needs exactly one '@' or '+'")
    if not crates:
        raise LevelError("zero crates: the level needs at least one '$' or '*'")
    if len(crates) != int(goals.sum()):
        raise LevelError(f"{len(crates)} crates but {int(goals.sum())} goals: counts must match")
    if len(crates) > MAX_CRATES:
        raise LevelError(
            f"{len(crates)} crates; the engine supports at most {MAX_CRATES}")
    level = Level(height, width, walls, goals, State(players[0], tuple(sorted(crates))), title)
    things = [("player", players[0])] + [("crate", c) for c in crates] + [
        ("goal", int(g)) for g in np.flatnonzero(goals)]
    for what, cell in things:
        if not level.floor.flat[cell]:
            r, c = divmod(cell, width)
            raise LevelError(
                f"unenclosed: the {what} at row {r + 1}, column {c + 1} can walk off the board;"
                " surround the playable area with walls")
    return level


def parse_levels(text: str) -> list[Level]:
    """Parse a file of levels separated by blank lines; ``;`` lines are titles or comments.

    An error names the level by its index from 0, as every command does, and the file line
    its board starts on.
    """
    levels: list[Level] = []
    block: list[str] = []
    comments: list[str] = []
    first_line = 0

    def flush() -> None:
        if block:
            title = comments[0] if comments else ""
            try:
                levels.append(parse_xsb("\n".join(block), title=title))
            except LevelError as e:
                raise LevelError(f"level {len(levels)} (line {first_line}): {e}") from None
        block.clear()
        comments.clear()

    # a byte-order mark is how some editors start a UTF-8 file, not part of the board
    lines = text.removeprefix("\ufeff").replace("\r\n", "\n").split("\n")
    for number, line in enumerate(lines, start=1):
        stripped = line.strip()
        if stripped.startswith(";"):
            if block:
                flush()
            comments.append(stripped.lstrip(";").strip())
        elif not stripped:
            flush()
        else:
            if not block:
                first_line = number
            block.append(line)
    flush()
    if not levels:
        raise LevelError("no level found in the input")
    return levels


def to_xsb(level: Level, state: State | None = None) -> str:
    """The level (with ``state`` in place of its start) as XSB rows joined by newlines."""
    return _rows_text(_char_grid(level, state))


def _char_grid(level: Level, state: State | None = None) -> np.ndarray:
    """The level's XSB characters as an (H, W) array, outside cells as spaces."""
    state = level.start if state is None else state
    grid = np.where(level.walls, "#", np.where(level.goals, ".", " "))
    flat = grid.reshape(-1)
    for cell in state.crates:
        flat[cell] = "*" if level.goals.flat[cell] else "$"
    flat[state.player] = "+" if level.goals.flat[state.player] else "@"
    return grid


def _rows_text(grid: np.ndarray) -> str:
    return "\n".join("".join(row).rstrip() for row in grid.tolist())


def write_levels(levels: list[Level]) -> str:
    """Several levels as one XSB file, titles as ``;`` lines."""
    parts = []
    for level in levels:
        head = f"; {level.title}\n" if level.title else ""
        parts.append(head + to_xsb(level))
    return "\n\n".join(parts) + "\n"


def _dihedral(grid: np.ndarray) -> list[np.ndarray]:
    """The grid under its 8 rotations and reflections (the identity first)."""
    out = []
    for k in range(4):
        g = np.rot90(grid, k)
        out += [g, g[:, ::-1]]
    return out


def symmetries(level: Level) -> list[str]:
    """The XSB text of the level under its 8 rotations and reflections."""
    return [_rows_text(g) for g in _dihedral(_char_grid(level))]


def canonical_id(level: Level) -> str:
    """A hash that is the same for the level and its rotations and reflections."""
    return hashlib.sha256(min(symmetries(level)).encode()).hexdigest()[:16]


def wall_layout_id(level: Level) -> str:
    """A hash of the wall layout alone, under the same 8 symmetries."""
    forms = [np.packbits(g).tobytes() + bytes(g.shape) for g in _dihedral(level.walls)]
    return hashlib.sha256(min(forms)).hexdigest()[:16]
