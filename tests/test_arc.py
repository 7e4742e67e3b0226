"""The ARC-AGI-3 face, played through the arc-agi toolkit itself in online mode.

A server runs on 127.0.0.1 over a small dataset; agents built on ``arc_agi.Arcade`` play it
unchanged. The toolkit drops (answers None for) any frame its ``FrameData`` model refuses, so
every non-None step is an answer the toolkit validated.
"""

from __future__ import annotations

import logging
import random
from pathlib import Path

import pytest
import requests
from arc_agi import Arcade, OperationMode
from arcengine import FrameData, GameAction, GameState
from serve_support import served_dataset, server

from serve.arc import arc_wire as w
from serve.games.dataset import load_version

VERSION = "arc1"
GAME_ID = w.game_id(VERSION)
LETTER_ACTION = {"u": GameAction.ACTION1, "d": GameAction.ACTION2, "l": GameAction.ACTION3,
                 "r": GameAction.ACTION4}
QUIET = logging.getLogger("arc-test")
QUIET.addHandler(logging.NullHandler())
QUIET.propagate = False


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    return served_dataset(tmp_path_factory.mktemp("datasets"), VERSION)


@pytest.fixture(scope="module")
def served(data, tmp_path_factory):
    db = tmp_path_factory.mktemp("db") / "store.sqlite"
    with server(data["served"], db, keys_per_address_per_day=1000) as running:
        yield running.base, data["rows"]


def new_key(url: str, name: str) -> str:
    r = requests.post(f"{url}/api/keys", json={"name": name}, timeout=10)
    assert r.status_code == 201, r.text
    return r.json()["api_key"]


def arcade(url: str, key: str) -> Arcade:
    return Arcade(arc_api_key=key, arc_base_url=url, operation_mode=OperationMode.ONLINE,
                  logger=QUIET)


def play_until_over(env, choose) -> list:
    """Step with ``choose(frame)`` until WIN or GAME_OVER; every answer must validate."""
    frames = [env.observation_space]
    while frames[-1].state is GameState.NOT_FINISHED:
        frame = env.step(choose(frames[-1]))
        assert frame is not None, "the toolkit refused or lost an answer"
        frames.append(frame)
    return frames


def test_solution_agent_completes_every_level_and_reaches_the_leaderboard(served):
    url, rows = served
    key = new_key(url, "arc-solver")
    arc = arcade(url, key)
    assert [e.game_id for e in arc.get_environments()] == [GAME_ID]
    env = arc.make("sokoban")
    assert env is not None and env.info.game_id == GAME_ID
    first = env.observation_space
    assert first.state is GameState.NOT_FINISHED and first.full_reset
    assert first.win_levels == len(rows) and first.levels_completed == 0
    assert env.action_space == [GameAction.ACTION1, GameAction.ACTION2, GameAction.ACTION3,
                                GameAction.ACTION4]
    moves = [LETTER_ACTION[c.lower()] for row in rows for c in row["solution"]]
    plan = iter(moves)
    frames = play_until_over(env, lambda frame: next(plan))
    assert len(frames) - 1 == len(moves)
    last = frames[-1]
    assert last.state is GameState.WIN and last.levels_completed == len(rows)
    # every solved level shows its last picture, then the next level's first one
    ends = [i for i in range(1, len(frames)) if frames[i].levels_completed
            > frames[i - 1].levels_completed]
    assert [len(frames[i].frame) for i in ends] == [2] * (len(rows) - 1) + [1]
    card = arc.close_scorecard()
    assert card is not None and card.total_levels_completed == len(rows)
    assert card.environments[0].runs[0].state is GameState.WIN
    assert card.score == 100.0
    board = requests.get(f"{url}/api/leaderboard", params={"version": VERSION}, timeout=10).json()
    mine = [e for e in board["entries"] if e["name"] == "arc-solver"]
    assert mine and mine[0]["success_rate"] == 1.0 and mine[0]["move_efficiency"] == 1.0


