"""Stage 3, solve: every chosen level solved again, to optimal, by the forward solver.

The generator's distance comes from the backward search; an independent forward search must
agree on every level, or the build stops and names the level that disagreed.
"""

from __future__ import annotations

from pathlib import Path

import polars as pl

from engine.levels import parse_xsb
from engine.solver import solve as forward_solve
from pipeline.errors import PipelineError
from pipeline.tables import read_parquet, write_parquet
from pipeline.workers import Workers

SOLVE_MAX_STATES = 20_000_000


def solve(candidates: Path, out: Path, workers: Workers) -> Path:
    """Add optimal_moves, optimal_pushes, solution and states_expanded; check the optimum."""
    df = read_parquet(candidates)
    results = workers.map(_solve_one, df["xsb"].to_list(), label="solve")
    solved = df.with_columns(
        pl.Series("optimal_moves", [r[0] for r in results], dtype=pl.Int16),
        pl.Series("optimal_pushes", [r[1] for r in results], dtype=pl.Int16),
        pl.Series("solution", [r[2] for r in results], dtype=pl.String),
        pl.Series("states_expanded", [r[3] for r in results], dtype=pl.Int64),
    )
    bad = solved.filter(pl.col("optimal_moves") != pl.col("distance"))
    if bad.height:
        row = bad.row(0, named=True)
        found = (f"optimum is {row['optimal_moves']} moves" if row["optimal_moves"] >= 0
                 else "search found no solution")
        raise PipelineError(
            f"tier {row['tier']} slot {row['slot']} layout {row['layout']}: the forward solver's "
            f"{found} but the generator claimed {row['distance']}: {one_line(row['xsb'])}")
    write_parquet(solved, out)
    return out


def one_line(xsb: str) -> str:
    """A board on one line, rows separated by ``|``: an error message stays a single line."""
    return "|".join(xsb.splitlines())


def _solve_one(xsb: str) -> tuple[int, int, str, int]:
    level = parse_xsb(xsb)
    result = forward_solve(level, max_states=SOLVE_MAX_STATES)
    if result.status != "solved":
        # Kept as -1 so the disagreement check names this level.
        return -1, -1, "", result.states_expanded
    return result.moves, result.pushes, result.solution, result.states_expanded
