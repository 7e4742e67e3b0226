"""The store under an unlucky operator: one owner per file whatever its name, a crash then an
ordinary read still served, a lost or damaged log tail refused, workers that die with their
server, and a write-ahead log that stays bounded under sustained load."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import threading
import time
from contextlib import contextmanager

import pytest
from serve_support import Api, Process
from test_serve_store_claims import played

pytestmark = pytest.mark.slow  # every test here takes seconds


def refused(data, db) -> str:
    """Start ``sokoforge serve`` on ``db``: it must refuse in one line, exit code 1, in time
    (a server that starts instead is stopped and fails the test). Returns the line."""
    try:
        done = subprocess.run([sys.executable, "-c", "from sokoforge.cli import main; main()",
                               "serve", "t1", "--datasets", str(data["root"]), "--db", str(db),
                               "--port", "0"], capture_output=True, text=True, timeout=90)
    except subprocess.TimeoutExpired:
        pytest.fail(f"serve started on {db} instead of refusing")
    assert done.returncode == 1, done.stderr
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr
    return done.stderr


def stored_steps(base: str, client: Api, gid: str) -> int:
    """How many of the session's actions the server has (its replay, as the owner sees it)."""
    return sum(e["steps"] for e in Api(base, client.key).ok("GET", f"/api/replays/{gid}")[
        "episodes"])


def test_another_name_of_a_served_store_is_refused_and_creates_no_file(data, tmp_path):
    db = tmp_path / "a.sqlite"
    first = Process(data["root"], db)
    try:
        client, sid, _ = played(first.base, 3)
        os.link(db, tmp_path / "b.sqlite")  # a hard link
        (tmp_path / "c.sqlite").symlink_to(db)
        before = sorted(os.listdir(tmp_path))
        # a hard link, a symlink, another spelling of the path, and the link again
        for name in ("b.sqlite", "c.sqlite", "/./a.sqlite", "b.sqlite"):
            line = refused(data, f"{tmp_path}/{name}")
            assert f"pid {first.proc.pid}" in line and "one server" in line
            assert sorted(os.listdir(tmp_path)) == before  # no -wal, -shm or lock file
        client.ok("POST", f"/api/scorecards/{sid}/close")
    finally:
        first.stop()
    # stopped, the store still has two names, each of which would get its own log
    line = refused(data, tmp_path / "b.sqlite")
    assert "2 names" in line
    (tmp_path / "b.sqlite").unlink()
    Process(data["root"], db).stop()


def test_a_store_read_after_a_crash_is_served_with_every_acknowledged_action(data, tmp_path):
    db = tmp_path / "read.sqlite"
    first = Process(data["root"], db)
    try:
        client, _, gid = played(first.base, 25)
    finally:
        first.kill9()
    # any ordinary read-write open (a backup, a look at a table) checkpoints the log into the
    # database and removes it on close
    conn = sqlite3.connect(db)
    conn.execute("SELECT count(*) FROM keys").fetchone()
    conn.close()
    assert not (tmp_path / "read.sqlite-wal").exists()
    second = Process(data["root"], db)
    try:
        assert stored_steps(second.base, client, gid) == 25
    finally:
        second.stop()


@contextmanager
def commits_kept_in_the_log(db):
    """A reader outside the server holding its snapshot: checkpoints cannot copy later commits
    into the database, so they stay in the write-ahead log alone (as under a crash mid-way)."""
    conn = sqlite3.connect(db, isolation_level=None)
    conn.setconfig(sqlite3.SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, True)
    conn.execute("BEGIN")
    conn.execute("SELECT count(*) FROM actions").fetchone()
    try:
        yield
    finally:
        conn.close()


def killed_with_commits_in_the_log(data, db, actions: int) -> tuple[Api, str]:
    first = Process(data["root"], db)
    try:
        with commits_kept_in_the_log(db):
            client, _, gid = played(first.base, actions)
            first.kill9()
    finally:
        if first.proc.poll() is None:
            first.kill9()
    return client, gid


