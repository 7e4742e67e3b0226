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
Checkpoints copy the log into the database every second without blocking the writer, and a
commit that leaves the log past ``WAL_RESET_BYTES`` has it start again from its beginning before
the next transaction, so it stays under ``WAL_BOUND_BYTES`` at any load.

Before each batch the thread checks that the path still names the file the server locked
(``StoreFile``). Once it does not (deleted, replaced, truncated), and whenever the disk refuses
(full, failing), requests get ``StoreUnavailable`` naming the problem, which is logged once.
"""

from __future__ import annotations

__all__ = ["CHECKPOINT_SECONDS", "FULL_RETRY_SECONDS", "MAX_BATCH", "MAX_PAGES_ENV", "SQLiteStore",
           "WAL_BOUND_BYTES", "WAL_RESET_BYTES"]

import asyncio
import contextlib
import fcntl
import json
import logging
import math
import os
import queue
import sqlite3
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from pathlib import Path
from typing import Any, TypeVar

import serve.stores.sql as sql
from serve.stores.interface import (
    EpisodeRecord,
    Final,
    KeyRecord,
    PlayedEpisode,
    PlayedSession,
    ScorecardRecord,
    SessionRecord,
    StaleSession,
    Standing,
    Store,
    StoreConflict,
    StoreError,
    StoreLimit,
    StoreUnavailable,
    Write,
)
from serve.stores.sqlite_file import BUSY_SECONDS, StoreFile, acked_path, migrate

T = TypeVar("T")

log = logging.getLogger("sokoforge.serve.store")
log.addHandler(logging.NullHandler())  # said by a server's log; a command says it in its one line
MAX_BATCH = 1024
CHECKPOINT_SECONDS = 1.0  # how often the log is copied into the database in the background
WAL_RESET_BYTES = 4 * 1024 * 1024  # a commit leaving the log past this restarts it at once
WAL_BOUND_BYTES = 8 * 1024 * 1024  # the log never passes this (unless a reader outside holds it)
RESET_BUSY_MS = 200  # how long restarting the log waits for a reader outside the server
RESET_BACKOFF = (0.02, 2.0)  # after a reader held it: the first and the longest wait to retry
FULL_RETRY_SECONDS = 0.1  # how often a checkpoint the full disk refused is tried again
# a test hook: the store holds at most this many pages (PRAGMA max_page_count), so a test
# fills it as a full disk would
MAX_PAGES_ENV = "SOKOFORGE_STORE_MAX_PAGES"
# the SQLite result codes whose failure is the disk's or the file's, not the request's
_FULL, _IOERR, _BUSY, _LOCKED, _CORRUPT, _CANTOPEN, _NOTADB = 13, 10, 5, 6, 11, 14, 26
_READONLY = 8  # a write in a batch run with ``query_only``: the log may not grow
_NOTHING_MORE = "this server stores nothing more until it is restarted on its store"


_STOP = object()
_LEADERBOARD = {named: sql.leaderboard(named) for named in (False, True)}


def _settle(outcomes: list[tuple[asyncio.Future[Any], bool, Any]]) -> None:
    for fut, ok, value in outcomes:
        if fut.cancelled():
            continue
        if ok:
            fut.set_result(value)
        else:
            fut.set_exception(value)


class SQLiteStore(Store):
    """``Store`` on one SQLite file; all database work runs on one thread, in batches."""

    def __init__(self, path: str | Path, synchronous: str = "NORMAL",
                 locked_fd: int | None = None) -> None:
        """``locked_fd``: the server's lock on the file (``StoreLock.fd``), whose file the
        path must go on naming; without it, the file the path names at start."""
        if synchronous.upper() not in ("FULL", "NORMAL"):
            raise ValueError(f"synchronous must be FULL or NORMAL, got {synchronous!r}")
        self.path = str(path)
        self.synchronous = synchronous.upper()
        self._jobs: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._turns: int | None = None  # the lock file writers of several processes share
        self._locked_fd = locked_fd
        self._file: StoreFile | None = None
        self._failing: str | None = None  # the last fault logged, until a batch commits
        self._seen = threading.Lock()  # a problem of the path is logged once, by one thread
        self._checkpointing = threading.Lock()  # one checkpoint at a time in this process
        self._reset_after = 0.0  # when restarting the log is tried again after a reader held it
        self._backoff = RESET_BACKOFF[0]
        self._full = False  # the disk was full since the log was last truncated
        self._full_retry = 0.0  # when a checkpoint the full disk refused is tried again
        self._reads_only = False  # this batch may not write: the full disk holds the log

    # -- the database thread ------------------------------------------------------------
    async def start(self) -> None:
        if self.path != ":memory:":
            Path(self.path).parent.mkdir(parents=True, exist_ok=True)
        self._loop = asyncio.get_running_loop()
        self._pending: list[Any] = []
        ready: Future[None] = Future()
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
        """Copy the log into the database every ``CHECKPOINT_SECONDS`` without blocking the
        writer, while the path still names the store's file."""
        conn = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False,
                               timeout=BUSY_SECONDS)
        conn.execute(f"PRAGMA synchronous={self.synchronous}")
        while not self._stop_checkpoints.wait(CHECKPOINT_SECONDS):
            if self._problem():
                break
            with self._checkpointing, contextlib.suppress(sqlite3.Error):
                conn.execute("PRAGMA wal_checkpoint(PASSIVE)")
        if not self._problem():
            with contextlib.suppress(sqlite3.Error):
                conn.execute("PRAGMA wal_checkpoint(PASSIVE)")
        self._close(conn)

    def _close(self, conn: sqlite3.Connection) -> None:
        """Close a connection; when the path no longer names the store's file (checked again
        now), without the checkpoint SQLite makes on closing, which would write the log into
        the file the path names."""
        if self._problem():
            with contextlib.suppress(sqlite3.Error):
                conn.setconfig(sqlite3.SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, True)
        conn.close()

    def _wal_bytes(self) -> int:
        try:
            return os.stat(self.path + "-wal").st_size
        except FileNotFoundError:
            return 0

    def _bound_wal(self, conn: sqlite3.Connection) -> bool:
        """After a commit, while no writer of this server is in a transaction (the caller
        holds their turns): have a log grown past ``WAL_RESET_BYTES`` start again from its
        beginning (a ``RESTART`` checkpoint; the file is cut back to that size as it does).
        After a full disk, whatever its size, and truncated, to give its space back, until
        that succeeds. Returns False while the disk refuses the checkpoint.

        A reader outside the server may delay it, never for longer than ``RESET_BUSY_MS``;
        then it is tried again after a wait that doubles up to ``RESET_BACKOFF[1]``. A
        checkpoint the disk refused (it writes the database's new pages) is not a reader to
        wait for: it is tried again ``FULL_RETRY_SECONDS`` later, whatever came before."""
        now = time.monotonic()
        if now < self._reset_after:
            return True
        if self._full:
            if now < self._full_retry:
                return False
        elif self._wal_bytes() <= WAL_RESET_BYTES:
            return True
        conn.execute(f"PRAGMA busy_timeout={RESET_BUSY_MS}")
        try:
            with self._checkpointing:  # after this process's own copy, if one is under way
                mode = "TRUNCATE" if self._full else "RESTART"
                busy = conn.execute(f"PRAGMA wal_checkpoint({mode})").fetchone()[0]
        except sqlite3.Error:  # a full disk: the commits stay in the log, which they fit in
            self._full, self._full_retry = True, now + FULL_RETRY_SECONDS
            return False
        finally:
            conn.execute(f"PRAGMA busy_timeout={int(BUSY_SECONDS * 1000)}")
        if busy:
            self._reset_after = now + self._backoff
            self._backoff = min(2 * self._backoff, RESET_BACKOFF[1])
        else:
            self._backoff = RESET_BACKOFF[0]
            self._full = False
        return True

    def _log_has_room(self, conn: sqlite3.Connection) -> bool:
        """Whether the next transaction may add to the log: after a full disk, a log past
        ``WAL_RESET_BYTES`` only once it was emptied. Its checkpoint needs disk space for the
        database's new pages: a log left to grow would take the space an operator frees,
        and the store would stay full with the log past its bound."""
        if not self._full or self._wal_bytes() <= WAL_RESET_BYTES:
            return True
        return self._bound_wal(conn)

    def _run(self, ready: Future[None]) -> None:
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
            if os.environ.get(MAX_PAGES_ENV):  # never below the pages the store has
                conn.execute(f"PRAGMA max_page_count={int(os.environ[MAX_PAGES_ENV])}")
            if self.path != ":memory:":
                self._turns = os.open(acked_path(self.path), os.O_RDWR | os.O_CREAT, 0o644)
                self._file = StoreFile(self.path, self._locked_fd if self._locked_fd is not None
                                       else os.open(self.path, os.O_RDONLY))
                problem = self._file.check()
                if problem:  # the path names another file than the server locked
                    raise StoreError(f"{problem}; restart the server")
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
        self._close(conn)
        if self._turns is not None:
            os.close(self._turns)
        if self._file is not None and self._locked_fd is None:
            os.close(self._file.fd)

    def _run_batch(self, conn: sqlite3.Connection, batch: list[Any]) -> None:
        if self._turns is None:
            self._run_transaction(conn, batch)
            return
        # processes sharing the file (one server's workers) take turns on a lock the kernel
        # hands over at once; SQLite's own busy handler would sleep and poll instead
        fcntl.flock(self._turns, fcntl.LOCK_EX)
        try:
            problem = self._problem()
            if problem:
                refusal = StoreUnavailable(f"{problem}; {_NOTHING_MORE}")
                self._loop.call_soon_threadsafe(_settle, [(fut, False, refusal)
                                                          for _, fut, _ in batch])
                return
            # a log that may not grow still answers reads: the batch runs, refused any write
            self._reads_only = not self._log_has_room(conn)
            if self._reads_only:
                conn.execute("PRAGMA query_only=ON")
            try:
                committed = self._run_transaction(conn, batch)
            finally:
                if self._reads_only:
                    conn.execute("PRAGMA query_only=OFF")
                    self._reads_only = False
            if committed or self._full:
                # after a full disk, the log is truncated as soon as it can be: the space it
                # frees may be what the next writes need
                self._bound_wal(conn)
        finally:
            fcntl.flock(self._turns, fcntl.LOCK_UN)

    def _problem(self) -> str | None:
        """What is wrong with the store's path (``StoreFile.check``), logged once."""
        if self._file is None:
            return None
        with self._seen:
            had = self._file.problem
            problem = self._file.check()
            if problem and had is None:
                log.error("%s; %s", problem, _NOTHING_MORE)
        return problem

    def _said(self, why: str) -> None:
        if why != self._failing:
            log.error("%s", why)
            self._failing = why

    def _full_disk(self, cause: str) -> str:
        """What a request refused by a full disk is told, and the log says once."""
        return (f"the store's disk is full ({cause}): nothing was stored; free space on the "
                f"disk of {self.path}")

    def _fault(self, e: Exception) -> Exception:
        """``e`` as the request sees it: a failure of the disk or the file (SQLite's full,
        I/O, busy, damaged) is ``StoreUnavailable`` saying which, logged once."""
        if not isinstance(e, sqlite3.DatabaseError) or isinstance(
                e, (sqlite3.IntegrityError, sqlite3.ProgrammingError)):
            return e
        code = (getattr(e, "sqlite_errorcode", 0) or 0) & 0xFF
        if code == _FULL:
            self._full = True
            why = self._full_disk(str(e))
        elif code == _READONLY and self._reads_only:
            why = self._full_disk("its write-ahead log could not be copied into the database")
        elif code == _IOERR:
            why = f"the store's disk failed a read or write ({e}): nothing was stored"
        elif code in (_BUSY, _LOCKED):
            why = f"the store is busy ({e}): nothing was stored; retry"
        elif code in (_CORRUPT, _NOTADB):
            why = f"the store {self.path} is damaged ({e}): restore it from a backup"
        elif code == _CANTOPEN:
            why = f"the store {self.path} cannot be opened ({e})"
        else:
            why = f"the store cannot be used ({e})"
        problem = self._problem()
        if problem:
            return StoreUnavailable(f"{problem}; {_NOTHING_MORE}")
        self._said(why)
        return StoreUnavailable(why)

    def _run_transaction(self, conn: sqlite3.Connection, batch: list[Any]) -> bool:
        """Run ``batch`` in one transaction and answer each job; whether it committed."""
        outcomes: list[tuple[asyncio.Future[Any], bool, Any]] = []
        acked = None
        try:
            conn.execute("BEGIN" if self._reads_only else "BEGIN IMMEDIATE")
            changes = conn.total_changes
            for fn, fut, guarded in batch:
                # a job of one statement is atomic by itself; others get a savepoint
                if guarded:
                    conn.execute("SAVEPOINT job")
                try:
                    value = fn(conn)
                except Exception as e:
                    # SQLite may have undone the whole transaction (a full disk), and a job
                    # without a savepoint may have done half its work: the batch fails whole
                    if isinstance(e, sqlite3.Error) and not (guarded and conn.in_transaction):
                        raise
                    if guarded:
                        conn.execute("ROLLBACK TO job")
                        conn.execute("RELEASE job")
                    outcomes.append((fut, False, self._fault(e)))
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
            fault = self._fault(e)
            self._loop.call_soon_threadsafe(_settle, [(fut, False, fault)
                                                      for _, fut, _ in batch])
            return False
        if acked is not None and self._turns is not None:
            # after the commit, before any answer: the mark never runs ahead of the store
            with contextlib.suppress(OSError):
                os.pwrite(self._turns, f"{int(acked[0]):020d}\n".encode(), 0)
        if acked is not None:
            self._failing = None  # a write went through: a fault seen again is logged again
        self._loop.call_soon_threadsafe(_settle, outcomes)  # one wake-up per batch
        return True

    async def _call(self, fn: Callable[[sqlite3.Connection], T], guarded: bool = True) -> T:
        """Queue ``fn`` for the database thread and wait until its transaction committed;
        ``guarded=False`` for a job of one statement, which needs no savepoint of its own.

        Jobs queued during one turn of the event loop go to the thread together, so the
        thread is woken once per turn, not once per request, and commits them as one batch.
        """
        if self._thread is None:
            raise RuntimeError("the store is not started")
        fut: asyncio.Future[T] = self._loop.create_future()
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
            row = conn.execute(sql.KEY, (key_hash,)).fetchone()
            return sql.key_record(row) if row else None
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

    async def close_scorecard(self, scorecard_id: str, closed: float, result: dict[str, Any],
                              final: list[Final]) -> dict[str, Any]:
        def job(conn: sqlite3.Connection) -> dict[str, Any]:
            row = conn.execute(sql.CLOSING, (scorecard_id,)).fetchone()
            if row is None:
                raise KeyError(scorecard_id)
            card = sql.closing(row)
            if card.result is not None:
                return card.result
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
                             sql.standing_rows(scorecard_id, result, card.key_hash, card.name,
                                               closed))
            return result
        return await self._call(job)

    # -- sessions, episodes, actions -----------------------------------------------------------
    async def create_session(self, record: SessionRecord, levels: Sequence[int | None],
                             per_key: int, total: int, live_since: float, *, address: str = "",
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
            conn.executemany(sql.INSERT_EPISODE, sql.new_episode_rows(record.id, levels))
        await self._call(job)

    @staticmethod
    def _episodes(conn: sqlite3.Connection, session_id: str) -> list[EpisodeRecord]:
        rows = conn.execute(sql.EPISODES, (session_id,))
        return [sql.episode_record(r) for r in rows]

    @staticmethod
    def _write_episodes(conn: sqlite3.Connection, session_id: str,
                        episodes: tuple[EpisodeRecord, ...]) -> None:
        conn.executemany(sql.WRITE_EPISODE, sql.episode_rows(session_id, episodes))

    async def sessions(self, scorecard_id: str) -> list[tuple[SessionRecord, list[EpisodeRecord]]]:
        def job(conn: sqlite3.Connection) -> list[tuple[SessionRecord, list[EpisodeRecord]]]:
            rows = conn.execute(sql.SESSION + " WHERE scorecard_id=? ORDER BY created",
                                (scorecard_id,)).fetchall()
            return [(record, self._episodes(conn, record.id))
                    for record in map(sql.session_record, rows)]
        return await self._call(job, guarded=False)

    async def session(self, session_id: str) -> tuple[SessionRecord, list[EpisodeRecord]] | None:
        def job(conn: sqlite3.Connection) -> tuple[SessionRecord, list[EpisodeRecord]] | None:
            row = conn.execute(sql.SESSION + " WHERE id=?", (session_id,)).fetchone()
            return (sql.session_record(row), self._episodes(conn, session_id)) if row else None
        return await self._call(job, guarded=False)

    async def head(self, session_id: str) -> tuple[int, str, str, float] | None:
        def job(conn: sqlite3.Connection) -> tuple[int, str, str, float] | None:
            row: tuple[int, str, str, float] | None = conn.execute(sql.HEAD,
                                                                   (session_id,)).fetchone()
            return row
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

    def _apply(self, conn: sqlite3.Connection, write: Write) -> None:
        """The conditional write, or ``StaleSession``: no savepoint needed, as a refusal
        changes nothing, and once the compare-and-set holds, (session, seq) is new, so the
        action row cannot collide."""
        cas, args = sql.conditional_write(write)
        if conn.execute(cas, args).rowcount != 1:
            raise StaleSession(write.session_id)
        conn.execute(sql.INSERT_ACTION, (write.session_id, write.expected + 1, write.episode,
                                         write.action, write.at, write.ms))
        self._write_episodes(conn, write.session_id, write.episodes)

    async def write(self, write: Write) -> None:
        await self._call(lambda conn: self._apply(conn, write), guarded=False)

    async def update_session(self, session_id: str, change: Callable[
            [SessionRecord, list[EpisodeRecord]], tuple[Write, Any]]) -> Any:
        """Read, change and write in one job: its transaction holds SQLite's write lock (and
        the processes' turn), so no other process writes between."""
        def job(conn: sqlite3.Connection) -> Any:
            row = conn.execute(sql.SESSION + " WHERE id=?", (session_id,)).fetchone()
            if row is None:
                return None
            write, value = change(SessionRecord(*row), self._episodes(conn, session_id))
            self._apply(conn, write)
            return value
        return await self._call(job)

    async def expire(self, idle_before: float, session_id: str | None = None) -> int:
        def job(conn: sqlite3.Connection) -> int:
            if session_id is None:
                return conn.execute(sql.EXPIRE, (idle_before,)).rowcount
            return conn.execute(sql.EXPIRE + " AND id=?", (idle_before, session_id)).rowcount
        return await self._call(job, guarded=False)

    async def miscounted(self) -> int:
        def job(conn: sqlite3.Connection) -> int:
            return int(conn.execute(sql.MISCOUNTED).fetchone()[0])
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

    async def played_sessions(self, version: str
                              ) -> list[tuple[ScorecardRecord, list[PlayedSession]]]:
        def job(conn: sqlite3.Connection) -> list[tuple[ScorecardRecord, list[PlayedSession]]]:
            return sql.played_sessions(*(conn.execute(q, (version,)) for q in (
                sql.PLAYED_CARDS, sql.PLAYED_SESSIONS, sql.PLAYED_EPISODES, sql.PLAYED_ACTIONS)))
        return await self._call(job, guarded=False)

    async def versions(self) -> list[str]:
        def job(conn: sqlite3.Connection) -> list[str]:
            return [r[0] for r in conn.execute(sql.VERSIONS)]
        return await self._call(job, guarded=False)

    async def shown_levels(self, version: str) -> tuple[dict[int, int], int]:
        def job(conn: sqlite3.Connection) -> tuple[dict[int, int], int]:
            shown = {int(level): int(n)
                     for level, n in conn.execute(sql.SHOWN_LEVELS, (version,))}
            return shown, int(conn.execute(sql.SESSIONS_ON, (version,)).fetchone()[0])
        return await self._call(job, guarded=False)

    async def identity(self) -> str:
        def job(conn: sqlite3.Connection) -> str:
            return str(conn.execute("SELECT v FROM meta WHERE k='store_id'").fetchone()[0])
        return await self._call(job, guarded=False)

    async def played_episodes(self, version: str, include_browser: bool = True,
                              browser_only: bool = False) -> list[PlayedEpisode]:
        query = sql.played_episodes(include_browser, browser_only)

        def job(conn: sqlite3.Connection) -> list[PlayedEpisode]:
            return [sql.played_episode(r) for r in conn.execute(query, (version,))]
        return await self._call(job, guarded=False)
