"""The browser face without a browser: who may play, scorecard pages, replays, tags, the
access log, and browser runs told apart in the store."""

from __future__ import annotations

import base64
import json

import numpy as np
import pytest
from serve_support import Api, server, visible_version

from engine.levels import parse_xsb
from engine.rules import lurd_to_actions
from serve.games.dataset import load_version
from serve.games.episode import replay_states
from serve.games.games import Registry
from serve.web.access_log import AccessLog


def noisy(root, version: str, source: str, game: str) -> None:
    """``root/version``: a copy of ``source`` of ``game`` drawn themed with noise per step."""
    import polars as pl

    from pipeline.spec import load_spec, spec_from_dict
    from pipeline.stages.write import level_looks
    from pipeline.versions.tables import sha256_file, write_parquet

    manifest = json.loads((root / source / "manifest.json").read_text())
    spec = spec_from_dict({**load_spec("standard").to_dict(), "look": "themed", "noise": True})
    df = pl.read_parquet(root / source / "levels.parquet")
    (root / version).mkdir()
    write_parquet(df.with_columns(*level_looks(spec, 0, df["index"].to_list())),
                  root / version / "levels.parquet")
    manifest.update(version=version, game=game, spec=spec.to_dict())
    manifest["files"]["levels.parquet"]["sha256"] = sha256_file(root / version / "levels.parquet")
    (root / version / "manifest.json").write_text(json.dumps(manifest))


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    root = tmp_path_factory.mktemp("datasets")
    hidden = visible_version(root, "h1", "standard", None)["rows"]
    public = visible_version(root, "p1", "practice", "public")["rows"]
    visible_version(root, "h2", "secret", "hidden")
    noisy(root, "n1", "p1", "noisy")
    return {"root": root, "hidden": hidden, "public": public,
            **{v: load_version(root, v) for v in ("h1", "p1", "h2", "n1")}}


def registry(data) -> Registry:
    return Registry([data["h1"], data["p1"], data["h2"], data["n1"]])


def keyed(base: str, name: str) -> Api:
    client = Api(base)
    client.key = client.ok("POST", "/api/keys", {"name": name}, status=201)["api_key"]
    return client


def play(client: Api, card: str, game: str, rows: list[dict], levels: int) -> dict:
    """Solve the first ``levels`` levels of ``game`` on ``card``, then walk into walls once."""
    frame = client.ok("POST", f"/api/scorecards/{card}/games/{game}/start")
    for index in range(levels):
        for action in lurd_to_actions(rows[index]["solution"]):
            frame = client.ok("POST", f"/api/sessions/{frame['session_id']}/act",
                              {"action": action})
    return frame


def test_only_public_games_have_a_play_page(data, tmp_path):
    with server(registry(data), tmp_path / "s.sqlite") as srv:
        anyone = Api(srv.base)
        status, headers, raw = anyone.raw("GET", "/play/practice")
        page = raw.decode()
        assert status == 200 and 'data-game="practice"' in page and "/static/play.js" in page
        # the pages' policy runs same-origin scripts only: every script here is a file
        assert "script-src 'self'" in headers["Content-Security-Policy"]
        assert page.count("<script") == page.count("<script src='/static/") == 2
        landing = anyone.call("GET", "/")[1]
        assert "/play/practice" in landing and "/play/standard" not in landing
        for game in ("standard", "secret", "nosuch"):  # no visibility, hidden, unknown
            status, page = anyone.call("GET", f"/play/{game}")
            assert status == 404 and "hidden benchmark game" in page
        status, headers, script = anyone.raw("GET", "/static/play.js")
        assert status == 200 and headers["Content-Type"].startswith("application/javascript")
        assert b"/api/sessions/" in script
        assert anyone.call("GET", "/static/other.js")[0] == 404


