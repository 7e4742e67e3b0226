"""One server's claim on a SQLite store file: its lock, its checks and its schema.

``claim`` is what one server does before any of its processes opens the file: an exclusive
lock on the path (whatever file it names) and on the file itself (whatever name it is reached
by), the integrity check, the count of acknowledged commits kept in ``<db>.acked``, and the
schema brought up to date. ``StoreFile`` tells, with one ``stat``, whether the path still names
the file locked; ``release`` empties the write-ahead log into that file, and only that file,
and gives it up.
"""

from __future__ import annotations

__all__ = [
    "BUSY_SECONDS", "MIGRATIONS", "SCHEMA", "SCHEMA_VERSION", "Acked", "StoreFile", "StoreLock",
    "acked_path", "claim", "kept_path", "lock_holder", "migrate", "release",
    "remove_unused",
]

import contextlib
import errno
import fcntl
import hashlib
import os
import secrets
import shutil
import socket
import sqlite3
import struct
import time
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

import serve.stores.sql as sql
from serve.stores.interface import (
    StoreError,
    miscounted_error,
)

SCHEMA_VERSION = 6
BUSY_SECONDS = 30.0
ORPHAN_SECONDS = 5.0  # how long a start waits for the workers of a dead server to end

# version 1, as the first servers created it; ``MIGRATIONS`` takes it to SCHEMA_VERSION
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
CREATE TABLE IF NOT EXISTS counters (
    kind TEXT NOT NULL, subject TEXT NOT NULL, day TEXT NOT NULL, count INTEGER NOT NULL,
    PRIMARY KEY (kind, subject, day)) WITHOUT ROWID;
"""

MIGRATIONS = {
    # 1 -> 2: the store owns concurrency (seq, writer), snapshots, several games, standings
    2: """
ALTER TABLE scorecards ADD COLUMN games TEXT;
UPDATE scorecards SET games = json_object(game, version);
ALTER TABLE sessions ADD COLUMN seq INTEGER NOT NULL DEFAULT 0;
ALTER TABLE sessions ADD COLUMN writer TEXT NOT NULL DEFAULT '';
UPDATE sessions SET
    seq = (SELECT count(*) FROM actions a WHERE a.session_id = sessions.id),
    last_active = max(last_active, coalesce(
        (SELECT max(at) FROM actions a WHERE a.session_id = sessions.id), 0));
ALTER TABLE episodes ADD COLUMN snapshot TEXT;
DROP TRIGGER IF EXISTS action_to_episode;
CREATE UNIQUE INDEX sessions_game ON sessions (scorecard_id, game);
CREATE INDEX sessions_live ON sessions (state, last_active);
CREATE INDEX sessions_key ON sessions (key_hash, state);
CREATE TABLE standings (
    scorecard_id TEXT NOT NULL, game TEXT NOT NULL, version TEXT NOT NULL,
    key_hash TEXT NOT NULL, name TEXT NOT NULL, closed REAL NOT NULL, session_id TEXT,
    success_rate REAL NOT NULL, move_efficiency REAL NOT NULL, deadlock_rate REAL NOT NULL,
    result TEXT NOT NULL, PRIMARY KEY (scorecard_id, game));
CREATE INDEX standings_board ON standings (version, closed);
INSERT INTO standings SELECT id, game, version, key_hash, name, closed,
    (SELECT s.id FROM sessions s WHERE s.scorecard_id = c.id LIMIT 1),
    success_rate, move_efficiency, deadlock_rate, result
    FROM scorecards c WHERE closed IS NOT NULL;
""",
    # 2 -> 3: where a scorecard was played from, and what its client attached (tags...)
    3: """
ALTER TABLE scorecards ADD COLUMN source TEXT;
ALTER TABLE scorecards ADD COLUMN meta TEXT;
""",
    # 3 -> 4: the client address (hashed) each session was started from, counted in flight
    4: """
