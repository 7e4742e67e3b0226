"""A pool's item parameters: the panel's outcomes and the grade features, calibrated, written.

``sokoforge panel POOL`` plays the panel (report/panel.parquet), then writes
``report/items.parquet`` here: one row per level (index, tier, discrimination, difficulty,
prior_difficulty), fitted by ``pipeline.scores.adaptive.calibrate`` on the panel's outcomes
and the difficulty model's grade features (``pipeline.difficulty.difficulty.FEATURES``).
``sokoforge irt POOL`` refits them on the panel's and the closed scorecards' outcomes together
(``refit_items``). ``Pool`` is the parameters as the readers use them, beside the spec's shares.
"""

from __future__ import annotations

__all__ = ["ITEMS_FILE", "Pool", "is_pool", "items_frame", "pool_of", "read_items",
           "read_pool", "write_items"]

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from pipeline.difficulty.difficulty import load_model, transformed
from pipeline.difficulty.panel import PANEL_FILE
from pipeline.errors import PipelineError
from pipeline.scores.adaptive import calibrate, ramp_weights
from pipeline.spec import spec_from_dict
from pipeline.versions.hidden_files import is_hidden, private_writes
from pipeline.versions.manifest import read_manifest
from pipeline.versions.tables import read_parquet, write_parquet
from pipeline.versions.version import LEVELS_FILE, MANIFEST_FILE, open_version

ITEMS_FILE = "items.parquet"  # in a pool's report/


def is_pool(manifest: dict[str, Any]) -> bool:
    """Whether a version's manifest is an adaptive game's pool (its spec has ``adaptive``)."""
    return "adaptive" in (manifest.get("spec") or {})


def items_frame(levels: pl.DataFrame, panel: pl.DataFrame) -> pl.DataFrame:
    """The item parameters of ``levels`` (index, tier and the grade features) from the long
    ``panel`` table of the same levels (index, agent, solved)."""
    levels = levels.sort("index")
    wide = (panel.select("index", "agent", "solved").sort("index", "agent")
            .pivot(on="agent", index="index", values="solved").sort("index"))
    if wide["index"].to_list() != levels["index"].to_list():
        raise PipelineError("the panel's levels are not the version's: play the panel again")
    solved = wide.drop("index").to_numpy().astype(bool)
    model = load_model()
    features = transformed(levels, model.columns, model.transforms)
    fit = calibrate(solved, features, levels["tier"].to_numpy())
    return pl.DataFrame({
        "index": levels["index"].cast(pl.Int16),
        "tier": levels["tier"].cast(pl.Int8),
        "discrimination": pl.Series(np.round(fit.discrimination, 6), dtype=pl.Float64),
        "difficulty": pl.Series(np.round(fit.difficulty, 6), dtype=pl.Float64),
        "prior_difficulty": pl.Series(np.round(fit.prior_difficulty, 6), dtype=pl.Float64),
    })


def write_items(datasets: Path, name: str) -> Path:
    """Calibrate pool ``name`` from its report/panel.parquet and write report/items.parquet."""
    version = open_version(datasets, name)
    panel_path = version.report_dir / PANEL_FILE
    if not panel_path.is_file():
        raise PipelineError(f"{name} has no {PANEL_FILE}: run `sokoforge panel {name}` first")
    frame = items_frame(version.levels(), read_parquet(panel_path))
    out = version.report_dir / ITEMS_FILE
    with private_writes(is_hidden(version.manifest)):
        write_parquet(frame, out)
    return out


def read_items(folder: Path) -> pl.DataFrame:
    """A pool's item parameters (by index), refused when the pool was never calibrated."""
    path = folder / "report" / ITEMS_FILE
    if not path.is_file():
        raise PipelineError(f"{folder.name} has no report/{ITEMS_FILE}: run "
                            f"`sokoforge panel {folder.name}` first")
    return read_parquet(path).sort("index")


@dataclass(frozen=True)
class Pool:
    """A pool's item parameters by level index (``discrimination``, ``difficulty``, ``tiers``),
    the tier shares its sessions balance to, the episodes each session shows and each level's
    ``optimal_moves`` (what a Score's move efficiency divides by)."""

    discrimination: np.ndarray
    difficulty: np.ndarray
    tiers: np.ndarray
    shares: dict[int, float]
    episodes: int
    optimal_moves: np.ndarray

    def ramp_weights(self) -> np.ndarray:
        """Each level's weight in the equated success: the pool weighed as the ramp is."""
        return ramp_weights(self.tiers, self.shares)


def pool_of(items: pl.DataFrame, manifest: dict[str, Any],
            optimal_moves: np.ndarray) -> Pool:
    """The ``Pool`` of a version's ``items`` (``read_items``), its ``manifest`` and its
    levels' ``optimal_moves`` (by index)."""
    spec = spec_from_dict(manifest["spec"], source="the pool's manifest")
    if spec.adaptive is None:
        raise PipelineError("not a pool: its spec has no [adaptive] table")
    items = items.sort("index")
    return Pool(items["discrimination"].to_numpy().astype(np.float64),
                items["difficulty"].to_numpy().astype(np.float64),
                items["tier"].to_numpy().astype(np.int64), spec.tier_shares(),
                spec.adaptive.episodes, np.asarray(optimal_moves, dtype=np.int64))


def read_pool(folder: Path) -> Pool:
    """The ``Pool`` of the version in ``folder``: its manifest, levels and
    report/items.parquet (``PipelineError`` when it is no pool or was never calibrated)."""
    manifest = read_manifest(folder / MANIFEST_FILE)
    levels = read_parquet(folder / LEVELS_FILE, ["index", "optimal_moves"]).sort("index")
    return pool_of(read_items(folder), manifest, levels["optimal_moves"].to_numpy())
