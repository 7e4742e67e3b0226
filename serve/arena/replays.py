"""What was played, as others may see it: a session's outcomes, a scorecard's page, an
episode's observations rendered from its stored actions, and a public level's solution.

One rule on every route that can give a session's actions (``shows_actions``): a public game's
(a version public from the start, or published after its round) to anyone; a hidden game's
(and one this server no longer serves, whose visibility it cannot know) only to the key that
played it. A level's solution is shown only for a public game, to anyone."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from engine.levels import State
from serve.arena.errors import NotFound
from serve.arena.images import ImageCache
from serve.arena.scorecards import SCORE_FIELDS, attached, iso, with_intervals
from serve.games.dataset import ServedLevel
from serve.games.episode import EXPIRED, IN_PROGRESS, replay_states
from serve.games.games import Registry
from serve.stores import EpisodeRecord, KeyRecord, SessionRecord, Store

__all__ = ["Replays"]


class Replays:
    """Replays of the served games' stored sessions; a hidden game's episodes are shown only
    to the key that played them (``cutoff`` is when an idle session counts as expired)."""

    def __init__(self, games: Registry, store: Store, images: ImageCache,
                 cutoff: Callable[[], float]) -> None:
        self.games = games
        self.store = store
        self.images = images
        self.cutoff = cutoff

    def _outcomes(self, version: str, rows: list[EpisodeRecord],
                  with_actions: bool) -> list[dict[str, Any]]:
        """Each episode's outcome (never its level, but in a public game, whose solutions are
        shown: ``level``, the one it played); its action string only if asked."""
        entry = self.games.by_version(version)
        levels = entry.version.levels if entry else None
        episodes = []
        for row in rows:
            served = levels[row.level] if levels and row.level is not None else None
            item: dict[str, Any] = {"index": row.index, "finished": row.done,
                                    "solved": row.solved, "steps": row.steps,
                                    "optimal": served.optimal_moves if served else None,
                                    "deadlocked": row.deadlocked}
            if entry is not None and entry.public and row.level is not None:
                item["level"] = row.level
            if with_actions:
                item["actions"] = row.actions
            episodes.append(item)
        return episodes

    def shows_actions(self, record: SessionRecord, viewer: KeyRecord | None) -> bool:
        """Whether ``viewer`` (None: anonymous) may see a session's actions: the module's
        rule."""
        entry = self.games.by_version(record.version)
        owner = viewer is not None and viewer.key_hash == record.key_hash
        return owner or bool(entry and entry.public)

    async def replay(self, session_id: str, viewer: KeyRecord | None) -> dict[str, Any]:
        """A session's episodes' outcomes, with their actions where ``shows_actions``."""
        found = await self.store.session(session_id)
        if found is None:
            raise NotFound(f"no session {session_id!r}")
        record, rows = found
        owner = viewer is not None and viewer.key_hash == record.key_hash
        card = await self.store.scorecard(record.scorecard_id)
        return {"session_id": record.id, "name": card.name if card else None,
                "game": record.game, "version": record.version, "state": record.state,
                "owner_view": owner,
                "episodes": self._outcomes(record.version, rows,
                                           self.shows_actions(record, viewer))}

    async def scorecard_outcomes(self, scorecard_id: str) -> dict[str, Any]:
        """A scorecard as anyone may see it (its page): name, tags, Score and each game's
        per-episode outcomes, never a level or an action string."""
        card = await self.store.scorecard(scorecard_id)
        if card is None:
            raise NotFound(f"no scorecard {scorecard_id!r}")
        result = None if card.result is None else with_intervals(card.result)
        games = []
        for record, rows in await self.store.sessions(card.id):
            entry = self.games.by_version(record.version)
            expired = record.state == IN_PROGRESS and record.last_active < self.cutoff()
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
                            viewer: KeyRecord | None) -> dict[str, Any]:
        """The observations of one played episode, rendered from its stored actions: for a
        public game to anyone, for a hidden one only to the key that played it (else
        ``NotFound``, as if there were nothing). Pictures are listed once; ``sequence``
        indexes them per step."""
        found = await self.store.session(session_id)
        if found is None:
            raise NotFound(f"no session {session_id!r}")
        record, rows = found
        entry = self.games.by_version(record.version)
        if entry is None or not self.shows_actions(record, viewer):
            raise NotFound(f"no replay of session {session_id} for this key: a hidden game's "
                           "episodes are shown only to the key that played them")
        row = next((r for r in rows if r.index == episode), None)
        if row is None or not row.actions or row.level is None:
            raise NotFound(f"episode {episode} of session {session_id} was not played")
        served = entry.version.levels[row.level]  # the level it played, recorded
        return {"session_id": record.id, "game": record.game, "version": record.version,
                "episode": row.index, "actions": row.actions, "solved": row.solved,
                "steps": row.steps, "optimal": served.optimal_moves,
                "max_steps": served.max_steps, "deadlocked": row.deadlocked,
                **self._pictures(served, row.actions)}

    def solution_frames(self, game: str, episode: int) -> dict[str, Any]:
        """A public game's level ``episode`` (its index in the version: an episode's recorded
        ``level``, which a fixed game's episode index is) played by its stored optimal
        solution, as a replay's pictures; a hidden game's levels are never shown
        (``NotFound``, as if there were none)."""
        entry = self.games.get(game)
        if entry is None or not entry.public:
            raise NotFound(f"no public game {game!r}: only a public game's solutions are shown")
        count = len(entry.version.levels)
        if not 0 <= episode < count:
            raise NotFound(f"game {game!r} has levels 0 to {count - 1}")
        served = entry.version.levels[episode]
        if served.solution is None:
            raise NotFound(f"version {entry.version.version} stores no solutions")
        actions = served.solution.upper()
        return {"game": game, "version": entry.version.version, "episode": episode,
                "actions": actions, "steps": len(actions), "optimal": served.optimal_moves,
                "max_steps": served.max_steps, **self._pictures(served, actions)}

    def _pictures(self, served: ServedLevel, actions: str) -> dict[str, Any]:
        """The observations of playing ``actions`` from the start, each picture listed once
        (per state and step in a noisy look, which draws each anew) and ``sequence``
        indexing them per step, with the goal image."""
        pictures: dict[tuple[State, int], int] = {}
        sequence = [pictures.setdefault((s, n if served.noisy else 0), len(pictures))
                    for s, n in replay_states(served, actions)]
        return {"shape": [64, 64, 3], "encoding": "base64-raw", "goal": served.goal.b64,
                "pictures": [self.images.picture_at(served, s, n).b64 for s, n in pictures],
                "sequence": sequence}
