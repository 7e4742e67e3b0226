"""Selection by CP-SAT on hand-made candidate tables: centre of band, distinctness, refusals."""

from __future__ import annotations

import polars as pl
import pytest

from pipeline.errors import PipelineError
from pipeline.select import choose


def _table(rows):
    return pl.DataFrame(rows, schema=["tier", "slot", "canonical_id", "wall_layout_id", "cost"],
                        orient="row")


def test_choose_takes_the_cheapest_candidate_of_each_slot():
    t = _table([(0, 0, "a", "A", 3), (0, 0, "b", "B", 0), (0, 1, "c", "C", 1),
                (0, 1, "d", "D", 2)])
    assert choose(t, [(0, 0), (0, 1)], t["cost"].to_list(), enlarge="more") == [1, 2]


def test_choose_never_repeats_a_canonical_id_or_a_wall_layout():
    # Slot 1's cheapest shares slot 0's canonical id; slot 2's cheapest shares a layout.
    t = _table([(0, 0, "a", "A", 0), (0, 1, "a", "B", 0), (0, 1, "c", "C", 5),
                (0, 2, "d", "A", 0), (0, 2, "e", "E", 4)])
    chosen = choose(t, [(0, 0), (0, 1), (0, 2)], t["cost"].to_list(), enlarge="more")
    assert chosen == [0, 2, 4]


def test_choose_trades_a_worse_slot_for_a_better_total():
    # Slot 0 can take x (cost 1) or y (cost 0); y is slot 1's only option.
    t = _table([(0, 0, "x", "X", 1), (0, 0, "y", "Y", 0), (0, 1, "y", "Y2", 0)])
    assert choose(t, [(0, 0), (0, 1)], t["cost"].to_list(), enlarge="more") == [0, 2]


def test_choose_gives_the_same_answer_every_time_among_ties():
    t = _table([(0, s, f"c{s}{j}", f"L{s}{j}", 0) for s in range(6) for j in range(4)])
    slots = [(0, s) for s in range(6)]
    first = choose(t, slots, t["cost"].to_list(), enlarge="more")
    assert len(first) == 6 and sorted({t["slot"][i] for i in first}) == list(range(6))
    for _ in range(3):
        assert choose(t, slots, t["cost"].to_list(), enlarge="more") == first


def test_slot_without_candidates_is_named():
    t = _table([(0, 0, "a", "A", 0)])
    with pytest.raises(PipelineError, match=r"no eligible candidate for tier 0 slot 1; grow it"):
        choose(t, [(0, 0), (0, 1)], [0], enlarge="grow it")


def test_infeasible_selection_names_the_slot_that_cannot_be_filled():
    t = _table([(1, 0, "a", "A", 0), (1, 1, "a", "B", 0), (1, 2, "c", "C", 0)])
    with pytest.raises(PipelineError) as info:
        choose(t, [(1, 0), (1, 1), (1, 2)], [0, 0, 0], enlarge="raise candidates_per_slot")
    message = str(info.value)
    assert message.startswith("selection infeasible: tier 1 slot ")
    named = [s for s in (0, 1, 2) if f"tier 1 slot {s}" in message]
    assert named in ([0], [1])
    assert "raise candidates_per_slot" in message
