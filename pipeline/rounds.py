"""A round of a version: opened with a closing time, closed with its final standings.

A round is recorded in ``round.json`` beside the version's manifest (the version's own files
never change): when it opened and when it closes, then when it closed and the sha256 of the
final standings written at closing (``standings.json`` and ``standings.csv``, each name's best
closed scorecard, ranked as the leaderboard ranks, with its scorecard id) and of the
``standings.sha256`` file that lists both (``sha256sum -c`` checks it). The server reads the
record to refuse new play on a closed round; ``reveal`` refuses while a round is open.
"""

from __future__ import annotations

import asyncio
import csv
import io
import json
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pipeline.build import check_version_name
from pipeline.errors import InputError, PipelineError
from pipeline.tables import read_parquet, sha256_file, write_text

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


def _folder(datasets: Path, version: str) -> Path:
    check_version_name(version)
    folder = datasets / version
    if not (folder / "manifest.json").is_file():
        raise InputError(f"no version {version!r} under {datasets}")
    return folder


def _record(folder: Path, rnd: Round) -> None:
    write_text(json.dumps(rnd.to_dict(), indent=2) + "\n", folder / ROUND_FILE)


def open_round(datasets: Path, version: str, closes: float, now: float | None = None) -> Round:
    """Open (or move the closing time of) ``version``'s round; a closed round stays closed."""
    folder = _folder(datasets, version)
    now = time.time() if now is None else now
    if closes <= now:
        raise InputError(f"the closing time {iso(closes)} is not in the future")
    current = read_round(folder)
    if current is not None and current.closed is not None:
        raise PipelineError(f"the round of {version} closed at {iso(current.closed)}; rotate "
                            "a new version for the next round")
    rnd = Round(version, current.opened if current else now, closes)
    _record(folder, rnd)
    return rnd


@dataclass(frozen=True)
class Closing:
    """A closed round: its record and where its standings were written."""

    round: Round
    rows: list[dict[str, Any]]
    files: tuple[Path, ...]


def close_round(datasets: Path, version: str, db: str, now: float | None = None,
                settle: float = SETTLE_SECONDS) -> Closing:
    """Close ``version``'s round now (or confirm a past closing time), write its final
    standings from the store ``db`` and record their sha256.

    Closing again rewrites the same standings from the same store: the server refuses every
    change on a round once its closing time has passed.
    """
    folder = _folder(datasets, version)
    now = time.time() if now is None else now
    current = read_round(folder)
    if current is None:
        raise PipelineError(f"{version} has no round to close: open one first "
                            f"(sokoforge round open {version} --closes TIME)")
    closes = current.closes
    if closes > now:  # closing early: the servers see the new time at their next request
        closes = now
        _record(folder, Round(version, current.opened, closes))
        time.sleep(settle)
    tiers = read_parquet(folder / "levels.parquet", ["index", "tier"]).sort("index")["tier"]
    rows = standings(db, version, closes, tiers.to_list())
    files = write_standings(folder, rows)
    rnd = Round(version, current.opened, closes, current.closed or now,
                sha256_file(folder / STANDINGS_SHA256))
    _record(folder, rnd)
    return Closing(rnd, rows, files)


def standings(db: str, version: str, closes: float,
              tiers: list[int] | None = None) -> list[dict[str, Any]]:
    """Each name's best scorecard on ``version``, ranked, from the store ``db`` (a SQLite
    file or a PostgreSQL URL); refused when one was closed after ``closes`` (the servers
    refuse that, so a server that did not know the round took it). Each row has the
    leaderboard's precision: the success interval over draws of levels (strata: ``tiers``,
    each level's in play order) and whether a paired test tells it from the row above."""
    from serve.ranking_precision import RankingPrecision
    from serve.store import is_postgres, open_store

    if not is_postgres(db) and not Path(db).is_file():
        raise InputError(f"no store at {db}: give the server's --db")

    async def read() -> tuple[list, list[dict]]:
        store = open_store(db)
        await store.start()
        try:
            ranked = await store.leaderboard(version, 1_000_000)
            marks = [{"solved": s.result["solved"], "episodes": s.result["episodes"]}
                     for s in ranked]
            await RankingPrecision(store).annotate(marks, ranked, tiers)
            return ranked, marks
        finally:
            await store.close()

    try:
        ranked, marks = asyncio.run(read())
    except Exception as e:  # a damaged store, a refused connection: said, not a traceback
        raise PipelineError(f"cannot read the store {db}: {e}") from None
    late = [s for s in ranked if s.closed > closes]
    if late:  # its name's earlier results are not in the board: refuse rather than drop them
        raise PipelineError(
            f"{len(late)} best result(s) on {version} were closed after the round's closing "
            f"time {iso(closes)} (scorecard {late[0].scorecard_id} of {late[0].name!r}, closed "
            f"{iso(late[0].closed)}): a server that did not see round.json took them; give "
            "every server the same round (round open on each, or one datasets folder)")
    rows = []
    for s, mark in zip(ranked, marks, strict=True):
        r = s.result
        interval = mark.get("success_interval") or [None, None]
        rows.append({
            "rank": len(rows) + 1, "name": s.name, "scorecard_id": s.scorecard_id,
            "session_id": s.session_id, "submitted_at": iso(s.closed),
            "success_rate": r["success_rate"], "success_interval_lo": interval[0],
            "success_interval_hi": interval[1],
            "indistinguishable_from_above": mark.get("indistinguishable_from_above"),
            "paired_p_above": mark.get("paired_p_above"), "solved": r["solved"],
            "episodes": r["episodes"], "move_efficiency": r["move_efficiency"],
            "deadlock_rate": r["deadlock_rate"], "avg_steps_solved": r["avg_steps_solved"],
            "total_actions": r["total_actions"], "source": s.source})
    return rows


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
