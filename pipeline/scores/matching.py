"""Matched selection for rotation: one candidate per slot of the previous version, alike in kind.

Each target (a level of PREV) takes a candidate with the same tier, crate count and grade, an
optimum within one move of PREV's and inside the slot's band, and a compute_to_solve within
``COMPUTE_TOLERANCE`` of PREV's; CP-SAT minimises the summed |compute_to_solve difference|.
The new level takes PREV's slot, so the versions compare slot by slot. When both tables
carry the reference planner's outcome (``planner_solved``), a slot prefers a candidate with
PREV's outcome and the solved count can be held near PREV's. When both carry the agent
panel's outcome vectors (``panel``), every agent that differs from PREV's slot costs
``PANEL_COST``, an agent that solves both in other numbers of steps costs up to ``STEPS_COST``
(when both carry ``panel_steps``), and each agent's solved count can be held within a
tolerance of PREV's.
"""

from __future__ import annotations

__all__ = [
    "COMPUTE_TOLERANCE", "COST_SCALE", "MatchError", "OPTIMUM_TOLERANCE", "PANEL_COST",
    "PLANNER_COST", "PanelRule", "SOLVER_BUDGET", "STEPS_COST", "describe", "distinct_model",
    "eligible_pairs", "match", "panel_distance", "panel_matrix", "solve_model", "steps_gap",
    "targets", "unfillable_slots",
]

from collections import defaultdict
from collections.abc import Hashable, Iterable, Mapping, Sequence
from typing import Any, NamedTuple

import numpy as np
import polars as pl
from ortools.sat.python import cp_model

from pipeline.errors import PipelineError
from pipeline.spec import Spec

OPTIMUM_TOLERANCE = 1
COMPUTE_TOLERANCE = 1.0  # log2 calls per step: at most twice or half PREV's compute
COST_SCALE = 10_000  # |compute_to_solve difference| in units of 1e-4, so costs are integers
PLANNER_COST = 1_000  # another planner outcome than PREV's slot costs as much as 0.1 compute
PANEL_COST = 10_000  # each panel agent whose outcome differs from PREV's slot: 1.0 compute
# each panel agent that solves both, per unit of |log2 ratio| of its steps (capped at 1 each)
STEPS_COST = 5_000
SOLVER_BUDGET = 30.0  # CP-SAT deterministic time units (about seconds)


class PanelRule(NamedTuple):
    """The panel agents (the ``panel`` columns' order) and how far, in levels, each agent's
    solved count on the chosen rows may be from the targets'."""

    agents: tuple[str, ...]
    tolerance: int
    held: tuple[int, ...] | None = None  # the columns whose counts are held (None: all)


class MatchError(PipelineError):
    """Some targets cannot get a candidate; ``unmatched`` holds their PREV indices."""

    def __init__(self, message: str, unmatched: list[int]) -> None:
        super().__init__(message)
        self.unmatched = unmatched


def targets(prev: pl.DataFrame, spec: Spec) -> pl.DataFrame:
    """PREV's levels in play order with their ``slot`` and that slot's band from the spec.

    The slot is PREV's own (a set without one plays its slots in order); the new level takes
    the same slot, so the audit checks both against the same band.
    """
    prev = prev.sort("index")
    if "slot" in prev.columns:
        slots = prev["slot"].to_list()
    else:
        slots = prev.select(pl.int_range(pl.len()).over("tier"))[:, 0].to_list()
    bands = [spec.tiers[t].band(s) for t, s in zip(prev["tier"].to_list(), slots, strict=True)]
    return prev.with_columns(
        pl.Series("slot", slots, dtype=pl.Int16),
        pl.Series("band_lo", [b[0] for b in bands], dtype=pl.Int16),
        pl.Series("band_hi", [b[1] for b in bands], dtype=pl.Int16))


