"""This process's copies of the sessions it plays, each trusted only while its action count and
writer equal the store's, loaded from the stored snapshots otherwise, and dropped once idle.

The store is the truth: every action is a conditional write, so when another process (a
worker, or another server on a shared store) played a session meanwhile, the write is refused
and the session is loaded again from its stored snapshot.
"""

from __future__ import annotations

import secrets
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

from serve.arena.errors import Conflict, NotFound
from serve.arena.exposure import Exposures
from serve.arena.images import ImageCache
from serve.games.dataset import ServedVersion
from serve.games.episode import EXPIRED, IN_PROGRESS, PLAYED, RESTART_LEVEL, EpisodeRun, Run
from serve.games.games import GameEntry, Registry
from serve.limits import Limits
from serve.stores import EpisodeRecord, KeyRecord, ScorecardRecord, SessionRecord, Store, Write

__all__ = [
    "CACHED_SESSIONS", "RETRIES", "Session", "SessionCache", "entry_for", "record_of",
]

CACHED_SESSIONS = 20_000
RETRIES = 8  # reloads of a session another process keeps writing, before answering Unavailable

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
              state: str | None, arrived: float | None = None) -> Write:
        """The conditional write of this copy's next change, whose request arrived at
        ``arrived`` (default ``at``), and the copy moved past it."""
        ms = max(0, round(((at if arrived is None else arrived) - self.record.created) * 1000))
        w = Write(self.id, self.seq, self.writer, self.own, at, action, episode, rows, state, ms)
        self.seq, self.writer, self.last_active = self.seq + 1, self.own, at
        return w

    def acted_since_level_change(self, episode: int) -> bool:
        """Whether an action was taken in ``episode`` since it started or was restarted."""
        actions = self.episodes[episode].actions
        return bool(actions) and actions[-1] != PLAYED[RESTART_LEVEL]


def record_of(run: EpisodeRun) -> EpisodeRecord:
    """An episode as the store keeps it."""
    return EpisodeRecord(run.index, run.done, run.solved, run.deadlocked, run.steps,
                         "".join(run.actions), run.snapshot(), level=run.served.index)


def entry_for(games: Registry, game: str, version: str, what: str) -> GameEntry:
    """The served game ``game`` if it serves ``version``; else a ``Conflict`` that says
    what this server serves instead."""
    entry = games.get(game)
    if entry is None or entry.version.version != version:
        served = (f"it serves version {entry.version.version}" if entry is not None
                  else f"it serves {', '.join(games.names)}")
        raise Conflict(f"{what} plays version {version} of game {game!r}, which this "
                       f"server does not serve ({served}); open a new scorecard")
    return entry


