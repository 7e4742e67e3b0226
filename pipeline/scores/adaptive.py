"""Adaptive scorecards: item parameters of a pool, ability with an interval, the next levels.

The method, as computerized adaptive testing and Fluid Benchmarking do it, on the two-parameter
logistic model of ``pipeline.scores.irt`` (P(solve) = sigmoid(a (theta - b))):

- **Calibration** (``calibrate``). Twelve deterministic panel agents give each level twelve
  outcomes: too few to fit a discrimination, and none at all for a level every agent solves
  (or none does). So the panel's outcomes are joined to the difficulty model: each level's
  difficulty has the prior N(m_l, s^2), m_l a ridge regression of the fitted difficulties on
  the difficulty model's standardised grade features and the level's crate tier, s their
  residual spread; the regression and the fit alternate (empirical Bayes) for a few rounds.
  Discriminations keep irt's weak prior log a ~ N(0, 0.5^2), which shrinks the noisy ones
  to 1. Why: the features carry what a level's difficulty is when the panel cannot tell
  (all solved, none solved), and the panel corrects the features where it can. A refit
  (``sokoforge irt POOL``) adds the closed scorecards' names as more agents, each on the
  levels its sessions showed (``calibrate_trials``).
- **Ability** (``estimate``): the posterior of theta on a fixed grid under a normal prior
  (EAP): its mean, standard deviation and central 95% interval.
- **Next levels** (``choose_block``): ``parallel`` levels at a time at the current estimate.
  Each pick takes the tier furthest below its target share (content balance over crate
  tiers), then one level at random among the ``TOP`` of that tier with the most Fisher
  information a^2 p (1 - p) (exposure control), never a level shown before in the session,
  nor one whose share of sessions would pass ``MAX_EXPOSURE`` once enough sessions are
  known.
- **Closing early** (``pad_unplayed``): every unplayed episode counts as a failure on the
  easiest level not yet shown of the tier the balance would pick next.
- **Equating** (``equated_success``): the expected success on the standard game's
  100-level ramp, the mean of each standard level's P(solve) weighted as the ramp weighs
  it, over the ability's posterior. Its 95% interval holds three errors, not one: the
  ability's posterior; the pool's levels being a sample of the game's (the ramp-weighted
  variance of the outcomes, sum w^2 p (1 - p)); and the model's own error on an agent it
  was not fitted to (``model_sd``, measured by ``model_error``).
- **Model error** (``model_error``): each panel agent left out in turn, the pool calibrated
  on the others, and sessions of the left-out agent played on its own outcomes: the error
  of their equated success against its success on the whole pool, beyond what the
  posterior already allows for. Twelve agents cannot make the 2PL fit agents unlike them
  (an agent's success on the levels near its ability says less about the rest than the
  model claims); the interval says so rather than hiding it.

Pure numpy, deterministic for a given random generator.
"""

from __future__ import annotations

__all__ = [
    "ABILITY_GRID", "Ability", "Calibration", "Equated", "MAX_EXPOSURE", "ModelError",
    "PRIOR_SD", "TOP", "Trials", "calibrate", "calibrate_trials", "choose_block", "equated_on",
    "equated_success", "estimate", "information", "model_error", "next_tier", "over_exposed",
    "pad_unplayed", "panel_trials", "posterior", "ramp_curve", "ramp_spread", "ramp_weights",
    "success_probability", "summary",
]

import math
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from pipeline.difficulty.logistic import sigmoid
from pipeline.precision import LEVEL
from pipeline.scores.irt import fit_2pl

ABILITY_GRID = np.linspace(-10.0, 10.0, 401)  # theta's posterior on these points: 4 prior sd
# an unseen agent's ability ~ N(0, 2.5^2): the pool's difficulties spread about 2.3 logits
# either side of 0 (one sd), and an agent may sit anywhere along them
PRIOR_SD = 2.5
TOP = 20  # each pick is at random among this many most informative levels of its tier
MAX_EXPOSURE = 0.25  # no level in more than this share of sessions, once counted
_CALIBRATION_ROUNDS = 4  # alternations of the 2PL fit and the difficulty regression
_RIDGE = 1.0  # the difficulty regression's penalty (standardised features)
_MIN_DIFFICULTY_SD = 0.3  # the prior's spread never falls below this (logits)
_ERROR_SESSIONS = 3  # sessions of each left-out agent that ``model_error`` plays


