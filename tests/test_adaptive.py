"""The adaptive scorecard's statistics: calibration, ability, next levels, padding, equating."""

from __future__ import annotations

import numpy as np
import pytest

from pipeline.difficulty.logistic import sigmoid
from pipeline.scores import adaptive as ad
from pipeline.scores.simulated_agents import LevelPopulation, play

SHARES = {0: 0.25, 1: 0.25, 2: 0.3, 3: 0.2}


@pytest.fixture(scope="module")
def pool():
    """A simulated pool of 200 levels in the standard tiers' shares, its true (a, b), the
    twelve-agent panel's outcomes and a noisy difficulty feature, and the calibration."""
    population = LevelPopulation(tiers=(50, 50, 60, 40))
    rng = np.random.default_rng(3)
    b, a = population.draw(rng)
    solved = np.stack([play(t, b, a, rng) for t in np.linspace(-2.5, 2.5, 12)], axis=1)
    feature = (b + 0.5 * rng.standard_normal(b.size))[:, None]
    tiers = population.tier_of_level
    return a, b, tiers, ad.calibrate(solved, feature, tiers)


def test_calibration_recovers_the_difficulties_from_the_panel_and_the_features(pool):
    _, b, _, fit = pool
    assert np.corrcoef(fit.difficulty, b)[0, 1] > 0.85
    assert np.all(fit.discrimination > 0)
    truth = np.linspace(-2.5, 2.5, 12)
    assert np.corrcoef(fit.panel_ability, truth)[0, 1] > 0.98  # the panel's abilities kept
    assert fit.difficulty_sd >= 0.3


def test_the_features_place_the_levels_the_panel_all_solved():
    rng = np.random.default_rng(0)
    feature = rng.standard_normal(60)
    solved = np.ones((60, 12), dtype=bool)
    solved[:30, :6] = feature[:30, None] < 0  # the weak agents fail where it is high
    fit = ad.calibrate(solved, feature[:, None], np.zeros(60, dtype=int))
    easy = fit.difficulty[30:]  # solved by all: told apart by the feature alone
    assert np.corrcoef(easy, feature[30:])[0, 1] > 0.9


def test_with_no_episode_the_ability_is_the_prior_and_evidence_moves_it():
    a, b = np.ones(3), np.zeros(3)
    none = ad.estimate(a, b, np.array([], dtype=int), np.array([], dtype=bool))
    assert abs(none.theta) < 1e-6 and none.sd == pytest.approx(ad.PRIOR_SD, abs=0.01)
    up = ad.estimate(a, b, np.arange(3), np.ones(3, dtype=bool))
    down = ad.estimate(a, b, np.arange(3), np.zeros(3, dtype=bool))
    assert down.theta < 0 < up.theta and up.sd < none.sd
    assert up.low < up.theta < up.high


def test_a_level_informs_most_where_its_difficulty_is():
    info = ad.information(0.5, np.array([1.0, 1.0, 2.0]), np.array([0.5, 2.0, 0.5]))
    assert info[0] == pytest.approx(0.25) and info[1] < info[0] < info[2]


def test_a_block_is_new_levels_of_the_tier_furthest_below_its_share(pool):
    _, _, tiers, fit = pool
    rng = np.random.default_rng(1)
    shown = np.flatnonzero(tiers == 0)[:3]
    block = ad.choose_block(0.0, fit.discrimination, fit.difficulty, tiers, shown, SHARES,
                            parallel=4, rng=rng)
    assert len(set(block)) == 4 and not set(block) & set(shown.tolist())
    assert 0 not in tiers[block].tolist()  # tier 0 is over its share already
    best = ad.choose_block(0.0, fit.discrimination, fit.difficulty, tiers, shown, SHARES,
                           parallel=1, rng=rng, top=1)[0]
    info = ad.information(0.0, fit.discrimination, fit.difficulty)
    same_tier = np.flatnonzero(tiers == tiers[best])
    assert info[best] == info[same_tier].max()


def test_a_session_covers_the_tiers_in_their_shares(pool):
    _, _, tiers, fit = pool
    rng = np.random.default_rng(2)
    shown: list[int] = []
    for _ in range(20):
        shown += ad.choose_block(1.0, fit.discrimination, fit.difficulty, tiers,
                                 np.array(shown, dtype=int), SHARES, parallel=1, rng=rng)
    assert np.bincount(tiers[shown]).tolist() == [5, 5, 6, 4]


