"""A round's close: its final standings read from the server's store, written beside the
version's manifest with their sha256 (``pipeline.rounds`` keeps the record and the files).

Here, not in ``pipeline``, because it reads the store (``serve.stores``) and ranks as the
leaderboard does (``serve.ranking_precision``).
"""

from __future__ import annotations

__all__ = ["Closing", "close_round", "standings"]

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pipeline.errors import InputError, PipelineError
from pipeline.rounds import (
    SETTLE_SECONDS,
    STANDINGS_SHA256,
    Round,
    iso,
    read_round,
    record_round,
    version_folder,
    write_standings,
)
from pipeline.tables import read_parquet, sha256_file


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
    folder = version_folder(datasets, version)
    now = time.time() if now is None else now
    current = read_round(folder)
    if current is None:
        raise PipelineError(f"{version} has no round to close: open one first "
                            f"(sokoforge round open {version} --closes TIME)")
    closes = current.closes
    if closes > now:  # closing early: the servers see the new time at their next request
        closes = now
        record_round(folder, Round(version, current.opened, closes))
        time.sleep(settle)
    tiers = read_parquet(folder / "levels.parquet", ["index", "tier"]).sort("index")["tier"]
    rows = standings(db, version, closes, tiers.to_list())
    files = write_standings(folder, rows)
    rnd = Round(version, current.opened, closes, current.closed or now,
                sha256_file(folder / STANDINGS_SHA256))
    record_round(folder, rnd)
    return Closing(rnd, rows, files)


def standings(db: str, version: str, closes: float,
              tiers: list[int] | None = None) -> list[dict[str, Any]]:
    """Each name's best scorecard on ``version``, ranked, from the store ``db`` (a SQLite
    file or a PostgreSQL URL); refused when one was closed after ``closes`` (the servers
    refuse that, so a server that did not know the round took it). Each row has the
    leaderboard's precision: the success interval over draws of levels (strata: ``tiers``,
    each level's in play order) and whether a paired test tells it from the row above."""
    from serve.ranking_precision import RankingPrecision
    from serve.stores import Store, StoreError, is_postgres, read_store

    if not is_postgres(db) and not Path(db).is_file():
        raise InputError(f"no store at {db}: give the server's --db")

    async def read(store: Store) -> tuple[list, list[dict]]:
        ranked = await store.leaderboard(version, 1_000_000)
        marks = [{"solved": s.result["solved"], "episodes": s.result["episodes"]}
                 for s in ranked]
        await RankingPrecision(store).annotate(marks, ranked, tiers)
        return ranked, marks

    try:
        ranked, marks = read_store(db, read)
    except StoreError as e:  # a damaged store, a refused connection: said, not a traceback
        raise PipelineError(str(e)) from None
    late = [s for s in ranked if s.closed > closes]
    if late:  # its name's earlier results are not in the board: refuse rather than drop them
        raise PipelineError(
            f"{len(late)} best result(s) on {version} were closed after the round's closing "
            f"time {iso(closes)} (scorecard {late[0].scorecard_id} of {late[0].name!r}, closed "
            f"{iso(late[0].closed)}): a server that did not see round.json took them; give "
            "every server the same round (round open on each, or one datasets folder)")
    rows: list[dict[str, Any]] = []
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
