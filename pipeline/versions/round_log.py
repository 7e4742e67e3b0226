"""A round's log: which stores served it, and each close undone, one JSON line per event in
``round.log`` beside ``round.json``.

A server records its store by the store's id (``Store.identity``), never by its location: a
PostgreSQL URL may hold a password, and the version's files are committed once published.
``round close`` ranks only from a store the log says served the round; ``round undo-close``
appends why it undid a close, and what it undid, before any publication.
"""

from __future__ import annotations

__all__ = ["ROUND_LOG", "logged", "record", "record_served", "served_by"]

import json
import os
from pathlib import Path
from typing import Any

from pipeline.errors import InputError

ROUND_LOG = "round.log"


def logged(folder: Path) -> list[dict[str, Any]]:
    """Every event of the round's log, in order (none without a log)."""
    path = folder / ROUND_LOG
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return []
    try:
        return [json.loads(line) for line in text.splitlines() if line.strip()]
    except ValueError as e:
        raise InputError(f"{path} is not a round log ({e})") from None


def record(folder: Path, event: dict[str, Any]) -> None:
    """Append ``event`` to the round's log (one write of one line, so that the servers' and
    the commands' lines never interleave); the log is private to its owner (0600)."""
    line = (json.dumps(event, sort_keys=True) + "\n").encode()
    fd = os.open(folder / ROUND_LOG, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        os.write(fd, line)
    finally:
        os.close(fd)


def served_by(folder: Path) -> set[str]:
    """The ids of the stores that served the round."""
    return {e["served_by"] for e in logged(folder) if "served_by" in e}


def record_served(folder: Path, store_id: str, at: str) -> None:
    """Record that the store ``store_id`` serves the round (at ``at``, ISO 8601), once."""
    if store_id not in served_by(folder):
        record(folder, {"served_by": store_id, "at": at})