class SessionCache:
    """The sessions this process holds, by id (``copies``, least recently used first), each
    checked against the store when it matters and expired after ``limits.idle_seconds``."""

    def __init__(self, games: Registry, store: Store, limits: Limits,
                 clock: Callable[[], float], images: ImageCache) -> None:
        self.games = games
        self.store = store
        self.limits = limits
        self.clock = clock
        self.images = images
        self.exposures = Exposures(store, clock)  # how often each pool level was shown
        self.copies: OrderedDict[str, Session] = OrderedDict()

    def cutoff(self) -> float:
        """The last activity time before which a session in progress has expired."""
        return self.clock() - self.limits.idle_seconds

    def expired(self, session_id: str) -> NotFound:
        """The refusal of a session that expired."""
        return NotFound(f"session {session_id} expired after "
                        f"{self.limits.idle_seconds / 60:g} minutes idle")

    def keep(self, session: Session) -> None:
        """Hold ``session`` as the most recently used copy (the least recent one goes when
        more than ``CACHED_SESSIONS`` are held)."""
        self.copies[session.id] = session
        self.copies.move_to_end(session.id)
        if len(self.copies) > CACHED_SESSIONS:
            self.copies.popitem(last=False)

    def keep_newer(self, session: Session) -> None:
        """``keep`` a copy in progress unless the one held has stored as many changes (another
        request of this process may have written it since), or forget an ended one."""
        if session.state != IN_PROGRESS:
            self.drop(session.id)
            return
        held = self.copies.get(session.id)
        if held is None or held.seq < session.seq:
            self.keep(session)

    def drop(self, session_id: str) -> None:
        """Forget this process's copy of a session (the store's stays)."""
        self.copies.pop(session_id, None)

    def loaded(self, record: SessionRecord, name: str, rows: list[EpisodeRecord]) -> Session:
        """A session as the store holds it, from each episode's snapshot (nothing replayed)."""
        session = self.restored(record, name, rows)
        self.show(session)  # pictures only for the episodes in flight: nothing else shows
        return session

    def restored(self, record: SessionRecord, name: str, rows: list[EpisodeRecord]) -> Session:
        """``loaded`` without its pictures (which only the event loop's thread draws, as it
        alone touches the image cache): for a change made inside the store's transaction."""
        entry = entry_for(self.games, record.game, record.version, f"session {record.id}")
        levels = entry.version.levels
        # each episode on its recorded level; an adaptive session's episodes whose level is
        # not chosen yet (the rows after the chosen ones) are not played yet either
        episodes = [EpisodeRun.restored(levels[r.level], done=r.done, solved=r.solved,
                                        deadlocked=r.deadlocked, steps=r.steps,
                                        actions=r.actions, snapshot=r.snapshot, place=r.index)
                    for r in rows if r.level is not None]
        session = Session(episodes, entry.tiers, record.parallel, record.state,
                          chooser=entry.chooser([e.served.index for e in episodes],
                                                self.exposures.latest(record.version)),
                          record=record, name=name, entry=entry, last_active=record.last_active,
                          seq=record.seq, writer=record.writer, own=secrets.token_hex(8))
        session.refill()
        return session

    async def reload(self, key: KeyRecord, session_id: str) -> Session:
        """The session from the store, cached while it is in progress."""
        self.drop(session_id)
        found = await self.store.session(session_id)
        if found is None or found[0].key_hash != key.key_hash:
            raise NotFound(f"no session {session_id!r} for this key")
        record, rows = found
        if record.state == EXPIRED:
            raise self.expired(session_id)
        entry = self.games.by_version(record.version)
        if entry is not None and entry.version.pool is not None and (
                self.exposures.latest(record.version) is None):  # a session started elsewhere
            await self.exposures.read(record.version, len(entry.version.levels))
        session = self.loaded(record, key.name, rows)
        if session.state == IN_PROGRESS:
            self.keep(session)
        return session

    async def session(self, key: KeyRecord, session_id: str, check: bool = False) -> Session:
        """This key's session: the cached copy (compared with the store's count first when
        ``check``), else loaded; ``NotFound`` once it expired."""
        session = self.copies.get(session_id)
        if session is None or session.record.key_hash != key.key_hash:
            session = await self.reload(key, session_id)
        elif check:
            head = await self.store.head(session_id)
            if head is None or head[:3] != (session.seq, session.writer, session.state):
                session = await self.reload(key, session_id)
        if session.state == IN_PROGRESS and session.last_active < self.cutoff():
            if await self.store.expire(self.cutoff(), session_id):
                self.drop(session_id)
                raise self.expired(session_id)
            session = await self.reload(key, session_id)  # another process kept it alive
        return session

    async def stored(self, key: KeyRecord, card: ScorecardRecord) -> list[Session]:
        """``key``'s scorecard's sessions as stored, idle ones marked expired on the way."""
        out = []
        for record, rows in await self.store.sessions(card.id):
            if record.state == IN_PROGRESS and record.last_active < self.cutoff():
                if await self.store.expire(self.cutoff(), record.id):
                    self.drop(record.id)
                    record = SessionRecord(**{**record.__dict__, "state": EXPIRED})
            out.append(self.loaded(record, key.name, rows))
        return out

    def show(self, session: Session) -> None:
        """Give each episode in flight that has none its observation."""
        for i in session.in_flight:
            run = session.episodes[i]
            if run.obs is None:
                run.obs = self.images.picture(run)

    async def expire_idle(self) -> int:
        """Mark sessions idle longer than the limit as expired in the store (whichever process
        served them) and drop idle copies from this cache; returns how many expired."""
        cutoff = self.cutoff()
        expired = await self.store.expire(cutoff)
        for sid in [s.id for s in self.copies.values() if s.last_active < cutoff]:
            self.drop(sid)
        return expired
