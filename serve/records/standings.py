"""A round's close: its final standings read from the server's store, written beside the
version's manifest with their sha256 (``pipeline.versions.rounds`` keeps the record and the files),
each row with the fair-play review's verdict (``serve.records.review``, whose report it writes).

Here, not in ``pipeline``, because it reads the store (``serve.stores``) and ranks as the
leaderboard does (``serve.records.ranking_precision``). The standings are what the board of a
version with a round shows: each named player's best result closed before the closing time (an
anonymous key's play is not ranked, and a result some server took late is left out). An
adaptive game's pool ranks each named player once, by its ability pooled over all its closed
scorecards (``pooled_standings``, ``POOLED_COLUMNS``), its fair-play bound on the equated scale.
"""

from __future__ import annotations

__all__ = ["GRACE_SECONDS", "Closing", "close_round", "legacy_rows", "pooled_row",
           "pooled_standings", "standing_row", "standings", "undo_close"]

import hashlib
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pipeline.errors import InputError, PipelineError
from pipeline.scores.items import folder_is_pool
from pipeline.scores.review import bound
from pipeline.versions.round_log import ROUND_LOG, record, served_by
from pipeline.versions.rounds import (
    COLUMNS,
    NOTICE_SECONDS,
    POOLED_COLUMNS,
    STANDINGS_FILES,
    STANDINGS_SHA256,
    Round,
    exact,
    iso,
    read_round,
    record_round,
    standings_bytes,
    version_folder,
    write_standings,
)
from pipeline.versions.tables import read_parquet
from serve.records.pooled_board import Board, pooled_board, read_board
from serve.records.review import store_reviews, write_review
from serve.stores import Standing, Store

log = logging.getLogger("sokoforge.rounds")
# Seconds ``close`` waits past the closing time before reading the store, for the requests a
# server accepted just before it to be stored.
GRACE_SECONDS = 1.0


@dataclass(frozen=True)
class Closing:
    """A closed round: its record, its rows and where its standings were written."""

    round: Round
    rows: list[dict[str, Any]]
    files: tuple[Path, ...]


def close_round(datasets: Path, version: str, db: str, *, now: float | None = None,
                notice: float = NOTICE_SECONDS, grace: float = GRACE_SECONDS,
                sleep: Callable[[float], None] = time.sleep) -> Closing:
    """Close ``version``'s round, write its final standings from the store ``db`` and record
    their sha256.

    The store is opened first: when it cannot be, nothing changes. A round still open is
    closed ``notice`` seconds from now (every server reads that time before it comes, and
    refuses from it on); the store is read ``grace`` seconds after the closing time. Closing
    again writes the same bytes, or refuses when the store now ranks otherwise.
    """
    folder = version_folder(datasets, version)
    current = read_round(folder)
    if current is None:
        raise PipelineError(f"{version} has no round to close: open one first "
                            f"(sokoforge round open {version} --closes TIME)")
    _check_store(db)
    _check_served(folder, version, db)
    told = now
    now = time.time() if now is None else now
    closes = current.closes
    if current.closed is None and closes > now + notice:  # early: announce it, then wait
        closes = exact(now + notice)
        record_round(folder, Round(version, current.opened, closes))
    if closes + grace > now:
        sleep(closes + grace - now)
    tiers = read_parquet(folder / "levels.parquet", ["index", "tier"]).sort("index")["tier"]
    # closed again: judged with the clearings as they stood at the close, so the same bytes
    done = store_reviews(datasets, version, db, cleared_before=current.closed)
    verdicts = {r.scorecard_id: r.verdict for r in done.reviews}
    pool = folder_is_pool(folder)
    if pool:  # names by pooled ability
        rows = pooled_standings(db, version, closes, read_board(folder), verdicts)
        files = standings_bytes(version, rows, POOLED_COLUMNS, bound=bound(done.reference),
                                levels=len(tiers), equated=done.equated_bound)
    else:
        rows = standings(db, version, closes, tiers.to_list(), verdicts)
        files = standings_bytes(version, rows, bound=bound(done.reference), levels=len(tiers))
    digest = hashlib.sha256(files[STANDINGS_SHA256]).hexdigest()
    if current.closed is not None and digest != current.standings_sha256 and not pool:
        files = standings_bytes(version, legacy_rows(rows))  # sealed before they carried K
        digest = hashlib.sha256(files[STANDINGS_SHA256]).hexdigest()
    if current.closed is not None and digest != current.standings_sha256:
        raise PipelineError(
            f"the round of {version} closed at {iso(current.closed)} with standings sha256 "
            f"{current.standings_sha256}; the store {db} now ranks otherwise ({digest}): the "
            "recorded standings stand (give the store the round was closed from)")
    written = write_standings(folder, files)
    if current.closed is None:  # report/review.json, which the boards mark by (a later
        write_review(datasets, version, done)  # review, clearings and all, is not undone)
    closed = exact(max(now, closes) if told is not None else time.time())  # when written
    rnd = current if current.closed is not None else Round(
        version, current.opened, closes, closed, digest)
    if rnd != current:
        record_round(folder, rnd)
    return Closing(rnd, rows, written)


