"""The served versions' rounds as play checks them: a change on a version whose round is over
is refused with the reason; without a book no round closes."""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable, Iterable
from typing import Any

from pipeline.errors import PipelineError
from pipeline.versions.round_log import record_served
from pipeline.versions.rounds import STANDINGS_CSV, STANDINGS_SHA256, RoundBook, round_state
from pipeline.versions.rounds import iso as round_time
from pipeline.versions.tables import read_parquet
from serve.arena.errors import NotFound, RoundClosed

__all__ = ["STANDINGS_ROUTES", "Rounds"]

log = logging.getLogger("sokoforge.serve.rounds")

# Where a closed round's final standings are served, by kind (VERSION: the version's name)
STANDINGS_ROUTES = {"json": "/api/standings/VERSION",
                    **{kind: f"/api/standings/VERSION/{name}" for kind, name in (
                        ("csv", STANDINGS_CSV), ("sha256", STANDINGS_SHA256))}}


class Rounds:
    """The rounds of ``book`` (None: no version has one) at the time ``clock`` tells."""

    def __init__(self, book: RoundBook | None, clock: Callable[[], float]) -> None:
        self.book = book
        self.clock = clock
        self._tiers: dict[str, list[int] | None] = {}
        self._store_id: str | None = None
        self._recorded: set[str] = set()  # the versions whose round has this store recorded

    def serve_from(self, store_id: str, versions: Iterable[str]) -> None:
        """Record in the round log of each of ``versions`` under a round that the store
        ``store_id`` serves it (what ``round close`` ranks from); a round opened later is
        recorded when play on it first asks whether it is open."""
        self._store_id = store_id
        for version in versions:
            self._record(version)

    def _record(self, version: str) -> None:
        if self._store_id is None or self.book is None or version in self._recorded:
            return
        rnd = self.book.get(version)
        if rnd is None or rnd.published is not None:
            return
        self._recorded.add(version)
        try:
            record_served(self.book.datasets / version, self._store_id, round_time(self.clock()))
        except (OSError, PipelineError) as e:  # play goes on; the close will say it is missing
            log.warning("cannot record in %s's round log that this store serves it: %s",
                        version, e)

    def view(self, version: str, served: bool = True) -> dict[str, Any]:
        """``{"round": {...}}`` for a version with a round (when it closes, whether it is over,
        the final standings' sha256 once written), else nothing; for a version not ``served``
        only once its round is closed: before, its closing time is not this server's to say."""
        rnd = self.book.get(version) if self.book is not None else None
        if rnd is None or (not served and rnd.closed is None):
            return {}
        return {"round": {"closes": round_time(rnd.closes), "over": rnd.is_over(self.clock()),
                          "state": round_state(rnd, self.clock()),
                          "closed_at": None if rnd.closed is None else round_time(rnd.closed),
                          "standings_sha256": rnd.standings_sha256,
                          "standings": None if rnd.standings_sha256 is None else {
                              kind: path.replace("VERSION", version)
                              for kind, path in STANDINGS_ROUTES.items()}}}

    def cutoff(self, version: str) -> float | None:
        """The closing time of ``version``'s round (its board ranks only what was closed
        before it, by named players), None without a round."""
        rnd = self.book.get(version) if self.book is not None else None
        return None if rnd is None else rnd.closes

    def tiers(self, version: str) -> list[int] | None:
        """Each level's tier in play order, for a version with a round that is not served
        (its archived board's precision is then the standings'), read once; else None."""
        rnd = self.book.get(version) if self.book is not None else None
        if rnd is None or self.book is None:
            return None
        if version not in self._tiers:
            try:
                self._tiers[version] = read_parquet(
                    self.book.datasets / version / "levels.parquet",
                    ["index", "tier"]).sort("index")["tier"].to_list()
            except (OSError, PipelineError):
                return None
        return self._tiers[version]

    def standings_file(self, version: str, name: str) -> bytes:
        """A file of ``version``'s final standings (``STANDINGS_FILES``), as its close wrote
        it; ``NotFound`` before the round is closed, or when the files are not the recorded
        ones."""
        rnd = self.book.get(version) if self.book is not None else None
        if rnd is None or rnd.standings_sha256 is None or self.book is None:
            raise NotFound(f"no closed round of version {version!r} on this server")
        folder = self.book.datasets / version
        try:
            sums = (folder / STANDINGS_SHA256).read_bytes()
            data = sums if name == STANDINGS_SHA256 else (folder / name).read_bytes()
        except OSError:
            raise NotFound(f"the standings of {version} are not beside its manifest") from None
        listed = {}
        if hashlib.sha256(sums).hexdigest() == rnd.standings_sha256:  # as its close wrote it
            listed = {n: d for d, n in (line.split("  ", 1) for line in sums.decode().splitlines())}
            listed[STANDINGS_SHA256] = rnd.standings_sha256
        if listed.get(name) != hashlib.sha256(data).hexdigest():
            raise NotFound(f"the standings files of {version} are not the ones its close "
                           "recorded")
        return data

    def require_open(self, version: str, also: str = "", at: float | None = None) -> None:
        """Refuse (``RoundClosed``, with the reason) a change on a version whose round is over
        at ``at`` (default: now)."""
        self._record(version)
        now = self.clock() if at is None else at
        over = self.book.over(version, now) if self.book is not None else None
        if over is not None:
            raise RoundClosed(over.refusal() + also)

    def require_one_open(self, versions: Iterable[str]) -> None:
        """Refuse (``RoundClosed``, every round's reason) when the rounds of all ``versions``
        are over: a new scorecard could play none of them."""
        if self.book is None:
            return
        versions = list(versions)
        for version in versions:
            self._record(version)
        over = [self.book.over(v, self.clock()) for v in versions]
        closed = [r for r in over if r is not None]
        if len(closed) == len(over):
            raise RoundClosed("; ".join(r.refusal() for r in closed))
