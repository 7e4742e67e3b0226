"""Difficulty refit from real results: a two-parameter item-response model over closed rounds.

Every played episode (finished after at least one step; ``serve.records.results`` reads them) of
every closed scorecard of a version is one trial of an agent on a level (the episode's index). An
agent is a name, as on the leaderboard: a name's scorecards are one agent's repeated trials,
pooled (a level played in two of them is two trials of it), and the levels a scorecard never
reached are no trial at all, rather than failures that would lower its ability.
P(solve) = sigmoid(a_l (theta_g - b_l)): ability theta per agent, difficulty b and
discrimination a per level, fitted jointly by alternating Newton steps under weak normal
priors (which fix the scale and keep levels everyone solved, or no one did, finite). The
result sits beside each level's compute_to_solve.
"""

from __future__ import annotations

__all__ = [
    "ABILITY_SD", "DIFFICULTY_SD", "EPISODE_SCHEMA", "IRT_FILE", "ItemResponse",
    "LOG_DISCRIMINATION_SD", "episodes_table", "fit_2pl", "fit_results", "irt_report", "refit",
    "fitted_episodes", "pooled_text", "round_episodes",
]

import json
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from pipeline.difficulty.logistic import sigmoid
from pipeline.difficulty.rank_metrics import spearman
from pipeline.errors import PipelineError
from pipeline.versions.hidden_files import is_hidden, private_writes
from pipeline.versions.rounds import Round, iso, read_round
from pipeline.versions.tables import write_text
from pipeline.versions.version import open_version

IRT_FILE = "irt.json"
ABILITY_SD = 1.0
DIFFICULTY_SD = 3.0
LOG_DISCRIMINATION_SD = 0.5
_ROUNDS = 300
_MAX_STEP = 1.0
# one row per played episode of a closed scorecard, agents by name; when it closed (Unix s)
EPISODE_SCHEMA = {"name": pl.String, "scorecard": pl.String, "index": pl.Int64,
                  "solved": pl.Boolean, "steps": pl.Int64, "closed": pl.Float64}


def episodes_table(rows: Iterable[tuple[str, str, int, bool, int, float | None]]
                   ) -> pl.DataFrame:
    """The fit's table of played episodes from ``(name, scorecard, index, solved, steps,
    closed)`` rows (read from a server's store by ``serve``), by scorecard and level."""
    return pl.DataFrame(list(rows), schema=EPISODE_SCHEMA, orient="row").sort(
        "scorecard", "index", maintain_order=True)


def round_episodes(episodes: pl.DataFrame, rnd: Round | None) -> tuple[pl.DataFrame, dict]:
    """The episodes a version's fit pools, and what it pooled: with a round, only the
    scorecards closed within it (from its opening to its closing time, as its standings
    rank them), never practice played once it closed or was published; without one, every
    closed scorecard."""
    cards = episodes["scorecard"].n_unique()
    if rnd is None:
        return episodes, {"round": None, "scorecards": cards, "left_out": 0}
    kept = episodes.filter(pl.col("closed").is_between(rnd.opened, rnd.closes))
    return kept, {"round": {"opened": iso(rnd.opened), "closes": iso(rnd.closes)},
                  "scorecards": kept["scorecard"].n_unique(),
                  "left_out": cards - kept["scorecard"].n_unique()}


def fitted_episodes(episodes: pl.DataFrame, version: str, folder: Path,
                    indices: Iterable[int]) -> tuple[pl.DataFrame, dict]:
    """``round_episodes`` of the version ``version`` (in ``folder``, of levels ``indices``),
    refused when none is left to fit or one is of a level the version does not have."""
    kept, pooled = round_episodes(episodes, read_round(folder))
    if kept.height == 0:
        within = " within its round" if pooled["round"] else ""
        raise PipelineError(f"the store holds no played episode of a closed scorecard of "
                            f"{version}{within}")
    unknown = set(kept["index"].to_list()) - set(indices)
    if unknown:
        raise PipelineError(f"the store has episodes of levels {sorted(unknown)[:5]} that "
                            f"{version} does not have")
    return kept, pooled


