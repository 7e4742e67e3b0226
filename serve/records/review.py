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
    "REVIEW_JSON", "REVIEW_MD", "ReviewReport", "VersionReview", "episode_row",
    "play_of", "read_review", "review_marks", "review_report", "review_store", "review_version",
    "scorecard_evidence", "scorecard_play", "store_reviews", "write_review",
]

import json
import logging
import statistics
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl

from engine import episode as core
from engine.levels import Level, parse_xsb
from pipeline.difficulty.panel import PANEL_FILE, panel_of_version
from pipeline.difficulty.reference_play import REFERENCE_FILE, reference_of_version
from pipeline.errors import InputError
from pipeline.progress import progress
from pipeline.scores.items import is_pool
from pipeline.scores.review import (
    FALSE_FLAG_RATE,
    PLAY_SCHEMA,
    THRESHOLD,
    VOTING,
    Reference,
    ScorecardPlay,
    ScorecardReview,
    bound,
    equated_bound,
    reference,
    review_scorecards,
)
from pipeline.versions.hidden_files import is_hidden, private_writes
from pipeline.versions.rounds import bound_text
from pipeline.versions.tables import read_parquet, write_parquet, write_text
from pipeline.versions.version import Version, open_version
from pipeline.workers import Workers
from serve.games.episode import PLAYED, RESTART_GAME, RESTART_LEVEL
from serve.records.clearing import cleared_reference
from serve.records.pooled_board import read_board
from serve.stores import (
    EpisodeRecord,
    PlayedSession,
    ScorecardRecord,
    Store,
    StoreError,
    is_postgres,
    read_store,
)

log = logging.getLogger(__name__)
# the review's progress, under the pipeline's logger so the command line shows it on stderr
# (review, round close) beside pipeline.progress's lines
said = logging.getLogger("pipeline.review")

REVIEW_JSON = "review.json"  # in a version's report/
REVIEW_MD = "review.md"
_RESTART = PLAYED[RESTART_LEVEL]


@dataclass(frozen=True)
class ReviewReport:
    """A version's review (``VersionReview``) and the files it was written to."""

    version: str
    review: VersionReview
    files: tuple[Path, ...]

    @property
    def reviews(self) -> list[ScorecardReview]:
        return self.review.reviews


def _reference(version: Version) -> Reference:
    """The version's reference: its levels, its panel (``report/panel.parquet``) and its
    reference play (``report/reference.parquet``); when a file is missing (or the panel was
    written before pushes were kept) it is played here and written there, the bytes
    ``sokoforge panel`` writes."""
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
    played = version.report_dir / REFERENCE_FILE
    frontier = read_parquet(played) if played.is_file() else None
    if frontier is None:
        log.info("%s: no reference.parquet; playing the reference for the review",
                 version.name)
        frontier = reference_of_version(version, Workers(show_progress=False))
        with private_writes(is_hidden(version.manifest)):
            version.report_dir.mkdir(exist_ok=True)
            write_parquet(frontier, played)
    return reference(levels, panel, frontier)