def test_random_agent_over_all_seven_actions_runs_to_the_end(served, monkeypatch):
    url, rows = served
    # configured only by the environment, with an empty key and a base URL ending in '/'
    monkeypatch.setenv("OPERATION_MODE", "online")
    monkeypatch.setenv("ARC_BASE_URL", url + "/")
    monkeypatch.setenv("ARC_API_KEY", "")
    arc = Arcade(logger=QUIET)
    assert arc.arc_api_key.startswith("lsk-")  # from GET /api/games/anonkey
    env = arc.make(GAME_ID)
    assert env is not None
    rng = random.Random(7)
    actions = [GameAction.from_id(n) for n in range(1, 8)]
    frames = play_until_over(env, lambda f: rng.choice(actions))
    assert frames[-1].state in (GameState.WIN, GameState.GAME_OVER)
    # ACTION5-7 and blocked moves still use steps: every step was one action of the budget
    card = arc.get_scorecard()
    played = card.environments[0].runs[0]
    assert played.actions == len(frames) - 1 <= sum(r["max_steps"] for r in rows)
    assert played.levels_completed == frames[-1].levels_completed
    # after the end, an action is refused and RESET shows the final picture again
    assert env.step(GameAction.ACTION1) is None
    again = env.reset()
    assert again is not None and again.state == frames[-1].state and not again.full_reset
    assert arc.close_scorecard() is not None


def frame_of(response) -> FrameData:
    """An answer that must be a 200 FrameData (the model alone would default an error body)."""
    assert response.status_code == 200, response.text
    return FrameData.model_validate(response.json())


def _post(url, path, key, body):
    return requests.post(f"{url}{path}", json=body, headers={"X-API-Key": key}, timeout=10)


def _started(url, key):
    card = _post(url, "/api/scorecard/open", key, {"tags": ["t"]}).json()["card_id"]
    r = _post(url, "/api/cmd/RESET", key, {"card_id": card, "game_id": GAME_ID})
    assert r.status_code == 200, r.text
    return card, frame_of(r)


def test_reset_on_a_running_game_returns_its_frame_and_changes_nothing(served):
    url, _ = served
    key = new_key(url, "arc-resetter")
    card, start = _started(url, key)
    moved = frame_of(_post(url, "/api/cmd/ACTION4", key, {"game_id": GAME_ID, "guid": start.guid}))
    for body in ({"card_id": card, "game_id": GAME_ID, "guid": start.guid},
                 {"card_id": card, "game_id": "sokoban"}):
        again = frame_of(_post(url, "/api/cmd/RESET", key, body))
        assert again.guid == start.guid and not again.full_reset
        assert again.frame == moved.frame[-1:] and again.levels_completed == moved.levels_completed
    view = requests.get(f"{url}/api/scorecard/{card}", headers={"X-API-Key": key},
                        timeout=10).json()
    assert view["environments"][0]["runs"][0]["actions"] == 1


def test_openapi_documents_the_arc_routes_and_their_error_shape(served):
    url, _ = served
    doc = requests.get(f"{url}/api/openapi.json", timeout=10).json()
    for n in range(1, 8):
        op = doc["paths"][f"/api/cmd/ACTION{n}"]["post"]
        assert op["responses"]["404"]["content"]["application/json"]["schema"] == {
            "$ref": "#/components/schemas/ArcError"}
        body = op["requestBody"]["content"]["application/json"]["schema"]["properties"]
        assert "type" not in body["reasoning"] and "16 KB" in body["reasoning"]["description"]
    assert {"card_id", "game_id"} <= set(doc["paths"]["/api/cmd/RESET"]["post"]["requestBody"][
        "content"]["application/json"]["schema"]["required"])
    assert doc["components"]["schemas"]["ArcError"]["required"] == ["error", "message"]
    native = doc["paths"]["/api/scorecards"]["post"]["responses"]["401"]
    assert native["content"]["application/json"]["schema"]["$ref"].endswith("/Error")


def test_landing_page_tells_arc_agents_how_to_connect(served):
    url, _ = served
    page = requests.get(url + "/", timeout=10).text
    assert f"game <code>{GAME_ID}</code>" in page and "OPERATION_MODE=online" in page
    assert f"ARC_BASE_URL={url}" in page


