"""The game behind every protocol face: keys, scorecards, sessions, restarts and scores.

Nothing here knows HTTP or a wire format, and nothing here is the truth: the store is. This
process keeps a cache of sessions it played, each trusted only while its action count and
writer equal the store's; every action is a conditional write, so when another process (a
worker, or another server on a shared store) played the session meanwhile, the write is
refused, the session is reloaded from its stored snapshot and the action played on it, and
the answer is the one a process that served the session all along would give.
"""

from __future__ import annotations

import hashlib
import ipaddress
import secrets
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, TypeVar

from engine.errors import SokoforgeError
from engine.levels import State
from engine.rules import WAIT
from pipeline.linking import read_line
from pipeline.precision import with_interval
from pipeline.rounds import RoundBook
from pipeline.rounds import iso as round_time
from serve.dataset import ServedLevel, ServedVersion, encode_image
from serve.episode import (
    EXPIRED,
    GAME_OVER,
    IN_PROGRESS,
    PLAYED,
    RESTART_GAME,
    RESTART_LEVEL,
    EpisodeRun,
    Outcome,
    Run,
    new_run,
    replay_states,
    score,
)
from serve.framezip import Picture
from serve.games import GameEntry, Registry
from serve.limits import Limits
from serve.ranking_precision import PRECISION, RankingPrecision
from serve.stores import (
    EpisodeRecord,
    Final,
    KeyRecord,
    ScorecardRecord,
    SessionRecord,
    StaleSession,
    Store,
    StoreConflict,
    StoreLimit,
    Write,
)

__all__ = ["WAIT", "EpisodeRun", "Outcome", "KeyRecord", "PLAYED", "EXPIRED", "GAME_OVER",
           "IN_PROGRESS"]

KEY_PREFIX = "lsk-"
SCORE_FIELDS = ("episodes", "solved", "success_rate", "success_interval", "move_efficiency",
                "avg_steps_solved", "deadlock_rate", "total_actions")
RETRIES = 8  # reloads of a session another process keeps writing, before answering 503
CACHED_SESSIONS = 20_000
T = TypeVar("T")


class PlayError(SokoforgeError):
    """A refused request: its class says which kind, the message says why and what to do
    (``serve.web`` gives each kind its HTTP status)."""

    def __init__(self, detail: str) -> None:
        super().__init__(detail)
        self.detail = detail


class BadRequest(PlayError):
    """A request that is malformed for play."""


class Unauthorized(PlayError):
    """A missing or unknown key."""


class Forbidden(PlayError):
    """A request the server will not take from where it came (another site's page)."""


class NotFound(PlayError):
    """Something named that does not exist (or is not the caller's)."""


class Conflict(PlayError):
    """A request that clashes with the current state (a closed scorecard, a stale action)."""


class UnsupportedMedia(PlayError):
    """A body of a media type the route does not take."""


class RoundClosed(Conflict):
    """A change on a version whose round is over: 409 on every face (the ARC-AGI-3 face too,
    which otherwise answers a conflict with 400), with the reason."""


class Unprocessable(PlayError):
    """A well-formed request that play cannot carry out."""


class Limited(PlayError):
    """A limit; ``retry_after`` is how many seconds until trying again makes sense."""

    def __init__(self, detail: str, retry_after: int = 60) -> None:
        super().__init__(detail)
        self.retry_after = retry_after


class Unavailable(PlayError):
    """Play cannot answer now (a session another process keeps writing)."""


def hash_key(api_key: str) -> str:
    """The only form in which a key is kept."""
    return hashlib.sha256(api_key.encode("utf-8")).hexdigest()


def subject_of(address: str) -> str:
    """The only form in which a client address is kept (what its limits count)."""
    return hashlib.sha256(address.encode()).hexdigest()


def utc_day(now: float) -> str:
    return datetime.fromtimestamp(now, UTC).strftime("%Y-%m-%d")


def until_tomorrow(now: float) -> int:
    """Seconds to the next UTC midnight, when daily allowances start again."""
    return int(86400 - now % 86400) + 1


def _loopback(address: str) -> bool:
    try:
        return ipaddress.ip_network(address, strict=False).is_loopback
    except ValueError:
        return False


def iso(ts: float | None) -> str | None:
    return None if ts is None else datetime.fromtimestamp(ts, UTC).isoformat(timespec="seconds")


