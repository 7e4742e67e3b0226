"""Stage 3, solve: every chosen level solved again, to optimal, by the forward solver.

The generator's distance comes from the backward search; an independent forward search must
agree on every level, or the build stops and names the level that disagreed.
"""

from __future__ import annotations

from pathlib import Path

import polars as pl

from engine.levels import parse_xsb
from engine.solver import SolveResult
from engine.solver import solve as forward_solve
from pipeline.errors import PipelineError
from pipeline.tables import read_parquet, write_parquet
from pipeline.workers import Workers

SOLVE_MAX_STATES = 20_000_000


def solve(candidates: Path, out: Path, workers: Workers) -> Path:
    """Add optimal_moves, optimal_pushes, solution and states_expanded; check the optimum."""
    df = read_parquet(candidates)
    solved = with_solutions(df, solve_all(df["xsb"].to_list(), workers))
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


def solve_all(xsbs: list[str], workers: Workers) -> list[SolveResult]:
    """The forward solver's answer for every level, in order, within ``SOLVE_MAX_STATES``."""
    return workers.map(_solve_one, xsbs, label="solve")


def with_solutions(df: pl.DataFrame, results: list[SolveResult]) -> pl.DataFrame:
    """``df`` with optimal_moves, optimal_pushes, solution and states_expanded (-1 and an
    empty solution where a level was not solved, so a check can name it)."""
    def found(value: int | None) -> int:
        return -1 if value is None else value

    return df.with_columns(
        pl.Series("optimal_moves", [found(r.moves) for r in results], dtype=pl.Int16),
        pl.Series("optimal_pushes", [found(r.pushes) for r in results], dtype=pl.Int16),
        pl.Series("solution", [r.solution or "" for r in results], dtype=pl.String),
        pl.Series("states_expanded", [r.states_expanded for r in results], dtype=pl.Int64),
    )


def one_line(xsb: str) -> str:
    """A board on one line, rows separated by ``|``: an error message stays a single line."""
    return "|".join(xsb.splitlines())


def _solve_one(xsb: str) -> SolveResult:
    return forward_solve(parse_xsb(xsb), max_states=SOLVE_MAX_STATES)
