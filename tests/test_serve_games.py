"""Several games on one server, and RESET as each game's ``restarts`` allows, on both faces."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner
from serve_support import LEVELS, Api, server, write_dataset

from engine.rules import lurd_to_actions
from serve.arc import arc_wire as w
from serve.games.dataset import load_version
from sokoforge.cli import main


def game_version(root, version: str, game: str, restarts: str | None = None,
                 public_seed: str | None = None, levels=LEVELS) -> dict:
    """A version of ``game``; the manifest's spec may name its restarts or a public seed."""
    info = write_dataset(root, version, levels)
    path = root / version / "manifest.json"
    manifest = json.loads(path.read_text())
    manifest["game"] = game
    if restarts is not None:
        manifest["spec"]["restarts"] = restarts
    if public_seed is not None:
        manifest["public_seed"] = public_seed
    path.write_text(json.dumps(manifest))
    return info


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    root = tmp_path_factory.mktemp("datasets")
    rows = game_version(root, "t1", "standard")["rows"]
    expert = game_version(root, "x1", "expert", levels=LEVELS[3:])["rows"]
    game_version(root, "t2", "standard", levels=LEVELS[:2])
    game_version(root, "lv", "trial", restarts="level")
    game_version(root, "pub", "practice", public_seed="2026")
    return {"root": root, "rows": rows, "expert": expert,
            **{v: load_version(root, v) for v in ("t1", "x1", "lv", "pub")}}


def keyed(base: str, name: str) -> Api:
    client = Api(base)
    client.key = client.ok("POST", "/api/keys", {"name": name}, status=201)["api_key"]
    return client


def solve(client: Api, frame: dict, rows: list[dict]) -> dict:
    while frame["state"] != "GAME_OVER":
        ep = frame["episode"]
        action = lurd_to_actions(rows[ep["index"]]["solution"])[ep["steps_used"]]
        frame = client.ok("POST", f"/api/sessions/{frame['session_id']}/act",
                          {"action": action})
    return frame


def test_two_versions_of_one_game_are_refused_in_one_line(data, tmp_path):
    result = CliRunner().invoke(main, ["serve", "t1", "t2", "--datasets", str(data["root"]),
                                       "--db", str(tmp_path / "x.sqlite")])
    assert result.exit_code == 2 and "both of game 'standard'" in result.output
    assert len(result.output.strip().splitlines()) == 1


def test_every_served_game_is_listed_by_the_spec_the_arc_games_and_the_home_page(data,
                                                                                  tmp_path):
    with server([data["t1"], data["x1"]], tmp_path / "s.sqlite") as s:
        client = Api(s.base)
        spec = client.ok("GET", "/api/spec")
        assert spec["games"] == ["standard", "expert"] and spec["version"] == "t1"
        assert {g: v["version"] for g, v in spec["game_specs"].items()} == {
            "standard": "t1", "expert": "x1"}
        assert spec["game_specs"]["expert"]["episodes"] == 3
        ids = [g["game_id"] for g in client.ok("GET", "/api/games")]
        assert ids == [w.game_id("t1"), w.game_id("x1")]
        assert client.ok("GET", f"/api/games/{w.game_id('x1')}")["game_id"] == w.game_id("x1")
        page = client.ok("GET", "/")
        assert "<code>expert</code>: version <code>x1</code>" in page


