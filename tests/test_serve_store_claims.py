"""One server per store, a damaged store refused at start, expiry that frees memory, the true
reason for another version's session, and stores of the first schema still served."""

from __future__ import annotations

import asyncio
import json
import sqlite3
import time

import pytest
from click.testing import CliRunner
from serve_support import LEVELS, Api, Process, served_dataset, server, write_dataset

from serve.games.dataset import load_version
from sokoforge.cli import main


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    t1 = served_dataset(tmp_path_factory.mktemp("datasets"))
    write_dataset(t1["root"], "t2", LEVELS[:4])
    return t1


def refused(data, db) -> str:
    """Start a server on ``db``; it must refuse in one line, exit code 1. Returns the line."""
    result = CliRunner().invoke(main, ["serve", "--datasets", str(data["root"]), "t1",
                                       "--db", str(db), "--port", "0"])
    assert result.exit_code == 1, result.output
    assert isinstance(result.exception, SystemExit)  # refused, not an escaped exception
    assert len(result.output.strip().splitlines()) == 1
    return result.output


def played(base: str, actions: int, name: str = "player") -> tuple[Api, str, str]:
    client = Api(base)
    client.key = client.ok("POST", "/api/keys", {"name": name}, status=201)["api_key"]
    sid = client.ok("POST", "/api/scorecards")["scorecard_id"]
    frame = client.ok("POST", f"/api/scorecards/{sid}/games/standard/start")
    for i in range(actions):
        frame = client.ok("POST", f"/api/sessions/{frame['session_id']}/act",
                          {"action": i % 4})
    return client, sid, frame["session_id"]


def after_a_server(data, db, actions: int, killed: bool = True):
    """``db`` after a server played ``actions`` actions on it and was killed (kill -9) or
    stopped as an operator stops it."""
    first = Process(data["root"], db)
    try:
        played(first.base, actions)
    finally:
        first.kill9() if killed else first.stop()
    return db


@pytest.mark.slow
def test_a_second_server_on_one_store_refuses_to_start_naming_the_first_ones_pid(data,
                                                                               tmp_path):
    db = tmp_path / "one.sqlite"
    first = Process(data["root"], db)
    try:
        client, sid, _ = played(first.base, 3)
        line = refused(data, db)
        assert f"pid {first.proc.pid}" in line and "one server" in line
        client.ok("POST", f"/api/scorecards/{sid}/close")
    finally:
        first.stop()
    second = Process(data["root"], db)  # the first one stopped: the store is free again
    second.stop()


@pytest.mark.slow
def test_a_deleted_database_whose_wal_is_left_is_refused(data, tmp_path):
    db = after_a_server(data, tmp_path / "main.sqlite", 10)
    db.unlink()
    line = refused(data, db)
    assert "is missing but its write-ahead log" in line
    assert not db.exists() or db.stat().st_size == 0  # nothing was started on an empty store


@pytest.mark.slow
def test_a_cleanly_stopped_store_without_a_wal_starts(data, tmp_path):
    db = after_a_server(data, tmp_path / "clean.sqlite", 5, killed=False)
    assert not (tmp_path / "clean.sqlite-wal").exists()
    Process(data["root"], db).stop()


def test_stored_actions_that_disagree_with_the_sessions_records_are_refused(data, tmp_path):
    db = after_a_server(data, tmp_path / "count.sqlite", 12, killed=False)
    with sqlite3.connect(db) as conn:
        conn.execute("DELETE FROM actions WHERE seq > 9")
    line = refused(data, db)
    assert "damaged" in line and "1 session(s)" in line


@pytest.mark.slow
def test_a_store_failing_its_integrity_check_is_refused(data, tmp_path):
    db = after_a_server(data, tmp_path / "pages.sqlite", 30, killed=False)
    with sqlite3.connect(db) as conn:
        page = conn.execute("PRAGMA page_size").fetchone()[0]
        pages = conn.execute("PRAGMA page_count").fetchone()[0]
    raw = bytearray(db.read_bytes())
    for p in range(1, pages):  # every page but the header's: b-tree pages full of garbage
        raw[p * page + 8:p * page + 64] = b"\xa5" * 56
    db.write_bytes(bytes(raw))
    line = refused(data, db)
    assert "integrity check" in line or "malformed" in line


