"""Matched selection on hand-made tables: the per-slot rules, exclusions, order and refusals."""

from __future__ import annotations

import polars as pl
import pytest

from pipeline.scores.matching import MatchError, PanelRule, match, targets
from pipeline.spec import spec_from_dict

SPEC = spec_from_dict({
    "name": "three", "height": 8, "width": 8, "method": "goal_first",
    "candidates_per_slot": 2, "max_attempts": 10, "budget": {"multiple": 3, "floor": 0},
    "tiers": [{"levels": 3, "crates": 2, "wall_density": 0.1, "band_start": [4, 8],
               "band_end": [8, 12]}],
})  # bands: slot 0 4-8, slot 1 6-10, slot 2 8-12


def _prev(rows):
    """PREV levels: (optimal_moves, grade, compute_to_solve) per slot of the one tier."""
    return targets(pl.DataFrame(
        [(i, 0, 2, m, g, d) for i, (m, g, d) in enumerate(rows)],
        schema={"index": pl.Int16, "tier": pl.Int8, "n_crates": pl.Int8,
                "optimal_moves": pl.Int16, "grade": pl.Int8, "compute_to_solve": pl.Float32},
        orient="row"), SPEC)


def _pool(rows):
    """Candidates: (optimal_moves, grade, compute_to_solve, canonical id, layout[, crates])."""
    full = [(0, r[5] if len(r) > 5 else 2, *r[:5]) for r in rows]
    return pl.DataFrame(full, schema={
        "tier": pl.Int8, "n_crates": pl.Int8, "optimal_moves": pl.Int16, "grade": pl.Int8,
        "compute_to_solve": pl.Float32, "canonical_id": pl.String, "wall_layout_id": pl.String},
        orient="row")


PREV = _prev([(6, 1, 0.10), (8, 2, 0.30), (10, 3, 0.50)])


def test_targets_carry_the_band_of_their_place_in_the_tier():
    assert PREV.select("slot", "band_lo", "band_hi").rows() == [(0, 4, 8), (1, 6, 10),
                                                                (2, 8, 12)]


def test_targets_keep_the_slots_the_previous_version_recorded():
    played = PREV.select("index", "tier", "n_crates", "optimal_moves", "grade", "compute_to_solve")
    shuffled = targets(played.with_columns(pl.Series("slot", [2, 0, 1], dtype=pl.Int16)), SPEC)
    assert shuffled.select("slot", "band_lo", "band_hi").rows() == [(2, 8, 12), (0, 4, 8),
                                                                    (1, 6, 10)]


def test_match_takes_the_candidate_closest_in_compute_to_solve_for_each_slot():
    pool = _pool([(6, 1, 0.20, "a", "A"), (7, 1, 0.11, "b", "B"), (8, 2, 0.31, "c", "C"),
                  (9, 2, 0.45, "d", "D"), (10, 3, 0.52, "e", "E"), (11, 3, 0.50, "f", "F")])
    assert match(PREV, pool) == [1, 2, 5]


@pytest.mark.parametrize("bad", [
    (8, 1, 0.10, "x", "X"),       # optimum two moves above PREV's
    (5, 2, 0.10, "x", "X"),       # another grade
    (6, 1, 0.10, "x", "X", 3),    # another crate count
    (6, 1, 1.15, "x", "X"),       # compute_to_solve more than COMPUTE_TOLERANCE away
])
def test_match_refuses_a_candidate_that_breaks_a_slot_rule(bad):
    fillers = [(8, 2, 0.30, "c", "C"), (10, 3, 0.50, "e", "E")]
    with pytest.raises(MatchError) as err:
        match(PREV, _pool([bad, *fillers]))
    assert err.value.unmatched == [0]
    assert "level 0 (tier 0 slot 0: 2 crates, optimum 6 in band 4-8, grade 1)" in str(err.value)