@dataclass(frozen=True)
class Calibration:
    """Item parameters of a pool's levels (in its rows' order) and how they were fitted: the
    panel agents' abilities on the same scale, and the difficulty prior's spread."""

    discrimination: np.ndarray
    difficulty: np.ndarray
    prior_difficulty: np.ndarray
    difficulty_sd: float
    panel_ability: np.ndarray


def _design(features: np.ndarray, tiers: np.ndarray) -> np.ndarray:
    """Features standardised, one indicator column per tier (no intercept: the tiers are)."""
    x = np.asarray(features, dtype=np.float64)
    scale = x.std(axis=0)
    x = (x - x.mean(axis=0)) / np.where(scale > 0, scale, 1.0)
    names = np.unique(tiers)
    return np.hstack([x, (np.asarray(tiers)[:, None] == names[None, :]).astype(np.float64)])


class Trials(NamedTuple):
    """Outcomes as counts: ``hits`` solved of ``trials`` for each (``agent``, ``level``) pair,
    agents numbered 0 to ``n_agents - 1``."""

    agent: np.ndarray
    level: np.ndarray
    trials: np.ndarray
    hits: np.ndarray
    n_agents: int


def panel_trials(solved: np.ndarray) -> Trials:
    """The panel's ``solved`` (levels x agents, booleans) as one trial per pair."""
    outcomes = np.asarray(solved, dtype=bool)
    n_levels, n_agents = outcomes.shape
    return Trials(np.tile(np.arange(n_agents), n_levels), np.repeat(np.arange(n_levels), n_agents),
                  np.ones(n_levels * n_agents, dtype=np.int64),
                  outcomes.ravel().astype(np.int64), n_agents)


def calibrate(solved: np.ndarray, features: np.ndarray, tiers: np.ndarray) -> Calibration:
    """Item parameters from the panel's ``solved`` (levels x agents, booleans), the levels'
    grade ``features`` (levels x features) and crate ``tiers`` (one per level)."""
    return calibrate_trials(panel_trials(solved), features, tiers)


def calibrate_trials(outcomes: Trials, features: np.ndarray, tiers: np.ndarray) -> Calibration:
    """``calibrate`` of any agents' ``outcomes`` on the levels (the panel's, and a refit's
    closed scorecards beside them: a level no one played keeps its feature prior)."""
    agent, level, trials, hits, n_agents = outcomes
    n_levels = len(tiers)
    x = _design(features, tiers)
    penalty = _RIDGE * np.eye(x.shape[1])
    penalty[-len(np.unique(tiers)):, -len(np.unique(tiers)):] = 0.0  # tier means unpenalised
    mean, sd = np.zeros(n_levels), 3.0
    for _ in range(_CALIBRATION_ROUNDS):
        theta, b, a = fit_2pl(agent, level, trials, hits, n_agents, n_levels,
                              difficulty_mean=mean, difficulty_sd=sd)
        weights = np.linalg.solve(x.T @ x + penalty, x.T @ b)
        # the spread of true difficulties around the regression: the fitted ones' spread
        # plus each one's posterior variance (the fit shrinks them, an EM step adds it back)
        p = sigmoid(a[level] * (theta[agent] - b[level]))
        variance = 1 / (np.bincount(level, trials * a[level] ** 2 * p * (1 - p), n_levels)
                        + 1 / sd ** 2)
        mean = x @ weights
        sd = max(math.sqrt(float(np.mean((b - mean) ** 2 + variance))), _MIN_DIFFICULTY_SD)
    theta, b, a = fit_2pl(agent, level, trials, hits, n_agents, n_levels,
                          difficulty_mean=mean, difficulty_sd=sd)
    return Calibration(a, b, mean, sd, theta)


