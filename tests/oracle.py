"""The oracle: a deliberately simple pure-Python BFS that shares no code with the engine.

It plays Sokoban on (row, col) tuples and explores every state without pruning; the tests
check the numba searches against it and benchmarks/engine.py times it beside them.
"""

from __future__ import annotations

from collections import deque

import numpy as np

from engine.levels import Level, State

MOVES = {"u": (-1, 0), "d": (1, 0), "l": (0, -1), "r": (0, 1)}


def oracle_successors(level: Level, player: tuple, crates: frozenset):
    """(letter, player, crates) for every action that changes the state."""
    for letter, (dr, dc) in MOVES.items():
        nxt = (player[0] + dr, player[1] + dc)
        if level.walls[nxt]:
            continue
        if nxt in crates:
            beyond = (nxt[0] + dr, nxt[1] + dc)
            if level.walls[beyond] or beyond in crates:
                continue
            yield letter.upper(), nxt, (crates - {nxt}) | {beyond}
        else:
            yield letter, nxt, crates


def oracle_solve(level: Level, state: State | None = None) -> int | None:
    """Fewest moves to put every crate on a goal, or None when impossible."""
    state = level.start if state is None else state
    goals = {tuple(int(x) for x in g) for g in np.argwhere(level.goals)}
    w = level.width
    start = (divmod(state.player, w), frozenset(divmod(c, w) for c in state.crates))
    if start[1] <= goals:
        return 0
    seen = {start}
    queue = deque([(start, 0)])
    while queue:
        (player, crates), dist = queue.popleft()
        for _, p2, c2 in oracle_successors(level, player, crates):
            if (p2, c2) in seen:
                continue
            if c2 <= goals:
                return dist + 1
            seen.add((p2, c2))
            queue.append(((p2, c2), dist + 1))
    return None
