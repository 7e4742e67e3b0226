"""The embedded store: one SQLite file in WAL mode, written by one thread with group commit.

Requests queue their work to a dedicated database thread, so the event loop never waits on
the disk. The thread takes everything queued, runs it in one transaction (a savepoint per
request, so one refusal does not undo the others), commits, and only then answers each
request: every acknowledged write is committed to the write-ahead log, which survives a
killed process (``synchronous=NORMAL``, the default). ``synchronous=FULL`` also syncs the
log to disk at each commit, so acknowledged writes survive power loss as well. Several
processes (one server's workers) may share the file: SQLite's write lock orders their
transactions and the compare-and-set of ``write`` keeps their sessions consistent.
Before any of its processes opens the file, a server claims it (``serve.stores.sqlite_file``).

Every commit that changed something also raises a counter kept twice: in the database (meta
``acked``) and, once committed, in ``<db>.acked`` beside it. A database that holds fewer
commits than that file says were acknowledged lost the end of its write-ahead log (deleted,
damaged, or not synced before a power loss under ``synchronous=NORMAL``): the claim refuses it.
Checkpoints copy the log into the database every second without blocking the writer, and a log
past ``WAL_RESET_BYTES`` is emptied between two transactions, so it stays bounded under load.
"""

from __future__ import annotations

__all__ = ["CHECKPOINT_SECONDS", "MAX_BATCH", "SQLiteStore"]

import asyncio
import contextlib
import fcntl
import json
import math
import os
import queue
import sqlite3
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import serve.stores.sql as sql
from serve.stores.interface import (
    EpisodeRecord,
    Final,
    KeyRecord,
    PlayedEpisode,
    ScorecardRecord,
    SessionRecord,
    StaleSession,
    Standing,
    Store,
    StoreConflict,
    StoreLimit,
    Write,
)
from serve.stores.sqlite_file import BUSY_SECONDS, acked_path, migrate

MAX_BATCH = 1024
CHECKPOINT_SECONDS = 1.0
WAL_CHECK_SECONDS = 0.25  # how often the log's size is looked at
WAL_RESET_BYTES = 8 * 1024 * 1024  # a log past this is truncated between two transactions
RESET_BUSY_MS = 200  # how long a truncation waits for a reader outside the server


