"""Sessions: started on a scorecard, played action by action and restarted, every change a
conditional write to the store.

A change may carry the client's number for it, its ``step``: the session's stored changes
after it (the store's ``seq``). Only a step one past the stored ones is played; a step already
stored is answered as it was first answered, replayed from the stored steps, and changes
nothing; one further ahead is refused. So a client that lost an answer sends the same request
again.

When another process (a worker, or another server on a shared store) played the session
meanwhile, the write is refused, the session is reloaded from its stored snapshot and the
action played on it, and the answer is the one a process that served the session all along
would give.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from serve.arena.cache import RETRIES, Session, SessionCache, entry_for, record_of
from serve.arena.errors import (
    BadRequest,
    Conflict,
    Limited,
    NotFound,
    PlayError,
    StepAhead,
    Unavailable,
    Unprocessable,
)
from serve.arena.rounds import Rounds
from serve.games.episode import (
    EXPIRED,
    GAME_OVER,
    IN_PROGRESS,
    RESTART_GAME,
    RESTART_LEVEL,
    Outcome,
)
from serve.limits import subject_of
from serve.stores import (
    EpisodeRecord,
    KeyRecord,
    ScorecardRecord,
    SessionRecord,
    StaleSession,
    StoreConflict,
    StoreLimit,
    StoreUnavailable,
    Write,
)

__all__ = ["Sessions"]

T = TypeVar("T")
ALL_STEPS = 1 << 62  # ``Store.steps``'s bound for every stored step of a session


@dataclass(frozen=True)
class _Change:
    """One action as a request asks for it: numbered by the session's ``step`` or its
    episode's ``episode_step`` (or neither), and when the request arrived."""

    action: int
    episode: int | None
    step: int | None
    episode_step: int | None
    arrived: float


class _Answer(Exception):  # noqa: N818 - not an error: a change that is answered otherwise
    """A change not to play on this copy of its session: answered otherwise."""

    def __init__(self, session: Session) -> None:
        super().__init__(session.id)
        self.session = session


class _Stored(_Answer):
    """A numbered change already stored: answered as it first was."""

    def __init__(self, session: Session, step: int | None, episode_step: int | None = None):
        super().__init__(session)
        self.step, self.episode_step = step, episode_step


class _Over(_Answer):
    """A change of a session no longer in progress: refused, saying why."""