def _check_store(db: str) -> None:
    """Refuse (``InputError``, ``PipelineError``) a store that cannot be opened and read."""
    from serve.stores import StoreError, is_postgres, read_store

    if not is_postgres(db) and not Path(db).is_file():
        raise InputError(f"no store at {db}: give the server's --db")
    try:
        read_store(db, lambda store: store.versions())
    except StoreError as e:
        raise PipelineError(str(e)) from None


def legacy_rows(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``rows`` as standings sealed before they carried K wrote them: ``paired_p_above`` to
    4 decimals (a tiny p then read 0.0; it now keeps 3 significant digits)."""
    return [{**r, "paired_p_above": None if r["paired_p_above"] is None
             else round(r["paired_p_above"], 4)} for r in rows]


def _check_served(folder: Path, version: str, db: str) -> None:
    """Refuse (``PipelineError``) a store the round's log does not say served the round:
    its standings would be another store's (a default ``--db`` left by another server)."""
    from serve.stores import StoreError, read_store, shown

    try:
        store_id = read_store(db, lambda store: store.identity())
    except StoreError as e:
        raise PipelineError(str(e)) from None
    served = served_by(folder)
    if store_id in served:
        return
    if not served:
        raise PipelineError(f"no server has served {version}'s round (a server records its "
                            f"store in {folder / ROUND_LOG} when it serves the version under "
                            f"a round): {shown(db)} is not ranked; serve the round first")
    raise PipelineError(f"the store {shown(db)} (id {store_id}) did not serve {version}'s "
                        f"round, which was served by the store(s) {', '.join(sorted(served))}: "
                        "give the --db its server ran with")


def undo_close(datasets: Path, version: str, reason: str,
               now: float | None = None) -> tuple[Round, Round]:
    """Undo ``version``'s close before its publication: log it (with ``reason``, when, and
    the standings' sha256) in the round's log, remove the standings and record the round as
    over but not closed, so that ``close_round`` closes it again from the right store.
    Returns the round as it was and as it is now."""
    folder = version_folder(datasets, version)
    current = read_round(folder)
    if current is None or current.closed is None:
        raise PipelineError(f"{version}'s round is not closed: there is no close to undo")
    if current.published is not None:
        raise PipelineError(f"{version}'s round was published at {iso(current.published)}: "
                            "its standings are public and stand")
    if not reason.strip():
        raise InputError("say why the close is undone (--reason TEXT): it is logged")
    now = time.time() if now is None else now
    record(folder, {"undone_close": iso(current.closed), "at": iso(now), "reason": reason,
                    "standings_sha256": current.standings_sha256})
    for name in STANDINGS_FILES:
        (folder / name).unlink(missing_ok=True)
    rnd = Round(version, current.opened, current.closes)
    record_round(folder, rnd)
    log.warning("%s: the close of %s was undone (standings sha256 %s): %s", version,
                iso(current.closed), current.standings_sha256, reason)
    return current, rnd


def standing_row(rank: int, s: Standing, mark: dict[str, Any],
                 review: str | None = None) -> dict[str, Any]:
    """One row of the standings, its keys ``pipeline.versions.rounds.COLUMNS`` in order: a
    scorecard's ``Standing``, its precision ``mark`` (``RankingPrecision.annotate``'s) and the
    review's verdict on it."""
    r = s.result
    interval = mark.get("success_interval") or [None, None]
    row = {
        "rank": rank, "name": s.name, "scorecard_id": s.scorecard_id,
        "session_id": s.session_id, "submitted_at": iso(s.closed),
        "success_rate": r["success_rate"], "success_interval_lo": interval[0],
        "success_interval_hi": interval[1],
        "indistinguishable_from_above": mark.get("indistinguishable_from_above"),
        "paired_p_above": mark.get("paired_p_above"), "solved": r["solved"],
        "episodes": r["episodes"], "move_efficiency": r["move_efficiency"],
        "deadlock_rate": r["deadlock_rate"], "avg_steps_solved": r["avg_steps_solved"],
        "total_actions": r["total_actions"], "source": s.source, "review": review}
    return {k: row[k] for k in COLUMNS}


def pooled_row(entry: dict[str, Any], verdicts: dict[str, str]) -> dict[str, Any]:
    """One row of an adaptive game's standings (``POOLED_COLUMNS``) from its board's ranked
    ``entry`` (``serve.records.pooled_board``); its review is its scorecards' worst verdict."""
    mine = [verdicts[i] for i in entry["scorecard_ids"] if i in verdicts]
    review = (None if not mine else "needs review" if "needs review" in mine else mine[-1])
    ability, equated = entry["ability"], entry["equated_success"]
    row = {**entry, "ability": ability["theta"], "ability_lo": ability["low"],
           "ability_hi": ability["high"], "equated_success": equated["value"],
           "equated_lo": equated["low"], "equated_hi": equated["high"], "review": review}
    return {k: row[k] for k in POOLED_COLUMNS}


def pooled_standings(db: str, version: str, closes: float, board: Board,
                     verdicts: dict[str, str] | None = None) -> list[dict[str, Any]]:
    """An adaptive game's standings: each named player's ability pooled over all its
    scorecards on the pool ``version`` closed before ``closes`` (never its best one), ranked,
    from the store ``db``; each with its mark against the row above and its scorecards'
    worst verdict in ``verdicts``."""
    from serve.stores import StoreError, read_store

    try:
        entries = read_store(db, lambda store: pooled_board(
            store, version, board, before=closes, exclude_anonymous=True))
    except StoreError as e:  # a damaged store, a refused connection: said, not a traceback
        raise PipelineError(str(e)) from None
    return [pooled_row(e, verdicts or {}) for e in entries]


def standings(db: str, version: str, closes: float, tiers: list[int] | None = None,
              verdicts: dict[str, str] | None = None) -> list[dict[str, Any]]:
    """Each named player's best scorecard on ``version`` closed before ``closes``, ranked,
    from the store ``db`` (a SQLite file or a PostgreSQL URL). Each row has the leaderboard's
    precision: the success interval over draws of levels (strata: ``tiers``, each level's in
    play order) and whether a paired test tells it from the row above; and the review's
    verdict on its scorecard from ``verdicts`` (by scorecard id)."""
    from serve.records.ranking_precision import RankingPrecision
    from serve.stores import StoreError, read_store

    async def read(store: Store) -> tuple[list[Standing], list[dict]]:
        ranked = await store.leaderboard(version, 1_000_000, before=closes,
                                         exclude_anonymous=True)
        marks = [{"solved": s.result["solved"], "episodes": s.result["episodes"]}
                 for s in ranked]
        await RankingPrecision(store).annotate(marks, ranked, tiers)
        return ranked, marks

    try:
        ranked, marks = read_store(db, read)
    except StoreError as e:  # a damaged store, a refused connection: said, not a traceback
        raise PipelineError(str(e)) from None
    return [standing_row(rank, s, mark, (verdicts or {}).get(s.scorecard_id))
            for rank, (s, mark) in enumerate(zip(ranked, marks, strict=True), 1)]
