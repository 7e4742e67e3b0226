"""A pool's item parameters: the panel's outcomes and the grade features, calibrated, written.

``sokoforge panel POOL`` plays the panel (report/panel.parquet), then writes
``report/items.parquet`` here: one row per level (index, tier, discrimination, difficulty,
prior_difficulty), fitted by ``pipeline.scores.adaptive.calibrate`` on the panel's outcomes
and the difficulty model's grade features (``pipeline.difficulty.difficulty.FEATURES``).
``sokoforge irt POOL`` refits them on the panel's and the closed scorecards' outcomes together
(``refit_items``).
"""

from __future__ import annotations

__all__ = ["ITEMS_FILE", "folder_is_pool", "is_pool", "items_frame", "read_items",
           "refit_frame", "refit_items", "write_items"]

import json
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from pipeline.difficulty.difficulty import load_model, transformed
from pipeline.difficulty.panel import PANEL_FILE
from pipeline.errors import PipelineError
from pipeline.scores.adaptive import Trials, calibrate_trials, panel_trials
from pipeline.scores.irt import round_episodes
from pipeline.versions.hidden_files import is_hidden, private_writes
from pipeline.versions.rounds import read_round
from pipeline.versions.tables import read_parquet, write_parquet
from pipeline.versions.version import MANIFEST_FILE, Version, open_version

ITEMS_FILE = "items.parquet"  # in a pool's report/


def is_pool(manifest: dict[str, Any]) -> bool:
    """Whether a version's manifest is an adaptive game's pool (its spec has ``adaptive``)."""
    return "adaptive" in (manifest.get("spec") or {})


