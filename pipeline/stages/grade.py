"""Stage 4, grade: the features of every chosen level, its predicted compute, difficulty, grade.

``level_features`` is the one place features are computed, so that calibration and audit
score levels exactly as the pipeline does; ``compute_to_solve`` (predicted), ``difficulty``
and ``grade`` come from the calibrated model in ``pipeline/specs/difficulty.json`` (see
``pipeline.difficulty.difficulty``); a spec with measured compute replaces them on the selected
levels.
"""

from __future__ import annotations

__all__ = [
    "BOUNDED_SET_INDEX", "FEATURE_SCHEMA", "GRADE_MAX_NODES", "IMPUTED_SCHEMA", "box_changes",
    "first_push_traps", "grade", "grade_features", "grade_group_within_limits", "level_features",
    "neutral_features", "player_reach", "with_features", "with_predicted_compute",
]

from collections.abc import Callable
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from engine.agents.planner import push_lower_bound
from engine.levels import Level, State, parse_xsb
from engine.rules import lurd_to_actions
from engine.search.index import StateSpaceTooLarge
from engine.search.optimal_paths import optimal_paths
from engine.search.reachable import push_reachable_stats
from engine.search.reverse import SolvableSet, solvable_set
from engine.search.solver import SolveResult
from pipeline.difficulty.compute_curve import HIGHEST
from pipeline.difficulty.difficulty import TRANSFORMS, load_model, score_levels
from pipeline.versions.tables import read_parquet, write_parquet
from pipeline.workers import Workers

# Up, down, left, right, as engine.rules.ACTIONS: the step helpers below play in plain Python
# (a numba call per step costs them 2-3x); tests/test_steppers.py holds them to step_kernel.
_STEPS = ((-1, 0), (1, 0), (0, -1), (0, 1))
# Push-level nodes the reachable count may store (8 bytes each, only as they are reached): a
# 10x10 five-crate level reaches past the engine's default 20 million.
GRADE_MAX_NODES = 2**27
FEATURE_SCHEMA = {
    "box_changes": pl.Int16, "reachable_states": pl.Int64, "dead_fraction": pl.Float32,
    "first_push_traps": pl.Int16, "detour_pushes": pl.Int16, "optimal_solutions": pl.Int64,
    "branching_factor": pl.Float32,
}


def grade(solved: Path, out: Path, workers: Workers) -> Path:
    """Add the features and the predicted ``compute_to_solve`` (with ``compute_censored`` and
    ``compute_measured`` false), ``difficulty`` and ``grade`` columns to the solved candidates."""
    df = with_features(read_parquet(solved), workers)
    write_parquet(with_predicted_compute(df), out)
    return out


def with_predicted_compute(df: pl.DataFrame) -> pl.DataFrame:
    """``df`` (with the feature columns) scored by the calibrated model, no planner run."""
    compute, difficulty, grades = score_levels(df)
    return df.with_columns(
        pl.Series("compute_to_solve", compute, dtype=pl.Float32),
        pl.Series("compute_censored", compute >= HIGHEST, dtype=pl.Boolean),
        pl.Series("compute_measured", [False] * df.height, dtype=pl.Boolean),
        pl.Series("difficulty", difficulty, dtype=pl.Float32),
        pl.Series("grade", grades, dtype=pl.Int8))


def grade_features(solved: Path, out: Path, workers: Workers) -> Path:
    """Add the feature columns alone: calibration fits the model that then scores them."""
    write_parquet(with_features(read_parquet(solved), workers), out)
    return out


def with_features(df: pl.DataFrame, workers: Workers,
                  grader: Callable[[list[Any]], list[dict[str, Any]]] | None = None,
                  schema: dict[str, Any] = FEATURE_SCHEMA) -> pl.DataFrame:
    """``df`` (solved candidates) with every column of ``schema`` (the features by default).

    ``grader`` features one board's candidates (``_grade_group``, which needs the board's
    solvable set, by default; ``grade_group_within_limits`` for boards of any size).
    """
    grader = grader or _grade_group
    # Candidates drawn from one layout share its solvable set: grade them together.
    boards = df.select(pl.col("xsb").map_elements(_board_key, return_dtype=pl.String)
                       .alias("board"))["board"]
    groups: dict[str, list[int]] = {}
    for i, key in enumerate(boards.to_list()):
        groups.setdefault(key, []).append(i)
    work = [[(df["xsb"][i], df["optimal_moves"][i], df["optimal_pushes"][i],
              df["solution"][i]) for i in rows] for rows in groups.values()]
    results = workers.map(grader, work, label="grade")
    by_row: dict[int, dict[str, Any]] = {}
    for rows, feats in zip(groups.values(), results, strict=True):
        by_row.update(zip(rows, feats, strict=True))
    cols = {name: pl.Series(name, [by_row[i][name] for i in range(df.height)], dtype=dtype)
            for name, dtype in schema.items()}
    return df.with_columns(**cols)


def level_features(level: Level, result: SolveResult, sset: SolvableSet) -> dict[str, Any]:
    """The grading features of a solved level; ``sset`` is its board's solvable set."""
    return (_solution_features(level, result) | _solvable_features(level, sset)
            | _path_features(level))


def _solution_features(level: Level, result: SolveResult) -> dict[str, Any]:
    """The features read off the level and its optimal solution alone (no search)."""
    moves, pushes, solution = result.optimal
    return {
        "n_crates": level.n_crates,
        "optimal_moves": int(moves),
        "optimal_pushes": int(pushes),
        "box_changes": box_changes(level, solution),
        # pushes beyond taking every crate alone to its nearest goal: detours and re-routing
        "detour_pushes": int(pushes) - push_lower_bound(level),
    }


