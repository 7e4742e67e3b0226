"""How precise a score is: interval coverage on simulated agents, paired tests, expected moves."""

from __future__ import annotations

import numpy as np
import pytest

from pipeline.precision import (
    expected_move,
    interval_from_counts,
    marks_against_above,
    paired_p_value,
    success_interval,
    with_interval,
)
from pipeline.scores.simulated_agents import LevelPopulation, interval_coverage


def test_interval_covers_a_simulated_agents_true_rate_about_95_percent_at_every_ability():
    coverage = interval_coverage(LevelPopulation(), [-2.5, -1.0, 0.0, 1.0, 2.5], runs=500,
                                 seed=11)
    # 500 draws: the standard error of a share near 0.95 is 0.01
    assert all(0.92 <= c <= 0.975 for c in coverage.values()), coverage
    assert 0.935 <= float(np.mean(list(coverage.values()))) <= 0.965, coverage


def test_interval_holds_on_a_population_of_very_unequal_tiers_and_a_small_game():
    wide = interval_coverage(LevelPopulation(tier_means=(-3, -1, 1, 3), spread=0.5),
                             [-1.0, 1.0], runs=400, seed=5)
    small = interval_coverage(LevelPopulation(tiers=(10, 10), tier_means=(-1, 1)),
                              [0.0], runs=400, seed=6)
    assert all(0.915 <= c <= 0.98 for c in {**wide, **small}.values()), (wide, small)


def test_tiers_narrow_the_interval_when_they_differ_and_it_stays_inside_0_1():
    solved = np.array([1] * 25 + [1] * 20 + [0] * 5 + [1] * 5 + [0] * 25 + [0] * 20, dtype=bool)
    tiers = np.repeat([0, 1, 2, 3], [25, 25, 30, 20])
    lo, hi = success_interval(solved, tiers)
    plo, phi = interval_from_counts(int(solved.sum()), solved.size)
    assert lo < solved.mean() < hi and hi - lo < phi - plo
    for outcome in (np.ones(100, bool), np.zeros(100, bool)):
        lo, hi = success_interval(outcome, tiers)
        assert 0.0 <= lo < hi <= 1.0 and lo <= outcome.mean() <= hi
        assert hi - lo > 0.01  # never a point, even when every level went the same way


def test_a_hundred_levels_give_about_plus_minus_nine_points_at_a_half():
    lo, hi = interval_from_counts(50, 100)
    assert hi - lo == pytest.approx(0.19, abs=0.01)


def test_a_stored_score_without_an_interval_gets_one_from_its_counts():
    score = with_interval({"episodes": 100, "solved": 50, "success_rate": 0.5})
    assert score["success_interval"] == interval_from_counts(50, 100)
    assert with_interval({**score, "success_interval": [0, 1]})["success_interval"] == [0, 1]


def test_paired_p_value_is_the_exact_mcnemar_over_discordant_levels():
    a = np.array([1, 1, 1, 1, 1, 1, 0, 0], bool)
    assert paired_p_value(a, np.zeros(8, bool)) == pytest.approx(2 / 64)
    b = np.array([0, 1, 1, 1, 1, 1, 1, 0], bool)  # one level each way
    assert paired_p_value(a, b) == 1.0
    c = np.array([0, 0, 0, 0, 0, 1, 1, 0], bool)  # five one way, one the other
    assert paired_p_value(a, c) == pytest.approx(2 * 7 / 64)
    with pytest.raises(ValueError):
        paired_p_value(a, a[:4])


def test_marks_tell_entries_apart_only_where_the_levels_do():
    rng = np.random.default_rng(3)
    strong = rng.random(100) < 0.8
    twin = strong.copy()
    twin[:3] = ~twin[:3]  # three levels differ: no evidence
    weak = rng.random(100) < 0.3  # far below: evident
    marks = marks_against_above([strong, twin, weak, None])
    assert marks[0] is None and marks[3] is None
    assert marks[1].indistinguishable and marks[1].p_value > 0.5
    assert not marks[2].indistinguishable and marks[2].p_value < 0.001


def test_marks_are_paired_not_overlapping_intervals():
    """Two agents whose intervals overlap widely are told apart when one solves every level
    the other does and more: only the paired test sees that."""
    base = np.zeros(100, bool)
    base[:50] = True
    better = base.copy()
    better[50:60] = True
    lo_better, _ = success_interval(better)
    _, hi_base = success_interval(base)
    assert lo_better < hi_base  # the intervals overlap
    assert not marks_against_above([better, base])[1].indistinguishable


def test_expected_move_between_two_draws_matches_the_binomial_model():
    move = expected_move([100], [0.5])
    # |X - Y| for two independent Bin(100, 0.5): sd sqrt(50), mean sd * sqrt(2 / pi)
    assert move.mean_abs == pytest.approx(np.sqrt(50) * np.sqrt(2 / np.pi), abs=0.05)
    assert move.lo == -move.hi and 12 <= move.hi <= 15
    assert expected_move([100], [1.0]).mean_abs == 0.0
    # tiers of unequal rates move less than one pool at the same overall rate
    tiered = expected_move([25, 25, 30, 20], [0.95, 0.7, 0.4, 0.1])
    assert tiered.mean_abs < expected_move([100], [0.5525]).mean_abs
