"""Calibration of compute_to_solve: the curves' slope, the fast predictor, and their checks.

Two pools of levels are drawn with the pipeline's own generator (the tiers and bands of a
template spec), solved and graded by the pipeline's stages, and played up the compute ladder.
The fit pool gives the curves' shared slope and the ridge regression predicting
compute_to_solve from grade features. The held-out pool, which shares no level with it, is
played by two disjoint sets of tie-break seeds (test-retest of compute_to_solve beside the
same figure for today's single-run label) and by a second, independent agent family
(``engine.agents.validation_agents``) whose failures compute_to_solve should predict beyond what
optimal length does, within each crate tier.
"""

from __future__ import annotations

__all__ = [
    "Calibration", "HELD_OUT_OFFSET", "L2", "POOL_SEED", "PoolSize", "RETEST_SEEDS",
    "agent_failures", "build_pool", "calibrate", "fit_predictor", "generalisation", "held_out_pool",
    "planner_runs", "pool_curve", "pool_spec", "prediction_figures", "retest_figures",
]

import datetime as dt
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from engine.agents.ladder import LADDER_BUDGETS, LADDER_SEEDS, SOLVED_RUNS_TO_STOP
from engine.agents.planner import HEURISTIC_WEIGHT, PLANNER_BUDGET, plan
from engine.agents.validation_agents import VALIDATION_AGENTS, AgentSpec, play_agent
from engine.levels import parse_xsb
from pipeline.difficulty.compute import ladder_counts
from pipeline.difficulty.compute_curve import (
    HIGHEST,
    compute_grade,
    fit_locations,
    fit_slope,
    grade_rule,
)
from pipeline.difficulty.difficulty import FEATURES, UNIT, DifficultyModel, transformed
from pipeline.difficulty.rank_metrics import roc_auc, spearman
from pipeline.difficulty.reliability import curve
from pipeline.errors import PipelineError
from pipeline.spec import Spec, spec_from_dict
from pipeline.stages.generate import generate
from pipeline.stages.grade import grade_features
from pipeline.stages.solve import solve
from pipeline.versions.tables import read_parquet
from pipeline.workers import Workers

POOL_SEED = 20261201
HELD_OUT_OFFSET = 1
L2 = 1e-2
# The retest seed set: as many seeds as the ladder's, none shared with it.
RETEST_SEEDS = tuple(range(max(LADDER_SEEDS) + 1, max(LADDER_SEEDS) + 1 + len(LADDER_SEEDS)))


@dataclass(frozen=True)
class Calibration:
    """The fitted model (with its validation in ``info``) and the two pools it came from."""

    model: DifficultyModel
    fit_pool: pl.DataFrame
    held_out_pool: pl.DataFrame


@dataclass(frozen=True)
class PoolSize:
    """Levels per tier in the fitting pool and in the held-out pool."""

    fit_per_tier: int = 100
    held_out_per_tier: int = 100


def pool_spec(template: Spec, per_tier: int) -> Spec:
    """The template game with ``per_tier`` slots per tier and one candidate per slot."""
    data = template.to_dict()
    data["name"] = f"{template.name}-calibration"
    data["candidates_per_slot"] = 1
    for tier in data["tiers"]:
        tier["levels"] = per_tier
    return spec_from_dict(data, source="calibration pool")


def _play(item: tuple[str, int, int]) -> bool:
    xsb, steps, seed = item
    return plan(parse_xsb(xsb), steps, seed=seed).solved


def planner_runs(table: pl.DataFrame, seed: int, workers: Workers) -> np.ndarray:
    """The single-run label: whether the planner (256 dynamics calls per step, tie-break
    ``seed``) solves."""
    items = [(x, int(m), seed) for x, m in zip(table["xsb"].to_list(),
                                               table["max_steps"].to_list(), strict=True)]
    return np.array(workers.map(_play, items, label=f"planner seed {seed}"), dtype=bool)


