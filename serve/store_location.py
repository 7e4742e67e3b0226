"""Which store a location names, opened: a PostgreSQL URL, or else a SQLite file path.

Apart from ``serve.store`` (the interface both stores implement), so that neither store's
module imports the other's through it.
"""

from __future__ import annotations

from serve.pg_store import PostgresStore
from serve.sqlite_store import SQLiteStore
from serve.store import Store

__all__ = ["is_postgres", "open_store"]


def is_postgres(location: str) -> bool:
    return location.startswith(("postgresql://", "postgres://"))


def open_store(location: str, synchronous: str = "NORMAL") -> Store:
    """The store at ``location``: a PostgreSQL URL, or else a SQLite file path."""
    if is_postgres(location):
        return PostgresStore(location)
    return SQLiteStore(location, synchronous)
