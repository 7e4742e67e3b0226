"""How often each level of a served pool has been shown, so the adaptive choice caps it.

Each process reads a pool's counts from the store (``Store.shown_levels``) when a session
starts, at most every ``REFRESH`` seconds, and every choice it makes passes over a level that
would then be shown in more than ``pipeline.scores.adaptive.MAX_EXPOSURE`` of the sessions
(``over_exposed``). The counts may be that much behind the other processes' sessions: the cap
is a share over many sessions, and the random pick among the most informative levels holds
it between two reads.
"""

from __future__ import annotations

__all__ = ["Exposure", "Exposures", "REFRESH"]

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from pipeline.scores.adaptive import over_exposed
from serve.stores import Store

REFRESH = 10.0  # seconds a process keeps a pool's counts before reading them again


@dataclass(frozen=True)
class Exposure:
    """Sessions that showed each level of a pool (``counts``, by level index) out of
    ``sessions``."""

    counts: np.ndarray
    sessions: int

    def blocked(self) -> np.ndarray | None:
        """The levels one more showing would take past the cap (None: too few sessions)."""
        return over_exposed(self.counts, self.sessions)


class Exposures:
    """The latest ``Exposure`` of each pool this process serves, read from ``store``."""

    def __init__(self, store: Store, clock: Callable[[], float],
                 refresh: float = REFRESH) -> None:
        self.store, self.clock, self.refresh = store, clock, refresh
        self._latest: dict[str, tuple[float, Exposure]] = {}

    def latest(self, version: str) -> Exposure | None:
        """The counts last read for ``version`` (None before the first read)."""
        held = self._latest.get(version)
        return None if held is None else held[1]

    async def read(self, version: str, levels: int) -> Exposure:
        """``version``'s counts over its ``levels`` levels, read again once ``refresh`` old."""
        now = self.clock()
        held = self._latest.get(version)
        if held is not None and now - held[0] < self.refresh:
            return held[1]
        shown, sessions = await self.store.shown_levels(version)
        counts = np.zeros(levels, dtype=np.int64)
        for level, n in shown.items():
            if 0 <= level < levels:
                counts[level] = n
        fresh = Exposure(counts, sessions)
        self._latest[version] = (now, fresh)
        return fresh
