"""Item-response curves of the compute ladder: P(solve) against log2 budget, per level.

Each level's curve is a logistic in log2 budget with one slope shared by all levels; its
location, ``compute_to_solve``, is the log2 budget in dynamics calls per step (the benchmark
rule's currency) at which the planner solves half the time. Locations beyond the ladder are
censored at its top (18: 262,144 calls) and flagged; a level every seed solves with a single
expansion (4 calls) sits at the bottom, 2.
"""

from __future__ import annotations

__all__ = [
    "GRADE_BUDGETS", "HIGHEST", "LOWEST", "RULE_BUDGET", "RUNG_LOG2", "compute_grade",
    "failure_at_rule", "fit_locations", "fit_slope", "grade_rule", "log_likelihood",
    "solve_probability",
]

import numpy as np

from engine.agents.ladder import LADDER_BUDGETS
from engine.agents.planner import PLANNER_BUDGET
from pipeline.difficulty.logistic import sigmoid

RUNG_LOG2 = np.log2(np.asarray(LADDER_BUDGETS, dtype=np.float64))  # each rung's log2 calls
LOWEST = float(RUNG_LOG2[0])  # log2 of the smallest budget, 4 calls
HIGHEST = float(RUNG_LOG2[-1])  # log2 of the largest budget, 262,144 calls
# Grades by the dynamics calls per step the planner needs: <= 4, <= 32, <= 256 (the rule's),
# <= 2,048, more.
GRADE_BUDGETS = (4, 32, 256, 2048)
RULE_BUDGET = PLANNER_BUDGET  # the rule's 256 calls per step, where the reference plays
_SLOPE_RANGE = (0.05, 20.0)
_BISECTIONS = 60


def log_likelihood(location: np.ndarray, solved: np.ndarray, seeds: int,
                   slope: float) -> np.ndarray:
    """Per-level log-likelihood of the solve counts (levels x rungs) under the curves."""
    rungs = RUNG_LOG2[:solved.shape[1]]
    p = sigmoid(slope * (rungs[None, :] - np.asarray(location, dtype=np.float64)[:, None]))
    p = np.clip(p, 1e-12, 1 - 1e-12)
    return (solved * np.log(p) + (seeds - solved) * np.log1p(-p)).sum(axis=1)


def fit_locations(solved: np.ndarray, seeds: int, slope: float) -> tuple[np.ndarray,
                                                                         np.ndarray]:
    """``(compute_to_solve, censored)`` per level for a given slope: the maximum-likelihood
    location, clamped to the ladder; ``censored`` when it lies above the ladder's top."""
    solved = np.asarray(solved, dtype=np.float64)
    rungs = RUNG_LOG2[:solved.shape[1]]
    # The score in the location falls monotonically: bisect for its zero (no overshoot, and
    # all-solved or all-failed rows run to the bounds instead of to infinity).
    lo = np.full(solved.shape[0], LOWEST - 1.0)
    hi = np.full(solved.shape[0], HIGHEST + 1.0)
    for _ in range(_BISECTIONS):
        mid = (lo + hi) / 2
        p = sigmoid(slope * (rungs[None, :] - mid[:, None]))
        score = (seeds * p - solved).sum(axis=1)
        rising = score > 0
        lo = np.where(rising, mid, lo)
        hi = np.where(rising, hi, mid)
    location = (lo + hi) / 2
    censored = location > HIGHEST
    return np.clip(location, LOWEST, HIGHEST), censored


def fit_slope(solved: np.ndarray, seeds: int) -> float:
    """The shared slope maximising the profile likelihood over every level's location.

    Levels solved at every rung or at none carry no information on the slope: left out.
    """
    solved = np.asarray(solved, dtype=np.float64)
    solved = solved[(solved.min(axis=1) < seeds) & (solved.max(axis=1) > 0)]
    if solved.shape[0] == 0:
        raise ValueError("no level has both solved and failed rungs: the slope is unknown")

    def total(log_slope: float) -> float:
        slope = float(np.exp(log_slope))
        location, _ = fit_locations(solved, seeds, slope)
        return float(log_likelihood(location, solved, seeds, slope).sum())

    a, b = np.log(_SLOPE_RANGE[0]), np.log(_SLOPE_RANGE[1])
    ratio = (np.sqrt(5) - 1) / 2
    for _ in range(40):  # golden-section search on log slope
        c, d = b - ratio * (b - a), a + ratio * (b - a)
        if total(c) >= total(d):
            b = d
        else:
            a = c
    return round(float(np.exp((a + b) / 2)), 4)


def solve_probability(location: np.ndarray, slope: float, budget: int) -> np.ndarray:
    """The curves' probability of solving at ``budget`` dynamics calls per step."""
    return sigmoid(slope * (np.log2(budget) - np.asarray(location, dtype=np.float64)))


def failure_at_rule(location: np.ndarray, slope: float) -> np.ndarray:
    """``difficulty``: the curves' chance of failing at the rule's 256 calls per step."""
    return 1.0 - solve_probability(location, slope, RULE_BUDGET)


def compute_grade(location: np.ndarray) -> np.ndarray:
    """Grade 1-5 from ``compute_to_solve``: the first of GRADE_BUDGETS it fits under, else 5."""
    cuts = np.log2(np.asarray(GRADE_BUDGETS, dtype=np.float64))
    return (1 + np.searchsorted(cuts, np.asarray(location, dtype=np.float64),
                                side="left")).astype(np.int8)


def grade_rule() -> str:
    """The grade cut points in words, as the model file and the audit state them."""
    parts = [f"{g}: <= {b:,}" for g, b in enumerate(GRADE_BUDGETS, start=1)]
    return ("compute_to_solve in dynamics calls per step: " + ", ".join(parts)
            + f", {len(GRADE_BUDGETS) + 1}: more")
