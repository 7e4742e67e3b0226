"""The numba searches against a deliberately simple pure-Python breadth-first oracle.

The oracle (tests/oracle.py) shares no code with the engine: it plays Sokoban on (row, col)
tuples and explores every state without pruning.
"""

from __future__ import annotations

from collections import deque

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from oracle import MOVES, oracle_solve, oracle_successors

from engine.levels import Level, State, parse_xsb
from engine.rules import replay
from engine.search.deadlock import dead_squares, is_dead, is_frozen_dead
from engine.search.index import StateSpaceTooLarge
from engine.search.reachable import push_reachable_stats, reachable_stats
from engine.search.reverse import solvable_set
from engine.search.solver import solve


def random_level(rng: np.random.Generator, side: int, n_crates: int, density: float) -> Level:
    """A walled square board with random interior walls, crates, goals and player."""
    walls = np.ones((side, side), bool)
    while True:
        walls[1:-1, 1:-1] = rng.random((side - 2, side - 2)) < density
        free = np.flatnonzero(~walls.ravel())
        if free.size > 2 * n_crates:
            break
    picks = rng.choice(free, 2 * n_crates + 1, replace=False)
    goals = np.zeros(side * side, bool)
    goals[picks[n_crates:2 * n_crates]] = True
    start = State(int(picks[-1]), tuple(sorted(int(c) for c in picks[:n_crates])))
    return Level(side, side, walls, goals.reshape(side, side), start)


def scrambled(level: Level, rng: np.random.Generator, steps: int) -> Level:
    """The level started from a random walk of moves and pulls away from the solved state
    (so it is solvable)."""
    w = level.width
    player = divmod(level.start.player, w)
    crates = {tuple(int(x) for x in g) for g in np.argwhere(level.goals)}
    for _ in range(steps):
        dr, dc = list(MOVES.values())[rng.integers(4)]
        nxt = (player[0] + dr, player[1] + dc)
        if level.walls[nxt] or nxt in crates:
            continue
        behind = (player[0] - dr, player[1] - dc)
        if behind in crates and rng.random() < 0.7:
            crates = (crates - {behind}) | {player}
        player = nxt
    start = State(player[0] * w + player[1], tuple(sorted(r * w + c for r, c in crates)))
    return level.with_start(start)


