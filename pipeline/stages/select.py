"""Stage 2, select: exactly one candidate per slot, before anything is solved or graded.

Constraints: the tier's crate count, the generator's distance (the optimum, which solve then
confirms) inside the slot's band, no two levels sharing a wall layout (nor so a canonical id:
levels equal under the 8 symmetries have equal wall layouts), no canonical id or wall layout of
another version. Objective: each optimum as close as possible to its band's centre (any optimum
in a flat band), ties to the earliest candidate; a spec's first-push traps are drawn by
generate. That is an assignment of slots to wall layouts, solved exactly by OR-tools'
min-cost flow. Slots left unfilled get more candidates (``pipeline.stages.slot_draws``) for a
bounded number of rounds before the build fails naming them.
"""

from __future__ import annotations

__all__ = ["MAX_REDRAWS", "choose", "name_slots", "select"]

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import polars as pl

from pipeline.errors import PipelineError
from pipeline.seeds import REDRAW
from pipeline.spec import Spec
from pipeline.stages.slot_draws import Target, draw, draws_in_round
from pipeline.versions.tables import read_parquet, write_parquet
from pipeline.workers import Workers

MAX_REDRAWS = 3  # rounds of more candidates for the unfilled slots before the build fails


def select(candidates: Path, out: Path, spec: Spec, seed: int, exclude_ids: frozenset[str], *,
           exclude_layouts: frozenset[str] = frozenset(), workers: Workers | None = None
           ) -> Path:
    """Write the chosen candidates to ``out``, one per slot in (tier, slot) order.

    Candidates whose canonical id is in ``exclude_ids`` or wall layout in ``exclude_layouts``
    are never chosen. Raises ``PipelineError`` naming the slots still unfilled after
    ``MAX_REDRAWS`` rounds of draws keyed by (``seed``, tier, slot, round).
    """
    workers = workers or Workers(show_progress=False)
    pool = read_parquet(candidates)
    for round_ in range(MAX_REDRAWS + 1):
        eligible = _eligible(pool, spec, exclude_ids, exclude_layouts)
        rows, unfilled = choose(eligible, spec.slots(), eligible["cost"].to_list())
        if not unfilled:
            break
        if round_ == MAX_REDRAWS:
            raise PipelineError(_failure(eligible, unfilled))
        workers.say(f"select: {name_slots(unfilled)} unfilled; drawing up to "
                    f"{draws_in_round(round_ + 1)} more candidates for each")
        targets = [Target(t, s, s, spec.tiers[t].band(s), spec.tiers[t].band(s))
                   for t, s in unfilled]
        pool = pl.concat([pool, draw(spec, seed, REDRAW, round_ + 1, targets, workers)])
    picked = eligible[rows].drop("cost").sort(["tier", "slot"])
    write_parquet(picked, out)
    return out


def _eligible(pool: pl.DataFrame, spec: Spec, exclude_ids: frozenset[str],
              exclude_layouts: frozenset[str]) -> pl.DataFrame:
    crates = {i: t.crates for i, t in enumerate(spec.tiers)}
    eligible = pool.filter(
        (pl.col("n_crates") == pl.col("tier").replace_strict(crates, return_dtype=pl.Int8))
        & pl.col("distance").is_between(pl.col("band_lo"), pl.col("band_hi"))
        & ~pl.col("canonical_id").is_in(sorted(exclude_ids))
        & ~pl.col("wall_layout_id").is_in(sorted(exclude_layouts)))
    # Twice the distance to the band's centre keeps the cost an integer; a flat tier's
    # levels are spread over its band, so any optimum inside it costs nothing.
    flat = [i for i, t in enumerate(spec.tiers) if t.flat]
    cost = pl.when(pl.col("tier").is_in(flat)).then(0).otherwise(
        (2 * pl.col("distance").cast(pl.Int64)
         - pl.col("band_lo").cast(pl.Int64) - pl.col("band_hi").cast(pl.Int64)).abs())
    return eligible.with_columns(cost.alias("cost"))


