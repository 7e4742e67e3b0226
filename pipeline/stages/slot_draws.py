"""Targeted draws: more candidates for chosen slots, when a selection cannot fill them.

Select (a slot left unfilled) and rotation (a level of PREV left unmatched) both draw fresh
layouts of the slot's tier and sample a few start states at distances in a span (the slot's
band, or within one move of PREV's optimum inside it), several per layout since grade also
depends on the start. Every draw is keyed by (version seed, kind, round, tier, layout, attempt),
so the candidates depend neither on order nor on workers, and each can be redrawn from its
origin. Draws are goal-first whatever the spec's method: only the backward search aims.
"""

from __future__ import annotations

__all__ = [
    "FIRST_LAYOUTS", "STARTS_PER_LAYOUT", "Target", "draw", "draws_in_round", "targeted_attempt",
]

from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial

import polars as pl

from engine.search.index import StateSpaceTooLarge
from engine.search.reverse import solvable_set
from pipeline.seeds import LAYOUT, START, derived_rng
from pipeline.spec import Spec
from pipeline.stages.generate import CANDIDATE_SCHEMA, Candidate, candidate_row
from pipeline.stages.grade import first_push_traps
from pipeline.stages.layouts import goal_layout
from pipeline.workers import Workers

FIRST_LAYOUTS = 8  # layouts sought per target in round 1, doubled each round
STARTS_PER_LAYOUT = 4


@dataclass(frozen=True)
class Target:
    """A slot to draw for: ``layout`` keys its draws (the slot itself for select, PREV's level
    index for rotation), ``band`` is recorded with each candidate, ``span`` bounds the starts."""

    tier: int
    slot: int
    layout: int
    band: tuple[int, int]
    span: tuple[int, int]


def draws_in_round(round_: int) -> int:
    """How many candidates each target seeks in round ``round_`` (1-based)."""
    return (FIRST_LAYOUTS << (round_ - 1)) * STARTS_PER_LAYOUT


def draw(spec: Spec, seed: int, kind: int, round_: int, targets: Sequence[Target],
         workers: Workers) -> pl.DataFrame:
    """Candidates (``CANDIDATE_SCHEMA``) for every target, about ``draws_in_round`` each."""
    found = workers.map(partial(_draw_target, spec, seed, kind, round_), list(targets),
                        label=f"draw {round_}")
    return pl.DataFrame([row for part in found for row in part], schema=CANDIDATE_SCHEMA,
                        orient="row")


def targeted_attempt(spec: Spec, seed: int, kind: int, round_: int, target: Target,
                     attempt: int) -> list[Candidate]:
    """The candidates of one layout draw for ``target`` (none when the draw is unusable)."""
    key = (kind, round_, target.tier, target.layout, attempt)
    tier = spec.tiers[target.tier]
    board = goal_layout(derived_rng(seed, *key, LAYOUT), spec.height, spec.width,
                        tier.wall_density, tier.crates)
    if board is None:
        return []
    try:
        sset = solvable_set(board)
    except StateSpaceTooLarge:
        return []  # the layout does not fit the engine: the next attempt draws another
    rng = derived_rng(seed, *key, START)
    lo, hi = target.span
    starts = {st for _ in range(STARTS_PER_LAYOUT)
              if (st := sset.sample_start(rng, lo, hi)) is not None}
    if spec.min_first_push_traps:  # a trap spec's levels are drawn with their traps
        starts = {st for st in starts if first_push_traps(board.with_start(st), sset)
                  >= spec.min_first_push_traps}
    return [candidate_row(board.with_start(start), tier=target.tier, slot=target.slot,
                          layout=target.layout, attempt=attempt, band=target.band,
                          distance=sset.distance(start), draw=kind, round_=round_,
                          span=target.span, pick=pick)
            for pick, start in enumerate(sorted(starts, key=lambda st: (st.player, st.crates)))]


def _draw_target(spec: Spec, seed: int, kind: int, round_: int, target: Target
                 ) -> list[Candidate]:
    wanted = draws_in_round(round_)
    rows: list[Candidate] = []
    for attempt in range(spec.max_attempts):
        if len(rows) >= wanted or target.span[0] > target.span[1]:
            break
        rows += targeted_attempt(spec, seed, kind, round_, target, attempt)
    return rows
