"""Calibration of the difficulty model against the reference planner.

Two pools of levels are drawn with the pipeline's own generator (1-4 crates, the bands of a
template spec), solved and graded by the pipeline's stages, and played by the reference planner
with each level's step budget. A logistic model of planner failure is fitted on the first pool
and judged on the second, which shares no level with it.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from engine.levels import parse_xsb
from engine.planner import HEURISTIC_WEIGHT, PLANNER_BUDGET, plan
from pipeline.difficulty import FEATURES, DifficultyModel, transformed
from pipeline.errors import PipelineError
from pipeline.generate import generate
from pipeline.grade import grade_features
from pipeline.logistic import fit_logistic, log_loss
from pipeline.rank_metrics import roc_auc, spearman
from pipeline.reliability import curve
from pipeline.solve import solve
from pipeline.spec import Spec, spec_from_dict
from pipeline.tables import read_parquet
from pipeline.workers import Workers

POOL_SEED = 20261130
HELD_OUT_OFFSET = 1
L2 = 1e-3
# Grades are bands of planner-failure probability: below 1 in 20, 1 in 5, even, 4 in 5, above.
GRADE_CUTS = (0.05, 0.2, 0.5, 0.8)

# Lookahead budgets either side of the reference one: how often a level's outcome survives a
# small change of budget bounds how well any level feature can predict that outcome.
NEARBY_BUDGETS = (PLANNER_BUDGET - 16, PLANNER_BUDGET + 16)


@dataclass(frozen=True)
class Calibration:
    """The fitted model (with its validation in ``info``) and the two pools it came from."""

    model: DifficultyModel
    fit_pool: pl.DataFrame
    held_out_pool: pl.DataFrame


@dataclass(frozen=True)
class PoolSize:
    """Levels per crate count in the fitting pool and in the held-out pool."""

    fit_per_tier: int = 600
    held_out_per_tier: int = 300


def grade_rule(cuts: tuple[float, ...]) -> str:
    """The cut points in words, as the model file records them (derived, so never stale)."""
    parts = [f"1: difficulty < {cuts[0]:g}"]
    parts += [f"{g}: < {c:g}" for g, c in enumerate(cuts[1:], start=2)]
    return ", ".join([*parts, f"{len(cuts) + 1}: >= {cuts[-1]:g}"])


def pool_spec(template: Spec, per_tier: int) -> Spec:
    """The template game with ``per_tier`` slots per tier and one candidate per slot."""
    data = template.to_dict()
    data["name"] = f"{template.name}-calibration"
    data["candidates_per_slot"] = 1
    for tier in data["tiers"]:
        tier["levels"] = per_tier
    return spec_from_dict(data, source="calibration pool")


def _play(item: tuple[str, int]) -> tuple[bool, int]:
    xsb, steps = item
    result = plan(parse_xsb(xsb), steps)
    return result.solved, result.steps


def _stable(item: tuple[str, int, bool]) -> bool:
    xsb, steps, solved = item
    level = parse_xsb(xsb)
    return all(plan(level, steps, budget=b).solved == solved for b in NEARBY_BUDGETS)


def outcome_stability(table: pl.DataFrame, workers: Workers) -> float:
    """Share of levels whose planner outcome is the same at every budget of NEARBY_BUDGETS."""
    items = list(zip(table["xsb"].to_list(), table["max_steps"].to_list(),
                     table["planner_solved"].to_list(), strict=True))
    return float(np.mean(workers.map(_stable, items, label="stability")))


def build_pool(spec: Spec, seed: int, folder: Path, workers: Workers) -> pl.DataFrame:
    """Generate, solve and grade a pool, then play every level once with the planner."""
    folder.mkdir(parents=True, exist_ok=True)
    candidates = generate(spec, seed, folder / "candidates.parquet", workers)
    solved = solve(candidates, folder / "solved.parquet", workers)
    graded = read_parquet(grade_features(solved, folder / "features.parquet", workers))
    graded = graded.unique("canonical_id", keep="first", maintain_order=True)
    budgets = [spec.max_steps(int(m)) for m in graded["optimal_moves"]]
    outcomes = workers.map(_play, list(zip(graded["xsb"].to_list(), budgets, strict=True)),
                           label="planner")
    return graded.with_columns(
        pl.Series("max_steps", budgets, dtype=pl.Int32),
        pl.Series("planner_solved", [o[0] for o in outcomes], dtype=pl.Boolean),
        pl.Series("planner_steps", [o[1] for o in outcomes], dtype=pl.Int32),
    )


def fit_model(table: pl.DataFrame, l2: float = L2) -> DifficultyModel:
    """Standardise the transformed features, fit the logistic model of planner failure."""
    columns = tuple(c for c, _ in FEATURES)
    transforms = tuple(t for _, t in FEATURES)
    x = transformed(table, columns, transforms)
    means = x.mean(axis=0)
    scales = x.std(axis=0)
    scales[scales == 0] = 1.0
    failed = ~table["planner_solved"].to_numpy()
    intercept, weights = fit_logistic((x - means) / scales, failed, l2=l2)
    return DifficultyModel(columns, transforms, means, scales, weights, intercept, GRADE_CUTS,
                           {})


def validation(model: DifficultyModel, table: pl.DataFrame) -> dict[str, Any]:
    """AUC of difficulty against planner failure, beside optimal length and crate count alone,
    and Spearman correlations of difficulty with both."""
    failed = ~table["planner_solved"].to_numpy()
    d = model.difficulty(table)
    moves = table["optimal_moves"].to_numpy()
    crates = table["n_crates"].to_numpy()
    per_crates = {
        str(k): {"levels": int((crates == k).sum()),
                 "planner_failures": int(failed[crates == k].sum())}
        for k in sorted(set(crates.tolist()))
    }
    both = 0 < failed.sum() < failed.size

    def auc(scores: np.ndarray) -> float | None:
        return round(roc_auc(scores, failed), 4) if both else None

    def rho(other: np.ndarray) -> float | None:
        r = spearman(d, other)
        return None if np.isnan(r) else round(r, 4)

    return {
        "levels": int(table.height),
        "planner_failures": int(failed.sum()),
        "auc": auc(d),
        "auc_optimal_moves": auc(moves),
        "auc_n_crates": auc(crates),
        "spearman_optimal_moves": rho(moves),
        "spearman_n_crates": rho(crates),
        "log_loss": round(log_loss(d, failed), 4),
        "log_loss_base_rate": round(log_loss(np.full(d.size, failed.mean()), failed), 4),
        "by_crates": per_crates,
    }


def calibrate(template: Spec, seed: int, size: PoolSize, work: Path,
              workers: Workers) -> Calibration:
    """Build both pools, fit on the first, validate on the second."""
    fit_seed, held_seed = seed, seed + HELD_OUT_OFFSET
    fit_pool = build_pool(pool_spec(template, size.fit_per_tier), fit_seed, work / "fit",
                          workers)
    held = build_pool(pool_spec(template, size.held_out_per_tier), held_seed,
                      work / "held_out", workers)
    held = held.filter(~pl.col("canonical_id").is_in(fit_pool["canonical_id"].to_list()))
    failures = int((~fit_pool["planner_solved"]).sum())
    if failures in (0, fit_pool.height):
        raise PipelineError(
            f"calibration: the planner {'solved' if failures == 0 else 'failed'} every one of "
            f"the {fit_pool.height} fit-pool levels, so there is nothing to fit; enlarge the "
            "pool or use a template with more crates")
    model = fit_model(fit_pool)
    info = {
        "target": "reference planner fails within the level's step budget",
        "planner": {"budget_per_step": PLANNER_BUDGET, "heuristic_weight": HEURISTIC_WEIGHT,
                    "step_budget": f"max({template.budget_floor}, "
                                   f"{template.budget_multiple} * optimal_moves)"},
        "fit_date": dt.date.today().isoformat(),
        "l2": L2,
        "grades": grade_rule(GRADE_CUTS),
        "pool": {"template": template.name, "seed": fit_seed, "held_out_seed": held_seed,
                 "fit_per_tier": size.fit_per_tier,
                 "held_out_per_tier": size.held_out_per_tier},
        "fit": validation(model, fit_pool),
        "held_out": {**validation(model, held),
                     "outcome_same_at_budgets": list(NEARBY_BUDGETS),
                     "outcome_stability": round(outcome_stability(held, workers), 4)},
    }
    model = DifficultyModel(model.columns, model.transforms, model.means, model.scales,
                            model.weights, model.intercept, model.grade_cuts, info)
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
        **curve(model.difficulty(held), ~held["planner_solved"].to_numpy()),
    }
