"""Selection on hand-made candidate tables: centre of band, distinctness, unfilled slots."""

from __future__ import annotations

import polars as pl
import pytest

from pipeline.errors import PipelineError
from pipeline.stages.select import choose


def _table(rows):
    return pl.DataFrame(rows, schema=["tier", "slot", "canonical_id", "wall_layout_id", "cost"],
                        orient="row")


def test_choose_takes_the_cheapest_candidate_of_each_slot():
    t = _table([(0, 0, "a", "A", 3), (0, 0, "b", "B", 0), (0, 1, "c", "C", 1),
                (0, 1, "d", "D", 2)])
    assert choose(t, [(0, 0), (0, 1)], t["cost"].to_list()) == ([1, 2], [])


def test_choose_never_repeats_a_canonical_id_or_a_wall_layout():
    # Slot 1's cheapest is slot 0's level (one layout, one id); slot 2's cheapest shares a
    # layout with slot 0's.
    t = _table([(0, 0, "a", "A", 0), (0, 1, "a", "A", 0), (0, 1, "c", "C", 5),
                (0, 2, "d", "A", 0), (0, 2, "e", "E", 4)])
    chosen, unfilled = choose(t, [(0, 0), (0, 1), (0, 2)], t["cost"].to_list())
    assert (chosen, unfilled) == ([0, 2, 4], [])


def test_choose_trades_a_worse_slot_for_a_better_total():
    # Slot 0 can take x (cost 1) or y (cost 0); y's layout is slot 1's only option.
    t = _table([(0, 0, "x", "X", 1), (0, 0, "y", "Y", 0), (0, 1, "y2", "Y", 0)])
    assert choose(t, [(0, 0), (0, 1)], t["cost"].to_list()) == ([0, 2], [])


def test_choose_breaks_ties_towards_earlier_candidates_every_time():
    t = _table([(0, s, f"c{s}{j}", f"L{s}{j}", 0) for s in range(6) for j in range(4)])
    slots = [(0, s) for s in range(6)]
    first, unfilled = choose(t, slots, t["cost"].to_list())
    assert first == [4 * s for s in range(6)] and unfilled == []
    for _ in range(3):
        assert choose(t, slots, t["cost"].to_list()) == (first, [])


def test_a_slot_without_candidates_is_left_unfilled():
    t = _table([(0, 0, "a", "A", 0)])
    assert choose(t, [(0, 0), (0, 1)], [0]) == ([0], [(0, 1)])


def test_slots_competing_for_one_layout_leave_the_fewest_unfilled():
    t = _table([(1, 0, "a", "A", 0), (1, 1, "b", "A", 0), (1, 2, "c", "C", 0)])
    chosen, unfilled = choose(t, [(1, 0), (1, 1), (1, 2)], [0, 0, 0])
    assert len(chosen) == 2 and 2 in chosen
    assert unfilled in ([(1, 0)], [(1, 1)])


def test_a_canonical_id_under_two_wall_layouts_is_refused():
    t = _table([(0, 0, "a", "A", 0), (0, 1, "a", "B", 0)])
    with pytest.raises(PipelineError, match="canonical id a appears with two wall layouts"):
        choose(t, [(0, 0), (0, 1)], [0, 0])