def test_refusals_use_the_api_error_shape_and_change_nothing(served):
    url, _ = served
    owner, other = new_key(url, "arc-owner"), new_key(url, "arc-other")
    card, start = _started(url, owner)
    act = {"game_id": GAME_ID, "guid": start.guid}

    def refused(r, status, code):
        assert r.status_code == status, r.text
        body = r.json()
        assert body["error"] == code and body["message"]

    refused(requests.post(f"{url}/api/cmd/ACTION1", json=act, timeout=10), 401,
            w.AUTHENTICATION_ERROR)
    refused(_post(url, "/api/cmd/ACTION1", "lsk-nope", act), 401, w.AUTHENTICATION_ERROR)
    refused(_post(url, "/api/cmd/ACTION1", other, act), 404, w.GAME_NOT_STARTED_ERROR)
    refused(_post(url, "/api/cmd/ACTION1", owner, {**act, "guid": "gs-unknown"}), 404,
            w.GAME_NOT_STARTED_ERROR)
    refused(_post(url, "/api/cmd/ACTION1", owner, {**act, "game_id": "ls20"}), 404,
            w.GAME_NOT_AVAILABLE_ERROR)
    refused(_post(url, "/api/cmd/ACTION6", owner, {**act, "x": 64, "y": 0}), 400,
            w.VALIDATION_ERROR)
    refused(_post(url, "/api/cmd/ACTION1", owner, {"game_id": GAME_ID}), 400, w.VALIDATION_ERROR)
    refused(_post(url, "/api/cmd/ACTION5", owner, {**act, "reasoning": "x" * 20000}), 400,
            w.VALIDATION_ERROR)
    refused(_post(url, "/api/cmd/ACTION5", owner, {**act, "reasoning": "x" * 70000}), 413,
            w.VALIDATION_ERROR)  # beyond the server's body limit too
    refused(_post(url, "/api/cmd/RESET", other, {"card_id": card, "game_id": GAME_ID}), 404,
            w.GAME_NOT_STARTED_ERROR)
    refused(_post(url, "/api/scorecard/close", other, {"card_id": card}), 404,
            w.NOT_FOUND_ERROR)
    refused(requests.get(f"{url}/api/games/ls20", timeout=10), 404, w.GAME_NOT_AVAILABLE_ERROR)
    # none of the refused calls used a step or closed the card
    view = requests.get(f"{url}/api/scorecard/{card}", headers={"X-API-Key": owner},
                        timeout=10).json()
    assert view["closed"] is False and view["environments"][0]["runs"][0]["actions"] == 0
    # a no-op action with its reasoning is answered, echoed, and uses one step
    noop = _post(url, "/api/cmd/ACTION6", owner, {**act, "x": 3, "y": 4, "reasoning": '{"a":1}'})
    frame = frame_of(noop)
    assert frame.action_input.id is GameAction.ACTION6
    assert frame.action_input.data == {"game_id": GAME_ID, "x": 3, "y": 4}
    assert frame.action_input.reasoning == '{"a":1}' and frame.frame == start.frame
    closed = _post(url, "/api/scorecard/close", owner, {"card_id": card})
    assert closed.status_code == 200 and closed.json()["result"]["solved"] == 0
    refused(_post(url, "/api/cmd/ACTION1", owner, act), 400, w.VALIDATION_ERROR)
    refused(_post(url, "/api/cmd/RESET", owner, {"card_id": card, "game_id": GAME_ID}), 400,
            w.VALIDATION_ERROR)
    # closing again answers the same scorecard
    assert _post(url, "/api/scorecard/close", owner, {"card_id": card}).json() == closed.json()


def test_no_op_actions_survive_a_restart_of_the_server(data, tmp_path):
    db = tmp_path / "store.sqlite"
    first_level = data["rows"][0]
    with server(data["served"], db) as running:
        key = new_key(running.base, "arc-restart")
        card, first = _started(running.base, key)
        act = {"game_id": GAME_ID, "guid": first.guid}
        for n in (5, 7, 6):
            answer = _post(running.base, f"/api/cmd/ACTION{n}", key, act)
            assert frame_of(answer).frame == first.frame
    with server(data["served"], db) as running:
        again = frame_of(_post(
            running.base, "/api/cmd/RESET", key, {"card_id": card, "game_id": GAME_ID}))
        assert again.guid == first.guid and again.frame == first.frame
        view = requests.get(f"{running.base}/api/scorecard/{card}",
                            headers={"X-API-Key": key}, timeout=10).json()
        assert view["environments"][0]["runs"][0]["level_actions"][0] == 3
        # the three no-ops used three steps of the budget; the solution still fits in the rest
        assert 3 + first_level["optimal_moves"] <= first_level["max_steps"]
        for c in first_level["solution"]:
            last = _post(running.base, f"/api/cmd/{LETTER_ACTION[c.lower()].name}", key, act)
        done = frame_of(last)
        assert done.levels_completed == 1 and len(done.frame) == 2
        view = requests.get(f"{running.base}/api/scorecard/{card}",
                            headers={"X-API-Key": key}, timeout=10).json()
        assert view["environments"][0]["runs"][0]["level_actions"][0] == (
            3 + first_level["optimal_moves"])


