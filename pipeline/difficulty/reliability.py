"""How well predicted difficulty matches the reference planner's observed failures.

Levels are cut into deciles of predicted difficulty; each decile's mean prediction is set
against its observed failure rate (a reliability curve), and the Brier score sums it up.
The held-out calibration pool's curve is computed once per model and stored as data beside
the model (``pipeline/specs/difficulty_pool_curve.json``), since replaying the pool takes
minutes.
"""

from __future__ import annotations

__all__ = [
    "BINS", "POOL_CURVE_PATH", "brier_score", "curve", "load_pool_curve", "reliability_bins",
    "save_pool_curve", "wilson_interval",
]

import json
from pathlib import Path
from typing import Any

import numpy as np

from pipeline.errors import InputError
from pipeline.precision import wilson

POOL_CURVE_PATH = (Path(__file__).resolve().parent.parent / "specs"
                   / "difficulty_pool_curve.json")
BINS = 10


def brier_score(predicted: np.ndarray, failed: np.ndarray) -> float:
    """Mean squared difference between predicted failure probability and the outcome (0/1)."""
    p = np.asarray(predicted, dtype=np.float64)
    y = np.asarray(failed, dtype=np.float64)
    return float(np.mean((p - y) ** 2)) if p.size else float("nan")


def wilson_interval(failures: int, levels: int, z: float = 1.96) -> tuple[float, float]:
    """The Wilson score interval (95 % by default) of a failure rate seen on ``levels``."""
    return wilson(failures / levels if levels else 0.0, levels, z)


def reliability_bins(predicted: np.ndarray, failed: np.ndarray,
                     bins: int = BINS) -> list[dict[str, Any]]:
    """Levels sorted by prediction and cut into ``bins`` near-equal groups (ties kept in
    input order): per group its size, prediction range and mean, and failures observed."""
    p = np.asarray(predicted, dtype=np.float64)
    y = np.asarray(failed, dtype=bool)
    order = np.argsort(p, kind="stable")
    out = []
    for k, part in enumerate(np.array_split(order, min(bins, p.size))):
        out.append({
            "bin": k + 1,
            "levels": int(part.size),
            "predicted_min": round(float(p[part].min()), 4),
            "predicted_max": round(float(p[part].max()), 4),
            "predicted_mean": round(float(p[part].mean()), 4),
            "failures": int(y[part].sum()),
            "observed_failure_rate": round(float(y[part].mean()), 4),
        })
    return out


def curve(predicted: np.ndarray, failed: np.ndarray, bins: int = BINS) -> dict[str, Any]:
    """The reliability bins with the Brier score and the base-rate Brier score beside them."""
    y = np.asarray(failed, dtype=np.float64)
    return {
        "levels": int(y.size),
        "failures": int(y.sum()),
        "brier": round(brier_score(predicted, failed), 4),
        "brier_base_rate": round(brier_score(np.full(y.size, y.mean()), failed), 4)
        if y.size else float("nan"),
        "bins": reliability_bins(predicted, failed, bins),
    }


def load_pool_curve(path: Path = POOL_CURVE_PATH) -> dict[str, Any] | None:
    """The stored calibration-pool curve, or None when none has been computed."""
    if not path.is_file():
        return None
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except (OSError, ValueError) as e:
        raise InputError(f"{path}: not a readable pool curve ({e})") from None


def save_pool_curve(data: dict[str, Any], path: Path = POOL_CURVE_PATH) -> None:
    """Write the pool curve as stable, human-readable JSON."""
    path.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
