"""The fleet's store: the same ``Store`` on PostgreSQL, shared by servers on several machines.

Each request is one transaction on a pooled connection (asyncpg); PostgreSQL's commit makes
it durable before the request is answered. Sessions are created under a transaction-scoped
advisory lock so the limits on sessions in flight hold across every server; actions are
compare-and-set updates of the session row, so two servers cannot both play one step. The
server creates and migrates the schema itself (the ``schema_version`` table) and refuses a
schema newer than it reads. A database that cannot take a request now (its disk full, short of
resources, shutting down, unreachable) raises ``StoreUnavailable`` saying which.
"""

from __future__ import annotations

__all__ = [
    "MIGRATIONS", "POOL_SIZE", "PostgresStore", "SCHEMA_LOCK", "SCHEMA_VERSION", "SESSIONS_LOCK",
    "unavailable",
]

import json
import math
from collections.abc import Callable, Sequence
from typing import Any

import asyncpg

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

SCHEMA_VERSION = 5
SCHEMA_LOCK = 0x50C0F0E  # advisory lock ids: one for migrations, one for session creation
SESSIONS_LOCK = 0x50C0F0F
POOL_SIZE = 16

MIGRATIONS = {
    1: """
CREATE TABLE keys (
    key_hash text PRIMARY KEY, name text NOT NULL, name_fold text NOT NULL UNIQUE,
    created double precision NOT NULL);
CREATE TABLE scorecards (
    id text PRIMARY KEY, key_hash text NOT NULL, name text NOT NULL, games text NOT NULL,
    opened double precision NOT NULL, closed double precision, result text);
CREATE TABLE sessions (
    id text PRIMARY KEY, scorecard_id text NOT NULL, key_hash text NOT NULL, game text NOT NULL,
    version text NOT NULL, parallel integer NOT NULL, state text NOT NULL,
    created double precision NOT NULL, last_active double precision NOT NULL,
    seq integer NOT NULL, writer text NOT NULL, UNIQUE (scorecard_id, game));
CREATE INDEX sessions_live ON sessions (state, last_active);
CREATE INDEX sessions_key ON sessions (key_hash, state);
CREATE TABLE episodes (
    session_id text NOT NULL, idx integer NOT NULL, done boolean NOT NULL,
    solved boolean NOT NULL, deadlocked boolean NOT NULL, steps integer NOT NULL,
    actions text NOT NULL, snapshot text, PRIMARY KEY (session_id, idx));
CREATE TABLE actions (
    session_id text NOT NULL, seq integer NOT NULL, episode integer NOT NULL,
    action integer NOT NULL, at double precision NOT NULL, PRIMARY KEY (session_id, seq));
CREATE TABLE counters (
    kind text NOT NULL, subject text NOT NULL, day text NOT NULL, count integer NOT NULL,
    PRIMARY KEY (kind, subject, day));
CREATE TABLE standings (
    scorecard_id text NOT NULL, game text NOT NULL, version text NOT NULL,
    key_hash text NOT NULL, name text NOT NULL, closed double precision NOT NULL,
    session_id text, success_rate double precision NOT NULL,
    move_efficiency double precision NOT NULL, deadlock_rate double precision NOT NULL,
    result text NOT NULL, PRIMARY KEY (scorecard_id, game));
CREATE INDEX standings_board ON standings (version, closed);
""",
    # where a scorecard was played from, and what its client attached (tags...)
    2: """
ALTER TABLE scorecards ADD COLUMN source text;
ALTER TABLE scorecards ADD COLUMN meta text;
""",
    # the client address (hashed) each session was started from, counted in flight
    3: """
ALTER TABLE sessions ADD COLUMN address text NOT NULL DEFAULT '';
CREATE INDEX sessions_address ON sessions (address, state);
""",
    # when each action arrived (ms since its session's start); older ones have none
    4: """
ALTER TABLE actions ADD COLUMN ms integer;
""",
    # the level each episode plays (chosen during play in an adaptive game; NULL only until
    # then), which every episode stored before was its own index's
    5: """
ALTER TABLE episodes ADD COLUMN level integer;
UPDATE episodes SET level = idx;
""",
}

