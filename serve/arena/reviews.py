"""The fair-play review as the boards and scorecards show it: a version's ``report/review.json``
(``sokoforge review``, or ``round close``), read again whenever the file changes.

A ``needs review`` verdict is a mark beside an entry, never a removal: the ranking stays as
published; so is ``cleared`` (``clearances.json``, a person's source review), also read again
when it changes, so every worker and every restart shows it. The evidence behind a verdict
is shown to the key that played the scorecard (its scorecard view), the verdict alone to
anyone.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from pipeline.versions.clearances import CLEARANCES_JSON, cleared, to_view
from pipeline.versions.rounds import bound_text
from serve.arena.rounds import Rounds
from serve.games.games import Registry
from serve.records.review import REVIEW_JSON, read_review

__all__ = ["Reviews", "bound_view"]


def bound_view(report: dict[str, Any]) -> dict[str, Any] | None:
    """A review.json's bound K as a board shows it (``solved`` K, ``levels``, ``text``), or
    None for a review written before it carried one."""
    bound, levels = report.get("bound"), report.get("levels")
    if not isinstance(bound, int) or not isinstance(levels, int):
        return None
    equated = report.get("equated_bound")  # a pool's: stated on the equated scale
    equated = float(equated) if isinstance(equated, (int, float)) else None
    return {"solved": bound, "levels": levels, "text": bound_text(bound, levels, equated),
            **({} if equated is None else {"equated_success": equated})}


class Reviews:
    """The reviews of the served versions, and of the versions with a round in ``rounds``."""

    def __init__(self, games: Registry, rounds: Rounds) -> None:
        self.games = games
        self.rounds = rounds
        self._seen: dict[Path, tuple[tuple[int, int], Any]] = {}  # by file: (stamp, value)

    def _folder(self, version: str) -> Path | None:
        served = self.games.by_version(version)
        if served is not None:
            return served.version.folder
        book = self.rounds.book
        return None if book is None else book.datasets / version

    def _stamped(self, path: Path, read: Callable[[], Any]) -> Any:
        """What ``read`` made of ``path`` when the file was last seen as it is now (its
        mtime and size), read again when it changed; None when the file is not there."""
        try:
            st = path.stat()
        except OSError:
            return None
        stamp = (st.st_mtime_ns, st.st_size)
        seen = self._seen.get(path)
        if seen is not None and seen[0] == stamp:
            return seen[1]
        value = read()
        if len(self._seen) > 512:  # versions come from requests: keep the cache small
            self._seen.clear()
        self._seen[path] = (stamp, value)
        return value

    def _report(self, version: str) -> dict[str, Any] | None:
        """``version``'s review as the boards use it (``cards`` by id, its ``bound``), read
        again when review.json changes; None when no review has run."""
        folder = self._folder(version)
        if folder is None:
            return None

        def read() -> dict[str, Any] | None:
            data = read_review(folder)
            if data is None:
                return None
            cards = {str(c.get("scorecard_id")): {"verdict": c.get("verdict"),
                                                  "evidence": list(c.get("evidence") or [])}
                     for c in data["scorecards"] if isinstance(c, dict)}
            return {"cards": cards, "bound": bound_view(data)}
        report: dict[str, Any] | None = self._stamped(folder / "report" / REVIEW_JSON, read)
        return report

    def cards(self, version: str) -> dict[str, dict[str, Any]] | None:
        """Each reviewed scorecard of ``version`` by id (its verdict and evidence), or None
        when no review has run."""
        report = self._report(version)
        return None if report is None else report["cards"]

    def cleared(self, version: str) -> dict[str, dict[str, Any]]:
        """Each cleared scorecard of ``version`` by id (when it was cleared: ``at``, ``date``),
        read again whenever ``clearances.json`` changes."""
        folder = self._folder(version)
        if folder is None:
            return {}
        marks: dict[str, dict[str, Any]] = self._stamped(folder / CLEARANCES_JSON, lambda: {
            k: to_view(c) for k, c in cleared(folder).items()}) or {}
        return marks

    def mark(self, board: dict[str, Any]) -> dict[str, Any]:
        """A leaderboard answer with ``reviewed`` (whether a review has run), each entry's
        ``review`` verdict (null when it was not reviewed; a pooled entry's ``needs review``
        when any of its scorecards does) and ``cleared`` (when a person
        cleared it after reading its source; null if not): marks, the ranking unchanged;
        and the review's ``bound`` (``bound_view``; null before a review or without one)."""
        report = self._report(board["version"])
        cards = None if report is None else report["cards"]
        cleared = self.cleared(board["version"])
        for entry in board["entries"]:
            # a pooled entry (an adaptive game's) is marked as its scorecards' worst verdict
            found = [c for c in ((cards or {}).get(i) for i in entry.get(
                "scorecard_ids", [entry["scorecard_id"]])) if c is not None]
            verdicts = {c["verdict"] for c in found}
            entry["review"] = (None if not found else "needs review" if "needs review" in
                               verdicts else found[-1]["verdict"])
            entry["cleared"] = cleared.get(entry["scorecard_id"])
        return {**board, "reviewed": cards is not None,
                "bound": None if report is None else report["bound"]}

    def of(self, view: dict[str, Any], evidence: bool) -> dict[str, Any] | None:
        """The review of a scorecard ``view`` (its ``version``, or its games' versions): its
        verdict, ``cleared`` (when a person cleared it, or null), and its ``evidence`` when
        asked (for the key that played it); None when no review has judged it."""
        versions = [view.get("version")] + [g.get("version") for g in (
            view["games"].values() if isinstance(view.get("games"), dict)
            else view.get("games") or [])]
        for version in dict.fromkeys(v for v in versions if v):
            found = (self.cards(version) or {}).get(view["scorecard_id"])
            if found is not None:
                return {"version": version, "verdict": found["verdict"],
                        "cleared": self.cleared(version).get(view["scorecard_id"]),
                        **({"evidence": found["evidence"]} if evidence else {})}
        return None