def _solvable_features(level: Level, sset: SolvableSet) -> dict[str, Any]:
    """The features that need the board's solvable set."""
    stats = push_reachable_stats(level, sset, max_nodes=GRADE_MAX_NODES)
    return {
        "reachable_states": int(stats.reachable),
        "dead_fraction": stats.dead / stats.reachable if stats.reachable else 0.0,
        "first_push_traps": first_push_traps(level, sset),
    }


def _path_features(level: Level) -> dict[str, Any]:
    """The features of the layered count of optimal paths."""
    paths = optimal_paths(level)
    return {"optimal_solutions": paths.solutions, "branching_factor": paths.branching}


def box_changes(level: Level, lurd: str) -> int:
    """How often the solution switches to pushing a different crate (0 for a single run)."""
    crates = list(level.start.crates)
    player = level.start.player
    last, changes = None, 0
    for ch, action in zip(lurd, lurd_to_actions(lurd), strict=True):
        dr, dc = _STEPS[action]
        target = player + dr * level.width + dc
        if ch.isupper():
            which = crates.index(target)
            crates[which] = target + dr * level.width + dc
            if last is not None and which != last:
                changes += 1
            last = which
        player = target
    return changes


def player_reach(level: Level, state: State) -> set[int]:
    """Cells the player can walk to in ``state`` without pushing."""
    blocked = set(state.crates)
    seen = {state.player}
    stack = [state.player]
    while stack:
        cell = stack.pop()
        r, c = divmod(cell, level.width)
        for dr, dc in _STEPS:
            rr, cc = r + dr, c + dc
            nxt = rr * level.width + cc
            if (0 <= rr < level.height and 0 <= cc < level.width and level.floor[rr, cc]
                    and nxt not in blocked and nxt not in seen):
                seen.add(nxt)
                stack.append(nxt)
    return seen


def first_push_traps(level: Level, sset: SolvableSet) -> int:
    """Pushes available from the start that lead straight into an unsolvable state."""
    start = level.start
    reach = player_reach(level, start)
    traps = 0
    for crate in start.crates:
        r, c = divmod(crate, level.width)
        for dr, dc in _STEPS:
            behind, ahead = (r - dr, c - dc), (r + dr, c + dc)
            if not (0 <= ahead[0] < level.height and 0 <= ahead[1] < level.width):
                continue
            to = ahead[0] * level.width + ahead[1]
            if (behind[0] * level.width + behind[1] not in reach or not level.floor[ahead]
                    or to in start.crates):
                continue
            crates = tuple(sorted(x if x != crate else to for x in start.crates))
            if not sset.is_solvable(State(crate, crates)):
                traps += 1
    return traps


def _board_key(xsb: str) -> str:
    level = parse_xsb(xsb)
    return level.walls.tobytes().hex() + level.goals.tobytes().hex()


def _grade_group(items: list[tuple[str, int, int, str]]) -> list[dict[str, Any]]:
    levels = [parse_xsb(xsb) for xsb, *_ in items]
    sset = solvable_set(levels[0])
    return [level_features(level, SolveResult("solved", moves, pushes, lurd, 0), sset)
            for level, (_, moves, pushes, lurd) in zip(levels, items, strict=True)]


# Grading a collection's board of any size: the solvable set is searched only up to this many
# dense states (10 bytes each: 160 MB); past it the features that need it are imputed.
BOUNDED_SET_INDEX = 2**24
_NEEDS_SET = ("reachable_states", "dead_fraction", "first_push_traps")
_NEEDS_PATHS = ("optimal_solutions", "branching_factor")
IMPUTED_SCHEMA = FEATURE_SCHEMA | {"imputed_features": pl.String}


def grade_group_within_limits(items: list[tuple[str, int, int, str]]) -> list[dict[str, Any]]:
    """Features of one board's levels whatever its size; each row's ``imputed_features``
    names the features whose search did not fit, set to the model's neutral value."""
    levels = [parse_xsb(xsb) for xsb, *_ in items]
    try:
        sset: SolvableSet | None = solvable_set(levels[0], max_size=BOUNDED_SET_INDEX)
    except StateSpaceTooLarge:
        sset = None
    return [_features_within_limits(level, SolveResult("solved", moves, pushes, lurd, 0), sset)
            for level, (_, moves, pushes, lurd) in zip(levels, items, strict=True)]


@lru_cache(maxsize=1)
def neutral_features() -> dict[str, float]:
    """Each model feature at the model's training mean: it then adds nothing to the score."""
    model = load_model()
    inverse: dict[str, Callable[[Any], Any]] = {"identity": lambda v: v, "log1p": np.expm1}
    assert set(inverse) == set(TRANSFORMS)
    return {c: float(inverse[t](m)) for c, t, m in zip(model.columns, model.transforms,
                                                      model.means, strict=True)}


def _features_within_limits(level: Level, result: SolveResult, sset: SolvableSet | None
                            ) -> dict[str, Any]:
    out = _solution_features(level, result)
    missing: list[str] = []
    parts = ((_NEEDS_SET, lambda: None if sset is None else _solvable_features(level, sset)),
             (_NEEDS_PATHS, lambda: _path_features(level)))
    for names, compute in parts:
        try:
            found = compute()
        except StateSpaceTooLarge:
            found = None
        if found is None:
            neutral = neutral_features()
            missing += names
            found = {n: round(neutral[n]) if FEATURE_SCHEMA[n] in (pl.Int16, pl.Int64)
                     else neutral[n] for n in names}
        out |= found
    return out | {"imputed_features": ",".join(missing)}