def folder_is_pool(folder: Path) -> bool:
    """``is_pool`` of the version in ``folder`` (False when its manifest cannot be read: a
    version's own checks say why, where they matter)."""
    try:
        manifest = json.loads((folder / MANIFEST_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(manifest, dict) and is_pool(manifest)


def _wide_panel(levels: pl.DataFrame, panel: pl.DataFrame) -> np.ndarray:
    """The long ``panel`` table (index, agent, solved) as levels x agents, ``levels``' order."""
    wide = (panel.select("index", "agent", "solved").sort("index", "agent")
            .pivot(on="agent", index="index", values="solved").sort("index"))
    if wide["index"].to_list() != levels["index"].to_list():
        raise PipelineError("the panel's levels are not the version's: play the panel again")
    return wide.drop("index").to_numpy().astype(bool)


def _fitted(levels: pl.DataFrame, outcomes: Trials) -> pl.DataFrame:
    """``items.parquet``'s rows: ``calibrate_trials`` of ``outcomes`` on ``levels`` (by index;
    index, tier and the grade features)."""
    model = load_model()
    features = transformed(levels, model.columns, model.transforms)
    fit = calibrate_trials(outcomes, features, levels["tier"].to_numpy())
    return pl.DataFrame({
        "index": levels["index"].cast(pl.Int16),
        "tier": levels["tier"].cast(pl.Int8),
        "discrimination": pl.Series(np.round(fit.discrimination, 6), dtype=pl.Float64),
        "difficulty": pl.Series(np.round(fit.difficulty, 6), dtype=pl.Float64),
        "prior_difficulty": pl.Series(np.round(fit.prior_difficulty, 6), dtype=pl.Float64),
    })


def items_frame(levels: pl.DataFrame, panel: pl.DataFrame) -> pl.DataFrame:
    """The item parameters of ``levels`` (index, tier and the grade features) from the long
    ``panel`` table of the same levels (index, agent, solved)."""
    levels = levels.sort("index")
    return _fitted(levels, panel_trials(_wide_panel(levels, panel)))


def refit_frame(levels: pl.DataFrame, panel: pl.DataFrame, episodes: pl.DataFrame
                ) -> tuple[pl.DataFrame, list[str]]:
    """``items_frame`` on the panel's outcomes and the played ``episodes`` of closed
    scorecards (an ``irt.episodes_table``, ``index`` the level shown) together: each name
    one more agent, a level it played twice two trials. Returns the rows and the names."""
    levels = levels.sort("index")
    panel_part = panel_trials(_wide_panel(levels, panel))
    counts = (episodes.group_by("name", "index")
              .agg(pl.len().alias("trials"), pl.col("solved").sum().alias("hits"))
              .sort("name", "index"))
    names = sorted(set(counts["name"].to_list()))
    number = {n: panel_part.n_agents + i for i, n in enumerate(names)}
    position = np.searchsorted(levels["index"].to_numpy(), counts["index"].to_numpy())
    outcomes = Trials(
        np.concatenate([panel_part.agent, [number[n] for n in counts["name"].to_list()]]),
        np.concatenate([panel_part.level, position]).astype(np.int64),
        np.concatenate([panel_part.trials, counts["trials"].to_numpy()]).astype(np.int64),
        np.concatenate([panel_part.hits, counts["hits"].to_numpy()]).astype(np.int64),
        panel_part.n_agents + len(names))
    return _fitted(levels, outcomes), names


def _panel(version: Version) -> pl.DataFrame:
    panel_path = version.report_dir / PANEL_FILE
    if not panel_path.is_file():
        raise PipelineError(f"{version.name} has no {PANEL_FILE}: run "
                            f"`sokoforge panel {version.name}` first")
    return read_parquet(panel_path)


def _write(version: Version, frame: pl.DataFrame) -> Path:
    out = version.report_dir / ITEMS_FILE
    with private_writes(is_hidden(version.manifest)):
        write_parquet(frame, out)
    return out


def write_items(datasets: Path, name: str) -> Path:
    """Calibrate pool ``name`` from its report/panel.parquet and write report/items.parquet."""
    version = open_version(datasets, name)
    return _write(version, items_frame(version.levels(), _panel(version)))


def refit_items(datasets: Path, name: str, episodes: pl.DataFrame
                ) -> tuple[Path, dict[str, Any]]:
    """Refit pool ``name``'s item parameters on its panel and the played ``episodes`` of its
    closed scorecards (within its round, if it has one: ``irt.round_episodes``) and write
    report/items.parquet. Sessions started after read it; a closed Score keeps the ability
    and equated success it was given at its close. Returns the file and what the refit
    pooled and moved."""
    version = open_version(datasets, name)
    if not is_pool(version.manifest):
        raise PipelineError(f"{name} is not an adaptive game's pool")
    levels = version.levels().sort("index")
    kept, pooled = round_episodes(episodes, read_round(version.folder))
    if kept.height == 0:
        within = " within its round" if pooled["round"] else ""
        raise PipelineError(f"the store holds no played episode of a closed scorecard of "
                            f"{name}{within}")
    unknown = set(kept["index"].to_list()) - set(levels["index"].to_list())
    if unknown:
        raise PipelineError(f"the store has episodes of levels {sorted(unknown)[:5]} that "
                            f"{name} does not have")
    before = read_items(version.folder) if (version.report_dir / ITEMS_FILE).is_file() else None
    frame, names = refit_frame(levels, _panel(version), kept)
    moved = (None if before is None else round(float(np.median(np.abs(
        frame["difficulty"].to_numpy() - before.sort("index")["difficulty"].to_numpy()))), 4))
    report = {"version": name, "scorecards": int(kept["scorecard"].n_unique()),
              "episodes": int(kept.height), "names": names,
              "levels_played": int(kept["index"].n_unique()), "levels": levels.height,
              "median_difficulty_move": moved, "pooled": pooled}
    return _write(version, frame), report


def read_items(folder: Path) -> pl.DataFrame:
    """A pool's item parameters (by index), refused when the pool was never calibrated."""
    path = folder / "report" / ITEMS_FILE
    if not path.is_file():
        raise PipelineError(f"{folder.name} has no report/{ITEMS_FILE}: run "
                            f"`sokoforge panel {folder.name}` first")
    return read_parquet(path).sort("index")

