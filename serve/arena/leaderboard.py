"""The standings of the served games: each name's best result per version with its precision
(on an adaptive game's pool, its ability pooled over its sessions), and the linked abilities of
a version's line."""

from __future__ import annotations

from typing import Any

from pipeline.errors import PipelineError
from pipeline.scores.items import folder_is_pool
from pipeline.scores.linking import read_line
from pipeline.scores.pooled import ABOVE_METHOD, POOLED_METHOD
from serve.arena.errors import NotFound
from serve.arena.rounds import Rounds
from serve.arena.scorecards import iso
from serve.games.games import GameEntry, Registry
from serve.records.pooled_board import Board, pooled_board, read_board, served_board
from serve.records.ranking_precision import PRECISION, RankingPrecision
from serve.stores import Store

__all__ = ["POOLED_PRECISION", "Leaderboard"]

# what an adaptive game's board ranks by, and how it marks a tie (``pipeline.scores.pooled``)
POOLED_PRECISION = {"ability": POOLED_METHOD, "indistinguishable_from_above": ABOVE_METHOD}


class Leaderboard:
    """The leaderboard of every version a ``Store`` holds, and the served versions' lines."""

    def __init__(self, games: Registry, store: Store, rounds: Rounds) -> None:
        self.games = games
        self.store = store
        self.rounds = rounds
        self.ranking = RankingPrecision(store)
        self._boards: dict[str, Board | None] = {}

    def _game(self, game: str | None) -> GameEntry:
        """The served game ``game``, the first one without a name."""
        entry = self.games.get(game) if game else self.games.first
        if entry is None:
            raise NotFound(f"unknown game {game!r}; this server plays "
                           f"{', '.join(map(repr, self.games.names))}")
        return entry

    def line(self, game: str | None = None) -> dict[str, Any]:
        """The linked abilities of the served version's line (``sokoforge irt V --line``
        writes them): each name's ability on one scale with its interval, beside its raw
        success per version."""
        entry = self._game(game)
        served = entry.version
        fit = read_line(served.folder) if served.folder is not None else None
        if fit is None:
            raise NotFound(f"no linked fit of the line of {served.version}: run `sokoforge irt "
                           f"{served.version} --line --db STORE` where the datasets are")
        entries = [{"rank": rank, **agent} for rank, agent in enumerate(fit["agents"], 1)]
        return {"version": served.version, "game": entry.name,
                **{k: fit[k] for k in ("versions", "scales", "links", "notes", "model")},
                "entries": entries}

    def _board(self, version: str) -> Board | None:
        """What the board of ``version`` reads when it is an adaptive game's pool (served,
        or archived with a round), read once; None for a fixed game."""
        if version not in self._boards:
            served = self.games.by_version(version)
            book = self.rounds.book
            board = None
            if served is not None:
                board = served_board(served.version)
            elif book is not None and folder_is_pool(book.datasets / version):
                try:
                    board = read_board(book.datasets / version)
                except (OSError, PipelineError):
                    board = None  # never calibrated: no board to rank it by
            self._boards[version] = board
        return self._boards[version]

    async def standings(self, version: str | None, limit: int = 100,
                        game: str | None = None) -> dict[str, Any]:
        """Each name's best result on one version: ``version``, else the served version of
        ``game``, else that of the first game; each with its success interval and whether a
        paired test over the levels tells it apart from the entry above. A version with a
        round ranks what its standings rank: named players' results closed before its
        closing time."""
        if version is None:
            version = self._game(game).version.version
        closes = self.rounds.cutoff(version)  # a round's board is its standings, as they stand
        served = self.games.by_version(version)
        board = self._board(version)
        if board is not None:  # an adaptive game: each name's ability over all its sessions
            entries = (await pooled_board(self.store, version, board, before=closes,
                                          exclude_anonymous=closes is not None))[:limit]
            return await self._answer(version, served, entries, POOLED_PRECISION)
        standings = await self.store.leaderboard(version, limit, before=closes,
                                                 exclude_anonymous=closes is not None)
        entries = []
        for rank, s in enumerate(standings, 1):
            r = s.result
            entries.append({"rank": rank, "name": s.name, "success_rate": r["success_rate"],
                            "move_efficiency": r["move_efficiency"],
                            "deadlock_rate": r["deadlock_rate"], "solved": r["solved"],
                            "episodes": r["episodes"], "avg_steps_solved": r["avg_steps_solved"],
                            "total_actions": r["total_actions"], "scorecard_id": s.scorecard_id,
                            "session_id": s.session_id, "submitted_at": iso(s.closed),
                            "source": s.source})
        await self.ranking.annotate(entries, standings, self.rounds.tiers(version)
                                    if served is None else
                                    [lv.tier for lv in served.version.levels])
        return await self._answer(version, served, entries, PRECISION)

    async def _answer(self, version: str, served: GameEntry | None, entries: list[dict[str, Any]],
                      precision: dict[str, str]) -> dict[str, Any]:
        """The board of ``version`` with its ranked ``entries`` and how they were ranked."""
        versions = sorted(set(await self.store.versions()) | set(self.games.versions().values()))
        return {"version": version, "game": served.name if served else None,
                **self.rounds.view(version, served=served is not None),
                "served_version": self.games.first.version.version,
                "served": self.games.versions(), "versions": versions, "entries": entries,
                "precision": precision, "adaptive": precision is POOLED_PRECISION}