ALTER TABLE sessions ADD COLUMN address TEXT NOT NULL DEFAULT '';
CREATE INDEX sessions_address ON sessions (address, state);
""",
    # 4 -> 5: when each action arrived (ms since its session's start); older ones have none
    5: """
ALTER TABLE actions ADD COLUMN ms INTEGER;
""",
    # 5 -> 6: the level each episode plays (chosen during play in an adaptive game; NULL only
    # until then), which every episode stored before was its own index's
    6: """
ALTER TABLE episodes ADD COLUMN level INTEGER;
UPDATE episodes SET level = idx;
""",
}


def migrate(conn: sqlite3.Connection, path: str) -> None:
    """Create the schema, or take an older one to ``SCHEMA_VERSION``; refuse a newer one."""
    conn.executescript(SCHEMA)
    row = conn.execute("SELECT v FROM meta WHERE k='schema'").fetchone()
    have = 0 if row is None else int(row[0])
    if have > SCHEMA_VERSION:
        raise StoreError(f"{path} has store schema {have}, newer than the {SCHEMA_VERSION} "
                         "this server reads: run a newer sokoforge")
    if have == 0:  # a new file: SCHEMA made version 1
        conn.execute("INSERT INTO meta VALUES ('schema', '1')")
        have = 1
    for version in range(have + 1, SCHEMA_VERSION + 1):
        conn.executescript(f"BEGIN; {MIGRATIONS[version]}; "
                           f"UPDATE meta SET v='{version}' WHERE k='schema'; COMMIT;")
    conn.execute("INSERT OR IGNORE INTO meta VALUES ('acked', '0')")
    # the store's id (``Store.identity``), made once, and the start's (``claim``)
    conn.execute("INSERT OR IGNORE INTO meta VALUES ('store_id', lower(hex(randomblob(16))))")


class StoreFile:
    """Whether ``path`` still names the file open as ``fd`` (the one the server locked), as it
    was: one ``stat`` of the path against the file's identity and the largest size seen (a
    store file never shrinks while served). Once a problem is seen it stays: the server's
    processes then write nothing more, into that file or the one the path names now."""

    def __init__(self, path: str, fd: int) -> None:
        st = os.fstat(fd)
        self.path, self.fd = path, fd
        self.identity = (st.st_dev, st.st_ino)
        self.size = st.st_size
        self.problem: str | None = None

    def check(self) -> str | None:
        """What is wrong with the path (deleted, replaced, truncated), None while nothing is."""
        if self.problem is None:
            self.problem = self._look()
        return self.problem

    def _look(self) -> str | None:
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            return f"the store file {self.path} was deleted (or moved away) while served"
        except OSError as e:
            return f"the store file {self.path} cannot be looked at ({e.strerror or e})"
        if (st.st_dev, st.st_ino) != self.identity:
            return (f"the store file {self.path} was replaced while served (the path names "
                    "another file now)")
        if st.st_size < self.size:  # the size it has now: each process saw another before
            return (f"the store file {self.path} was truncated while served (to "
                    f"{st.st_size} bytes)")
        self.size = max(self.size, st.st_size)
        return None


class StoreLock:
    """The one server (with its workers) of a store: a lock on the path (an abstract Unix
    socket named after the resolved path, so it holds whatever file the path names later) and
    an exclusive ``flock`` on the database file itself, so every name of the file (a hard
    link, a symlink, another mount) meets the same lock. Forked workers inherit both, and they
    end with the last of them; neither leaves a file behind."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.fd: int | None = None
        self.named: socket.socket | None = None
        self.file: StoreFile | None = None

    def acquire(self) -> None:
        self.named = _wait_for(lambda: _bind_path(self.path), lambda: _path_holder(self.path),
                               self.path)
        try:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        except BaseException:
            self.release()
            raise
        try:
            _wait_for(lambda: _flock(fd), lambda: lock_holder(fd), self.path)
            links = os.fstat(fd).st_nlink
            if links > 1:
                raise StoreError(
                    f"the store {self.path} has {links} names (hard links): SQLite keeps its "
                    "write-ahead log by name, so each name would have its own log; remove "
                    "the other names and serve the file by one")
            self.file = StoreFile(self.path, fd)
            problem = self.file.check()  # replaced between the open and the lock
            if problem:
                raise StoreError(f"{problem}; start again")
        except BaseException:
            os.close(fd)
            self.release()
            raise
        self.fd = fd

    def release(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None
        if self.named is not None:
            self.named.close()
            self.named = None


def _flock(fd: int) -> bool:
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    return True


def _path_name(path: str) -> bytes:
    """The abstract socket name (no file) that stands for the resolved ``path``."""
    digest = hashlib.sha256(os.path.realpath(path).encode(errors="surrogateescape"))
    return b"\0sokoforge-store-" + digest.hexdigest()[:48].encode()


def _bind_path(path: str) -> socket.socket | None:
    """The path's lock, taken (a listening socket, whose listener's pid a second server
    reads), or None while another process holds it."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.bind(_path_name(path))
    except OSError as e:
        sock.close()
        if e.errno == errno.EADDRINUSE:
            return None
        raise
    sock.listen(socket.SOMAXCONN)
    return sock


def _path_holder(path: str) -> int | None:
    """The pid of the server holding the path's lock (the process that listens on it)."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
        probe.settimeout(1.0)
        try:
            probe.connect(_path_name(path))
            creds = probe.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED,
                                     struct.calcsize("3i"))
        except OSError:
            return None
    pid = struct.unpack("3i", creds)[0]
    return pid or None