# the shared statements, with PostgreSQL's placeholders
EPISODES, WRITE_EPISODE, HEAD, LIVE_OF_KEY, LIVE, EXPIRE, CLOSE_SESSION, INSERT_STANDING, \
    LIVE_OF_ADDRESS, INSERT_SESSION, INSERT_EPISODE = (sql.numbered(q) for q in (
        sql.EPISODES, sql.WRITE_EPISODE, sql.HEAD, sql.LIVE_OF_KEY, sql.LIVE, sql.EXPIRE,
        sql.CLOSE_SESSION, sql.INSERT_STANDING, sql.LIVE_OF_ADDRESS, sql.INSERT_SESSION,
        sql.INSERT_EPISODE))
LEADERBOARD = {named: sql.numbered(sql.leaderboard(named)) for named in (False, True)}


class PostgresStore(Store):
    """``Store`` on a PostgreSQL database given by its URL."""

    def __init__(self, url: str, pool_size: int = POOL_SIZE) -> None:
        self.url = url
        self.pool_size = pool_size
        self._pool: asyncpg.Pool | None = None

    async def start(self) -> None:
        try:
            self._pool = await asyncpg.create_pool(self.url, min_size=1,
                                                   max_size=self.pool_size, reset=_unchanged)
        except (OSError, asyncpg.PostgresError) as e:
            raise StoreError(f"cannot reach the PostgreSQL store: {e}") from None
        try:
            async with self._pool.acquire() as conn, conn.transaction():
                await conn.execute("SELECT pg_advisory_xact_lock($1)", SCHEMA_LOCK)
                await conn.execute("CREATE TABLE IF NOT EXISTS schema_version "
                                   "(version integer NOT NULL)")
                have = await conn.fetchval("SELECT max(version) FROM schema_version") or 0
                if have > SCHEMA_VERSION:
                    raise StoreError(f"the PostgreSQL store has schema {have}, newer than the "
                                     f"{SCHEMA_VERSION} this server reads: run a newer "
                                     "sokoforge")
                for version in range(have + 1, SCHEMA_VERSION + 1):
                    await conn.execute(MIGRATIONS[version])
                    await conn.execute("INSERT INTO schema_version VALUES ($1)", version)
                # the store's id (``identity``), made once, by the first server to start
                await conn.execute("CREATE TABLE IF NOT EXISTS store_identity (id text NOT NULL)")
                await conn.execute("INSERT INTO store_identity SELECT md5(random()::text || "
                                   "clock_timestamp()::text) WHERE NOT EXISTS "
                                   "(SELECT 1 FROM store_identity)")
        except BaseException:
            await self.close()
            raise

    async def close(self) -> None:
        if self._pool is not None:
            pool, self._pool = self._pool, None
            await pool.close()

    def _conn(self) -> Any:
        """A pooled connection, for one statement (its own transaction)."""
        if self._pool is None:
            raise RuntimeError("the store is not started")
        return _Connection(self._pool)

    def _tx(self) -> Any:
        """A pooled connection in a transaction: ``async with self._tx() as conn``."""
        if self._pool is None:
            raise RuntimeError("the store is not started")
        return _Transaction(self._pool)

    # -- keys and counters ----------------------------------------------------------------
    @staticmethod
    async def _bump(conn: asyncpg.Connection, kind: str, subject: str, day: str,
                    limit: int) -> int:
        count = await conn.fetchval(
            "INSERT INTO counters AS c VALUES ($1, $2, $3, 1) "
            "ON CONFLICT (kind, subject, day) DO UPDATE SET count = c.count + 1 "
            "WHERE c.count < $4 RETURNING count", kind, subject, day, limit)
        if count is None or count > limit:
            used = await conn.fetchval("SELECT count FROM counters WHERE kind=$1 AND "
                                       "subject=$2 AND day=$3", kind, subject, day)
            raise StoreLimit(used if count is None else limit, kind)
        return int(count)

    async def create_key(self, record: KeyRecord, counter: str, day: str, limit: int) -> int:
        async with self._tx() as conn:
            if await conn.fetchval("SELECT 1 FROM keys WHERE name_fold=$1",
                                   record.name.casefold()):
                raise StoreConflict(record.name)
            count = await self._bump(conn, "keys", counter, day, limit)
            try:
                await conn.execute("INSERT INTO keys VALUES ($1, $2, $3, "
                                   "extract(epoch from now()))",
                                   record.key_hash, record.name, record.name.casefold())
            except asyncpg.UniqueViolationError:
                raise StoreConflict(record.name) from None
            return count

    async def find_key(self, key_hash: str) -> KeyRecord | None:
        async with self._conn() as conn:
            row = await conn.fetchrow(sql.numbered(sql.KEY), key_hash)
        return sql.key_record(row) if row else None

    # -- scorecards -------------------------------------------------------------------------
    async def open_scorecard(self, record: ScorecardRecord, day: str, limit: int) -> int:
        async with self._tx() as conn:
            count = await self._bump(conn, "scorecards", record.key_hash, day, limit)
            await conn.execute("INSERT INTO scorecards (id, key_hash, name, games, opened, "
                               "source, meta) VALUES ($1, $2, $3, $4, $5, $6, $7)", record.id,
                               record.key_hash, record.name, json.dumps(record.games),
                               record.opened, record.source,
                               None if record.meta is None else json.dumps(record.meta))
            return count

    async def scorecard(self, scorecard_id: str) -> ScorecardRecord | None:
        async with self._conn() as conn:
            row = await conn.fetchrow(sql.numbered(sql.CARD + " WHERE id=?"), scorecard_id)
        return sql.card_record(row) if row else None

    async def close_scorecard(self, scorecard_id: str, closed: float, result: dict[str, Any],
                              final: list[Final]) -> dict[str, Any]:
        async with self._tx() as conn:
            row = await conn.fetchrow(sql.numbered(sql.CLOSING) + " FOR UPDATE", scorecard_id)
            if row is None:
                raise KeyError(scorecard_id)
            card = sql.closing(row)
            if card.result is not None:
                return card.result
            for f in final:
                done = await conn.execute(CLOSE_SESSION, f.session_id, f.expected)
                if done != "UPDATE 1":
                    raise StaleSession(f.session_id)
                await self._write_episodes(conn, f.session_id, f.episodes)
            await conn.execute("UPDATE scorecards SET closed=$1, result=$2 WHERE id=$3",
                               closed, json.dumps(result), scorecard_id)
            await conn.executemany(INSERT_STANDING, sql.standing_rows(
                scorecard_id, result, card.key_hash, card.name, closed))
            return result

    # -- sessions, episodes, actions -----------------------------------------------------------
    async def create_session(self, record: SessionRecord, levels: Sequence[int | None],
                             per_key: int, total: int, live_since: float, *, address: str = "",
                             per_address: int | None = None) -> None:
        async with self._tx() as conn:
            # counting then inserting must not interleave with another server's
            await conn.execute("SELECT pg_advisory_xact_lock($1)", SESSIONS_LOCK)
            card = await conn.fetchrow("SELECT closed FROM scorecards WHERE id=$1",
                                       record.scorecard_id)
            if card is None or card[0] is not None:
                raise StoreConflict("closed")
            if await conn.fetchval("SELECT 1 FROM sessions WHERE scorecard_id=$1 AND game=$2",
                                   record.scorecard_id, record.game):
                raise StoreConflict("started")
            mine = await conn.fetchval(LIVE_OF_KEY, record.key_hash, live_since)
            if mine >= per_key:
                raise StoreLimit(mine, "key")
            if per_address is not None:
                near = await conn.fetchval(LIVE_OF_ADDRESS, address, live_since)
                if near >= per_address:
                    raise StoreLimit(near, "address")
            everyone = await conn.fetchval(LIVE, live_since)
            if everyone >= total:
                raise StoreLimit(everyone, "total")
            await conn.execute(INSERT_SESSION, record.id, record.scorecard_id, record.key_hash,
                               record.game, record.version, record.parallel, record.state,
                               record.created, record.last_active, record.seq, record.writer,
                               address)
            await conn.executemany(INSERT_EPISODE, sql.new_episode_rows(record.id, levels))

    @staticmethod
    async def _episodes(conn: asyncpg.Connection, session_id: str) -> list[EpisodeRecord]:
        rows = await conn.fetch(EPISODES, session_id)
        return [sql.episode_record(r) for r in rows]

    @staticmethod
    async def _write_episodes(conn: asyncpg.Connection, session_id: str,
                              episodes: tuple[EpisodeRecord, ...]) -> None:
        await conn.executemany(WRITE_EPISODE, sql.episode_rows(session_id, episodes))

    async def sessions(self, scorecard_id: str) -> list[tuple[SessionRecord, list[EpisodeRecord]]]:
        async with self._tx() as conn:
            rows = await conn.fetch(sql.SESSION + " WHERE scorecard_id=$1 ORDER BY created",
                                    scorecard_id)
            return [(sql.session_record(r), await self._episodes(conn, r["id"])) for r in rows]

    async def session(self, session_id: str) -> tuple[SessionRecord, list[EpisodeRecord]] | None:
        async with self._tx() as conn:
            row = await conn.fetchrow(sql.SESSION + " WHERE id=$1", session_id)
            if row is None:
                return None
            return sql.session_record(row), await self._episodes(conn, session_id)

    async def head(self, session_id: str) -> tuple[int, str, str, float] | None:
        async with self._conn() as conn:
            row = await conn.fetchrow(HEAD, session_id)
        return tuple(row) if row else None

    async def steps(self, session_id: str, upto: int) -> list[tuple[int, int]]:
        async with self._conn() as conn:
            rows = await conn.fetch(sql.numbered(sql.STEPS), session_id, upto)
        return [(r[0], r[1]) for r in rows]

    async def played_sessions(self, version: str
                              ) -> list[tuple[ScorecardRecord, list[PlayedSession]]]:
        async with self._tx() as conn:  # one snapshot: the four reads agree
            rows = [await conn.fetch(sql.numbered(q), version) for q in (
                sql.PLAYED_CARDS, sql.PLAYED_SESSIONS, sql.PLAYED_EPISODES, sql.PLAYED_ACTIONS)]
        return sql.played_sessions(*rows)

    async def action_times(self, session_ids: list[str]) -> dict[str, list[int | None]]:
        async with self._conn() as conn:
            rows = await conn.fetch("SELECT session_id, ms FROM actions WHERE session_id = "
                                    "ANY($1::text[]) ORDER BY session_id, seq", session_ids)
        times: dict[str, list[int | None]] = {sid: [] for sid in session_ids}
        for r in rows:
            times[r[0]].append(r[1])
        return times

    async def write(self, write: Write) -> None:
        async with self._conn() as conn:
            await self._apply(conn, write)

    @staticmethod
    async def _apply(conn: asyncpg.Connection, write: Write) -> None:
        """One statement, so one round trip (and its own transaction, outside one): the
        compare-and-set of the session row ($1-$6) and, only where it held, the action row
        (with its arrival, $16) and episode rows (their levels, $17); or ``StaleSession``."""
        cas, args = sql.conditional_write(write)
        statement = (
            f"WITH s AS ({sql.numbered(cas)} RETURNING id), "
            "a AS (INSERT INTO actions (session_id, seq, episode, action, at, ms) "
            "SELECT $4, $5 + 1, $7, $8, $2, $16 FROM s), "
            "e AS (UPDATE episodes AS ep SET done = u.done, solved = u.solved, "
            "deadlocked = u.deadlocked, steps = u.steps, actions = u.actions, "
            "snapshot = u.snapshot, level = coalesce(u.level, ep.level) "
            "FROM s, unnest($9::integer[], $10::boolean[], $11::boolean[], $12::boolean[], "
            "$13::integer[], $14::text[], $15::text[], $17::integer[]) "
            "AS u(idx, done, solved, deadlocked, steps, actions, snapshot, level) "
            "WHERE ep.session_id = s.id AND ep.idx = u.idx) "
            "SELECT count(*) FROM s")
        rows = write.episodes
        stored = await conn.fetchval(
            statement, *args, write.episode, write.action, [e.index for e in rows],
            [e.done for e in rows], [e.solved for e in rows], [e.deadlocked for e in rows],
            [e.steps for e in rows], [e.actions for e in rows], [e.snapshot for e in rows],
            write.ms, [e.level for e in rows])
        if stored != 1:
            raise StaleSession(write.session_id)

    async def update_session(self, session_id: str, change: Callable[
            [SessionRecord, list[EpisodeRecord]], tuple[Write, Any]]) -> Any:
        """Read, change and write in one transaction that holds the session's row
        (``FOR UPDATE``): another server's change of it waits for this one."""
        async with self._tx() as conn:
            row = await conn.fetchrow(sql.SESSION + " WHERE id=$1 FOR UPDATE", session_id)
            if row is None:
                return None
            write, value = change(SessionRecord(*row), await self._episodes(conn, session_id))
            await self._apply(conn, write)
            return value

    async def expire(self, idle_before: float, session_id: str | None = None) -> int:
        async with self._conn() as conn:
            if session_id is None:
                done = await conn.execute(EXPIRE, idle_before)
            else:
                done = await conn.execute(EXPIRE + " AND id=$2", idle_before, session_id)
        return int(done.split()[-1])

    async def miscounted(self) -> int:
        async with self._conn() as conn:
            return int(await conn.fetchval(sql.MISCOUNTED))

    # -- leaderboard -------------------------------------------------------------------------
    async def leaderboard(self, version: str, limit: int, before: float | None = None,
                          exclude_anonymous: bool = False) -> list[Standing]:
        async with self._conn() as conn:
            rows = await conn.fetch(LEADERBOARD[exclude_anonymous], version,
                                    math.inf if before is None else before, limit)
        return [sql.standing(r) for r in rows]

    async def versions(self) -> list[str]:
        async with self._conn() as conn:
            rows = await conn.fetch(sql.VERSIONS)
        return [r[0] for r in rows]

    async def shown_levels(self, version: str) -> tuple[dict[int, int], int]:
        async with self._conn() as conn:
            rows = await conn.fetch(sql.numbered(sql.SHOWN_LEVELS), version)
            sessions = await conn.fetchval(sql.numbered(sql.SESSIONS_ON), version)
        return {int(r[0]): int(r[1]) for r in rows}, int(sessions)

    async def identity(self) -> str:
        async with self._conn() as conn:
            return str(await conn.fetchval("SELECT id FROM store_identity"))

    async def played_episodes(self, version: str, include_browser: bool = True,
                              browser_only: bool = False) -> list[PlayedEpisode]:
        query = sql.numbered(sql.played_episodes(include_browser, browser_only))
        async with self._conn() as conn:
            rows = await conn.fetch(query, version)
        return [sql.played_episode(r) for r in rows]


