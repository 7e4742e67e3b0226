"""Matched selection for rotation: one candidate per level of the previous version, alike in kind.

Each target (a level of PREV, in play order) takes a candidate of its tier with the same crate
count and grade, an optimum within one move of PREV's and inside the slot's band; CP-SAT
minimises the summed |difficulty difference| and keeps PREV's difficulty order within each
tier, so level i of the new version stands in for level i of the old one. When both tables
carry the reference planner's outcome (``planner_solved``), a slot prefers a candidate with
PREV's outcome and the total solved count stays within a given gap of PREV's.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable

import polars as pl
from ortools.sat.python import cp_model

from pipeline.errors import PipelineError
from pipeline.select import distinct_model, solve_model, unfillable_slots
from pipeline.spec import Spec

OPTIMUM_TOLERANCE = 1
COST_SCALE = 100_000  # |difficulty difference| in units of 1e-5, so costs are integers
PLANNER_COST = 10_000  # another planner outcome than PREV's slot costs as much as 0.1 difficulty


class MatchError(PipelineError):
    """Some targets cannot get a candidate; ``unmatched`` holds their play-order indices."""

    def __init__(self, message: str, unmatched: list[int]) -> None:
        super().__init__(message)
        self.unmatched = unmatched


def targets(prev: pl.DataFrame, spec: Spec) -> pl.DataFrame:
    """PREV's levels in play order with ``slot`` (place within the tier) and its band.

    The band is the spec's band of that place, the one the audit checks every level against.
    """
    prev = prev.sort("index")
    slots = prev.select(pl.int_range(pl.len()).over("tier").alias("slot"))["slot"].to_list()
    bands = [spec.tiers[t].band(s) for t, s in zip(prev["tier"].to_list(), slots, strict=True)]
    return prev.with_columns(
        pl.Series("slot", slots, dtype=pl.Int16),
        pl.Series("band_lo", [b[0] for b in bands], dtype=pl.Int16),
        pl.Series("band_hi", [b[1] for b in bands], dtype=pl.Int16))


def eligible_pairs(goal: pl.DataFrame, pool: pl.DataFrame, exclude_ids: Iterable[str],
                   exclude_layouts: Iterable[str]) -> pl.DataFrame:
    """Every (target, candidate row) pair that satisfies the per-slot rules, with its cost.

    ``goal`` is ``targets(...)``; ``pool`` the graded candidates. Columns: target (PREV
    index), row (position in ``pool``), cost, order_key (difficulty as an exactly ordered int),
    solved (the candidate's planner outcome, when known).
    """
    planner = "planner_solved" in goal.columns and "planner_solved" in pool.columns
    extra = ["planner_solved"] if planner else []
    cand = (pool.select("tier", "n_crates", "grade", "optimal_moves", "difficulty",
                        "canonical_id", "wall_layout_id", *extra)
            .with_row_index("row")
            .filter(~pl.col("canonical_id").is_in(sorted(set(exclude_ids)))
                    & ~pl.col("wall_layout_id").is_in(sorted(set(exclude_layouts)))))
    want = goal.select(pl.col("index").alias("target"), "tier", "n_crates", "grade",
                       pl.col("optimal_moves").alias("prev_moves"),
                       pl.col("difficulty").alias("prev_difficulty"), "band_lo", "band_hi",
                       *[pl.col(c).alias(f"prev_{c}") for c in extra])
    pairs = want.join(cand, on=["tier", "n_crates", "grade"], how="inner").filter(
        ((pl.col("optimal_moves").cast(pl.Int32) - pl.col("prev_moves").cast(pl.Int32)).abs()
         <= OPTIMUM_TOLERANCE)
        & pl.col("optimal_moves").is_between(pl.col("band_lo"), pl.col("band_hi")))
    diff = (pl.col("difficulty").cast(pl.Float64) - pl.col("prev_difficulty").cast(pl.Float64))
    cost = (diff.abs() * COST_SCALE).round().cast(pl.Int64)
    if planner:
        cost = cost + pl.when(pl.col("planner_solved") != pl.col("prev_planner_solved")).then(
            PLANNER_COST).otherwise(0)
        solved = pl.col("planner_solved").cast(pl.Int64)
    else:
        solved = pl.lit(None, dtype=pl.Int64)
    pairs = pairs.with_columns(cost.alias("cost"), solved.alias("solved"))
    # Dense ranks order exactly like the difficulties and keep CP-SAT's coefficients small
    # (with raw float bits, around 1e9, its presolve wrongly reported feasible models
    # infeasible).
    pairs = pairs.with_columns(pl.col("difficulty").rank("dense").cast(pl.Int64)
                               .alias("order_key"))
    return (pairs.select("target", "row", "cost", "order_key", "solved", "canonical_id",
                         "wall_layout_id", "tier")
            .sort(["target", "row"]))


def match(goal: pl.DataFrame, pool: pl.DataFrame, exclude_ids: Iterable[str] = (),
          exclude_layouts: Iterable[str] = (), planner_gap: int | None = None) -> list[int]:
    """Rows of ``pool`` chosen for the targets, in the targets' play order.

    No two chosen rows share a canonical id or a wall layout, and none carries an excluded
    one. With ``planner_gap`` (both tables need ``planner_solved``) the chosen rows' planner
    solved count differs from the targets' by at most that much. Raises ``MatchError``
    naming the targets that cannot be matched.
    """
    pairs = eligible_pairs(goal, pool, exclude_ids, exclude_layouts)
    order = goal.sort("index")["index"].to_list()
    by_target: dict[int, list[int]] = defaultdict(list)
    for k, t in enumerate(pairs["target"].to_list()):
        by_target[t].append(k)
    empty = [t for t in order if not by_target.get(t)]
    if empty:
        raise MatchError(f"no candidate fits {describe(goal, empty)}", empty)
    model, x = distinct_model(pairs, order, by_target)
    tier = dict(zip(goal["index"].to_list(), goal["tier"].to_list(), strict=True))
    keys = pairs["order_key"].to_list()
    for a, b in zip(order, order[1:], strict=False):
        if tier[a] == tier[b]:
            model.add(sum(keys[k] * x[k] for k in by_target[a])
                      <= sum(keys[k] * x[k] for k in by_target[b]))
    if planner_gap is not None:
        solved = pairs["solved"].to_list()
        if None in solved:
            raise PipelineError("a planner gap needs planner_solved in both tables")
        total = int(goal["planner_solved"].sum())
        count = sum(solved[k] * x[k] for k in x)
        model.add(count >= total - planner_gap)
        model.add(count <= total + planner_gap)
    # A candidate eligible for several targets appears in several pairs; distinct_model keeps
    # it to one through its canonical id. Two phases: the least total cost, then among those
    # the pairs earliest in their targets' lists, which makes the answer unique (one weighted
    # objective made the search far slower).
    costs = pairs["cost"].to_list()
    total_cost = sum(costs[k] * x[k] for k in x)
    model.minimize(total_cost)
    status, solver = solve_model(model)
    if status in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        model.add(total_cost <= round(solver.objective_value))
        for var in x.values():
            model.add_hint(var, solver.value(var))
        model.minimize(sum(rank * x[k] for t in order for rank, k in enumerate(by_target[t])))
        status, solver = solve_model(model)
    if status not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        left = unfillable_slots(pairs, order, by_target)
        if left:
            raise MatchError(f"no distinct candidate is left for {describe(goal, left)} "
                             "(canonical id or wall layout taken by another slot)", left)
        raise MatchError("every slot has a candidate, but no assignment keeps the previous "
                         "version's difficulty order within each tier"
                         + ("" if planner_gap is None else " and the reference planner's "
                            f"solved count within {planner_gap}"), list(order))
    rows = pairs["row"].to_list()
    return [next(rows[k] for k in by_target[t] if solver.value(x[k])) for t in order]


def describe(goal: pl.DataFrame, indices: list[int], limit: int = 8) -> str:
    """Name targets the way a maintainer looks them up: level, tier, slot and what it needs."""
    rows = {r["index"]: r for r in goal.iter_rows(named=True)}
    parts = [f"level {i} (tier {rows[i]['tier']} slot {rows[i]['slot']}: "
             f"{rows[i]['n_crates']} crates, optimum {rows[i]['optimal_moves']} in band "
             f"{rows[i]['band_lo']}-{rows[i]['band_hi']}, grade {rows[i]['grade']})"
             for i in indices[:limit]]
    more = f" and {len(indices) - limit} more" if len(indices) > limit else ""
    return "; ".join(parts) + more