def test_match_keeps_the_optimum_inside_the_slot_band():
    # PREV's slot 0 optimum is 8, the top of band 4-8: 9 is within one move but out of band.
    prev = _prev([(8, 1, 0.10), (8, 2, 0.30), (10, 3, 0.50)])
    pool = _pool([(9, 1, 0.10, "x", "X"), (8, 2, 0.30, "c", "C"), (10, 3, 0.50, "e", "E")])
    with pytest.raises(MatchError) as err:
        match(prev, pool)
    assert err.value.unmatched == [0]


def test_match_never_uses_an_excluded_id_or_layout_or_one_twice():
    pool = _pool([(6, 1, 0.10, "a", "A"), (6, 1, 0.12, "b", "B"), (6, 1, 0.20, "g", "G"),
                  (8, 2, 0.30, "c", "A"), (8, 2, 0.33, "d", "D"),
                  (10, 3, 0.50, "e", "E"), (10, 3, 0.50, "e", "E2")])
    chosen = match(PREV, pool, exclude_ids={"b"}, exclude_layouts={"E2"})
    # a (layout A) and c (layout A) cannot both be taken; a is closer to its target.
    assert chosen == [0, 4, 5]


def _judged(table: pl.DataFrame, solved: list[bool]) -> pl.DataFrame:
    return table.with_columns(pl.Series("planner_solved", solved))


def test_match_prefers_the_planner_outcome_of_the_previous_slot():
    prev = _judged(PREV, [True, False, True])
    pool = _judged(_pool([(6, 1, 0.10, "a", "A"), (8, 2, 0.30, "c", "C"),
                          (8, 2, 0.33, "d", "D"), (10, 3, 0.50, "e", "E")]),
                   [True, True, False, True])
    assert match(prev, pool) == [0, 2, 3]


def test_match_holds_the_planner_solved_count_within_the_gap():
    # Each slot's closest candidate is one the planner fails; the solved ones are 0.15 away.
    prev = _judged(PREV, [True, True, True])
    pool = _judged(_pool([(6, 1, 0.10, "a", "A"), (6, 1, 0.25, "b", "B"),
                          (8, 2, 0.30, "c", "C"), (8, 2, 0.45, "d", "D"),
                          (10, 3, 0.50, "e", "E"), (10, 3, 0.64, "f", "F")]),
                   [False, True, False, True, False, True])
    assert match(prev, pool) == [0, 2, 4]
    chosen = match(prev, pool, planner_gap=1)
    assert sum(pool["planner_solved"][chosen]) >= 2
    assert match(prev, pool, planner_gap=0) == [1, 3, 5]


def test_match_names_the_slots_without_a_candidate_the_planner_judges_alike():
    prev = _judged(PREV, [True, True, True])
    pool = _judged(_pool([(6, 1, 0.10, "a", "A"), (8, 2, 0.30, "c", "C"),
                          (10, 3, 0.50, "e", "E")]), [True, False, True])
    with pytest.raises(MatchError) as err:
        match(prev, pool, planner_gap=0)
    assert err.value.unmatched == [1]
    assert "planner's solved count cannot be kept within 0" in str(err.value)


def _paneled(table: pl.DataFrame, vectors: list[list[bool]]) -> pl.DataFrame:
    return table.with_columns(pl.Series("panel", vectors, dtype=pl.List(pl.Boolean)))


TWO_AGENTS = PanelRule(("fast", "slow"), 0)


def test_match_prefers_the_panel_outcomes_of_the_previous_slot():
    prev = _paneled(PREV, [[True, True], [True, False], [False, False]])
    # Slot 1's closest candidate in compute differs from PREV in both agents; the other fits.
    pool = _paneled(_pool([(6, 1, 0.10, "a", "A"), (8, 2, 0.30, "c", "C"),
                           (8, 2, 0.40, "d", "D"), (10, 3, 0.50, "e", "E")]),
                    [[True, True], [False, True], [True, False], [False, False]])
    assert match(prev, pool) == [0, 2, 3]