def _agent(item: tuple[str, int, AgentSpec]) -> bool:
    xsb, steps, agent = item
    return play_agent(parse_xsb(xsb), steps, agent)


def agent_failures(table: pl.DataFrame, workers: Workers) -> dict[str, np.ndarray]:
    """Every validation agent's failures on every row, by agent name."""
    out = {}
    for agent in VALIDATION_AGENTS:
        items = [(x, int(m), agent) for x, m in zip(table["xsb"].to_list(),
                                                    table["max_steps"].to_list(), strict=True)]
        out[agent.name] = ~np.array(workers.map(_agent, items, label=agent.name), dtype=bool)
    return out


def build_pool(spec: Spec, seed: int, folder: Path, workers: Workers) -> pl.DataFrame:
    """Generate, solve and grade a pool; add each level's step budget and today's label."""
    folder.mkdir(parents=True, exist_ok=True)
    candidates = generate(spec, seed, folder / "candidates.parquet", workers)
    solved = solve(candidates, folder / "solved.parquet", workers)
    graded = read_parquet(grade_features(solved, folder / "features.parquet", workers))
    graded = graded.unique("canonical_id", keep="first", maintain_order=True)
    budgets = [spec.max_steps(int(m)) for m in graded["optimal_moves"]]
    graded = graded.with_columns(pl.Series("max_steps", budgets, dtype=pl.Int32))
    return graded.with_columns(pl.Series("planner_solved", planner_runs(graded, 0, workers)))


def fit_predictor(table: pl.DataFrame, target: np.ndarray, slope: float,
                  features: tuple[tuple[str, str], ...] = FEATURES,
                  l2: float = L2) -> DifficultyModel:
    """Ridge regression of ``target`` (compute_to_solve) on the standardised features."""
    columns = tuple(c for c, _ in features)
    transforms = tuple(t for _, t in features)
    x = transformed(table, columns, transforms)
    means = x.mean(axis=0)
    scales = x.std(axis=0)
    scales[scales == 0] = 1.0
    z = (x - means) / scales
    y = np.asarray(target, dtype=np.float64)
    intercept = float(y.mean())
    gram = z.T @ z + l2 * len(y) * np.eye(z.shape[1])
    weights = np.linalg.solve(gram, z.T @ (y - intercept))
    return DifficultyModel(columns, transforms, means, scales, weights, intercept, slope, {})


def _r(value: float) -> float | None:
    return None if np.isnan(value) else round(float(value), 4)


def _auc(scores: np.ndarray, failed: np.ndarray) -> float | None:
    return round(roc_auc(scores, failed), 4) if 0 < failed.sum() < failed.size else None


def prediction_figures(model: DifficultyModel, length_only: DifficultyModel,
                       table: pl.DataFrame, measured: np.ndarray) -> dict[str, Any]:
    """Error and rank agreement of the predictor on ``table`` beside optimal length alone."""
    predicted = model.compute_to_solve(table)
    by_length = length_only.compute_to_solve(table)
    moves = table["optimal_moves"].to_numpy()
    return {
        "levels": int(table.height),
        "mean_absolute_error": round(float(np.abs(predicted - measured).mean()), 4),
        "rmse": round(float(np.sqrt(((predicted - measured) ** 2).mean())), 4),
        "spearman": _r(spearman(predicted, measured)),
        "length_only_mean_absolute_error": round(float(np.abs(by_length - measured).mean()), 4),
        "spearman_optimal_moves": _r(spearman(moves, measured)),
        "grade_agreement": round(float((compute_grade(predicted)
                                        == compute_grade(measured)).mean()), 4),
    }


