"""Stage 1, generate: candidate levels for every slot of a spec.

Goal-first (default): each layout (walls + goals) is enumerated once with the engine's backward
search and offers a start state, at exact distance inside the band (at its centre when the
layout has one), to each of the ``candidates_per_slot`` slots around its own; so every slot
sees several layouts and one enumeration serves several slots. Scatter: random boards, kept
when the forward optimum lands in the band.
"""

from __future__ import annotations

__all__ = [
    "CANDIDATE_SCHEMA", "SCATTER_MAX_STATES", "TRAP_DRAWS", "Candidate", "candidate_row",
    "draw_start", "generate", "goal_first_attempt", "placed", "scatter_attempt", "window",
]

import math
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import NamedTuple

import numpy as np
import polars as pl

from engine.levels import Level, State, canonical_id, to_xsb, wall_layout_id
from engine.search.index import StateSpaceTooLarge
from engine.search.reverse import SolvableSet, solvable_set
from engine.search.solver import solve as forward_solve
from pipeline.errors import PipelineError
from pipeline.seeds import GENERATED, LAYOUT, START, derived_rng
from pipeline.spec import Spec, Tier
from pipeline.stages.grade import first_push_traps
from pipeline.stages.layouts import goal_layout, scatter_level
from pipeline.versions.tables import write_parquet
from pipeline.workers import Workers

SCATTER_MAX_STATES = 2_000_000
TRAP_DRAWS = 8  # starts drawn per slot from one layout when the spec asks for first-push traps

CANDIDATE_SCHEMA = {
    "tier": pl.Int8, "slot": pl.Int16, "layout": pl.Int16, "attempt": pl.Int16,
    "band_lo": pl.Int16, "band_hi": pl.Int16, "n_crates": pl.Int8, "height": pl.Int8,
    "width": pl.Int8, "xsb": pl.String, "distance": pl.Int16, "canonical_id": pl.String,
    "wall_layout_id": pl.String,
    # Where the candidate was drawn (see ``pipeline.stages.origins``): enough to redraw it from the
    # seed.
    "draw": pl.Int8, "round": pl.Int8, "span_lo": pl.Int16, "span_hi": pl.Int16, "pick": pl.Int8,
}



class Candidate(NamedTuple):
    """One candidate level: the fields of ``CANDIDATE_SCHEMA``, in its column order (so a list
    of them is a table's rows; a test holds the two equal)."""

    tier: int
    slot: int
    layout: int  # the slot whose layout draw made it
    attempt: int
    band_lo: int  # the optimum band of the slot it stands in
    band_hi: int
    n_crates: int
    height: int
    width: int
    xsb: str
    distance: int  # its optimal solution length
    canonical_id: str
    wall_layout_id: str
    draw: int  # where it was drawn (``pipeline.seeds``: GENERATED, ENLARGE, REDRAW) ...
    round: int  # ... in which round of targeted draws, for which span, the how-manieth start
    span_lo: int
    span_hi: int
    pick: int


@dataclass(frozen=True)
class _Unit:
    """One piece of generation work: the slot whose own layouts it draws (and whose band)."""

    tier: int
    slot: int


def generate(spec: Spec, seed: int, out: Path, workers: Workers) -> Path:
    """Write every slot's candidates to ``out`` (Parquet), ordered by tier, slot, layout."""
    units = [_Unit(t, i) for t, tier in enumerate(spec.tiers) for i in range(tier.levels)]
    make = _goal_first_unit if spec.method == "goal_first" else _scatter_unit
    results = workers.map(partial(make, spec, seed), units, label="generate")
    rows = [row for unit_rows in results for row in unit_rows]
    df = pl.DataFrame(rows, schema=CANDIDATE_SCHEMA, orient="row")
    df = df.sort(["tier", "slot", "layout"], maintain_order=True)
    write_parquet(df, out)
    return out


