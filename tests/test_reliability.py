"""The reliability curve of the difficulty model: deciles, Brier score, and the stored curve of
the held-out calibration pool, which must come back the same when the pool is redrawn."""

import numpy as np
import pytest

from pipeline.difficulty.reliability import (
    POOL_CURVE_PATH,
    brier_score,
    curve,
    load_pool_curve,
    reliability_bins,
    wilson_interval,
)


def test_brier_score_is_the_mean_squared_error_of_the_probabilities():
    assert brier_score(np.array([0.0, 1.0]), np.array([False, True])) == 0.0
    assert brier_score(np.array([0.2, 0.9, 0.5]), np.array([False, True, True])) == \
        pytest.approx((0.04 + 0.01 + 0.25) / 3)


def test_bins_cut_sorted_predictions_into_equal_groups_with_their_failure_rate():
    predicted = np.array([0.9, 0.1, 0.5, 0.3, 0.7, 0.2, 0.8, 0.4, 0.6, 0.0])
    failed = predicted > 0.45
    bins = reliability_bins(predicted, failed, bins=5)
    assert [b["levels"] for b in bins] == [2] * 5
    assert [b["predicted_mean"] for b in bins] == [0.05, 0.25, 0.45, 0.65, 0.85]
    assert [b["observed_failure_rate"] for b in bins] == [0.0, 0.0, 0.5, 1.0, 1.0]
    # fewer levels than bins: one bin a level
    assert len(reliability_bins(predicted[:3], failed[:3])) == 3


def test_curve_sets_the_brier_score_beside_the_base_rate():
    rng = np.random.default_rng(1)
    p = rng.uniform(size=2000)
    outcome = rng.uniform(size=2000) < p  # perfectly calibrated by construction
    c = curve(p, outcome)
    assert c["levels"] == 2000 and c["failures"] == int(outcome.sum())
    assert c["brier"] < c["brier_base_rate"]
    assert [b["levels"] for b in c["bins"]] == [200] * 10
    for b in c["bins"]:  # calibrated: each decile fails about as often as predicted
        assert abs(b["predicted_mean"] - b["observed_failure_rate"]) < 0.1


def test_wilson_interval_holds_the_rate_and_stays_in_zero_one():
    assert wilson_interval(0, 10)[0] == 0.0 and 0 < wilson_interval(0, 10)[1] < 0.35
    lo, hi = wilson_interval(5, 10)
    assert lo < 0.5 < hi and hi - lo < 0.6
    assert wilson_interval(10, 10)[1] == 1.0


def test_the_stored_pool_curve_belongs_to_the_shipped_model():
    from pipeline.difficulty.difficulty import load_model

    stored = load_pool_curve()
    model = load_model()
    assert stored is not None, f"{POOL_CURVE_PATH} is missing: run scripts/pool_curve.py"
    assert stored["model_fit_date"] == model.info["fit_date"]
    assert stored["levels"] == model.info["held_out"]["levels"]
    assert stored["failures"] == model.info["held_out"]["planner_failures"]
    assert sum(b["levels"] for b in stored["bins"]) == stored["levels"]


@pytest.mark.slow
def test_the_stored_pool_curve_is_what_redrawing_the_pool_gives(tmp_path):
    """The committed curve is data made by scripts/pool_curve.py; redrawing the held-out pool
    from its recorded seed and replaying it must give it again, figure for figure."""
    from pipeline.calibrate import held_out_pool, pool_curve
    from pipeline.difficulty.difficulty import load_model
    from pipeline.spec import load_spec
    from pipeline.workers import Workers

    model = load_model()
    held = held_out_pool(model, load_spec(model.info["pool"]["template"]), tmp_path,
                         Workers(jobs=2, show_progress=False))
    assert pool_curve(model, held) == load_pool_curve()
