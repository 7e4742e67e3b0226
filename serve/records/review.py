"""The fair-play review of a version, read from a server's store: every closed scorecard that
played it, each episode replayed through the engine's episode core, judged by
``pipeline.scores.review`` and written to ``report/review.json`` and ``report/review.md``.

Here, not in ``pipeline``, because it reads the store. Each stored action string is played
again from the level's start (``engine.episode``) to count the moves that moved the player
and the pushes; each action's arrival time (``Store.action_times``) gives the time before an
episode's first action. The report is what ``round close`` writes, the leaderboard marks by
and a scorecard's page shows (``review_marks``).
"""

from __future__ import annotations

__all__ = [
    "REVIEW_JSON", "REVIEW_MD", "ReviewReport", "episode_row", "read_review", "review_marks",
    "review_report", "review_store", "review_version", "scorecard_evidence", "scorecard_play",
    "store_reviews", "write_review",
]

import json
import logging
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl

from engine import episode as core
from engine.levels import Level, parse_xsb
from pipeline.difficulty.panel import PANEL_FILE, panel_of_version
from pipeline.errors import InputError
from pipeline.scores.review import (
    FALSE_FLAG_RATE,
    PLAY_SCHEMA,
    THRESHOLD,
    VOTING,
    Reference,
    ScorecardPlay,
    ScorecardReview,
    reference,
    review_scorecards,
)
from pipeline.versions.hidden_files import is_hidden, private_writes
from pipeline.versions.tables import read_parquet, write_parquet, write_text
from pipeline.versions.version import Version, open_version
from pipeline.workers import Workers
from serve.games.episode import PLAYED, RESTART_GAME, RESTART_LEVEL
from serve.stores import (
    EpisodeRecord,
    SessionRecord,
    Store,
    StoreError,
    is_postgres,
    read_store,
)

log = logging.getLogger(__name__)

REVIEW_JSON = "review.json"  # in a version's report/
REVIEW_MD = "review.md"
_RESTART = PLAYED[RESTART_LEVEL]


@dataclass(frozen=True)
class ReviewReport:
    """A version's review: every scorecard's, and the files it was written to."""

    version: str
    reviews: list[ScorecardReview]
    files: tuple[Path, ...]


def _reference(version: Version) -> Reference:
    """The version's reference: its levels and its panel (``report/panel.parquet``; when
    there is none, or one written before pushes were kept, the panel is played here and
    written there, the bytes ``sokoforge panel`` writes)."""
    levels = version.levels()
    path = version.report_dir / PANEL_FILE
    panel = read_parquet(path) if path.is_file() else None
    if panel is None or "pushes" not in panel.columns:
        log.info("%s: %s; playing the panel for the review", version.name,
                 "no panel.parquet" if panel is None else "its panel.parquet has no pushes "
                 "(written before they were kept)")
        panel = panel_of_version(version, Workers(show_progress=False))
        with private_writes(is_hidden(version.manifest)):
            version.report_dir.mkdir(exist_ok=True)
            write_parquet(panel, path)
    return reference(levels, panel)


def episode_row(level: Level, max_steps: int, record: EpisodeRecord,
                times: Sequence[tuple[int | None, int | None]] = ()) -> dict[str, Any]:
    """One played level's row (``pipeline.scores.review.PLAY_SCHEMA``): its stored action string
    replayed from the start to count moves, pushes and restarts; ``times`` the arrival (ms)
    of the action before its first one and of each of its own, None where not kept."""
    moves = pushes = restarts = 0
    if record.actions:
        game = core.begin(level, max_steps)
        for letter in record.actions:
            if letter == _RESTART:
                game = core.restart(game)
                restarts += 1
                continue
            game, result = core.step(game, PLAYED.index(letter))  # "." is WAIT
            moves += result.moved
            pushes += result.pushed
    think, pace = _pace(times)
    return {"index": record.index, "played": record.done and (record.steps > 0 or record.solved),
            "solved": record.solved, "steps": record.steps, "moves": moves, "pushes": pushes,
            "restarts": restarts, "think_ms": think, "pace_ms": pace}


