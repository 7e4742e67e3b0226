"""Any process serves any session: workers sharing one SQLite store survive a killed worker, and
two servers on one PostgreSQL store play one session between them, each action stored once."""

from __future__ import annotations

import asyncio
import os
import re
import select
import signal
import sqlite3
import time
from contextlib import contextmanager

import pytest
from serve_support import Api, Process, play, server, write_dataset

from serve.games.dataset import load_version

pytestmark = pytest.mark.slow  # every test here takes seconds

SCORE = ("episodes", "solved", "success_rate", "move_efficiency", "avg_steps_solved",
         "deadlock_rate", "total_actions")


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    root = tmp_path_factory.mktemp("datasets")
    info = write_dataset(root, "t1")
    served = load_version(root, "t1")
    with server(served, tmp_path_factory.mktemp("calm") / "calm.sqlite") as s:
        calm = Api(s.base)
        calm.key = calm.ok("POST", "/api/keys", {"name": "calm"}, status=201)["api_key"]
        sid = calm.ok("POST", "/api/scorecards")["scorecard_id"]
        frame = calm.ok("POST", f"/api/scorecards/{sid}/games/standard/start")
        frame = play(calm, info["rows"], frame)
        expected = calm.ok("POST", f"/api/scorecards/{sid}/close")
        replay = calm.ok("GET", f"/api/replays/{frame['session_id']}")
    return {"root": root, "rows": info["rows"], "expected": expected, "replay": replay}


def settled(client: Api, session_id: str) -> None:
    """Read the session until the port answers steadily again: the kernel closes a killed
    worker's listening socket a little after the kill, and connections it took meanwhile are
    reset (a client retries those; reading is safe to retry, an action is not)."""
    deadline, steady = time.monotonic() + 30, 0
    while steady < 10:
        assert time.monotonic() < deadline, "the other worker did not take over"
        try:
            client.ok("GET", f"/api/sessions/{session_id}")
            steady += 1
        except ConnectionError:
            steady = 0
            time.sleep(0.05)


def begin(base: str, name: str) -> tuple[Api, str, dict]:
    client = Api(base)
    client.key = client.ok("POST", "/api/keys", {"name": name}, status=201)["api_key"]
    sid = client.ok("POST", "/api/scorecards")["scorecard_id"]
    return client, sid, client.ok("POST", f"/api/scorecards/{sid}/games/standard/start")


def test_a_worker_killed_mid_run_loses_nothing_and_the_score_is_the_uninterrupted_one(
        data, tmp_path):
    db = tmp_path / "workers.sqlite"
    served = Process(data["root"], db, "--workers", "2")
    try:
        assert len(served.workers) == 2
        client, sid, frame = begin(served.base, "workers")
        half = data["expected"]["total_actions"] // 2
        frame = play(client, data["rows"], frame, limit=half)
        assert frame["episode"]["steps_used"] > 0  # in the middle of an episode
        victim = served.workers[0]
        os.kill(victim, signal.SIGKILL)
        said = replacement_lines(served, victim)
        settled(client, frame["session_id"])
        frame = play(client, data["rows"], frame)  # the other worker (and a new one) go on
        got = client.ok("POST", f"/api/scorecards/{sid}/close")
        replay = client.ok("GET", f"/api/replays/{frame['session_id']}")
    finally:
        served.stop()
    assert {k: got[k] for k in SCORE} == {k: data["expected"][k] for k in SCORE}
    assert replay["episodes"] == data["replay"]["episodes"]
    with sqlite3.connect(db) as conn:
        stored = conn.execute("SELECT count(*), count(DISTINCT seq), max(seq) FROM actions "
                              "WHERE session_id=?", (frame["session_id"],)).fetchone()
    assert stored == (got["total_actions"],) * 3  # every action once, none lost
    assert said[0].endswith(f"WARNING worker {victim} was killed by SIGKILL; starting another")
    assert re.search(rf"WARNING worker \d+ serves in place of worker {victim}$", said[1]), said


def replacement_lines(served: Process, victim: int, within: float = 60.0) -> list[str]:
    """The server's log lines on ``victim``'s end and its replacement, read as they come."""
    deadline, said = time.monotonic() + within, []
    while len(said) < 2:
        ready, _, _ = select.select([served.proc.stderr], [], [], 1.0)
        assert time.monotonic() < deadline, said
        line = served.proc.stderr.readline().rstrip("\n") if ready else ""
        if f"worker {victim}" in line:
            said.append(line)
    return said


def test_a_second_server_with_workers_cannot_share_a_port_in_use(data, tmp_path):
    from click.testing import CliRunner

    from sokoforge.cli import main

    served = Process(data["root"], tmp_path / "a.sqlite", "--workers", "2")
    try:
        port = int(served.base.rsplit(":", 1)[1])
        result = CliRunner().invoke(main, ["serve", "t1", "--datasets", str(data["root"]),
                                           "--db", str(tmp_path / "b.sqlite"), "--workers", "2",
                                           "--port", str(port)])
        assert result.exit_code == 1 and f"cannot listen on 127.0.0.1:{port}" in result.output
    finally:
        served.stop()


