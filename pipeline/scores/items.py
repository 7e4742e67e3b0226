"""A pool's item parameters: the panel's outcomes and the grade features, calibrated, written.

``sokoforge panel POOL`` plays the panel (report/panel.parquet), then writes here
``report/items.parquet``: one row per level (index, tier, discrimination, difficulty,
prior_difficulty), fitted by ``pipeline.scores.adaptive.calibrate`` on the panel's outcomes
and the difficulty model's grade features (``pipeline.difficulty.difficulty.FEATURES``);
and ``report/items.json``: the model's error on an agent outside the panel
(``pipeline.scores.adaptive.model_error``), which widens every equated interval.
"""

from __future__ import annotations

__all__ = ["ITEMS_FILE", "ITEMS_FIT_FILE", "is_pool", "items_frame", "model_sd", "read_items",
           "write_items"]

import json
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from pipeline.difficulty.difficulty import load_model, transformed
from pipeline.difficulty.panel import PANEL_FILE
from pipeline.errors import PipelineError
from pipeline.scores.adaptive import Calibration, ModelError, calibrate, model_error
from pipeline.versions.hidden_files import is_hidden, private_writes
from pipeline.versions.tables import read_parquet, write_parquet, write_text
from pipeline.versions.version import open_version

ITEMS_FILE = "items.parquet"  # in a pool's report/
ITEMS_FIT_FILE = "items.json"  # ... and how well they fit an agent outside the panel


def is_pool(manifest: dict[str, Any]) -> bool:
    """Whether a version's manifest is an adaptive game's pool (its spec has ``adaptive``)."""
    return "adaptive" in (manifest.get("spec") or {})


def _panel_matrix(levels: pl.DataFrame, panel: pl.DataFrame) -> tuple[np.ndarray, list[str]]:
    """The panel's outcomes as levels x agents booleans (levels by index) and the agents."""
    wide = (panel.select("index", "agent", "solved").sort("index", "agent")
            .pivot(on="agent", index="index", values="solved").sort("index"))
    if wide["index"].to_list() != levels["index"].to_list():
        raise PipelineError("the panel's levels are not the version's: play the panel again")
    agents = [c for c in wide.columns if c != "index"]
    return wide.drop("index").to_numpy().astype(bool), agents


def _features(levels: pl.DataFrame) -> np.ndarray:
    model = load_model()
    return transformed(levels, model.columns, model.transforms)


def items_frame(levels: pl.DataFrame, panel: pl.DataFrame) -> pl.DataFrame:
    """The item parameters of ``levels`` (index, tier and the grade features) from the long
    ``panel`` table of the same levels (index, agent, solved)."""
    levels = levels.sort("index")
    solved, _ = _panel_matrix(levels, panel)
    return _frame(levels, calibrate(solved, _features(levels), levels["tier"].to_numpy()))


def _frame(levels: pl.DataFrame, fit: Calibration) -> pl.DataFrame:
    return pl.DataFrame({
        "index": levels["index"].cast(pl.Int16),
        "tier": levels["tier"].cast(pl.Int8),
        "discrimination": pl.Series(np.round(fit.discrimination, 6), dtype=pl.Float64),
        "difficulty": pl.Series(np.round(fit.difficulty, 6), dtype=pl.Float64),
        "prior_difficulty": pl.Series(np.round(fit.prior_difficulty, 6), dtype=pl.Float64),
    })


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
    panel_path = version.report_dir / PANEL_FILE
    if not panel_path.is_file():
        raise PipelineError(f"{name} has no {PANEL_FILE}: run `sokoforge panel {name}` first")
    spec = version.spec
    if spec.adaptive is None:
        raise PipelineError(f"{name} is not an adaptive game's pool: it has no item parameters")
    levels = version.levels().sort("index")
    solved, agents = _panel_matrix(levels, read_parquet(panel_path))
    features, tiers = _features(levels), levels["tier"].to_numpy()
    frame = _frame(levels, calibrate(solved, features, tiers))
    error = model_error(solved, features, tiers, spec.tier_shares(), agents=agents,
                        episodes=spec.adaptive.episodes)
    out = version.report_dir / ITEMS_FILE
    with private_writes(is_hidden(version.manifest)):
        write_parquet(frame, out)
        write_text(json.dumps(_fit_record(error), indent=2) + "\n",
                   version.report_dir / ITEMS_FIT_FILE)
    return out


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