def unavailable(e: BaseException) -> StoreUnavailable | None:
    """``e`` as ``StoreUnavailable`` when it is the database's state and not the request's
    fault (SQLSTATE class 53, insufficient resources, 53100 a full disk; class 08 and 57P0x, a
    lost or shutting connection; a socket's error), else None."""
    state = getattr(e, "sqlstate", None) or ""
    if state == "53100":
        return StoreUnavailable(f"the PostgreSQL store's disk is full ({e}): nothing was "
                                "stored; free space on its server")
    if state.startswith("53"):
        return StoreUnavailable(f"the PostgreSQL store is short of resources ({e}): nothing "
                                "was stored; retry")
    if (state.startswith("08") or state.startswith("57P0") or isinstance(
            e, (OSError, asyncpg.ConnectionDoesNotExistError))):
        return StoreUnavailable(f"the PostgreSQL store cannot be reached ({e}): nothing was "
                                "stored; retry")
    return None


class _Connection:
    """A connection from the pool, released on exit; a fault of the database's state leaves
    as ``StoreUnavailable``."""

    def __init__(self, pool: asyncpg.Pool) -> None:
        self.pool = pool

    async def __aenter__(self) -> asyncpg.Connection:
        try:
            self.conn = await self.pool.acquire()
        except Exception as e:
            raise unavailable(e) or e from None
        return self.conn

    async def __aexit__(self, kind: Any, exc: Any, tb: Any) -> None:
        await self.pool.release(self.conn)
        fault = unavailable(exc) if exc is not None else None
        if fault is not None:
            raise fault from None


async def _unchanged(conn: asyncpg.Connection) -> None:
    """A connection goes back to the pool as it is: the store never changes session state
    (no settings, listeners or session locks), so the default reset's round trip is saved."""


class _Transaction(_Connection):
    """A connection from the pool with a transaction open on it, both released on exit; a
    fault of the database's state leaves as ``StoreUnavailable``."""

    async def __aenter__(self) -> asyncpg.Connection:
        await super().__aenter__()
        self.tx = self.conn.transaction()
        try:
            await self.tx.start()
        except BaseException as e:
            await self.pool.release(self.conn)
            raise unavailable(e) or e from None
        return self.conn

    async def __aexit__(self, kind: Any, exc: Any, tb: Any) -> None:
        try:
            if kind is None:
                await self.tx.commit()
            else:
                await self.tx.rollback()
        except Exception as e:
            raise unavailable(e) or e from None
        finally:
            await self.pool.release(self.conn)
        fault = unavailable(exc) if exc is not None else None
        if fault is not None:
            raise fault from None
