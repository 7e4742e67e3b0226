"""A pool's item parameters: the panel's outcomes and the grade features, calibrated, written.

``sokoforge panel POOL`` plays the panel (report/panel.parquet), then writes
``report/items.parquet`` here: one row per level (index, tier, discrimination, difficulty,
prior_difficulty), fitted by ``pipeline.scores.adaptive.calibrate`` on the panel's outcomes
and the difficulty model's grade features (``pipeline.difficulty.difficulty.FEATURES``).
"""

from __future__ import annotations

__all__ = ["ITEMS_FILE", "is_pool", "items_frame", "read_items", "write_items"]

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from pipeline.difficulty.difficulty import load_model, transformed
from pipeline.difficulty.panel import PANEL_FILE
from pipeline.errors import PipelineError
from pipeline.scores.adaptive import calibrate
from pipeline.versions.hidden_files import is_hidden, private_writes
from pipeline.versions.tables import read_parquet, write_parquet
from pipeline.versions.version import open_version

ITEMS_FILE = "items.parquet"  # in a pool's report/


def is_pool(manifest: Mapping[str, Any]) -> bool:
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
