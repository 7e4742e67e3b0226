"""Loading refuses damaged versions; a killed server continues every session exactly."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner
from serve_support import Api, Process, ServerThread, play, server, write_dataset

from serve.games.dataset import DatasetError, load_version
from serve.limits import Limits
from serve.play import Arena
from serve.stores.sqlite import SQLiteStore
from sokoforge.cli import main


def damaged(tmp_path, how: str):
    root = tmp_path / "datasets"
    write_dataset(root, "v")
    folder = root / "v"
    manifest = json.loads((folder / "manifest.json").read_text())
    if how == "altered":
        (folder / "levels.parquet").write_bytes((folder / "levels.parquet").read_bytes() + b"x")
    elif how == "missing":
        (folder / "levels.parquet").unlink()
    elif how == "format":
        manifest["format"] = 99
        (folder / "manifest.json").write_text(json.dumps(manifest))
    return root


@pytest.mark.parametrize(("how", "message"), [
    ("altered", "does not match its manifest"), ("missing", "levels.parquet is missing"),
    ("format", "unknown format 99")])
def test_loading_refuses_an_altered_missing_or_unknown_format_version(tmp_path, how, message):
    root = damaged(tmp_path, how)
    with pytest.raises(DatasetError, match=message):
        load_version(root, "v")
    result = CliRunner().invoke(main, ["serve", "--datasets", str(root), "--version", "v",
                                       "--db", str(tmp_path / "x.sqlite")])
    assert result.exit_code == 2 and message in result.output
    assert isinstance(result.exception, SystemExit)  # refused, not an escaped exception
    assert len(result.output.strip().splitlines()) == 1


def test_serving_an_unknown_version_says_how_to_build_it(tmp_path):
    result = CliRunner().invoke(main, ["serve", "--datasets", str(tmp_path), "--version", "nope"])
    assert result.exit_code == 2 and "make dataset VERSION=nope" in result.output


def test_an_idle_time_that_is_not_a_number_is_refused(tmp_path):
    result = CliRunner().invoke(main, ["serve", "--datasets", str(tmp_path), "--version", "nope",
                                       "--idle-minutes", "nan"])
    assert result.exit_code == 2 and "--idle-minutes" in result.output
    assert isinstance(result.exception, SystemExit)  # refused, not an escaped exception
    assert len(result.output.strip().splitlines()) == 1


@pytest.mark.slow
def test_kill_9_mid_session_then_restart_finishes_with_the_uninterrupted_score(data, tmp_path):
    rows = data["rows"]
    with server(data["served"], tmp_path / "calm.sqlite") as s:
        calm = Api(s.base)
        calm.key = calm.ok("POST", "/api/keys", {"name": "calm"}, status=201)["api_key"]
        sid = calm.ok("POST", "/api/scorecards")["scorecard_id"]
        frame = play(calm, rows, calm.ok("POST", f"/api/scorecards/{sid}/games/standard/start"))
        expected = calm.ok("POST", f"/api/scorecards/{sid}/close")
        expected_replay = calm.ok("GET", f"/api/replays/{frame['session_id']}")

    db = tmp_path / "crash.sqlite"
    first = Process(data["root"], db, "--keys-per-address", "1")
    try:
        client = Api(first.base)
        client.key = client.ok("POST", "/api/keys", {"name": "crash"}, status=201)["api_key"]
        assert Api(first.base).call("POST", "/api/keys", {"name": "second"})[0] == 429
        sid = client.ok("POST", "/api/scorecards")["scorecard_id"]
        frame = client.ok("POST", f"/api/scorecards/{sid}/games/standard/start")
        half = expected["total_actions"] // 2
        frame = play(client, rows, frame, limit=half)
        assert frame["episode"]["steps_used"] > 0  # killed in the middle of an episode
    finally:
        first.kill9()
    second = Process(data["root"], db)
    try:
        client = Api(second.base, client.key)
        view = client.ok("GET", f"/api/scorecards/{sid}")["games"]["standard"]
        assert view["total_actions"] == half and view["state"] == "IN_PROGRESS"
        now = client.ok("GET", f"/api/sessions/{frame['session_id']}")
        assert now == {**frame, "last": None}  # the same episode, steps and images
        frame = play(client, rows, frame)
        got = client.ok("POST", f"/api/scorecards/{sid}/close")
        replay = client.ok("GET", f"/api/replays/{frame['session_id']}")
    finally:
        second.kill9()
    fields = ("episodes", "solved", "success_rate", "move_efficiency", "avg_steps_solved",
              "deadlock_rate", "total_actions")
    assert {k: got[k] for k in fields} == {k: expected[k] for k in fields}
    assert 0 < got["solved"] < got["episodes"] and got["deadlock_rate"] > 0
    assert replay["episodes"] == expected_replay["episodes"]


class FailingStore(SQLiteStore):
    """A store whose ``write`` fails when told to, as a full disk would."""

    fail_next = False

    async def write(self, write):
        if self.fail_next:
            self.fail_next = False
            raise OSError("disk full")
        await super().write(write)


def test_an_action_the_store_refuses_is_not_played_and_answers_503(data, tmp_path):
    store = FailingStore(tmp_path / "f.sqlite")
    with ServerThread(Arena(data["served"], store, Limits())) as s:
        client = Api(s.base)
        client.key = client.ok("POST", "/api/keys", {"name": "disk"}, status=201)["api_key"]
        sid = client.ok("POST", "/api/scorecards")["scorecard_id"]
        frame = client.ok("POST", f"/api/scorecards/{sid}/games/standard/start")
        path = f"/api/sessions/{frame['session_id']}/act"
        client.ok("POST", path, {"action": 1})
        store.fail_next = True
        status, body = client.call("POST", path, {"action": 1})
        assert status == 503 and "retry" in body["detail"]
        frame = client.ok("POST", path, {"action": 1})
        assert frame["episode"]["steps_used"] == 2
        replay = client.ok("GET", f"/api/replays/{frame['session_id']}")
        assert replay["episodes"][0]["actions"] == "DD"


def test_rotation_starts_a_new_board_keeps_the_old_one_readable_and_keys_survive(data, tmp_path):
    from serve_support import LEVELS

    write_dataset(tmp_path, "t2", LEVELS[:4])
    db = tmp_path / "rotate.sqlite"
    with server(data["served"], db) as s:
        client = Api(s.base)
        client.key = client.ok("POST", "/api/keys", {"name": "veteran"}, status=201)["api_key"]
        sid = client.ok("POST", "/api/scorecards")["scorecard_id"]
        client.ok("POST", f"/api/scorecards/{sid}/close")
    with server(load_version(tmp_path, "t2"), db) as s:
        client = Api(s.base, client.key)
        opened = client.ok("POST", "/api/scorecards")
        assert opened["version"] == "t2" and opened["episodes_per_game"] == 4
        client.ok("POST", f"/api/scorecards/{opened['scorecard_id']}/close")
        board = client.ok("GET", "/api/leaderboard")
        assert board["version"] == "t2" and board["versions"] == ["t1", "t2"]
        assert [e["episodes"] for e in board["entries"]] == [4]
        old = client.ok("GET", "/api/leaderboard?version=t1")
        assert [(e["name"], e["episodes"]) for e in old["entries"]] == [("veteran", 6)]
        assert client.ok("GET", f"/api/scorecards/{sid}")["version"] == "t1"


def test_a_store_that_is_not_a_database_is_refused_in_one_line(data, tmp_path):
    bad = tmp_path / "bad.sqlite"
    bad.write_bytes(b"this is not SQLite" * 100)
    result = CliRunner().invoke(main, ["serve", "--datasets", str(data["root"]), "--version", "t1",
                                       "--db", str(bad), "--port", "0"])
    assert result.exit_code == 1 and "cannot open the store" in result.output
    assert isinstance(result.exception, SystemExit)  # refused, not an escaped exception
    assert len(result.output.strip().splitlines()) == 1
