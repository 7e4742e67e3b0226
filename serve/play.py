"""The game behind every protocol face: keys, scorecards, sessions, episodes, tiers and scores.

Nothing here knows HTTP or a wire format. The in-memory sessions are authoritative for
play; each action is written to the store before the caller is answered, and a restart
rebuilds every open session by replaying its stored actions through the engine.
"""

from __future__ import annotations

import asyncio
import hashlib
import secrets
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from engine.levels import State
from engine.rules import WAIT, Game, StepResult
from serve.dataset import ServedLevel, ServedVersion, encode_image
from serve.framezip import Picture
from serve.limits import Limits
from serve.store import (
    ActionRecord,
    EpisodeRecord,
    KeyRecord,
    ScorecardRecord,
    SessionRecord,
    Store,
    StoreConflict,
    StoreLimit,
)

PLAYED = "UDLR."  # a stored action string's letter for each action, the wait included
IN_PROGRESS, GAME_OVER, EXPIRED = "IN_PROGRESS", "GAME_OVER", "EXPIRED"
KEY_PREFIX = "lsk-"
SCORE_FIELDS = ("episodes", "solved", "success_rate", "move_efficiency", "avg_steps_solved",
                "deadlock_rate", "total_actions")


class PlayError(Exception):
    """A refused request: ``status`` says which kind, the message says why and what to do."""

    status = 400

    def __init__(self, detail: str) -> None:
        super().__init__(detail)
        self.detail = detail


class BadRequest(PlayError):
    status = 400


class Unauthorized(PlayError):
    status = 401


class NotFound(PlayError):
    status = 404


class Conflict(PlayError):
    status = 409


class Unprocessable(PlayError):
    status = 422


class Limited(PlayError):
    """A limit; ``retry_after`` is how many seconds until trying again makes sense."""

    status = 429

    def __init__(self, detail: str, retry_after: int = 60) -> None:
        super().__init__(detail)
        self.retry_after = retry_after


class Unavailable(PlayError):
    status = 503


def hash_key(api_key: str) -> str:
    """The only form in which a key is kept."""
    return hashlib.sha256(api_key.encode("utf-8")).hexdigest()


def utc_day(now: float) -> str:
    return datetime.fromtimestamp(now, UTC).strftime("%Y-%m-%d")


def until_tomorrow(now: float) -> int:
    """Seconds to the next UTC midnight, when daily allowances start again."""
    return int(86400 - now % 86400) + 1


def iso(ts: float | None) -> str | None:
    return None if ts is None else datetime.fromtimestamp(ts, UTC).isoformat(timespec="seconds")


@dataclass
class EpisodeRun:
    """One episode of a session: its engine game once started, and its outcome."""

    served: ServedLevel
    game: Any = None
    done: bool = False
    solved: bool = False
    deadlocked: bool = False
    actions: list[str] = field(default_factory=list)
    obs: Picture | None = None

    @property
    def index(self) -> int:
        return self.served.index

    @property
    def steps(self) -> int:
        return len(self.actions)

    def begin(self) -> None:
        if self.game is None:
            self.game = Game(self.served.level, self.served.max_steps)
            self.obs = self.served.start

    def play(self, action: int) -> StepResult:
        """One action of the episode: a move 0-3, or ``WAIT``, which only uses up a step."""
        step = self.game.wait() if action == WAIT else self.game.act(action)
        self.actions.append(PLAYED[action])
        return step

    def finish(self, solved: bool) -> None:
        """End the episode; unsolved, it is deadlocked if its state can no longer be solved."""
        self.done = True
        self.solved = solved
        state = self.game.state if self.game is not None else self.served.level.start
        self.deadlocked = not solved and self.served.is_dead(state)

    def record(self) -> EpisodeRecord:
        return EpisodeRecord(self.index, self.done, self.solved, self.deadlocked, self.steps,
                             "".join(self.actions))


@dataclass(frozen=True)
class Outcome:
    """What one action did, for the answer to it."""

    episode: int
    action: int
    moved: bool
    pushed: bool
    solved: bool
    episode_done: bool