def with_intervals(result: dict) -> dict:
    """A stored close result whose Scores all carry ``success_interval`` (one stored before
    intervals existed gets it from its counts)."""
    return {**with_interval(result),
            "games": {g: with_interval(v) for g, v in result.get("games", {}).items()}}


def attached(card: ScorecardRecord) -> dict:
    """Where a scorecard was played from and what its client attached, as views show them."""
    meta = card.meta or {}
    return {"source": card.source, "tags": meta.get("tags") or [],
            "source_url": meta.get("source_url"), "opaque": meta.get("opaque")}


@dataclass(eq=False, kw_only=True)
class Session(Run):
    """A cached session: the episode core plus what ties it to its stored record.

    ``seq`` and ``writer`` are what the store holds after this cache's last write (or at
    load); ``own`` is this copy's writer token, new at every load.
    """

    record: SessionRecord
    name: str = ""
    entry: GameEntry
    last_active: float = 0.0
    seq: int = 0
    writer: str = ""
    own: str = ""

    @property
    def id(self) -> str:
        return self.record.id

    @property
    def version(self) -> ServedVersion:
        return self.entry.version

    def write(self, at: float, action: int, episode: int, rows: tuple[EpisodeRecord, ...],
              state: str | None) -> Write:
        """The conditional write of this copy's next change, and the copy moved past it."""
        w = Write(self.id, self.seq, self.writer, self.own, at, action, episode, rows, state)
        self.seq, self.writer, self.last_active = self.seq + 1, self.own, at
        return w

    def acted_since_level_change(self, episode: int) -> bool:
        """Whether an action was taken in ``episode`` since it started or was restarted."""
        actions = self.episodes[episode].actions
        return bool(actions) and actions[-1] != PLAYED[RESTART_LEVEL]


def record_of(run: EpisodeRun) -> EpisodeRecord:
    return EpisodeRecord(run.index, run.done, run.solved, run.deadlocked, run.steps,
                         "".join(run.actions), run.snapshot())


class ImageCache:
    """Base64 observations of recently seen states: agents revisit states often."""

    def __init__(self, size: int = 2048) -> None:
        self.size = size
        self._images: OrderedDict[tuple[ServedLevel, State], Picture] = OrderedDict()

    def get(self, served: ServedLevel, state: State, step: int) -> Picture:
        """The observation of ``state`` after ``step`` actions of ``served``'s episode."""
        if served.noisy:  # every step draws its own noise: no frame is ever seen twice
            return Picture(encode_image(served.frame(state, step)))
        key = (served, state)  # the level itself: several games have a level 0
        image = self._images.get(key)
        if image is None:
            image = Picture(encode_image(served.frame(state, step)))
            self._images[key] = image
            if len(self._images) > self.size:
                self._images.popitem(last=False)
        else:
            self._images.move_to_end(key)
        return image