def test_workers_share_the_limits_counted_in_the_store(data, tmp_path):
    served = Process(data["root"], tmp_path / "limits.sqlite", "--workers", "2",
                     "--sessions-per-key", "2")
    try:
        client, _, _ = begin(served.base, "limited")
        statuses = []
        for _ in range(6):  # whichever worker answers, the third session is refused
            sid = client.ok("POST", "/api/scorecards")["scorecard_id"]
            statuses.append(client.call("POST", f"/api/scorecards/{sid}/games/standard/start")[0])
        assert statuses == [200] + [429] * 5
    finally:
        served.stop()


def stored_actions(url: str, session_id: str) -> tuple[int, int, int]:
    import asyncpg

    async def count():
        conn = await asyncpg.connect(url)
        try:
            return tuple(await conn.fetchrow(
                "SELECT count(*), count(DISTINCT seq), max(seq) FROM actions "
                "WHERE session_id=$1", session_id))
        finally:
            await conn.close()
    return asyncio.run(count())


@contextmanager
def two_servers(root, url: str):
    """Two servers (two processes, as if on two machines) on one PostgreSQL store."""
    first = Process(root, url)
    try:
        second = Process(root, url)
    except BaseException:
        first.stop()
        raise
    try:
        yield first, second
    finally:
        first.stop()
        second.stop()


def test_two_servers_on_one_postgres_store_alternate_one_session_like_one_server(
        data, postgres):
    url = postgres.database()
    with two_servers(data["root"], url) as (first, second):
        client, sid, frame = begin(first.base, "fleet")
        other = Api(second.base, client.key)
        frame = play([client, other], data["rows"], frame)
        # a scorecard read through the server that did not play the last action is current
        assert other.ok("GET", f"/api/scorecards/{sid}")["games"]["standard"]["state"] == (
            "GAME_OVER")
        got = other.ok("POST", f"/api/scorecards/{sid}/close")
        assert client.ok("POST", f"/api/scorecards/{sid}/close") == got
        replay = client.ok("GET", f"/api/replays/{frame['session_id']}")
    assert {k: got[k] for k in SCORE} == {k: data["expected"][k] for k in SCORE}
    assert replay["episodes"] == data["replay"]["episodes"]
    assert stored_actions(url, frame["session_id"]) == (got["total_actions"],) * 3


def test_a_server_whose_cached_session_was_played_elsewhere_answers_from_the_store(
        data, postgres):
    url = postgres.database()
    with two_servers(data["root"], url) as (first, second):
        client, sid, frame = begin(first.base, "stale")
        gid = frame["session_id"]
        client.ok("POST", f"/api/sessions/{gid}/act", {"action": 1})  # cached by the first
        other = Api(second.base, client.key)
        for _ in range(3):
            seen = other.ok("POST", f"/api/sessions/{gid}/act", {"action": 1})
        assert seen["episode"]["steps_used"] == 4
        # the first server's copy is 3 actions behind: it must not be believed
        assert client.ok("GET", f"/api/sessions/{gid}")["episode"]["steps_used"] == 4
        after = client.ok("POST", f"/api/sessions/{gid}/act", {"action": 1})
        assert after["episode"]["steps_used"] == 5
        # closed through the second server, the session takes no action through the first
        other.ok("POST", f"/api/scorecards/{sid}/close")
        status, body = client.call("POST", f"/api/sessions/{gid}/act", {"action": 1})
        assert status == 409 and "closed" in body["detail"]
    assert stored_actions(url, gid) == (5, 5, 5)


def test_sokoforge_db_in_the_environment_names_a_postgres_store(data, postgres):
    url = postgres.database()
    served = Process(data["root"], None, env={"SOKOFORGE_DB": url})
    try:
        client, _, frame = begin(served.base, "from-env")
        client.ok("POST", f"/api/sessions/{frame['session_id']}/act", {"action": 1})
    finally:
        served.stop()
    assert stored_actions(url, frame["session_id"]) == (1, 1, 1)


def test_a_postgres_store_that_cannot_be_reached_is_refused_in_one_line(data):
    from click.testing import CliRunner

    from sokoforge.cli import main

    start = time.monotonic()
    result = CliRunner().invoke(main, ["serve", "t1", "--datasets", str(data["root"]), "--db",
                                       "postgresql://nobody@127.0.0.1:1/none", "--port", "0"])
    assert result.exit_code == 1 and "cannot" in result.output and "store" in result.output
    assert len(result.output.strip().splitlines()) == 1
    assert time.monotonic() - start < 60
