"""A round of a version: opened with a closing time, closed with its final standings.

A round is recorded in ``round.json`` beside the version's manifest (the version's own files
never change): when it opened and when it closes, then when it closed and the sha256 of the
final standings written at closing (``standings.json`` and ``standings.csv``, each name's best
closed scorecard, ranked as the leaderboard ranks, with its scorecard id) and of the
``standings.sha256`` file that lists both (``sha256sum -c`` checks it). The server reads the
record to refuse new play on a closed round; ``reveal`` refuses while a round is open.
"""

from __future__ import annotations

__all__ = ["COLUMNS", "ROUND_FILE", "STANDINGS_CSV", "STANDINGS_JSON", "STANDINGS_SHA256",
           "Round", "RoundBook", "iso", "open_round", "parse_time", "read_round", "record_round",
           "version_folder", "write_standings"]

import csv
import io
import json
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pipeline.errors import InputError, PipelineError
from pipeline.tables import sha256_file, write_text
from pipeline.version import check_version_name

ROUND_FILE = "round.json"
STANDINGS_JSON = "standings.json"
STANDINGS_CSV = "standings.csv"
STANDINGS_SHA256 = "standings.sha256"
# How often (seconds) a server looks at a version's round.json again: its check is then a
# clock read on almost every action.
RECHECK_SECONDS = 1.0
# Seconds ``close`` waits after moving the closing time to now, so that every server sees the
# new time and a request one accepted just before is stored before the standings are read.
SETTLE_SECONDS = 2.0 * RECHECK_SECONDS
CACHED_ROUNDS = 1024
# The standing's columns, in the CSV's order; ``success_interval`` splits into lo and hi.
COLUMNS = ("rank", "name", "scorecard_id", "session_id", "submitted_at", "success_rate",
           "success_interval_lo", "success_interval_hi", "indistinguishable_from_above",
           "paired_p_above", "solved", "episodes", "move_efficiency", "deadlock_rate",
           "avg_steps_solved", "total_actions", "source")


