"""The game behind every protocol face: the ``Arena`` its handlers call, composed of one part
per concern (``serve.arena``: keys, rounds, sessions and their cache, scorecards, replays,
leaderboard).

Nothing here knows HTTP or a wire format, and nothing here is the truth: the store is
(``serve.arena.cache`` says how this process's copies of sessions stay faithful to it).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

from pipeline.versions.rounds import RoundBook
from serve.arena.cache import Session, SessionCache
from serve.arena.images import ImageCache
from serve.arena.keys import Keys
from serve.arena.leaderboard import Leaderboard
from serve.arena.replays import Replays
from serve.arena.reviews import Reviews
from serve.arena.rounds import Rounds
from serve.arena.scorecards import Scorecards
from serve.arena.sessions import Sessions
from serve.games.dataset import ServedVersion
from serve.games.episode import Outcome
from serve.games.games import Registry
from serve.limits import Limits
from serve.stores import KeyRecord, ScorecardRecord, Store

__all__ = ["Arena"]

T = TypeVar("T")


class Arena:
    """Every operation of the protocol on the served games, over a ``Store``: each is its
    part's (the parts are attributes, for what the operations below do not cover)."""

    def __init__(self, games: Registry | ServedVersion | Iterable[ServedVersion], store: Store,
                 limits: Limits, clock: Callable[[], float] = time.time,
                 rounds: RoundBook | None = None) -> None:
        if isinstance(games, ServedVersion):
            games = [games]
        self.games = games if isinstance(games, Registry) else Registry(games)
        self.store = store
        self.limits = limits
        self.clock = clock
        self.rounds = Rounds(rounds, clock)  # the versions' rounds: none closes without a book
        self.images = ImageCache()
        self.keys = Keys(store, limits, clock)
        self.cache = SessionCache(self.games, store, limits, clock, self.images)
        self.sessions = Sessions(self.cache, self.rounds)
        self.scorecards = Scorecards(self.cache, self.rounds)
        self.replays = Replays(self.games, store, self.images, self.cache.cutoff)
        self.standings = Leaderboard(self.games, store, self.rounds)
        self.reviews = Reviews(self.games, self.rounds)  # the fair-play review's marks

    @property
    def version(self) -> ServedVersion:
        """The first game's version (the game of clients that play one)."""
        return self.games.first.version

    @property
    def game(self) -> str:
        return self.games.first.name

    def spec(self) -> dict[str, Any]:
        """The public numbers of every served game: the first game's at the top level (the
        shape single-game clients read), each game's under ``game_specs``, and the limits."""
        specs = {g.name: {**g.spec(), **self.rounds.view(g.version.version)} for g in self.games}
        return {**specs[self.games.first.name], "games": self.games.names,
                "game_specs": specs, "limits": self.limits.public()}

    # -- keys ----------------------------------------------------------------------------------
    async def create_key(self, name: str, address: str, anonymous: bool = False) -> str:
        return await self.keys.create(name, address, anonymous)

    async def identify(self, api_key: str | None) -> KeyRecord:
        return await self.keys.identify(api_key)

    async def owner_of(self, api_key: str | None) -> KeyRecord | None:
        return await self.keys.owner_of(api_key)

    # -- scorecards ----------------------------------------------------------------------------
    async def open_scorecard(self, key: KeyRecord, source: str | None = None,
                             meta: dict[str, Any] | None = None) -> tuple[ScorecardRecord, int]:
        return await self.scorecards.open(key, source, meta)

    async def scorecard_view(self, key: KeyRecord, scorecard_id: str) -> dict[str, Any]:
        view = await self.scorecards.view(key, scorecard_id)
        return {**view, "review": self.reviews.of(view, evidence=True)}  # the owner's own

    async def close(self, key: KeyRecord, scorecard_id: str) -> dict[str, Any]:
        return await self.scorecards.close(key, scorecard_id)

    # -- sessions ------------------------------------------------------------------------------
    async def start(self, key: KeyRecord, scorecard_id: str, game: str, parallel: int,
                    address: str) -> Session:
        card = await self.scorecards.owned(key, scorecard_id)
        return await self.sessions.start(key, card, game, parallel, address)

    async def act(self, key: KeyRecord, session_id: str, action: int, episode: int | None,
                  answer: Callable[[Session, Outcome], T], step: int | None = None, *,
                  episode_step: int | None = None) -> T:
        return await self.sessions.act(key, session_id, action, episode, answer, step,
                                       episode_step=episode_step)

    async def restart(self, key: KeyRecord, session_id: str, episode: int | None,
                      answer: Callable[[Session, str], T], step: int | None = None) -> T:
        return await self.sessions.restart(key, session_id, episode, answer, step)

    async def current(self, key: KeyRecord, session_id: str) -> Session:
        return await self.sessions.current(key, session_id)

    async def expire_idle(self) -> int:
        return await self.cache.expire_idle()

    # -- what was played -----------------------------------------------------------------------
    async def replay(self, session_id: str, viewer: KeyRecord | None) -> dict[str, Any]:
        return await self.replays.replay(session_id, viewer)

    async def scorecard_outcomes(self, scorecard_id: str) -> dict[str, Any]:
        view = await self.replays.scorecard_outcomes(scorecard_id)
        return {**view, "review": self.reviews.of(view, evidence=False)}

    async def replay_frames(self, session_id: str, episode: int,
                            viewer: KeyRecord | None) -> dict[str, Any]:
        return await self.replays.replay_frames(session_id, episode, viewer)

    def solution_frames(self, game: str, episode: int) -> dict[str, Any]:
        return self.replays.solution_frames(game, episode)

    # -- standings -----------------------------------------------------------------------------
    def line(self, game: str | None = None) -> dict[str, Any]:
        return self.standings.line(game)

    async def leaderboard(self, version: str | None, limit: int = 100,
                          game: str | None = None) -> dict[str, Any]:
        return self.reviews.mark(await self.standings.standings(version, limit, game))
