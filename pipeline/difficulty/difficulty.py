"""The calibrated difficulty model: grade features in, predicted compute_to_solve out.

``compute_to_solve`` is the log2 per-step budget in dynamics calls at which the reference
planner solves a level half the time (see ``pipeline.difficulty.compute_curve``). A ridge regression
on grade features predicts it for every candidate without a planner run; ``difficulty`` (the
chance of failing at the rule's 256 calls per step) and ``grade`` follow from it through the
shared-slope curve and fixed cut points. The coefficients live in
``pipeline/specs/difficulty.json`` (``sokoforge calibrate``).
"""

from __future__ import annotations

__all__ = [
    "DifficultyModel", "FEATURES", "GRADES", "MODEL_FORMAT", "MODEL_PATH", "TRANSFORMS", "UNIT",
    "load_model", "save_model", "score_levels", "scores_from_compute", "transformed",
]

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from pipeline.difficulty.compute_curve import (
    GRADE_BUDGETS,
    HIGHEST,
    LOWEST,
    compute_grade,
    failure_at_rule,
)

MODEL_PATH = Path(__file__).resolve().parent.parent / "specs" / "difficulty.json"
MODEL_FORMAT = 3  # 3: compute_to_solve in dynamics calls per step (2 counted expansions)
UNIT = "dynamics calls per step"
TRANSFORMS: dict[str, Callable[[np.ndarray], np.ndarray]] = {
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
    """Feature transforms, standardisation and regression coefficients of compute_to_solve,
    with the curves' shared slope (log2 budget units)."""

    columns: tuple[str, ...]
    transforms: tuple[str, ...]
    means: np.ndarray
    scales: np.ndarray
    weights: np.ndarray
    intercept: float
    slope: float
    info: dict[str, Any]

    def design(self, table: Any) -> np.ndarray:
        """The standardised design matrix of ``table`` (a polars frame or a dict of arrays)."""
        return (transformed(table, self.columns, self.transforms) - self.means) / self.scales

    def compute_to_solve(self, table: Any) -> np.ndarray:
        """Predicted log2 budget at which the planner solves each level half the time."""
        return np.clip(self.intercept + self.design(table) @ self.weights, LOWEST, HIGHEST)

    def difficulty(self, compute: np.ndarray) -> np.ndarray:
        """The chance of failing at the rule's budget, from the curve at ``compute``."""
        return failure_at_rule(compute, self.slope)

    @property
    def grade_cuts(self) -> tuple[float, ...]:
        """The grade cut points in difficulty: the curve's chance of failing at 256 calls for a
        compute_to_solve at each budget of GRADE_BUDGETS (increasing, as grades are)."""
        return tuple(float(d) for d in self.difficulty(np.log2(np.array(GRADE_BUDGETS,
                                                                        dtype=np.float64))))

    def to_json(self) -> dict[str, Any]:
        features = [
            {"column": c, "transform": t, "mean": float(m), "scale": float(s), "weight": float(w)}
            for c, t, m, s, w in zip(self.columns, self.transforms, self.means, self.scales,
                                     self.weights, strict=True)
        ]
        return {"format": MODEL_FORMAT, "model": "ridge regression of compute_to_solve",
                "intercept": self.intercept, "features": features, "slope": self.slope,
                "grade_budgets": list(GRADE_BUDGETS), **self.info}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> DifficultyModel:
        if data.get("format") != MODEL_FORMAT:
            raise ValueError(f"difficulty model: format {data.get('format')!r}, expected "
                             f"{MODEL_FORMAT} (refit with `sokoforge calibrate`)")
        feats = data["features"]
        for f in feats:
            if f["transform"] not in TRANSFORMS:
                raise ValueError(f"difficulty model: unknown transform {f['transform']!r}")
        if list(data.get("grade_budgets", [])) != list(GRADE_BUDGETS):
            raise ValueError(f"difficulty model: grade budgets {data.get('grade_budgets')} "
                             f"are not the fixed {list(GRADE_BUDGETS)}")
        slope = float(data["slope"])
        if not slope > 0:
            raise ValueError(f"difficulty model: the curves' slope must be > 0, not {slope}")
        info = {k: v for k, v in data.items()
                if k not in ("format", "model", "intercept", "features", "slope",
                             "grade_budgets")}
        return cls(
            columns=tuple(f["column"] for f in feats),
            transforms=tuple(f["transform"] for f in feats),
            means=np.array([f["mean"] for f in feats], dtype=np.float64),
            scales=np.array([f["scale"] for f in feats], dtype=np.float64),
            weights=np.array([f["weight"] for f in feats], dtype=np.float64),
            intercept=float(data["intercept"]),
            slope=slope,
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


def scores_from_compute(compute: np.ndarray, model: DifficultyModel | None = None
                        ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(compute_to_solve float32, difficulty float32, grade int8)`` from compute values.

    Difficulty and grade come from the stored float32 value, so that anyone recomputing
    them from the column gets the same figures.
    """
    model = load_model() if model is None else model
    c = np.asarray(compute, dtype=np.float32)
    d = model.difficulty(c.astype(np.float64)).astype(np.float32)
    return c, d, compute_grade(c.astype(np.float64))


def score_levels(table: Any, model: DifficultyModel | None = None
                 ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(compute_to_solve, difficulty, grade)`` predicted for every row of a graded table;
    no planner run."""
    model = load_model() if model is None else model
    return scores_from_compute(model.compute_to_solve(table), model)
