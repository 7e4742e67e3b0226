"""Engine speed: the numba solver against pure-Python BFS, and solvable-set enumeration.

Two Python baselines run beside the numba solver on the same levels: the tests' oracle
(tests/oracle.py: plain BFS, no pruning; the reference the speed target names) and a tuned
Python BFS on flat cells with the same dead-square pruning as the solver (the fairest one).

Levels are drawn like the default game's tiers: 8x8, an outer wall ring, interior walls at the
tier's density, one connected floor region, and a start drawn from the solvable set inside
the tier's whole optimal-length band. Both solvers run on the same levels in the same run.
Render time per frame of every look is measured by benchmarks/render.py.

    .venv/bin/python benchmarks/engine.py [--levels N] [--seed S]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections import deque
from pathlib import Path

import numpy as np

# Run as a script, this file's folder comes first on sys.path and its name would hide the
# ``engine`` package.
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).parent.resolve()]
sys.path.append(str(Path(__file__).resolve().parent.parent / "tests"))

from oracle import oracle_solve  # noqa: E402

from engine.levels import Level, State  # noqa: E402
from engine.search.deadlock import dead_squares  # noqa: E402
from engine.search.reverse import solvable_set  # noqa: E402
from engine.search.solver import solve  # noqa: E402

# crates, wall density, shortest and longest optimal length of the tier (DESIGN.md)
TIERS = ((1, 0.10, 4, 20), (2, 0.12, 9, 30), (3, 0.14, 13, 38), (4, 0.18, 17, 46))


def connected(floor: np.ndarray) -> bool:
    """Whether the floor cells form one 4-connected region."""
    cells = set(map(tuple, np.argwhere(floor)))
    stack = [next(iter(cells))]
    seen = {stack[0]}
    while stack:
        r, c = stack.pop()
        for n in ((r - 1, c), (r + 1, c), (r, c - 1), (r, c + 1)):
            if n in cells and n not in seen:
                seen.add(n)
                stack.append(n)
    return len(seen) == len(cells)


def draw_level(rng: np.random.Generator, n_crates: int, density: float, lo: int,
               hi: int) -> Level:
    """A tier-like 8x8 level whose optimal length lies in [lo, hi]."""
    while True:
        walls = np.ones((8, 8), bool)
        walls[1:-1, 1:-1] = rng.random((6, 6)) < density
        if not connected(~walls):
            continue
        floor = np.flatnonzero(~walls.ravel())
        goals = np.zeros(64, bool)
        goals[rng.choice(floor, n_crates, replace=False)] = True
        player = int(rng.choice(floor[~goals[floor]]))
        crates = tuple(int(c) for c in np.flatnonzero(goals))
        level = Level(8, 8, walls, goals.reshape(8, 8), State(player, crates))
        start = solvable_set(level).sample_start(rng, lo, hi)
        if start is not None:
            return level.with_start(start)


def python_bfs(level: Level) -> tuple[int | None, int]:
    """Plain Python BFS with the same dead-square pruning: (fewest moves or None, expanded)."""
    w = level.width
    walls = set(np.flatnonzero(~level.floor.ravel()).tolist())
    dead = set(np.flatnonzero(dead_squares(level).ravel()).tolist())
    goals = frozenset(level.goal_cells)
    start = (level.start.player, frozenset(level.start.crates))
    if start[1] == goals:
        return 0, 0
    seen = {start}
    queue = deque([(start, 0)])
    expanded = 0
    while queue:
        (player, crates), dist = queue.popleft()
        expanded += 1
        for d in (-w, w, -1, 1):
            nxt = player + d
            if nxt in walls:
                continue
            if nxt in crates:
                beyond = nxt + d
                if beyond in walls or beyond in crates or beyond in dead:
                    continue
                state = (nxt, (crates - {nxt}) | {beyond})
            else:
                state = (nxt, crates)
            if state in seen:
                continue
            if state[1] == goals:
                return dist + 1, expanded
            seen.add(state)
            queue.append((state, dist + 1))
    return None, expanded


def timed(fn, *args):
    """Result and CPU seconds of one call (CPU time: other jobs on the machine do not count)."""
    t = time.process_time()
    out = fn(*args)
    return out, time.process_time() - t


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--levels", type=int, default=20, help="levels per crate count")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    rng = np.random.default_rng(args.seed)
    solve(draw_level(rng, 1, 0.1, 4, 20))  # load the compiled kernels before timing
    print(f"{'crates':>6} {'numba med ms':>12} {'max ms':>8} {'oracle med ms':>13} {'max ms':>8}"
          f" {'x oracle':>8} {'tuned med ms':>12} {'x tuned':>7} {'numba st/s':>11}"
          f" {'tuned st/s':>11} {'enum med ms':>11} {'set KB max':>10}")
    for n_crates, density, lo, hi in TIERS:
        levels = [draw_level(rng, n_crates, density, lo, hi) for _ in range(args.levels)]
        fast, oracle, tuned, x_oracle, x_tuned = [], [], [], [], []
        fast_rate, tuned_rate, enum, sizes = [], [], [], []
        for level in levels:
            result, t_fast = timed(solve, level)
            oracle_moves, t_oracle = timed(oracle_solve, level)
            (moves, expanded), t_tuned = timed(python_bfs, level)
            assert result.status == "solved" and moves == oracle_moves == result.moves, (
                "solvers disagree")
            sset, t_enum = timed(solvable_set, level)
            fast.append(t_fast)
            oracle.append(t_oracle)
            tuned.append(t_tuned)
            x_oracle.append(t_oracle / t_fast)
            x_tuned.append(t_tuned / t_fast)
            fast_rate.append(result.states_expanded / t_fast)
            tuned_rate.append(expanded / t_tuned)
            enum.append(t_enum)
            sizes.append(sset.nbytes)
        med = statistics.median
        print(f"{n_crates:>6} {1e3 * med(fast):>12.2f} {1e3 * max(fast):>8.2f}"
              f" {1e3 * med(oracle):>13.1f} {1e3 * max(oracle):>8.1f} {med(x_oracle):>7.0f}x"
              f" {1e3 * med(tuned):>12.1f} {med(x_tuned):>6.0f}x {med(fast_rate):>11.3g}"
              f" {med(tuned_rate):>11.3g} {1e3 * med(enum):>11.2f} {max(sizes) / 1024:>10.0f}")
    print("x oracle, x tuned: median over levels of Python time / numba time on the same level")


if __name__ == "__main__":
    main()