def _wait_for[T](take: Callable[[], T], holder: Callable[[], int | None], path: str) -> T:
    """``take()`` once it gives the lock (truthy), waiting a moment for the workers of a server
    that died (they end with it); else refuse, naming the holder."""
    deadline = time.monotonic() + ORPHAN_SECONDS
    while True:
        taken = take()
        if taken:
            return taken
        owner = holder()
        alive = owner is None or _alive(owner)
        if alive or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    if alive:
        raise StoreError(f"the store {path} is in use by the server of pid "
                         f"{owner or 'unknown'}: one server (with its workers) per store "
                         "file, whatever its name; stop it or give this one another --db")
    raise StoreError(f"the store {path} is still held by processes the server of pid "
                     f"{owner}, which is gone, started: stop them, then start again")


def lock_holder(fd: int) -> int | None:
    """The pid that took the ``flock`` held on ``fd``'s file (Linux ``/proc/locks``)."""
    st = os.fstat(fd)
    where = f"{os.major(st.st_dev):02x}:{os.minor(st.st_dev):02x}:{st.st_ino}"
    try:
        with open("/proc/locks") as f:
            for line in f:
                parts = line.split()
                if len(parts) > 5 and parts[1] == "FLOCK" and parts[5] == where:
                    return int(parts[4])
    except (OSError, ValueError):
        pass
    return None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    with contextlib.suppress(OSError):  # a zombie is dead: its parent has not reaped it yet
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rpartition(")")[2].split()[0] != "Z"
    return True


def acked_path(path: str) -> str:
    """The file beside the store that holds how many commits were acknowledged; writers of
    one server also take turns on its lock."""
    return path + ".acked"


class Acked(NamedTuple):
    """What ``acked_path`` records: how many commits were acknowledged, and of which store
    (its id) since which start or clean stop of a server (``start``, made new at each);
    both ids are empty in a file written before stores had them."""

    commits: int
    store_id: str = ""
    start: str = ""


def _acked(path: str) -> Acked | None:
    """What ``acked_path`` records, None without that file."""
    try:
        words = Path(acked_path(path)).read_text().split()
    except FileNotFoundError:
        return None
    return Acked(int(words[0]) if words else 0, *words[1:3])


