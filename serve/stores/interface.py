"""What the server keeps, as a small interface, so several backends (and processes) share it.

The store is the truth and owns concurrency: an action is appended only if the session's
stored action count and writer are the expected ones (compare-and-set), limits are counted
in it, and it expires idle sessions. Records are plain frozen values; every method is a
coroutine and returns only once the change is durable. ``serve.stores.sqlite`` (one
machine) and ``serve.stores.postgres`` (a fleet) implement it; ``serve.stores.location``
opens one.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "EpisodeRecord", "Final", "KeyRecord", "PlayedEpisode", "PlayedSession", "ScorecardRecord",
    "SessionRecord", "StaleSession", "Standing", "Store", "StoreConflict", "StoreError",
    "StoreLimit", "StoreUnavailable", "Write", "miscounted_error",
]

from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TypeVar

from engine.errors import SokoforgeError

T = TypeVar("T")


class StoreError(SokoforgeError):
    """The store cannot be used (damaged, locked, of a newer schema); the message says why."""


class StoreUnavailable(StoreError):
    """The store cannot take or give anything now, and the request changed nothing: its disk
    is full or failing, or the path no longer names the file the server locked (deleted,
    replaced, truncated). The message names the problem; the web layer answers 503 with it."""


class StoreConflict(SokoforgeError):
    """A uniqueness rule refused the write (a name or id already taken, a game already
    started, a scorecard already closed)."""


class StoreLimit(SokoforgeError):
    """A counted allowance is used up; ``count`` is how many were already used, ``kind``
    which allowance."""

    def __init__(self, count: int, kind: str = "") -> None:
        super().__init__(f"limit {kind} reached after {count}")
        self.count = count
        self.kind = kind


class StaleSession(SokoforgeError):
    """The session's stored action count or writer is not the expected one: another process
    played it, or it is over. Reload it from the store."""


@dataclass(frozen=True)
class KeyRecord:
    key_hash: str
    name: str


@dataclass(frozen=True)
class ScorecardRecord:
    """``games`` maps each game name the scorecard may play to the version it was opened on;
    ``source`` is ``browser`` for a person's run on the play page (else None), ``meta`` what
    the client attached when opening it (``tags``, ``source_url``, ``opaque``), as given."""

    id: str
    key_hash: str
    name: str
    games: dict[str, str]
    opened: float
    closed: float | None = None
    result: dict[str, Any] | None = None
    source: str | None = None
    meta: dict[str, Any] | None = None

    @property
    def version(self) -> str:
        """The version of its first game (the one single-game clients read)."""
        return next(iter(self.games.values()))


@dataclass(frozen=True)
class SessionRecord:
    """A session; ``seq`` counts its stored actions and ``writer`` names the cache that wrote
    the last one (both change at every write)."""

    id: str
    scorecard_id: str
    key_hash: str
    game: str
    version: str
    parallel: int
    state: str
    created: float
    last_active: float
    seq: int = 0
    writer: str = ""


@dataclass(frozen=True)
class EpisodeRecord:
    """One episode's outcome so far; ``actions`` is the string over ``UDLR.|`` it played and
    ``snapshot`` its current state (None before it started). ``level`` is the index, in the
    session's version, of the level the episode plays: ``index`` itself in a fixed game, the
    recorded choice in an adaptive one (None only while that choice is not yet made)."""

    index: int
    done: bool
    solved: bool
    deadlocked: bool
    steps: int
    actions: str
    snapshot: str | None = None
    level: int | None = None


@dataclass(frozen=True)
class Write:
    """One conditional write of a session: accepted only if the stored ``seq`` is ``expected``
    and the stored writer ``expected_writer``; it stores ``action`` (a stored step) with
    ``ms``, when its request arrived (server clock, integer milliseconds since the session's
    ``created``), the ``episodes`` rows it changed (their ``level`` too: a block of levels
    chosen when the step ended the block before is stored by the same write), ``writer`` and
    maybe a new session state."""

    session_id: str
    expected: int
    expected_writer: str
    writer: str
    at: float
    action: int
    episode: int
    episodes: tuple[EpisodeRecord, ...]
    session_state: str | None = None
    ms: int | None = None


@dataclass(frozen=True)
class Standing:
    """A closed scorecard's result for one game, as the leaderboard ranks it."""

    scorecard_id: str
    session_id: str | None
    name: str
    closed: float
    result: dict[str, Any]
    source: str | None = None


@dataclass(frozen=True)
class PlayedEpisode:
    """One episode of a closed scorecard's session, as the audit and the difficulty fit read
    them: who played (key hash, name, where from), which episode (``index``) on which level
    of the version (``level``: the episode's index in a fixed game), how it ended, whether it
    ended at all (``done``) and when its scorecard closed (``closed``)."""

    scorecard_id: str
    key_hash: str
    name: str
    source: str | None
    index: int
    solved: bool
    steps: int
    deadlocked: bool
    done: bool = True
    closed: float | None = None
    level: int = field(kw_only=True)


@dataclass(frozen=True)
class PlayedSession:
    """One session of a closed scorecard as the review reads it: its record, its episodes
    that took a step or were solved (index order) and every stored action, in ``seq`` order,
    as ``(episode, action, ms)`` (ms None where the store kept no arrival time)."""

    session: SessionRecord
    episodes: tuple[EpisodeRecord, ...]
    actions: tuple[tuple[int, int, int | None], ...]


@dataclass(frozen=True)
class Final:
    """A session's last rows at closing, written only if its ``seq`` is still ``expected``."""

    session_id: str
    expected: int
    episodes: tuple[EpisodeRecord, ...] = field(default=())


