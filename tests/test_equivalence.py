"""The equivalence verdict on hand-made tables: the allowed planner gap and slot mismatches."""

from __future__ import annotations

import polars as pl
import pytest

from pipeline.scores.equivalence import Equivalence, allowed_gap, compare


@pytest.mark.parametrize(("levels", "gap"), [(100, 3), (8, 1), (1, 1), (34, 2), (200, 6)])
def test_allowed_gap_is_three_per_hundred_rounded_up(levels, gap):
    assert allowed_gap(levels) == gap


def _table(n: int, solved: int, grade: int = 2, crates: int = 2, moves: int = 10,
           difficulty: float = 0.3) -> pl.DataFrame:
    """``n`` levels of one tier, slots 0..n-1, the first ``solved`` solved by the planner."""
    return pl.DataFrame({
        "index": list(range(n)), "tier": [0] * n, "slot": list(range(n)),
        "n_crates": [crates] * n, "optimal_moves": [moves] * n,
        "difficulty": [difficulty] * n, "grade": [grade] * n,
        "planner_solved": [i < solved for i in range(n)]})


def test_a_planner_gap_of_three_in_a_hundred_is_accepted_and_four_refused():
    assert compare("old", _table(100, 70), "new", _table(100, 73)).accepted
    refused = compare("old", _table(100, 70), "new", _table(100, 74))
    assert not refused.accepted
    assert refused.reasons() == ["the reference planner solves 74/100 of new and 70/100 of old:"
                                 " a gap of 4, more than the allowed 3"]


def test_a_slot_with_another_grade_or_crate_count_is_refused_by_name():
    old = _table(4, 2)
    new = _table(4, 2).with_columns(
        pl.when(pl.col("slot") == 1).then(3).otherwise(pl.col("grade")).alias("grade"),
        pl.when(pl.col("slot") == 3).then(1).otherwise(pl.col("n_crates")).alias("n_crates"))
    verdict = compare("old", old, "new", new)
    assert not verdict.accepted
    assert verdict.reasons() == ["tier 0 slot 1: grade 2 in old, 3 in new",
                                 "tier 0 slot 3: crates 2 in old, 1 in new"]


def test_slots_are_paired_by_tier_and_slot_not_by_play_order():
    old = _table(3, 3).with_columns(pl.Series("optimal_moves", [8, 10, 12]))
    # The new set plays slot 2 first: its index order differs, its slots do not.
    new = old.with_columns(pl.Series("index", [2, 0, 1]),
                           pl.Series("optimal_moves", [8, 11, 12]))
    verdict = compare("old", old, "new", new)
    assert verdict.largest["optimal_moves"] == {
        "tier": 0, "slot": 1, "prev_index": 1, "new_index": 0, "prev": 10, "new": 11,
        "difference": 1}
    assert verdict.tiers[0]["new_mean_optimum"] == pytest.approx(31 / 3)


def test_versions_without_the_same_slots_cannot_be_compared():
    with pytest.raises(ValueError, match="same tiers and slots"):
        compare("old", _table(3, 1), "new", _table(4, 1))


def test_the_verdict_survives_its_json_form():
    verdict = compare("old", _table(10, 4), "new", _table(10, 5, difficulty=0.31))
    again = Equivalence.from_dict(verdict.to_dict())
    assert again == verdict and again.lines() == verdict.lines()