def _new_start(conn: sqlite3.Connection, path: str) -> None:
    """Mark the store with a new start id, and write ``acked_path`` whole to match it: a copy
    of the store made before now (a backup) keeps the id it had, which then tells it apart
    from this store losing the end of its log. The count is the first line, the one line
    each commit rewrites in place (``SQLiteStore``)."""
    start = secrets.token_hex(8)
    conn.execute("INSERT OR REPLACE INTO meta VALUES ('start', ?)", (start,))
    count, store_id = (conn.execute("SELECT v FROM meta WHERE k=?", (k,)).fetchone()[0]
                       for k in ("acked", "store_id"))
    Path(acked_path(path)).write_text(f"{int(count):020d}\n{store_id} {start}\n")


def claim(path: str) -> StoreLock:
    """Lock the store file for this server, check it and bring its schema up to date.

    Refuses (``StoreError``) a path or a file another server holds (by any name), a
    write-ahead log whose database is gone, a database holding fewer commits than were
    acknowledged (the end of its log was lost), a failing ``PRAGMA quick_check``, and stored
    actions that disagree with the sessions' counts. A refusal by the lock creates no file.
    """
    if path == ":memory:":
        raise StoreError("a store shared by processes must be a file")
    _check_files(path)
    lock = StoreLock(path)
    try:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        lock.acquire()
    except OSError as e:
        raise StoreError(f"cannot open the store {path}: {e.strerror or e}") from None
    try:
        # checked read-only first: a damaged store stays as it is for whoever restores it
        with contextlib.closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True)) as conn:
            _check_database(conn, path)
            _check_acked(conn, path)
        conn = sqlite3.connect(path, isolation_level=None, timeout=BUSY_SECONDS)
        try:
            conn.execute("PRAGMA journal_mode=WAL")
            migrate(conn, path)
            miscounted = conn.execute(sql.MISCOUNTED).fetchone()[0]
            if miscounted:
                raise miscounted_error(path, miscounted)
            _new_start(conn, path)
        finally:
            conn.close()
        assert lock.file is not None
        problem = lock.file.check()  # and the size it has now, which it never goes below
        if problem:
            raise StoreError(f"{problem}; start again")
    except (sqlite3.Error, OSError, ValueError) as e:
        lock.release()
        raise StoreError(f"cannot open the store {path}: {e}") from None
    except BaseException:
        lock.release()
        raise
    return lock


def remove_unused(path: str) -> None:
    """Remove a store file and every file beside it that is its (log, shared memory,
    ``acked_path``) if it never acknowledged a commit: what a server that created it and
    failed to start leaves behind, which holds nothing anyone played."""
    acked = _acked(path)
    if acked is not None and acked.commits > 0:
        return
    for name in (path, f"{path}-wal", f"{path}-shm", acked_path(path)):
        with contextlib.suppress(FileNotFoundError):
            os.unlink(name)


def kept_path(path: str) -> str:
    """Where a server saves what it stored when its file was deleted or replaced under it."""
    return f"{path}.kept-{time.strftime('%Y%m%dT%H%M%S')}-{os.getpid()}"


def release(path: str, lock: StoreLock) -> None:
    """Empty the write-ahead log into the database (every process of the server has closed
    it) and give up the store.

    Only into the file the server locked: when the path no longer names it, or it shrank,
    ``StoreError`` says so, after the log was kept from the file the path names now. A file
    deleted or replaced is copied with its log to ``kept_path``, so nothing acknowledged is
    lost; the log of a truncated one is left as it is (the next start refuses the pair).
    A log that cannot be copied (a full disk) stays beside the store, which applies it when
    next opened: ``StoreError`` says so.
    """
    try:
        problem = lock.file.check() if lock.file is not None else None
        if problem is not None:
            raise StoreError(_set_aside(path, lock, problem))
        try:
            with contextlib.closing(sqlite3.connect(path, isolation_level=None,
                                                    timeout=BUSY_SECONDS)) as conn:
                conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
                with contextlib.suppress(sqlite3.Error, OSError):  # a full disk: kept as it was
                    _new_start(conn, path)
        except sqlite3.Error as e:
            raise StoreError(f"the write-ahead log {path}-wal could not be copied into the "
                             f"store at stop ({e}): it is kept beside it, and applied when "
                             "the store is next opened") from None
    finally:
        lock.release()