@dataclass(frozen=True)
class ItemResponse:
    """Fitted abilities (per agent) and difficulties and discriminations (per level)."""

    agents: list[str]
    ability: np.ndarray
    levels: np.ndarray
    difficulty: np.ndarray
    discrimination: np.ndarray


def fit_2pl(agent: np.ndarray, level: np.ndarray, trials: np.ndarray, solved: np.ndarray,
            n_agents: int, n_levels: int, *, difficulty_mean: np.ndarray | None = None,
            difficulty_sd: float = DIFFICULTY_SD) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(ability, difficulty, discrimination)`` maximising the posterior of the counts
    ``solved`` out of ``trials`` for each (agent, level) pair; each level's difficulty prior
    is N(``difficulty_mean``, ``difficulty_sd``^2) (mean 0 unless given: a pool's calibration
    centres it on the difficulty model's prediction)."""
    theta = np.zeros(n_agents)
    prior_b = np.zeros(n_levels) if difficulty_mean is None else np.asarray(
        difficulty_mean, dtype=np.float64)
    b = prior_b.copy()
    log_a = np.zeros(n_levels)
    n, k = trials.astype(np.float64), solved.astype(np.float64)

    def newton(grad: np.ndarray, info: np.ndarray) -> np.ndarray:
        return np.clip(grad / info, -_MAX_STEP, _MAX_STEP)

    for _ in range(_ROUNDS):
        a = np.exp(log_a)[level]
        p = sigmoid(a * (theta[agent] - b[level]))
        resid, w = k - n * p, n * p * (1 - p)
        theta += newton(np.bincount(agent, a * resid, n_agents) - theta / ABILITY_SD ** 2,
                        np.bincount(agent, a * a * w, n_agents) + 1 / ABILITY_SD ** 2)
        p = sigmoid(a * (theta[agent] - b[level]))
        resid, w = k - n * p, n * p * (1 - p)
        b += newton(np.bincount(level, -a * resid, n_levels) - (b - prior_b) / difficulty_sd ** 2,
                    np.bincount(level, a * a * w, n_levels) + 1 / difficulty_sd ** 2)
        z = theta[agent] - b[level]
        p = sigmoid(a * z)
        resid, w = k - n * p, n * p * (1 - p)
        g = np.bincount(level, a * z * resid, n_levels) - log_a / LOG_DISCRIMINATION_SD ** 2
        info = np.bincount(level, (a * z) ** 2 * w, n_levels) + 1 / LOG_DISCRIMINATION_SD ** 2
        log_a += newton(g, info)
    return theta, b, np.exp(log_a)


def fit_results(episodes: pl.DataFrame) -> ItemResponse:
    """The item-response model of an ``episodes_table`` (agents by name)."""
    if episodes.height == 0:
        raise PipelineError("no played episode of a closed scorecard: nothing to fit")
    counts = (episodes.group_by("name", "index")
              .agg(pl.len().alias("trials"), pl.col("solved").sum().alias("solved"))
              .sort("name", "index"))
    agents = sorted(set(counts["name"].to_list()))
    levels = np.array(sorted(set(counts["index"].to_list())), dtype=np.int64)
    position = {name: i for i, name in enumerate(agents)}
    agent = np.array([position[n] for n in counts["name"].to_list()], dtype=np.int64)
    level = np.searchsorted(levels, counts["index"].to_numpy()).astype(np.int64)
    theta, b, a = fit_2pl(agent, level,
                          counts["trials"].to_numpy(), counts["solved"].to_numpy(),
                          len(agents), levels.size)
    return ItemResponse(agents, theta, levels, b, a)


def pooled_text(pooled: dict) -> str:
    """``round_episodes``'s account of what a fit pooled, in one line."""
    if pooled["round"] is None:
        return f"{pooled['scorecards']} closed scorecards (no round: every one)"
    r = pooled["round"]
    return (f"{pooled['scorecards']} scorecards closed within the round ({r['opened']} to "
            f"{r['closes']}); {pooled['left_out']} closed outside it left out (practice "
            "after the round, or play before it)")


def irt_report(version: str, table: pl.DataFrame, episodes: pl.DataFrame, fit: ItemResponse,
               browser: bool) -> dict[str, Any]:
    """The figures written to ``report/irt.json``: agents, levels beside their
    compute_to_solve and grade, and the rank correlation of the two difficulties."""
    per_level = (episodes.group_by("index")
                 .agg(pl.len().alias("episodes"), pl.col("solved").mean().alias("solve_rate")))
    rates = dict(zip(per_level["index"].to_list(),
                     zip(per_level["episodes"].to_list(), per_level["solve_rate"].to_list(),
                         strict=True), strict=True))
    rows = {r["index"]: r for r in table.iter_rows(named=True)}
    has_compute = "compute_to_solve" in table.columns
    levels = []
    for i, b, a in zip(fit.levels.tolist(), fit.difficulty, fit.discrimination, strict=True):
        r = rows.get(i, {})
        levels.append({
            "index": i, "tier": r.get("tier"), "episodes": rates[i][0],
            "solve_rate": round(float(rates[i][1]), 4),
            "empirical_difficulty": round(float(b), 4), "discrimination": round(float(a), 4),
            "compute_to_solve": round(float(r["compute_to_solve"]), 4) if has_compute and r
            else None,
            "difficulty": round(float(r["difficulty"]), 4) if r else None,
            "grade": r.get("grade")})
    per_agent = episodes.group_by("name").agg(pl.len().alias("episodes"),
                                              pl.col("solved").sum().alias("solved"),
                                              pl.col("scorecard").n_unique().alias("scorecards"))
    agent_rows = {r["name"]: r for r in per_agent.iter_rows(named=True)}
    known = [lv for lv in levels if lv["compute_to_solve" if has_compute else "difficulty"]
             is not None]
    label = "compute_to_solve" if has_compute else "difficulty"
    rho = (spearman(np.array([lv["empirical_difficulty"] for lv in known]),
                    np.array([lv[label] for lv in known])) if len(known) > 2 else float("nan"))
    return {
        "version": version,
        "model": "two-parameter logistic: P(solve) = sigmoid(a_level * (ability - "
                 "difficulty_level)), priors ability ~ N(0, 1), difficulty ~ N(0, 9), "
                 "log a ~ N(0, 0.25)",
        "browser_runs": "included" if browser else "excluded",
        "scorecards": int(episodes["scorecard"].n_unique()),
        "episodes": int(episodes.height),
        "spearman_empirical_vs": label,
        "spearman": None if np.isnan(rho) else round(float(rho), 4),
        "agents": sorted(({"name": n, "ability": round(float(t), 4),
                           "scorecards": agent_rows[n]["scorecards"],
                           "episodes": agent_rows[n]["episodes"],
                           "solved": agent_rows[n]["solved"]}
                          for n, t in zip(fit.agents, fit.ability, strict=True)),
                         key=lambda x: -x["ability"]),
        "levels": levels,
    }


def refit(datasets: Path, version: str, episodes: pl.DataFrame,
          browser: bool = True) -> tuple[Path, dict]:
    """Fit the model on ``version``'s played episodes of closed scorecards (an
    ``episodes_table``; ``browser`` says whether browser runs are among them) and write
    report/irt.json.

    Only the report folder is written: the version's levels and manifest never change.
    """
    opened = open_version(datasets, version)
    table = opened.levels()
    episodes, pooled = fitted_episodes(episodes, version, opened.folder,
                                       table["index"].to_list())
    report = {**irt_report(version, table, episodes, fit_results(episodes), browser),
              "pooled": pooled}
    out = opened.report_dir / IRT_FILE
    with private_writes(is_hidden(opened.manifest)):
        out.parent.mkdir(exist_ok=True)
        write_text(json.dumps(report, indent=2) + "\n", out)
    return out, report
