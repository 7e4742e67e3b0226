"""Simulated agents of known ability on simulated tiered level sets, to check the statistics.

A level of tier ``t`` and slot ``s`` has a difficulty drawn around its tier's mean plus the
slot's place in the tier's ramp; an agent of ability ``theta`` solves it with probability
``sigmoid(a (theta - b))``. Because every figure of the population is known, the precision
intervals and the linking of versions can be checked against the truth.
"""

from __future__ import annotations

__all__ = ["LevelPopulation", "STANDARD_TIERS", "interval_coverage", "line_check", "play"]

from dataclasses import dataclass

import numpy as np
import polars as pl

from pipeline.difficulty.logistic import sigmoid
from pipeline.precision import success_interval
from pipeline.scores.linking import link_line

STANDARD_TIERS = (25, 25, 30, 20)  # the standard game's tier sizes


@dataclass(frozen=True)
class LevelPopulation:
    """What a spec draws: tier sizes, each tier's mean difficulty and the ramp across its
    slots, the spread of a level around its slot's mean, and discriminations' log-spread."""

    tiers: tuple[int, ...] = STANDARD_TIERS
    tier_means: tuple[float, ...] = (-1.5, -0.5, 0.5, 1.5)
    ramp: float = 1.0
    spread: float = 0.8
    log_discrimination_sd: float = 0.3

    @property
    def tier_of_level(self) -> np.ndarray:
        return np.repeat(np.arange(len(self.tiers)), self.tiers)

    def slot_means(self) -> np.ndarray:
        """The mean difficulty of each slot, in play order."""
        means = []
        for n, m in zip(self.tiers, self.tier_means, strict=True):
            t = np.linspace(-0.5, 0.5, n) if n > 1 else np.zeros(1)
            means.append(m + self.ramp * t)
        return np.concatenate(means)

    def draw(self, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        """One set of levels: difficulty and discrimination per slot."""
        means = self.slot_means()
        b = means + self.spread * rng.standard_normal(means.size)
        a = np.exp(self.log_discrimination_sd * rng.standard_normal(means.size))
        return b, a

    def true_rate(self, theta: float, draws: int = 4000, seed: int = 0) -> float:
        """The agent's success rate over the whole population (many draws of every slot)."""
        rng = np.random.default_rng(seed)
        total = 0.0
        for _ in range(draws // 100):
            b, a = (np.concatenate(x) for x in zip(*(self.draw(rng) for _ in range(100)),
                                                     strict=True))
            total += float(sigmoid(a * (theta - b)).mean())
        return total / (draws // 100)


def play(theta: float, b: np.ndarray, a: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """The per-level outcomes of an agent of ability ``theta`` on levels ``(b, a)``."""
    return rng.random(b.size) < sigmoid(a * (theta - b))


def interval_coverage(population: LevelPopulation, thetas: list[float], runs: int,
                      seed: int) -> dict[float, float]:
    """For each ability, the share of ``runs`` fresh draws of levels (and of play) whose
    success interval holds the agent's true success rate over the population."""
    rng = np.random.default_rng(seed)
    tiers = population.tier_of_level
    out = {}
    for theta in thetas:
        truth = population.true_rate(theta, seed=seed + 1)
        hits = 0
        for _ in range(runs):
            b, a = population.draw(rng)
            lo, hi = success_interval(play(theta, b, a, rng), tiers)
            hits += lo <= truth <= hi
        out[theta] = hits / runs
    return out


def line_check(n_agents: int, versions: int, play_share: float, seed: int) -> dict[str, float]:
    """Linking checked on simulated agents of known ability (drawn, then standardised as the
    model's prior assumes): ``versions`` draws of the standard tiers, each shifted in
    difficulty, each agent playing each version with probability ``play_share`` (and at
    least one). Returns the correlation of fitted and true abilities, the share of ability
    intervals holding the truth, the number of scales and the intervals' mean width."""
    rng = np.random.default_rng(seed)
    population = LevelPopulation()
    theta = rng.standard_normal(n_agents)
    theta = (theta - theta.mean()) / theta.std()
    episodes = {}
    for v in range(versions):
        b, a = population.draw(rng)
        b = b + 0.3 * (v - (versions - 1) / 2)  # later rounds differ in difficulty
        rows = []
        for g in range(n_agents):
            if rng.random() < play_share or v == g % versions:
                for i, s in enumerate(play(theta[g], b, a, rng)):
                    rows.append((f"agent{g:03d}", i, bool(s)))
        episodes[f"v{v}"] = pl.DataFrame(rows, schema={"name": pl.String, "index": pl.Int64,
                                                       "solved": pl.Boolean}, orient="row")
    report = link_line(episodes)
    fitted = {x["name"]: x for x in report["agents"]}
    est = np.array([fitted[f"agent{g:03d}"]["ability"] for g in range(n_agents)])
    lo = np.array([fitted[f"agent{g:03d}"]["ability_interval"][0] for g in range(n_agents)])
    hi = np.array([fitted[f"agent{g:03d}"]["ability_interval"][1] for g in range(n_agents)])
    return {"correlation": float(np.corrcoef(est, theta)[0, 1]),
            "coverage": float(np.mean((lo <= theta) & (theta <= hi))),
            "scales": float(len(report["scales"])),
            "mean_width": float(np.mean(hi - lo))}
