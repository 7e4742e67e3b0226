"""The agent protocol end to end: a real server on 127.0.0.1, a small dataset, real agents."""

from __future__ import annotations

import asyncio
import gzip
import json
import random

import pytest
from serve_support import Api

from engine.episode import Game
from engine.levels import parse_xsb
from engine.rules import lurd_to_actions
from engine.search.solver import solve
from serve.client import RandomAgent, play

SEEN: list[str] = []  # every body any test of this module received, for the leak check


def api(srv, name=None) -> Api:
    client = Api(srv.base)
    client.seen = SEEN
    if name:
        client.key = client.ok("POST", "/api/keys", {"name": name}, status=201)["api_key"]
    return client


def start(client: Api, parallel: int | None = None) -> tuple[str, dict]:
    sid = client.ok("POST", "/api/scorecards")["scorecard_id"]
    query = f"?parallel={parallel}" if parallel else ""
    return sid, client.ok("POST", f"/api/scorecards/{sid}/games/standard/start{query}")


def act(client: Api, frame: dict, action: int, episode: int | None = None) -> dict:
    body = {"action": action} if episode is None else {"action": action, "episode": episode}
    return client.ok("POST", f"/api/sessions/{frame['session_id']}/act", body)


def test_solution_agent_scores_full_success_and_move_efficiency(srv, data):
    client = api(srv, "solver")
    sid, frame = start(client)
    assert frame["last"] is None and frame["episode"]["index"] == 0
    for row in data["rows"]:
        assert frame["episode"]["index"] == row["index"]
        assert frame["episode"]["max_steps"] == row["max_steps"]
        for action in lurd_to_actions(row["solution"]):
            frame = act(client, frame, action)
        assert frame["last"]["solved"] and frame["last"]["episode_done"]
    assert frame["state"] == "GAME_OVER" and frame["observation"] is None
    assert frame["result"]["success_rate"] == 1.0
    assert frame["result"]["move_efficiency"] == 1.0
    status, body = client.call("POST", f"/api/sessions/{frame['session_id']}/act", {"action": 0})
    assert status == 409 and "over" in body["detail"]
    score = client.ok("POST", f"/api/scorecards/{sid}/close")
    assert score["success_rate"] == 1.0 and score["move_efficiency"] == 1.0
    assert score["games"]["standard"] == frame["result"] and score["closed"] is True
    assert score["total_actions"] == sum(r["optimal_moves"] for r in data["rows"])
    board = client.ok("GET", "/api/leaderboard")
    names = [e["name"] for e in board["entries"]]
    # only another perfect run, closed before (another test's, in any order), ranks above it
    assert all((e["success_rate"], e["move_efficiency"]) == (1.0, 1.0)
               for e in board["entries"][:names.index("solver")])
    replay = client.ok("GET", f"/api/replays/{frame['session_id']}")
    assert replay["owner_view"] is True
    assert [e["actions"] for e in replay["episodes"]] == [
        r["solution"].upper() for r in data["rows"]]