def eligible_pairs(goal: pl.DataFrame, pool: pl.DataFrame, exclude_ids: Iterable[str],
                   exclude_layouts: Iterable[str]) -> pl.DataFrame:
    """Every (target, candidate row) pair that satisfies the per-slot rules, with its cost.

    ``goal`` is ``targets(...)``; ``pool`` the graded candidates. Columns: target (PREV
    index), row (position in ``pool``), cost, and, when the planner's outcomes are known,
    solved (the candidate's) and same_outcome (whether it is PREV's).
    """
    planner = "planner_solved" in goal.columns and "planner_solved" in pool.columns
    extra = ["planner_solved"] if planner else []
    cand = (pool.select("tier", "n_crates", "grade", "optimal_moves", "compute_to_solve",
                        "canonical_id", "wall_layout_id", *extra)
            .with_row_index("row")
            .filter(~pl.col("canonical_id").is_in(sorted(set(exclude_ids)))
                    & ~pl.col("wall_layout_id").is_in(sorted(set(exclude_layouts)))))
    want = goal.select(pl.col("index").alias("target"), "tier", "n_crates", "grade",
                       pl.col("optimal_moves").alias("prev_moves"),
                       pl.col("compute_to_solve").alias("prev_compute"), "band_lo", "band_hi",
                       *[pl.col(c).alias(f"prev_{c}") for c in extra])
    diff = pl.col("compute_to_solve").cast(pl.Float64) - pl.col("prev_compute").cast(pl.Float64)
    pairs = want.join(cand, on=["tier", "n_crates", "grade"], how="inner").filter(
        ((pl.col("optimal_moves").cast(pl.Int32) - pl.col("prev_moves").cast(pl.Int32)).abs()
         <= OPTIMUM_TOLERANCE)
        & pl.col("optimal_moves").is_between(pl.col("band_lo"), pl.col("band_hi"))
        & (diff.abs() <= COMPUTE_TOLERANCE))
    cost = (diff.abs() * COST_SCALE).round().cast(pl.Int64)
    if planner:
        differs = pl.col("planner_solved") != pl.col("prev_planner_solved")
        cost = cost + pl.when(differs).then(PLANNER_COST).otherwise(0)
        solved, same = pl.col("planner_solved").cast(pl.Int64), ~differs
    else:
        solved, same = pl.lit(None, dtype=pl.Int64), pl.lit(None, dtype=pl.Boolean)
    pairs = pairs.with_columns(cost.alias("cost"), solved.alias("solved"),
                               same.alias("same_outcome"))
    pairs = (pairs.select("target", "row", "cost", "solved", "same_outcome", "canonical_id",
                          "wall_layout_id")
             .sort(["target", "row"]))
    if "panel" in goal.columns and "panel" in pool.columns:
        distance = panel_distance(goal, pool, pairs)
        pairs = pairs.with_columns(pl.Series("panel_distance", distance, dtype=pl.Int64),
                                   pl.col("cost") + PANEL_COST * pl.Series(distance))
        if STEPS_COST and "panel_steps" in goal.columns and "panel_steps" in pool.columns:
            gap = steps_gap(goal, pool, pairs)
            pairs = pairs.with_columns(
                pl.col("cost") + pl.Series(np.round(STEPS_COST * gap).astype(np.int64)))
    return pairs


def steps_gap(goal: pl.DataFrame, pool: pl.DataFrame, pairs: pl.DataFrame) -> np.ndarray:
    """For each pair, the summed |log2 steps ratio| (each capped at 1) of the panel agents
    that solve both target and candidate: how differently easy they find the two."""
    position = {t: i for i, t in enumerate(goal["index"].to_list())}
    at = [position[t] for t in pairs["target"].to_list()]
    rows = pairs["row"].to_numpy()
    solved = panel_matrix(goal)[at] & panel_matrix(pool)[rows]
    want = np.log2(_steps(goal)[at] + 1.0)
    have = np.log2(_steps(pool)[rows] + 1.0)
    return (np.minimum(np.abs(want - have), 1.0) * solved).sum(axis=1)


def _steps(table: pl.DataFrame) -> np.ndarray:
    rows = table["panel_steps"].to_list()
    return np.array(rows, dtype=np.float64).reshape(len(rows), -1)


def panel_matrix(table: pl.DataFrame) -> np.ndarray:
    """A table's ``panel`` column (one outcome vector per row) as a rows x agents matrix."""
    rows = table["panel"].to_list()
    return np.array(rows, dtype=bool).reshape(len(rows), -1)


def panel_distance(goal: pl.DataFrame, pool: pl.DataFrame, pairs: pl.DataFrame) -> np.ndarray:
    """For each pair, how many panel agents' outcomes differ between target and candidate."""
    position = {t: i for i, t in enumerate(goal["index"].to_list())}
    want = panel_matrix(goal)[[position[t] for t in pairs["target"].to_list()]]
    have = panel_matrix(pool)[pairs["row"].to_numpy()]
    return (want != have).sum(axis=1).astype(np.int64)