def test_over_exposed_levels_are_passed_over_once_enough_sessions_are_counted(pool):
    _, _, tiers, fit = pool
    counts = np.zeros(tiers.size, dtype=int)
    assert ad.over_exposed(counts, 3) is None  # too few sessions for a share of 25%
    counts[:40] = 1  # tier 0's first 40 levels in one of four sessions already
    blocked = ad.over_exposed(counts, 4)
    assert blocked is not None and blocked[:40].all() and not blocked[40:].any()
    picks = ad.choose_block(0.0, fit.discrimination, fit.difficulty, tiers,
                            np.array([], dtype=int), SHARES, parallel=1,
                            rng=np.random.default_rng(0), blocked=blocked)
    assert picks[0] >= 40


def test_no_level_is_shown_in_more_than_a_quarter_of_twenty_sessions(pool):
    _, _, tiers, fit = pool
    rng = np.random.default_rng(4)
    counts = np.zeros(tiers.size, dtype=int)
    for session in range(20):  # one agent, always the same answers: the worst case
        shown: list[int] = []
        for _ in range(10):
            blocked = ad.over_exposed(counts, session)
            shown += ad.choose_block(0.0, fit.discrimination, fit.difficulty, tiers,
                                     np.array(shown, dtype=int), SHARES, parallel=1, rng=rng,
                                     blocked=blocked)
        counts[shown] += 1
    assert counts.max() / 20 <= ad.MAX_EXPOSURE


def test_a_session_closed_early_counts_failures_on_the_easiest_unshown_levels():
    b = np.array([0.0, -1.0, 1.0, -2.0, 2.0, 3.0])
    tiers = np.array([0, 0, 0, 1, 1, 1])
    levels, solved = ad.pad_unplayed(b, tiers, np.array([1]), np.array([True]),
                                     {0: 0.5, 1: 0.5}, 4)
    assert levels.tolist() == [1, 3, 0, 4] and solved.tolist() == [True, False, False, False]
    closed = ad.estimate(np.ones(6), b, levels, solved)
    lucky = ad.estimate(np.ones(6), b, np.array([1]), np.array([True]))
    assert closed.theta < lucky.theta


def test_equated_success_rises_with_ability_and_holds_its_value_inside_its_interval(pool):
    a, b, tiers, _ = pool
    weights = ad.ramp_weights(tiers, SHARES)
    assert weights[tiers == 2].sum() == pytest.approx(0.3)
    values = []
    for theta in (-1.0, 0.0, 1.0):
        sharp = np.exp(-0.5 * ((ad.ABILITY_GRID - theta) / 0.05) ** 2)
        eq = ad.equated_success(a, b, weights, sharp / sharp.sum())
        assert eq.low <= eq.value <= eq.high
        assert eq.value == pytest.approx(float(sigmoid(a * (theta - b)) @ weights), abs=0.01)
        values.append(eq.value)
    assert values == sorted(values)


def test_the_equated_interval_holds_the_levels_sampling_and_the_model_error(pool):
    a, b, tiers, _ = pool
    weights = ad.ramp_weights(tiers, SHARES)
    sharp = np.zeros(ad.ABILITY_GRID.size)
    sharp[np.argmin(np.abs(ad.ABILITY_GRID))] = 1.0  # the ability known exactly: 0
    p = sigmoid(a * (0.0 - b))
    sampling = float(np.sqrt((p * (1 - p)) @ weights ** 2))
    known = ad.equated_success(a, b, weights, sharp)
    assert known.high - known.low == pytest.approx(2 * 1.96 * sampling, rel=0.05)
    unsure = ad.equated_success(a, b, weights, sharp, model_sd=0.03)
    width = 2 * 1.96 * np.hypot(sampling, 0.03)
    assert unsure.high - unsure.low == pytest.approx(width, rel=0.05)
    assert unsure.value == known.value


def test_the_model_error_is_measured_on_agents_left_out_of_the_calibration():
    population = LevelPopulation(tiers=(25, 25, 30, 20))
    rng = np.random.default_rng(5)
    b, a = population.draw(rng)
    tiers = population.tier_of_level
    feature = (b + 0.5 * rng.standard_normal(b.size))[:, None]
    abilities = np.linspace(-2.0, 2.0, 5)
    names = [f"agent {i}" for i in range(5)]
    alike = np.stack([play(t, b, a, rng) for t in abilities], axis=1)
    kept = ad.model_error(alike, feature, tiers, SHARES, agents=names, episodes=15)
    # each agent solving by its own order of the levels: no one scale places them all
    unlike = np.stack([play(t, rng.permutation(b), a, rng) for t in abilities], axis=1)
    broken = ad.model_error(unlike, feature, tiers, SHARES, agents=names, episodes=15)
    assert set(kept.bias) == set(names) and kept.sessions >= 2
    assert kept.sd < 0.05 < broken.sd