class Clock:
    def __init__(self) -> None:
        self.now = 1_900_000_000.0

    def __call__(self) -> float:
        return self.now


def test_expired_sessions_leave_memory_and_no_session_is_replayed_at_start(data, tmp_path):
    clock = Clock()
    db = tmp_path / "idle.sqlite"
    with server(data["served"], db, clock=clock, idle_seconds=600) as s:
        idle, _, idle_sid = played(s.base, 3, "idle")
        busy, _, busy_sid = played(s.base, 3, "busy")
        assert {idle_sid, busy_sid} <= set(s.arena.cache.copies)
        clock.now += 500
        busy.ok("POST", f"/api/sessions/{busy_sid}/act", {"action": 1})
        clock.now += 200
        swept = asyncio.run_coroutine_threadsafe(s.arena.expire_idle(), s.loop).result(10)
        assert swept == 1 and idle_sid not in s.arena.cache.copies
        assert busy_sid in s.arena.cache.copies
    with server(data["served"], db, clock=clock, idle_seconds=600) as s:
        assert s.arena.cache.copies == {}  # nothing replayed at start
        Api(s.base, busy.key).ok("POST", f"/api/sessions/{busy_sid}/act",
                                 {"action": 1})  # loaded when used
        idle_client = Api(s.base, idle.key)
        status, body = idle_client.call("GET", f"/api/sessions/{idle_sid}")
        assert status == 404 and "expired" in body["detail"]
        replay = idle_client.ok("GET", f"/api/replays/{idle_sid}")  # the record stays
        assert replay["state"] == "EXPIRED" and replay["episodes"][0]["steps"] == 3


def test_another_versions_session_and_scorecard_are_refused_with_the_true_reason(data,
                                                                                tmp_path):
    db = tmp_path / "versions.sqlite"
    with server(data["served"], db) as s:
        client, sid, gid = played(s.base, 2)
        other = client.ok("POST", "/api/scorecards")["scorecard_id"]
        closer, closed, _ = played(s.base, 2, "closer")
        Api(s.base, closer.key).ok("POST", f"/api/scorecards/{closed}/close")
    with server(load_version(data["root"], "t2"), db) as s:
        client = Api(s.base, client.key)
        # a closed scorecard of the old version stays readable on both faces
        assert Api(s.base, closer.key).ok("GET", f"/api/scorecard/{closed}")["closed"]
        assert Api(s.base, closer.key).ok("GET", f"/api/scorecards/{closed}")["closed"]
        status, body = client.call("POST", f"/api/sessions/{gid}/act", {"action": 1})
        assert status == 409 and "version t1" in body["detail"]
        assert "does not serve" in body["detail"] and "closed" not in body["detail"]
        status, body = client.call("POST", f"/api/scorecards/{other}/games/standard/start")
        assert status == 409 and "version t1" in body["detail"]
        declared = client.ok("GET", "/api/openapi.json")["paths"]
        for path in ("/api/sessions/{session_id}/act",
                     "/api/scorecards/{scorecard_id}/games/{game}/start"):
            assert "version" in declared[path]["post"]["responses"]["409"]["description"]


FIRST_SCHEMA_TRIGGER = """
CREATE TRIGGER action_to_episode AFTER INSERT ON actions BEGIN
    UPDATE episodes SET steps = steps + 1, actions = actions || substr('UDLR.', NEW.action + 1, 1)
    WHERE session_id = NEW.session_id AND idx = NEW.episode;
END;"""


