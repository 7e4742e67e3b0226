"""How precise a score is: its interval over draws of levels, paired ties, expected moves.

A score is one draw of levels from what the game's spec can generate; these are the figures
that say how much another draw would change it. Pure numpy, deterministic, no engine.

- ``success_interval``: 95% interval for an agent's success rate over the whole population
  of levels its spec draws (the mean over every possible draw). The variance is that of a
  stratified level bootstrap (levels redrawn within their tier, as a new build redraws each
  tier), computed exactly instead of by drawing, with each tier's rate smoothed by half a
  solved and half an unsolved level (Jeffreys) so a tier solved throughout still varies;
  Wilson's score interval at the effective number of levels ``p(1-p) / variance`` turns it
  into bounds inside [0, 1].
- ``paired_p_value``: exact two-sided McNemar (sign) test over the levels two agents both
  played: only levels one solved and the other did not count.
- ``expected_move``: how far one agent's solved count moves between two independent draws of
  the same tiers, exactly (difference of sums of binomials), given its tier rates.
"""

from __future__ import annotations

__all__ = [
    "ALPHA", "LEVEL", "METHOD", "Move", "PAIRED_METHOD", "PairedMark", "Z95", "difference_pmf",
    "expected_move", "interval_from_counts", "interval_from_tiers", "marks_against_above",
    "paired_p_value", "ranked_precision", "shown_p", "success_interval", "tier_rates", "wilson",
    "with_interval",
]

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

LEVEL = 0.95
Z95 = 1.959963984540054  # the standard normal's 97.5% quantile
ALPHA = 0.05  # a paired difference below this p-value tells two entries apart
METHOD = ("95% Wilson score interval at the effective number of levels of a stratified "
          "level bootstrap: levels redrawn within their tier, each tier's rate smoothed by "
          "half a solved and half an unsolved level")
PAIRED_METHOD = ("exact two-sided McNemar (sign) test over the levels both played; "
                 f"indistinguishable when p >= {ALPHA}")


def wilson(p: float, n_eff: float, z: float = Z95) -> tuple[float, float]:
    """Wilson's score interval for a rate ``p`` observed over ``n_eff`` (effective) trials."""
    if n_eff <= 0:
        return 0.0, 1.0
    z2 = z * z / n_eff
    centre = (p + z2 / 2) / (1 + z2)
    half = z * math.sqrt(p * (1 - p) / n_eff + z2 / (4 * n_eff)) / (1 + z2)
    return max(0.0, centre - half), min(1.0, centre + half)


