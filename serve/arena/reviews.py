"""The fair-play review as the boards and scorecards show it: a version's ``report/review.json``
(``sokoforge review``, or ``round close``), read again whenever the file changes.

A ``needs review`` verdict is a mark beside an entry, never a removal: the ranking stays as
published. The evidence behind a verdict is shown to the key that played the scorecard (its
scorecard view), the verdict alone to anyone.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from serve.arena.rounds import Rounds
from serve.games.games import Registry
from serve.records.review import REVIEW_JSON, read_review

__all__ = ["Reviews"]


class Reviews:
    """The reviews of the served versions, and of the versions with a round in ``rounds``."""

    def __init__(self, games: Registry, rounds: Rounds) -> None:
        self.games = games
        self.rounds = rounds
        self._seen: dict[Path, tuple[tuple[int, int], dict[str, dict[str, Any]]]] = {}

    def _folder(self, version: str) -> Path | None:
        served = self.games.by_version(version)
        if served is not None:
            return served.version.folder
        book = self.rounds.book
        return None if book is None else book.datasets / version

    def cards(self, version: str) -> dict[str, dict[str, Any]] | None:
        """Each reviewed scorecard of ``version`` by id (its verdict and evidence), or None
        when no review has run."""
        folder = self._folder(version)
        if folder is None:
            return None
        try:
            st = (folder / "report" / REVIEW_JSON).stat()
        except OSError:
            return None
        stamp = (st.st_mtime_ns, st.st_size)
        seen = self._seen.get(folder)
        if seen is not None and seen[0] == stamp:
            return seen[1]
        data = read_review(folder)
        if data is None:
            return None
        cards = {str(c.get("scorecard_id")): {"verdict": c.get("verdict"),
                                              "evidence": list(c.get("evidence") or [])}
                 for c in data["scorecards"] if isinstance(c, dict)}
        if len(self._seen) > 256:  # versions come from requests: keep the cache small
            self._seen.clear()
        self._seen[folder] = (stamp, cards)
        return cards

    def mark(self, board: dict[str, Any]) -> dict[str, Any]:
        """A leaderboard answer with ``reviewed`` (whether a review has run) and each entry's
        ``review`` verdict (null when it was not reviewed)."""
        cards = self.cards(board["version"])
        for entry in board["entries"]:
            found = (cards or {}).get(entry["scorecard_id"])
            entry["review"] = None if found is None else found["verdict"]
        return {**board, "reviewed": cards is not None}

    def of(self, view: dict[str, Any], evidence: bool) -> dict[str, Any] | None:
        """The review of a scorecard ``view`` (its ``version``, or its games' versions): its
        verdict, and its ``evidence`` when asked (for the key that played it); None when
        no review has judged it."""
        versions = [view.get("version")] + [g.get("version") for g in (
            view["games"].values() if isinstance(view.get("games"), dict)
            else view.get("games") or [])]
        for version in dict.fromkeys(v for v in versions if v):
            found = (self.cards(version) or {}).get(view["scorecard_id"])
            if found is not None:
                return {"version": version, "verdict": found["verdict"],
                        **({"evidence": found["evidence"]} if evidence else {})}
        return None
