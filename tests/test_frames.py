"""Episodes drawn by the numba loop: every frame equals the look's own drawing of the state."""

from __future__ import annotations

import numpy as np
import pytest

from engine.levels import parse_xsb
from engine.pictures.frames import LookNotCellLocal, TileAtlas, draw, play
from engine.pictures.look import ARC, Look, draw_theme
from engine.rules import step
from engine.search.reverse import optimal_actions, solvable_set
from engine.search.solver import solve

LEVELS = [
    "######\n#  #@#\n#    #\n#. $ #\n# #  #\n######",
    "########\n#  .   #\n# $$ # #\n#. @   #\n#  $ . #\n# #    #\n#      #\n########",
    "##########\n#   #    #\n# $   .  #\n#  ##  $ #\n# .  @   #\n#   $  # #\n"
    "#  .     #\n#    #   #\n#        #\n##########",
    # an irregular board: cells outside the walls are drawn as the look says
    "  #####\n###   #\n#. $@ #\n### $.#\n  #####",
]


def _states(level, actions):
    states = [level.start]
    for a in actions:
        nxt, _, _ = step(level, states[-1], int(a))
        states.append(nxt)
        if level.is_solved(nxt):
            break
    return states


@pytest.mark.parametrize("xsb", LEVELS)
def test_random_episode_frames_equal_the_look_drawing_step_by_step(xsb):
    level = parse_xsb(xsb)
    actions = np.random.default_rng(1).integers(0, 4, 300)
    run = play(TileAtlas.for_level(level), actions)
    states = _states(level, actions)
    assert len(run.frames) == len(states)
    for frame, state in zip(run.frames, states, strict=True):
        assert np.array_equal(frame, draw(level, state))
    assert run.final == states[-1]
    assert run.actions[-1] == -1 and not run.pushed[-1] and not run.invalid[-1]
    moved = [a != b for a, b in zip(states, states[1:], strict=False)]
    assert list(~run.invalid[:-1]) == moved


@pytest.mark.parametrize("look", [
    ARC, Look("themed", draw_theme(np.random.default_rng(3), False)),
    Look("themed", draw_theme(np.random.default_rng(4), True), noise_key=99)],
    ids=["arc", "themed", "themed-noise"])
def test_frames_in_every_look_equal_its_drawing_step_by_step_noise_included(look):
    level = parse_xsb(LEVELS[1])
    actions = np.random.default_rng(2).integers(0, 4, 60)
    run = play(TileAtlas.for_level(level, look), actions)
    states = _states(level, actions)
    for number, (frame, state) in enumerate(zip(run.frames, states, strict=True)):
        assert np.array_equal(frame, draw(level, state, look, number))


def test_pushed_and_invalid_flags_say_what_each_action_did():
    level = parse_xsb("#####\n#@$.#\n#####")
    run = play(TileAtlas.for_level(level), np.array([0, 2, 3]))
    # up: a wall (no-op); left: a wall (no-op); right: pushes the crate onto the goal
    assert run.actions.tolist() == [0, 2, 3, -1]
    assert run.invalid.tolist() == [True, True, False, False]
    assert run.pushed.tolist() == [False, False, True, False]
    assert run.solved


@pytest.mark.parametrize("xsb", LEVELS[:3])
def test_descending_the_solvable_set_gives_an_optimal_solution(xsb):
    level = parse_xsb(xsb)
    actions = optimal_actions(solvable_set(level))
    assert len(actions) == solve(level).moves
    assert level.is_solved(_states(level, actions)[-1])
    assert play(TileAtlas.for_level(level), np.array(actions)).solved


def test_a_look_that_does_not_draw_cell_by_cell_is_refused():
    level = parse_xsb(LEVELS[1])

    def shifted(lvl, state):
        picture = draw(lvl, state)
        return np.roll(picture, len(state.crates), axis=1)  # depends on the whole state

    with pytest.raises(LookNotCellLocal):
        TileAtlas.for_level(level, drawer=shifted)
