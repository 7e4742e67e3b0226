"""Random boards for the generators: a ring of walls, interior walls, one floor region.

``goal_layout`` places goals (crates parked on them) for goal-first generation;
``scatter_level`` drops crates, goals and the player anywhere, as the classic procedure does.
"""

from __future__ import annotations

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
    walls = draw_walls(rng, height, width, density)
    if walls is None:
        return None
    floor = np.flatnonzero(~walls.ravel())
    picks = rng.choice(len(floor), size=crates + 1, replace=False)
    goals_flat = np.zeros(height * width, dtype=bool)
    goal_cells = sorted(int(floor[i]) for i in picks[:crates])
    goals_flat[goal_cells] = True
    player = int(floor[picks[crates]])
    return Level(height, width, walls, goals_flat.reshape(height, width),
                 State(player, tuple(goal_cells)))


def scatter_level(rng: np.random.Generator, height: int, width: int, density: float,
                  crates: int) -> Level | None:
    """Walls, goals, crates (off goals) and the player all dropped at random."""
    walls = draw_walls(rng, height, width, density)
    if walls is None:
        return None
    floor = np.flatnonzero(~walls.ravel())
    picks = [int(floor[i]) for i in rng.choice(len(floor), size=2 * crates + 1, replace=False)]
    goals_flat = np.zeros(height * width, dtype=bool)
    goals_flat[picks[:crates]] = True
    state = State(picks[2 * crates], tuple(sorted(picks[crates:2 * crates])))
    return Level(height, width, walls, goals_flat.reshape(height, width), state)


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