class Sessions:
    """Starting, playing and restarting the sessions of the served games, over ``cache`` (and
    its games, store, limits and clock)."""

    def __init__(self, cache: SessionCache, rounds: Rounds) -> None:
        self.cache, self.rounds = cache, rounds
        self.games, self.store, self.limits, self.clock = (cache.games, cache.store,
                                                           cache.limits, cache.clock)

    async def start(self, key: KeyRecord, card: ScorecardRecord, game: str, parallel: int,
                    address: str) -> Session:
        """Start ``game`` on ``key``'s scorecard ``card`` for a client at ``address``, within the
        sessions in flight allowed per key, per address and in total."""
        scorecard_id = card.id
        if card.closed is not None:
            raise Conflict(f"scorecard {scorecard_id} is closed; open a new one")
        if self.games.get(game) is None:
            raise NotFound(f"unknown game {game!r}; this server plays "
                           f"{', '.join(map(repr, self.games.names))}")
        if game not in card.games:
            raise Conflict(f"scorecard {scorecard_id} was opened before game {game!r} was "
                           "served here; open a new scorecard to play it")
        entry = entry_for(self.games, game, card.games[game], f"scorecard {scorecard_id}")
        self.rounds.require_open(entry.version.version)
        if not 1 <= parallel <= self.limits.max_parallel:
            raise Unprocessable(f"parallel must be an integer from 1 to {self.limits.max_parallel}")
        now = self.clock()
        own = secrets.token_hex(8)
        record = SessionRecord("gs-" + secrets.token_hex(12), scorecard_id, key.key_hash, game,
                               entry.version.version, parallel, IN_PROGRESS, now, now, 0, own)
        cap = None
        if entry.version.pool is not None:  # every block passes over the levels shown too often
            cap = await self.cache.exposures.read(entry.version.version,
                                                  len(entry.version.levels))
        run = entry.new_run(parallel, cap=cap)
        # each episode's level: an adaptive game's first block chosen now, the rest later
        levels: list[int | None] = [e.served.index for e in run.episodes]
        levels += [None] * (run.length - len(levels))
        try:
            await self.store.create_session(record, levels, self.limits.sessions_per_key,
                                            self.limits.sessions_total, self.cache.cutoff(),
                                            address=subject_of(address),
                                            per_address=self.limits.address_sessions())
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
        if cap is not None:
            cap.started()
        session = Session(run.episodes, run.tiers, parallel, run.state, run.tier, run.in_flight,
                          run.chooser, record=record, name=key.name, entry=entry,
                          last_active=now, seq=0, writer=own, own=own)
        self.cache.show(session)
        self.cache.keep(session)
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

    async def _commit(self, session: Session, write: Write) -> bool:
        """Store ``write``; False when another process got there first (the copy is dropped).
        A store fault drops the copy too and raises ``Unavailable``: the change was not made."""
        try:
            await self.store.write(write)
        except StaleSession:
            self.cache.drop(session.id)
            return False
        except Exception as e:
            self.cache.drop(session.id)
            if isinstance(e, StoreUnavailable):  # it says what to do
                raise Unavailable(f"the action could not be stored and was not played: "
                                  f"{e}") from None
            raise Unavailable("the action could not be stored and was not played; "
                              "retry it") from None
        return True

    # -- numbered steps --------------------------------------------------------------------------
    @staticmethod
    def _changes(session: Session, episode: int | None) -> int:
        """How many changes episode ``episode`` holds since it began (0 for no such episode)."""
        if episode is None or not 0 <= episode < len(session.episodes):
            return 0
        return len(session.episodes[episode].actions)

    def _ahead(self, session: Session, step: int | None, episode: int | None,
               episode_step: int | None) -> StepAhead | None:
        """The refusal of a numbered change past the next one of ``session``, else None."""
        if step is not None and step > session.seq + 1:
            return StepAhead(f"step {step} skips ahead: session {session.id} has stored "
                             f"{session.seq} steps, so the next is step {session.seq + 1} "
                             "(GET the session for its current frame)")
        changes = self._changes(session, episode)
        if episode_step is not None and episode_step > changes + 1:
            return StepAhead(f"episode_step {episode_step} skips ahead: episode {episode} of "
                             f"session {session.id} has stored {changes} changes, so the next "
                             f"is {changes + 1} (GET the session for its current frame)")
        return None

    async def _numbered(self, key: KeyRecord, session: Session, step: int | None,
                        episode: int | None = None, episode_step: int | None = None) -> Session:
        """``session`` as current as a numbered change needs: loaded again when the change is
        ahead of this copy (another process may have stored the changes between),
        ``StepAhead`` when it is ahead of the store too."""
        if self._ahead(session, step, episode, episode_step):
            session = await self.cache.reload(key, session.id)
            ahead = self._ahead(session, step, episode, episode_step)
            if ahead:
                raise ahead
        return session

    async def _stored_step(self, session: Session,
                           step: int) -> tuple[Session, Outcome | None, int, int]:
        """The session as its stored step ``step`` left it, replayed from the stored steps (its
        copy is not cached), that step's outcome (None for a restart), episode and action."""
        steps = await self.store.steps(session.id, step)
        if len(steps) < step:  # played here a moment ago; its write is not stored yet
            raise Unavailable(f"step {step} of session {session.id} is still being stored; "
                              "retry it")
        # on the levels recorded (an adaptive game's replay chooses none anew)
        run = session.entry.new_run(session.parallel, [e.served.index for e in session.episodes],
                                    self.cache.exposures.latest(session.version.version))
        outcome = run.replay(steps)
        replayed = Session(run.episodes, run.tiers, run.parallel, run.state, run.tier,
                           run.in_flight, run.chooser, record=session.record, name=session.name,
                           entry=session.entry, last_active=session.last_active, seq=step)
        self.cache.show(replayed)
        return replayed, outcome, *steps[-1]

    async def _step_of(self, session: Session, episode: int, episode_step: int) -> int:
        """The session's step that stored change ``episode_step`` of ``episode`` (counted since
        the episode began: a game restart begins every episode again)."""
        count, found = 0, None
        for seq, (stored_episode, action) in enumerate(
                await self.store.steps(session.id, ALL_STEPS), 1):
            if action == RESTART_GAME:
                count, found = 0, None
            elif stored_episode == episode:
                count += 1
                if count == episode_step:
                    found = seq
        if found is None:  # played here a moment ago; its write is not stored yet
            raise Unavailable(f"change {episode_step} of episode {episode} of session "
                              f"{session.id} is still being stored; retry it")
        return found

    @staticmethod
    def _other_step(step: int, episode: int, action: int, session: Session) -> Conflict:
        """The refusal of a step number already stored for a different change."""
        played = ("a game restart" if action == RESTART_GAME else
                  f"{'a level restart' if action == RESTART_LEVEL else f'action {action}'} "
                  f"in episode {episode}")
        return Conflict(f"step {step} of session {session.id} was already played, as "
                        f"{played}; number a new change {session.seq + 1}")

    # -- play ------------------------------------------------------------------------------------
    async def act(self, key: KeyRecord, session_id: str, action: int, episode: int | None,
                  answer: Callable[[Session, Outcome], T], step: int | None = None, *,
                  episode_step: int | None = None) -> T:
        """Play one action (0-3, or ``WAIT`` for the ARC face's no-ops; the faces' declarations
        bound it) of one episode in flight and persist it before returning ``answer``'s; as
        numbered ``step`` (of the session) or ``episode_step`` (of ``episode``), only if it
        is the next (a stored one is answered again).

        ``answer`` renders the session as this action left it, before the write is awaited:
        another action on the session may be played meanwhile, and must not show in it. When
        another process wrote the session since this one's copy, the action is played again
        on the stored session inside the store's transaction, which serialises it with the
        other processes' (never a refusal: a client's own concurrency is not an error)."""
        if episode_step is not None and (episode is None or step is not None):
            raise BadRequest("episode_step numbers a change within the episode it comes "
                                "with: send it with episode, and without step")
        arrived = self.clock()  # stored with the action, for a review of its timing
        session = await self.cache.session(key, session_id)
        session = await self._numbered(key, session, step, episode, episode_step)
        change = _Change(action, episode, step, episode_step, arrived)
        try:
            try:
                outcome, write = self._play(session, change)
            except (Conflict, _Over):  # said of this copy, which may be behind the store
                write = None
            if write is not None:
                self._draw(session, outcome)
                answered = answer(session, outcome)
                if await self._commit(session, write):
                    if write.session_state is not None:
                        self.cache.drop(session.id)
                    return answered
            session, outcome = await self._play_stored(key, session_id, change)
            self._draw(session, outcome)
            answered = answer(session, outcome)
            self.cache.keep_newer(session)
            return answered
        except _Stored as stored:
            return await self._answer_stored(stored, change, answer)
        except _Over as over:
            raise await self._over(over.session) from None

    def _play(self, session: Session, change: _Change) -> tuple[Outcome, Write]:
        """Play ``change`` on ``session`` (drawing no picture) and give its write; ``_Stored``
        for a numbered change already stored, ``_Over`` for a session not in progress."""
        if change.step is not None and change.step <= session.seq:
            raise _Stored(session, change.step)
        if change.episode_step is not None and change.episode is not None and (
                change.episode_step <= self._changes(session, change.episode)):
            raise _Stored(session, None, change.episode_step)
        ahead = self._ahead(session, change.step, change.episode, change.episode_step)
        if ahead:
            raise ahead
        self.rounds.require_open(session.record.version)
        if session.state != IN_PROGRESS:
            raise _Over(session)
        index = self._in_flight(session, change.episode)
        chosen = len(session.episodes)
        outcome = session.act(index, change.action)
        ended = session.state if session.state != IN_PROGRESS else None
        # the episode played, and the block an adaptive game chose as it ended the one before:
        # the choice is stored by this write, or discarded with it
        rows = (record_of(session.episodes[index]),
                *map(record_of, session.episodes[chosen:]))
        write = session.write(self.clock(), change.action, index, rows, ended, change.arrived)
        return outcome, write

    def _draw(self, session: Session, outcome: Outcome) -> None:
        """The pictures an action's answer shows: its episode's new state (noise is drawn
        anew at every step), and the episodes that came into flight."""
        run = session.episodes[outcome.episode]
        if outcome.moved or run.served.noisy:
            run.obs = self.cache.images.picture(run)
        self.cache.show(session)

    async def _play_stored(self, key: KeyRecord, session_id: str,
                           change: _Change) -> tuple[Session, Outcome]:
        """``change`` played on the session as stored, inside the store's transaction that
        holds it (``Store.update_session``): the session as it left it, and its outcome."""
        def play(record: SessionRecord,
                 rows: list[EpisodeRecord]) -> tuple[Write, tuple[Session, Outcome]]:
            if record.key_hash != key.key_hash:
                raise NotFound(f"no session {session_id!r} for this key")
            if record.state == EXPIRED:
                raise self.cache.expired(session_id)
            session = self.cache.restored(record, key.name, rows)
            outcome, write = self._play(session, change)
            return write, (session, outcome)

        try:
            played = await self.store.update_session(session_id, play)
        except (PlayError, _Answer):
            raise
        except StoreUnavailable as e:  # it says what to do
            raise Unavailable(f"the action could not be stored and was not played: "
                              f"{e}") from None
        except Exception:
            raise Unavailable("the action could not be stored and was not played; "
                              "retry it") from None
        if played is None:
            raise NotFound(f"no session {session_id!r} for this key")
        return played

    async def _answer_stored(self, stored: _Stored, change: _Change,
                             answer: Callable[[Session, Outcome], T]) -> T:
        """The answer a numbered change already stored first had, replayed from the stored
        steps; a 409 when that step stored another change."""
        session = stored.session
        step = stored.step if stored.step is not None else await self._step_of(
            session, change.episode or 0, stored.episode_step or 0)
        replayed, outcome, stored_episode, stored_action = await self._stored_step(session, step)
        if (outcome is None or stored_action != change.action
                or change.episode is not None and stored_episode != change.episode):
            raise self._other_step(step, stored_episode, stored_action, session)
        return answer(replayed, outcome)

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
                      answer: Callable[[Session, str], T], step: int | None = None) -> T:
        """RESET of a started game, as its ``restarts`` allows: the current level back to its
        start when an action was taken in it since it started (the steps used stay used),
        else, where the game allows it, every episode again. Returns ``answer`` of the session
        as the restart left it and of what was restarted (``level`` or ``game``); numbered
        ``step``, as ``act``."""
        arrived = self.clock()
        session = await self.cache.session(key, session_id)
        for _ in range(RETRIES):
            if step is not None:
                session = await self._numbered(key, session, step)
                if step <= session.seq:
                    replayed, _, stored_episode, stored = await self._stored_step(session, step)
                    if stored not in (RESTART_LEVEL, RESTART_GAME) or (
                            stored == RESTART_LEVEL and episode not in (None, stored_episode)):
                        raise self._other_step(step, stored_episode, stored, session)
                    return answer(replayed, "level" if stored == RESTART_LEVEL else "game")
            self.rounds.require_open(session.record.version)
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
                run.obs = self.cache.images.picture(run)
                write = session.write(self.clock(), RESTART_LEVEL, index, (record_of(run),),
                                      None, arrived)
            else:
                session.restart_game()
                self.cache.show(session)
                write = session.write(self.clock(), RESTART_GAME, -1,
                                      tuple(record_of(r) for r in session.episodes),
                                      IN_PROGRESS, arrived)
            answered = answer(session, scope)
            if await self._commit(session, write):
                self.cache.keep(session)
                return answered
            session = await self.cache.reload(key, session_id)
        raise Unavailable("the session is being played elsewhere faster than it could be "
                          "stored here; retry")

    async def current(self, key: KeyRecord, session_id: str) -> Session:
        """A session of this key as the store has it, for a client that lost an answer."""
        session = await self.cache.session(key, session_id, check=True)
        if session.state != IN_PROGRESS:
            if await self._card_closed(session):
                raise Conflict(f"session {session_id} is over (its scorecard is closed)")
        return session
