"""The leaderboard's precision: each entry's success interval and whether it can be told apart
from the entry above, from the per-level outcomes of the ranked sessions.

A closed session never changes, so its outcomes are read from the store once and kept.
"""

from __future__ import annotations

__all__ = ["CACHED", "PRECISION", "RankingPrecision"]

from collections import OrderedDict
from collections.abc import Sequence

import numpy as np

from pipeline.precision import METHOD, PAIRED_METHOD, ranked_precision
from serve.stores import Standing, Store

CACHED = 20_000
PRECISION = {"success_interval": METHOD, "indistinguishable_from_above": PAIRED_METHOD}


class RankingPrecision:
    """Per-level outcomes of ranked sessions (cached) and the figures drawn from them."""

    def __init__(self, store: Store, size: int = CACHED) -> None:
        self.store = store
        self.size = size
        self._outcomes: OrderedDict[str, np.ndarray] = OrderedDict()

    async def outcomes(self, standing: Standing) -> np.ndarray | None:
        """Solved or not per level of the standing's session, by the level each episode
        played (levels never played count as unsolved, as closing counts them); None when
        there is no session to read."""
        sid = standing.session_id
        if sid is None:
            episodes = int(standing.result.get("episodes", 0))
            return np.zeros(episodes, dtype=bool) if episodes else None
        if sid in self._outcomes:
            self._outcomes.move_to_end(sid)
            return self._outcomes[sid]
        found = await self.store.session(sid)
        if found is None:
            return None
        _, rows = found
        solved = np.zeros(int(standing.result.get("episodes", len(rows))), dtype=bool)
        for row in rows:
            if row.level is not None and 0 <= row.level < solved.size:
                solved[row.level] = row.solved
        self._outcomes[sid] = solved
        while len(self._outcomes) > self.size:
            self._outcomes.popitem(last=False)
        return solved

    async def annotate(self, entries: list[dict], standings: Sequence[Standing],
                       tiers: Sequence[int] | None) -> None:
        """Add ``pipeline.precision.ranked_precision``'s fields to ranked ``entries`` (one
        per standing, same order), in place."""
        vectors = [await self.outcomes(s) for s in standings]
        counts = [(e["solved"], e["episodes"]) for e in entries]
        for entry, fields in zip(entries, ranked_precision(vectors, counts, tiers), strict=True):
            entry.update(fields)
