"""The served versions' rounds as play checks them: a change on a version whose round is over
is refused with the reason; without a book no round closes."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from pipeline.rounds import RoundBook
from pipeline.rounds import iso as round_time
from serve.arena.errors import RoundClosed

__all__ = ["Rounds"]


class Rounds:
    """The rounds of ``book`` (None: no version has one) at the time ``clock`` tells."""

    def __init__(self, book: RoundBook | None, clock: Callable[[], float]) -> None:
        self.book = book
        self.clock = clock

    def view(self, version: str) -> dict[str, Any]:
        """``{"round": {...}}`` for a version with a round (when it closes, whether it is over,
        the final standings' sha256 once written), else nothing."""
        rnd = self.book.get(version) if self.book is not None else None
        if rnd is None:
            return {}
        return {"round": {"closes": round_time(rnd.closes), "over": rnd.is_over(self.clock()),
                          "closed_at": None if rnd.closed is None else round_time(rnd.closed),
                          "standings_sha256": rnd.standings_sha256}}

    def require_open(self, version: str, also: str = "") -> None:
        """Refuse (``RoundClosed``, with the reason) a change on a version whose round is over."""
        over = self.book.over(version, self.clock()) if self.book is not None else None
        if over is not None:
            raise RoundClosed(over.refusal() + also)

    def require_one_open(self, versions: Iterable[str]) -> None:
        """Refuse (``RoundClosed``, every round's reason) when the rounds of all ``versions``
        are over: a new scorecard could play none of them."""
        if self.book is None:
            return
        over = [self.book.over(v, self.clock()) for v in versions]
        closed = [r for r in over if r is not None]
        if len(closed) == len(over):
            raise RoundClosed("; ".join(r.refusal() for r in closed))
