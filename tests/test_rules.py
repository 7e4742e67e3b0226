"""The rules of a step, the LURD helpers and the one-episode ``Game``."""

from __future__ import annotations

import numpy as np
import pytest

from engine.episode import Game, StepResult
from engine.levels import State, parse_xsb
from engine.rules import WAIT, actions_to_lurd, lurd_to_actions, replay, step

UP, DOWN, LEFT, RIGHT = 0, 1, 2, 3

BOARD = parse_xsb("""
#######
#     #
# $.$ #
# @ $.#
#.    #
#######
""")


def at(row: int, col: int) -> int:
    return row * BOARD.width + col


def test_walking_onto_floor_moves_the_player_only():
    state, moved, pushed = step(BOARD, BOARD.start, LEFT)
    assert (moved, pushed) == (True, False)
    assert state == State(at(3, 1), BOARD.start.crates)


def test_walking_into_a_wall_is_a_no_op():
    state = State(at(3, 1), BOARD.start.crates)
    assert step(BOARD, state, LEFT) == (state, False, False)


def test_pushing_a_crate_onto_a_goal_moves_both():
    state = State(at(2, 1), BOARD.start.crates)
    after, moved, pushed = step(BOARD, state, RIGHT)
    assert (moved, pushed) == (True, True)
    assert after == State(at(2, 2), (at(2, 3), at(2, 4), at(3, 4)))
    assert BOARD.goals[2, 3]


def test_pushing_a_crate_off_a_goal_moves_it_on():
    on_goal = State(at(2, 2), (at(2, 3), at(3, 4), at(4, 4)))
    after, _, pushed = step(BOARD, on_goal, RIGHT)
    assert pushed
    assert after.crates == (at(2, 4), at(3, 4), at(4, 4))
    assert after.player == at(2, 3)


def test_pushing_a_crate_into_a_wall_is_a_no_op():
    state = State(at(3, 4), (at(2, 2), at(2, 4), at(3, 5)))
    assert step(BOARD, state, RIGHT) == (state, False, False)


def test_pushing_a_crate_into_another_crate_is_a_no_op():
    state = State(at(1, 4), BOARD.start.crates)
    assert step(BOARD, state, DOWN) == (state, False, False)


def test_pushing_up_against_the_outer_wall_is_a_no_op():
    state = State(at(2, 2), (at(1, 2), at(2, 4), at(3, 4)))
    assert step(BOARD, state, UP) == (state, False, False)


def test_crates_stay_sorted_after_a_push_past_another_crate():
    state = State(at(1, 2), BOARD.start.crates)
    after, _, pushed = step(BOARD, state, DOWN)
    assert pushed
    assert after.crates == (at(2, 4), at(3, 2), at(3, 4))


@pytest.mark.parametrize("action", [4, -1, True, 1.5, 3.0, "1"])
def test_an_action_outside_0_to_3_is_rejected(action):
    with pytest.raises(ValueError):
        step(BOARD, BOARD.start, action)


def test_a_numpy_integer_action_is_an_action():
    assert step(BOARD, BOARD.start, np.int64(LEFT)) == step(BOARD, BOARD.start, LEFT)


def test_lurd_round_trips_and_marks_pushes_upper_case():
    actions = [LEFT, UP, RIGHT, DOWN]
    lurd = actions_to_lurd(BOARD, BOARD.start, actions)
    assert lurd == "luRd"
    assert lurd_to_actions(lurd) == actions
    with pytest.raises(ValueError):
        lurd_to_actions("lux")


def test_replay_returns_every_state_including_the_start():
    states = replay(BOARD, "luR")
    assert len(states) == 4 and states[0] == BOARD.start
    assert states[-1].crates == (at(2, 3), at(2, 4), at(3, 4))


def test_game_counts_no_op_steps_and_ends_at_the_budget():
    game = Game(BOARD, max_steps=3)
    result = game.act(DOWN)
    assert result.moved and not result.done
    result = game.act(DOWN)
    assert (result.moved, result.pushed) == (False, False)
    assert game.steps == 2 and game.actions == [DOWN, DOWN]
    assert game.act(UP).done and not game.solved
    with pytest.raises(ValueError):
        game.act(UP)


def test_game_is_done_once_solved():
    level = parse_xsb("#####\n#@$.#\n#####")
    game = Game(level, max_steps=10)
    result = game.act(RIGHT)
    assert result == (True, True, True, True)
    assert game.solved and game.done
    with pytest.raises(ValueError):
        game.act(LEFT)


def test_game_rejects_a_bad_action_without_spending_a_step():
    game = Game(BOARD, max_steps=5)
    with pytest.raises(ValueError):
        game.act(7)
    assert game.steps == 0


def test_wait_uses_a_step_and_changes_nothing():
    level = parse_xsb("#####\n#@$.#\n#####")
    game = Game(level, 2)
    assert game.wait() == StepResult(False, False, False, False)
    assert (game.state, game.steps, game.actions) == (level.start, 1, [WAIT])
    assert game.act(3).solved and game.done
    with pytest.raises(ValueError, match="over"):
        game.wait()
