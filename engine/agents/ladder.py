"""The compute ladder: how often the reference planner solves a level at each per-step budget.

The planner plays the level at budgets of 4, 8, 16, ... 262,144 dynamics calls per step (one
expansion up to 65,536 expansions), once per tie-break seed, within the level's step budget.
Climbing stops once every seed has solved at two consecutive budgets: the budgets above are
counted as solved by every seed (a larger lookahead finds what a smaller one found), which
``Ladder.played`` makes explicit.
"""

from __future__ import annotations

__all__ = [
    "LADDER_BUDGETS", "LADDER_LOWEST_LOG2", "LADDER_SEEDS", "LADDER_STEPS", "Ladder",
    "SOLVED_RUNS_TO_STOP", "climb", "ladder_kernel",
]

from typing import NamedTuple

import numpy as np

from engine.agents.planner import (
    CALLS_PER_EXPANSION,
    HEURISTIC_WEIGHT,
    board_arrays,
    plan_kernel,
    state_key,
)
from engine.kernel_cache import njit
from engine.levels import Level

LADDER_STEPS = 17
LADDER_LOWEST_LOG2 = CALLS_PER_EXPANSION.bit_length() - 1  # first rung: one expansion, 4 calls
# Rung k's budget in dynamics calls per step: 2**(k + 2), from 4 to 262,144.
LADDER_BUDGETS = tuple(1 << (LADDER_LOWEST_LOG2 + k) for k in range(LADDER_STEPS))
LADDER_SEEDS = tuple(range(1, 9))  # eight tie-break seeds; seed 0 is the reference run
SOLVED_RUNS_TO_STOP = 2  # consecutive budgets solved by every seed before climbing stops


class Ladder(NamedTuple):
    """Seeds solving at each budget of ``LADDER_BUDGETS``, out of ``seeds``; rungs above
    ``played`` (an index) were not played and count as solved by every seed."""

    solved: tuple[int, ...]
    seeds: int
    played: int

    @property
    def rates(self) -> tuple[float, ...]:
        return tuple(s / self.seeds for s in self.solved)


@njit(cache=True)
def ladder_kernel(passable: np.ndarray, goal: np.ndarray, width: int, start_key: int,
                  n_crates: int, max_steps: int, seeds: np.ndarray, rungs: int,
                  weight: int) -> tuple[np.ndarray, int]:
    """Seeds solving at the first ``rungs`` budgets (2**2 ... dynamics calls per step), and
    the index of the last rung played."""
    solved = np.zeros(rungs, np.int64)
    streak = 0
    for k in range(rungs):
        for s in range(seeds.size):
            ok, _, _, _ = plan_kernel(passable, goal, width, start_key, n_crates, max_steps,
                                      1 << (LADDER_LOWEST_LOG2 + k), weight, seeds[s])
            if ok:
                solved[k] += 1
        streak = streak + 1 if solved[k] == seeds.size else 0
        if streak == SOLVED_RUNS_TO_STOP:
            solved[k + 1:] = seeds.size
            return solved, k
    return solved, rungs - 1


def climb(level: Level, max_steps: int, seeds: tuple[int, ...] = LADDER_SEEDS,
          rungs: int = LADDER_STEPS) -> Ladder:
    """Play ``level`` up the ladder (the first ``rungs`` of ``LADDER_BUDGETS``, in dynamics
    calls per step) with every tie-break seed."""
    if not seeds or min(seeds) < 0:
        raise ValueError("the ladder needs at least one tie-break seed, all >= 0")
    if not 1 <= rungs <= LADDER_STEPS:
        raise ValueError(f"the ladder has 1 to {LADDER_STEPS} rungs, not {rungs}")
    passable, goal = board_arrays(level)
    solved, played = ladder_kernel(passable, goal, level.width, state_key(level.start),
                                   level.n_crates, int(max_steps),
                                   np.asarray(seeds, dtype=np.int64), rungs, HEURISTIC_WEIGHT)
    return Ladder(tuple(int(s) for s in solved), len(seeds), int(played))
