"""The embedded store: one SQLite file in WAL mode, written by one thread with group commit.

Requests queue their work to a dedicated database thread, so the event loop never waits on
the disk. The thread takes everything queued, runs it in one transaction (a savepoint per
request, so one refusal does not undo the others), commits, and only then answers each
request: every acknowledged write is committed to the write-ahead log, which survives a
killed process (``synchronous=NORMAL``, the default). ``synchronous=FULL`` also syncs the
log to disk at each commit, so acknowledged writes survive power loss as well.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import queue
import sqlite3
import threading
from collections.abc import Callable
from concurrent.futures import Future
from pathlib import Path
from typing import Any

from serve.store import (
    ActionRecord,
    EpisodeRecord,
    KeyRecord,
    ScorecardRecord,
    SessionRecord,
    Standing,
    Store,
    StoreConflict,
    StoreLimit,
)

SCHEMA_VERSION = 1
MAX_BATCH = 1024
CHECKPOINT_SECONDS = 1.0

SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (k TEXT PRIMARY KEY, v TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS keys (
    key_hash TEXT PRIMARY KEY, name TEXT NOT NULL, name_fold TEXT NOT NULL UNIQUE,
    created REAL NOT NULL);
CREATE TABLE IF NOT EXISTS scorecards (
    id TEXT PRIMARY KEY, key_hash TEXT NOT NULL, name TEXT NOT NULL, version TEXT NOT NULL,
    game TEXT NOT NULL, opened REAL NOT NULL, closed REAL, result TEXT,
    success_rate REAL, move_efficiency REAL, deadlock_rate REAL);
CREATE INDEX IF NOT EXISTS scorecards_board ON scorecards (version, closed);
CREATE TABLE IF NOT EXISTS sessions (
    id TEXT PRIMARY KEY, scorecard_id TEXT NOT NULL, key_hash TEXT NOT NULL, game TEXT NOT NULL,
    version TEXT NOT NULL, parallel INTEGER NOT NULL, state TEXT NOT NULL,
    created REAL NOT NULL, last_active REAL NOT NULL);
CREATE INDEX IF NOT EXISTS sessions_scorecard ON sessions (scorecard_id);
CREATE TABLE IF NOT EXISTS episodes (
    session_id TEXT NOT NULL, idx INTEGER NOT NULL, done INTEGER NOT NULL, solved INTEGER NOT NULL,
    deadlocked INTEGER NOT NULL, steps INTEGER NOT NULL, actions TEXT NOT NULL,
    PRIMARY KEY (session_id, idx)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS actions (
    session_id TEXT NOT NULL, seq INTEGER NOT NULL, episode INTEGER NOT NULL,
    action INTEGER NOT NULL, at REAL NOT NULL,
    PRIMARY KEY (session_id, seq)) WITHOUT ROWID;
-- actions 0-3 are the moves U D L R; 4 is a wait ('.'), a step that changes nothing
CREATE TRIGGER IF NOT EXISTS action_to_episode AFTER INSERT ON actions BEGIN
    UPDATE episodes SET steps = steps + 1, actions = actions || substr('UDLR.', NEW.action + 1, 1)
    WHERE session_id = NEW.session_id AND idx = NEW.episode;
END;
CREATE TABLE IF NOT EXISTS counters (
    kind TEXT NOT NULL, subject TEXT NOT NULL, day TEXT NOT NULL, count INTEGER NOT NULL,
    PRIMARY KEY (kind, subject, day)) WITHOUT ROWID;
"""

_STOP = object()


def _settle(outcomes: list[tuple[asyncio.Future, bool, Any]]) -> None:
    for fut, ok, value in outcomes:
        if fut.cancelled():
            continue
        if ok:
            fut.set_result(value)
        else:
            fut.set_exception(value)