def episode_row(level: Level, max_steps: int, record: EpisodeRecord,
                times: Sequence[tuple[int | None, int | None]] = ()) -> dict[str, Any]:
    """One played level's row (``pipeline.scores.review.PLAY_SCHEMA``), on the level the
    episode played: its stored action string replayed from the start to count moves, pushes
    and restarts; ``times`` the arrival (ms) of the action before its first one and of each of
    its own, None where not kept."""
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
    return {"index": record.level, "played": record.done and (record.steps > 0 or record.solved),
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


def play_of(card: ScorecardRecord, sessions: Sequence[PlayedSession],
            levels: dict[int, tuple[Level, int]]) -> ScorecardPlay:
    """One closed scorecard's levels as played (its ``sessions`` on one version)."""
    rows = []
    for played in sessions:
        steps = [(episode, action) for episode, action, _ in played.actions]
        per = _episode_times(steps, [ms for _, _, ms in played.actions])
        for record in played.episodes:
            if record.level in levels:  # the level it showed; its times are the episode's
                level, max_steps = levels[record.level]
                rows.append(episode_row(level, max_steps, record, per.get(record.index, [])))
    frame = pl.DataFrame(rows, schema=PLAY_SCHEMA)  # type: ignore[arg-type]
    return ScorecardPlay(card.id, card.key_hash, card.name, card.opened, card.closed or 0.0,
                         frame)


async def scorecard_play(store: Store, scorecard_id: str, version: str,
                         levels: dict[int, tuple[Level, int]]) -> ScorecardPlay | None:
    """One closed scorecard's levels as played on ``version`` (None: not closed there), read
    on its own (``review_version`` reads them all at once)."""
    card = await store.scorecard(scorecard_id)
    if card is None or card.closed is None:
        return None
    sessions = [(s, e) for s, e in await store.sessions(scorecard_id) if s.version == version]
    times = await store.action_times([s.id for s, _ in sessions])
    played = []
    for session, records in sessions:
        steps = await store.steps(session.id, session.seq)
        played.append(PlayedSession(session, tuple(records), tuple(
            (episode, action, ms) for (episode, action), ms
            in zip(steps, times.get(session.id, []), strict=False))))
    return play_of(card, played, levels)


@dataclass(frozen=True)
class VersionReview:
    """A version's review: every scorecard's, the ``reference`` it judged by (its frontier
    raised by the clearings; the version's K even when no scorecard played), what the
    clearings did
    (``clearances``, one line each) and the wall time it took (``seconds``)."""

    reviews: list[ScorecardReview]
    reference: Reference
    clearances: list[str]
    seconds: float = 0.0
    equated_bound: float | None = None  # a pool's K on the equated scale (``equated_bound``)


async def review_version(datasets: Path, version: str, store: Store,
                         show_progress: bool = True, cleared_before: float | None = None
                         ) -> VersionReview:
    """The review of every closed scorecard that played ``version`` in ``store``, in the
    order they opened (``pipeline.scores.review.review_scorecards``), its frontier raised by
    the clearings (``serve.records.clearing``; those made before ``cleared_before`` alone,
    when given). The store is read in one go (``Store.played_sessions``) and each episode
    replayed once, with a progress line.

    Raises:
        InputError: no version ``version`` under ``datasets`` (``VersionMissing``), or one
            altered (``VersionAltered``).
        StoreError: the store cannot be read.
    """
    began = time.perf_counter()
    opened = _open(datasets, version)
    table = opened.levels(["index", "xsb", "max_steps"])
    levels = {int(i): (parse_xsb(x), int(m)) for i, x, m in table.iter_rows()}
    cards = await store.played_sessions(version)
    plays = []
    with progress(f"review of {version}: replaying scorecards", len(cards),
                  show=show_progress) as shown:
        for card, sessions in cards:
            plays.append(play_of(card, sessions, levels))
            shown.update(1)
    raised = cleared_reference(datasets, version, _reference(opened), cleared_before)
    said.info("review of %s: judging %d scorecard(s)", version, len(plays))
    reviews = review_scorecards(plays, raised.reference) if plays else []
    equated = None
    if is_pool(opened.manifest):  # each session judged on the levels it showed; K equated
        pool = read_board(opened.folder).pool
        equated = equated_bound(raised.reference, pool.discrimination, pool.difficulty,
                                pool.ramp)
    return VersionReview(reviews, raised.reference, raised.notes, time.perf_counter() - began,
                         equated)


def _open(datasets: Path, version: str) -> Version:
    """The version as served: its levels intact, its manifest read as the server reads it."""
    return open_version(datasets, version, strict=False)


def review_report(version: str, reviews: Sequence[ScorecardReview],
                  ref: Reference | None = None, equated: float | None = None
                  ) -> dict[str, Any]:
    """``review.json``'s content: the rule the verdicts follow, the version's bound (K: more
    solved needs source review), the reference's best and its name, each signal's one line,
    and every scorecard's verdict with its evidence and signals. Without ``ref`` the bound
    and the reference's best are read off the reviews (a scorecard that played every level
    carries the version's K), and the reference's name is null. A pool's K is stated on the
    ``equated`` scale too (``equated_bound``)."""
    signals = {s.name: {"measures": s.measures, "votes": s.votes}
               for s in (reviews[0].signals if reviews else [])}
    if ref is not None:
        most: int | None = bound(ref)
        best: int | None = ref.frontier_solved
        name: str | None = ref.name
    else:
        most = max((r.bound for r in reviews), default=None)
        best = reviews[0].frontier_solved if reviews else None
        name = None
    return {"format": 1, "version": version, "false_flag_rate": FALSE_FLAG_RATE,
            "threshold": THRESHOLD, "voting": list(VOTING), "bound": most,
            "frontier_solved": best, "reference": name, "signals": signals,
            **({} if equated is None else {"equated_bound": equated}),
            "needs_review": sum(r.verdict != "consistent" for r in reviews),
            "scorecards": [r.to_dict() for r in reviews]}


def _markdown(version: str, report: dict[str, Any]) -> str:
    """``review.md``: the rule and the bound, the signals, each scorecard's verdict with its
    solved count and reason, then each one's evidence, and what the clearings did."""
    cards = report["scorecards"]
    said = ("" if report.get("bound") is None else
            bound_text(report["bound"], report.get("levels"), report.get("equated_bound")))
    stated = ("" if report.get("bound") is None else
              f" {said.capitalize()}"
              f" (the reference solves {report.get('frontier_solved')}).")
    lines = [f"# Fair-play review of {version}", "",
             f"{len(cards)} closed scorecard(s); {report['needs_review']} need review. A "
             f"scorecard needs review when one voting signal ({', '.join(VOTING)}) has p < "
             f"{THRESHOLD:.4g}: an honest agent within the rule of 256 dynamics calls per step "
             f"is flagged at most {FALSE_FLAG_RATE:.0%} of the time. The review triages for "
             f"source review; it proves nothing.{stated}", "", "## Signals", ""]
    lines += [f"- **{name}**{' (votes)' if s['votes'] else ' (shown)'}: {s['measures']}"
              for name, s in report["signals"].items()]
    lines += ["", "## Scorecards", "", "| scorecard | name | verdict | solved | reason |",
              "| --- | --- | --- | --- | --- |"]
    lines += [f"| `{c['scorecard_id']}` | {c['name']} | {c['verdict']} | {c.get('solved')} | "
              f"{str(c.get('reason') or '').replace('|', '/')} |" for c in cards]
    for c in cards:
        lines += ["", f"### {c['name']}: {c['verdict']} (`{c['scorecard_id']}`)", ""]
        lines += [f"- {sentence}" for sentence in c["evidence"]]
    if report.get("clearances"):
        lines += ["", "## Clearances", ""] + [f"- {n}" for n in report["clearances"]]
    return "\n".join(lines) + "\n"


def write_review(datasets: Path, version: str, done: VersionReview) -> tuple[Path, Path]:
    """Write ``report/review.json`` and ``report/review.md`` of ``version``: for a hidden
    version its owner's alone (0600, under the version's ``.gitignore``). Beside
    ``review_report``'s content: the version's ``levels`` and the ``clearances`` lines."""
    opened = open_version(datasets, version, require_intact=False, strict=False)
    report = {**review_report(version, done.reviews, done.reference, done.equated_bound),
              "levels": opened.levels(["index"]).height, "clearances": done.clearances}
    paths = opened.report_dir / REVIEW_JSON, opened.report_dir / REVIEW_MD
    with private_writes(is_hidden(opened.manifest)):
        opened.report_dir.mkdir(exist_ok=True)
        write_text(json.dumps(report, indent=2) + "\n", paths[0])
        write_text(_markdown(version, report), paths[1])
    return paths


def store_reviews(datasets: Path, version: str, db: str, cleared_before: float | None = None
                  ) -> VersionReview:
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
        return read_store(db, lambda store: review_version(
            datasets, version, store, cleared_before=cleared_before))
    except StoreError as e:
        raise InputError(str(e)) from None


def review_store(datasets: Path, version: str, db: str) -> ReviewReport:
    """``store_reviews`` with its report written (``write_review``).

    Raises:
        InputError: as ``store_reviews``.
    """
    done = store_reviews(datasets, version, db)
    return ReviewReport(version, done, write_review(datasets, version, done))


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