def retest_figures(table: pl.DataFrame, slope: float, first: np.ndarray, workers: Workers
                ) -> dict[str, Any]:
    """compute_to_solve from two disjoint seed sets, and the single-run label from two seeds.

    ``first`` is the ladder already played with LADDER_SEEDS; the retest plays RETEST_SEEDS.
    The single-run label (solved at 256 calls per step) is today's run (seed 0) against each
    retest seed.
    """
    second, _ = ladder_counts(table, workers, RETEST_SEEDS)
    a, _ = fit_locations(first, len(LADDER_SEEDS), slope)
    b, _ = fit_locations(second, len(RETEST_SEEDS), slope)
    today = table["planner_solved"].to_numpy().astype(np.float64)
    runs = [planner_runs(table, s, workers).astype(np.float64) for s in RETEST_SEEDS]
    phis = [np.corrcoef(today, r)[0, 1] for r in runs if today.std() > 0 and r.std() > 0]
    return {
        "levels": int(table.height),
        "seed_sets": [list(LADDER_SEEDS), list(RETEST_SEEDS)],
        "compute_to_solve_pearson": _r(np.corrcoef(a, b)[0, 1]),
        "compute_to_solve_spearman": _r(spearman(a, b)),
        "compute_grade_agreement": round(float((compute_grade(a) == compute_grade(b)).mean()),
                                         4),
        "single_run_label_pearson": _r(float(np.mean(phis))) if phis else None,
        "single_run_label_agreement": round(float(np.mean([(today == r).mean()
                                                           for r in runs])), 4),
    }


def generalisation(table: pl.DataFrame, compute: np.ndarray, predicted: np.ndarray,
                   failures: dict[str, np.ndarray]) -> list[dict[str, Any]]:
    """Per crate tier and validation agent: AUC of measured and predicted compute_to_solve
    and of optimal length at predicting the agent's failures."""
    crates = table["n_crates"].to_numpy()
    moves = table["optimal_moves"].to_numpy().astype(np.float64)
    rows = []
    for k in sorted(set(crates.tolist())):
        at = crates == k
        for name, failed in failures.items():
            f = failed[at]
            auc_c, auc_m = _auc(compute[at], f), _auc(moves[at], f)
            rows.append({"crates": int(k), "agent": name, "levels": int(at.sum()),
                         "failures": int(f.sum()), "auc_compute_to_solve": auc_c,
                         "auc_predicted_compute": _auc(predicted[at], f),
                         "auc_optimal_moves": auc_m,
                         "gain": None if auc_c is None or auc_m is None
                         else round(auc_c - auc_m, 4)})
    return rows