def success_probability(theta: np.ndarray | float, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """P(solve) of every level at every ability: shape (abilities, levels)."""
    t = np.atleast_1d(np.asarray(theta, dtype=np.float64))
    return sigmoid(a[None, :] * (t[:, None] - b[None, :]))


def information(theta: float, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Each level's Fisher information about ability at ``theta``: a^2 p (1 - p)."""
    p = success_probability(theta, a, b)[0]
    return a * a * p * (1 - p)


@dataclass(frozen=True)
class Ability:
    """An ability estimate: posterior mean, standard deviation and central 95% interval."""

    theta: float
    sd: float
    low: float
    high: float


def posterior(a: np.ndarray, b: np.ndarray, shown: np.ndarray, solved: np.ndarray,
              prior_sd: float = PRIOR_SD) -> np.ndarray:
    """The posterior of ability on ``ABILITY_GRID`` (weights summing to 1) after levels
    ``shown`` (indices into ``a``, ``b``) with outcomes ``solved``."""
    levels = np.asarray(shown, dtype=np.int64)
    outcome = np.asarray(solved, dtype=bool)
    log = -0.5 * (ABILITY_GRID / prior_sd) ** 2
    if levels.size:
        eta = a[levels][None, :] * (ABILITY_GRID[:, None] - b[levels][None, :])
        # log sigmoid(eta) and log sigmoid(-eta), stable for large |eta|
        log_p, log_q = -np.logaddexp(0.0, -eta), -np.logaddexp(0.0, eta)
        log = log + np.where(outcome[None, :], log_p, log_q).sum(axis=1)
    weights = np.exp(log - log.max())
    return weights / weights.sum()


def _quantiles(weights: np.ndarray, values: np.ndarray) -> tuple[float, float]:
    """The central ``LEVEL`` interval of ``values`` (increasing) weighted by ``weights``."""
    cdf = np.cumsum(weights)
    tail = (1 - LEVEL) / 2
    lo = values[min(int(np.searchsorted(cdf, tail)), values.size - 1)]
    hi = values[min(int(np.searchsorted(cdf, 1 - tail)), values.size - 1)]
    return float(lo), float(hi)


def estimate(a: np.ndarray, b: np.ndarray, shown: np.ndarray, solved: np.ndarray,
             prior_sd: float = PRIOR_SD) -> Ability:
    """The EAP ability after ``shown`` levels with outcomes ``solved``, with its interval."""
    return summary(posterior(a, b, shown, solved, prior_sd))


def summary(weights: np.ndarray) -> Ability:
    """The EAP ability of a ``posterior`` on ``ABILITY_GRID``, with its interval."""
    mean = float(weights @ ABILITY_GRID)
    sd = math.sqrt(max(float(weights @ (ABILITY_GRID - mean) ** 2), 0.0))
    lo, hi = _quantiles(weights, ABILITY_GRID)
    return Ability(round(mean, 4), round(sd, 4), round(lo, 4), round(hi, 4))


def next_tier(tiers: np.ndarray, shown: np.ndarray, targets: dict[int, float]) -> int:
    """The tier furthest below its target share once one more level is shown (ties to the
    lowest tier): content balance, so every session covers the tiers as the ramp does."""
    counts = {t: 0 for t in targets}
    for t in np.asarray(tiers)[np.asarray(shown, dtype=np.int64)].tolist():
        counts[int(t)] = counts.get(int(t), 0) + 1
    n = sum(counts.values()) + 1
    return max(sorted(targets), key=lambda t: targets[t] * n - counts.get(t, 0))


def over_exposed(exposure: np.ndarray | None, sessions: int,
                 max_share: float = MAX_EXPOSURE) -> np.ndarray | None:
    """Levels that would be shown in more than ``max_share`` of sessions if this one showed
    them, from ``exposure`` (sessions that showed each level) over ``sessions`` earlier
    ones; None until there are enough sessions for a share to mean anything."""
    if exposure is None or sessions < math.ceil(1 / max_share):
        return None
    return (np.asarray(exposure) + 1) / (sessions + 1) > max_share


def choose_block(theta: float, a: np.ndarray, b: np.ndarray, tiers: np.ndarray,
                 shown: np.ndarray, targets: dict[int, float], *, parallel: int,
                 rng: np.random.Generator, blocked: np.ndarray | None = None,
                 top: int = TOP) -> list[int]:
    """The next ``parallel`` levels (indices) at ability ``theta``: by content balance, then
    at random among the ``top`` most informative unshown levels of the tier; ``blocked``
    (booleans, from ``over_exposed``) are passed over while the tier has others."""
    info = information(theta, a, b)
    taken = np.zeros(a.size, dtype=bool)
    taken[np.asarray(shown, dtype=np.int64)] = True
    picks: list[int] = []
    for _ in range(parallel):
        tier = next_tier(tiers, np.concatenate([np.asarray(shown, dtype=np.int64),
                                                np.array(picks, dtype=np.int64)]), targets)
        free = ~taken & (np.asarray(tiers) == tier)
        if not free.any():
            free = ~taken  # the tier is used up: any level left
        if not free.any():
            break
        if blocked is not None and (free & ~blocked).any():
            free &= ~blocked
        candidates = np.flatnonzero(free)
        order = candidates[np.argsort(-info[candidates], kind="stable")][:top]
        pick = int(order[int(rng.integers(order.size))])
        taken[pick] = True
        picks.append(pick)
    return picks


def pad_unplayed(b: np.ndarray, tiers: np.ndarray, shown: np.ndarray, solved: np.ndarray,
                 targets: dict[int, float], episodes: int) -> tuple[np.ndarray, np.ndarray]:
    """A session closed before its ``episodes``: ``(shown, solved)`` with every unplayed
    episode a failure on the easiest unshown level of the tier the balance picks next."""
    levels = list(np.asarray(shown, dtype=np.int64).tolist())
    outcomes = list(np.asarray(solved, dtype=bool).tolist())
    taken = np.zeros(b.size, dtype=bool)
    taken[levels] = True
    while len(levels) < min(episodes, b.size):
        tier = next_tier(tiers, np.array(levels, dtype=np.int64), targets)
        free = ~taken & (np.asarray(tiers) == tier)
        if not free.any():
            free = ~taken
        candidates = np.flatnonzero(free)
        easiest = int(candidates[np.argmin(b[candidates])])
        taken[easiest] = True
        levels.append(easiest)
        outcomes.append(False)
    return np.array(levels, dtype=np.int64), np.array(outcomes, dtype=bool)


def ramp_weights(tiers: np.ndarray, shares: dict[int, float]) -> np.ndarray:
    """Per-level weights of a set of levels that make it weigh as the ramp does: the levels
    of tier ``t`` share ``shares[t]`` equally (a pool of the standard game's tiers, or a
    standard version itself with its own tiers' shares)."""
    t = np.asarray(tiers)
    weights = np.zeros(t.size)
    for tier, share in shares.items():
        mine = t == tier
        if mine.any():
            weights[mine] = share / mine.sum()
    return weights / weights.sum()


@dataclass(frozen=True)
class Equated:
    """Expected success on the standard game's ramp: its posterior mean and 95% interval."""

    value: float
    low: float
    high: float


def equated_success(a: np.ndarray, b: np.ndarray, weights: np.ndarray,
                    ability_posterior: np.ndarray, *, model_sd: float = 0.0) -> Equated:
    """The expected success over the levels ``(a, b)`` weighted by ``weights`` (the ramp's,
    ``ramp_weights``), under ``ability_posterior`` (on ``ABILITY_GRID``). The interval is
    the central 95% of the success at each ability plus a normal error of the levels'
    sampling and ``model_sd`` (``model_error``'s; ``ramp_spread``), mixed over the
    posterior."""
    return equated_on(ramp_curve(a, b, weights), ability_posterior,
                      spread=ramp_spread(a, b, weights, model_sd=model_sd))


def ramp_curve(a: np.ndarray, b: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """The expected success on the ramp at each point of ``ABILITY_GRID``: what
    ``equated_success`` reads a posterior through (computed once for many posteriors)."""
    return success_probability(ABILITY_GRID, a, b) @ weights


def ramp_spread(a: np.ndarray, b: np.ndarray, weights: np.ndarray, *,
                model_sd: float = 0.0) -> np.ndarray:
    """The equated success's error at each point of ``ABILITY_GRID`` besides the ability's
    own (an sd): the pool's levels being a sample of the game's, sqrt(sum w^2 p (1 - p)),
    and ``model_sd``, the model's error on an agent outside the panel."""
    p = success_probability(ABILITY_GRID, a, b)
    return np.sqrt((p * (1 - p)) @ (weights * weights) + model_sd ** 2)


def equated_on(curve: np.ndarray, ability_posterior: np.ndarray, *,
               spread: np.ndarray | None = None) -> Equated:
    """``equated_success`` through a ``ramp_curve``; with a ``ramp_spread`` the interval
    holds those errors too, without it it is the ability interval's image."""
    value = float(ability_posterior @ curve)
    if spread is None:
        lo, hi = _quantiles(ability_posterior, curve)
        return Equated(round(value, 4), round(lo, 4), round(hi, 4))
    # the mixture's distribution function on a fine grid of success; grid points of no
    # weight are left out (the posterior is sharp after a few dozen levels)
    kept = ability_posterior > 1e-9 * ability_posterior.max()
    z = (_SUCCESS_GRID[None, :] - curve[kept, None]) / spread[kept, None]
    cdf = ability_posterior[kept] @ _normal_cdf(z) / ability_posterior[kept].sum()
    tail = (1 - LEVEL) / 2
    lo = _SUCCESS_GRID[min(int(np.searchsorted(cdf, tail)), _SUCCESS_GRID.size - 1)]
    hi = _SUCCESS_GRID[min(int(np.searchsorted(cdf, 1 - tail)), _SUCCESS_GRID.size - 1)]
    return Equated(round(value, 4), round(float(min(lo, value)), 4),
                   round(float(max(hi, value)), 4))


_SUCCESS_GRID = np.linspace(0.0, 1.0, 2001)  # the equated interval's resolution: 0.0005


def _normal_cdf(z: np.ndarray) -> np.ndarray:
    """The standard normal's distribution function, vectorised: erf by Abramowitz and
    Stegun's 7.1.26 (absolute error below 1.5e-7)."""
    x = np.abs(z) / math.sqrt(2.0)
    t = 1.0 / (1.0 + 0.3275911 * x)
    poly = t * (0.254829592 + t * (-0.284496736 + t * (1.421413741
                                                       + t * (-1.453152027 + t * 1.061405429))))
    erf = 1.0 - poly * np.exp(-x * x)
    return 0.5 * (1.0 + np.sign(z) * erf)


@dataclass(frozen=True)
class ModelError:
    """What ``model_error`` measured: the model's error (sd) on an agent left out of the
    calibration, and each left-out agent's mean error (equated minus its pool success)."""

    sd: float
    bias: dict[str, float]
    sessions: int
    episodes: int


def model_error(solved: np.ndarray, features: np.ndarray, tiers: np.ndarray,
                targets: dict[int, float], *, agents: list[str], episodes: int,
                seed: int = 0) -> ModelError:
    """The equated success's error on agents outside the calibration: each of the panel's
    ``agents`` (columns of ``solved``) left out, the pool calibrated on the others, and
    ``_ERROR_SESSIONS`` sessions of ``episodes`` levels played on the left-out agent's own
    outcomes, each scored against its success on the pool (weighted as ``targets``). sd^2
    is their mean squared error less the part the posterior already holds (its variance of
    the equated success)."""
    outcomes = np.asarray(solved, dtype=bool)
    weights = ramp_weights(tiers, targets)
    rng = np.random.default_rng(seed)
    bias, excess = {}, []
    for g, name in enumerate(agents):
        rest = calibrate(np.delete(outcomes, g, axis=1), features, tiers)
        a, b, y = rest.discrimination, rest.difficulty, outcomes[:, g]
        curve = ramp_curve(a, b, weights)
        errors = []
        for _ in range(_ERROR_SESSIONS):
            shown = np.array([], dtype=np.int64)
            while shown.size < min(episodes, a.size):
                theta = estimate(a, b, shown, y[shown]).theta
                shown = np.append(shown, choose_block(theta, a, b, tiers, shown, targets,
                                                      parallel=1, rng=rng))
            belief = posterior(a, b, shown, y[shown])
            value = float(belief @ curve)
            errors.append(value - float(weights @ y))
            excess.append(errors[-1] ** 2 - float(belief @ (curve - value) ** 2))
        bias[name] = round(float(np.mean(errors)), 4)
    sd = math.sqrt(max(float(np.mean(excess)), 0.0))
    return ModelError(round(sd, 4), bias, _ERROR_SESSIONS, episodes)
