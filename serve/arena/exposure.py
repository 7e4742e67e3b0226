"""How often each level of a served pool has been shown, so the adaptive choice caps it.

Each process holds a pool's counts (``PoolExposure``): read from the store
(``Store.shown_levels``) when a session starts (or one started elsewhere is first loaded), at
most every ``REFRESH`` seconds, and kept
current between two reads by the choices and sessions it makes itself. Every choice passes
over a level that would then be shown in more than ``pipeline.scores.adaptive.MAX_EXPOSURE``
of the sessions (``over_exposed``). Only the other processes' sessions since the last read
are missing from the counts; a refused write's choice stays counted (a little more caution).
"""

from __future__ import annotations

__all__ = ["Exposures", "PoolExposure", "REFRESH"]

from collections.abc import Callable, Sequence

import numpy as np

from pipeline.scores.adaptive import over_exposed
from serve.stores import Store

REFRESH = 10.0  # seconds a process keeps a pool's counts before reading them again


class PoolExposure:
    """Sessions that showed each level of a pool (``counts``, by level index) out of
    ``sessions``, as this process knows them (``serve.games.adaptive.ExposureCap``)."""

    def __init__(self, counts: np.ndarray, sessions: int) -> None:
        self.counts, self.sessions = counts, sessions

    def blocked(self) -> np.ndarray | None:
        """The levels one more showing would take past the cap (None: too few sessions)."""
        return over_exposed(self.counts, self.sessions)

    def shown(self, levels: Sequence[int]) -> None:
        """A session of this process was shown ``levels`` (chosen for it just now)."""
        self.counts[np.asarray(levels, dtype=np.int64)] += 1

    def started(self) -> None:
        """This process started one more session of the pool."""
        self.sessions += 1


class Exposures:
    """The ``PoolExposure`` of each pool this process serves, read from ``store``."""

    def __init__(self, store: Store, clock: Callable[[], float],
                 refresh: float = REFRESH) -> None:
        self.store, self.clock, self.refresh = store, clock, refresh
        self._held: dict[str, tuple[float, PoolExposure]] = {}

    def latest(self, version: str) -> PoolExposure | None:
        """The counts held for ``version`` (None before the first read)."""
        held = self._held.get(version)
        return None if held is None else held[1]

    async def read(self, version: str, levels: int) -> PoolExposure:
        """``version``'s counts over its ``levels`` levels, read again once ``refresh`` old."""
        now = self.clock()
        held = self._held.get(version)
        if held is not None and now - held[0] < self.refresh:
            return held[1]
        shown, sessions = await self.store.shown_levels(version)
        counts = np.zeros(levels, dtype=np.int64)
        for level, n in shown.items():
            if 0 <= level < levels:
                counts[level] = n
        if held is None:
            held = (now, PoolExposure(counts, sessions))
        else:  # the same object: the sessions holding it see the store's counts too
            held[1].counts, held[1].sessions = counts, sessions
            held = (now, held[1])
        self._held[version] = held
        return held[1]