def calibrate(template: Spec, seed: int, size: PoolSize, work: Path,
              workers: Workers) -> Calibration:
    """Build both pools, fit slope and predictor on the first, validate on the second."""
    fit_seed, held_seed = seed, seed + HELD_OUT_OFFSET
    fit_pool = build_pool(pool_spec(template, size.fit_per_tier), fit_seed, work / "fit",
                          workers)
    held = build_pool(pool_spec(template, size.held_out_per_tier), held_seed,
                      work / "held_out", workers)
    held = held.filter(~pl.col("canonical_id").is_in(fit_pool["canonical_id"].to_list()))
    seeds = len(LADDER_SEEDS)
    fit_solved, _ = ladder_counts(fit_pool, workers)
    try:
        slope = fit_slope(fit_solved, seeds)
    except ValueError:
        raise PipelineError(
            f"calibration: every one of the {fit_pool.height} fit-pool levels is solved at "
            "every budget or at none, so the curves' slope cannot be fitted; enlarge the pool "
            "or use a template with more crates") from None
    fit_compute, fit_censored = fit_locations(fit_solved, seeds, slope)
    model = fit_predictor(fit_pool, fit_compute, slope)
    length_only = fit_predictor(fit_pool, fit_compute, slope, (("optimal_moves", "log1p"),))
    held_solved, _ = ladder_counts(held, workers)
    held_compute, held_censored = fit_locations(held_solved, seeds, slope)
    fit_pool = fit_pool.with_columns(pl.Series("compute_to_solve", fit_compute))
    held = held.with_columns(pl.Series("compute_to_solve", held_compute))
    failures = agent_failures(held, workers)
    info = {
        "target": "compute_to_solve: log2 of the reference planner's per-step budget "
                  "(dynamics calls) at which it solves half the time",
        "unit": UNIT,
        "ladder": {"budgets": [LADDER_BUDGETS[0], LADDER_BUDGETS[-1]], "seeds": list(
            LADDER_SEEDS), "stop": f"climbing stops once every seed solves at "
                                  f"{SOLVED_RUNS_TO_STOP} consecutive budgets; the budgets "
                                  "above count as solved",
                   "censored": f"a location above log2 {int(HIGHEST)} is stored as "
                               f"{int(HIGHEST)} with compute_censored"},
        "planner": {"heuristic_weight": HEURISTIC_WEIGHT, "rule_budget": PLANNER_BUDGET,
                    "step_budget": f"max({template.budget_floor}, "
                                   f"{template.budget_multiple} * optimal_moves)"},
        "fit_date": dt.date.today().isoformat(),
        "l2": L2,
        "grades": grade_rule(),
        "difficulty": "the curve's chance of failing at 256 dynamics calls per step",
        "pool": {"template": template.name, "seed": fit_seed, "held_out_seed": held_seed,
                 "fit_per_tier": size.fit_per_tier,
                 "held_out_per_tier": size.held_out_per_tier},
        "fit": {**prediction_figures(model, length_only, fit_pool, fit_compute),
                "censored": int(fit_censored.sum()),
                "planner_failures": int((~fit_pool["planner_solved"]).sum())},
        "held_out": {**prediction_figures(model, length_only, held, held_compute),
                     "censored": int(held_censored.sum()),
                     "planner_failures": int((~held["planner_solved"]).sum())},
        "test_retest": retest_figures(held, slope, held_solved, workers),
        "generalisation": generalisation(held, held_compute, model.compute_to_solve(held),
                                         failures),
    }
    model = DifficultyModel(model.columns, model.transforms, model.means, model.scales,
                            model.weights, model.intercept, slope, info)
    return Calibration(model, fit_pool, held)


def held_out_pool(model: DifficultyModel, template: Spec, work: Path,
                  workers: Workers) -> pl.DataFrame:
    """Redraw and replay the model's held-out pool from the seed its file records.

    The pool is deterministic in seed, template and code; it must come back with the recorded
    size and planner failures, or it is not the pool the model was judged on.
    """
    pool, held = model.info.get("pool", {}), model.info.get("held_out", {})
    if "held_out_seed" not in pool or "held_out_per_tier" not in pool:
        raise PipelineError("the difficulty model records no held-out pool seed and size")
    table = build_pool(pool_spec(template, int(pool["held_out_per_tier"])),
                       int(pool["held_out_seed"]), work, workers)
    failures = int((~table["planner_solved"]).sum())
    if (table.height, failures) != (held.get("levels"), held.get("planner_failures")):
        raise PipelineError(
            f"the redrawn held-out pool has {table.height} levels and {failures} planner "
            f"failures, the model file records {held.get('levels')} and "
            f"{held.get('planner_failures')}: generation or the planner changed since the fit; "
            "refit with `sokoforge calibrate`")
    return table


def pool_curve(model: DifficultyModel, held: pl.DataFrame) -> dict[str, Any]:
    """The held-out pool's reliability curve under ``model``, with where it came from."""
    pool = model.info.get("pool", {})
    return {
        "what": "reliability of the difficulty model on its held-out calibration pool: levels "
                "sorted by predicted difficulty, cut into deciles, each decile's mean "
                "prediction against the reference planner's observed failure rate",
        "made_by": "scripts/pool_curve.py (also written by `sokoforge calibrate`): redraws the "
                   "held-out pool from its recorded seed, replays it with the reference planner",
        "model_fit_date": model.info.get("fit_date"),
        "pool": {"template": pool.get("template"), "seed": pool.get("held_out_seed"),
                 "per_tier": pool.get("held_out_per_tier")},
        **curve(model.difficulty(model.compute_to_solve(held)),
                ~held["planner_solved"].to_numpy()),
    }
