import numpy as np
import pytest

from pipeline.difficulty.logistic import fit_logistic, log_loss, sigmoid
from pipeline.difficulty.rank_metrics import average_ranks, roc_auc, spearman


def test_auc_of_a_textbook_example_is_three_quarters():
    assert roc_auc(np.array([0.1, 0.4, 0.35, 0.8]), np.array([0, 0, 1, 1])) == 0.75


def test_auc_counts_ties_as_half_and_matches_pairwise_count():
    rng = np.random.default_rng(3)
    scores = rng.integers(0, 5, size=60).astype(float)
    labels = rng.integers(0, 2, size=60).astype(bool)
    pos, neg = scores[labels], scores[~labels]
    pairwise = ((pos[:, None] > neg[None, :]).sum()
                + 0.5 * (pos[:, None] == neg[None, :]).sum()) / (pos.size * neg.size)
    assert roc_auc(scores, labels) == pytest.approx(pairwise, abs=1e-12)
    assert roc_auc(np.ones(10), np.arange(10) % 2) == 0.5


def test_auc_is_one_for_perfect_and_zero_for_reversed_ranking():
    labels = np.array([0, 0, 0, 1, 1])
    assert roc_auc(np.arange(5.0), labels) == 1.0
    assert roc_auc(-np.arange(5.0), labels) == 0.0


def test_auc_refuses_a_single_class():
    with pytest.raises(ValueError, match="positive and one negative"):
        roc_auc(np.arange(3.0), np.ones(3))


def test_average_ranks_share_ties():
    assert average_ranks(np.array([10, 20, 20, 5])).tolist() == [2.0, 3.5, 3.5, 1.0]


def test_spearman_of_monotone_maps_and_a_worked_example_with_ties():
    x = np.array([1.0, 2, 3, 4, 5])
    assert spearman(x, np.exp(x)) == pytest.approx(1.0)
    assert spearman(x, -x**3) == pytest.approx(-1.0)
    # ranks of y: [1, 2.5, 2.5, 4, 5]; Pearson of ranks computed by hand = 0.9746794
    assert spearman(x, np.array([1.0, 7, 7, 8, 9])) == pytest.approx(0.9746794, abs=1e-6)


def test_logistic_fit_recovers_known_coefficients():
    rng = np.random.default_rng(7)
    x = rng.normal(size=(20000, 2))
    y = rng.random(20000) < sigmoid(-0.5 + x @ np.array([1.5, -2.0]))
    b0, w = fit_logistic(x, y, l2=0.0)
    assert b0 == pytest.approx(-0.5, abs=0.08)
    assert w == pytest.approx([1.5, -2.0], abs=0.1)


def test_logistic_fit_is_the_penalised_optimum():
    rng = np.random.default_rng(11)
    x = rng.normal(size=(300, 3))
    y = rng.random(300) < 0.4
    l2 = 0.05
    b0, w = fit_logistic(x, y, l2=l2)
    p = sigmoid(b0 + x @ w)
    # stationarity: gradient of the log-likelihood equals the L2 pull (none on the intercept)
    assert np.sum(y - p) == pytest.approx(0.0, abs=1e-8)
    assert x.T @ (y - p) == pytest.approx(l2 * 300 * w, abs=1e-8)
    assert log_loss(p, y) < log_loss(np.full(300, y.mean()), y) + 1e-12
