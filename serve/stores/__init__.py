"""The server's durable state: the ``Store`` interface with its records and errors, its SQLite
(``serve.stores.sqlite``) and PostgreSQL (``serve.stores.postgres``) backends, and the opener.

Below the rest of ``serve``: nothing here imports the play layer, the web layer or the pages.
"""

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
    miscounted_error,
)
from serve.stores.location import (
    BadLocation,
    checked,
    is_postgres,
    open_store,
    read_store,
    shown,
)
from serve.stores.sql import ANONYMOUS

__all__ = [
    "ANONYMOUS", "BadLocation", "EpisodeRecord", "Final", "KeyRecord", "PlayedEpisode",
    "PlayedSession", "ScorecardRecord", "SessionRecord", "checked",
    "StaleSession", "Standing", "Store", "StoreConflict", "StoreError", "StoreLimit",
    "StoreUnavailable", "Write", "is_postgres", "miscounted_error", "open_store", "read_store",
    "shown",
]
