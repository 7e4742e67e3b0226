"""Stage 5, write: ``levels.parquet`` in play order with the column types of the format.

Play order is tier by tier, easiest (least difficulty) first, ``index`` counting from 0.
Budgets follow the spec's rule, ``max(floor, multiple * optimal_moves)`` or its fixed budget;
a themed spec gives each level its theme (and noise key) drawn from the version seed and the
level's index.
"""

from __future__ import annotations

__all__ = ["LEVEL_COLUMNS", "MEASURED_ONLY", "level_looks", "levels_table", "play_order", "write"]

from pathlib import Path
from typing import Any

import polars as pl

from engine.pictures.look import draw_theme
from pipeline import seeds
from pipeline.errors import PipelineError
from pipeline.spec import Spec
from pipeline.versions.tables import as_int, read_parquet, write_parquet

# The columns of the format, in order, then the extra columns kept for audit and rotation.
LEVEL_COLUMNS: dict[str, Any] = {
    "index": pl.Int16, "tier": pl.Int8, "n_crates": pl.Int8, "height": pl.Int8,
    "width": pl.Int8, "xsb": pl.String, "optimal_moves": pl.Int16, "optimal_pushes": pl.Int16,
    "solution": pl.String, "max_steps": pl.Int16, "difficulty": pl.Float32, "grade": pl.Int8,
    "canonical_id": pl.String, "theme": pl.String, "noise_seed": pl.Int64,
    "slot": pl.Int16, "band_lo": pl.Int16, "band_hi": pl.Int16, "wall_layout_id": pl.String,
    "box_changes": pl.Int16, "reachable_states": pl.Int64, "dead_fraction": pl.Float32,
    "first_push_traps": pl.Int16, "detour_pushes": pl.Int16, "optimal_solutions": pl.Int64,
    "branching_factor": pl.Float32, "states_expanded": pl.Int64,
    "compute_to_solve": pl.Float32, "compute_censored": pl.Boolean,
    "compute_measured": pl.Boolean, "solve_rates": pl.List(pl.Float32),
    "ladder_played": pl.Int8,
}
# Columns only a measured compute fills; a predicted one leaves them null.
MEASURED_ONLY = ("solve_rates", "ladder_played")


def write(graded: Path, out: Path, spec: Spec, seed: int) -> Path:
    """Write the set's ``levels.parquet`` to ``out``; return it."""
    df = play_order(read_parquet(graded))
    if df.height != spec.n_levels:
        raise PipelineError(f"write: selection holds {df.height} levels, the spec "
                            f"{spec.name} needs {spec.n_levels}")
    write_parquet(levels_table(df, spec, seed=seed), out)
    return out


def levels_table(df: pl.DataFrame, spec: Spec, extra: dict[str, Any] | None = None,
                 seed: int | None = None) -> pl.DataFrame:
    """The rows of ``levels.parquet``: budgets by the spec's rule, play order, each level's
    look, the format's column types, then the ``extra`` columns (name to type) a version kind
    adds. ``seed`` is the version seed themed looks are drawn from (None: a version without)."""
    budget = pl.Series("max_steps", [spec.max_steps(m) for m in df["optimal_moves"].to_list()],
                       dtype=pl.Int32)
    df = df.with_columns(budget).sort("index")
    df = df.with_columns(*level_looks(spec, seed, df["index"].to_list()))
    df = df.with_columns(*[pl.lit(None, dtype=LEVEL_COLUMNS[c]).alias(c)
                           for c in MEASURED_ONLY if c not in df.columns])
    if as_int(df["max_steps"].max()) > 32767:
        raise PipelineError("write: a step budget exceeds int16; lower the budget multiple")
    columns = LEVEL_COLUMNS | (extra or {})
    return df.select([pl.col(name).cast(dtype) for name, dtype in columns.items()])


def play_order(levels: pl.DataFrame) -> pl.DataFrame:
    """The chosen levels sorted tier by tier, easiest first, with their ``index``."""
    ordered = levels.sort(["tier", "difficulty", "slot"], maintain_order=True)
    return ordered.with_columns(pl.int_range(0, ordered.height, dtype=pl.Int16).alias("index"))


def level_looks(spec: Spec, seed: int | None, indices: list[int]
                ) -> tuple[pl.Series, pl.Series]:
    """The ``theme`` (canonical JSON) and ``noise_seed`` columns: null unless the spec is themed
    (noise keys only with noise), so a version's files alone fix every pixel it serves."""
    if spec.look != "themed":
        return (pl.Series("theme", [None] * len(indices), dtype=pl.String),
                pl.Series("noise_seed", [None] * len(indices), dtype=pl.Int64))
    if seed is None:
        raise PipelineError(f"spec {spec.name} draws a theme per level from the version seed, "
                            "and this version has no seed; use look = \"shared\" or \"arc\"")
    themes = [draw_theme(seeds.derived_rng(seed, seeds.THEME, i), spec.noise).to_json()
              for i in indices]
    keys = [seeds.noise_key(seed, i) if spec.noise else None for i in indices]
    return (pl.Series("theme", themes, dtype=pl.String),
            pl.Series("noise_seed", keys, dtype=pl.Int64))
