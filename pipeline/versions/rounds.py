"""A round of a version: opened with a closing time, closed with its final standings.

A round is recorded in ``round.json`` beside the version's manifest (the version's levels
never change): when it opened and when it closes, to the millisecond (ISO 8601, UTC), then
when it closed and the sha256 of the final standings written at closing (``standings.json``
and ``standings.csv``, each named player's best scorecard closed before the closing time,
ranked as the leaderboard ranks, with its scorecard id) and of the ``standings.sha256`` file
that lists both (``sha256sum -c`` checks it), and last when it was published. Every time is
kept as the number of milliseconds it states, so the value a server compares is the value the
close compares. The server reads the record to refuse new play on a round that is over
(until it is published, as a practice set); ``reveal`` refuses while a round is open.
"""

from __future__ import annotations

__all__ = ["COLUMNS", "NOTICE_SECONDS", "POOLED_COLUMNS", "ROUND_FILE", "STANDINGS_CSV",
           "STANDINGS_FILES", "STANDINGS_JSON", "STANDINGS_SHA256", "Round", "RoundBook",
           "RoundRecord", "StandingsRecord", "bound_text", "exact", "iso", "open_round",
           "parse_time", "read_round", "record_round", "round_state", "standings_bytes",
           "version_folder", "write_standings"]

import csv
import hashlib
import io
import json
import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, NotRequired, TypedDict

from pipeline.errors import InputError, PipelineError
from pipeline.versions.hidden_files import private_writes_in
from pipeline.versions.tables import write_text
from pipeline.versions.version import VersionMissing, check_version_name

ROUND_FILE = "round.json"
STANDINGS_JSON = "standings.json"
STANDINGS_CSV = "standings.csv"
STANDINGS_SHA256 = "standings.sha256"
STANDINGS_FILES = (STANDINGS_JSON, STANDINGS_CSV, STANDINGS_SHA256)
# How often (seconds) a server looks at a version's round.json again: its check is then a
# clock read on almost every action, against the closing time it already knows.
RECHECK_SECONDS = 1.0
# How far ahead (seconds) a closing time must be when it is moved earlier (``close`` of a round
# still open moves it to now plus this): every server has read the new time before it comes,
# so each refuses at the closing time itself.
NOTICE_SECONDS = 2.0 * RECHECK_SECONDS + 0.5
CACHED_ROUNDS = 1024
# The standing's columns, in the CSV's order; ``success_interval`` splits into lo and hi. A
# row is exactly these keys (``write_standings`` checks): a new column is one more name here
# and one more key in ``serve.records.standings.standing_row``. ``review`` is the fair-play review's
# verdict on the row's scorecard (``consistent`` or ``needs review``; empty if it played
# nothing to review), which ``round close`` runs: a flag, the ranking is unchanged.
COLUMNS = ("rank", "name", "scorecard_id", "session_id", "submitted_at", "success_rate",
           "success_interval_lo", "success_interval_hi", "indistinguishable_from_above",
           "paired_p_above", "solved", "episodes", "move_efficiency", "deadlock_rate",
           "avg_steps_solved", "total_actions", "source", "review")
# An adaptive game's standings: one row per name, ranked by its ability pooled over all its
# closed scorecards (``pipeline.scores.pooled``); ``scorecard_id`` and ``submitted_at`` are its
# latest, ``review`` its scorecards' worst verdict, ``success_rate`` the raw one pooled (near
# 0.5 by design: not comparable across games)
POOLED_COLUMNS = ("rank", "name", "scorecards", "scorecard_id", "submitted_at", "ability",
                  "ability_lo", "ability_hi", "equated_success", "equated_lo", "equated_hi",
                  "indistinguishable_from_above", "paired_p_above", "solved", "episodes",
                  "success_rate", "source", "review")
_FIRST = datetime(1, 1, 1, tzinfo=UTC).timestamp()
_LAST = datetime(9999, 12, 31, 23, 59, 59, 999000, UTC).timestamp()
_FRACTION = re.compile(r"[.,](\d+)")  # an ISO 8601 time has no other '.' or ','


def exact(ts: float) -> float:
    """``ts`` to the millisecond: the only times a round records or compares."""
    return round(ts * 1000) / 1000