def test_a_store_of_the_first_schema_is_migrated_and_its_sessions_go_on(data, tmp_path):
    from serve.arena.keys import hash_key
    from serve.stores.sqlite_file import SCHEMA

    db = tmp_path / "old.sqlite"
    owner = hash_key("lsk-old")  # keys are stored hashed: one whose key the test knows
    closed, card, gid = "sc-" + "a" * 24, "sc-" + "b" * 24, "gs-" + "b" * 24
    score = {"episodes": 6, "solved": 3, "success_rate": 0.5, "move_efficiency": 0.1,
             "avg_steps_solved": 9.0, "deadlock_rate": 0.0, "total_actions": 80}
    now = time.time()
    with sqlite3.connect(db) as conn:  # what the first servers wrote
        conn.executescript(SCHEMA + FIRST_SCHEMA_TRIGGER)
        conn.execute("INSERT INTO meta VALUES ('schema', '1')")
        conn.execute("INSERT INTO keys VALUES (?, 'old', 'old', 0)", (owner,))
        conn.execute("INSERT INTO scorecards VALUES (?, ?, 'old', 't1', 'standard', 1, 2, ?, "
                     "0.5, 0.1, 0.0)", (closed, owner, json.dumps(score)))
        conn.execute("INSERT INTO scorecards VALUES (?, ?, 'old', 't1', 'standard', 3, NULL, "
                     "NULL, NULL, NULL, NULL)", (card, owner))
        conn.execute("INSERT INTO sessions VALUES (?, ?, ?, 'standard', 't1', 1, 'IN_PROGRESS', "
                     "?, ?)", (gid, card, owner, now, now))
        conn.executemany("INSERT INTO episodes VALUES (?, ?, 0, 0, 0, 0, '')",
                         [(gid, i) for i in range(len(data["rows"]))])
        for seq, action in enumerate((1, 3, 0), 1):
            conn.execute("INSERT INTO actions VALUES (?, ?, 0, ?, ?)", (gid, seq, action, now))
    first = Process(data["root"], db)
    try:
        client = Api(first.base, "lsk-old")
        frame = client.ok("GET", f"/api/sessions/{gid}")
        assert frame["episode"]["steps_used"] == 3
        frame = client.ok("POST", f"/api/sessions/{gid}/act", {"action": 2})
        assert frame["episode"]["steps_used"] == 4
        assert client.ok("GET", f"/api/replays/{gid}")["episodes"][0]["actions"] == "DRUL"
        board = client.ok("GET", "/api/leaderboard")
        assert [(e["name"], e["scorecard_id"]) for e in board["entries"]] == [("old", closed)]
    finally:
        first.stop()


def test_a_session_is_loaded_from_its_stored_snapshot_not_replayed_from_step_0(data, tmp_path):
    db = tmp_path / "snap.sqlite"
    with server(data["served"], db) as s:
        client, _, gid = played(s.base, 3)
        seen = client.ok("GET", f"/api/sessions/{gid}")
    with sqlite3.connect(db) as conn:  # a replay of these letters would end elsewhere
        conn.execute("UPDATE episodes SET actions='UUU' WHERE session_id=? AND idx=0", (gid,))
    with server(data["served"], db) as s:
        assert Api(s.base, client.key).ok("GET", f"/api/sessions/{gid}") == seen


def test_actions_played_through_workers_keep_when_they_arrived(data, tmp_path):
    """Each stored action's time, read back from the store, falls between the moment its
    request left the client and the moment its answer came back, whichever worker took it."""
    from serve.stores import read_store

    db = tmp_path / "times.sqlite"
    first = Process(data["root"], db, "--workers", "2")
    windows = []
    try:
        client, _, gid = played(first.base, 0)
        for i in range(12):
            sent = time.time()
            client.ok("POST", f"/api/sessions/{gid}/act", {"action": i % 4})
            windows.append((sent, time.time()))
    finally:
        first.stop()

    async def read(store):
        record, _ = await store.session(gid)
        return record.created, (await store.action_times([gid]))[gid]

    created, times = read_store(str(db), read)
    assert len(times) == len(windows) == 12
    for ms, (sent, answered) in zip(times, windows, strict=True):
        assert sent - 0.002 <= created + ms / 1000 <= answered + 0.002
