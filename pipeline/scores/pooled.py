"""An adaptive game's ranking: each name's ability pooled over its sessions, and how sure the
order of two names is.

Each session of the adaptive game shows its own levels, so neither a name's best session nor
a paired test over common levels ranks it. A name's ability is instead one posterior from
every level all its closed sessions showed, with their outcomes, under the pool's item
parameters (``pipeline.scores.adaptive.posterior``, one prior for the name): each session
padded as its close pads it (``pad_unplayed``: every unplayed episode a failure), so a
session closed after three lucky levels cannot lift it. A name that retries until a lucky
sequence only adds trials: the pooled ability converges on its true one instead of its best
luck. Two names ranked next to each other are told apart by the posterior probability that
the one above has the higher ability (``above_probability``): ``paired_p_above`` is twice
the smaller tail, ``2 min(P, 1 - P)``, a p-value's reading, and the entry is
``indistinguishable_from_above`` when it is at least ``ALPHA`` (P under 0.975).
"""

from __future__ import annotations

__all__ = ["ABOVE_METHOD", "POOLED_METHOD", "ItemPool", "Pooled", "Shown", "above_probability",
           "marks_above", "pooled", "session_trials"]

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from pipeline.precision import ALPHA, PairedMark, shown_p
from pipeline.scores.adaptive import (
    Ability,
    Equated,
    equated_on,
    pad_unplayed,
    posterior,
    ramp_curve,
    ramp_spread,
    summary,
)


class ItemPool(Protocol):
    """What pooling reads of a pool (``serve.games.pool.Pool`` is one): its levels' item
    parameters and tiers, the tier targets its sessions balance to, its levels' weights on
    the standard ramp (``ramp``) and the episodes a session shows."""

    @property
    def discrimination(self) -> np.ndarray: ...
    @property
    def difficulty(self) -> np.ndarray: ...
    @property
    def tiers(self) -> np.ndarray: ...
    @property
    def targets(self) -> dict[int, float]: ...
    @property
    def ramp(self) -> np.ndarray: ...
    @property
    def episodes(self) -> int: ...
    @property
    def model_sd(self) -> float: ...

POOLED_METHOD = ("ability pooled over every closed session of the name: one posterior (EAP, "
                 "central 95% interval) from all the levels they showed and their outcomes "
                 "under the pool's item parameters, unplayed episodes failures as at close; "
                 "equated_success its expected success on the standard ramp")
ABOVE_METHOD = ("P = posterior probability that the entry above has the higher pooled "
                f"ability; paired_p_above = 2 min(P, 1 - P); indistinguishable when it is "
                f">= {ALPHA} (P < {1 - ALPHA / 2})")


@dataclass(frozen=True)
class Shown:
    """One closed session of the adaptive game: the levels it showed (indices of the pool)
    in play order, and whether each was solved."""

    levels: tuple[int, ...]
    solved: tuple[bool, ...]


@dataclass(frozen=True)
class Pooled:
    """A name's pooled ability: its estimate, its equated success, the posterior on
    ``ABILITY_GRID`` they come from and how many sessions and levels it pools."""

    ability: Ability
    equated: Equated
    posterior: np.ndarray
    sessions: int
    levels: int


def session_trials(pool: ItemPool, shown: Shown) -> tuple[np.ndarray, np.ndarray]:
    """A session's levels and outcomes as its close counts them: padded to the pool's
    ``episodes`` with failures on the easiest unshown levels of the tiers it lacks."""
    return pad_unplayed(pool.difficulty, pool.tiers, np.array(shown.levels, dtype=np.int64),
                        np.array(shown.solved, dtype=bool), pool.targets, pool.episodes)


def pooled(pool: ItemPool, sessions: Sequence[Shown], curve: np.ndarray | None = None,
           spread: np.ndarray | None = None) -> Pooled:
    """One name's ability from all its ``sessions``: one posterior over all their (padded)
    levels and outcomes; a level two sessions showed is two trials of it. ``curve`` and
    ``spread``: the pool's ``ramp_curve`` and ``ramp_spread`` (with its ``model_sd``, an
    error pooling does not shrink), when they were computed once for many names."""
    parts = [session_trials(pool, s) for s in sessions]
    levels = np.concatenate([p[0] for p in parts]) if parts else np.zeros(0, dtype=np.int64)
    solved = np.concatenate([p[1] for p in parts]) if parts else np.zeros(0, dtype=bool)
    a, b = pool.discrimination, pool.difficulty
    weights = posterior(a, b, levels, solved)
    curve = ramp_curve(a, b, pool.ramp) if curve is None else curve
    if spread is None:
        spread = ramp_spread(a, b, pool.ramp, model_sd=pool.model_sd)
    return Pooled(summary(weights), equated_on(curve, weights, spread=spread), weights,
                  len(sessions), int(levels.size))


def above_probability(upper: np.ndarray, lower: np.ndarray) -> float:
    """P(theta_upper > theta_lower) for two independent posteriors on the same grid (a tie
    on a grid point counts half)."""
    u, w = np.asarray(upper, dtype=np.float64), np.asarray(lower, dtype=np.float64)
    below = np.cumsum(w) - w  # P(theta_lower < grid point i)
    return float(np.clip(u @ (below + 0.5 * w), 0.0, 1.0))


def marks_above(posteriors: Sequence[np.ndarray]) -> list[PairedMark | None]:
    """For names in rank order (their pooled posteriors), each one's mark against the name
    above (None for the first): ``ABOVE_METHOD``."""
    marks: list[PairedMark | None] = [None] if posteriors else []
    for above, entry in zip(posteriors, posteriors[1:], strict=False):
        p_above = above_probability(above, entry)
        p = min(1.0, 2 * min(p_above, 1 - p_above))
        marks.append(PairedMark(shown_p(p), p >= ALPHA))
    return marks