def test_reset_of_an_expired_game_is_404_like_its_actions(data, tmp_path):
    now = [1_900_000_000.0]
    with server(data["served"], tmp_path / "store.sqlite", clock=lambda: now[0],
                idle_seconds=60) as running:
        url = running.base
        key = new_key(url, "arc-idle")
        card, start = _started(url, key)
        now[0] += 61
        for path, body in (("/api/cmd/RESET", {"card_id": card, "game_id": GAME_ID}),
                           ("/api/cmd/ACTION1", {"game_id": GAME_ID, "guid": start.guid})):
            r = _post(url, path, key, body)
            assert r.status_code == 404, (path, r.text)
            assert r.json()["error"] == w.GAME_NOT_STARTED_ERROR and "expired" in r.text


def test_limits_refuse_with_429_in_the_api_error_shape(data, tmp_path):
    with server(data["served"], tmp_path / "store.sqlite", keys_per_address_per_day=1,
                scorecards_per_key_per_day=1) as running:
        url = running.base
        # a HEAD creates no key, so the one key of the day is still there for the GET
        assert requests.head(f"{url}/api/games/anonkey", timeout=10).status_code != 200
        first = requests.get(f"{url}/api/games/anonkey", timeout=10)
        assert first.status_code == 200 and first.json()["api_key"].startswith("lsk-")
        again = requests.get(f"{url}/api/games/anonkey", timeout=10)
        assert again.status_code == 429 and again.json()["error"] == w.RATE_LIMIT_ERROR
        key = first.json()["api_key"]
        assert _post(url, "/api/scorecard/open", key, {}).status_code == 200
        second = _post(url, "/api/scorecard/open", key, {})
        assert second.status_code == 429 and second.json()["error"] == w.RATE_LIMIT_ERROR


@pytest.mark.slow
def test_the_committed_demo_set_is_won_whole_through_the_toolkit(tmp_path):
    import pyarrow.parquet as pq

    root = Path(__file__).resolve().parent.parent / "datasets"
    rows = pq.read_table(root / "demo" / "levels.parquet").to_pylist()
    with server(load_version(root, "demo"), tmp_path / "store.sqlite") as running:
        arc = arcade(running.base, new_key(running.base, "arc-demo"))
        env = arc.make("sokoban")
        assert env.observation_space.win_levels == len(rows) == 100
        plan = iter(LETTER_ACTION[c.lower()] for row in rows for c in row["solution"])
        frames = play_until_over(env, lambda frame: next(plan))
        assert frames[-1].state is GameState.WIN and frames[-1].levels_completed == 100
        card = arc.close_scorecard()
        assert card.score == 100.0 and card.total_levels_completed == 100
        board = requests.get(f"{running.base}/api/leaderboard", timeout=10).json()
        assert [(e["name"], e["success_rate"], e["move_efficiency"])
                for e in board["entries"]] == [("arc-demo", 1.0, 1.0)]


def test_the_toolkit_reaches_each_of_several_served_games_by_its_id_and_never_another(
        tmp_path):
    root = Path(__file__).resolve().parent.parent / "datasets"
    versions = ["demo", "public-A", "public-B"]  # the toolkit would cut 'sokoban-public-A'
    served = [load_version(root, v) for v in versions]
    with server(served, tmp_path / "store.sqlite") as running:
        key = new_key(running.base, "arc-chooser")
        arc = arcade(running.base, key)
        listed = [e.game_id for e in arc.get_environments()]
        assert listed == [w.game_id(v) for v in versions]
        for game_id in listed:
            env = arc.make(game_id)
            assert env is not None and env.info.game_id == game_id
            frame = env.step(GameAction.ACTION1)
            assert frame is not None and frame.game_id == game_id
        # each game was played once, as itself, on the toolkit's scorecard
        card = requests.get(f"{running.base}/api/scorecards/{arc._default_scorecard_id}",
                            headers={"X-API-Key": key}, timeout=10).json()
        assert {g: v["total_actions"] for g, v in card["games"].items()} == {
            s.game: 1 for s in served}
        # an id naming several games, or none, is refused, never played as another game
        for ambiguous in ("sokoban", "sokoban-public-A", "sokoban_public_C"):
            assert arc.make(ambiguous) is None
        status = requests.get(f"{running.base}/api/games/sokoban", timeout=10)
        assert status.status_code == 404 and "names 3 served games" in status.json()["message"]
        # the full older form still names its version exactly, for clients that send it whole
        exact = requests.get(f"{running.base}/api/games/sokoban-public-A", timeout=10).json()
        assert exact["game_id"] == w.game_id("public-A")