def _pace(times: Sequence[tuple[int | None, int | None]]) -> tuple[float | None, float | None]:
    """The wait before an episode's first action and the median wait between its later ones,
    from ``(ms of the action before, ms of this action)`` pairs (None where unknown)."""
    first_before, first = times[0] if times else (None, None)
    if first is None:
        return None, None
    think = float(first - (first_before or 0))
    gaps = [b - a for a, b in times[1:] if a is not None and b is not None]
    return think, float(statistics.median(gaps)) if gaps else None


def _episode_times(steps: list[tuple[int, int]], ms: list[int | None]
                   ) -> dict[int, list[tuple[int | None, int | None]]]:
    """Per episode, ``(ms of the stored action before, ms of this action)`` for each of its
    actions since the session's last game restart."""
    out: dict[int, list[tuple[int | None, int | None]]] = {}
    before: int | None = 0
    for (episode, action), at in zip(steps, ms, strict=False):
        if action == RESTART_GAME:
            out = {}
        elif action != RESTART_LEVEL:
            out.setdefault(episode, []).append((before, at))
        before = at
    return out


async def scorecard_play(store: Store, scorecard_id: str, version: str,
                   levels: dict[int, tuple[Level, int]]) -> ScorecardPlay | None:
    """One closed scorecard's levels as played on ``version`` (None: not closed there).

    Args:
        store: the store to read.
        scorecard_id: the scorecard.
        version: the version whose sessions count.
        levels: each level index of ``version`` -> (its level, its step budget).

    Raises:
        StoreError: the store cannot be read.
    """
    card = await store.scorecard(scorecard_id)
    if card is None or card.closed is None:
        return None
    sessions: list[tuple[SessionRecord, list[EpisodeRecord]]] = [
        (s, e) for s, e in await store.sessions(scorecard_id) if s.version == version]
    times = await store.action_times([s.id for s, _ in sessions])
    rows = []
    for session, records in sessions:
        per = _episode_times(await store.steps(session.id, session.seq), times.get(session.id, []))
        for record in records:
            if record.index in levels:
                level, max_steps = levels[record.index]
                rows.append(episode_row(level, max_steps, record, per.get(record.index, [])))
    frame = pl.DataFrame(rows, schema=PLAY_SCHEMA)  # type: ignore[arg-type]
    return ScorecardPlay(card.id, card.key_hash, card.name, card.opened, card.closed, frame)


async def review_version(datasets: Path, version: str, store: Store) -> list[ScorecardReview]:
    """The review of every closed scorecard that played ``version`` in ``store``, in the
    order they opened (``pipeline.scores.review.review_scorecards``).

    Raises:
        InputError: no version ``version`` under ``datasets`` (``VersionMissing``), or one
            altered (``VersionAltered``).
        StoreError: the store cannot be read.
    """
    opened = _open(datasets, version)
    table = opened.levels(["index", "xsb", "max_steps"])
    levels = {int(i): (parse_xsb(x), int(m)) for i, x, m in table.iter_rows()}
    cards = list(dict.fromkeys(e.scorecard_id for e in await store.played_episodes(version)))
    plays = [p for c in cards if (p := await scorecard_play(store, c, version, levels)) is not None]
    return review_scorecards(plays, _reference(opened)) if plays else []


def _open(datasets: Path, version: str) -> Version:
    """The version as served: its levels intact, its manifest read as the server reads it."""
    return open_version(datasets, version, strict=False)


def review_report(version: str, reviews: Sequence[ScorecardReview]) -> dict[str, Any]:
    """``review.json``'s content: the rule the verdicts follow, each signal's one line, and
    every scorecard's verdict with its evidence and signals."""
    signals = {s.name: {"measures": s.measures, "votes": s.votes}
               for s in (reviews[0].signals if reviews else [])}
    return {"format": 1, "version": version, "false_flag_rate": FALSE_FLAG_RATE,
            "threshold": THRESHOLD, "voting": list(VOTING), "signals": signals,
            "needs_review": sum(r.verdict != "consistent" for r in reviews),
            "scorecards": [r.to_dict() for r in reviews]}


