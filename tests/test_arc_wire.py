"""The ARC-AGI-3 wire shapes, checked against the arc-agi toolkit's own pydantic models."""

from __future__ import annotations

import json

import numpy as np
import pytest
from arc_agi import EnvironmentScorecard
from arc_agi.scorecard import Scorecard
from arcengine import FrameData, GameAction, GameState

from engine.levels import parse_xsb
from engine.pictures.look import ARC, SHARED, painter
from engine.pictures.render import PALETTE
from serve.arc import arc_wire as w

LEVEL = parse_xsb("#####\n#@$.#\n#####")
PAINTER = painter(LEVEL, SHARED)


def _frame(**over):
    args = dict(game=w.game_id("v1"), guid="gs-1", grids=[w.grid(PAINTER, None)],
                state=w.NOT_FINISHED, levels_completed=0, win_levels=3, action=0,
                data={"game_id": w.game_id("v1")}, reasoning=None, full_reset=True)
    args.update(over)
    return json.loads(w.frame_data(**args))


def test_frame_data_is_accepted_by_the_toolkit_model():
    frame = FrameData.model_validate(_frame())
    assert frame.state is GameState.NOT_FINISHED
    assert frame.action_input.id is GameAction.RESET
    assert frame.available_actions == [1, 2, 3, 4]
    assert len(frame.frame) == 1 and len(frame.frame[0]) == 64
    assert all(len(row) == 64 for row in frame.frame[0])


def test_grid_json_is_exactly_what_json_dumps_writes():
    rng = np.random.default_rng(3)
    for shape in [(64, 64), (1, 1), (2, 7)]:
        for _ in range(50):
            g = rng.integers(0, 16, size=shape, dtype=np.uint8)
            assert w.grid_json(g) == json.dumps(g.tolist(), separators=(",", ":")).encode()


def test_frame_grid_holds_palette_indices_of_the_rendered_board():
    cells = {v for row in json.loads(w.grid(PAINTER, None)) for v in row}
    assert cells <= set(range(len(PALETTE)))
    # player (blue), crate (orange) and goal (red) all appear in the start picture
    assert {9, 12, 8} <= cells


def test_frame_grid_of_the_arc_look_is_its_16_colour_picture():
    arc = painter(LEVEL, ARC)
    assert np.array_equal(np.array(json.loads(w.grid(arc, None)), dtype=np.uint8),
                          arc.elements(None))
    assert w.grid(arc, None) != w.grid(PAINTER, None)


def test_frame_data_caps_level_counts_at_the_toolkit_bound():
    frame = FrameData.model_validate(_frame(levels_completed=300, win_levels=300))
    assert frame.levels_completed == w.MAX_LEVELS and frame.win_levels == w.MAX_LEVELS


def test_reasoning_is_echoed_and_bounded():
    from serve.arc.arc import REASONING
    from serve.web.schema import Invalid

    blob = '{"why": "push right"}'
    frame = FrameData.model_validate(_frame(action=4, reasoning=REASONING.check(blob)))
    assert frame.action_input.reasoning == blob
    assert REASONING.check({"plan": [1, 2]}) == {"plan": [1, 2]}
    with pytest.raises(Invalid, match="reasoning"):
        REASONING.check("x" * (w.MAX_REASONING_BYTES + 1))


@pytest.mark.parametrize(("in_progress", "solved", "state"), [
    (True, 0, w.NOT_FINISHED), (True, 3, w.NOT_FINISHED), (False, 3, w.WIN),
    (False, 2, w.GAME_OVER), (False, 0, w.GAME_OVER)])
def test_arc_state_wins_only_when_every_episode_was_solved(in_progress, solved, state):
    assert w.arc_state(in_progress, solved, 3) == state


def test_a_game_id_is_one_word_the_toolkit_keeps_and_names_one_version():
    assert w.game_id("2027-01") == "sokoban_2027_01"
    for version in ("2027-01", "public-A"):  # the toolkit asks for what precedes a '-'
        assert w.game_id(version).split("-", 1)[0] == w.game_id(version)
    served = ["2027-01", "public-A", "public-B"]
    assert w.games_named("sokoban_public_A", served) == ["public-A"]
    assert w.games_named("sokoban-public-A", served) == ["public-A"]  # the older id, whole
    assert w.games_named("sokoban", served) == served  # ambiguous: refused by the face
    assert w.games_named("sokoban", ["2026a"]) == ["2026a"]
    assert w.games_named("sokoban_public_C", served) == [] == w.games_named("ls20", served)
    info = w.game_info("2026a", "standard", [3, 5])
    assert info["game_id"] == "sokoban_2026a" and info["baseline_actions"] == [3, 5]


def test_run_scores_optimal_play_100_and_weights_later_levels_more():
    optimal = [{"solved": True, "steps": 4, "optimal": 4}, {"solved": True, "steps": 6,
                                                            "optimal": 6}]
    assert w.run("g", "s", w.WIN, optimal)["score"] == 100.0
    only_last = [{"solved": False, "steps": 9, "optimal": 4},
                 {"solved": True, "steps": 6, "optimal": 6}]
    r = w.run("g", "s", w.GAME_OVER, only_last)
    assert r["score"] == pytest.approx(100 * 2 / 3, abs=1e-3)
    assert r["levels_completed"] == 1 and r["actions"] == 15 and not r["completed"]
    half_speed = [{"solved": True, "steps": 8, "optimal": 4}]
    assert w.run("g", "s", w.WIN, half_speed)["score"] == 25.0


def test_scorecard_is_accepted_by_the_toolkit_model():
    episodes = [{"solved": True, "steps": 4, "optimal": 4},
                {"solved": False, "steps": 12, "optimal": 6}]
    body = w.scorecard("sc-1", [w.run("sokoban-v1", "gs-1", w.GAME_OVER, episodes)],
                       name="bot", version="v1", closed=True, result={"solved": 1})
    card = EnvironmentScorecard.model_validate(body)
    assert card.card_id == "sc-1"
    assert card.total_levels_completed == 1 and card.total_actions == 16
    assert card.total_levels == 2 and card.total_environments_completed == 0
    assert card.environments[0].runs[0].state is GameState.GAME_OVER
    # the ARC-AGI-3-Agents swarm reads a close answer with the toolkit's Scorecard model
    assert Scorecard.model_validate(body).card_id == "sc-1"


def test_native_refusals_map_to_the_api_statuses():
    assert w.ArcError.from_status(409, "over").status == 400
    assert w.ArcError.from_status(422, "bad").code == w.VALIDATION_ERROR
    assert w.ArcError.from_status(401, "key").body() == {"error": w.AUTHENTICATION_ERROR,
                                                         "message": "key"}
    gone = w.ArcError.from_status(404, "no such guid", not_found=w.GAME_NOT_STARTED_ERROR)
    assert (gone.status, gone.code) == (404, w.GAME_NOT_STARTED_ERROR)
    assert w.ArcError.from_status(429, "slow down").status == 429