def match(goal: pl.DataFrame, pool: pl.DataFrame, exclude_ids: Iterable[str] = (),
          exclude_layouts: Iterable[str] = (), planner_gap: int | None = None,
          panel: PanelRule | None = None) -> list[int]:
    """Rows of ``pool`` chosen for the targets, in the targets' order of ``index``.

    No two chosen rows share a canonical id or a wall layout, and none carries an excluded
    one. With ``planner_gap`` (both tables need ``planner_solved``) the chosen rows' planner
    solved count differs from the targets' by at most that much; with ``panel`` (both need
    ``panel``) so does every panel agent's, by at most its tolerance. Raises ``MatchError``
    naming the targets that cannot be matched (and the agents that cannot be held).
    """
    pairs = eligible_pairs(goal, pool, exclude_ids, exclude_layouts)
    order = goal.sort("index")["index"].to_list()
    by_target: dict[Hashable, list[int]] = defaultdict(list)
    for k, t in enumerate(pairs["target"].to_list()):
        by_target[t].append(k)
    empty = [t for t in order if not by_target.get(t)]
    if empty:
        raise MatchError(f"no candidate fits {describe(goal, empty)}", empty)
    # A candidate eligible for several targets appears in several pairs; distinct_model keeps
    # it to one through its canonical id.
    model, x = distinct_model(pairs, order, by_target)
    if planner_gap is not None:
        solved = pairs["solved"].to_list()
        if None in solved:
            raise PipelineError("a planner gap needs planner_solved in both tables")
        total = int(goal["planner_solved"].sum())
        count = sum(solved[k] * x[k] for k in x)
        model.add(count >= total - planner_gap)
        model.add(count <= total + planner_gap)
    if panel is not None:
        _hold_panel(model, x, goal, pool, pairs, panel)
    # Two phases: the least total cost, then among those the pairs earliest in their targets'
    # lists (the first pool before its enlargements). Full linearisation gives this
    # assignment-like model a tight LP bound: optimal in a second where the default took
    # minutes on a 100-level set.
    costs = pairs["cost"].to_list()
    total_cost = sum(costs[k] * x[k] for k in x)
    model.minimize(total_cost)
    status, solver = solve_model(model, linearization_level=2)
    if status in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        model.add(total_cost <= round(solver.objective_value))
        for var in x.values():
            model.add_hint(var, solver.value(var))
        model.minimize(sum(rank * x[k] for t in order for rank, k in enumerate(by_target[t])))
        status, solver = solve_model(model, linearization_level=2)
    if status not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        unfilled = set(unfillable_slots(pairs, order, by_target))
        left = [t for t in order if t in unfilled]
        if left:
            raise MatchError(f"no distinct candidate is left for {describe(goal, left)} "
                             "(canonical id or wall layout taken by another slot)", left)
        if panel is not None:
            raise _panel_error(goal, pool, order, (exclude_ids, exclude_layouts, planner_gap),
                               panel)
        same = pairs["same_outcome"].to_list()
        lacking = [t for t in order if not any(same[k] for k in by_target[t])] or order
        raise MatchError(f"the reference planner's solved count cannot be kept within "
                         f"{planner_gap} of the previous version's; slots without a candidate"
                         f" the planner judges alike: {describe(goal, lacking)}", lacking)
    rows = pairs["row"].to_list()
    return [next(rows[k] for k in by_target[t] if solver.value(x[k])) for t in order]


def _hold_panel(model: cp_model.CpModel, x: dict[int, cp_model.IntVar], goal: pl.DataFrame,
                pool: pl.DataFrame, pairs: pl.DataFrame, panel: PanelRule) -> None:
    """Keep each panel agent's solved count within ``panel.tolerance`` of the targets'."""
    have = panel_matrix(pool)[pairs["row"].to_numpy()]
    totals = panel_matrix(goal).sum(axis=0)
    for a in range(len(panel.agents)) if panel.held is None else panel.held:
        count = sum(x[k] for k in x if have[k, a])
        model.add(count >= int(totals[a]) - panel.tolerance)
        model.add(count <= int(totals[a]) + panel.tolerance)