def test_arc_scorecards_keep_tags_source_url_and_opaque_and_refuse_bad_tags(data, tmp_path):
    with server(registry(data), tmp_path / "s.sqlite") as srv:
        agent = keyed(srv.base, "arc agent")
        given = {"tags": ["agent", "experiment-7"], "source_url": "https://example.org/run",
                 "opaque": {"seed": 3, "notes": ["a", "b"]}, "competition_mode": False}
        card = agent.ok("POST", "/api/scorecard/open", given)["card_id"]
        for view in (agent.ok("GET", f"/api/scorecard/{card}"),
                     agent.ok("POST", "/api/scorecard/close", {"card_id": card}),
                     agent.ok("POST", "/api/scorecard/close", {"card_id": card})):
            assert view["tags"] == given["tags"]
            assert view["source_url"] == given["source_url"]
            assert view["opaque"] == given["opaque"]
        for bad in ({"tags": "agent"}, {"tags": [1]}, {"tags": ["x" * 65]},
                    {"opaque": {"x": "y" * 5000}}, {"source_url": "u" * 513}):
            status, body = agent.call("POST", "/api/scorecard/open", bad)
            assert status == 400 and body["error"] == "VALIDATION_ERROR", bad


def test_a_browser_run_is_scored_ranked_and_marked_like_any_other(data, tmp_path):
    with server(registry(data), tmp_path / "s.sqlite") as srv:
        person = keyed(srv.base, "a person")
        card = person.ok("POST", "/api/scorecards", {"source": "browser", "tags": ["browser"]})
        play(person, card["scorecard_id"], "practice", data["public"], 2)
        person.ok("POST", f"/api/scorecards/{card['scorecard_id']}/close")
        agent = keyed(srv.base, "an agent")
        other = agent.ok("POST", "/api/scorecards")["scorecard_id"]
        play(agent, other, "practice", data["public"], 1)
        agent.ok("POST", f"/api/scorecards/{other}/close")
        view = person.ok("GET", f"/api/scorecards/{card['scorecard_id']}")
        assert view["source"] == "browser" and view["tags"] == ["browser"]
        board = Api(srv.base).ok("GET", "/api/leaderboard?game=practice")
        assert [(e["name"], e["source"], e["solved"]) for e in board["entries"]] == [
            ("a person", "browser", 2), ("an agent", None, 1)]
        assert person.call("POST", "/api/scorecards", {"source": "robot"})[0] == 422
        # the page: one table per served game, names linking to their scorecards
        status, page = Api(srv.base).call("GET", "/leaderboard")
        assert status == 200
        assert page.count("<table class=board>") == 4 and "version <code>p1</code>" in page
        assert f"/scorecards/{card['scorecard_id']}" in page and f"/scorecards/{other}" in page
        assert "<span class=tag title='played by a person in the browser'>browser</span>" in page


def test_a_scorecard_page_shows_outcomes_and_tags_to_anyone_but_never_actions(data, tmp_path):
    with server(registry(data), tmp_path / "s.sqlite") as srv:
        agent = keyed(srv.base, "agent")
        card = agent.ok("POST", "/api/scorecards", {"tags": ["<b>nice</b>"]})["scorecard_id"]
        frame = play(agent, card, "standard", data["hidden"], 1)
        agent.ok("POST", f"/api/sessions/{frame['session_id']}/act", {"action": 0})
        solution = data["hidden"][0]["solution"]
        status, page = Api(srv.base).call("GET", f"/scorecards/{card}")
        assert status == 200 and "open (still being played)" in page
        assert "&lt;b&gt;nice&lt;/b&gt;" in page and "<b>nice</b>" not in page
        assert "<span class=ok>solved</span>" in page and "not finished" in page
        assert solution not in page and data["hidden"][0]["xsb"] not in page
        assert "shown only to the key that played it" in page
        # a hidden game's replay buttons are hidden: the script shows them to its key alone
        assert "<table data-session='gs-" in page and "data-owner-only>" in page
        assert "replay</button>" in page and all(
            "hidden>replay" in b for b in page.split("<button type=button data-episode=")[1:])
        agent.ok("POST", f"/api/scorecards/{card}/close")
        status, page = Api(srv.base).call("GET", f"/scorecards/{card}")
        assert "Solved <b>1/6</b>" in page and "<span class=no>unsolved</span>" in page
        status, page = Api(srv.base).call("GET", "/scorecards/sc-" + "0" * 24)
        assert status == 404 and "No such scorecard" in page