def _tier_counts(solved: np.ndarray, tiers: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
    """Levels and solved levels per tier (one tier when ``tiers`` is None)."""
    if tiers is None or solved.size == 0:
        return np.array([solved.size]), np.array([int(solved.sum())])
    _, inverse = np.unique(tiers, return_inverse=True)
    return (np.bincount(inverse).astype(np.int64),
            np.bincount(inverse, weights=solved).astype(np.int64))


def interval_from_tiers(levels: Sequence[int] | np.ndarray, solved: Sequence[int] | np.ndarray,
                        z: float = Z95) -> tuple[float, float]:
    """The success interval of ``solved[t]`` out of ``levels[t]`` in each tier ``t``."""
    n_t = np.asarray(levels, dtype=np.float64)
    k_t = np.asarray(solved, dtype=np.float64)
    n = float(n_t.sum())
    if n == 0:
        return 0.0, 1.0
    smooth = (k_t + 0.5) / (n_t + 1.0)
    weights = n_t / n
    variance = float(np.sum(weights ** 2 * smooth * (1 - smooth) / n_t))
    centre = float(np.sum(weights * smooth))
    n_eff = centre * (1 - centre) / variance
    return wilson(float(k_t.sum()) / n, n_eff, z)


def success_interval(solved: Sequence[bool] | np.ndarray,
                     tiers: Sequence[int] | np.ndarray | None = None) -> list[float]:
    """``[lo, hi]``, 95%, for the success rate of per-level outcomes ``solved``; ``tiers``
    (one per level) are the strata a new draw keeps. Rounded to 4 places like a Score."""
    outcomes = np.asarray(solved, dtype=np.float64)
    strata = None if tiers is None else np.asarray(tiers)
    n_t, k_t = _tier_counts(outcomes, strata)
    lo, hi = interval_from_tiers(n_t, k_t)
    return [round(lo, 4), round(hi, 4)]


def interval_from_counts(solved: int, episodes: int) -> list[float]:
    """The interval when only the counts are known (a Score stored before intervals were):
    the levels taken as one tier."""
    lo, hi = interval_from_tiers([episodes], [solved])
    return [round(lo, 4), round(hi, 4)]


def with_interval(score: dict) -> dict:
    """``score`` carrying ``success_interval``: its own, else one from its counts."""
    if "success_interval" in score or "solved" not in score or "episodes" not in score:
        return score
    return {**score, "success_interval": interval_from_counts(int(score["solved"]),
                                                              int(score["episodes"]))}


def _binomial_pmf(n: int, p: float) -> np.ndarray:
    k = np.arange(n + 1)
    if p <= 0.0 or p >= 1.0:
        out = np.zeros(n + 1)
        out[0 if p <= 0.0 else n] = 1.0
        return out
    log = (np.array([math.lgamma(n + 1) - math.lgamma(i + 1) - math.lgamma(n - i + 1)
                     for i in k]) + k * math.log(p) + (n - k) * math.log1p(-p))
    return np.exp(log)


def paired_p_value(a: Sequence[bool] | np.ndarray, b: Sequence[bool] | np.ndarray) -> float:
    """Exact two-sided McNemar p-value that agents with per-level outcomes ``a`` and ``b``
    (the same levels, in the same order) have the same success rate."""
    x, y = np.asarray(a, dtype=bool), np.asarray(b, dtype=bool)
    if x.shape != y.shape:
        raise ValueError(f"paired outcomes need the same levels: {x.size} and {y.size}")
    only_a, only_b = int(np.sum(x & ~y)), int(np.sum(~x & y))
    discordant = only_a + only_b
    if discordant == 0:
        return 1.0
    tail = float(_binomial_pmf(discordant, 0.5)[:min(only_a, only_b) + 1].sum())
    return min(1.0, 2 * tail)


def shown_p(p: float) -> float:
    """A p-value as the boards and standings keep it: 4 decimals, or 3 significant digits
    where 4 decimals would read a rounded 0.0."""
    return round(p, 4) if p == 0 or round(p, 4) else float(f"{p:.3g}")


@dataclass(frozen=True)
class PairedMark:
    """An entry against the one ranked just above it on the same levels."""

    p_value: float
    indistinguishable: bool


def marks_against_above(outcomes: Sequence[np.ndarray | None]) -> list[PairedMark | None]:
    """For entries in rank order, each one's paired test against the entry above (None for
    the first, and where either outcome vector is unknown or of other levels)."""
    marks: list[PairedMark | None] = [None]
    for above, entry in zip(outcomes, outcomes[1:], strict=False):
        if above is None or entry is None or len(above) != len(entry):
            marks.append(None)
            continue
        p = paired_p_value(above, entry)
        marks.append(PairedMark(shown_p(p), p >= ALPHA))
    return marks[:len(outcomes)]


def ranked_precision(outcomes: Sequence[np.ndarray | None], counts: Sequence[tuple[int, int]],
                     tiers: Sequence[int] | None = None) -> list[dict]:
    """The precision fields of ranked entries on one version's levels: for each, from its
    per-level outcomes (or, where they are unknown, its ``(solved, episodes)`` counts),
    ``success_interval``, ``indistinguishable_from_above`` and ``paired_p_above`` (None for
    the first entry and where a paired test cannot be made)."""
    out = []
    for solved, (k, n), mark in zip(outcomes, counts, marks_against_above(outcomes),
                                    strict=True):
        if solved is not None and int(np.sum(solved)) == k:
            strata = tiers if tiers is not None and len(tiers) == len(solved) else None
            interval = success_interval(solved, strata)
        else:
            interval = interval_from_counts(k, n)
        out.append({"success_interval": interval,
                    "indistinguishable_from_above": None if mark is None
                    else mark.indistinguishable,
                    "paired_p_above": None if mark is None else mark.p_value})
    return out


def difference_pmf(levels: Sequence[int], rates: Sequence[float],
                   other_rates: Sequence[float] | None = None) -> tuple[np.ndarray, int]:
    """The distribution of ``X - Y``, solved counts on two independent draws of the tiers
    (``levels[t]`` levels at rate ``rates[t]``; Y at ``other_rates``, default the same).
    Returns the probabilities and the offset: entry ``i`` is ``P(X - Y = i - offset)``."""
    other = rates if other_rates is None else other_rates
    pmf_x, pmf_y = np.ones(1), np.ones(1)
    for n, p, q in zip(levels, rates, other, strict=True):
        pmf_x = np.convolve(pmf_x, _binomial_pmf(int(n), float(p)))
        pmf_y = np.convolve(pmf_y, _binomial_pmf(int(n), float(q)))
    total = pmf_x.size - 1
    return np.convolve(pmf_x, pmf_y[::-1]), total


@dataclass(frozen=True)
class Move:
    """How far an agent's solved count moves between two draws: the mean of its absolute
    value and the central 95% range of the signed move, in levels."""

    mean_abs: float
    lo: int
    hi: int


def expected_move(levels: Sequence[int], rates: Sequence[float],
                  other_rates: Sequence[float] | None = None) -> Move:
    """The move of an agent solving tier ``t`` at ``rates[t]`` (and ``other_rates[t]`` on the
    second draw) between two independent draws of the tiers."""
    pmf, offset = difference_pmf(levels, rates, other_rates)
    d = np.arange(pmf.size) - offset
    cdf = np.cumsum(pmf)
    lo = int(d[int(np.searchsorted(cdf, (1 - LEVEL) / 2))])
    hi = int(d[min(int(np.searchsorted(cdf, 1 - (1 - LEVEL) / 2)), d.size - 1)])
    return Move(round(float(np.sum(np.abs(d) * pmf)), 2), lo, hi)


def tier_rates(solved: Sequence[bool] | np.ndarray,
               tiers: Sequence[int] | np.ndarray) -> tuple[list[int], list[float]]:
    """Levels and success rate per tier (tiers in sorted order)."""
    n_t, k_t = _tier_counts(np.asarray(solved, dtype=np.float64), np.asarray(tiers))
    return n_t.tolist(), (k_t / np.maximum(n_t, 1)).tolist()