def _set_aside(path: str, lock: StoreLock, problem: str) -> str:
    """Keep the log of the locked file from the file ``path`` names now; returns what was
    done, for the one line the server ends with."""
    said = f"{problem}: nothing was written after it was seen"
    wal = Path(path + "-wal")
    if problem.startswith(f"the store file {path} was truncated"):
        return (f"{said}, and its write-ahead log {wal} is left as it is (restore the store "
                "from a backup)")
    kept = kept_path(path)
    try:
        assert lock.fd is not None
        with os.fdopen(os.dup(lock.fd), "rb") as source, open(kept, "xb") as copy:
            source.seek(0)
            shutil.copyfileobj(source, copy)
    except OSError as e:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(kept)
        with contextlib.suppress(FileNotFoundError):
            os.replace(wal, f"{kept}.wal")  # not "-wal": never applied to another file
        return (f"{said}; what it stored could not be saved ({e.strerror or e}): its "
                f"write-ahead log is kept as {kept}.wal, away from the file now at {path}")
    with contextlib.suppress(FileNotFoundError):
        os.replace(wal, kept + "-wal")
    return (f"{said}; what this server stored is kept in {kept} (with its log), and the "
            f"file now at {path} was left untouched")


def _check_files(path: str) -> None:
    db, wal = Path(path), Path(path + "-wal")
    db_size = db.stat().st_size if db.exists() else 0
    wal_size = wal.stat().st_size if wal.exists() else 0
    if db_size == 0 and wal_size > 0:
        raise StoreError(f"the store {path} is missing but its write-ahead log {wal} is there: "
                         "the database file was deleted or truncated; restore it from a "
                         "backup (starting on an empty store would lose every key and result)")


def _check_acked(conn: sqlite3.Connection, path: str) -> None:
    """Refuse a database holding fewer commits than were acknowledged, saying whether it is
    this store that lost the end of its log, an earlier copy of it (a backup restored over
    it) or another store."""
    acked = _acked(path)
    if acked is None:
        return
    try:
        meta = dict(conn.execute("SELECT k, v FROM meta").fetchall())
    except sqlite3.OperationalError:  # no meta table: an empty database
        meta = {}
    held = int(meta.get("acked", 0))
    if held >= acked.commits:
        return
    said = f"the store {path} holds {held} commits but {acked.commits} were acknowledged"
    delete = f"delete {acked_path(path)}"
    if acked.store_id and meta.get("store_id") != acked.store_id:
        raise StoreError(f"{said} by another store (id {acked.store_id}, this one's is "
                         f"{meta.get('store_id', 'none')}): another store's file was put at "
                         f"this path; to serve this one, {delete}")
    if acked.start and meta.get("start") != acked.start:
        raise StoreError(f"{said}: it is an earlier copy of this store (a backup restored over "
                         "it, taken before the server's last start or stop), not a lost log; "
                         f"to serve it as restored, without what was played after the backup, "
                         f"{delete}")
    raise StoreError(
        f"{said}: the end of its write-ahead log {path}-wal was lost or damaged (deleted, "
        "corrupted, or not synced before a power loss); restore the store with its log from "
        f"a backup, or to serve what is left (or a backup taken since the server's last "
        f"start, restored), {delete}")


def _check_database(conn: sqlite3.Connection, path: str) -> None:
    problems = [r[0] for r in conn.execute("PRAGMA quick_check")]
    if problems != ["ok"]:
        first = problems[0].splitlines()[0]
        raise StoreError(f"the store {path} fails its integrity check ({first}); "
                         "restore it from a backup")