def test_one_scorecard_plays_each_game_once_and_close_scores_each_game_played(data, tmp_path):
    with server([data["t1"], data["x1"]], tmp_path / "s.sqlite") as s:
        client = keyed(s.base, "both")
        card = client.ok("POST", "/api/scorecards")
        assert card["games"] == ["standard", "expert"]
        assert card["episodes_by_game"] == {"standard": 6, "expert": 3}
        sid = card["scorecard_id"]
        expert = client.ok("POST", f"/api/scorecards/{sid}/games/expert/start")
        assert expert["episode"]["of"] == 3
        solve(client, expert, data["expert"])
        assert client.call("POST", f"/api/scorecards/{sid}/games/expert/start")[0] == 409
        standard = client.ok("POST", f"/api/scorecards/{sid}/games/standard/start")
        client.ok("POST", f"/api/sessions/{standard['session_id']}/act", {"action": 1})
        view = client.ok("GET", f"/api/scorecards/{sid}")["games"]
        assert view["expert"]["state"] == "GAME_OVER" and view["standard"]["total_actions"] == 1
        score = client.ok("POST", f"/api/scorecards/{sid}/close")
        assert set(score["games"]) == {"expert", "standard"}
        # the top level is the first game started, as single-game clients read it
        assert score["success_rate"] == 1.0 and score["episodes"] == 3
        assert score["games"]["standard"]["solved"] == 0
        only = client.ok("POST", "/api/scorecards")["scorecard_id"]
        client.ok("POST", f"/api/scorecards/{only}/games/standard/start")
        assert list(client.ok("POST", f"/api/scorecards/{only}/close")["games"]) == ["standard"]
        expert_board = client.ok("GET", "/api/leaderboard?game=expert")
        assert expert_board["version"] == "x1"
        assert [e["success_rate"] for e in expert_board["entries"]] == [1.0]
        standard_board = client.ok("GET", "/api/leaderboard?version=t1")
        assert [e["success_rate"] for e in standard_board["entries"]] == [0.0]
        assert client.call("GET", "/api/leaderboard?game=nope")[0] == 404


def test_restarts_default_to_none_for_hidden_games_and_game_for_public_ones(data):
    from serve.games.games import Registry

    games = Registry([data["t1"], data["lv"], data["pub"]])
    assert [g.restarts for g in games] == ["none", "level", "game"]


def started(client: Api, game: str = "standard") -> tuple[str, dict]:
    sid = client.ok("POST", "/api/scorecards")["scorecard_id"]
    return sid, client.ok("POST", f"/api/scorecards/{sid}/games/{game}/start")


def test_native_reset_is_409_where_the_game_allows_no_restarts(data, tmp_path):
    with server(data["t1"], tmp_path / "s.sqlite") as s:
        client = keyed(s.base, "hidden")
        _, frame = started(client)
        gid = frame["session_id"]
        client.ok("POST", f"/api/sessions/{gid}/act", {"action": 1})
        status, body = client.call("POST", f"/api/sessions/{gid}/reset")
        assert status == 409 and "does not allow restarts" in body["detail"]
        assert client.ok("GET", f"/api/sessions/{gid}")["episode"]["steps_used"] == 1
        spec = client.ok("GET", "/api/spec")
        assert spec["restarts"] == "none"


def test_native_level_restart_puts_the_level_back_and_keeps_the_steps_used(data, tmp_path):
    db = tmp_path / "s.sqlite"
    with server(data["lv"], db) as s:
        client = keyed(s.base, "leveller")
        _, first = started(client, "trial")
        gid = first["session_id"]
        for action in (1, 3, 3):
            client.ok("POST", f"/api/sessions/{gid}/act", {"action": action})
        again = client.ok("POST", f"/api/sessions/{gid}/reset")
        assert again["restarted"] == "level" and again["episode"]["steps_used"] == 3
        assert again["observation"] == first["observation"]
        # in a level-only game a second RESET is a level restart again, never the game
        assert client.ok("POST", f"/api/sessions/{gid}/reset")["restarted"] == "level"
    with server(data["lv"], db) as s:  # the restart is stored: a new process agrees
        client = Api(s.base, client.key)
        now = client.ok("GET", f"/api/sessions/{gid}")
        assert now["episode"]["steps_used"] == 3 and now["observation"] == first["observation"]
        budget = now["episode"]["max_steps"]
        for _ in range(budget - 3):  # the budget still binds: the episode ends at it
            frame = client.ok("POST", f"/api/sessions/{gid}/act", {"action": 0})
        assert frame["last"]["episode_done"] and frame["episode"]["index"] == 1
        replay = client.ok("GET", f"/api/replays/{gid}")["episodes"][0]
        assert replay["actions"].startswith("DRR||") and replay["steps"] == budget