class Arena:
    """Every operation of the protocol on the served games, over a ``Store``."""

    def __init__(self, games: Registry | ServedVersion | Iterable[ServedVersion], store: Store,
                 limits: Limits, clock: Any = time.time, rounds: RoundBook | None = None
                 ) -> None:
        if isinstance(games, ServedVersion):
            games = [games]
        self.games = games if isinstance(games, Registry) else Registry(games)
        self.store = store
        self.limits = limits
        self.clock = clock
        self.rounds = rounds  # the versions' rounds: none closes without a book
        self._sessions: OrderedDict[str, Session] = OrderedDict()
        self._keys: dict[str, KeyRecord] = {}
        self.images = ImageCache()
        self.ranking = RankingPrecision(store)

    @property
    def version(self) -> ServedVersion:
        """The first game's version (the game of clients that play one)."""
        return self.games.first.version

    @property
    def game(self) -> str:
        return self.games.first.name

    def spec(self) -> dict:
        """The public numbers of every served game: the first game's at the top level (the
        shape single-game clients read), each game's under ``game_specs``, and the limits."""
        specs = {g.name: {**g.spec(), **self.round_view(g.version.version)} for g in self.games}
        return {**specs[self.games.first.name], "games": self.games.names,
                "game_specs": specs, "limits": self.limits.public()}

    # -- rounds --------------------------------------------------------------------------------
    def round_view(self, version: str) -> dict:
        """``{"round": {...}}`` for a version with a round (when it closes, whether it is over,
        the final standings' sha256 once written), else nothing."""
        rnd = self.rounds.get(version) if self.rounds is not None else None
        if rnd is None:
            return {}
        return {"round": {"closes": round_time(rnd.closes), "over": rnd.is_over(self.clock()),
                          "closed_at": None if rnd.closed is None else round_time(rnd.closed),
                          "standings_sha256": rnd.standings_sha256}}

    def _round_open(self, version: str, also: str = "") -> None:
        """Refuse (409, with the reason) a change on a version whose round is over."""
        over = self.rounds.over(version, self.clock()) if self.rounds is not None else None
        if over is not None:
            raise RoundClosed(over.refusal() + also)

    # -- keys ----------------------------------------------------------------------------------
    async def create_key(self, name: str, address: str) -> str:
        """A new key bound to ``name``; the caller shows it once, the store keeps its hash."""
        api_key = KEY_PREFIX + secrets.token_urlsafe(24)
        record = KeyRecord(hash_key(api_key), name)
        limit = self.limits.keys_per_address_per_day
        try:
            await self.store.create_key(record, subject_of(address), utc_day(self.clock()), limit)
        except StoreConflict:
            raise Conflict(f"the name {name!r} is taken; choose another") from None
        except StoreLimit:
            hint = ""
            if _loopback(address):  # the operator testing on this machine
                hint = ("; testing locally? reuse a key (sokoforge play --key KEY) or start "
                        "the server with --keys-per-address 1000")
            raise Limited(f"this address created {limit} keys today, the daily limit; "
                          f"try again tomorrow (UTC){hint}", until_tomorrow(self.clock())
                          ) from None
        self._keys[record.key_hash] = record
        return api_key

    async def identify(self, api_key: str | None) -> KeyRecord:
        if not api_key:
            raise Unauthorized("missing API key: send it as the X-API-Key header "
                               "(create one with POST /api/keys)")
        if not api_key.isascii():
            # keys are ASCII; a header can carry any byte, which aiohttp decodes to surrogates
            raise Unauthorized("unknown API key: create one with POST /api/keys")
        digest = hash_key(api_key)
        record = self._keys.get(digest)
        if record is None:
            record = await self.store.find_key(digest)
            if record is None:
                raise Unauthorized("unknown API key: create one with POST /api/keys")
            self._keys[digest] = record
        return record

    async def owner_of(self, api_key: str | None) -> KeyRecord | None:
        """The key's record if it is a known key, else None (for routes open to everyone)."""
        try:
            return await self.identify(api_key)
        except Unauthorized:
            return None

    # -- scorecards ----------------------------------------------------------------------------
    async def open_scorecard(self, key: KeyRecord, source: str | None = None,
                             meta: dict | None = None) -> tuple[ScorecardRecord, int]:
        """A scorecard that may play every served game once; ``source`` says where it is played
        from (``browser`` for the play page), ``meta`` what the client attached (kept as given)."""
        if self.rounds is not None:
            over = [self.rounds.over(g.version.version, self.clock()) for g in self.games]
            closed = [r for r in over if r is not None]
            if len(closed) == len(over):
                raise RoundClosed("; ".join(r.refusal() for r in closed))
        now = self.clock()
        record = ScorecardRecord("sc-" + secrets.token_hex(12), key.key_hash, key.name,
                                 self.games.versions(), now, source=source, meta=meta or None)
        limit = self.limits.scorecards_per_key_per_day
        try:
            opened = await self.store.open_scorecard(record, utc_day(now), limit)
        except StoreLimit:
            raise Limited(f"this key opened {limit} scorecards today, the daily limit; "
                          "try again tomorrow (UTC)", until_tomorrow(now)) from None
        return record, opened

    async def _card(self, key: KeyRecord, scorecard_id: str) -> ScorecardRecord:
        """This key's stored scorecard; ``NotFound`` for an unknown id or another key's."""
        record = await self.store.scorecard(scorecard_id)
        if record is None or record.key_hash != key.key_hash:
            raise NotFound(f"no scorecard {scorecard_id!r} for this key")
        return record

    def _entry(self, game: str, version: str, what: str) -> GameEntry:
        """The served game ``game`` if it serves ``version``; else a ``Conflict`` that says
        what this server serves instead."""
        entry = self.games.get(game)
        if entry is None or entry.version.version != version:
            served = (f"it serves version {entry.version.version}" if entry is not None
                      else f"it serves {', '.join(self.games.names)}")
            raise Conflict(f"{what} plays version {version} of game {game!r}, which this "
                           f"server does not serve ({served}); open a new scorecard")
        return entry

    # -- sessions ------------------------------------------------------------------------------
    def _cutoff(self) -> float:
        return self.clock() - self.limits.idle_seconds

    def _expired(self, session_id: str) -> NotFound:
        return NotFound(f"session {session_id} expired after "
                        f"{self.limits.idle_seconds / 60:g} minutes idle")

    async def start(self, key: KeyRecord, scorecard_id: str, game: str, parallel: int,
                    address: str) -> Session:
        """Start ``game`` on a scorecard for a client at ``address``, within the sessions in
        flight allowed per key, per address and in total."""
        card = await self._card(key, scorecard_id)
        if card.closed is not None:
            raise Conflict(f"scorecard {scorecard_id} is closed; open a new one")
        if self.games.get(game) is None:
            raise NotFound(f"unknown game {game!r}; this server plays "
                           f"{', '.join(map(repr, self.games.names))}")
        if game not in card.games:
            raise Conflict(f"scorecard {scorecard_id} was opened before game {game!r} was "
                           "served here; open a new scorecard to play it")
        entry = self._entry(game, card.games[game], f"scorecard {scorecard_id}")
        self._round_open(entry.version.version)
        if not 1 <= parallel <= self.limits.max_parallel:
            raise Unprocessable(f"parallel must be an integer from 1 to {self.limits.max_parallel}")
        now = self.clock()
        own = secrets.token_hex(8)
        record = SessionRecord("gs-" + secrets.token_hex(12), scorecard_id, key.key_hash, game,
                               entry.version.version, parallel, IN_PROGRESS, now, now, 0, own)
        try:
            await self.store.create_session(record, entry.episodes, self.limits.sessions_per_key,
                                            self.limits.sessions_total, self._cutoff(),
                                            subject_of(address), self.limits.address_sessions())
        except StoreConflict as e:
            if str(e) == "closed":
                raise Conflict(f"scorecard {scorecard_id} is closed; open a new one") from None
            raise Conflict(f"game {game!r} was already started on scorecard {scorecard_id}; "
                           "a scorecard plays each game once (open a new scorecard)") from None
        except StoreLimit as e:
            if e.kind == "key":
                raise Limited(f"this key has {e.count} sessions in flight, the limit is "
                              f"{self.limits.sessions_per_key}; finish or close one "
                              "first") from None
            if e.kind == "address":
                raise Limited(f"this address has {e.count} sessions in flight, the limit is "
                              f"{self.limits.address_sessions()} whatever the keys; finish or "
                              "close one first") from None
            raise Limited(f"the server has {e.count} sessions in flight, its limit; "
                          "retry in a minute") from None
        run = new_run(entry.version.levels, entry.version.tiers, parallel)
        session = Session(run.episodes, run.tiers, parallel, run.state, run.tier, run.in_flight,
                          record=record, name=key.name, entry=entry, last_active=now, seq=0,
                          writer=own, own=own)
        self._show(session)
        self._cache(session)
        return session

    def _cache(self, session: Session) -> None:
        self._sessions[session.id] = session
        self._sessions.move_to_end(session.id)
        if len(self._sessions) > CACHED_SESSIONS:
            self._sessions.popitem(last=False)

    def _drop(self, session_id: str) -> None:
        self._sessions.pop(session_id, None)

    def _loaded(self, record: SessionRecord, name: str, rows: list[EpisodeRecord]) -> Session:
        """A session as the store holds it, from each episode's snapshot (nothing replayed)."""
        entry = self._entry(record.game, record.version, f"session {record.id}")
        levels = entry.version.levels
        episodes = [EpisodeRun.restored(levels[r.index], r.done, r.solved, r.deadlocked,
                                        r.steps, r.actions, r.snapshot) for r in rows]
        session = Session(episodes, entry.version.tiers, record.parallel, record.state,
                          record=record, name=name, entry=entry, last_active=record.last_active,
                          seq=record.seq, writer=record.writer, own=secrets.token_hex(8))
        session.refill()
        self._show(session)  # pictures only for the episodes in flight: nothing else shows
        return session

    async def _reload(self, key: KeyRecord, session_id: str) -> Session:
        """The session from the store, cached while it is in progress."""
        self._drop(session_id)
        found = await self.store.session(session_id)
        if found is None or found[0].key_hash != key.key_hash:
            raise NotFound(f"no session {session_id!r} for this key")
        record, rows = found
        if record.state == EXPIRED:
            raise self._expired(session_id)
        session = self._loaded(record, key.name, rows)
        if session.state == IN_PROGRESS:
            self._cache(session)
        return session

    async def _session(self, key: KeyRecord, session_id: str, check: bool = False) -> Session:
        """This key's session: the cached copy (compared with the store's count first when
        ``check``), else loaded; ``NotFound`` once it expired."""
        session = self._sessions.get(session_id)
        if session is None or session.record.key_hash != key.key_hash:
            session = await self._reload(key, session_id)
        elif check:
            head = await self.store.head(session_id)
            if head is None or head[:3] != (session.seq, session.writer, session.state):
                session = await self._reload(key, session_id)
        if session.state == IN_PROGRESS and session.last_active < self._cutoff():
            if await self.store.expire(self._cutoff(), session_id):
                self._drop(session_id)
                raise self._expired(session_id)
            session = await self._reload(key, session_id)  # another process kept it alive
        return session

    async def _card_closed(self, session: Session) -> bool:
        card = await self.store.scorecard(session.record.scorecard_id)
        return card is not None and card.closed is not None

    async def _over(self, session: Session) -> Conflict:
        """The refusal for a session that is not in progress: its scorecard closed, or every
        episode played."""
        if await self._card_closed(session):
            return Conflict(f"session {session.id} is over (its scorecard is closed)")
        return Conflict(f"session {session.id} is over: no episode is left to play")

    def picture(self, run: EpisodeRun) -> Picture:
        """The observation of an episode's current state (after its steps, for a noisy look)."""
        if run.game is None:
            return run.served.start
        return self.picture_at(run.served, run.state, run.steps)

    def picture_at(self, served: ServedLevel, state: State, steps: int) -> Picture:
        """The observation of ``state`` reached after ``steps`` steps of ``served``."""
        if state == served.level.start and (steps == 0 or not served.noisy):
            return served.start
        return self.images.get(served, state, steps)

    def _show(self, session: Session) -> None:
        for i in session.in_flight:
            run = session.episodes[i]
            if run.obs is None:
                run.obs = self.picture(run)

    async def _commit(self, session: Session, write: Write) -> bool:
        """Store ``write``; False when another process got there first (the copy is dropped).
        A store fault drops the copy too and answers 503: the change was not made."""
        try:
            await self.store.write(write)
        except StaleSession:
            self._drop(session.id)
            return False
        except Exception:
            self._drop(session.id)
            raise Unavailable("the action could not be stored and was not played; "
                              "retry it") from None
        return True

    async def act(self, key: KeyRecord, session_id: str, action: int, episode: int | None,
                  answer: Callable[[Session, Outcome], T]) -> T:
        """Play one action (0-3, or ``WAIT`` for the ARC face's no-ops; the faces' declarations
        bound it) of one episode in flight and persist it before returning ``answer``'s.

        ``answer`` renders the session as this action left it, before the write is awaited:
        another action on the session may be played meanwhile, and must not show in it."""
        session = await self._session(key, session_id)
        self._round_open(session.record.version)
        for _ in range(RETRIES):
            if session.state != IN_PROGRESS:
                raise await self._over(session)
            index = self._in_flight(session, episode)
            outcome = session.act(index, action)
            run = session.episodes[index]
            if outcome.moved or run.served.noisy:  # noise is drawn anew at every step
                run.obs = self.picture(run)
            self._show(session)
            ended = session.state if session.state != IN_PROGRESS else None
            write = session.write(self.clock(), action, index, (record_of(run),), ended)
            answered = answer(session, outcome)
            if await self._commit(session, write):
                if ended:
                    self._drop(session.id)
                return answered
            session = await self._reload(key, session_id)
        raise Unavailable("the session is being played elsewhere faster than it could be "
                          "stored here; retry the action")

    @staticmethod
    def _in_flight(session: Session, episode: int | None) -> int:
        if episode is None:
            if session.parallel > 1:
                raise BadRequest(f"{len(session.in_flight)} episodes are in flight "
                                 f"({session.in_flight}); name one in the episode field")
            return session.in_flight[0]
        if episode not in session.in_flight:
            raise Conflict(f"episode {episode} is not in flight; in flight: {session.in_flight}")
        return episode

    async def restart(self, key: KeyRecord, session_id: str, episode: int | None,
                      answer: Callable[[Session, str], T]) -> T:
        """RESET of a started game, as its ``restarts`` allows: the current level back to its
        start when an action was taken in it since it started (the steps used stay used),
        else, where the game allows it, every episode again. Returns ``answer`` of the session
        as the restart left it and of what was restarted (``level`` or ``game``)."""
        session = await self._session(key, session_id)
        self._round_open(session.record.version)
        for _ in range(RETRIES):
            mode = session.entry.restarts
            if mode == "none":
                raise Conflict(f"game {session.record.game!r} does not allow restarts (a "
                               "benchmark game gives no free retries)")
            if session.state == IN_PROGRESS:
                index = self._in_flight(session, episode)
                scope = ("level" if session.acted_since_level_change(index) or mode == "level"
                         else "game")
            elif (session.state == GAME_OVER and mode == "game"
                  and not await self._card_closed(session)):
                scope, index = "game", -1
            else:
                raise await self._over(session)
            if scope == "level":
                session.restart_level(index)
                run = session.episodes[index]
                run.obs = self.picture(run)
                write = session.write(self.clock(), RESTART_LEVEL, index, (record_of(run),),
                                      None)
            else:
                session.restart_game()
                self._show(session)
                write = session.write(self.clock(), RESTART_GAME, -1,
                                      tuple(record_of(r) for r in session.episodes),
                                      IN_PROGRESS)
            answered = answer(session, scope)
            if await self._commit(session, write):
                self._cache(session)
                return answered
            session = await self._reload(key, session_id)
        raise Unavailable("the session is being played elsewhere faster than it could be "
                          "stored here; retry")

    async def expire_idle(self) -> int:
        """Mark sessions idle longer than the limit as expired in the store (whichever process
        served them) and drop idle copies from this cache; returns how many expired."""
        cutoff = self._cutoff()
        expired = await self.store.expire(cutoff)
        for sid in [s.id for s in self._sessions.values() if s.last_active < cutoff]:
            self._drop(sid)
        return expired

    async def current(self, key: KeyRecord, session_id: str) -> Session:
        """A session of this key as the store has it, for a client that lost an answer."""
        session = await self._session(key, session_id, check=True)
        if session.state != IN_PROGRESS:
            card = await self.store.scorecard(session.record.scorecard_id)
            if card is not None and card.closed is not None:
                raise Conflict(f"session {session_id} is over (its scorecard is closed)")
        return session

    # -- views and closing ------------------------------------------------------------------------
    async def _stored_sessions(self, key: KeyRecord, card: ScorecardRecord) -> list[Session]:
        """The card's sessions as stored, idle ones marked expired on the way."""
        out = []
        for record, rows in await self.store.sessions(card.id):
            if record.state == IN_PROGRESS and record.last_active < self._cutoff():
                if await self.store.expire(self._cutoff(), record.id):
                    self._drop(record.id)
                    record = SessionRecord(**{**record.__dict__, "state": EXPIRED})
            out.append(self._loaded(record, key.name, rows))
        return out

    async def scorecard_view(self, key: KeyRecord, scorecard_id: str) -> dict:
        card = await self._card(key, scorecard_id)
        if card.closed is not None and card.result is not None:
            result = with_intervals(card.result)
            games = {g: {"session_id": result["session_ids"][g], "state": "GAME_OVER", **v}
                     for g, v in result["games"].items()}
            return self._card_view(card, games, result)
        started = {s.record.game: s for s in await self._stored_sessions(key, card)}
        games = {}
        for game, version in card.games.items():
            s = started.get(game)
            if s is not None:
                games[game] = self._progress(s)
            else:
                entry = self.games.get(game)
                if entry is not None and entry.version.version == version:
                    games[game] = {"session_id": None, "state": "NOT_STARTED",
                                   "episodes": entry.episodes, "finished": 0}
        return self._card_view(card, games, None)

    def _progress(self, s: Session) -> dict:
        live = score(s.episodes)
        playing = s.state == IN_PROGRESS  # an expired session keeps a stale in-flight list
        return {"session_id": s.id, "state": s.state, "parallel": s.parallel,
                "episodes": len(s.episodes), "finished": s.finished,
                "in_flight": list(s.in_flight) if playing else [],
                "tier": s.tier if playing and s.in_flight else None,
                "solved": live["solved"], "deadlocked": sum(e.deadlocked for e in s.episodes),
                "total_actions": live["total_actions"], "last_active": iso(s.last_active)}

    def _card_view(self, record: ScorecardRecord, games: dict, result: dict | None) -> dict:
        return {"scorecard_id": record.id, "name": record.name,
                "version": result["version"] if result else record.version,
                "opened_at": iso(record.opened), "closed": result is not None,
                "closed_at": iso(record.closed), "games": games,
                "score": None if result is None else {k: result[k] for k in SCORE_FIELDS},
                **attached(record)}

    async def close(self, key: KeyRecord, scorecard_id: str) -> dict:
        """Lock, score and post a scorecard; a second close returns the first result.

        The score is computed from the sessions as stored, and the close is stored only if
        none of them moved meanwhile (else it is computed again)."""
        for _ in range(RETRIES):
            card = await self._card(key, scorecard_id)
            if card.closed is not None and card.result is not None:
                return with_intervals(card.result)
            sessions = await self._stored_sessions(key, card)
            for version in {s.record.version for s in sessions} or {card.version}:
                self._round_open(version, "; this scorecard was not closed before it, so it "
                                          "is not ranked")
            for s in sessions:
                s.close()
            played: dict[str, tuple[str | None, str, list[EpisodeRun]]] = {
                s.record.game: (s.id, s.record.version, s.episodes) for s in sessions}
            if not played:  # nothing started: the first game, every episode unsolved
                game, version = next(iter(card.games.items()))
                entry = self._entry(game, version, f"scorecard {scorecard_id}")
                played[game] = (None, version, [EpisodeRun(lv) for lv in entry.version.levels])
                for run in played[game][2]:
                    run.finish(False)
            scores = {g: score(runs) for g, (_, _, runs) in played.items()}
            first = next(iter(played))
            result = {**scores[first], "scorecard_id": card.id, "name": card.name,
                      "version": played[first][1], "closed": True, "games": scores,
                      "session_ids": {g: v[0] for g, v in played.items()},
                      "versions": {g: v[1] for g, v in played.items()}}
            final = [Final(s.id, s.seq, tuple(record_of(r) for r in s.episodes))
                     for s in sessions]
            try:
                stored = await self.store.close_scorecard(card.id, self.clock(), result, final)
            except StaleSession:
                continue
            for s in sessions:
                self._drop(s.id)
            return with_intervals(stored)
        raise Unavailable("the scorecard's sessions are being played elsewhere; retry")

    def _outcomes(self, version: str, rows: list[EpisodeRecord],
                  with_actions: bool) -> list[dict]:
        """Each episode's outcome (never its level); its action string only if asked."""
        entry = self.games.by_version(version)
        levels = entry.version.levels if entry else None
        episodes = []
        for row in rows:
            item: dict[str, Any] = {"index": row.index, "finished": row.done,
                                    "solved": row.solved, "steps": row.steps,
                                    "optimal": levels[row.index].optimal_moves if levels else None,
                                    "deadlocked": row.deadlocked}
            if with_actions:
                item["actions"] = row.actions
            episodes.append(item)
        return episodes

    async def replay(self, session_id: str, viewer: KeyRecord | None) -> dict:
        found = await self.store.session(session_id)
        if found is None:
            raise NotFound(f"no session {session_id!r}")
        record, rows = found
        owner = viewer is not None and viewer.key_hash == record.key_hash
        card = await self.store.scorecard(record.scorecard_id)
        return {"session_id": record.id, "name": card.name if card else None,
                "game": record.game, "version": record.version, "state": record.state,
                "owner_view": owner, "episodes": self._outcomes(record.version, rows, owner)}

    async def scorecard_outcomes(self, scorecard_id: str) -> dict:
        """A scorecard as anyone may see it (its page): name, tags, Score and each game's
        per-episode outcomes, never a level or an action string."""
        card = await self.store.scorecard(scorecard_id)
        if card is None:
            raise NotFound(f"no scorecard {scorecard_id!r}")
        result = None if card.result is None else with_intervals(card.result)
        games = []
        for record, rows in await self.store.sessions(card.id):
            entry = self.games.by_version(record.version)
            expired = record.state == IN_PROGRESS and record.last_active < self._cutoff()
            games.append({"game": record.game, "version": record.version,
                          "session_id": record.id, "state": EXPIRED if expired else record.state,
                          "public": bool(entry and entry.public),
                          "score": (result or {}).get("games", {}).get(record.game),
                          "episodes": self._outcomes(record.version, rows, False)})
        return {"scorecard_id": card.id, "name": card.name, "opened_at": iso(card.opened),
                "closed": card.closed is not None, "closed_at": iso(card.closed),
                "games": games, **attached(card),
                "score": None if result is None else {k: result[k] for k in SCORE_FIELDS}}

    async def replay_frames(self, session_id: str, episode: int,
                            viewer: KeyRecord | None) -> dict:
        """The observations of one played episode, rendered from its stored actions: for a
        public game to anyone, for a hidden one only to the key that played it (else 404, as
        if there were nothing). Pictures are listed once; ``sequence`` indexes them per step."""
        found = await self.store.session(session_id)
        if found is None:
            raise NotFound(f"no session {session_id!r}")
        record, rows = found
        entry = self.games.by_version(record.version)
        owner = viewer is not None and viewer.key_hash == record.key_hash
        if entry is None or not (entry.public or owner):
            raise NotFound(f"no replay of session {session_id} for this key: a hidden game's "
                           "episodes are shown only to the key that played them")
        row = next((r for r in rows if r.index == episode), None)
        if row is None or not row.actions:
            raise NotFound(f"episode {episode} of session {session_id} was not played")
        served = entry.version.levels[row.index]
        return {"session_id": record.id, "game": record.game, "version": record.version,
                "episode": row.index, "actions": row.actions, "solved": row.solved,
                "steps": row.steps, "optimal": served.optimal_moves,
                "max_steps": served.max_steps, "deadlocked": row.deadlocked,
                **self._pictures(served, row.actions)}

    def solution_frames(self, game: str, episode: int) -> dict:
        """A public game's level played by its stored optimal solution, as a replay's
        pictures; a hidden game's levels are never shown (404, as if there were none)."""
        entry = self.games.get(game)
        if entry is None or not entry.public:
            raise NotFound(f"no public game {game!r}: only a public game's solutions are shown")
        if not 0 <= episode < entry.episodes:
            raise NotFound(f"game {game!r} has levels 0 to {entry.episodes - 1}")
        served = entry.version.levels[episode]
        if served.solution is None:
            raise NotFound(f"version {entry.version.version} stores no solutions")
        actions = served.solution.upper()
        return {"game": game, "version": entry.version.version, "episode": episode,
                "actions": actions, "steps": len(actions), "optimal": served.optimal_moves,
                "max_steps": served.max_steps, **self._pictures(served, actions)}

    def _pictures(self, served: ServedLevel, actions: str) -> dict:
        """The observations of playing ``actions`` from the start, each picture listed once
        (per state and step in a noisy look, which draws each anew) and ``sequence``
        indexing them per step, with the goal image."""
        pictures: dict[tuple[State, int], int] = {}
        sequence = [pictures.setdefault((s, n if served.noisy else 0), len(pictures))
                    for s, n in replay_states(served, actions)]
        return {"shape": [64, 64, 3], "encoding": "base64-raw", "goal": served.goal.b64,
                "pictures": [self.picture_at(served, s, n).b64 for s, n in pictures],
                "sequence": sequence}

    def line(self, game: str | None = None) -> dict:
        """The linked abilities of the served version's line (``sokoforge irt V --line``
        writes them): each name's ability on one scale with its interval, beside its raw
        success per version."""
        entry = self.games.get(game) if game else self.games.first
        if entry is None:
            raise NotFound(f"unknown game {game!r}; this server plays "
                           f"{', '.join(map(repr, self.games.names))}")
        served = entry.version
        fit = read_line(served.folder) if served.folder is not None else None
        if fit is None:
            raise NotFound(f"no linked fit of the line of {served.version}: run `sokoforge irt "
                           f"{served.version} --line --db STORE` where the datasets are")
        entries = [{"rank": rank, **agent} for rank, agent in enumerate(fit["agents"], 1)]
        return {"version": served.version, "game": entry.name,
                **{k: fit[k] for k in ("versions", "scales", "links", "notes", "model")},
                "entries": entries}

    async def leaderboard(self, version: str | None, limit: int = 100,
                          game: str | None = None) -> dict:
        """Each name's best result on one version: ``version``, else the served version of
        ``game``, else that of the first game; each with its success interval and whether a
        paired test over the levels tells it apart from the entry above."""
        if version is None:
            entry = self.games.get(game) if game else self.games.first
            if entry is None:
                raise NotFound(f"unknown game {game!r}; this server plays "
                               f"{', '.join(map(repr, self.games.names))}")
            version = entry.version.version
        standings = await self.store.leaderboard(version, limit)
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
        served = self.games.by_version(version)
        await self.ranking.annotate(entries, standings, None if served is None else
                                    [lv.tier for lv in served.version.levels])
        versions = sorted(set(await self.store.versions()) | set(self.games.versions().values()))
        return {"version": version, "game": served.name if served else None,
                **self.round_view(version),
                "served_version": self.version.version, "served": self.games.versions(),
                "versions": versions, "entries": entries, "precision": PRECISION}