def test_a_wal_deleted_after_a_kill_is_refused_instead_of_losing_actions(data, tmp_path):
    db = tmp_path / "wal.sqlite"
    killed_with_commits_in_the_log(data, db, 40)
    (tmp_path / "wal.sqlite-wal").unlink()
    line = refused(data, db)
    assert "were acknowledged" in line and "-wal was lost or damaged" in line


def test_a_damaged_wal_after_a_kill_is_refused_until_the_loss_is_accepted(data, tmp_path):
    db = tmp_path / "torn.sqlite"
    client, gid = killed_with_commits_in_the_log(data, db, 84)
    wal = tmp_path / "torn.sqlite-wal"
    raw = bytearray(wal.read_bytes())
    middle = len(raw) // 2
    raw[middle:middle + 4096] = b"\x5a" * 4096  # frames from here on fail their checksums
    wal.write_bytes(bytes(raw))
    line = refused(data, db)
    assert "were acknowledged" in line and "torn.sqlite.acked" in line
    assert wal.read_bytes() == bytes(raw)  # the refusal left the log for whoever restores it
    (tmp_path / "torn.sqlite.acked").unlink()  # the operator accepts the loss
    second = Process(data["root"], db)
    try:
        assert 0 < stored_steps(second.base, client, gid) < 84
    finally:
        second.stop()


def _gone(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rpartition(")")[2].split()[0] == "Z"
    except FileNotFoundError:
        return True


def test_workers_die_with_a_killed_server_and_a_restart_takes_the_store(data, tmp_path):
    db = tmp_path / "orphans.sqlite"
    first = Process(data["root"], db, "--workers", "2")
    try:
        client, _, gid = played(first.base, 5)
        assert len(first.workers) == 2
    finally:
        first.kill9()
    deadline = time.monotonic() + 10
    while not all(_gone(p) for p in first.workers):
        assert time.monotonic() < deadline, "workers outlived their server"
        time.sleep(0.05)
    second = Process(data["root"], db, "--workers", "2")
    try:
        assert stored_steps(second.base, client, gid) == 5
    finally:
        second.stop()


LOAD_SECONDS = 60.0
WAL_BOUND = 64 * 1024 * 1024


@pytest.mark.slow
def test_the_wal_stays_under_64_mb_while_8_sessions_play_for_a_minute(data, tmp_path):
    db = tmp_path / "busy.sqlite"
    wal = tmp_path / "busy.sqlite-wal"
    srv = Process(data["root"], db, "--keys-per-address", "8", "--scorecards-per-day", "100000",
                  "--sessions-per-address", "8")
    largest, acted, stop, failed = [0], [0], threading.Event(), []

    def player(n: int) -> None:
        try:
            play(n)
        except BaseException as e:
            failed.append(e)
            raise

    def play(n: int) -> None:
        client = Api(srv.base)
        client.key = client.ok("POST", "/api/keys", {"name": f"load{n}"}, status=201)["api_key"]
        while not stop.is_set():
            sid = client.ok("POST", "/api/scorecards")["scorecard_id"]
            frame = client.ok("POST", f"/api/scorecards/{sid}/games/standard/start")
            while frame["state"] != "GAME_OVER" and not stop.is_set():
                frame = client.ok("POST", f"/api/sessions/{frame['session_id']}/act",
                                  {"action": acted[0] % 4})
                acted[0] += 1
            client.ok("POST", f"/api/scorecards/{sid}/close")

    try:
        threads = [threading.Thread(target=player, args=(n,)) for n in range(8)]
        for t in threads:
            t.start()
        end = time.monotonic() + LOAD_SECONDS
        while time.monotonic() < end:
            largest[0] = max(largest[0], wal.stat().st_size if wal.exists() else 0)
            time.sleep(0.05)
        stop.set()
        for t in threads:
            t.join(60)
    finally:
        srv.stop()
    print(f"{acted[0]} actions in {LOAD_SECONDS:g} s; largest WAL {largest[0] / 2**20:.1f} MB")
    assert not failed
    assert acted[0] > 2000  # enough load that an unbounded log (~14 KB per action) passes 28 MB
    assert largest[0] < WAL_BOUND
