"""A pool's item parameters: the panel's outcomes and the grade features, calibrated, written.

``sokoforge panel POOL`` plays the panel (report/panel.parquet), then writes
``report/items.parquet`` here: one row per level (index, tier, discrimination, difficulty,
prior_difficulty), fitted by ``pipeline.scores.adaptive.calibrate`` on the panel's outcomes
and the difficulty model's grade features (``pipeline.difficulty.difficulty.FEATURES``);
and ``report/items.json``: the model's error on an agent outside the panel
(``pipeline.scores.adaptive.model_error``), which widens every equated interval.
``sokoforge irt POOL`` refits the parameters on the panel's and the closed scorecards'
outcomes together (``refit_items``); the model's error stays the panel's.
"""

from __future__ import annotations

__all__ = ["ITEMS_FILE", "ITEMS_FIT_FILE", "folder_is_pool", "is_pool", "items_frame",
           "model_sd", "read_items", "refit_frame", "refit_items", "write_items"]

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from pipeline.difficulty.difficulty import load_model, transformed
from pipeline.difficulty.panel import PANEL_FILE
from pipeline.errors import InputError, PipelineError
from pipeline.scores.adaptive import (
    ModelError,
    Trials,
    calibrate_trials,
    model_error,
    panel_trials,
)
from pipeline.scores.irt import fitted_episodes
from pipeline.versions.hidden_files import is_hidden, private_writes
from pipeline.versions.manifest import read_manifest
from pipeline.versions.tables import read_parquet, write_parquet, write_text
from pipeline.versions.version import MANIFEST_FILE, Version, open_version

ITEMS_FILE = "items.parquet"  # in a pool's report/
ITEMS_FIT_FILE = "items.json"  # ... and how well they fit an agent outside the panel


def is_pool(manifest: Mapping[str, Any]) -> bool:
    """Whether a version's manifest is an adaptive game's pool (its spec has ``adaptive``)."""
    return "adaptive" in (manifest.get("spec") or {})


def folder_is_pool(folder: Path) -> bool:
    """``is_pool`` of the version in ``folder`` (False when its manifest cannot be read: a
    version's own checks say why, where they matter)."""
    try:
        return is_pool(read_manifest(folder / MANIFEST_FILE))
    except (OSError, InputError):
        return False


def _wide_panel(levels: pl.DataFrame, panel: pl.DataFrame) -> np.ndarray:
    """The long ``panel`` table (index, agent, solved) as levels x agents, ``levels``' order."""
    wide = (panel.select("index", "agent", "solved").sort("index", "agent")
            .pivot(on="agent", index="index", values="solved").sort("index"))
    if wide["index"].to_list() != levels["index"].to_list():
        raise PipelineError("the panel's levels are not the version's: play the panel again")
    return wide.drop("index").to_numpy().astype(bool)


def _features(levels: pl.DataFrame) -> np.ndarray:
    model = load_model()
    return transformed(levels, model.columns, model.transforms)


def _fitted(levels: pl.DataFrame, outcomes: Trials) -> pl.DataFrame:
    """``items.parquet``'s rows: ``calibrate_trials`` of ``outcomes`` on ``levels`` (by index;
    index, tier and the grade features)."""
    fit = calibrate_trials(outcomes, _features(levels), levels["tier"].to_numpy())
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


def _fit_record(error: ModelError) -> dict[str, Any]:
    return {"model_sd": error.sd, "left_out_bias": error.bias, "sessions": error.sessions,
            "episodes": error.episodes,
            "how": "each panel agent left out in turn, the pool calibrated on the others, and "
                   "sessions of the left-out agent played on its own outcomes: the rms error "
                   "of their equated success against its success on the whole pool, beyond "
                   "the posterior's own variance"}


def write_items(datasets: Path, name: str) -> Path:
    """Calibrate pool ``name`` from its report/panel.parquet: write report/items.parquet and
    the model's error on an agent outside the panel, report/items.json."""
    version = open_version(datasets, name)
    spec = version.spec
    if spec.adaptive is None:
        raise PipelineError(f"{name} is not an adaptive game's pool: it has no item parameters")
    levels, panel = version.levels().sort("index"), _panel(version)
    out = _write(version, items_frame(levels, panel))
    agents = sorted(set(panel["agent"].to_list()))  # the wide panel's columns, in its order
    error = model_error(_wide_panel(levels, panel), _features(levels), levels["tier"].to_numpy(),
                        spec.tier_shares(), agents=agents, episodes=spec.adaptive.episodes)
    with private_writes(is_hidden(version.manifest)):
        write_text(json.dumps(_fit_record(error), indent=2) + "\n",
                   version.report_dir / ITEMS_FIT_FILE)
    return out


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
    kept, pooled = fitted_episodes(episodes, name, version.folder, levels["index"].to_list())
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


def model_sd(folder: Path) -> float:
    """The model's error on an agent outside the panel (report/items.json's ``model_sd``),
    for ``equated_success(..., model_sd=)``; refused when the pool was never calibrated."""
    path = folder / "report" / ITEMS_FIT_FILE
    try:
        return float(json.loads(path.read_text(encoding="utf-8"))["model_sd"])
    except FileNotFoundError:
        raise PipelineError(f"{folder.name} has no report/{ITEMS_FIT_FILE}: run "
                            f"`sokoforge panel {folder.name}` again") from None
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise PipelineError(f"{path}: not a readable item fit ({e})") from None
