"""Which store a location names, opened: a PostgreSQL URL, or else a SQLite file path.

Apart from ``serve.stores.interface`` (what both stores implement), so that neither store's
module imports the other's through it. ``read_store`` is the one way synchronous code (the
commands that read what was played: audit, irt, round close) reads a store.
"""

from __future__ import annotations

__all__ = ["BadLocation", "checked", "is_postgres", "open_store", "read_store", "shown"]

import asyncio
import contextlib
import sqlite3
from collections.abc import Awaitable, Callable
from pathlib import Path

from serve.stores.interface import Store, StoreError, StoreUnavailable
from serve.stores.postgres import PostgresStore
from serve.stores.sqlite import SQLiteStore


class BadLocation(StoreError, ValueError):
    """A store location that names no store this server opens (a URL of another scheme)."""


def is_postgres(location: str) -> bool:
    return location.startswith(("postgresql://", "postgres://"))


def checked(location: str) -> str:
    """``location`` if it names a store: a PostgreSQL URL or a file path. Any other URL
    (``sqlite:///s.sqlite``) is refused (``BadLocation``): as a path it would be a new, empty
    store in a folder named after the scheme."""
    if "://" in location and not is_postgres(location):
        scheme = location.partition("://")[0]
        # the URL itself is not said: it may hold a password
        raise BadLocation(f"a {scheme}:// URL names no store: give a postgresql:// URL or a "
                          f"SQLite file's path (without {scheme}://)")
    return location


def open_store(location: str, synchronous: str = "NORMAL", locked_fd: int | None = None) -> Store:
    """The store at ``location``: a PostgreSQL URL, or else a SQLite file path (whose file,
    when the server claimed it, is the one open as ``locked_fd``); ``BadLocation`` for any
    other URL."""
    if is_postgres(checked(location)):
        return PostgresStore(location)
    return SQLiteStore(location, synchronous, locked_fd)


def shown(location: str) -> str:
    """The store's location as messages and logs may show it: without a password."""
    if is_postgres(location) and "@" in location:
        scheme, _, rest = location.partition("://")
        user, _, where = rest.rpartition("@")
        return f"{scheme}://{user.split(':')[0]}@{where}"
    return location


def _check_is_a_store(path: str) -> None:
    """Refuse, before opening it for writing, a path that is not a SQLite file holding a
    store's tables: opening would create the store's tables and files beside it."""
    if not Path(path).is_file():
        raise StoreError(f"no store at {path}")
    try:
        with contextlib.closing(sqlite3.connect(f"file:{Path(path).resolve()}?mode=ro",
                                                uri=True)) as conn:
            found = conn.execute("SELECT count(*) FROM sqlite_master WHERE type='table' "
                                 "AND name IN ('keys', 'scorecards')").fetchone()[0]
    except sqlite3.Error as e:
        raise StoreError(f"cannot read the store {path}: {e}") from None
    if found < 2:
        raise StoreError(f"{path} is not a sokoforge store (it has no keys and scorecards "
                         "tables): give the file the server was started with as --db")


def read_store[T](location: str, read: Callable[[Store], Awaitable[T]]) -> T:
    """What ``read`` gets from the store at ``location`` (a SQLite file, which must exist, or
    a PostgreSQL URL), opened for it and closed after; ``StoreError`` when it cannot be read.

    Messages name the location without its password.
    """
    if not is_postgres(checked(location)):
        _check_is_a_store(location)

    async def run() -> T:
        store = open_store(location)
        await store.start()
        try:
            return await read(store)
        finally:
            await store.close()

    try:
        return asyncio.run(run())
    except StoreUnavailable as e:  # said as the server says it: which store, then why
        raise StoreError(f"cannot read the store {shown(location)}: {e}") from None
    except StoreError:
        raise
    except Exception as e:  # a database driver's own errors (unreachable, refused, damaged)
        raise StoreError(f"cannot read the store {shown(location)}: {e}") from None
