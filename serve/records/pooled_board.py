"""The adaptive game's board, read from a server's store: each name ranked by its ability
pooled over all its closed sessions (``pipeline.scores.pooled``), never its best one.

Here, not in ``pipeline``, because it reads the store (``Store.played_episodes``: every
episode of the closed scorecards on the pool, each with the level it showed). An entry keeps
the standard board's fields, pooled over the name's sessions (the raw ``success_rate`` is
near 0.5 by design and compares with no other game), and adds ``ability``,
``equated_success``, ``scorecards`` and ``scorecard_ids``; ``scorecard_id`` is its latest.
"""

from __future__ import annotations

__all__ = ["Board", "pooled_board", "pooled_entries", "read_board", "served_board"]

from collections.abc import Sequence
from pathlib import Path
from typing import Any, NamedTuple

from pipeline.precision import success_interval
from pipeline.scores.adaptive import ramp_curve, ramp_spread
from pipeline.scores.pooled import Shown, marks_above, pooled
from pipeline.versions.manifest import read_manifest
from pipeline.versions.rounds import iso
from pipeline.versions.tables import read_parquet
from pipeline.versions.version import LEVELS_FILE, MANIFEST_FILE
from serve.games.dataset import ServedVersion
from serve.games.pool import Pool, load_pool
from serve.stores import PlayedEpisode, Store
from serve.stores.sql import ANONYMOUS


class Board(NamedTuple):
    """What a pool's board reads besides the store: its item parameters and each level's
    optimal moves (a Score's move efficiency divides by them), by level index."""

    pool: Pool
    optimal_moves: tuple[int, ...]


def served_board(version: ServedVersion) -> Board | None:
    """The ``Board`` of a served version, None unless it is a pool."""
    if version.pool is None:
        return None
    return Board(version.pool, tuple(lv.optimal_moves for lv in version.levels))


def read_board(folder: Path) -> Board:
    """The ``Board`` of the pool in ``folder`` (its manifest, levels and items), as a server
    would load it; ``PipelineError`` when it was never calibrated."""
    manifest = read_manifest(folder / MANIFEST_FILE)
    levels = read_parquet(folder / LEVELS_FILE, ["index", "tier", "optimal_moves"]).sort("index")
    return Board(load_pool(folder, manifest, [int(t) for t in levels["tier"]]),
                 tuple(int(m) for m in levels["optimal_moves"]))


def _figures(episodes: Sequence[PlayedEpisode], board: Board) -> dict[str, Any]:
    """The Score's raw figures over every episode of a name's sessions (unplayed ones count
    unsolved, as a close counts them)."""
    n = len(episodes)
    solved = [e for e in episodes if e.solved and e.level is not None]
    efficiency = [board.optimal_moves[e.level] / e.steps for e in solved if e.steps > 0]
    outcomes = [e.solved for e in episodes]
    tiers = (None if any(e.level is None for e in episodes) else
             [int(board.pool.tiers[e.level]) for e in episodes if e.level is not None])
    return {
        "success_rate": round(len(solved) / n, 4) if n else 0.0,
        "success_interval": success_interval(outcomes, tiers),
        "move_efficiency": round(sum(efficiency) / len(efficiency), 4) if efficiency else 0.0,
        "deadlock_rate": round(sum(e.deadlocked for e in episodes) / n, 4) if n else 0.0,
        "solved": len(solved), "episodes": n,
        "avg_steps_solved": round(sum(e.steps for e in solved) / len(solved), 2)
        if solved else 0.0,
        "total_actions": sum(e.steps for e in episodes)}


def pooled_entries(played: Sequence[PlayedEpisode], board: Board, *, before: float | None = None,
                   exclude_anonymous: bool = False) -> list[dict[str, Any]]:
    """Every name's pooled entry from the closed scorecards' episodes ``played`` (those closed
    before ``before``; anonymous keys' left out if ``exclude_anonymous``), ranked by pooled
    ability, each with its mark against the entry above (``marks_above``)."""
    cards: dict[str, dict[str, list[PlayedEpisode]]] = {}
    for e in played:
        if e.closed is None or (before is not None and e.closed >= before):
            continue
        if exclude_anonymous and e.name.startswith(ANONYMOUS):
            continue
        cards.setdefault(e.key_hash, {}).setdefault(e.scorecard_id, []).append(e)
    entries = []
    pool = board.pool
    curve = ramp_curve(pool.discrimination, pool.difficulty, pool.ramp)
    spread = ramp_spread(pool.discrimination, pool.difficulty, pool.ramp,
                         model_sd=pool.model_sd)
    for by_card in cards.values():
        order = sorted(by_card, key=lambda c: (by_card[c][0].closed or 0.0, c))
        sessions = [Shown(tuple(e.level for e in by_card[c] if e.level is not None),
                          tuple(e.solved for e in by_card[c] if e.level is not None))
                    for c in order]
        fit = pooled(pool, sessions, curve, spread)
        last = by_card[order[-1]][0]
        entries.append({
            "name": last.name, "ability": {"theta": fit.ability.theta, "low": fit.ability.low,
                                           "high": fit.ability.high},
            "equated_success": {"value": fit.equated.value, "low": fit.equated.low,
                                "high": fit.equated.high},
            "scorecards": len(order), "scorecard_ids": order,
            **_figures([e for c in order for e in by_card[c]], board),
            "scorecard_id": last.scorecard_id, "session_id": None,
            "submitted_at": iso(last.closed or 0.0), "source": last.source,
            "_first": by_card[order[0]][0].closed or 0.0, "_posterior": fit.posterior})
    entries.sort(key=lambda x: (-x["ability"]["theta"], -x["equated_success"]["value"],
                                x["_first"], x["name"]))
    marks = marks_above([x["_posterior"] for x in entries])
    for rank, (entry, mark) in enumerate(zip(entries, marks, strict=True), 1):
        del entry["_first"], entry["_posterior"]
        entry["rank"] = rank
        entry["indistinguishable_from_above"] = None if mark is None else mark.indistinguishable
        entry["paired_p_above"] = None if mark is None else mark.p_value
    return entries


async def pooled_board(store: Store, version: str, board: Board, *, before: float | None = None,
                       exclude_anonymous: bool = False) -> list[dict[str, Any]]:
    """``pooled_entries`` of the pool ``version``'s closed scorecards in ``store``."""
    return pooled_entries(await store.played_episodes(version), board, before=before,
                          exclude_anonymous=exclude_anonymous)
