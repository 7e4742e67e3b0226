"""Random boards for the generators: a ring of walls, interior walls, one floor region.

``goal_layout`` places goals (crates parked on them) for goal-first generation;
``scatter_level`` drops crates, goals and the player anywhere, as the classic procedure does.
"""

from __future__ import annotations

__all__ = ["draw_walls", "goal_layout", "scatter_level"]

import numpy as np

from engine.levels import Level, State

_REDRAWS = 64


def draw_walls(rng: np.random.Generator, height: int, width: int,
               density: float) -> np.ndarray | None:
    """Outer ring plus ``round(density * interior)`` interior walls, floor connected.

    Returns None if no connected draw was found in a bounded number of tries.
    """
    interior = (height - 2) * (width - 2)
    n_walls = round(density * interior)
    for _ in range(_REDRAWS):
        walls = np.ones((height, width), dtype=bool)
        inner = np.zeros(interior, dtype=bool)
        inner[rng.choice(interior, size=n_walls, replace=False)] = True
        walls[1:-1, 1:-1] = inner.reshape(height - 2, width - 2)
        if _connected(~walls):
            return walls
    return None


def goal_layout(rng: np.random.Generator, height: int, width: int, density: float,
                crates: int) -> Level | None:
    """A board with goals and the crates parked on them (a solved configuration)."""
    drawn = _board_and_cells(rng, height, width, density, crates + 1)
    if drawn is None:
        return None
    walls, cells = drawn
    goals = sorted(cells[:crates])
    start = State(cells[crates], tuple(goals))
    return Level(height, width, walls, _mask(goals, walls.shape), start)


def scatter_level(rng: np.random.Generator, height: int, width: int, density: float,
                  crates: int) -> Level | None:
    """Walls, goals, crates (off goals) and the player all dropped at random."""
    drawn = _board_and_cells(rng, height, width, density, 2 * crates + 1)
    if drawn is None:
        return None
    walls, cells = drawn
    state = State(cells[2 * crates], tuple(sorted(cells[crates:2 * crates])))
    return Level(height, width, walls, _mask(cells[:crates], walls.shape), state)


def _board_and_cells(rng: np.random.Generator, height: int, width: int, density: float,
                     n: int) -> tuple[np.ndarray, list[int]] | None:
    """Walls drawn as ``draw_walls`` does and ``n`` distinct floor cells in random order."""
    walls = draw_walls(rng, height, width, density)
    if walls is None:
        return None
    floor = np.flatnonzero(~walls.ravel())
    return walls, [int(floor[i]) for i in rng.choice(len(floor), size=n, replace=False)]


def _mask(cells: list[int], shape: tuple[int, int]) -> np.ndarray:
    flat = np.zeros(shape[0] * shape[1], dtype=bool)
    flat[cells] = True
    return flat.reshape(shape)


def _connected(open_cells: np.ndarray) -> bool:
    """Whether the True cells form one 4-connected region."""
    cells = np.argwhere(open_cells)
    if len(cells) == 0:
        return False
    h, w = open_cells.shape
    seen = np.zeros_like(open_cells)
    stack = [tuple(cells[0])]
    seen[stack[0]] = True
    count = 0
    while stack:
        r, c = stack.pop()
        count += 1
        for rr, cc in ((r - 1, c), (r + 1, c), (r, c - 1), (r, c + 1)):
            if 0 <= rr < h and 0 <= cc < w and open_cells[rr, cc] and not seen[rr, cc]:
                seen[rr, cc] = True
                stack.append((rr, cc))
    return count == len(cells)
