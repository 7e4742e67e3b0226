"""The agent panel played on a table of levels: outcome vectors, counts and panel.parquet.

``sokoforge panel VERSION`` writes ``report/panel.parquet`` (one row per level and agent, with
the pushes each episode made, which the review compares a scorecard's pushes with);
rotation matches slot by slot on the same outcome vectors (``pipeline.rotate``). The panel
(``engine.agents.panel``) is deterministic, so the file's bytes follow from the levels alone.
"""

from __future__ import annotations

__all__ = [
    "PANEL_COLUMN", "PANEL_FILE", "PANEL_STEPS_COLUMN", "PanelPlay", "outcome_matrix",
    "panel_frame", "panel_of_version", "play_episodes", "play_table", "pushes_of",
    "solved_counts", "with_outcomes", "write_panel", "write_played",
]

from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path
from typing import NamedTuple

import numpy as np
import polars as pl

from engine.agents.panel import PANEL, PanelAgent, episode, play_panel
from engine.levels import Level, parse_xsb
from engine.rules import board_array, step_on
from pipeline.versions.hidden_files import is_hidden, private_writes
from pipeline.versions.tables import write_parquet
from pipeline.versions.version import Version, open_version
from pipeline.workers import Workers

PANEL_FILE = "panel.parquet"  # in a version's report/
PANEL_COLUMN = "panel"  # a table's per-level outcome vector (List[Boolean], one per agent)
PANEL_STEPS_COLUMN = "panel_steps"  # ... and the steps each agent took (List[Int32])


class PanelPlay(NamedTuple):
    """Every agent's episode on every level: levels x agents arrays of solved, steps and the
    pushes made."""

    solved: np.ndarray
    steps: np.ndarray
    pushes: np.ndarray


def _play(agents: tuple[PanelAgent, ...], seed: int, item: tuple[str, int]
          ) -> tuple[tuple[bool, ...], tuple[int, ...]]:
    return play_panel(parse_xsb(item[0]), int(item[1]), agents, seed)


def pushes_of(level: Level, actions: Sequence[int]) -> int:
    """How many of ``actions`` (moves 0-3 from the start) push a crate, by the rules."""
    board, state, pushes = board_array(level), level.start, 0
    for action in actions:
        state, _, pushed = step_on(board, level.width, state, int(action))
        pushes += pushed
    return pushes


def _play_pushes(agents: tuple[PanelAgent, ...], seed: int, item: tuple[str, int]
                 ) -> tuple[tuple[bool, ...], tuple[int, ...], tuple[int, ...]]:
    level = parse_xsb(item[0])
    played = [episode(level, int(item[1]), agent, seed) for agent in agents]
    return (tuple(p.solved for p in played), tuple(p.steps for p in played),
            tuple(pushes_of(level, p.actions) for p in played))


def play_episodes(table: pl.DataFrame, workers: Workers,
                  agents: Sequence[PanelAgent] = PANEL, seed: int = 0) -> PanelPlay:
    """``play_table`` with the pushes of every episode too."""
    items = list(zip(table["xsb"].to_list(), table["max_steps"].to_list(), strict=True))
    results = workers.map(partial(_play_pushes, tuple(agents), seed), items, label="panel")
    shape = (len(items), len(agents))
    return PanelPlay(*(np.array([r[k] for r in results], dtype=dtype).reshape(shape)
                       for k, dtype in enumerate((bool, np.int64, np.int64))))


def play_table(table: pl.DataFrame, workers: Workers,
               agents: Sequence[PanelAgent] = PANEL, seed: int = 0
               ) -> tuple[np.ndarray, np.ndarray]:
    """``(solved, steps)``, levels x agents, of every agent on every row (``xsb`` within
    ``max_steps``), in the rows' order."""
    items = list(zip(table["xsb"].to_list(), table["max_steps"].to_list(), strict=True))
    results = workers.map(partial(_play, tuple(agents), seed), items, label="panel")
    shape = (len(items), len(agents))
    solved = np.array([r[0] for r in results], dtype=bool).reshape(shape)
    steps = np.array([r[1] for r in results], dtype=np.int64).reshape(shape)
    return solved, steps