def test_native_game_restart_after_a_level_restart_starts_every_episode_again(data, tmp_path):
    with server(data["pub"], tmp_path / "s.sqlite") as s:
        client = keyed(s.base, "practiser")
        sid, first = started(client, "practice")
        gid = first["session_id"]
        frame = first
        for _ in range(len(lurd_to_actions(data["rows"][0]["solution"]))):  # solve level 0
            frame = client.ok("POST", f"/api/sessions/{gid}/act", {"action": lurd_to_actions(
                data["rows"][0]["solution"])[frame["episode"]["steps_used"]]})
        client.ok("POST", f"/api/sessions/{gid}/act", {"action": 1})
        assert client.ok("POST", f"/api/sessions/{gid}/reset")["restarted"] == "level"
        fresh = client.ok("POST", f"/api/sessions/{gid}/reset")
        assert fresh["restarted"] == "game"
        assert fresh["episode"] == first["episode"] and fresh["observation"] == first["observation"]
        view = client.ok("GET", f"/api/scorecards/{sid}")["games"]
        assert view["practice"]["finished"] == 0 and view["practice"]["solved"] == 0


def arc(client: Api, command: str, body: dict) -> dict:
    return client.ok("POST", f"/api/cmd/{command}", body)


def arc_started(base: str, version: str, restarts: str) -> tuple[Api, str, str, dict]:
    """A new key's ARC game of ``version`` (whose tags name ``restarts``), started: the
    client, the game id, the scorecard and the first FrameData."""
    client = keyed(base, f"arc-{version}")
    game = w.game_id(version)
    assert f"restarts-{restarts}" in client.ok("GET", f"/api/games/{game}")["tags"]
    card = client.ok("POST", "/api/scorecard/open", {})["card_id"]
    return client, game, card, arc(client, "RESET", {"card_id": card, "game_id": game})


def test_arc_reset_restarts_the_level_then_the_game_where_the_game_allows_it(data, tmp_path):
    with server(data["pub"], tmp_path / "s.sqlite") as s:
        client, game, card, start = arc_started(s.base, "pub", "game")
        guid = start["guid"]
        moved = arc(client, "ACTION2", {"game_id": game, "guid": guid})
        assert moved["frame"] != start["frame"]
        level = arc(client, "RESET", {"card_id": card, "game_id": game, "guid": guid})
        assert level["frame"] == start["frame"] and not level["full_reset"]
        fresh = arc(client, "RESET", {"card_id": card, "game_id": game, "guid": guid})
        assert fresh["frame"] == start["frame"] and fresh["full_reset"]
        view = client.ok("GET", f"/api/scorecard/{card}")
        assert view["environments"][0]["runs"][0]["actions"] == 0


def test_arc_reset_in_a_level_only_game_never_restarts_the_game(data, tmp_path):
    with server(data["lv"], tmp_path / "s.sqlite") as s:
        client, game, card, start = arc_started(s.base, "lv", "level")
        arc(client, "ACTION2", {"game_id": game, "guid": start["guid"]})
        for _ in range(2):
            again = arc(client, "RESET", {"card_id": card, "game_id": game,
                                          "guid": start["guid"]})
            assert again["frame"] == start["frame"] and not again["full_reset"]
        view = client.ok("GET", f"/api/scorecard/{card}")
        assert view["environments"][0]["runs"][0]["actions"] == 1


def test_pictures_of_one_state_on_levels_of_two_games_are_kept_apart(data):
    from serve.arena.images import ImageCache

    standard, expert = data["t1"].levels[0], data["x1"].levels[0]
    state = standard.level.start._replace(crates=expert.level.start.crates)
    cache = ImageCache()
    assert cache.get(standard, state, 1).b64 != cache.get(expert, state, 1).b64


def test_play_command_plays_the_game_it_is_given_and_refuses_an_unserved_one(data, tmp_path):
    with server([data["t1"], data["x1"]], tmp_path / "s.sqlite") as s:
        played = CliRunner().invoke(main, ["play", "--url", s.base, "--register", "second",
                                           "--game", "expert", "--seed", "3"])
        assert played.exit_code == 0, played.output
        score = json.loads(played.stdout.split("scorecard:")[0])
        assert score["episodes"] == len(data["expert"]) != len(data["rows"])
        assert f"episodes finished: {len(data['expert'])}/{len(data['expert'])}" in played.stderr
        board = Api(s.base).ok("GET", "/api/leaderboard?game=expert")
        assert "second" in json.dumps(board)
        refused = CliRunner().invoke(main, ["play", "--url", s.base, "--register", "third",
                                            "--game", "nope"])
        assert refused.exit_code == 1
        assert refused.output.strip().splitlines()[-1] == (
            "Error: --game 'nope': this server plays 'standard', 'expert'")