class Store(ABC):
    """Durable state of keys, scorecards, sessions, actions, results and rate counters.

    Raises (any method):
        StoreUnavailable: the store can take or give nothing now (a full or failing disk, a
            lost connection, its file replaced); nothing changed.
        StoreError: the store cannot be used (damaged, locked, of a newer schema).
        StoreConflict, StoreLimit, StaleSession: as each method says.
    """

    @abstractmethod
    async def start(self) -> None:
        """Open, create or migrate the schema (refusing a newer one)."""

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
    async def create_session(self, record: SessionRecord, levels: Sequence[int | None],
                             per_key: int, total: int, live_since: float, *, address: str = "",
                             per_address: int | None = None) -> None:
        """Add a session with one episode row per entry of ``levels``, each the level its
        episode plays (None: an adaptive episode whose level is chosen later), unless its
        scorecard is closed or already plays its game (``StoreConflict``), or the key
        (``StoreLimit`` kind ``key``), the client ``address`` (kind ``address``, when
        ``per_address`` is given) or everyone (kind ``total``) has as many sessions in flight
        (in progress, active since ``live_since``)."""

    @abstractmethod
    async def sessions(self, scorecard_id: str) -> list[tuple[SessionRecord, list[EpisodeRecord]]]:
        """Every session of a scorecard with all its episode rows, in index order."""

    @abstractmethod
    async def session(self, session_id: str) -> tuple[SessionRecord, list[EpisodeRecord]] | None:
        ...

    @abstractmethod
    async def head(self, session_id: str) -> tuple[int, str, str, float] | None:
        """A session's stored ``(seq, writer, state, last_active)``, to check a cached copy."""

    @abstractmethod
    async def steps(self, session_id: str, upto: int) -> list[tuple[int, int]]:
        """The ``(episode, action)`` of a session's stored actions 1 to ``upto``, in order (all
        there are, when fewer): what a session's play replays to answer a repeated step."""

    @abstractmethod
    async def action_times(self, session_ids: list[str]) -> dict[str, list[int | None]]:
        """When each stored action of each session arrived: per session id, one entry per
        stored action in ``seq`` order, its ``Write.ms`` (None for an action stored before
        stores kept times); an unknown session has none."""

    @abstractmethod
    async def write(self, write: Write) -> None:
        """Apply one conditional write, or raise ``StaleSession`` and change nothing."""

    @abstractmethod
    async def update_session(self, session_id: str, change: Callable[
            [SessionRecord, list[EpisodeRecord]], tuple[Write, T]]) -> T | None:
        """One change of a session as stored, serialised with every other process's: while a
        transaction holds the session (no one else writes it meanwhile), ``change`` of its
        stored record and rows gives the ``Write`` applied and the value returned. None for
        an unknown session; ``change`` may raise, and then nothing is written."""

    @abstractmethod
    async def expire(self, idle_before: float, session_id: str | None = None) -> int:
        """Mark sessions in progress and inactive since before ``idle_before`` (all, or just
        ``session_id``) as expired; returns how many were."""

    @abstractmethod
    async def close_scorecard(self, scorecard_id: str, closed: float, result: dict[str, Any],
                              final: list[Final]) -> dict[str, Any]:
        """Close once: store the result, each game's standing and the sessions' final rows.
        A scorecard already closed keeps and returns its first result; a session whose
        ``seq`` moved since raises ``StaleSession`` and changes nothing."""

    @abstractmethod
    async def leaderboard(self, version: str, limit: int, before: float | None = None,
                          exclude_anonymous: bool = False) -> list[Standing]:
        """Each name's best result on ``version`` closed before ``before`` (any time when
        None), ranked; the anonymous keys' (``sql.ANONYMOUS`` names) left out if
        ``exclude_anonymous``."""

    @abstractmethod
    async def played_episodes(self, version: str, include_browser: bool = True,
                              browser_only: bool = False) -> list[PlayedEpisode]:
        """Every episode of the sessions on ``version`` of the closed scorecards, by close
        time, scorecard, game and level; runs played in the browser (scorecard source
        ``browser``) left out unless ``include_browser``, or alone with ``browser_only``."""

    @abstractmethod
    async def played_sessions(self, version: str
                              ) -> list[tuple[ScorecardRecord, list[PlayedSession]]]:
        """Every closed scorecard with a session on ``version``, in the order they opened
        (then by id), each with its sessions on it (by creation): the review's whole read
        in a few queries, whatever the number of scorecards."""

    @abstractmethod
    async def versions(self) -> list[str]:
        """Every version with a closed result."""

    @abstractmethod
    async def shown_levels(self, version: str) -> tuple[dict[int, int], int]:
        """How many sessions on ``version`` showed each level (an episode in play, or one a
        step was taken in: a closed session's padding was never shown), and how many
        sessions it has: an adaptive pool's exposure."""

    @abstractmethod
    async def identity(self) -> str:
        """The store's id: random, written inside it when it was created, and the same
        wherever it lives (a moved file, another URL to the database); never its location,
        which may hold a password. Rounds record which store served them by it."""

    async def integrity(self, where: str) -> None:
        """Check that the stored actions agree with the sessions' records (``StoreError``)."""
        bad = await self.miscounted()
        if bad:
            raise miscounted_error(where, bad)

    @abstractmethod
    async def miscounted(self) -> int:
        """How many sessions' action counts disagree with their stored actions."""


def miscounted_error(where: str, sessions: int) -> StoreError:
    return StoreError(f"{where} is damaged: {sessions} session(s) hold a different number of "
                      "stored actions than their records say; restore it from a backup")