def test_replays_are_rendered_from_stored_actions_and_a_hidden_one_goes_only_to_its_key(
        data, tmp_path):
    with server(registry(data), tmp_path / "s.sqlite") as srv:
        owner, other, anyone = keyed(srv.base, "owner"), keyed(srv.base, "other"), Api(srv.base)
        seen = {}
        for game, rows in (("standard", data["hidden"]), ("practice", data["public"]),
                           ("noisy", data["public"])):
            card = owner.ok("POST", "/api/scorecards")["scorecard_id"]
            frame = owner.ok("POST", f"/api/scorecards/{card}/games/{game}/start")
            shown = [frame["observation"]["obs"]]
            session = frame["session_id"]
            for action in [2, "reset", *lurd_to_actions(rows[0]["solution"])]:
                # a bump, a restart of the level (a noisy look draws it anew), then the solve
                frame = (owner.ok("POST", f"/api/sessions/{session}/reset", {})
                         if action == "reset" and game != "standard" else frame
                         if action == "reset" else
                         owner.ok("POST", f"/api/sessions/{session}/act", {"action": action}))
                if action != "reset" or game != "standard":
                    shown.append(frame["observation"]["obs"])
            seen[game] = (session, shown[:-1])  # the last shows the next level
        hidden, public = seen["standard"][0], seen["practice"][0]
        path = f"/api/replays/{hidden}/episodes/0"
        for client in (anyone, other):
            status, body = client.call("GET", path)
            assert status == 404 and "only to the key that played" in body["detail"]
        for client, game in ((owner, "standard"), (anyone, "practice"), (other, "practice"),
                             (anyone, "noisy")):
            session = seen[game][0]
            replay = client.ok("GET", f"/api/replays/{session}/episodes/0")
            frames = [replay["pictures"][i] for i in replay["sequence"]]
            assert replay["solved"] and replay["actions"].startswith("L|" if game != "standard"
                                                                      else "LR")
            # every observation the player saw, in order, then the solved board (which the
            # Frame that ended the level replaced by the next level's start)
            assert frames[:-1] == seen[game][1]
            if game == "noisy":  # every step drawn anew, the same as when it was played
                assert len(set(frames)) == len(frames) - 1  # the restart uses no step
            else:  # the bump repeats the start picture, sent once
                assert len(replay["pictures"]) < len(frames)
        for bad in ("1", "x", "9999999"):  # unplayed, not a number, too long
            assert owner.call("GET", f"/api/replays/{public}/episodes/{bad}")[0] == 404


def test_replay_states_follow_the_action_string_with_restarts():
    level = parse_xsb("#####\n#@$.#\n#####")
    states = replay_states(type("L", (), {"level": level, "max_steps": 9})(), "L|R")
    assert [(s.player, steps) for s, steps in states] == [(6, 0), (6, 1), (6, 1), (7, 2)]
    assert states[-1][0] != level.start


def test_the_access_log_has_one_json_line_per_request_with_templates_and_no_key(
        data, tmp_path):
    path = tmp_path / "access.log"
    with server(registry(data), tmp_path / "s.sqlite", access_log=AccessLog(path)) as srv:
        agent = keyed(srv.base, "logged agent")
        card = agent.ok("POST", "/api/scorecards")["scorecard_id"]
        frame = agent.ok("POST", f"/api/scorecards/{card}/games/standard/start")
        agent.ok("POST", f"/api/sessions/{frame['session_id']}/act", {"action": 1})
        agent.call("POST", f"/api/sessions/{frame['session_id']}/act", {"action": 9})
        Api(srv.base).call("GET", "/no/such/path")
        Api(srv.base, "lsk-not-a-key").call("GET", f"/api/scorecards/{card}")
    lines = path.read_text().splitlines()
    entries = [json.loads(line) for line in lines]
    assert len(entries) == 7
    assert [(e["method"], e["route"], e["status"], e["key"]) for e in entries] == [
        ("POST", "/api/keys", 201, None),
        ("POST", "/api/scorecards", 200, "logged agent"),
        ("POST", "/api/scorecards/{scorecard_id}/games/{game}/start", 200, "logged agent"),
        ("POST", "/api/sessions/{session_id}/act", 200, "logged agent"),
        ("POST", "/api/sessions/{session_id}/act", 422, "logged agent"),
        ("GET", "(no route)", 404, None),
        ("GET", "/api/scorecards/{scorecard_id}", 401, None)]
    text = path.read_text()
    assert agent.key not in text and "lsk-" not in text
    assert card not in text and frame["session_id"] not in text  # templates, not raw paths
    for e in entries:
        assert e["client"] == "127.0.0.1" and e["ms"] >= 0 and e["bytes"] > 0
        assert e["time"].endswith("+00:00")
    assert entries[3]["bytes"] > 16_000  # the act's Frame with two pictures