def corner_walk(budget: int) -> list[int]:
    """Two steps each down, right, up, left, over and over: crates get shoved into corners."""
    return [(1, 3, 0, 2)[i // 2 % 4] for i in range(budget)]


def test_corner_walking_agent_gets_the_deadlock_rate_computed_here(srv, data):
    expected_dead = 0
    for row in data["rows"]:
        level = parse_xsb(row["xsb"])
        game = Game(level, row["max_steps"])
        for a in corner_walk(row["max_steps"]):
            if game.done:
                break
            game.act(a)
        if not game.solved and solve(level, game.state).status == "unsolvable":
            expected_dead += 1
    assert 0 < expected_dead < len(data["rows"])
    client = api(srv, "cornerer")
    sid, frame = start(client)
    while frame["state"] != "GAME_OVER":
        actions = corner_walk(frame["episode"]["max_steps"])
        frame = act(client, frame, actions[frame["episode"]["steps_used"]])
    score = client.ok("POST", f"/api/scorecards/{sid}/close")
    assert score["deadlock_rate"] == round(expected_dead / len(data["rows"]), 4)
    replay = client.ok("GET", f"/api/replays/{frame['session_id']}")
    assert sum(e["deadlocked"] for e in replay["episodes"]) == expected_dead


def test_random_agent_completes_through_the_reference_client(srv, data):
    outcome = asyncio.run(play(srv.base, lambda: RandomAgent(7), name="randy", parallel=1,
                               echo=lambda line: None))
    assert outcome["score"]["episodes"] == len(data["rows"])
    assert outcome["score"]["total_actions"] > 0
    outcome = asyncio.run(play(srv.base, lambda: RandomAgent(8), name="randy2", parallel=3,
                               echo=lambda line: None))
    assert outcome["score"]["episodes"] == len(data["rows"])
    replay = api(srv).ok("GET", outcome["replay_url"].split(srv.base)[1])
    assert all(e["finished"] for e in replay["episodes"]) and replay["owner_view"] is False


def test_parallel_play_accepts_actions_out_of_order_tier_by_tier(srv, data):
    client = api(srv, "parallel")
    sid, frame = start(client, parallel=3)
    tiers = [[r for r in data["rows"] if r["tier"] == t] for t in (0, 1)]
    assert [e["index"] for e in frame["episodes"]] == [r["index"] for r in tiers[0]]
    assert frame["tier"] == {"index": 0, "of": 2, "range": [0, 2]}
    assert "episode" not in frame and "observation" not in frame
    status, body = client.call("POST", f"/api/sessions/{frame['session_id']}/act", {"action": 0})
    assert status == 400 and "episode" in body["detail"]
    status, body = client.call("POST", f"/api/sessions/{frame['session_id']}/act",
                               {"action": 0, "episode": 4})
    assert status == 409 and "not in flight" in body["detail"]
    rng = random.Random(3)
    for t, rows in enumerate(tiers):
        queues = {r["index"]: lurd_to_actions(r["solution"]) for r in rows}
        while queues:
            episode = rng.choice(sorted(queues))
            frame = act(client, frame, queues[episode].pop(0), episode)
            assert frame["acted_episode"] == episode and frame["last"]["episode"] == episode
            if not queues[episode]:
                del queues[episode]
                assert frame["last"]["episode_done"] and frame["last"]["solved"]
            if queues:  # the tier stays open until its last episode ends
                assert frame["tier"]["index"] == t
                assert {e["index"] for e in frame["episodes"]} == set(queues)
    assert frame["state"] == "GAME_OVER" and frame["result"]["success_rate"] == 1.0
    assert frame["finished"] == len(data["rows"])
    score = client.ok("POST", f"/api/scorecards/{sid}/close")
    assert score["move_efficiency"] == 1.0


def test_early_close_pads_with_failures_and_a_second_close_returns_the_same_score(srv, data):
    client = api(srv, "quitter")
    sid, frame = start(client)
    for action in lurd_to_actions(data["rows"][0]["solution"]):
        frame = act(client, frame, action)
    frame = act(client, frame, 1)  # one step into episode 1
    first = client.ok("POST", f"/api/scorecards/{sid}/close")
    n = len(data["rows"])
    assert first["episodes"] == n and first["solved"] == 1
    assert first["success_rate"] == round(1 / n, 4)
    assert first["total_actions"] == data["rows"][0]["optimal_moves"] + 1
    assert client.ok("POST", f"/api/scorecards/{sid}/close") == first
    view = client.ok("GET", f"/api/scorecards/{sid}")
    assert view["closed"] is True and view["score"]["solved"] == 1
    status, body = client.call("POST", f"/api/sessions/{frame['session_id']}/act", {"action": 0})
    assert status == 409
    replay = client.ok("GET", f"/api/replays/{frame['session_id']}")
    assert [e["solved"] for e in replay["episodes"]] == [True] + [False] * (n - 1)
    assert all(e["finished"] for e in replay["episodes"])


def test_live_scorecard_view_tracks_progress(srv, data):
    client = api(srv, "watcher")
    sid = client.ok("POST", "/api/scorecards")["scorecard_id"]
    view = client.ok("GET", f"/api/scorecards/{sid}")
    assert view["closed"] is False and view["games"]["standard"]["state"] == "NOT_STARTED"
    frame = client.ok("POST", f"/api/scorecards/{sid}/games/standard/start")
    for action in lurd_to_actions(data["rows"][0]["solution"]):
        frame = act(client, frame, action)
    game = client.ok("GET", f"/api/scorecards/{sid}")["games"]["standard"]
    assert game["state"] == "IN_PROGRESS" and game["finished"] == 1 and game["solved"] == 1
    assert game["total_actions"] == data["rows"][0]["optimal_moves"]


ERRORS = [
    ({"action": True}, "a boolean"), ({"action": "1"}, "string"), ({"action": 2.0}, "number"),
    ({"action": 4}, "at most 3"), ({"action": -1}, "at least 0"), ({}, "action is required"),
    ({"action": None}, "action is required"), ({"action": 1, "episode": "0"}, "episode"),
]


@pytest.fixture(scope="module")
def strict(srv):
    client = api(srv, "strict")
    sid, frame = start(client)
    return client, sid, frame


@pytest.mark.parametrize(("body", "cause"), ERRORS)
def test_malformed_actions_are_422_naming_the_field_and_change_nothing(strict, body, cause):
    client, sid, frame = strict
    status, answer = client.call("POST", f"/api/sessions/{frame['session_id']}/act", body)
    assert status == 422 and cause in answer["detail"]
    assert "action" in answer["detail"] or "episode" in answer["detail"]
    assert client.ok("GET", f"/api/scorecards/{sid}")["games"]["standard"]["total_actions"] == 0


def test_every_error_status_with_its_cause(srv):
    anon = api(srv)
    alice, bob = api(srv, "alice"), api(srv, "bob")
    a_sid, a_frame = start(alice)
    gid = a_frame["session_id"]
    cases = [
        (anon.call("POST", "/api/scorecards"), 401, "missing API key"),
        (Api(srv.base, "lsk-nope").call("POST", "/api/scorecards"), 401, "unknown API key"),
        (anon.call("POST", "/api/scorecards", headers={"X-API-Key": b"lsk-\xe9"}), 401,
         "unknown API key"),
        (alice.call("GET", "/api/scorecards/sc-nope"), 404, "no scorecard"),
        (bob.call("GET", f"/api/scorecards/{a_sid}"), 404, "no scorecard"),
        (bob.call("POST", f"/api/scorecards/{a_sid}/close"), 404, "no scorecard"),
        (bob.call("POST", f"/api/scorecards/{a_sid}/games/standard/start"), 404, "no scorecard"),
        (bob.call("POST", f"/api/sessions/{gid}/act", {"action": 1}), 404, "no session"),
        (alice.call("POST", "/api/sessions/gs-nope/act", {"action": 1}), 404, "no session"),
        (bob.call("GET", f"/api/sessions/{gid}"), 404, "no session"),
        (alice.call("POST", f"/api/scorecards/{a_sid}/games/standard/start"), 409,
         "already started"),
        (alice.call("POST", f"/api/scorecards/{a_sid}/games/chess/start"), 404, "unknown game"),
        (anon.call("POST", "/api/keys", {"name": "alice"}), 409, "taken"),
        (anon.call("POST", "/api/keys", {"name": "ALICE"}), 409, "taken"),
        (anon.call("POST", "/api/keys", {"name": "a"}), 422, "name"),
        (anon.call("POST", "/api/keys", {"name": "bad/name"}), 422, "name"),
        (anon.call("POST", "/api/keys", {"name": 12}), 422, "name must be a JSON string"),
        (anon.call("POST", "/api/keys", data=b"{nope"), 422, "JSON object"),
        (anon.call("POST", "/api/keys", data=b"[1]"), 422, "JSON object"),
        (anon.call("POST", "/api/keys", data=b"[" * 30000 + b"]" * 30000), 422, "nests"),
        (anon.call("GET", "/api/nowhere"), 404, "no route"),
        (anon.call("DELETE", "/api/spec"), 405, "not allowed"),
        (anon.call("GET", "/api/leaderboard?limit=0"), 422, "limit"),
        (anon.call("GET", "/api/replays/gs-nope"), 404, "no session"),
    ]
    for (status, body), want, cause in cases:
        assert status == want, (want, cause, body)
        assert cause in body["detail"], (cause, body)
    for bad in ("abc", "0", "33", "1.5", "true"):
        sid = alice.ok("POST", "/api/scorecards")["scorecard_id"]
        status, body = alice.call("POST", f"/api/scorecards/{sid}/games/standard/start"
                                  f"?parallel={bad}")
        assert status == 422 and "parallel" in body["detail"], (bad, body)
    status, body = alice.call("POST", f"/api/scorecards/{sid}/games/standard/start"
                              f"?parallel={'9' * 14}")
    assert status == 422 and "at most 32" in body["detail"]
    status, body = alice.call("POST", f"/api/scorecards/{sid}/games/standard/start"
                              f"?parallel={'9' * 5000}")
    assert status == 422 and "must be an integer" in body["detail"]
    # nothing changed for alice: her session still plays from the start
    frame = act(alice, a_frame, 1)
    assert frame["episode"]["steps_used"] == 1
    assert alice.ok("GET", f"/api/scorecards/{a_sid}")["closed"] is False
    # bob sees alice's replay without actions
    replay = bob.ok("GET", f"/api/replays/{gid}")
    assert replay["owner_view"] is False and "actions" not in replay["episodes"][0]
    alice.ok("POST", f"/api/scorecards/{a_sid}/close")
    status, body = alice.call("POST", f"/api/sessions/{gid}/act", {"action": 1})
    assert status == 409 and "over" in body["detail"]
    status, body = alice.call("POST", f"/api/scorecards/{a_sid}/games/standard/start")
    assert status == 409 and "closed" in body["detail"]


def test_gzip_when_the_client_accepts_it(srv):
    client = api(srv, "zipper")
    _, frame = start(client)
    path = f"/api/sessions/{frame['session_id']}/act"
    status, headers, raw = client.raw("POST", path, {"action": 0},
                                      headers={"Accept-Encoding": "gzip"})
    assert status == 200 and headers.get("Content-Encoding") == "gzip"
    assert json.loads(gzip.decompress(raw))["episode"]["steps_used"] == 1
    status, headers, raw = client.raw("POST", path, {"action": 0})
    assert "Content-Encoding" not in headers and json.loads(raw)["episode"]["steps_used"] == 2


def test_openapi_is_generated_from_the_declarations_that_validate(srv):
    from serve.app import all_routes

    client = api(srv)
    doc = client.ok("GET", "/api/openapi.json")
    for route in all_routes():
        op = doc["paths"][route.path][route.method.lower()]
        assert op["operationId"] == route.operation
    # and nothing is served that is not declared, but the pages' static files
    unnamed = [r.canonical for r in srv.app.router.resources() if r.name is None]
    assert set(srv.app.router.named_resources()) == {r.operation for r in all_routes()}
    assert unnamed == ["/api/docs/{asset}", "/static/{script}", "/favicon.ico"]
    act_schema = doc["paths"]["/api/sessions/{session_id}/act"]["post"]["requestBody"]
    action = act_schema["content"]["application/json"]["schema"]["properties"]["action"]
    assert action == {"type": "integer", "minimum": 0, "maximum": 3,
                      "description": "0 up, 1 down, 2 left, 3 right"}
    start_params = doc["paths"]["/api/scorecards/{scorecard_id}/games/{game}/start"]["post"]
    parallel = next(p for p in start_params["parameters"] if p["name"] == "parallel")
    assert parallel["schema"]["maximum"] == 32
    docs = client.call("GET", "/api/docs")[1]
    assert "/api/docs/docs.js" in docs and "://" not in docs  # no CDN: assets are ours
    assert "openapi.json" in client.call("GET", "/api/docs/docs.js")[1]


def test_landing_and_leaderboard_pages_are_html(srv, data):
    client = api(srv, "pager")  # a closed scorecard of its own on the board, in any order
    sid, _ = start(client)
    client.ok("POST", f"/api/scorecards/{sid}/close")
    landing = client.call("GET", "/")[1]
    assert "version <code>t1</code>" in landing and "sokoforge play" in landing
    page = client.call("GET", "/leaderboard")[1]
    assert "<table class=board>" in page and "pager" in page
    other = client.call("GET", "/leaderboard?version=other")[1]
    assert "no closed scorecards yet" in other


def test_leaderboard_is_per_version_ranked_and_keeps_each_names_best(srv):
    client = api(srv)
    board = client.ok("GET", "/api/leaderboard")
    names = [e["name"] for e in board["entries"]]
    assert len(names) == len(set(names))

    def lost(entry: dict) -> float:  # deadlocked or never played, over the episodes
        if entry["session_id"] is None:
            return 1.0
        episodes = client.ok("GET", f"/api/replays/{entry['session_id']}")["episodes"]
        return sum(e["deadlocked"] or e["steps"] == 0 for e in episodes) / len(episodes)

    keys = [(-e["success_rate"], -e["move_efficiency"], lost(e), e["submitted_at"])
            for e in board["entries"]]
    assert keys == sorted(keys)
    assert client.ok("GET", "/api/leaderboard?version=t0")["entries"] == []
    assert client.ok("GET", "/api/spec")["episodes"] == 6


def test_no_response_ever_contains_a_layout_or_a_solution(srv, data):
    """Checks every body this module received, after a tour of every route of its own."""
    client = api(srv, "tourist")
    sid, frame = start(client, parallel=2)
    while frame["state"] != "GAME_OVER":
        episode = frame["episodes"][0]
        row = data["rows"][episode["index"]]
        action = lurd_to_actions(row["solution"])[episode["steps_used"]]
        frame = act(client, frame, action, episode["index"])
    client.ok("GET", f"/api/scorecards/{sid}")
    client.ok("POST", f"/api/scorecards/{sid}/close")
    client.ok("GET", f"/api/scorecards/{sid}")
    client.ok("GET", f"/api/replays/{frame['session_id']}")
    api(srv).ok("GET", f"/api/replays/{frame['session_id']}")
    for path in ("/api/leaderboard", "/api/spec", "/api/openapi.json", "/", "/leaderboard",
                 "/api/docs"):
        client.call("GET", path)
    bodies = "\n".join(SEEN)
    for row in data["rows"]:
        assert row["xsb"] not in bodies and json.dumps(row["xsb"]) not in bodies
        assert any(ch.islower() for ch in row["solution"])  # owner replays are upper case
        assert row["solution"] not in bodies
        for line in row["xsb"].split("\n"):
            if "$" in line or "@" in line or "." in line:
                assert line not in bodies


@pytest.mark.parametrize(("header", "gzip_ok"), [
    ("gzip", True), ("gzip, deflate", True), ("deflate", False), ("gzip;q=0", False),
    ("gzip; q=0.5", True), ("*", True), ("identity", False), ("br, gzip;q=0.0", False),
    ("*;q=0, gzip", True), ("gzip;q=0, *", False), ("x-gzip", True), ("gzip;q=abc", False)])
def test_gzip_is_sent_only_when_accept_encoding_allows_it(srv, header, gzip_ok):
    status, headers, raw = api(srv).raw("GET", "/api/openapi.json",
                                        headers={"Accept-Encoding": header})
    assert status == 200 and (headers.get("Content-Encoding") == "gzip") == gzip_ok
    assert json.loads(gzip.decompress(raw) if gzip_ok else raw)["openapi"] == "3.0.3"


def test_head_is_answered_wherever_get_is_and_a_405_names_the_allowed_methods(srv):
    anon = api(srv)
    for path in ("/api/spec", "/api/leaderboard", "/", "/api/docs", "/api/games"):
        assert anon.raw("HEAD", path)[0] == 200, path
    status, headers, _ = anon.raw("DELETE", "/api/spec")
    assert status == 405 and set(headers["Allow"].split(",")) == {"GET", "HEAD"}
    status, headers, _ = anon.raw("GET", "/api/keys")
    assert status == 405 and headers["Allow"] == "POST"


def test_a_malformed_request_is_logged_in_one_line_without_the_bytes_it_sent():
    import logging
    import sys

    from aiohttp.http_exceptions import LineTooLong

    from serve.run import MalformedRequests

    def logged(fault: BaseException) -> logging.LogRecord:
        try:
            raise fault
        except BaseException:
            record = logging.LogRecord("aiohttp.server", logging.ERROR, __file__, 1,
                                       "Error handling request from %s", ("127.0.0.1",),
                                       sys.exc_info())
        assert MalformedRequests().filter(record)
        return record

    record = logged(LineTooLong("X-API-Key: lsk-secret" + "a" * 9000, "8190"))
    text = logging.Formatter().format(record)
    assert "lsk-secret" not in text and "Traceback" not in text
    assert text.startswith("Error handling request from 127.0.0.1: malformed HTTP")
    assert record.levelno == logging.WARNING
    fault = logged(RuntimeError("a real fault"))  # the server's own faults keep their traceback
    assert fault.levelno == logging.ERROR and "Traceback" in logging.Formatter().format(fault)


def test_a_client_that_hangs_up_mid_body_is_not_logged_as_a_fault(srv, caplog):
    import logging
    import socket
    import time

    host, port = srv.base.removeprefix("http://").split(":")
    with caplog.at_level(logging.WARNING, logger="sokoforge.serve"):
        conn = socket.create_connection((host, int(port)))
        conn.sendall(b'POST /api/keys HTTP/1.1\r\nHost: x\r\nContent-Length: 50\r\n\r\n{"na')
        conn.close()
        deadline = time.monotonic() + 1.0  # the server notices the hang-up on its own time
        while time.monotonic() < deadline and not caplog.records:
            time.sleep(0.05)
    assert [r.getMessage() for r in caplog.records] == []