def _markdown(version: str, report: dict[str, Any]) -> str:
    cards = report["scorecards"]
    lines = [f"# Fair-play review of {version}", "",
             f"{len(cards)} closed scorecard(s); {report['needs_review']} need review. A "
             f"scorecard needs review when one voting signal ({', '.join(VOTING)}) has p < "
             f"{THRESHOLD:.4g}: an honest agent within the rule of 256 dynamics calls per step "
             f"is flagged at most {FALSE_FLAG_RATE:.0%} of the time. The review triages for "
             "source review; it proves nothing.", "", "## Signals", ""]
    lines += [f"- **{name}**{' (votes)' if s['votes'] else ' (shown)'}: {s['measures']}"
              for name, s in report["signals"].items()]
    lines += ["", "## Scorecards", "", "| scorecard | name | verdict |", "| --- | --- | --- |"]
    lines += [f"| `{c['scorecard_id']}` | {c['name']} | {c['verdict']} |" for c in cards]
    for c in cards:
        lines += ["", f"### {c['name']}: {c['verdict']} (`{c['scorecard_id']}`)", ""]
        lines += [f"- {sentence}" for sentence in c["evidence"]]
    return "\n".join(lines) + "\n"


def write_review(datasets: Path, version: str, reviews: Sequence[ScorecardReview]
                 ) -> tuple[Path, Path]:
    """Write ``report/review.json`` and ``report/review.md`` of ``version``: for a hidden
    version its owner's alone (0600, under the version's ``.gitignore``)."""
    opened = open_version(datasets, version, require_intact=False, strict=False)
    report = review_report(version, reviews)
    paths = opened.report_dir / REVIEW_JSON, opened.report_dir / REVIEW_MD
    with private_writes(is_hidden(opened.manifest)):
        opened.report_dir.mkdir(exist_ok=True)
        write_text(json.dumps(report, indent=2) + "\n", paths[0])
        write_text(_markdown(version, report), paths[1])
    return paths


def store_reviews(datasets: Path, version: str, db: str) -> list[ScorecardReview]:
    """``review_version`` over the store at ``db`` (a SQLite file or a PostgreSQL URL), nothing
    written; ``InputError`` for an unknown version or a store that is not there or cannot be
    read (unreadable input).

    Raises:
        InputError: an unknown version, or a store that is not there or cannot be read.
    """
    _open(datasets, version)  # an unknown version is refused before the store is read
    if not is_postgres(db) and not Path(db).is_file():
        raise InputError(f"no store at {db}: give the server's --db")
    try:
        return read_store(db, lambda store: review_version(datasets, version, store))
    except StoreError as e:
        raise InputError(str(e)) from None


def review_store(datasets: Path, version: str, db: str) -> ReviewReport:
    """``store_reviews`` with its report written (``write_review``).

    Raises:
        InputError: as ``store_reviews``.
    """
    reviews = store_reviews(datasets, version, db)
    return ReviewReport(version, reviews, write_review(datasets, version, reviews))


def read_review(folder: Path) -> dict[str, Any] | None:
    """A version folder's ``report/review.json``, or None when no review has run (or it
    cannot be read)."""
    try:
        data = json.loads((folder / "report" / REVIEW_JSON).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) and isinstance(data.get("scorecards"), list) else None


def review_marks(folder: Path) -> dict[str, str] | None:
    """Each reviewed scorecard's verdict by id, or None when no review has run."""
    data = read_review(folder)
    if data is None:
        return None
    return {str(c.get("scorecard_id")): str(c.get("verdict")) for c in data["scorecards"]
            if isinstance(c, dict)}


def scorecard_evidence(folder: Path, scorecard_id: str) -> dict[str, Any] | None:
    """One scorecard's verdict and evidence from the review, or None when it has none."""
    data = read_review(folder)
    for card in (data or {}).get("scorecards", []):
        if isinstance(card, dict) and card.get("scorecard_id") == scorecard_id:
            return {"verdict": card.get("verdict"), "evidence": card.get("evidence", [])}
    return None