def level_cases(count: int, seed: int) -> list[Level]:
    """Random levels, two in three scrambled from its solved state."""
    rng = np.random.default_rng(seed)
    shapes = [(6, 1, 0.1), (6, 2, 0.1), (6, 3, 0.05), (8, 1, 0.15), (8, 2, 0.2), (8, 3, 0.3)]
    levels = []
    for i in range(count):
        level = random_level(rng, *shapes[i % len(shapes)])
        if (i // len(shapes)) % 3:
            level = scrambled(level, rng, 200)
        levels.append(level)
    return levels


LEVELS = level_cases(510, seed=20261129)


def test_optimal_moves_match_the_oracle_on_510_random_levels():
    unsolvable = 0
    for level in LEVELS:
        expected = oracle_solve(level)
        got = solve(level)
        if expected is None:
            unsolvable += 1
            assert got.status == "unsolvable", level
        else:
            assert got.status == "solved" and got.moves == expected, level
    assert 20 <= unsolvable <= len(LEVELS) - 100


level_indices = st.integers(0, len(LEVELS) - 1)


@settings(max_examples=150, deadline=None)
@given(level_indices)
def test_solution_replays_to_solved_in_exactly_the_optimal_moves(i):
    level = LEVELS[i]
    result = solve(level)
    if result.status == "solved":
        states = replay(level, result.solution)
        assert len(states) - 1 == result.moves
        assert level.is_solved(states[-1])
        assert not any(level.is_solved(s) for s in states[:-1])
        assert sum(ch.isupper() for ch in result.solution) == result.pushes


@pytest.mark.parametrize("max_states", [1, 10])
def test_a_search_past_max_states_answers_too_large(max_states):
    hard = next(lv for lv in LEVELS if (solve(lv).states_expanded or 0) > 100)
    assert solve(hard, max_states=max_states).status == "too_large"


def oracle_reachable(level: Level) -> tuple[int, int]:
    """(reachable states from the start with solved ones terminal, how many cannot be solved)."""
    goals = {tuple(int(x) for x in g) for g in np.argwhere(level.goals)}
    w = level.width
    start = (divmod(level.start.player, w), frozenset(divmod(c, w) for c in level.start.crates))
    seen = {start}
    queue = deque([start])
    while queue:
        player, crates = queue.popleft()
        if crates <= goals:
            continue
        for _, p2, c2 in oracle_successors(level, player, crates):
            if (p2, c2) not in seen:
                seen.add((p2, c2))
                queue.append((p2, c2))
    dead = 0
    for player, crates in seen:
        state = State(player[0] * w + player[1], tuple(sorted(r * w + c for r, c in crates)))
        dead += oracle_solve(level, state) is None
    return len(seen), dead


SMALL = [lv for lv in LEVELS if lv.width == 6 and lv.n_crates <= 2]


@pytest.fixture(scope="module")
def small_sets():
    return {i: solvable_set(lv) for i, lv in enumerate(SMALL)}


@settings(max_examples=120, deadline=None)
@given(level_indices)
def test_forward_optimum_equals_the_backward_distance_of_the_start(i):
    level = LEVELS[i]
    result = solve(level)
    expected = result.moves if result.status == "solved" else -1
    assert solvable_set(level).distance(level.start) == expected


@settings(max_examples=200, deadline=None)
@given(st.data())
def test_backward_distances_and_unsolvable_marks_agree_with_the_oracle(small_sets, data):
    i = data.draw(st.integers(0, len(SMALL) - 1))
    level = SMALL[i]
    floor = [int(c) for c in np.flatnonzero(level.floor)]
    cells = data.draw(st.permutations(floor))[:level.n_crates + 1]
    state = State(cells[0], tuple(sorted(cells[1:])))
    expected = oracle_solve(level, state)
    sset = small_sets[i]
    assert sset.distance(state) == (-1 if expected is None else expected)
    assert sset.is_solvable(state) == (expected is not None)
    assert is_dead(sset, state) == (expected is None)


@settings(max_examples=200, deadline=None)
@given(st.data())
def test_pruning_tests_never_call_a_solvable_state_dead(data):
    level = data.draw(st.sampled_from(SMALL + [lv for lv in LEVELS if lv.n_crates == 3][:40]))
    floor = [int(c) for c in np.flatnonzero(level.floor)]
    cells = data.draw(st.permutations(floor))[:level.n_crates + 1]
    state = State(cells[0], tuple(sorted(cells[1:])))
    dead_cells = dead_squares(level).ravel()
    pruned = any(dead_cells[c] for c in state.crates) or any(
        is_frozen_dead(level, state, c) for c in state.crates)
    if pruned:
        assert oracle_solve(level, state) is None


def test_states_at_each_distance_partition_the_solvable_set(small_sets):
    for i, sset in list(small_sets.items())[:15]:
        level = SMALL[i]
        total = 0
        for d in range(sset.max_distance + 1):
            states = sset.states_at(d)
            total += len(states)
            for state in states[:3]:
                assert oracle_solve(level, state) == d
        assert total == sset.count == int(sset.histogram().sum())


def test_sample_start_draws_within_the_band_with_no_crate_on_a_goal(small_sets):
    rng = np.random.default_rng(7)
    drawn = 0
    for i, sset in small_sets.items():
        level = SMALL[i]
        for lo, hi in ((1, 4), (5, 12)):
            state = sset.sample_start(rng, lo, hi)
            if state is None:
                continue
            drawn += 1
            assert lo <= sset.distance(state) <= hi
            assert not any(level.goals.flat[c] for c in state.crates)
        assert sset.sample_start(rng, sset.max_distance + 1, sset.max_distance + 5) is None
    assert drawn > 20


def test_reachable_and_dead_counts_match_the_oracle(small_sets):
    for i in list(small_sets)[:12]:
        level = SMALL[i]
        assert tuple(reachable_stats(level, sset=small_sets[i])) == oracle_reachable(level)


def test_a_board_whose_index_does_not_fit_is_too_large_not_unsolvable():
    rows = ["#" * 16] + ["#" + " " * 14 + "#"] * 14 + ["#" * 16]
    rows[1] = "#@$$$$$$" + " " * 7 + "#"
    rows[14] = "#......" + " " * 8 + "#"
    level = parse_xsb("\n".join(rows))
    assert solve(level).status == "too_large"
    with pytest.raises(StateSpaceTooLarge):
        solvable_set(level)


def test_a_four_crate_8x8_solvable_set_is_well_under_a_megabyte():
    level = parse_xsb("""
########
#  .   #
# $$ . #
#  @ # #
# $ .$ #
#  .   #
#      #
########
""")
    sset = solvable_set(level)
    assert sset.distance(level.start) == solve(level).moves
    assert sset.nbytes < 500_000


def test_a_16x16_board_with_6_crates_solves_when_its_state_space_fits():
    rows = ["################",
            "#@$.  $.  $.   #",
            "#   $.  $.  $. #"] + ["################"] * 13
    level = parse_xsb("\n".join(rows))
    assert (level.height, level.width, level.n_crates) == (16, 16, 6)
    result = solve(level)
    assert result.status == "solved"
    assert level.is_solved(replay(level, result.solution)[-1])
    assert result.moves == 16
    assert solvable_set(level).distance(level.start) == result.moves


def test_solving_a_state_that_is_not_of_the_level_is_refused():
    level = LEVELS[0]
    with pytest.raises(ValueError):
        solve(level, State(level.start.player, level.start.crates[:0]))


@pytest.mark.parametrize("player, crates", [
    (6, (300,)), (6, (-3,)), (300, (7,)), (-1, (7,)), (6, (7, 7)), (7, (7,)), (1, (7,))])
def test_a_state_not_of_the_level_is_unsolvable_in_the_solvable_set(player, crates):
    level = parse_xsb("#####\n#@$.#\n#   #\n#####")
    sset = solvable_set(level)
    assert sset.distance(State(6, (7,))) == 1
    assert sset.index.index_of(State(player, crates)) == -1
    assert sset.distance(State(player, crates)) == -1 and not sset.is_solvable(
        State(player, crates))


@pytest.mark.parametrize("player, crates", [(7, (7,)), (6, (300,)), (0, (7,)), (6, (7, 8))])
def test_counting_from_a_state_not_of_the_level_is_refused(player, crates):
    level = parse_xsb("#####\n#@$.#\n#   #\n#####")
    sset = solvable_set(level)
    for count in (reachable_stats, push_reachable_stats):
        with pytest.raises(ValueError, match="not a state of this level"):
            count(level, sset=sset, state=State(player, crates))


def test_solving_from_unsorted_crates_is_refused():
    level = parse_xsb("######\n#@$$.#\n#   .#\n######")
    with pytest.raises(ValueError, match="not a state of this level"):
        solve(level, State(7, (9, 8)))
