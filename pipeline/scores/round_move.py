"""How far one agent's score is expected to move between two rounds (PREV and NEW).

From the agent panel when ``report/panel.parquet`` holds it (``sokoforge panel``): each
panel agent's solved count on both rounds, and how far an agent of its tier rates moves
between two independent draws of the tiers. Without a panel, from the binomial model of
level resampling at a few success rates. The audit of a rotation states which it used.
"""

from __future__ import annotations

__all__ = [
    "MODEL", "MODEL_RATES", "PANEL", "PANEL_FILE", "RoundMove", "move_between", "read_panel",
    "round_move",
]

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from pipeline.difficulty.panel import PANEL_FILE
from pipeline.errors import InputError
from pipeline.precision import expected_move, tier_rates
from pipeline.versions.tables import read_parquet
from pipeline.versions.version import REPORT_DIR

PANEL = "panel"
MODEL = "binomial model"
MODEL_RATES = (0.25, 0.5, 0.75)


@dataclass(frozen=True)
class RoundMove:
    """The expected move of one agent's solved count between ``prev`` and ``new``: where it
    comes from (``PANEL`` or ``MODEL``), a sentence, and one row per agent (or rate)."""

    prev: str
    new: str
    source: str
    statement: str
    rows: list[dict[str, Any]]

    def table(self) -> pl.DataFrame:
        return pl.DataFrame(self.rows)


def read_panel(folder: Path) -> pl.DataFrame | None:
    """A version's panel outcomes (index, agent, solved), or None when it was not played."""
    path = folder / REPORT_DIR / PANEL_FILE
    if not path.is_file():
        return None
    table = read_parquet(path)
    missing = {"index", "agent", "solved"} - set(table.columns)
    if missing:
        raise InputError(f"{path} lacks the column(s) {', '.join(sorted(missing))}")
    return table


def _per_agent(panel: pl.DataFrame, tiers: np.ndarray) -> dict[str, np.ndarray]:
    """Each agent's solved-or-not per level, in level order (levels it has no row for:
    unsolved)."""
    out = {}
    for (agent,), part in panel.group_by("agent", maintain_order=True):
        solved = np.zeros(tiers.size, dtype=bool)
        index = part["index"].to_numpy().astype(np.int64)
        keep = (index >= 0) & (index < tiers.size)
        solved[index[keep]] = part["solved"].to_numpy().astype(bool)[keep]
        out[str(agent)] = solved
    return out


def round_move(prev: str, new: str, prev_tiers: np.ndarray, new_tiers: np.ndarray,
               prev_panel: pl.DataFrame | None, new_panel: pl.DataFrame | None) -> RoundMove:
    """The expected move between ``prev`` and ``new`` (tiers: one per level, play order)."""
    if prev_panel is not None and new_panel is not None:
        return _from_panel(prev, new, prev_tiers, new_tiers, prev_panel, new_panel)
    n = int(new_tiers.size)
    rows = []
    for p in MODEL_RATES:
        move = expected_move([n], [p])
        rows.append({"success rate": f"{p:.0%}", "levels": n,
                     "expected |move|": move.mean_abs, "95% of moves": f"{move.lo} to {move.hi}"})
    half = expected_move([n], [0.5])
    missing = " and ".join(v for v, panel in ((prev, prev_panel), (new, new_panel))
                           if panel is None)
    statement = (f"From the {MODEL} of level resampling (no agent panel on {missing}; "
                 f"`sokoforge panel` plays one): between two independent draws of {n} levels, "
                 f"an agent solving half of them moves by {half.mean_abs} levels on average, "
                 f"95% of the time by {half.lo} to {half.hi}. A rotation matched slot by slot "
                 "can move an agent less than this; a fresh build moves it about this much.")
    return RoundMove(prev, new, MODEL, statement, rows)


def _from_panel(prev: str, new: str, prev_tiers: np.ndarray, new_tiers: np.ndarray,
                prev_panel: pl.DataFrame, new_panel: pl.DataFrame) -> RoundMove:
    before, after = _per_agent(prev_panel, prev_tiers), _per_agent(new_panel, new_tiers)
    agents = [a for a in before if a in after]
    if not agents:
        raise InputError(f"the panels of {prev} and {new} share no agent")
    rows = []
    for agent in agents:
        n_prev, r_prev = tier_rates(before[agent], prev_tiers)
        n_new, r_new = tier_rates(after[agent], new_tiers)
        # the same agent on the same kind of tiers: one rate per tier from both rounds
        shared = len(n_prev) == len(n_new)
        rates = ([(a * m + b * k) / max(m + k, 1) for a, b, m, k in
                  zip(r_prev, r_new, n_prev, n_new, strict=True)] if shared else r_new)
        move = expected_move(n_new, rates)
        rows.append({"agent": agent, f"solved {prev}": int(before[agent].sum()),
                     f"solved {new}": int(after[agent].sum()),
                     "move": int(after[agent].sum()) - int(before[agent].sum()),
                     "expected |move|": move.mean_abs,
                     "95% of moves": f"{move.lo} to {move.hi}"})
    observed = np.abs(np.array([r["move"] for r in rows], dtype=np.int64))
    expected = float(np.mean([r["expected |move|"] for r in rows]))
    worst = rows[int(np.argmax(observed))]
    statement = (f"From the {PANEL} ({len(rows)} agents played both): one agent's solved count "
                 f"moved by {observed.mean():.1f} levels on average from {prev} to {new} "
                 f"(most: {worst['agent']}, {worst['move']:+d}); two independent draws of "
                 f"these tiers would move an agent of the same tier rates by {expected:.1f} "
                 "on average.")
    return RoundMove(prev, new, PANEL, statement, rows)


def move_between(root: Path, prev: str, new: str, prev_tiers: np.ndarray,
                 new_tiers: np.ndarray) -> RoundMove:
    """``round_move`` with the panels read from the two versions' report folders."""
    return round_move(prev, new, prev_tiers, new_tiers, read_panel(root / prev),
                      read_panel(root / new))
