"""Stage 3, solve: every chosen level solved again, to optimal, by the forward solver.

The generator's distance comes from the backward search; an independent forward search must
agree on every level, or the build stops and names the level that disagreed.
"""

from __future__ import annotations

__all__ = ["SOLVE_MAX_STATES", "one_line", "search_bound", "solve", "solve_all", "with_solutions"]

from pathlib import Path

import polars as pl

from engine.levels import Level, parse_xsb
from engine.search.index import DenseIndex, StateSpaceTooLarge
from engine.search.reverse import MAX_SET_INDEX
from engine.search.solver import SolveResult
from engine.search.solver import solve as forward_solve
from pipeline.errors import PipelineError
from pipeline.versions.tables import read_parquet, write_parquet
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
    """The forward solver's answer for every level, in order, within ``search_bound``."""
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


def search_bound(level: Level) -> int:
    """States the forward search may store for ``level``: ``SOLVE_MAX_STATES``, or its whole
    dense index when that is within the solvable-set bound, so a level the goal-first
    generator enumerated (a 10x10 five-crate one, say) is always re-solved."""
    try:
        size = DenseIndex.for_level(level, max_size=MAX_SET_INDEX).size
    except StateSpaceTooLarge:
        return SOLVE_MAX_STATES
    return max(SOLVE_MAX_STATES, size)


def _solve_one(xsb: str) -> SolveResult:
    level = parse_xsb(xsb)
    return forward_solve(level, max_states=search_bound(level))