def choose(table: pl.DataFrame, slots: Sequence[tuple[int, int]], costs: list[int]
           ) -> tuple[list[int], list[tuple[int, int]]]:
    """Rows of ``table`` (one per slot, as many slots as possible) and the slots left unfilled.

    ``table`` holds eligible candidates with columns tier, slot, canonical_id and
    wall_layout_id. No two chosen rows share a wall layout or a canonical id; among the
    fullest selections, the summed ``costs`` is least, ties going to earlier rows.
    """
    from ortools.graph.python import min_cost_flow  # light, unlike CP-SAT (which loads pandas)

    layouts = table["wall_layout_id"].to_list()
    _check_ids_follow_layouts(table["canonical_id"].to_list(), layouts)
    slot_no = {s: j for j, s in enumerate(slots)}
    layout_no: dict[str, int] = {}
    best: dict[tuple[int, int], int] = {}  # (slot, layout) -> its cheapest, earliest row
    for i, (tier, slot) in enumerate(zip(table["tier"].to_list(), table["slot"].to_list(),
                                         strict=True)):
        j = slot_no.get((tier, slot))
        if j is None:
            continue
        key = (j, layout_no.setdefault(layouts[i], len(layout_no)))
        if key not in best or costs[i] < costs[best[key]]:
            best[key] = i
    n_slots, n_layouts = len(slots), len(layout_no)
    source, sink = n_slots + n_layouts, n_slots + n_layouts + 1
    flow = min_cost_flow.SimpleMinCostFlow()
    for j in range(n_slots):
        flow.add_arc_with_capacity_and_unit_cost(source, j, 1, 0)
    # The row number breaks ties: scaled below one unit of cost, it never outweighs a cost.
    scale = table.height + 1
    arcs = [(flow.add_arc_with_capacity_and_unit_cost(j, n_slots + k, 1, costs[i] * scale + i),
             j, i) for (j, k), i in sorted(best.items())]
    for k in range(n_layouts):
        flow.add_arc_with_capacity_and_unit_cost(n_slots + k, sink, 1, 0)
    flow.set_node_supply(source, n_slots)
    flow.set_node_supply(sink, -n_slots)
    status = flow.solve_max_flow_with_min_cost()
    if status != flow.OPTIMAL:
        raise PipelineError(f"selection: the min-cost flow stopped with status {status}")
    chosen = {j: i for arc, j, i in arcs if flow.flow(arc)}
    return sorted(chosen.values()), [slots[j] for j in range(n_slots) if j not in chosen]


def _check_ids_follow_layouts(ids: list[str], layouts: list[str]) -> None:
    """Distinct wall layouts imply distinct canonical ids only if equal ids share a layout."""
    seen: dict[str, str] = {}
    for cid, layout in zip(ids, layouts, strict=True):
        if seen.setdefault(cid, layout) != layout:
            raise PipelineError(f"selection: canonical id {cid} appears with two wall layouts")


def _failure(eligible: pl.DataFrame, unfilled: list[tuple[int, int]]) -> str:
    """Why the slots stay unfilled, and which spec field to change."""
    have = set(zip(eligible["tier"].to_list(), eligible["slot"].to_list(), strict=True))
    empty = [s for s in unfilled if s not in have]
    if empty:
        return (f"selection: no candidate with its optimum in the band of {name_slots(empty)} "
                f"after {MAX_REDRAWS} rounds of more draws; widen band_start/band_end of tier "
                f"{empty[0][0]} or raise max_attempts in the spec")
    return (f"selection infeasible: {name_slots(unfilled)} cannot get a level distinct from "
            f"the others (canonical id or wall layout already used) after {MAX_REDRAWS} rounds "
            "of more draws; raise candidates_per_slot or max_attempts in the spec")


def name_slots(slots: Sequence[Any]) -> str:
    """Slots as a maintainer reads them: ``tier 1 slot 0, tier 2 slot 5``."""
    names = [f"tier {t} slot {s}" for t, s in slots[:8]]
    more = f" and {len(slots) - 8} more" if len(slots) > 8 else ""
    return ", ".join(names) + more
