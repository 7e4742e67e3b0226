"""A pool's information curve: how precisely it measures each ability, and where it runs out.

Under the pool's item parameters (``report/items.parquet``) a level informs about ability
theta by a^2 p (1 - p) (``pipeline.scores.adaptive.information``); a test's information is
its levels' sum, and one over its square root is the standard error of theta. Three tests:

- the **pool**: every level of it (what the pool holds);
- a **session**: the ``episodes`` levels ``choose_block`` picks at theta (content balance,
  exposure's random top few), averaged over a few draws: a session whose estimate sits at
  theta;
- the **ramp**: the standard game's 100 levels, drawn as the pool's levels are (each tier's
  levels weighted by its share): 100 times the ramp-weighted mean information.

The floor: a session must inform at least as much as the ramp, over the abilities the ramp
spans (the middle 90% of its levels' difficulties, ramp-weighted). Below it the adaptive
game would measure less precisely than the standard one there.
"""

from __future__ import annotations

__all__ = ["DRAWS", "GRID", "RAMP_LEVELS", "SPAN", "InformationCurve", "information_curve"]

from dataclasses import dataclass

import numpy as np

from pipeline.scores.adaptive import (
    choose_block,
    information,
    ramp_weights,
    success_probability,
)

GRID = np.linspace(-6.0, 6.0, 49)  # the abilities the curve is drawn at (logits)
RAMP_LEVELS = 100  # the standard game's ramp
SPAN = 0.9  # the ramp spans the middle 90% of its levels' difficulties
DRAWS = 4  # sessions drawn at each ability (the random top few varies them)


@dataclass(frozen=True)
class InformationCurve:
    """Information at each ability of ``theta``: the whole pool's, a session's of
    ``episodes`` levels and the standard ramp's; ``success`` is the standard ramp's expected
    success there (the equating), and ``span`` the abilities the ramp spans."""

    theta: np.ndarray
    pool: np.ndarray
    session: np.ndarray
    ramp: np.ndarray
    success: np.ndarray
    span: tuple[float, float]
    episodes: int

    def below_floor(self) -> np.ndarray:
        """Abilities inside the span where a session informs less than the ramp."""
        inside = (self.theta >= self.span[0]) & (self.theta <= self.span[1])
        return self.theta[inside & (self.session < self.ramp)]

    def well_measured(self, share: float = 0.5) -> tuple[float, float]:
        """The abilities where a session informs at least ``share`` of its peak."""
        good = self.theta[self.session >= share * self.session.max()]
        return float(good.min()), float(good.max())

    def statement(self) -> str:
        """What the pool measures well and where it runs out, in words."""
        lo, hi = self.well_measured()
        peak = int(np.argmax(self.session))
        at = {t: float(s) for t, s in zip(self.theta, self.success, strict=True)}
        floor = self.below_floor()
        ratio = self.session / np.maximum(self.ramp, 1e-12)
        inside = (self.theta >= self.span[0]) & (self.theta <= self.span[1])
        return (
            f"A session of {self.episodes} levels informs most at ability "
            f"{self.theta[peak]:+.2f} (standard success {self.success[peak]:.2f}): "
            f"{self.session[peak]:.1f}, a standard error of {self.session[peak] ** -0.5:.2f} "
            f"logits. It keeps at least half of that from {lo:+.2f} to {hi:+.2f} (standard "
            f"success {at[lo]:.2f} to {at[hi]:.2f}); beyond, the pool runs out of levels hard "
            f"(or easy) enough and a session's information falls off with the pool's. Over "
            f"the abilities the standard ramp spans ({self.span[0]:+.2f} to "
            f"{self.span[1]:+.2f}), a session informs {ratio[inside].min():.2f} to "
            f"{ratio[inside].max():.2f} times as much as the ramp's {RAMP_LEVELS} levels"
            + (f"; it falls below the ramp (the floor) at {len(floor)} of the "
               f"{int(inside.sum())} abilities checked, {floor.min():+.2f} to "
               f"{floor.max():+.2f}." if floor.size else ", never below it (the floor)."))


def information_curve(a: np.ndarray, b: np.ndarray, tiers: np.ndarray,
                      targets: dict[int, float], *, episodes: int,
                      theta: np.ndarray = GRID) -> InformationCurve:
    """The information curve of the pool ``(a, b)`` with crate ``tiers``, its sessions of
    ``episodes`` levels balanced to ``targets`` (the tiers' shares, also the ramp's)."""
    weights = ramp_weights(tiers, targets)
    order = np.argsort(b, kind="stable")
    cdf = np.cumsum(weights[order])
    tail = (1 - SPAN) / 2
    span = (float(b[order][min(int(np.searchsorted(cdf, tail)), b.size - 1)]),
            float(b[order][min(int(np.searchsorted(cdf, 1 - tail)), b.size - 1)]))
    rng = np.random.default_rng(0)
    none = np.array([], dtype=np.int64)
    pool, session, ramp = [], [], []
    for t in theta:
        info = information(float(t), a, b)
        pool.append(float(info.sum()))
        ramp.append(RAMP_LEVELS * float(weights @ info))
        session.append(float(np.mean([
            info[choose_block(float(t), a, b, tiers, none, targets, parallel=episodes,
                              rng=rng)].sum() for _ in range(DRAWS)])))
    success = success_probability(theta, a, b) @ weights
    return InformationCurve(np.asarray(theta, dtype=np.float64), np.array(pool),
                            np.array(session), np.array(ramp), success, span, episodes)