@dataclass
class Session:
    """The one session of a game on a scorecard: every episode in play order, tier by tier."""

    record: SessionRecord
    name: str
    version: ServedVersion
    episodes: list[EpisodeRun]
    state: str = IN_PROGRESS
    last_active: float = 0.0
    tier: int = 0
    in_flight: list[int] = field(default_factory=list)
    seq: int = 0  # actions played so far, all episodes together

    @property
    def id(self) -> str:
        return self.record.id

    @property
    def parallel(self) -> int:
        return self.record.parallel

    @property
    def finished(self) -> int:
        return sum(e.done for e in self.episodes)

    def refill(self) -> None:
        """Keep the first ``parallel`` unfinished episodes of the lowest unfinished tier in flight.

        Episodes start in index order, so this set is exactly the one that play reached;
        it depends only on which episodes are done, which makes a restart exact.
        """
        tiers = self.version.tiers
        while self.tier < len(tiers):
            lo, hi = tiers[self.tier]
            waiting = [i for i in range(lo, hi + 1) if not self.episodes[i].done]
            if waiting:
                self.in_flight = waiting[:self.parallel]
                for i in self.in_flight:
                    self.episodes[i].begin()
                return
            self.tier += 1
        self.in_flight = []
        if self.state == IN_PROGRESS:
            self.state = GAME_OVER

    def score(self) -> dict:
        return score(self.episodes)


def score(episodes: list[EpisodeRun]) -> dict:
    """The Score: unfinished episodes count as unsolved; efficiency is optimal/steps over solved."""
    n = len(episodes)
    solved = [e for e in episodes if e.solved]
    efficiency = (sum(e.served.optimal_moves / e.steps for e in solved) / len(solved)
                  if solved else 0.0)
    return {
        "episodes": n,
        "solved": len(solved),
        "success_rate": round(len(solved) / n, 4) if n else 0.0,
        "move_efficiency": round(efficiency, 4),
        "avg_steps_solved": round(sum(e.steps for e in solved) / len(solved), 2) if solved else 0.0,
        "deadlock_rate": round(sum(e.deadlocked for e in episodes) / n, 4) if n else 0.0,
        "total_actions": sum(e.steps for e in episodes),
    }


class ImageCache:
    """Base64 observations of recently seen states: agents revisit states often."""

    def __init__(self, size: int = 2048) -> None:
        self.size = size
        self._images: OrderedDict[tuple[int, State], Picture] = OrderedDict()

    def get(self, served: ServedLevel, state: State, step: int) -> Picture:
        """The observation of ``state`` after ``step`` actions of ``served``'s episode."""
        if served.noisy:  # every step draws its own noise: no frame is ever seen twice
            return Picture(encode_image(served.frame(state, step)))
        key = (served.index, state)
        image = self._images.get(key)
        if image is None:
            image = Picture(encode_image(served.frame(state, step)))
            self._images[key] = image
            if len(self._images) > self.size:
                self._images.popitem(last=False)
        else:
            self._images.move_to_end(key)
        return image


@dataclass
class Card:
    """An open scorecard and its sessions by game."""

    record: ScorecardRecord
    sessions: dict[str, Session] = field(default_factory=dict)
    closing: asyncio.Future | None = None


