"""Measured compute to solve: the compute ladder played on a table's levels, and its curves.

Every row (``xsb`` within ``max_steps``) is played up the ladder by each tie-break seed
(``engine.agents.ladder``); the solve rates per budget and the fitted location of the level's curve
(``pipeline.difficulty.compute_curve``, with the calibrated shared slope) become columns. A spec
with ``compute = "measured"`` has its selected levels measured so; others keep the prediction.
"""

from __future__ import annotations

__all__ = ["ladder_counts", "measure_selected", "with_measured_compute"]

from pathlib import Path

import numpy as np
import polars as pl

from engine.agents.ladder import LADDER_SEEDS, LADDER_STEPS, climb
from engine.levels import parse_xsb
from pipeline.difficulty.compute_curve import fit_locations
from pipeline.difficulty.difficulty import DifficultyModel, load_model, scores_from_compute
from pipeline.spec import Spec
from pipeline.versions.tables import read_parquet, write_parquet
from pipeline.workers import Workers


def _climb(item: tuple[str, int, tuple[int, ...]]) -> tuple[tuple[int, ...], int]:
    xsb, steps, seeds = item
    ladder = climb(parse_xsb(xsb), steps, seeds)
    return ladder.solved, ladder.played


def ladder_counts(table: pl.DataFrame, workers: Workers,
                  seeds: tuple[int, ...] = LADDER_SEEDS) -> tuple[np.ndarray, np.ndarray]:
    """``(solved levels x rungs, index of the last rung played)`` for every row of ``table``."""
    items = [(x, int(m), seeds) for x, m in zip(table["xsb"].to_list(),
                                                table["max_steps"].to_list(), strict=True)]
    results = workers.map(_climb, items, label="ladder")
    solved = np.array([r[0] for r in results], dtype=np.int64).reshape(len(items), LADDER_STEPS)
    return solved, np.array([r[1] for r in results], dtype=np.int64)


def with_measured_compute(table: pl.DataFrame, workers: Workers,
                          model: DifficultyModel | None = None) -> pl.DataFrame:
    """``table`` with compute_to_solve, difficulty and grade measured by the ladder, plus
    ``compute_censored``, ``compute_measured``, ``solve_rates`` and ``ladder_played``."""
    model = load_model() if model is None else model
    seeds = LADDER_SEEDS
    solved, played = ladder_counts(table, workers, seeds)
    location, censored = fit_locations(solved, len(seeds), model.slope)
    compute, difficulty, grades = scores_from_compute(location, model)
    rates = [[float(s) / len(seeds) for s in row] for row in solved]
    return table.with_columns(
        pl.Series("compute_to_solve", compute, dtype=pl.Float32),
        pl.Series("compute_censored", censored, dtype=pl.Boolean),
        pl.Series("compute_measured", [True] * table.height, dtype=pl.Boolean),
        pl.Series("solve_rates", rates, dtype=pl.List(pl.Float32)),
        pl.Series("ladder_played", played, dtype=pl.Int8),
        pl.Series("difficulty", difficulty, dtype=pl.Float32),
        pl.Series("grade", grades, dtype=pl.Int8))


def measure_selected(selected: Path, spec: Spec, workers: Workers) -> Path:
    """For a spec with measured compute: measure the selected levels and reorder each tier
    by measured difficulty (the ramp), rewriting ``selected`` in place; else leave it."""
    if spec.compute != "measured":
        return selected
    df = read_parquet(selected)
    if "compute_measured" in df.columns and df["compute_measured"].all():
        return selected  # a rotation's matched select measured its candidates already
    budgets = [spec.max_steps(int(m)) for m in df["optimal_moves"].to_list()]
    df = with_measured_compute(df.with_columns(pl.Series("max_steps", budgets,
                                                         dtype=pl.Int32)), workers)
    df = df.sort(["tier", "compute_to_solve", "slot"], maintain_order=True).with_columns(
        pl.int_range(0, df.height, dtype=pl.Int16).alias("index"))
    write_parquet(df, selected)
    return selected