class SQLiteStore(Store):
    """``Store`` on one SQLite file; all database work runs on one thread, in batches."""

    def __init__(self, path: str | Path, synchronous: str = "NORMAL") -> None:
        if synchronous.upper() not in ("FULL", "NORMAL"):
            raise ValueError(f"synchronous must be FULL or NORMAL, got {synchronous!r}")
        self.path = str(path)
        self.synchronous = synchronous.upper()
        self._jobs: queue.SimpleQueue = queue.SimpleQueue()
        self._thread: threading.Thread | None = None

    # -- the database thread ------------------------------------------------------------
    async def start(self) -> None:
        if self.path != ":memory:":
            Path(self.path).parent.mkdir(parents=True, exist_ok=True)
        self._loop = asyncio.get_running_loop()
        self._pending: list = []
        ready: Future = Future()
        self._thread = threading.Thread(target=self._run, args=(ready,), name="sqlite-store",
                                        daemon=True)
        self._thread.start()
        await asyncio.wrap_future(ready)
        self._stop_checkpoints = threading.Event()
        self._checkpointer = threading.Thread(target=self._checkpoints, daemon=True,
                                              name="sqlite-checkpoint")
        self._checkpointer.start()

    async def close(self) -> None:
        if self._thread is not None:
            if self._pending:
                self._hand_over()
            self._jobs.put([_STOP])
            self._stop_checkpoints.set()
            loop = asyncio.get_running_loop()
            await loop.run_in_executor(None, self._thread.join)
            await loop.run_in_executor(None, self._checkpointer.join)
            self._thread = None

    def _checkpoints(self) -> None:
        """Copy the log into the database now and then, without blocking the writer."""
        conn = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        conn.execute(f"PRAGMA synchronous={self.synchronous}")
        while not self._stop_checkpoints.wait(CHECKPOINT_SECONDS):
            with contextlib.suppress(sqlite3.Error):
                conn.execute("PRAGMA wal_checkpoint(PASSIVE)")
        with contextlib.suppress(sqlite3.Error):
            conn.execute("PRAGMA wal_checkpoint(PASSIVE)")
        conn.close()

    def _run(self, ready: Future) -> None:
        try:
            conn = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute(f"PRAGMA synchronous={self.synchronous}")
            conn.execute("PRAGMA foreign_keys=OFF")
            # checkpoints (which sync the database file) run on their own thread, off the
            # commit path, so a commit never waits for one
            conn.execute("PRAGMA wal_autocheckpoint=0")
            conn.executescript(SCHEMA)
            row = conn.execute("SELECT v FROM meta WHERE k='schema'").fetchone()
            if row is None:
                conn.execute("INSERT INTO meta VALUES ('schema', ?)", (str(SCHEMA_VERSION),))
            elif int(row[0]) != SCHEMA_VERSION:
                raise RuntimeError(f"{self.path} has store schema {row[0]}, this server "
                                   f"reads {SCHEMA_VERSION}")
        except Exception as e:
            ready.set_exception(e)
            return
        ready.set_result(None)
        stop = False
        while not stop:
            batch = list(self._jobs.get())
            while len(batch) < MAX_BATCH:
                try:
                    batch.extend(self._jobs.get_nowait())
                except queue.Empty:
                    break
            if _STOP in batch:
                stop = True
                batch = [j for j in batch if j is not _STOP]
            if batch:
                self._run_batch(conn, batch)
        conn.close()

    def _run_batch(self, conn: sqlite3.Connection, batch: list) -> None:
        outcomes: list[tuple[asyncio.Future, bool, Any]] = []
        try:
            conn.execute("BEGIN IMMEDIATE")
            for fn, fut, guarded in batch:
                # a job of one statement is atomic by itself; others get a savepoint
                if guarded:
                    conn.execute("SAVEPOINT job")
                try:
                    value = fn(conn)
                except Exception as e:
                    if guarded:
                        conn.execute("ROLLBACK TO job")
                        conn.execute("RELEASE job")
                    outcomes.append((fut, False, e))
                else:
                    if guarded:
                        conn.execute("RELEASE job")
                    outcomes.append((fut, True, value))
            conn.execute("COMMIT")
        except Exception as e:
            if conn.in_transaction:
                with contextlib.suppress(sqlite3.Error):
                    conn.execute("ROLLBACK")
            outcomes = [(fut, False, e) for _, fut, _ in batch]
        self._loop.call_soon_threadsafe(_settle, outcomes)  # one wake-up per batch

    async def _call(self, fn: Callable[[sqlite3.Connection], Any], guarded: bool = True) -> Any:
        """Queue ``fn`` for the database thread and wait until its transaction committed;
        ``guarded=False`` for a job of one statement, which needs no savepoint of its own.

        Jobs queued during one turn of the event loop go to the thread together, so the
        thread is woken once per turn, not once per request, and commits them as one batch.
        """
        if self._thread is None:
            raise RuntimeError("the store is not started")
        fut = self._loop.create_future()
        if not self._pending:
            self._loop.call_soon(self._hand_over)
        self._pending.append((fn, fut, guarded))
        return await fut

    def _hand_over(self) -> None:
        pending, self._pending = self._pending, []
        self._jobs.put(pending)

    # -- keys and counters ----------------------------------------------------------------
    @staticmethod
    def _bump(conn: sqlite3.Connection, kind: str, subject: str, day: str, limit: int) -> int:
        row = conn.execute("SELECT count FROM counters WHERE kind=? AND subject=? AND day=?",
                           (kind, subject, day)).fetchone()
        count = row[0] if row else 0
        if count >= limit:
            raise StoreLimit(count)
        conn.execute("INSERT INTO counters VALUES (?,?,?,1) ON CONFLICT (kind, subject, day) "
                     "DO UPDATE SET count = count + 1", (kind, subject, day))
        return count + 1

    async def create_key(self, record: KeyRecord, counter: str, day: str, limit: int) -> int:
        def job(conn: sqlite3.Connection) -> int:
            if conn.execute("SELECT 1 FROM keys WHERE name_fold=?",
                            (record.name.casefold(),)).fetchone():
                raise StoreConflict(record.name)
            count = self._bump(conn, "keys", counter, day, limit)
            conn.execute("INSERT INTO keys VALUES (?,?,?,julianday('now'))",
                         (record.key_hash, record.name, record.name.casefold()))
            return count
        return await self._call(job)

    async def find_key(self, key_hash: str) -> KeyRecord | None:
        def job(conn: sqlite3.Connection) -> KeyRecord | None:
            row = conn.execute("SELECT key_hash, name FROM keys WHERE key_hash=?",
                               (key_hash,)).fetchone()
            return KeyRecord(*row) if row else None
        return await self._call(job)

    # -- scorecards -------------------------------------------------------------------------
    async def open_scorecard(self, record: ScorecardRecord, day: str, limit: int) -> int:
        def job(conn: sqlite3.Connection) -> int:
            count = self._bump(conn, "scorecards", record.key_hash, day, limit)
            conn.execute("INSERT INTO scorecards (id, key_hash, name, version, game, opened) "
                         "VALUES (?,?,?,?,?,?)", (record.id, record.key_hash, record.name,
                                                  record.version, record.game, record.opened))
            return count
        return await self._call(job)

    _CARD = "SELECT id, key_hash, name, version, game, opened, closed, result FROM scorecards"

    @staticmethod
    def _card(row: tuple) -> ScorecardRecord:
        return ScorecardRecord(*row[:7], result=json.loads(row[7]) if row[7] else None)

    async def scorecard(self, scorecard_id: str) -> ScorecardRecord | None:
        def job(conn: sqlite3.Connection) -> ScorecardRecord | None:
            row = conn.execute(self._CARD + " WHERE id=?", (scorecard_id,)).fetchone()
            return self._card(row) if row else None
        return await self._call(job)

    async def open_scorecards(self) -> list[ScorecardRecord]:
        def job(conn: sqlite3.Connection) -> list[ScorecardRecord]:
            return [self._card(r) for r in conn.execute(self._CARD + " WHERE closed IS NULL")]
        return await self._call(job)

    async def close_scorecard(self, scorecard_id: str, closed: float, result: dict,
                              final: dict[str, list[EpisodeRecord]]) -> dict:
        def job(conn: sqlite3.Connection) -> dict:
            row = conn.execute("SELECT closed, result FROM scorecards WHERE id=?",
                               (scorecard_id,)).fetchone()
            if row is None:
                raise KeyError(scorecard_id)
            if row[0] is not None:
                return json.loads(row[1])
            for session_id, episodes in final.items():
                self._write_episodes(conn, session_id, episodes)
                conn.execute("UPDATE sessions SET state='GAME_OVER' WHERE id=?", (session_id,))
            conn.execute(
                "UPDATE scorecards SET closed=?, result=?, success_rate=?, move_efficiency=?, "
                "deadlock_rate=? WHERE id=?",
                (closed, json.dumps(result), result["success_rate"], result["move_efficiency"],
                 result["deadlock_rate"], scorecard_id))
            return result
        return await self._call(job)

    # -- sessions, episodes, actions -----------------------------------------------------------
    async def create_session(self, record: SessionRecord, episodes: int) -> None:
        def job(conn: sqlite3.Connection) -> None:
            if conn.execute("SELECT 1 FROM sessions WHERE scorecard_id=? AND game=?",
                            (record.scorecard_id, record.game)).fetchone():
                raise StoreConflict(record.game)
            conn.execute("INSERT INTO sessions VALUES (?,?,?,?,?,?,?,?,?)", (
                record.id, record.scorecard_id, record.key_hash, record.game, record.version,
                record.parallel, record.state, record.created, record.last_active))
            conn.executemany("INSERT INTO episodes VALUES (?,?,0,0,0,0,'')",
                             [(record.id, i) for i in range(episodes)])
        await self._call(job)

    _SESSION = ("SELECT id, scorecard_id, key_hash, game, version, parallel, state, created, "
                "max(last_active, coalesce((SELECT max(at) FROM actions a "
                "WHERE a.session_id = sessions.id), 0)) FROM sessions")

    @staticmethod
    def _episodes(conn: sqlite3.Connection, session_id: str) -> list[EpisodeRecord]:
        rows = conn.execute("SELECT idx, done, solved, deadlocked, steps, actions FROM episodes "
                            "WHERE session_id=? ORDER BY idx", (session_id,))
        return [EpisodeRecord(r[0], bool(r[1]), bool(r[2]), bool(r[3]), r[4], r[5]) for r in rows]

    @staticmethod
    def _write_episodes(conn: sqlite3.Connection, session_id: str,
                        episodes: list[EpisodeRecord]) -> None:
        conn.executemany(
            "UPDATE episodes SET done=?, solved=?, deadlocked=?, steps=?, actions=? "
            "WHERE session_id=? AND idx=?",
            [(e.done, e.solved, e.deadlocked, e.steps, e.actions, session_id, e.index)
             for e in episodes])

    async def sessions(self, scorecard_id: str) -> list[tuple[SessionRecord, list[EpisodeRecord]]]:
        def job(conn: sqlite3.Connection) -> list:
            rows = conn.execute(self._SESSION + " WHERE scorecard_id=? ORDER BY created",
                                (scorecard_id,)).fetchall()
            return [(SessionRecord(*r), self._episodes(conn, r[0])) for r in rows]
        return await self._call(job)

    async def session(self, session_id: str) -> tuple[SessionRecord, list[EpisodeRecord]] | None:
        def job(conn: sqlite3.Connection) -> tuple | None:
            row = conn.execute(self._SESSION + " WHERE id=?", (session_id,)).fetchone()
            return (SessionRecord(*row), self._episodes(conn, session_id)) if row else None
        return await self._call(job)

    async def record_action(self, record: ActionRecord) -> None:
        e = record.episode
        row = (record.session_id, record.seq, e.index, record.action, record.at)

        def job(conn: sqlite3.Connection) -> None:
            # the trigger appends the action to its episode row
            conn.execute("INSERT INTO actions VALUES (?,?,?,?,?)", row)

        def ending(conn: sqlite3.Connection) -> None:
            job(conn)
            conn.execute("UPDATE episodes SET done=?, solved=?, deadlocked=? "
                         "WHERE session_id=? AND idx=?",
                         (e.done, e.solved, e.deadlocked, record.session_id, e.index))
            if record.session_state is not None:
                conn.execute("UPDATE sessions SET state=?, last_active=? WHERE id=?",
                             (record.session_state, record.at, record.session_id))

        if e.done or record.session_state is not None:
            await self._call(ending)
        else:
            await self._call(job, guarded=False)

    async def set_session_state(self, session_id: str, state: str) -> None:
        def job(conn: sqlite3.Connection) -> None:
            conn.execute("UPDATE sessions SET state=? WHERE id=?", (state, session_id))
        await self._call(job)

    # -- leaderboard -------------------------------------------------------------------------
    async def leaderboard(self, version: str, limit: int) -> list[Standing]:
        def job(conn: sqlite3.Connection) -> list[Standing]:
            rows = conn.execute("""
                SELECT id, name, closed, result,
                       (SELECT s.id FROM sessions s WHERE s.scorecard_id = c.id LIMIT 1)
                FROM (SELECT *, row_number() OVER (
                          PARTITION BY key_hash ORDER BY success_rate DESC,
                          move_efficiency DESC, deadlock_rate ASC, closed ASC) AS pick
                      FROM scorecards WHERE version=? AND closed IS NOT NULL) AS c
                WHERE pick = 1
                ORDER BY success_rate DESC, move_efficiency DESC, deadlock_rate ASC, closed ASC
                LIMIT ?""", (version, limit)).fetchall()
            return [Standing(r[0], r[4], r[1], r[2], json.loads(r[3])) for r in rows]
        return await self._call(job)

    async def versions(self) -> list[str]:
        def job(conn: sqlite3.Connection) -> list[str]:
            return [r[0] for r in conn.execute(
                "SELECT DISTINCT version FROM scorecards WHERE closed IS NOT NULL ORDER BY 1")]
        return await self._call(job)