class Arena:
    """Every operation of the protocol on one served version, over a ``Store``."""

    def __init__(self, version: ServedVersion, store: Store, limits: Limits,
                 clock: Any = time.time) -> None:
        self.version = version
        self.store = store
        self.limits = limits
        self.clock = clock
        self._cards: dict[str, Card] = {}
        self._sessions: dict[str, Session] = {}
        self._keys: dict[str, KeyRecord] = {}
        self.images = ImageCache()

    @property
    def game(self) -> str:
        return self.version.game

    # -- start-up ------------------------------------------------------------------------------
    async def restore(self) -> int:
        """Rebuild every open scorecard of the served version from the store; returns how many
        sessions came back."""
        restored = 0
        for record in await self.store.open_scorecards():
            if record.version != self.version.version:
                continue
            card = Card(record)
            self._cards[record.id] = card
            for srec, episodes in await self.store.sessions(record.id):
                session = self._replayed(srec, record.name, episodes)
                card.sessions[srec.game] = session
                self._sessions[srec.id] = session
                restored += 1
        return restored

    def _replayed(self, record: SessionRecord, name: str,
                  rows: list[EpisodeRecord]) -> Session:
        episodes = [EpisodeRun(lv) for lv in self.version.levels]
        for row in rows:
            run = episodes[row.index]
            if row.actions:
                run.begin()
                for letter in row.actions:
                    run.play(PLAYED.index(letter))
                run.obs = self.images.get(run.served, run.game.state, run.steps)
            if row.done:
                run.done, run.solved, run.deadlocked = True, row.solved, row.deadlocked
        session = Session(record, name, self.version, episodes, state=record.state,
                          last_active=record.last_active, seq=sum(e.steps for e in episodes))
        session.refill()
        return session

    # -- keys ----------------------------------------------------------------------------------
    async def create_key(self, name: str, address: str) -> str:
        """A new key bound to ``name``; the caller shows it once, the store keeps its hash."""
        api_key = KEY_PREFIX + secrets.token_urlsafe(24)
        record = KeyRecord(hash_key(api_key), name)
        subject = hashlib.sha256(address.encode()).hexdigest()
        limit = self.limits.keys_per_address_per_day
        try:
            await self.store.create_key(record, subject, utc_day(self.clock()), limit)
        except StoreConflict:
            raise Conflict(f"the name {name!r} is taken; choose another") from None
        except StoreLimit:
            raise Limited(f"this address created {limit} keys today, the daily limit; "
                          "try again tomorrow (UTC)", until_tomorrow(self.clock())) from None
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
    async def open_scorecard(self, key: KeyRecord) -> tuple[Card, int]:
        now = self.clock()
        record = ScorecardRecord("sc-" + secrets.token_hex(12), key.key_hash, key.name,
                                 self.version.version, self.game, now)
        limit = self.limits.scorecards_per_key_per_day
        try:
            opened = await self.store.open_scorecard(record, utc_day(now), limit)
        except StoreLimit:
            raise Limited(f"this key opened {limit} scorecards today, the daily limit; "
                          "try again tomorrow (UTC)", until_tomorrow(now)) from None
        card = Card(record)
        self._cards[record.id] = card
        return card, opened

    async def _stored_card(self, key: KeyRecord, scorecard_id: str) -> ScorecardRecord:
        """The stored scorecard of this key that is not open here: closed, or of another
        version; ``NotFound`` for an unknown id or another key's."""
        record = await self.store.scorecard(scorecard_id)
        if record is None or record.key_hash != key.key_hash:
            raise NotFound(f"no scorecard {scorecard_id!r} for this key")
        return record

    # -- sessions ------------------------------------------------------------------------------
    def _in_flight(self, session: Session, now: float) -> bool:
        return (session.state == IN_PROGRESS
                and now - session.last_active <= self.limits.idle_seconds)

    async def start(self, key: KeyRecord, scorecard_id: str, game: str,
                    parallel: int) -> Session:
        card = self._cards.get(scorecard_id)
        if card is None or card.record.key_hash != key.key_hash:
            record = await self._stored_card(key, scorecard_id)
            if record.closed is None:
                raise Conflict(f"scorecard {scorecard_id} belongs to version {record.version}, "
                               f"not the served {self.version.version}; open a new one")
            raise Conflict(f"scorecard {scorecard_id} is closed; open a new one")
        if card.closing is not None:
            raise Conflict(f"scorecard {scorecard_id} is closed; open a new one")
        if game != self.game:
            raise NotFound(f"unknown game {game!r}; this server plays {self.game!r}")
        if game in card.sessions:
            raise Conflict(f"game {game!r} was already started on scorecard {scorecard_id}; "
                           "a scorecard plays each game once (open a new scorecard)")
        if not 1 <= parallel <= self.limits.max_parallel:
            raise Unprocessable(f"parallel must be an integer from 1 to {self.limits.max_parallel}")
        now = self.clock()
        live = [s for s in self._sessions.values() if self._in_flight(s, now)]
        mine = sum(s.record.key_hash == key.key_hash for s in live)
        if mine >= self.limits.sessions_per_key:
            raise Limited(f"this key has {mine} sessions in flight, the limit is "
                          f"{self.limits.sessions_per_key}; finish or close one first")
        if len(live) >= self.limits.sessions_total:
            raise Limited(f"the server has {len(live)} sessions in flight, its limit; "
                          "retry in a minute")
        record = SessionRecord("gs-" + secrets.token_hex(12), scorecard_id, key.key_hash, game,
                               self.version.version, parallel, IN_PROGRESS, now, now)
        session = Session(record, key.name, self.version,
                          [EpisodeRun(lv) for lv in self.version.levels], last_active=now)
        session.refill()
        # reserve before waiting on the store, so concurrent starts see this one
        card.sessions[game] = session
        self._sessions[record.id] = session
        try:
            await self.store.create_session(record, self.version.episodes)
        except BaseException:
            card.sessions.pop(game, None)
            self._sessions.pop(record.id, None)
            raise
        return session

    async def _live_session(self, key: KeyRecord, session_id: str) -> Session:
        session = self._sessions.get(session_id)
        if session is None or session.record.key_hash != key.key_hash:
            stored = await self.store.session(session_id)
            if stored is not None and stored[0].key_hash == key.key_hash:
                state = stored[0].state
                if state == EXPIRED:
                    raise NotFound(f"session {session_id} expired after "
                                   f"{self.limits.idle_seconds / 60:g} minutes idle")
                raise Conflict(f"session {session_id} is over (its scorecard is closed)")
            raise NotFound(f"no session {session_id!r} for this key")
        if session.state == IN_PROGRESS and not self._in_flight(session, self.clock()):
            await self._expire(session)
        if session.state == EXPIRED:
            raise NotFound(f"session {session_id} expired after "
                           f"{self.limits.idle_seconds / 60:g} minutes idle")
        return session

    async def _expire(self, session: Session) -> None:
        session.state = EXPIRED
        await self.store.set_session_state(session.id, EXPIRED)

    async def expire_idle(self) -> int:
        """Mark sessions idle longer than the limit as expired; returns how many."""
        now = self.clock()
        idle = [s for s in self._sessions.values()
                if s.state == IN_PROGRESS and not self._in_flight(s, now)]
        for s in idle:
            await self._expire(s)
        return len(idle)

    async def act(self, key: KeyRecord, session_id: str, action: int,
                  episode: int | None) -> tuple[Session, Outcome]:
        """Play one action (0-3, or ``WAIT`` for the ARC face's no-ops; the faces' declarations
        bound it) of one episode in flight and persist it before returning."""
        session = await self._live_session(key, session_id)
        if session.state != IN_PROGRESS:
            raise Conflict(f"session {session_id} is over: no episode is left to play")
        if episode is None:
            if session.parallel > 1:
                raise BadRequest(f"{len(session.in_flight)} episodes are in flight "
                                 f"({session.in_flight}); name one in the episode field")
            episode = session.in_flight[0]
        elif episode not in session.in_flight:
            raise Conflict(f"episode {episode} is not in flight; in flight: {session.in_flight}")
        run = session.episodes[episode]
        step = run.play(action)
        if step.moved or run.served.noisy:
            run.obs = self.images.get(run.served, run.game.state, run.steps)
        if step.done:
            run.finish(step.solved)
            session.refill()
        now = self.clock()
        session.last_active = now
        session.seq += 1
        try:
            await self.store.record_action(ActionRecord(
                session.id, session.seq, now, action, run.record(),
                session.state if session.state != IN_PROGRESS else None))
        except Exception:
            await self._reload(session)
            raise Unavailable("the action could not be stored and was not played; "
                              "retry it") from None
        return session, Outcome(episode, action, bool(step.moved), bool(step.pushed),
                                bool(step.solved), bool(step.done))

    async def _reload(self, session: Session) -> None:
        """Put the stored session back in place of one the store did not take an action of."""
        try:
            found = await self.store.session(session.id)
        except Exception:
            return
        if found is not None:
            fresh = self._replayed(found[0], session.name, found[1])
            self._sessions[session.id] = fresh
            card = self._cards.get(session.record.scorecard_id)
            if card is not None:
                card.sessions[session.record.game] = fresh

    async def current(self, key: KeyRecord, session_id: str) -> Session:
        """A session of this key as it stands, for a client that lost an answer."""
        return await self._live_session(key, session_id)

    # -- views and closing ------------------------------------------------------------------------
    async def scorecard_view(self, key: KeyRecord, scorecard_id: str) -> dict:
        card = self._cards.get(scorecard_id)
        if card is not None and card.record.key_hash == key.key_hash and card.closing is None:
            games = {}
            for game in (self.game,):
                s = card.sessions.get(game)
                if s is not None and s.state == IN_PROGRESS and not self._in_flight(
                        s, self.clock()):
                    await self._expire(s)  # idle too long, and the sweep has not run yet
                games[game] = ({"session_id": None, "state": "NOT_STARTED",
                                "episodes": self.version.episodes, "finished": 0}
                               if s is None else self._progress(s))
            return self._card_view(card.record, games, None)
        if card is not None and card.record.key_hash == key.key_hash and card.closing:
            await asyncio.shield(card.closing)  # being closed right now: show the result
        record = await self._stored_card(key, scorecard_id)
        if record.closed is None:
            raise Conflict(f"scorecard {scorecard_id} belongs to version {record.version}, "
                           f"not the served {self.version.version}")
        result = record.result
        games = {g: {"session_id": result["session_ids"][g], "state": "GAME_OVER", **v}
                 for g, v in result["games"].items()}
        return self._card_view(record, games, result)

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
        return {"scorecard_id": record.id, "name": record.name, "version": record.version,
                "opened_at": iso(record.opened), "closed": result is not None,
                "closed_at": iso(record.closed), "games": games,
                "score": None if result is None else {k: result[k] for k in SCORE_FIELDS}}

    async def close(self, key: KeyRecord, scorecard_id: str) -> dict:
        """Lock, score and post a scorecard; a second close returns the first result."""
        card = self._cards.get(scorecard_id)
        if card is None or card.record.key_hash != key.key_hash:
            record = await self._stored_card(key, scorecard_id)
            if record.result is None:
                raise Conflict(f"scorecard {scorecard_id} belongs to version {record.version}, "
                               f"not the served {self.version.version}")
            return record.result
        if card.closing is not None:
            return await asyncio.shield(card.closing)
        card.closing = asyncio.get_running_loop().create_future()
        try:
            result = await self._close(card)
        except BaseException as e:
            card.closing.set_exception(e)
            card.closing.exception()  # retrieved: later closes re-raise it themselves
            card.closing = None
            raise
        card.closing.set_result(result)
        return result

    async def _close(self, card: Card) -> dict:
        final: dict[str, list[EpisodeRecord]] = {}
        sessions: dict[str, dict] = {}
        for game in (self.game,):
            session = card.sessions.get(game)
            if session is None:
                episodes = [EpisodeRun(lv) for lv in self.version.levels]
            else:
                episodes = session.episodes
                session.state = GAME_OVER
                session.in_flight = []
            for run in episodes:
                if not run.done:
                    run.finish(False)
            if session is not None:
                final[session.id] = [run.record() for run in episodes]
            sessions[game] = {"session_id": session.id if session else None,
                              "score": score(episodes)}
        main = sessions[self.game]["score"]
        result = {**main, "scorecard_id": card.record.id, "name": card.record.name,
                  "version": card.record.version, "closed": True,
                  "games": {g: v["score"] for g, v in sessions.items()},
                  "session_ids": {g: v["session_id"] for g, v in sessions.items()}}
        stored = await self.store.close_scorecard(card.record.id, self.clock(), result, final)
        self._cards.pop(card.record.id, None)
        for session in card.sessions.values():
            self._sessions.pop(session.id, None)
        return stored

    async def replay(self, session_id: str, viewer: KeyRecord | None) -> dict:
        found = await self.store.session(session_id)
        if found is None:
            raise NotFound(f"no session {session_id!r}")
        record, rows = found
        owner = viewer is not None and viewer.key_hash == record.key_hash
        card = await self.store.scorecard(record.scorecard_id)
        levels = self.version.levels if record.version == self.version.version else None
        episodes = []
        for row in rows:
            item: dict[str, Any] = {"index": row.index, "finished": row.done,
                                    "solved": row.solved, "steps": row.steps,
                                    "optimal": levels[row.index].optimal_moves if levels else None,
                                    "deadlocked": row.deadlocked}
            if owner:
                item["actions"] = row.actions
            episodes.append(item)
        return {"session_id": record.id, "name": card.name if card else None,
                "game": record.game, "version": record.version, "state": record.state,
                "owner_view": owner, "episodes": episodes}

    async def leaderboard(self, version: str | None, limit: int = 100) -> dict:
        version = version or self.version.version
        standings = await self.store.leaderboard(version, limit)
        entries = []
        for rank, s in enumerate(standings, 1):
            r = s.result
            entries.append({"rank": rank, "name": s.name, "success_rate": r["success_rate"],
                            "move_efficiency": r["move_efficiency"],
                            "deadlock_rate": r["deadlock_rate"], "solved": r["solved"],
                            "episodes": r["episodes"], "avg_steps_solved": r["avg_steps_solved"],
                            "total_actions": r["total_actions"], "scorecard_id": s.scorecard_id,
                            "session_id": s.session_id, "submitted_at": iso(s.closed)})
        versions = sorted(set(await self.store.versions()) | {self.version.version})
        return {"version": version, "served_version": self.version.version,
                "versions": versions, "entries": entries}