def iso(ts: float) -> str:
    """``ts`` in ISO 8601, UTC, to the millisecond (``2026-12-31T23:59:00.000Z``)."""
    ms = round(ts * 1000)
    whole = datetime.fromtimestamp(ms // 1000, UTC)
    return f"{whole.year:04d}-{whole:%m-%dT%H:%M:%S}.{ms % 1000:03d}Z"


def parse_time(text: str, now: float | None = None) -> float:
    """``now`` or an ISO 8601 time (``2026-12-31T23:59Z``; a time without a zone is UTC) as
    seconds since the epoch, to the millisecond; ``InputError`` otherwise (a finer fraction
    is refused, not cut, and so is a time outside the years 1-9999 in UTC)."""
    if text.strip().lower() == "now":
        return exact(time.time() if now is None else now)
    usage = (f"{text[:40]!r} is not a time: give ISO 8601 such as 2026-12-31T23:59Z (UTC "
             "without a zone), or now")
    if any(f[3:].strip("0") for f in _FRACTION.findall(text)):
        raise InputError(f"{text[:40]!r} has a fraction of a second finer than a millisecond: "
                         "round times are kept to the millisecond (e.g. 23:59:59.125Z)")
    try:
        when = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        raise InputError(usage) from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    ts = when.timestamp()
    if ts > _LAST:
        raise InputError(f"{text[:40]!r} is after 9999-12-31T23:59:59.999Z (UTC), the last "
                         "time a round can record")
    if ts < _FIRST:
        raise InputError(f"{text[:40]!r} is before 0001-01-01T00:00:00.000Z (UTC), the first "
                         "time a round can record")
    return exact(ts)


def _time(value: Any) -> float:
    """A time as ``round.json`` records it."""
    if not isinstance(value, str) or value.strip().lower() == "now":
        raise TypeError(f"{value!r} is not a recorded time")
    return parse_time(value)


class StandingsRecord(TypedDict):
    """Where a closed round's standings files are, and the sha256 of their sums."""

    json: str
    csv: str
    sums: str
    sha256: str


class RoundRecord(TypedDict):
    """A round as ``round.json`` records it (times in ISO 8601, UTC)."""

    format: int
    version: str
    opened: str
    closes: str
    closed: str | None
    standings: StandingsRecord | None
    published: NotRequired[str]


@dataclass(frozen=True)
class Round:
    """A version's round as recorded: ``closes`` the announced closing time, ``closed`` when
    ``close`` wrote the final standings (None before), ``standings_sha256`` their digest,
    ``published`` when ``round publish`` made the version public (None before)."""

    version: str
    opened: float
    closes: float
    closed: float | None = None
    standings_sha256: str | None = None
    published: float | None = None

    def is_over(self, now: float) -> bool:
        """Whether the round has ended: closed, or its closing time reached."""
        return self.closed is not None or now >= self.closes

    def refuses(self, now: float) -> bool:
        """Whether play on the version is refused at ``now``: its round is over and the
        version not yet published (a published one is a practice set, played unranked)."""
        return self.published is None and self.is_over(now)

    def refusal(self) -> str:
        """Why a request on this round is refused, and where its results are."""
        return (f"the round of version {self.version} closed at {iso(self.closes)}: no new "
                "scorecards or play on it; its final standings are at "
                f"/leaderboard?version={self.version}")

    def to_dict(self) -> RoundRecord:
        def when(ts: float | None) -> str | None:
            return None if ts is None else iso(ts)

        data: RoundRecord = {"format": 1, "version": self.version, "opened": iso(self.opened),
                "closes": iso(self.closes), "closed": when(self.closed),
                "standings": None if self.standings_sha256 is None else {
                    "json": STANDINGS_JSON, "csv": STANDINGS_CSV, "sums": STANDINGS_SHA256,
                    "sha256": self.standings_sha256}}
        if self.published is not None:
            data["published"] = iso(self.published)
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Round:
        standings = data.get("standings") or {}

        def when(key: str) -> float | None:
            return None if data.get(key) is None else _time(data[key])

        return cls(str(data["version"]), _time(data["opened"]), _time(data["closes"]),
                   when("closed"), standings.get("sha256"), when("published"))


def round_state(rnd: Round | None, now: float) -> str:
    """The round's state in one word: ``none``, ``open``, ``over`` (its time reached, not
    closed yet), ``closed`` or ``published``."""
    if rnd is None:
        return "none"
    if rnd.published is not None:
        return "published"
    if rnd.closed is not None:
        return "closed"
    return "over" if rnd.is_over(now) else "open"


def read_round(folder: Path) -> Round | None:
    """The round recorded in a version folder, or None when it never had one."""
    path = folder / ROUND_FILE
    if not path.is_file():
        return None
    try:
        return Round.from_dict(json.loads(path.read_text(encoding="utf-8")))
    except (ValueError, KeyError, TypeError, InputError) as e:
        raise InputError(f"{path} is not a round record ({type(e).__name__}: {e})") from None


def version_folder(datasets: Path, version: str) -> Path:
    """The folder of a finished version (``InputError`` when there is none)."""
    check_version_name(version)
    folder = datasets / version
    if not (folder / "manifest.json").is_file():
        raise VersionMissing(datasets, version)
    return folder


def record_round(folder: Path, rnd: Round) -> None:
    """Write ``rnd`` to the version's ``round.json`` (0600 while the version is hidden)."""
    with private_writes_in(folder):
        write_text(json.dumps(rnd.to_dict(), indent=2) + "\n", folder / ROUND_FILE)


def open_round(datasets: Path, version: str, closes: float, now: float | None = None,
               reopen: bool = False) -> Round:
    """Open (or move the closing time of) ``version``'s round; a closed round stays closed.

    A closing time moved earlier must be at least ``NOTICE_SECONDS`` ahead, so that every
    server reads it before it comes (later, or at the first opening, any future time will do:
    no server refuses anything by it yet). A round whose closing time has passed (over, not
    closed yet) is reopened only when ``reopen`` says so: play it refused would resume."""
    folder = version_folder(datasets, version)
    now = time.time() if now is None else now
    closes = exact(closes)
    if closes <= now:
        raise InputError(f"the closing time {iso(closes)} is not in the future")
    current = read_round(folder)
    if current is not None and current.closed is not None:
        raise PipelineError(f"the round of {version} closed at {iso(current.closed)}; rotate "
                            "a new version for the next round")
    if current is not None and current.is_over(now) and not reopen:
        raise PipelineError(f"the round of {version} is over: its closing time "
                            f"{iso(current.closes)} has passed; pass --reopen to reopen it "
                            f"until {iso(closes)} (play resumes), or close it: sokoforge "
                            f"round close {version}")
    if current is not None and closes < current.closes and closes < now + NOTICE_SECONDS:
        raise InputError(f"the closing time {iso(closes)} moves the round's {iso(current.closes)}"
                         f" earlier by less than {NOTICE_SECONDS:g} s from now: the servers "
                         "would not all see it in time; give a later time, or run round close")
    rnd = Round(version, current.opened if current else exact(now), closes)
    record_round(folder, rnd)
    return rnd


def bound_text(bound: int, levels: int | None, equated: float | None = None) -> str:
    """What passes the fair-play review unflagged, in words: the sentence the review, its
    report, the boards and the standings state. On an adaptive game's pool, whose sessions
    are each judged on the levels they showed, it is stated on the ``equated`` scale."""
    if equated is not None:
        return (f"on this pool, play beyond the compute frontier on the levels a session "
                f"showed needs source review: about an equated success above {equated:.1%} "
                f"(the pool's bound, {bound} of its {levels} levels)")
    return f"on this version, more than {bound} of {levels} solved needs source review"


def standings_bytes(version: str, rows: Sequence[Mapping[str, Any]],
                    columns: Sequence[str] = COLUMNS, bound: int | None = None,
                    levels: int | None = None, equated: float | None = None
                    ) -> dict[str, bytes]:
    """The contents of ``standings.json``, ``standings.csv`` and ``standings.sha256`` (both
    files' digests, in ``sha256sum`` format, names relative to the folder) for ``rows``, each
    exactly the keys ``columns``: the same rows give the same bytes. With ``bound``, the JSON
    states the fair-play review's K of the ``levels`` (``bound``: more solved needed source
    review); standings sealed before that was kept have none. A pool's (``equated``) is
    stated on the equated scale too."""
    for row in rows:
        if list(row) != list(columns):
            raise PipelineError(f"a standings row has the keys {list(row)}, not the columns "
                                f"{list(columns)}")
    head: dict[str, Any] = {"format": 1, "version": version}
    if bound is not None:
        head["bound"] = {"solved": bound, "levels": levels,
                         "text": bound_text(bound, levels, equated)}
        if equated is not None:
            head["bound"]["equated_success"] = equated
    files = {STANDINGS_JSON: (json.dumps({**head, "columns": list(columns),
                                          "entries": list(rows)}, indent=2) + "\n").encode()}
    text = io.StringIO()
    out = csv.DictWriter(text, fieldnames=columns, lineterminator="\n")
    out.writeheader()
    out.writerows({k: ("" if v is None else v) for k, v in row.items()} for row in rows)
    files[STANDINGS_CSV] = text.getvalue().encode()
    files[STANDINGS_SHA256] = "".join(f"{hashlib.sha256(files[n]).hexdigest()}  {n}\n"
                                      for n in (STANDINGS_JSON, STANDINGS_CSV)).encode()
    return files


def write_standings(folder: Path, files: Mapping[str, bytes]) -> tuple[Path, ...]:
    """Write ``standings_bytes``'s files into ``folder`` (0600 while the version is hidden);
    their paths."""
    with private_writes_in(folder):
        for name, data in files.items():
            write_text(data.decode(), folder / name)
    return tuple(folder / n for n in files)


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
        """The round of ``version`` if play on it is refused at ``now`` (over, and not
        published), else None: ``now`` is compared with the closing time last read."""
        rnd = self.get(version)
        return rnd if rnd is not None and rnd.refuses(now) else None
