"""Grading features on hand-made levels, and the push-level reachable counts."""

from __future__ import annotations

import numpy as np
import pytest

from engine.levels import State, parse_xsb
from engine.rules import replay
from engine.search.reachable import push_reachable_stats, reachable_stats
from engine.search.reverse import solvable_set
from engine.search.solver import solve
from pipeline.stages.grade import (
    box_changes,
    first_push_traps,
    level_features,
    player_reach,
)
from pipeline.stages.layouts import goal_layout

TWO = parse_xsb("""
#######
#     #
# $$  #
#  .. #
#@    #
#######
""")


PAIR = parse_xsb("""
######
#@$ .#
#    #
# $ .#
######
""")


@pytest.mark.parametrize(("lurd", "changes"), [
    ("RRdlldRR", 1),          # top crate home, then the bottom one
    ("RdldRuuRdldR", 3),      # top, bottom, top, bottom
])
def test_box_changes_counts_switches_between_crates(lurd, changes):
    assert PAIR.is_solved(replay(PAIR, lurd)[-1])
    assert box_changes(PAIR, lurd) == changes


def test_box_changes_is_zero_for_one_crate_and_matches_the_solver_solution():
    assert box_changes(parse_xsb("#####\n#@$.#\n#####"), "R") == 0
    solution = solve(PAIR).solution
    assert box_changes(PAIR, solution) in (1, 3)


def test_first_push_traps_counts_pushes_into_dead_states():
    # Up or down puts the crate against a wall on a row without a goal: dead. Left or right
    # keeps it on the goal's row: solvable.
    level = parse_xsb("""
#######
#     #
#  $ .#
#  @  #
#######
""")
    sset = solvable_set(level)
    assert first_push_traps(level, sset) == 2
    assert player_reach(level, level.start) == set(range(level.height * level.width)) - set(
        np.flatnonzero(level.walls.ravel()).tolist()) - set(level.start.crates)


def test_level_features_fill_every_grade_column():
    sset = solvable_set(TWO)
    feats = level_features(TWO, solve(TWO), sset)
    stats = reachable_stats(TWO, sset=sset)
    assert feats["n_crates"] == 2
    assert feats["reachable_states"] == stats.reachable
    assert feats["dead_fraction"] == pytest.approx(stats.dead / stats.reachable)
    # alone, the right crate is one push (down) from a goal and the left one two (down,
    # right): detours are the solution's pushes beyond those three
    assert feats["detour_pushes"] == feats["optimal_pushes"] - 3 >= 0
    assert feats["optimal_solutions"] >= 1 and 1.0 <= feats["branching_factor"] <= 4.0
    assert "difficulty" not in feats


@pytest.mark.parametrize("crates", [1, 2, 3])
def test_push_level_counts_equal_the_engine_move_level_counts(crates):
    rng = np.random.default_rng(crates)
    checked = 0
    while checked < 6:
        board = goal_layout(rng, 8, 8, 0.12, crates)
        sset = solvable_set(board)
        start = sset.sample_start(rng, 3, sset.max_distance)
        if start is None:
            continue
        level = board.with_start(start)
        assert push_reachable_stats(level, sset) == reachable_stats(level, sset=sset)
        checked += 1


def test_push_level_counts_from_a_solved_start_and_a_dead_start():
    solved = parse_xsb("#####\n#@* #\n#####")
    sset = solvable_set(solved)
    assert push_reachable_stats(solved, sset) == reachable_stats(solved, sset=sset) == (1, 0)
    dead = TWO.with_start(State(TWO.start.player, (8, 9)))  # both crates in the top-left corner
    sset = solvable_set(TWO)
    stats = push_reachable_stats(dead, sset)
    assert stats == reachable_stats(dead, sset=sset) and stats.dead == stats.reachable
