"""L2-regularised logistic regression fitted by Newton's method (IRLS) in numpy.

The difficulty model is small (a handful of features, a few thousand levels), so an exact
Newton fit converges in a few iterations and is reproducible to the last bit on one machine.
"""

from __future__ import annotations

__all__ = ["fit_logistic", "log_loss", "sigmoid"]

import numpy as np


def sigmoid(z: np.ndarray) -> np.ndarray:
    """The logistic function, stable for large |z|."""
    z = np.asarray(z, dtype=np.float64)
    out = np.empty_like(z)
    pos = z >= 0
    out[pos] = 1.0 / (1.0 + np.exp(-z[pos]))
    ez = np.exp(z[~pos])
    out[~pos] = ez / (1.0 + ez)
    return out


def fit_logistic(x: np.ndarray, y: np.ndarray, l2: float = 1e-2, max_iter: int = 100,
                 tol: float = 1e-10) -> tuple[float, np.ndarray]:
    """Fit P(y=1) = sigmoid(b0 + x @ w) minimising log loss + l2/2 * |w|^2 (intercept free).

    Returns ``(intercept, weights)``. ``x`` should be standardised so ``l2`` means the same for
    every column.
    """
    x = np.asarray(x, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    n, k = x.shape
    design = np.hstack([np.ones((n, 1)), x])
    penalty = np.full(k + 1, l2 * n)
    penalty[0] = 0.0
    beta = np.zeros(k + 1)
    for _ in range(max_iter):
        p = sigmoid(design @ beta)
        grad = design.T @ (y - p) - penalty * beta
        w = np.clip(p * (1.0 - p), 1e-12, None)
        hess = (design * w[:, None]).T @ design + np.diag(penalty)
        delta = np.linalg.solve(hess, grad)
        beta += delta
        if np.max(np.abs(delta)) < tol:
            break
    return float(beta[0]), beta[1:].copy()


def log_loss(p: np.ndarray, y: np.ndarray) -> float:
    """Mean negative log-likelihood of labels ``y`` under probabilities ``p``."""
    p = np.clip(np.asarray(p, dtype=np.float64), 1e-15, 1 - 1e-15)
    y = np.asarray(y, dtype=np.float64)
    return float(-np.mean(y * np.log(p) + (1 - y) * np.log(1 - p)))