def test_match_holds_every_panel_agents_solved_count_within_the_tolerance():
    prev = _paneled(PREV, [[True, True], [True, False], [False, False]])
    # The closest candidates make "slow" solve one level more than on PREV.
    pool = _paneled(_pool([(6, 1, 0.10, "a", "A"), (8, 2, 0.30, "c", "C"),
                           (10, 3, 0.50, "e", "E"), (10, 3, 0.90, "f", "F")]),
                    [[True, True], [True, False], [False, True], [True, True]])
    assert match(prev, pool) == [0, 1, 2]
    with pytest.raises(MatchError) as err:
        match(prev, pool, panel=TWO_AGENTS)
    message = str(err.value)
    assert "panel's solved counts cannot all be kept within 0" in message
    assert "slow (1 on the previous version, 2 at best)" in message and "fast (" not in message
    assert err.value.unmatched == [2]  # the slot whose best candidate moves "slow" up
    assert match(prev, pool, panel=PanelRule(("fast", "slow"), 1)) == [0, 1, 2]


def test_match_names_the_slots_left_without_a_distinct_candidate():
    # Both slot 0 and slot 1 can only take the same level.
    prev = _prev([(7, 2, 0.30), (8, 2, 0.30), (10, 3, 0.50)])
    pool = _pool([(8, 2, 0.30, "a", "A"), (10, 3, 0.50, "e", "E")])
    with pytest.raises(MatchError) as err:
        match(prev, pool)
    assert len(err.value.unmatched) == 1 and err.value.unmatched[0] in (0, 1)
    assert "no distinct candidate is left for level" in str(err.value)


def test_match_breaks_ties_by_the_pool_row_order():
    pool = _pool([(6, 1, 0.10, "a", "A"), (6, 1, 0.10, "b", "B"), (8, 2, 0.30, "c", "C"),
                  (10, 3, 0.50, "e", "E")])
    assert match(PREV, pool) == [0, 2, 3]
    assert match(PREV, pool.reverse()) == [2, 1, 0]


def _stepped(table: pl.DataFrame, vectors: list[list[bool]], steps: list[list[int]]
             ) -> pl.DataFrame:
    return _paneled(table, vectors).with_columns(
        pl.Series("panel_steps", steps, dtype=pl.List(pl.Int32)))


def test_match_prefers_agents_solving_in_as_many_steps_as_on_the_previous_slot():
    prev = _stepped(PREV, [[True, True]] * 3, [[10, 12], [20, 24], [30, 30]])
    # Slot 1's closest candidate in compute takes both agents four times PREV's steps.
    pool = _stepped(_pool([(6, 1, 0.10, "a", "A"), (8, 2, 0.30, "c", "C"),
                           (8, 2, 0.35, "d", "D"), (10, 3, 0.50, "e", "E")]),
                    [[True, True]] * 4, [[10, 12], [80, 96], [21, 23], [30, 30]])
    assert match(prev, pool) == [0, 2, 3]
    # without the steps both candidates look alike to the panel: compute decides
    assert match(prev.drop("panel_steps"), pool.drop("panel_steps")) == [0, 1, 3]


def test_match_holds_only_the_agents_the_rule_names_as_held():
    prev = _paneled(PREV, [[True, True], [True, False], [False, False]])
    pool = _paneled(_pool([(6, 1, 0.10, "a", "A"), (8, 2, 0.30, "c", "C"),
                           (10, 3, 0.50, "e", "E"), (10, 3, 0.90, "f", "F")]),
                    [[True, True], [True, False], [False, True], [True, True]])
    # "slow" is off by one on the closest match; holding "fast" alone lets it be
    assert match(prev, pool, panel=PanelRule(("fast", "slow"), 0, held=(0,))) == [0, 1, 2]
    with pytest.raises(MatchError):
        match(prev, pool, panel=PanelRule(("fast", "slow"), 0, held=(1,)))