def iso(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_time(text: str, now: float | None = None) -> float:
    """``now`` or an ISO 8601 time (``2026-12-31T23:59Z``; a time without a zone is UTC) as
    seconds since the epoch; ``InputError`` otherwise."""
    if text.strip().lower() == "now":
        return time.time() if now is None else now
    try:
        when = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        raise InputError(f"{text[:40]!r} is not a time: give ISO 8601 such as "
                         "2026-12-31T23:59Z (UTC without a zone), or now") from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return when.timestamp()


@dataclass(frozen=True)
class Round:
    """A version's round as recorded: ``closes`` the announced closing time, ``closed`` when
    ``close`` wrote the final standings (None before), ``standings_sha256`` their digest."""

    version: str
    opened: float
    closes: float
    closed: float | None = None
    standings_sha256: str | None = None

    def is_over(self, now: float) -> bool:
        """Whether play on this round has ended: closed, or its closing time passed."""
        return self.closed is not None or now >= self.closes

    def refusal(self) -> str:
        """Why a request on this round is refused, and where its results are."""
        return (f"the round of version {self.version} closed at {iso(self.closes)}: no new "
                "scorecards or play on it; its final standings are at "
                f"/leaderboard?version={self.version}")

    def to_dict(self) -> dict[str, Any]:
        return {"format": 1, "version": self.version, "opened": iso(self.opened),
                "closes": iso(self.closes),
                "closed": None if self.closed is None else iso(self.closed),
                "standings": None if self.standings_sha256 is None else {
                    "json": STANDINGS_JSON, "csv": STANDINGS_CSV, "sums": STANDINGS_SHA256,
                    "sha256": self.standings_sha256}}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Round:
        standings = data.get("standings") or {}
        return cls(str(data["version"]), parse_time(data["opened"]),
                   parse_time(data["closes"]),
                   None if data.get("closed") is None else parse_time(data["closed"]),
                   standings.get("sha256"))


def read_round(folder: Path) -> Round | None:
    """The round recorded in a version folder, or None when it never had one."""
    path = folder / ROUND_FILE
    if not path.is_file():
        return None
    try:
        return Round.from_dict(json.loads(path.read_text(encoding="utf-8")))
    except (ValueError, KeyError, TypeError) as e:
        raise InputError(f"{path} is not a round record ({type(e).__name__}: {e})") from None


def version_folder(datasets: Path, version: str) -> Path:
    """The folder of a finished version (``InputError`` when there is none)."""
    check_version_name(version)
    folder = datasets / version
    if not (folder / "manifest.json").is_file():
        raise InputError(f"no version {version!r} under {datasets}")
    return folder


def record_round(folder: Path, rnd: Round) -> None:
    write_text(json.dumps(rnd.to_dict(), indent=2) + "\n", folder / ROUND_FILE)


def open_round(datasets: Path, version: str, closes: float, now: float | None = None) -> Round:
    """Open (or move the closing time of) ``version``'s round; a closed round stays closed."""
    folder = version_folder(datasets, version)
    now = time.time() if now is None else now
    if closes <= now:
        raise InputError(f"the closing time {iso(closes)} is not in the future")
    current = read_round(folder)
    if current is not None and current.closed is not None:
        raise PipelineError(f"the round of {version} closed at {iso(current.closed)}; rotate "
                            "a new version for the next round")
    rnd = Round(version, current.opened if current else now, closes)
    record_round(folder, rnd)
    return rnd


def write_standings(folder: Path, rows: list[dict[str, Any]]) -> tuple[Path, ...]:
    """``standings.json``, ``standings.csv`` and ``standings.sha256`` (both files' digests,
    in ``sha256sum`` format) in ``folder``."""
    version = folder.name
    write_text(json.dumps({"format": 1, "version": version, "columns": list(COLUMNS),
                           "entries": rows}, indent=2) + "\n", folder / STANDINGS_JSON)
    text = io.StringIO()
    out = csv.DictWriter(text, fieldnames=COLUMNS, lineterminator="\n")
    out.writeheader()
    out.writerows({k: ("" if v is None else v) for k, v in row.items()} for row in rows)
    write_text(text.getvalue(), folder / STANDINGS_CSV)
    sums = "".join(f"{sha256_file(folder / name)}  {name}\n"
                   for name in (STANDINGS_JSON, STANDINGS_CSV))
    write_text(sums, folder / STANDINGS_SHA256)
    return tuple(folder / n for n in (STANDINGS_JSON, STANDINGS_CSV, STANDINGS_SHA256))


class RoundBook:
    """The rounds of the versions under a datasets folder, as a server checks them on every
    request that would change a round: each ``round.json`` is looked at again at most every
    ``RECHECK_SECONDS`` and reread when its file changed."""

    def __init__(self, datasets: Path, clock: Any = time.monotonic) -> None:
        self.datasets = Path(datasets)
        self.clock = clock
        self._seen: dict[str, tuple[tuple[int, int] | None, Round | None]] = {}
        self._looked: dict[str, float] = {}

    def get(self, version: str) -> Round | None:
        """The round of ``version`` (None without one, or for a name no version can have)."""
        seen = self._seen.get(version)
        now = self.clock()
        if seen is not None and now - self._looked[version] < RECHECK_SECONDS:
            return seen[1]
        try:
            check_version_name(version)
        except InputError:
            return None
        if len(self._seen) > CACHED_ROUNDS:  # names come from requests: keep the cache small
            self._seen.clear()
            seen = None
        self._looked[version] = now
        path = self.datasets / version / ROUND_FILE
        try:
            st = path.stat()
            stamp: tuple[int, int] | None = (st.st_mtime_ns, st.st_size)
        except OSError:
            stamp = None
        if seen is not None and seen[0] == stamp:
            return seen[1]
        try:
            rnd = read_round(path.parent) if stamp is not None else None
        except InputError:
            rnd = seen[1] if seen else None  # a record being rewritten: keep the last one read
        self._seen[version] = (stamp, rnd)
        return rnd

    def over(self, version: str, now: float) -> Round | None:
        """The round of ``version`` if play on it has ended, else None."""
        rnd = self.get(version)
        return rnd if rnd is not None and rnd.is_over(now) else None
