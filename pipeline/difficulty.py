"""The calibrated difficulty model: grade features in, planner-failure probability and grade out.

The coefficients live in ``pipeline/specs/difficulty.json`` (written by ``sokoforge calibrate``)
so every version is scored by the same fixed model and grades mean the same everywhere.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from pipeline.logistic import sigmoid

MODEL_PATH = Path(__file__).resolve().parent / "specs" / "difficulty.json"
TRANSFORMS = {
    "identity": lambda v: v,
    "log1p": np.log1p,
}
# Grade features the model may use, with the transform applied before standardising.
FEATURES: tuple[tuple[str, str], ...] = (
    ("n_crates", "identity"),
    ("optimal_moves", "log1p"),
    ("optimal_pushes", "log1p"),
    ("detour_pushes", "log1p"),
    ("box_changes", "log1p"),
    ("reachable_states", "log1p"),
    ("dead_fraction", "identity"),
    ("first_push_traps", "log1p"),
    ("optimal_solutions", "log1p"),
    ("branching_factor", "identity"),
)
GRADES = 5


@dataclass(frozen=True)
class DifficultyModel:
    """Feature transforms, standardisation, coefficients and grade cut points of the model."""

    columns: tuple[str, ...]
    transforms: tuple[str, ...]
    means: np.ndarray
    scales: np.ndarray
    weights: np.ndarray
    intercept: float
    grade_cuts: tuple[float, ...]
    info: dict[str, Any]

    def design(self, table: Any) -> np.ndarray:
        """The standardised design matrix of ``table`` (a polars frame or a dict of arrays)."""
        return (transformed(table, self.columns, self.transforms) - self.means) / self.scales

    def difficulty(self, table: Any) -> np.ndarray:
        """Predicted probability that the reference planner fails each level."""
        return sigmoid(self.intercept + self.design(table) @ self.weights)

    def grade(self, difficulty: np.ndarray) -> np.ndarray:
        """Grade 1 (easiest) to 5 from the fixed cut points on ``difficulty``."""
        cuts = np.asarray(self.grade_cuts, dtype=np.float64)
        return (1 + np.searchsorted(cuts, np.asarray(difficulty), side="right")).astype(np.int8)

    def to_json(self) -> dict[str, Any]:
        features = [
            {"column": c, "transform": t, "mean": float(m), "scale": float(s), "weight": float(w)}
            for c, t, m, s, w in zip(self.columns, self.transforms, self.means, self.scales,
                                     self.weights, strict=True)
        ]
        return {"format": 1, "model": "logistic", "intercept": self.intercept,
                "features": features, "grade_cuts": list(self.grade_cuts), **self.info}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> DifficultyModel:
        feats = data["features"]
        for f in feats:
            if f["transform"] not in TRANSFORMS:
                raise ValueError(f"difficulty model: unknown transform {f['transform']!r}")
        cuts = tuple(float(c) for c in data["grade_cuts"])
        if len(cuts) != GRADES - 1 or list(cuts) != sorted(cuts):
            raise ValueError(f"difficulty model: need {GRADES - 1} increasing grade cut points")
        info = {k: v for k, v in data.items()
                if k not in ("format", "model", "intercept", "features", "grade_cuts")}
        return cls(
            columns=tuple(f["column"] for f in feats),
            transforms=tuple(f["transform"] for f in feats),
            means=np.array([f["mean"] for f in feats], dtype=np.float64),
            scales=np.array([f["scale"] for f in feats], dtype=np.float64),
            weights=np.array([f["weight"] for f in feats], dtype=np.float64),
            intercept=float(data["intercept"]),
            grade_cuts=cuts,
            info=info,
        )


def transformed(table: Any, columns: tuple[str, ...], transforms: tuple[str, ...]) -> np.ndarray:
    """Columns of ``table`` as float64, each through its named transform."""
    names = set(table.columns if hasattr(table, "columns") else table.keys())
    missing = [c for c in columns if c not in names]
    if missing:
        raise KeyError(f"difficulty needs the grade columns {missing}")
    cols = [TRANSFORMS[t](np.asarray(table[c], dtype=np.float64))
            for c, t in zip(columns, transforms, strict=True)]
    return np.column_stack(cols) if cols else np.zeros((0, 0))


def load_model(path: Path = MODEL_PATH) -> DifficultyModel:
    """Read the calibrated model (default: the one shipped in ``pipeline/specs``)."""
    with open(path, encoding="utf-8") as f:
        return DifficultyModel.from_json(json.load(f))


def save_model(model: DifficultyModel, path: Path = MODEL_PATH) -> None:
    """Write the model as stable, human-readable JSON."""
    path.write_text(json.dumps(model.to_json(), indent=2, sort_keys=False) + "\n",
                    encoding="utf-8")


def score_levels(table: Any, model: DifficultyModel | None = None) -> tuple[np.ndarray,
                                                                            np.ndarray]:
    """``(difficulty float32, grade int8)`` for every row of a graded table; no planner run."""
    model = load_model() if model is None else model
    d = model.difficulty(table)
    return d.astype(np.float32), model.grade(d.astype(np.float32))
