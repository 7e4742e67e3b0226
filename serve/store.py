"""What the server keeps, as a small interface, so another database can stand in for SQLite.

Records are plain frozen values; every method is a coroutine and returns only once the
change is durable. ``serve.sqlite_store`` is the embedded implementation.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass


class StoreConflict(Exception):
    """A uniqueness rule refused the write (a name or id already taken)."""


class StoreLimit(Exception):
    """A counted allowance is used up; ``count`` is how many were already used."""

    def __init__(self, count: int) -> None:
        super().__init__(f"limit reached after {count}")
        self.count = count


@dataclass(frozen=True)
class KeyRecord:
    key_hash: str
    name: str


@dataclass(frozen=True)
class ScorecardRecord:
    id: str
    key_hash: str
    name: str
    version: str
    game: str
    opened: float
    closed: float | None = None
    result: dict | None = None


@dataclass(frozen=True)
class SessionRecord:
    id: str
    scorecard_id: str
    key_hash: str
    game: str
    version: str
    parallel: int
    state: str
    created: float
    last_active: float


@dataclass(frozen=True)
class EpisodeRecord:
    """One episode's outcome so far; ``actions`` is the string over ``UDLR`` it played."""

    index: int
    done: bool
    solved: bool
    deadlocked: bool
    steps: int
    actions: str


@dataclass(frozen=True)
class ActionRecord:
    """One acknowledged action and the episode row it leaves behind."""

    session_id: str
    seq: int
    at: float
    action: int
    episode: EpisodeRecord
    session_state: str | None = None


@dataclass(frozen=True)
class Standing:
    """A closed scorecard's place-deciding numbers, as the leaderboard ranks them."""

    scorecard_id: str
    session_id: str | None
    name: str
    closed: float
    result: dict


class Store(ABC):
    """Durable state of keys, scorecards, sessions, actions, results and rate counters."""

    @abstractmethod
    async def start(self) -> None: ...

    @abstractmethod
    async def close(self) -> None: ...

    @abstractmethod
    async def create_key(self, record: KeyRecord, counter: str, day: str, limit: int) -> int:
        """Add a key unless its name is taken (``StoreConflict``) or ``counter`` is spent today
        (``StoreLimit``); returns the counter's new value."""

    @abstractmethod
    async def find_key(self, key_hash: str) -> KeyRecord | None: ...

    @abstractmethod
    async def open_scorecard(self, record: ScorecardRecord, day: str, limit: int) -> int:
        """Add a scorecard unless the key opened ``limit`` today (``StoreLimit``); returns how
        many it has opened today, this one included."""

    @abstractmethod
    async def scorecard(self, scorecard_id: str) -> ScorecardRecord | None: ...

    @abstractmethod
    async def open_scorecards(self) -> list[ScorecardRecord]: ...

    @abstractmethod
    async def create_session(self, record: SessionRecord, episodes: int) -> None: ...

    @abstractmethod
    async def sessions(self, scorecard_id: str) -> list[tuple[SessionRecord, list[EpisodeRecord]]]:
        """Every session of a scorecard with all its episode rows, in index order."""

    @abstractmethod
    async def session(self, session_id: str) -> tuple[SessionRecord, list[EpisodeRecord]] | None:
        ...

    @abstractmethod
    async def record_action(self, record: ActionRecord) -> None: ...

    @abstractmethod
    async def set_session_state(self, session_id: str, state: str) -> None: ...

    @abstractmethod
    async def close_scorecard(self, scorecard_id: str, closed: float, result: dict,
                              final: dict[str, list[EpisodeRecord]]) -> dict:
        """Close once: store the result and the final episode rows of each session (by id);
        a scorecard already closed keeps and returns its first result."""

    @abstractmethod
    async def leaderboard(self, version: str, limit: int) -> list[Standing]:
        """Each name's best closed scorecard of ``version``, ranked."""

    @abstractmethod
    async def versions(self) -> list[str]: ...