def with_outcomes(table: pl.DataFrame, workers: Workers,
                  agents: Sequence[PanelAgent] = PANEL) -> pl.DataFrame:
    """``table`` with its panel outcome vector per row (column ``panel``) and each agent's
    steps (``panel_steps``: how easily it solved the level, which matching also compares)."""
    solved, steps = play_table(table, workers, agents)
    return table.with_columns(
        pl.Series(PANEL_COLUMN, solved.tolist(), dtype=pl.List(pl.Boolean)),
        pl.Series(PANEL_STEPS_COLUMN, steps.tolist(), dtype=pl.List(pl.Int32)))


def outcome_matrix(table: pl.DataFrame) -> np.ndarray:
    """The ``panel`` column as a levels x agents boolean matrix."""
    rows = table[PANEL_COLUMN].to_list()
    return np.array(rows, dtype=bool).reshape(len(rows), -1)


def panel_frame(indices: Sequence[int], solved: np.ndarray, steps: np.ndarray,
                agents: Sequence[PanelAgent] = PANEL,
                pushes: np.ndarray | None = None) -> pl.DataFrame:
    """The long table: one row per level and agent (index, agent, family, budget, solved,
    steps and, when given, pushes), by level then agent in panel order."""
    n, k = solved.shape
    frame = pl.DataFrame({
        "index": pl.Series(np.repeat(np.asarray(indices, dtype=np.int16), k), dtype=pl.Int16),
        "agent": [a.name for a in agents] * n,
        "family": [a.family for a in agents] * n,
        "budget": pl.Series([a.budget for a in agents] * n, dtype=pl.Int32),
        "solved": solved.ravel(),
        "steps": pl.Series(steps.ravel(), dtype=pl.Int32),
    })
    if pushes is None:
        return frame
    return frame.with_columns(pl.Series("pushes", pushes.ravel(), dtype=pl.Int32))


def panel_of_version(version: Version, workers: Workers) -> pl.DataFrame:
    """Play the whole panel on every level of ``version``: the long table, pushes included."""
    levels = version.levels(["index", "xsb", "max_steps"]).sort("index")
    played = play_episodes(levels, workers)
    return panel_frame(levels["index"].to_list(), played.solved, played.steps, PANEL,
                       played.pushes)


def write_panel(datasets: Path, name: str, workers: Workers) -> Path:
    """Write ``report/panel.parquet`` of version ``name`` (its levels as its manifest says;
    the report folder is made if needed)."""
    return write_played(datasets, name, PANEL_FILE, lambda v: panel_of_version(v, workers))


def write_played(datasets: Path, name: str, file: str,
                 play: Callable[[Version], pl.DataFrame]) -> Path:
    """Write what ``play`` gives of version ``name`` to its ``report/FILE`` (the report
    folder made if needed; a hidden version's its owner's alone)."""
    version = open_version(datasets, name)
    frame = play(version)
    out = version.report_dir / file
    with private_writes(is_hidden(version.manifest)):
        version.report_dir.mkdir(exist_ok=True)
        write_parquet(frame, out)
    return out


def solved_counts(frame: pl.DataFrame, by_tier: pl.DataFrame | None = None) -> pl.DataFrame:
    """Solved levels per agent (panel order, then others as they come), and per tier when
    ``by_tier`` (index, tier) is given: columns agent[, family, budget], solved[, tier 0,
    tier 1, ...]. Only index, agent and solved are needed."""
    order = {a.name: i for i, a in enumerate(PANEL)}
    keys = ["agent", *[c for c in ("family", "budget") if c in frame.columns]]
    total = (frame.group_by(keys, maintain_order=True)
             .agg(pl.col("solved").sum().cast(pl.Int64).alias("solved")))
    if by_tier is not None:
        tiers = (frame.join(by_tier.select("index", "tier"), on="index")
                 .group_by("agent", "tier").agg(pl.col("solved").sum().cast(pl.Int64))
                 .sort("tier")
                 .pivot(on="tier", index="agent", values="solved"))
        tiers = tiers.rename({c: f"tier {c}" for c in tiers.columns if c != "agent"})
        total = total.join(tiers, on="agent", how="left", maintain_order="left")
    rank = [order.get(a, len(order) + i) for i, a in enumerate(total["agent"].to_list())]
    return total.with_columns(pl.Series("_rank", rank)).sort("_rank").drop("_rank")
