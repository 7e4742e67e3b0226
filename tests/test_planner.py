import numpy as np
import pytest

import engine.agents.planner as planner
from engine.agents.planner import (
    CALLS_PER_EXPANSION,
    HEURISTIC_WEIGHT,
    MAX_PLANNER_BUDGET,
    PLANNER_BUDGET,
    plan,
    push_distance,
    state_key,
)
from engine.levels import parse_xsb

CORRIDOR = """
#######
#@    #
# $ . #
#     #
#######"""

TWO_CRATES = """
########
#  .   #
# $$ . #
#@ $  .#
#      #
########"""

# The crate starts in a corner: no push can ever move it, so no plan can solve the level.
CORNERED = """
#####
#$ .#
#  @#
#####"""


def test_push_distance_counts_pushes_and_marks_corners_unreachable():
    level = parse_xsb(CORNERED)
    dist = push_distance(level.floor.ravel(), level.goals.ravel(), level.width)
    w = level.width
    assert dist[1 * w + 3] == 0
    assert dist[1 * w + 2] == 1
    assert dist[1 * w + 1] >= 1 << 20  # corner: dead square
    assert dist[2 * w + 3] >= 1 << 20  # bottom-right corner: dead square


def test_planner_solves_an_easy_level_in_the_optimal_three_moves():
    result = plan(parse_xsb(CORRIDOR), max_steps=30)
    assert result.solved and result.steps == 3
    assert result.actions == (1, 3, 3)


def test_planner_actions_replay_to_solved_under_the_rules():
    from engine.episode import Game

    level = parse_xsb(TWO_CRATES)
    result = plan(level, max_steps=120)
    assert result.solved
    game = Game(level, max_steps=120)
    for a in result.actions:
        game.act(a)
    assert game.solved and game.steps == result.steps


def test_planner_fails_within_budget_when_the_step_budget_is_too_short():
    result = plan(parse_xsb(TWO_CRATES), max_steps=5)
    assert not result.solved and result.steps == 5


def test_planner_fails_on_a_dead_start_without_using_the_budget():
    result = plan(parse_xsb(CORNERED), max_steps=50)
    assert not result.solved and result.steps < 50


def test_planner_is_deterministic_and_its_lookahead_budget_shortens_the_episode():
    level = parse_xsb(TWO_CRATES)
    tiny = plan(level, 90, budget=CALLS_PER_EXPANSION)
    full = plan(level, 90, budget=PLANNER_BUDGET)
    assert tiny == plan(level, 90, budget=CALLS_PER_EXPANSION) and full == plan(level, 90)
    assert tiny.solved and full.solved
    assert full.steps < tiny.steps


@pytest.mark.parametrize("budget", [0, CALLS_PER_EXPANSION - 1, MAX_PLANNER_BUDGET + 1])
def test_a_budget_below_one_expansion_or_beyond_the_index_is_refused(budget):
    with pytest.raises(ValueError, match="budget"):
        plan(parse_xsb(CORRIDOR), 30, budget=budget)


def test_push_lower_bound_sums_lone_crate_distances():
    from engine.agents.planner import push_lower_bound

    assert push_lower_bound(parse_xsb(CORRIDOR)) == 2
    # crates: (2,2) up+right 2, (2,3) up 1, (3,3) up twice 2
    assert push_lower_bound(parse_xsb(TWO_CRATES)) == 5


def _random_level(seed):
    """A 7x7 enclosed board with random interior walls, 1-3 crates and goals, or None."""
    import numpy as np

    from engine.levels import Level, State

    rng = np.random.default_rng(seed)
    walls = np.ones((7, 7), dtype=bool)
    walls[1:-1, 1:-1] = rng.random((5, 5)) < 0.15
    free = [int(r * 7 + c) for r in range(1, 6) for c in range(1, 6) if not walls[r, c]]
    k = int(rng.integers(1, 4))
    if len(free) < 2 * k + 1:
        return None
    cells = rng.choice(free, size=2 * k + 1, replace=False)
    goals = np.zeros((7, 7), dtype=bool)
    goals.flat[cells[:k]] = True
    return Level(7, 7, walls, goals, State(int(cells[-1]), tuple(sorted(map(int, cells[k:2 * k])))))


def test_planner_episodes_are_legal_play_under_the_rules():
    from engine.episode import Game

    played = 0
    for seed in range(60):
        level = _random_level(seed)
        if level is None or not level.floor.flat[level.start.player]:
            continue
        result = plan(level, 40)
        game = Game(level, max_steps=40)
        for a in result.actions:
            game.act(a)
        assert game.steps == result.steps <= 40
        assert game.solved == result.solved
        played += 1
    assert played >= 40


def _counted_episode(monkeypatch, xsb: str, max_steps: int, budget: int):
    """The planner's episode run in Python with every dynamics call counted by a wrapper."""
    generated = []
    real = planner._successor

    def counting(key, action, passable, offs, n_crates):
        generated.append(key)
        return real(key, action, passable, offs, n_crates)

    monkeypatch.setattr(planner, "_successor", counting)
    level = parse_xsb(xsb)
    goal = np.ascontiguousarray(level.goals.ravel() & level.floor.ravel())
    solved, steps, actions, calls = planner.plan_kernel.py_func(
        np.ascontiguousarray(level.floor.ravel()), goal, level.width, state_key(level.start),
        level.n_crates, max_steps, budget, HEURISTIC_WEIGHT, 0)
    return len(generated), int(steps), [int(c) for c in calls]


@pytest.mark.parametrize("budget", [4, 7, 12, 64, 256])
def test_one_steps_reported_calls_are_the_successors_it_generated_within_budget(
        monkeypatch, budget):
    generated, steps, calls = _counted_episode(monkeypatch, TWO_CRATES, 1, budget)
    assert steps == 1
    # the wrapper also sees the environment's step (the move taken), which is not a call
    assert calls[0] == generated - 1
    assert calls[0] <= budget and calls[0] % CALLS_PER_EXPANSION == 0
    # the lookahead stops only when one more expansion would not fit (or the goal is found)
    assert calls[0] > budget - CALLS_PER_EXPANSION
    assert plan(parse_xsb(TWO_CRATES), 1, budget=budget).calls == (calls[0],)


def test_every_steps_calls_stay_within_budget_over_an_episode(monkeypatch):
    generated, steps, calls = _counted_episode(monkeypatch, TWO_CRATES, 90, 12)
    assert steps == len(calls) > 1
    assert sum(calls) + steps == generated
    assert max(calls) <= 12
    assert plan(parse_xsb(TWO_CRATES), 90, budget=12).calls == tuple(calls)