def test_the_access_log_names_the_client_behind_a_trusted_proxy(data, tmp_path):
    from serve.limits import parse_networks

    path = tmp_path / "access.log"
    with server(registry(data), tmp_path / "s.sqlite", access_log=AccessLog(path),
                trusted_proxies=parse_networks(["127.0.0.1"])) as srv:
        Api(srv.base).call("GET", "/api/spec", headers={"X-Forwarded-For": "203.0.113.9"})
    assert json.loads(path.read_text())["client"] == "203.0.113.9"


def test_serve_refuses_an_access_log_it_cannot_write_in_one_line(data, tmp_path):
    from click.testing import CliRunner

    from sokoforge.cli import main

    result = CliRunner().invoke(main, ["serve", "p1", "--datasets", str(data["root"]),
                                       "--db", str(tmp_path / "s.sqlite"), "--port", "0",
                                       "--access-log", str(tmp_path)])
    assert result.exit_code == 1 and "cannot write the access log" in result.output
    assert "Traceback" not in result.output


def test_b64_frames_decode_to_the_rendered_start(data, tmp_path):
    with server(registry(data), tmp_path / "s.sqlite") as srv:
        owner = keyed(srv.base, "decoder")
        card = owner.ok("POST", "/api/scorecards")["scorecard_id"]
        frame = owner.ok("POST", f"/api/scorecards/{card}/games/practice/start")
        frame = owner.ok("POST", f"/api/sessions/{frame['session_id']}/act", {"action": 0})
        replay = Api(srv.base).ok("GET", f"/api/replays/{frame['session_id']}/episodes/0")
        start = np.frombuffer(base64.b64decode(replay["pictures"][0]), np.uint8)
        served = data["p1"].levels[0]
        assert np.array_equal(start.reshape(64, 64, 3), served.frame(served.level.start, 0))


def test_an_access_log_line_is_json_whatever_a_client_address_or_name_holds():
    from serve.web.access_log import line

    hostile = 'a"b\\c\n\x00\u2028é'
    for at in (1_764_581_209.0, 1_764_581_209.9995, 1_764_581_210.5):
        entry = json.loads(line((at, "GET", "/x/{id}", 200, 0.0012345, 10, hostile, hostile)))
        assert entry["client"] == hostile and entry["key"] == hostile
        assert entry["time"].startswith("2025-12-01T09:26:") and entry["ms"] == 1.234
    assert json.loads(line((0.0, "GET", "(no route)", 404, 0.0, 0, "::1", None)))["key"] is None


def test_a_public_levels_solution_is_shown_to_anyone_and_a_hidden_ones_to_no_one(data, tmp_path):
    from engine.pictures.look import painter

    with server(registry(data), tmp_path / "s.sqlite") as srv:
        anyone = Api(srv.base)
        row = data["public"][2]
        shown = anyone.ok("GET", "/api/solutions/practice/2")
        assert shown["actions"] == row["solution"].upper()
        assert shown["steps"] == shown["optimal"] == row["optimal_moves"]
        level = parse_xsb(row["xsb"])
        drawn = painter(level)
        frames = [np.frombuffer(base64.b64decode(shown["pictures"][i]), np.uint8)
                  .reshape(64, 64, 3) for i in shown["sequence"]]
        assert len(frames) == row["optimal_moves"] + 1
        assert np.array_equal(frames[0], drawn.frame(level.start, 0))
        for path in ("/api/solutions/standard/0", "/api/solutions/secret/0",  # hidden games
                     "/api/solutions/practice/99", "/api/solutions/nosuch/0"):
            status, body = anyone.call("GET", path)
            assert status == 404, path
            assert row["solution"] not in json.dumps(body)
        # the pages: a public game's rows and the play page offer it, a hidden game's do not
        agent = keyed(srv.base, "looker")
        for game in ("practice", "standard"):
            card = agent.ok("POST", "/api/scorecards")["scorecard_id"]
            agent.ok("POST", f"/api/scorecards/{card}/games/{game}/start")
            page = anyone.ok("GET", f"/scorecards/{card}")
            assert ("data-solution=" in page) == (game == "practice"), game
        assert "id=show-solution" in anyone.ok("GET", "/play/practice")


