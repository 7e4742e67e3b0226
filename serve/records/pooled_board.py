"""The adaptive game's board, read from a server's store: each name ranked by its ability
pooled over all its closed sessions (``pipeline.scores.pooled``), never its best one.

Here, not in ``pipeline``, because it reads the store (``Store.played_episodes``: every
episode of the closed scorecards on the pool, each with the level it showed). An entry keeps
the standard board's fields, pooled over the name's sessions (the raw ``success_rate`` is
near 0.5 by design and compares with no other game), and adds ``ability``,
``equated_success``, ``scorecards`` and ``scorecard_ids``; ``scorecard_id`` is its latest.
"""

from __future__ import annotations

__all__ = ["pooled_board", "pooled_entries"]

from collections.abc import Sequence
from typing import Any

from pipeline.precision import success_interval
from pipeline.scores.items import Pool
from pipeline.scores.pooled import Shown, marks_above, pooled
from pipeline.versions.rounds import iso
from serve.stores import PlayedEpisode, Store
from serve.stores.sql import ANONYMOUS


def _figures(episodes: Sequence[PlayedEpisode], pool: Pool) -> dict[str, Any]:
    """The Score's raw figures over every episode of a name's sessions (unplayed ones count
    unsolved, as a close counts them)."""
    n = len(episodes)
    solved = [e for e in episodes if e.solved and e.level is not None]
    efficiency = [int(pool.optimal_moves[e.level]) / e.steps for e in solved if e.steps > 0]
    outcomes = [e.solved for e in episodes]
    tiers = (None if any(e.level is None for e in episodes) else
             [int(pool.tiers[e.level]) for e in episodes if e.level is not None])
    return {
        "success_rate": round(len(solved) / n, 4) if n else 0.0,
        "success_interval": success_interval(outcomes, tiers),
        "move_efficiency": round(sum(efficiency) / len(efficiency), 4) if efficiency else 0.0,
        "deadlock_rate": round(sum(e.deadlocked for e in episodes) / n, 4) if n else 0.0,
        "solved": len(solved), "episodes": n,
        "avg_steps_solved": round(sum(e.steps for e in solved) / len(solved), 2)
        if solved else 0.0,
        "total_actions": sum(e.steps for e in episodes)}


def pooled_entries(played: Sequence[PlayedEpisode], pool: Pool, *, before: float | None = None,
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
    for by_card in cards.values():
        order = sorted(by_card, key=lambda c: (by_card[c][0].closed or 0.0, c))
        sessions = [Shown(tuple(e.level for e in by_card[c] if e.level is not None),
                          tuple(e.solved for e in by_card[c] if e.level is not None))
                    for c in order]
        fit = pooled(pool, sessions)
        last = by_card[order[-1]][0]
        entries.append({
            "name": last.name, "ability": {"theta": fit.ability.theta, "low": fit.ability.low,
                                           "high": fit.ability.high},
            "equated_success": {"value": fit.equated.value, "low": fit.equated.low,
                                "high": fit.equated.high},
            "scorecards": len(order), "scorecard_ids": order,
            **_figures([e for c in order for e in by_card[c]], pool),
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


async def pooled_board(store: Store, version: str, pool: Pool, *, before: float | None = None,
                       exclude_anonymous: bool = False) -> list[dict[str, Any]]:
    """``pooled_entries`` of the pool ``version``'s closed scorecards in ``store``."""
    return pooled_entries(await store.played_episodes(version), pool, before=before,
                          exclude_anonymous=exclude_anonymous)