def window(slot: int, n_slots: int, k: int) -> range:
    """The ``k`` slots (clipped to the tier) that the layout drawn for ``slot`` serves."""
    start = min(max(slot - k // 2, 0), max(n_slots - k, 0))
    return range(start, min(start + k, n_slots))


def _goal_first_unit(spec: Spec, seed: int, unit: _Unit) -> list[Candidate]:
    tier = spec.tiers[unit.tier]
    lo, hi = tier.band(unit.slot)
    too_large: StateSpaceTooLarge | None = None
    searched = 0
    for attempt in range(spec.max_attempts):
        try:
            rows = goal_first_attempt(spec, seed, unit.tier, unit.slot, attempt)
        except StateSpaceTooLarge as e:
            too_large = e  # this layout's solvable states would not fit: draw another
            continue
        searched += 1
        if rows is not None:
            return rows
    if too_large is not None and not searched:
        raise too_large  # no layout of this tier fits the engine: the spec asks too much
    raise PipelineError(
        f"tier {unit.tier} slot {unit.slot}: no layout in {spec.max_attempts} attempts has a "
        f"start state with optimum in [{lo}, {hi}] ({tier.crates} crates, wall density "
        f"{tier.wall_density}); widen the band or raise max_attempts")


def goal_first_attempt(spec: Spec, seed: int, tier_no: int, own: int, attempt: int
                       ) -> list[Candidate] | None:
    """The candidates of one layout draw for slot ``own``, or None when the draw is unusable.

    The layout offers a start to each slot of ``own``'s window; the draw counts only when
    ``own`` gets one. A verifier replays exactly this to redraw a level from its origin.
    """
    tier = spec.tiers[tier_no]
    lo, _ = tier.band(own)
    board = goal_layout(derived_rng(seed, tier_no, own, attempt, LAYOUT),
                        spec.height, spec.width, tier.wall_density, tier.crates)
    if board is None:
        return None
    sset = solvable_set(board)  # StateSpaceTooLarge when the layout does not fit the engine
    if sset.max_distance < lo:
        return None
    rng = derived_rng(seed, tier_no, own, attempt, START)
    rows: list[Candidate] = []
    for slot in window(own, tier.levels, spec.candidates_per_slot):
        s_lo, s_hi = tier.band(slot)
        start = draw_start(sset, rng, tier, (s_lo, s_hi), spec.min_first_push_traps)
        if start is None:
            if slot == own:
                return None
            continue
        rows.append(candidate_row(board.with_start(start), tier=tier_no, slot=slot, layout=own,
                                  attempt=attempt, band=(s_lo, s_hi),
                                  distance=sset.distance(start), pick=len(rows)))
    return rows


def draw_start(sset: SolvableSet, rng: np.random.Generator, tier: Tier, band: tuple[int, int],
               min_traps: int = 0) -> State | None:
    """A start in ``band`` for a slot of ``tier``: near the centre of a ramp's band, uniformly
    anywhere in a flat one (by rejection: a 10x10 set is too large to list); with
    ``min_traps``, one of a few draws that has that many first-push traps."""
    for _ in range(TRAP_DRAWS if min_traps else 1):
        start = sset.draw_start(rng, *band) if tier.flat else _near_centre(sset, rng, *band)
        if start is None or not min_traps:
            return start
        if first_push_traps(sset.level.with_start(start), sset) >= min_traps:
            return start
    return None


def _near_centre(sset: SolvableSet, rng: np.random.Generator, lo: int, hi: int) -> State | None:
    """A start at the band's centre distance when the layout has one, else anywhere in it."""
    centre = (lo + hi) / 2
    start = sset.sample_start(rng, math.floor(centre), math.ceil(centre))
    return start if start is not None else sset.sample_start(rng, lo, hi)


def _scatter_unit(spec: Spec, seed: int, unit: _Unit) -> list[Candidate]:
    tier = spec.tiers[unit.tier]
    band = tier.band(unit.slot)
    rows: list[Candidate] = []
    for attempt in range(spec.max_attempts):
        level = scatter_attempt(spec, seed, unit.tier, unit.slot, attempt)
        if level is None:
            continue
        result = forward_solve(level, max_states=SCATTER_MAX_STATES)
        if result.status == "solved" and band[0] <= result.optimal[0] <= band[1]:
            rows.append(candidate_row(level, tier=unit.tier, slot=unit.slot, layout=unit.slot,
                                      attempt=attempt, band=band, distance=result.optimal[0]))
            if len(rows) == spec.candidates_per_slot:
                break
    if not rows:
        raise PipelineError(
            f"tier {unit.tier} slot {unit.slot}: no scattered board in {spec.max_attempts} "
            f"attempts has its optimum in [{band[0]}, {band[1]}]; widen the band or raise "
            "max_attempts")
    return rows


def scatter_attempt(spec: Spec, seed: int, tier_no: int, slot: int, attempt: int
                    ) -> Level | None:
    """The board scatter generation draws for (tier, slot, attempt), before any solving."""
    tier = spec.tiers[tier_no]
    return scatter_level(derived_rng(seed, tier_no, slot, attempt, LAYOUT),
                         spec.height, spec.width, tier.wall_density, tier.crates)


def candidate_row(level: Level, *, tier: int, slot: int, layout: int, attempt: int,
                  band: tuple[int, int], distance: int, draw: int = GENERATED, round_: int = 0,
                  span: tuple[int, int] = (0, 0), pick: int = 0) -> Candidate:
    """``level`` as a candidate for ``slot`` of ``tier`` (targeted draws use it too).

    Args:
        level: the board with its start state.
        tier, slot, band: the slot it is drawn for, and that slot's optimum band.
        layout, attempt, pick, draw, round_, span: its origin (``pipeline.stages.origins``).
        distance: its optimal solution length.
    """
    return Candidate(
        tier=tier, slot=slot, layout=layout, attempt=attempt, band_lo=band[0], band_hi=band[1],
        n_crates=level.n_crates, height=level.height, width=level.width, xsb=to_xsb(level),
        distance=int(distance), canonical_id=canonical_id(level),
        wall_layout_id=wall_layout_id(level), draw=draw, round=round_, span_lo=span[0],
        span_hi=span[1], pick=pick)


def placed(row: Candidate, slot: int, band: tuple[int, int]) -> Candidate:
    """A candidate standing in ``slot`` with that slot's ``band`` (as a rotation places it)."""
    return row._replace(slot=slot, band_lo=band[0], band_hi=band[1])
