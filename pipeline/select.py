"""Stage 4, select: exactly one candidate per slot, chosen by OR-tools CP-SAT.

Constraints: the tier's crate count, the optimum inside the slot's band, the spec's first-push
traps, no two levels sharing a canonical id (under the 8 symmetries) or (unless the spec
allows it) a wall layout, no canonical id of another version. Objective: each optimum as
close as possible to its band's centre (any optimum in a flat band). ``choose`` holds the
model alone (table, slots, costs) so that other selections, such as rotation, reuse it.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Hashable, Mapping, Sequence
from pathlib import Path

import polars as pl
from ortools.sat.python import cp_model

from pipeline.errors import PipelineError
from pipeline.spec import Spec
from pipeline.tables import read_parquet, write_parquet

SOLVER_BUDGET = 30.0  # CP-SAT deterministic time units (about seconds)


def select(graded: Path, out: Path, spec: Spec, exclude_ids: frozenset[str],
           exclude_layouts: frozenset[str] = frozenset()) -> Path:
    """Write the chosen levels to ``out`` in play order (tier, then difficulty), with ``index``.

    Candidates whose canonical id is in ``exclude_ids`` or wall layout in ``exclude_layouts``
    are never chosen.
    """
    df = read_parquet(graded).with_row_index("row")
    crates = {i: t.crates for i, t in enumerate(spec.tiers)}
    eligible = df.filter(
        (pl.col("n_crates") == pl.col("tier").replace_strict(crates, return_dtype=pl.Int8))
        & pl.col("optimal_moves").is_between(pl.col("band_lo"), pl.col("band_hi"))
        & (pl.col("first_push_traps") >= spec.min_first_push_traps)
        & ~pl.col("canonical_id").is_in(sorted(exclude_ids))
        & ~pl.col("wall_layout_id").is_in(sorted(exclude_layouts)))
    # Twice the distance to the band's centre keeps the cost an integer; a flat tier's
    # levels are spread over its band, so any optimum inside it costs nothing.
    flat = [i for i, t in enumerate(spec.tiers) if t.flat]
    cost = pl.when(pl.col("tier").is_in(flat)).then(0).otherwise(
        (2 * pl.col("optimal_moves").cast(pl.Int64)
         - pl.col("band_lo").cast(pl.Int64) - pl.col("band_hi").cast(pl.Int64)).abs())
    eligible = eligible.with_columns(cost.alias("cost"))
    distinct = ("canonical_id", "wall_layout_id") if spec.distinct_wall_layouts \
        else ("canonical_id",)
    chosen = choose(eligible, spec.slots(), eligible["cost"].to_list(),
                    enlarge="raise candidates_per_slot or max_attempts in the spec",
                    distinct=distinct)
    picked = eligible[chosen].drop("row", "cost")
    ordered = picked.sort(["tier", "difficulty", "slot"], maintain_order=True)
    ordered = ordered.with_columns(pl.int_range(0, ordered.height, dtype=pl.Int16).alias("index"))
    write_parquet(ordered, out)
    return out


def choose(table: pl.DataFrame, slots: list[tuple[int, int]], costs: list[int],
           enlarge: str, distinct: Sequence[str] = ("canonical_id", "wall_layout_id")
           ) -> list[int]:
    """Row positions of ``table``, one per (tier, slot), minimising the summed ``costs``.

    ``table`` holds only eligible candidates and has columns tier, slot, canonical_id and
    wall_layout_id; no two chosen rows share a value of a ``distinct`` column. Raises
    ``PipelineError`` naming the slots that cannot be filled and saying to ``enlarge``.
    """
    by_slot: dict[tuple[int, int], list[int]] = defaultdict(list)
    for i, (tier, slot) in enumerate(zip(table["tier"].to_list(), table["slot"].to_list(),
                                         strict=True)):
        by_slot[(tier, slot)].append(i)
    empty = [s for s in slots if not by_slot.get(s)]
    if empty:
        raise PipelineError(f"selection: no eligible candidate for {_name_slots(empty)}; "
                            f"{enlarge}")
    model, x = distinct_model(table, slots, by_slot, distinct=distinct)
    model.minimize(sum(costs[i] * var for i, var in x.items()))
    status, solver = solve_model(model)
    if status not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        unfilled = unfillable_slots(table, slots, by_slot, distinct)
        raise PipelineError(
            f"selection infeasible: {_name_slots(unfilled)} cannot get a level distinct from"
            f" the others (canonical id or wall layout already used); {enlarge}")
    return sorted(i for s in slots for i in by_slot[s] if solver.value(x[i]))


def distinct_model(table: pl.DataFrame, slots: Sequence[Hashable],
                   by_slot: Mapping[Hashable, list[int]], exact: bool = True,
                   distinct: Sequence[str] = ("canonical_id", "wall_layout_id")
                   ) -> tuple[cp_model.CpModel, dict[int, cp_model.IntVar]]:
    """One boolean per row of ``by_slot``'s lists: one (or at most one) per slot, distinct.

    No two true rows share a value of ``table``'s ``distinct`` columns (by default the
    canonical id and the wall layout); rotation reuses it.
    """
    model = cp_model.CpModel()
    x = {i: model.new_bool_var(f"x{i}") for s in slots for i in by_slot.get(s, [])}
    for s in slots:
        members = [x[i] for i in by_slot.get(s, [])]
        if exact:
            model.add_exactly_one(members)
        else:
            model.add_at_most_one(members)
    for column in distinct:
        groups: dict[str, list[int]] = defaultdict(list)
        for i, key in enumerate(table[column].to_list()):
            if i in x:
                groups[key].append(i)
        for members in groups.values():
            if len(members) > 1:
                model.add_at_most_one([x[i] for i in members])
    return model, x


def solve_model(model: cp_model.CpModel, linearization_level: int = 1
                ) -> tuple[int, cp_model.CpSolver]:
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
    return solver.solve(model), solver


def unfillable_slots(table: pl.DataFrame, slots: Sequence[Hashable],
                     by_slot: Mapping[Hashable, list[int]],
                     distinct: Sequence[str] = ("canonical_id", "wall_layout_id")
                     ) -> list[Hashable]:
    """Slots left empty by the largest selection that fills as many slots as possible."""
    model, x = distinct_model(table, slots, by_slot, exact=False, distinct=distinct)
    model.maximize(sum(x.values()))
    status, solver = solve_model(model)
    if status not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        return list(slots)
    return [s for s in slots if not any(solver.value(x[i]) for i in by_slot[s])]


def _name_slots(slots: list[tuple[int, int]]) -> str:
    names = [f"tier {t} slot {s}" for t, s in slots[:8]]
    more = f" and {len(slots) - 8} more" if len(slots) > 8 else ""
    return ", ".join(names) + more
