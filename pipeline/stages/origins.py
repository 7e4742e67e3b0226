"""Where each level of a version came from: recorded in its manifest, redrawn from the seed.

An origin names the draw that made a level: the generate stage's (tier, layout, attempt, pick)
or a targeted draw's (kind, round, tier, layout, attempt, span, pick), see
``pipeline.stages.slot_draws``. With the version seed it gives back that very level, so a version
verifies on its own, without the versions it excluded or the one it was rotated from.
"""

from __future__ import annotations

__all__ = ["KINDS", "origins", "redraw"]

from typing import Any

import polars as pl

from engine.search.solver import solve as forward_solve
from pipeline.errors import InputError
from pipeline.seeds import ENLARGE, GENERATED, REDRAW
from pipeline.spec import Spec
from pipeline.stages.generate import (
    SCATTER_MAX_STATES,
    Candidate,
    candidate_row,
    goal_first_attempt,
    placed,
    scatter_attempt,
)
from pipeline.stages.slot_draws import Target, targeted_attempt

KINDS = {GENERATED: "generate", ENLARGE: "enlarge", REDRAW: "redraw"}
_CODES = {name: code for code, name in KINDS.items()}


def origins(levels: pl.DataFrame) -> list[dict[str, Any]]:
    """The origin of every row of ``levels`` (with the candidate columns), in row order."""
    out = []
    for r in levels.iter_rows(named=True):
        origin = {"draw": KINDS[r["draw"]], "tier": r["tier"], "layout": r["layout"],
                  "attempt": r["attempt"], "pick": r["pick"]}
        if r["draw"] != GENERATED:
            origin.update(round=r["round"], span=[r["span_lo"], r["span_hi"]])
        out.append(origin)
    return out


def redraw(spec: Spec, seed: int, origin: dict[str, Any], slot: int) -> Candidate | None:
    """The candidate row ``origin`` names, standing in ``slot`` of its tier (and its band).

    None when the seed draws nothing there (a wrong seed, or an origin not of this spec).
    Raises ``InputError`` for an origin that is not well formed.
    """
    try:
        kind, tier, layout = _CODES[origin["draw"]], int(origin["tier"]), int(origin["layout"])
        attempt, pick = int(origin["attempt"]), int(origin["pick"])
        if not (0 <= tier < len(spec.tiers) and 0 <= slot < spec.tiers[tier].levels):
            return None
        band = spec.tiers[tier].band(slot)
        if kind != GENERATED:
            span = (int(origin["span"][0]), int(origin["span"][1]))
            rows = targeted_attempt(spec, seed, kind, int(origin["round"]),
                                    Target(tier, slot, layout, band, span), attempt)
        elif spec.method == "goal_first":
            rows = goal_first_attempt(spec, seed, tier, layout, attempt) or []
        else:
            rows = _scatter_rows(spec, seed, tier, layout, attempt)
    except (KeyError, TypeError, ValueError, IndexError) as e:
        raise InputError(f"origin {origin!r} is not well formed ({e})") from None
    if not 0 <= pick < len(rows):
        return None
    return placed(rows[pick], slot, band)


def _scatter_rows(spec: Spec, seed: int, tier: int, slot: int, attempt: int
                  ) -> list[Candidate]:
    level = scatter_attempt(spec, seed, tier, slot, attempt)
    if level is None:
        return []
    result = forward_solve(level, max_states=SCATTER_MAX_STATES)
    if result.status != "solved":
        return []
    return [candidate_row(level, tier=tier, slot=slot, layout=slot, attempt=attempt,
                          band=spec.tiers[tier].band(slot), distance=result.optimal[0])]