_STOP = object()
_LEADERBOARD = {named: sql.leaderboard(named) for named in (False, True)}


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
        self._turns: int | None = None  # the lock file writers of several processes share

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
        """Copy the log into the database now and then, without blocking the writer; empty a
        log grown past ``WAL_RESET_BYTES`` between two transactions."""
        conn = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False,
                               timeout=BUSY_SECONDS)
        conn.execute(f"PRAGMA synchronous={self.synchronous}")
        turns = (None if self.path == ":memory:" else
                 os.open(acked_path(self.path), os.O_RDWR | os.O_CREAT, 0o644))
        next_passive = time.monotonic() + CHECKPOINT_SECONDS
        while not self._stop_checkpoints.wait(WAL_CHECK_SECONDS):
            with contextlib.suppress(sqlite3.Error):
                if time.monotonic() >= next_passive:
                    conn.execute("PRAGMA wal_checkpoint(PASSIVE)")
                    next_passive = time.monotonic() + CHECKPOINT_SECONDS
                if turns is not None and self._wal_bytes() > WAL_RESET_BYTES:
                    self._reset_wal(conn, turns)
        with contextlib.suppress(sqlite3.Error):
            conn.execute("PRAGMA wal_checkpoint(PASSIVE)")
        conn.close()
        if turns is not None:
            os.close(turns)

    def _wal_bytes(self) -> int:
        try:
            return os.stat(self.path + "-wal").st_size
        except FileNotFoundError:
            return 0

    @staticmethod
    def _reset_wal(conn: sqlite3.Connection, turns: int) -> None:
        """Checkpoint the whole log and truncate it while no writer of this server is in a
        transaction (they take turns on ``turns``); a reader outside the server may delay it,
        never for longer than ``RESET_BUSY_MS``."""
        fcntl.flock(turns, fcntl.LOCK_EX)
        try:
            conn.execute(f"PRAGMA busy_timeout={RESET_BUSY_MS}")
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        finally:
            conn.execute(f"PRAGMA busy_timeout={int(BUSY_SECONDS * 1000)}")
            fcntl.flock(turns, fcntl.LOCK_UN)

    def _run(self, ready: Future) -> None:
        try:
            conn = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False,
                                   timeout=BUSY_SECONDS)
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute(f"PRAGMA synchronous={self.synchronous}")
            conn.execute("PRAGMA foreign_keys=OFF")
            # checkpoints (which sync the database file) run on their own thread, off the
            # commit path, so a commit never waits for one
            conn.execute("PRAGMA wal_autocheckpoint=0")
            # a log emptied by a checkpoint is cut back to this size when writing restarts
            conn.execute(f"PRAGMA journal_size_limit={WAL_RESET_BYTES}")
            migrate(conn, self.path)
            self._turns = (None if self.path == ":memory:" else
                           os.open(acked_path(self.path), os.O_RDWR | os.O_CREAT, 0o644))
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
        if self._turns is not None:
            os.close(self._turns)

    def _run_batch(self, conn: sqlite3.Connection, batch: list) -> None:
        if self._turns is None:
            self._run_transaction(conn, batch)
            return
        # processes sharing the file (one server's workers) take turns on a lock the kernel
        # hands over at once; SQLite's own busy handler would sleep and poll instead
        fcntl.flock(self._turns, fcntl.LOCK_EX)
        try:
            self._run_transaction(conn, batch)
        finally:
            fcntl.flock(self._turns, fcntl.LOCK_UN)

    def _run_transaction(self, conn: sqlite3.Connection, batch: list) -> None:
        outcomes: list[tuple[asyncio.Future, bool, Any]] = []
        acked = None
        try:
            conn.execute("BEGIN IMMEDIATE")
            changes = conn.total_changes
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
            if conn.total_changes != changes:  # a commit that changed something is counted
                acked = conn.execute("UPDATE meta SET v = CAST(v AS INTEGER) + 1 "
                                     "WHERE k='acked' RETURNING v").fetchone()
            conn.execute("COMMIT")
        except Exception as e:
            if conn.in_transaction:
                with contextlib.suppress(sqlite3.Error):
                    conn.execute("ROLLBACK")
            outcomes = [(fut, False, e) for _, fut, _ in batch]
            acked = None
        if acked is not None and self._turns is not None:
            # after the commit, before any answer: the mark never runs ahead of the store
            with contextlib.suppress(OSError):
                os.pwrite(self._turns, f"{int(acked[0]):020d}\n".encode(), 0)
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
            raise StoreLimit(count, kind)
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
        return await self._call(job, guarded=False)

    # -- scorecards -------------------------------------------------------------------------
    async def open_scorecard(self, record: ScorecardRecord, day: str, limit: int) -> int:
        first_game, first_version = next(iter(record.games.items()))

        def job(conn: sqlite3.Connection) -> int:
            count = self._bump(conn, "scorecards", record.key_hash, day, limit)
            conn.execute("INSERT INTO scorecards (id, key_hash, name, version, game, opened, "
                         "games, source, meta) VALUES (?,?,?,?,?,?,?,?,?)",
                         (record.id, record.key_hash, record.name, first_version, first_game,
                          record.opened, json.dumps(record.games), record.source,
                          None if record.meta is None else json.dumps(record.meta)))
            return count
        return await self._call(job)

    async def scorecard(self, scorecard_id: str) -> ScorecardRecord | None:
        def job(conn: sqlite3.Connection) -> ScorecardRecord | None:
            row = conn.execute(sql.CARD + " WHERE id=?", (scorecard_id,)).fetchone()
            return sql.card_record(row) if row else None
        return await self._call(job, guarded=False)

    async def close_scorecard(self, scorecard_id: str, closed: float, result: dict,
                              final: list[Final]) -> dict:
        def job(conn: sqlite3.Connection) -> dict:
            row = conn.execute("SELECT closed, result, key_hash, name FROM scorecards "
                               "WHERE id=?", (scorecard_id,)).fetchone()
            if row is None:
                raise KeyError(scorecard_id)
            if row[0] is not None:
                return json.loads(row[1])
            for f in final:
                if conn.execute(sql.CLOSE_SESSION, (f.session_id, f.expected)).rowcount != 1:
                    raise StaleSession(f.session_id)
                self._write_episodes(conn, f.session_id, f.episodes)
            conn.execute(
                "UPDATE scorecards SET closed=?, result=?, success_rate=?, move_efficiency=?, "
                "deadlock_rate=? WHERE id=?",
                (closed, json.dumps(result), result["success_rate"], result["move_efficiency"],
                 result["deadlock_rate"], scorecard_id))
            conn.executemany(sql.INSERT_STANDING,
                             sql.standing_rows(scorecard_id, result, row[2], row[3], closed))
            return result
        return await self._call(job)

    # -- sessions, episodes, actions -----------------------------------------------------------
    async def create_session(self, record: SessionRecord, episodes: int, per_key: int,
                             total: int, live_since: float, address: str = "",
                             per_address: int | None = None) -> None:
        def job(conn: sqlite3.Connection) -> None:
            card = conn.execute("SELECT closed FROM scorecards WHERE id=?",
                                (record.scorecard_id,)).fetchone()
            if card is None or card[0] is not None:
                raise StoreConflict("closed")
            if conn.execute("SELECT 1 FROM sessions WHERE scorecard_id=? AND game=?",
                            (record.scorecard_id, record.game)).fetchone():
                raise StoreConflict("started")
            mine = conn.execute(sql.LIVE_OF_KEY, (record.key_hash, live_since)).fetchone()[0]
            if mine >= per_key:
                raise StoreLimit(mine, "key")
            if per_address is not None:
                near = conn.execute(sql.LIVE_OF_ADDRESS, (address, live_since)).fetchone()[0]
                if near >= per_address:
                    raise StoreLimit(near, "address")
            everyone = conn.execute(sql.LIVE, (live_since,)).fetchone()[0]
            if everyone >= total:
                raise StoreLimit(everyone, "total")
            conn.execute(sql.INSERT_SESSION, (
                record.id, record.scorecard_id, record.key_hash, record.game, record.version,
                record.parallel, record.state, record.created, record.last_active, record.seq,
                record.writer, address))
            conn.executemany("INSERT INTO episodes VALUES (?,?,0,0,0,0,'',NULL)",
                             [(record.id, i) for i in range(episodes)])
        await self._call(job)

    @staticmethod
    def _episodes(conn: sqlite3.Connection, session_id: str) -> list[EpisodeRecord]:
        rows = conn.execute(sql.EPISODES, (session_id,))
        return [EpisodeRecord(r[0], bool(r[1]), bool(r[2]), bool(r[3]), r[4], r[5], r[6])
                for r in rows]

    @staticmethod
    def _write_episodes(conn: sqlite3.Connection, session_id: str,
                        episodes: tuple[EpisodeRecord, ...]) -> None:
        conn.executemany(sql.WRITE_EPISODE, sql.episode_rows(session_id, episodes))

    async def sessions(self, scorecard_id: str) -> list[tuple[SessionRecord, list[EpisodeRecord]]]:
        def job(conn: sqlite3.Connection) -> list:
            rows = conn.execute(sql.SESSION + " WHERE scorecard_id=? ORDER BY created",
                                (scorecard_id,)).fetchall()
            return [(SessionRecord(*r), self._episodes(conn, r[0])) for r in rows]
        return await self._call(job, guarded=False)

    async def session(self, session_id: str) -> tuple[SessionRecord, list[EpisodeRecord]] | None:
        def job(conn: sqlite3.Connection) -> tuple | None:
            row = conn.execute(sql.SESSION + " WHERE id=?", (session_id,)).fetchone()
            return (SessionRecord(*row), self._episodes(conn, session_id)) if row else None
        return await self._call(job, guarded=False)

    async def head(self, session_id: str) -> tuple[int, str, str, float] | None:
        def job(conn: sqlite3.Connection) -> tuple | None:
            return conn.execute(sql.HEAD, (session_id,)).fetchone()
        return await self._call(job, guarded=False)

    async def steps(self, session_id: str, upto: int) -> list[tuple[int, int]]:
        def job(conn: sqlite3.Connection) -> list[tuple[int, int]]:
            return [tuple(r) for r in conn.execute(sql.STEPS, (session_id, upto))]
        return await self._call(job, guarded=False)

    async def action_times(self, session_ids: list[str]) -> dict[str, list[int | None]]:
        def job(conn: sqlite3.Connection) -> dict[str, list[int | None]]:
            return {sid: [r[0] for r in conn.execute(sql.ACTION_TIMES, (sid,))]
                    for sid in session_ids}
        return await self._call(job, guarded=False)

    async def write(self, write: Write) -> None:
        cas, args = sql.conditional_write(write)

        def job(conn: sqlite3.Connection) -> None:
            # no savepoint needed: a refusal changes nothing, and once the compare-and-set
            # holds, (session, seq) is new, so the action row cannot collide
            if conn.execute(cas, args).rowcount != 1:
                raise StaleSession(write.session_id)
            conn.execute(sql.INSERT_ACTION, (write.session_id, write.expected + 1, write.episode,
                                             write.action, write.at, write.ms))
            self._write_episodes(conn, write.session_id, write.episodes)
        await self._call(job, guarded=False)

    async def expire(self, idle_before: float, session_id: str | None = None) -> int:
        def job(conn: sqlite3.Connection) -> int:
            if session_id is None:
                return conn.execute(sql.EXPIRE, (idle_before,)).rowcount
            return conn.execute(sql.EXPIRE + " AND id=?", (idle_before, session_id)).rowcount
        return await self._call(job, guarded=False)

    async def miscounted(self) -> int:
        def job(conn: sqlite3.Connection) -> int:
            return conn.execute(sql.MISCOUNTED).fetchone()[0]
        return await self._call(job, guarded=False)

    # -- leaderboard -------------------------------------------------------------------------
    async def leaderboard(self, version: str, limit: int, before: float | None = None,
                          exclude_anonymous: bool = False) -> list[Standing]:
        query = _LEADERBOARD[exclude_anonymous]

        def job(conn: sqlite3.Connection) -> list[Standing]:
            rows = conn.execute(query, (version, math.inf if before is None else before,
                                        limit)).fetchall()
            return [sql.standing(r) for r in rows]
        return await self._call(job, guarded=False)

    async def versions(self) -> list[str]:
        def job(conn: sqlite3.Connection) -> list[str]:
            return [r[0] for r in conn.execute(sql.VERSIONS)]
        return await self._call(job, guarded=False)

    async def played_episodes(self, version: str, include_browser: bool = True,
                              browser_only: bool = False) -> list[PlayedEpisode]:
        query = sql.played_episodes(include_browser, browser_only)

        def job(conn: sqlite3.Connection) -> list[PlayedEpisode]:
            return [sql.played_episode(r) for r in conn.execute(query, (version,))]
        return await self._call(job, guarded=False)