def test_the_home_and_play_pages_say_what_the_set_is_and_in_which_order(data, tmp_path):
    """Public or hidden (or drawn from a public seed, as the demo), and a build's ramp or an
    imported collection's file order; every page has an icon, so no browser asks in vain."""
    from pathlib import Path

    from serve_support import LEVELS

    from pipeline.stages.importing import import_collection
    from pipeline.workers import Workers

    source = tmp_path / "mine.xsb"
    source.write_text("\n".join(LEVELS))
    root = tmp_path / "datasets"
    root.mkdir()
    import_collection("mine", [source], datasets=root, game="mine",
                      workers=Workers(show_progress=False))
    demo = load_version(Path(__file__).resolve().parent.parent / "datasets", "demo")
    said = {}
    for name, served in (("mine", load_version(root, "mine")), ("h1", data["h1"]),
                         ("demo", demo)):
        with server(Registry([served]), tmp_path / f"{name}.sqlite") as srv:
            anyone = Api(srv.base)
            said[name] = " ".join(anyone.call("GET", "/")[1].split())
            if name == "mine":
                said["play"] = " ".join(anyone.call("GET", "/play/mine")[1].split())
                status, headers, icon = anyone.raw("GET", "/favicon.ico")
                assert status == 200 and headers["Content-Type"] == "image/svg+xml"
                assert icon.startswith(b"<svg") and anyone.raw(
                    "GET", "/static/favicon.svg")[2] == icon
    assert (f"{len(LEVELS)} public Sokoban levels, played in the order of its files"
            in said["mine"])
    assert f"{len(LEVELS)} public levels, played in the order of its files" in said["play"]
    assert "easiest first" not in said["play"] and "hidden" not in said["mine"]
    assert f"{len(LEVELS)} hidden Sokoban levels, played in order, easiest first" in said["h1"]
    assert ("100 Sokoban levels drawn from the public seed 2026 (not shown to people here), "
            "played in order, easiest first") in said["demo"]
    assert "hidden Sokoban" not in said["demo"]
    for page in said.values():
        assert "<link rel=icon href='/static/favicon.svg' type='image/svg+xml'>" in page


def _routes_giving_actions() -> set[str]:
    """Every route whose declared answer holds an action string (``actions``, a string)."""
    from serve.app import all_routes

    def holds(schema: object) -> bool:
        if isinstance(schema, dict):
            found = schema.get("properties", {}).get("actions", {})
            return found.get("type") == "string" or any(holds(v) for v in schema.values())
        return isinstance(schema, list) and any(holds(v) for v in schema)

    return {r.operation for r in all_routes() if any(holds(b) for b in r.bodies.values())}


def test_every_route_that_gives_actions_follows_one_visibility_rule(data, tmp_path):
    """Hidden: the player's key alone sees its actions; public and published (a hidden
    round's version made public, as round publish writes its manifest): anyone."""
    root = tmp_path / "datasets"
    visible_version(root, "r1", "r1", "public")
    manifest = json.loads((root / "r1" / "manifest.json").read_text())
    (root / "r1" / "manifest.json").write_text(json.dumps({**manifest, "public_seed": "7"}))
    games = Registry([data["h1"], data["p1"], load_version(root, "r1")])
    assert _routes_giving_actions() == {"get_replay", "get_episode_replay", "get_solution"}
    with server(games, tmp_path / "s.sqlite") as srv:
        anyone, player, other = Api(srv.base), keyed(srv.base, "owner"), keyed(srv.base, "other")
        for game, shown in (("standard", False), ("practice", True), ("r1", True)):
            card = player.ok("POST", "/api/scorecards")["scorecard_id"]
            sid = play(player, card, game, data["hidden"], 1)["session_id"]
            for viewer, owner in ((anyone, False), (other, False), (player, True)):
                replay = viewer.ok("GET", f"/api/replays/{sid}")
                assert replay["owner_view"] is owner
                actions = replay["episodes"][0].get("actions")
                status, episode = viewer.call("GET", f"/api/replays/{sid}/episodes/0")
                if shown or owner:
                    assert actions and status == 200 and episode["actions"] == actions, game
                else:
                    assert actions is None and status == 404, game
                status, solution = viewer.call("GET", f"/api/solutions/{game}/0")
                assert (status == 200 and solution["actions"]) if shown else status == 404
