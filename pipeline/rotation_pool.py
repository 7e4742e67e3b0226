"""Enlarging a rotation's candidate pool where the match failed: goal-first draws aimed at a slot.

For each level of PREV left unmatched, fresh layouts of its tier are drawn and a few start
states are sampled at exact distances within one move of PREV's optimum and inside the slot's
band (several per layout, since grade also depends on the start).
Every draw is keyed by (version seed, round, level, attempt), so the pool depends neither on
order nor on workers; the candidates then pass through the ordinary solve and grade stages.
Draws are goal-first whatever the spec's method: only the backward search can aim at a distance.
"""

from __future__ import annotations

from functools import partial
from pathlib import Path
from typing import Any

import polars as pl

from engine.reverse import solvable_set
from pipeline.generate import CANDIDATE_SCHEMA, candidate_row
from pipeline.grade import grade
from pipeline.layouts import goal_layout
from pipeline.matching import OPTIMUM_TOLERANCE
from pipeline.seeds import LAYOUT, START, derived_rng
from pipeline.solve import solve
from pipeline.spec import Spec
from pipeline.tables import write_parquet
from pipeline.workers import Workers

ENLARGE = 2  # purpose key of an enlargement draw (generation uses LAYOUT and START under it)
FIRST_LAYOUTS = 8  # layouts sought per unmatched level in round 1, doubled each round
STARTS_PER_LAYOUT = 4


def draws_in_round(round_: int) -> int:
    """How many candidates each unmatched level seeks in enlargement ``round_`` (1-based)."""
    return (FIRST_LAYOUTS << (round_ - 1)) * STARTS_PER_LAYOUT


def enlarge(stages: Path, spec: Spec, seed: int, round_: int, wanted: pl.DataFrame,
            workers: Workers) -> Path | None:
    """Draw, solve and grade candidates for the ``wanted`` targets; the graded file or None.

    ``wanted`` holds targets (``pipeline.matching.targets`` rows). None when no draw fit.
    """
    jobs = [(r["index"], r["tier"], r["slot"], r["band_lo"], r["band_hi"], r["optimal_moves"])
            for r in wanted.iter_rows(named=True)]
    found = workers.map(partial(_draw, spec, seed, round_, draws_in_round(round_)), jobs,
                        label=f"enlarge {round_}")
    rows = [row for part in found for row in part]
    if not rows:
        return None
    drawn = stages / f"enlarge{round_}-generate.parquet"
    solved = stages / f"enlarge{round_}-solve.parquet"
    write_parquet(pl.DataFrame(rows, schema=CANDIDATE_SCHEMA, orient="row"), drawn)
    solve(drawn, solved, workers)
    return grade(solved, stages / f"enlarge{round_}-grade.parquet", workers)


def _draw(spec: Spec, seed: int, round_: int, wanted: int,
          job: tuple[int, int, int, int, int, int]) -> list[tuple[Any, ...]]:
    index, tier_no, slot, band_lo, band_hi, moves = job
    tier = spec.tiers[tier_no]
    lo, hi = max(band_lo, moves - OPTIMUM_TOLERANCE), min(band_hi, moves + OPTIMUM_TOLERANCE)
    rows: list[tuple[Any, ...]] = []
    for attempt in range(spec.max_attempts):
        if len(rows) >= wanted or lo > hi:
            break
        key = (ENLARGE, round_, index, attempt)
        board = goal_layout(derived_rng(seed, *key, LAYOUT), spec.height, spec.width,
                            tier.wall_density, tier.crates)
        if board is None:
            continue
        sset = solvable_set(board)
        rng = derived_rng(seed, *key, START)
        starts = {sset.sample_start(rng, lo, hi) for _ in range(STARTS_PER_LAYOUT)} - {None}
        for start in sorted(starts, key=lambda st: (st.player, st.crates)):
            rows.append(candidate_row(tier_no, slot, index, attempt, (band_lo, band_hi),
                                      board.with_start(start), sset.distance(start)))
    return rows