def _panel_error(goal: pl.DataFrame, pool: pl.DataFrame, order: list[int],
                 rules: tuple[Iterable[str], Iterable[str], int | None], panel: PanelRule
                 ) -> MatchError:
    """Why the panel cannot be held: the agents off by more than the tolerance in the best
    match without that rule, and the slots where that match moves them the wrong way."""
    rows = match(goal, pool, *rules)
    want, have = panel_matrix(goal), panel_matrix(pool)[rows]
    totals, counts = want.sum(axis=0), have.sum(axis=0)
    held = range(len(panel.agents)) if panel.held is None else panel.held
    off = [a for a in held
           if abs(int(counts[a]) - int(totals[a])) > panel.tolerance]
    named = ", ".join(f"{panel.agents[a]} ({int(totals[a])} on the previous version, "
                      f"{int(counts[a])} at best)" for a in off) or "several agents at once"
    drift = have.astype(np.int64) - want.astype(np.int64)
    wrong = np.zeros(len(order), dtype=bool)
    for a in off:
        wrong |= drift[:, a] == np.sign(int(counts[a]) - int(totals[a]))
    lacking = [t for t, bad in zip(order, wrong, strict=True) if bad] or order
    return MatchError(f"the panel's solved counts cannot all be kept within {panel.tolerance} "
                      f"of the previous version's: {named}; slots that move them: "
                      f"{describe(goal, lacking)}", lacking)


def describe(goal: pl.DataFrame, indices: list[int], limit: int = 8) -> str:
    """Name targets the way a maintainer looks them up: level, tier, slot and what it needs."""
    rows = {r["index"]: r for r in goal.iter_rows(named=True)}
    parts = [f"level {i} (tier {rows[i]['tier']} slot {rows[i]['slot']}: "
             f"{rows[i]['n_crates']} crates, optimum {rows[i]['optimal_moves']} in band "
             f"{rows[i]['band_lo']}-{rows[i]['band_hi']}, grade {rows[i]['grade']})"
             for i in indices[:limit]]
    more = f" and {len(indices) - limit} more" if len(indices) > limit else ""
    return "; ".join(parts) + more


def distinct_model(table: pl.DataFrame, slots: Sequence[Hashable],
                   by_slot: Mapping[Hashable, list[int]], exact: bool = True
                   ) -> tuple[cp_model.CpModel, dict[int, cp_model.IntVar]]:
    """One boolean per row of ``by_slot``'s lists: one (or at most one) per slot, distinct.

    No two true rows share ``table``'s canonical_id or wall_layout_id.
    """
    model = cp_model.CpModel()
    x = {i: model.new_bool_var(f"x{i}") for s in slots for i in by_slot.get(s, [])}
    for s in slots:
        members = [x[i] for i in by_slot.get(s, [])]
        if exact:
            model.add_exactly_one(members)
        else:
            model.add_at_most_one(members)
    for column in ("canonical_id", "wall_layout_id"):
        groups: dict[str, list[int]] = defaultdict(list)
        for i, key in enumerate(table[column].to_list()):
            if i in x:
                groups[key].append(i)
        for rows in groups.values():
            if len(rows) > 1:
                model.add_at_most_one([x[i] for i in rows])
    return model, x


def solve_model(model: cp_model.CpModel, linearization_level: int = 1
                ) -> tuple[Any, cp_model.CpSolver]:
    """Solve reproducibly: the same model gets the same answer on any machine.

    ``linearization_level`` 2 (CP-SAT's default is 1) gives assignment-like models, such as
    rotation's matching, an LP bound that proves optimality at once.
    """
    solver = cp_model.CpSolver()
    # One worker, a fixed seed and a deterministic (not wall-clock) limit: the same model
    # always gets the same answer, however loaded the machine is.
    solver.parameters.num_workers = 1
    solver.parameters.random_seed = 0
    solver.parameters.max_deterministic_time = SOLVER_BUDGET
    solver.parameters.linearization_level = linearization_level
    # CP-SAT's own Ctrl-C handler would replace Python's for the rest of the process (the
    # next Ctrl-C then kills it with no cleanup): leave SIGINT to Python.
    solver.parameters.catch_sigint_signal = False
    return solver.solve(model), solver


def unfillable_slots(table: pl.DataFrame, slots: Sequence[Hashable],
                     by_slot: Mapping[Hashable, list[int]]) -> list[Hashable]:
    """Slots left empty by the largest selection that fills as many slots as possible."""
    model, x = distinct_model(table, slots, by_slot, exact=False)
    model.maximize(sum(x.values()))
    status, solver = solve_model(model)
    if status not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        return list(slots)
    return [s for s in slots if not any(solver.value(x[i]) for i in by_slot[s])]
