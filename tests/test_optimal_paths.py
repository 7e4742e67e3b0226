import pytest

from engine.levels import parse_xsb
from engine.rules import step
from engine.search.optimal_paths import optimal_paths
from engine.search.solver import solve

LEVELS = [
    """
#######
#@    #
# $ . #
#     #
#######""",
    """
######
#@   #
# $  #
#   .#
######""",
    """
#######
#@    #
#     #
#  $. #
#######""",
    """
#######
#.  @ #
# $$  #
#.    #
#######""",
]


def _brute_force_count(level, state, length):
    """Action sequences of exactly ``length`` steps that end solved (pure Python depth-first;
    a blocked step wastes a move, so it never lies on a shortest sequence)."""
    if length == 0:
        return int(level.is_solved(state))
    total = 0
    for a in range(4):
        nxt, moved, _ = step(level, state, a)
        if moved:
            total += _brute_force_count(level, nxt, length - 1)
    return total


@pytest.mark.parametrize("text", LEVELS)
def test_optimal_solution_count_matches_brute_force_enumeration(text):
    level = parse_xsb(text)
    result = optimal_paths(level)
    assert result.moves == solve(level).moves
    assert result.solutions == _brute_force_count(level, level.start, result.moves)
    assert result.solutions >= 1


def test_counts_saturate_at_the_cap_and_branching_is_a_mean_over_expanded_states():
    level = parse_xsb(LEVELS[2])
    full = optimal_paths(level)
    assert full.solutions > 2
    assert optimal_paths(level, cap=2).solutions == 2
    assert 1.0 <= full.branching <= 4.0
    assert full.expanded > 0


def test_unsolvable_level_reports_no_optimum():
    level = parse_xsb("""
#####
#$ .#
#  @#
#####""")
    assert optimal_paths(level).moves == -1
    assert optimal_paths(level).solutions == 0


def test_a_level_found_unsolvable_by_searching_reports_no_optimum():
    # the crate starts on a live cell, but the player reaches only the side that pushes it away
    level = parse_xsb("######\n#.@$ #\n######")
    result = optimal_paths(level)
    assert (result.moves, result.solutions) == (-1, 0)
    assert result.expanded > 0 and solve(level).status == "unsolvable"
