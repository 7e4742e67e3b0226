"""Scorecards: opened within a daily allowance per key, viewed while played, and closed: locked,
scored from the sessions as stored and posted to the leaderboard."""

from __future__ import annotations

import secrets
from datetime import UTC, datetime
from typing import Any

from pipeline.precision import with_interval
from serve.arena.cache import RETRIES, Session, SessionCache, entry_for, record_of
from serve.arena.errors import Limited, NotFound, Unavailable
from serve.arena.rounds import Rounds
from serve.games.episode import IN_PROGRESS, Run, score
from serve.limits import until_tomorrow, utc_day
from serve.stores import Final, KeyRecord, ScorecardRecord, StaleSession, StoreLimit

__all__ = ["ADAPTIVE_FIELDS", "SCORE_FIELDS", "Scorecards", "attached", "iso", "with_intervals"]

SCORE_FIELDS = ("episodes", "solved", "success_rate", "success_interval", "move_efficiency",
                "avg_steps_solved", "deadlock_rate", "total_actions")
ADAPTIVE_FIELDS = ("ability", "equated_success")  # what an adaptive game's Score adds


def iso(ts: float | None) -> str | None:
    """A stored time as views show it (None stays None)."""
    return None if ts is None else datetime.fromtimestamp(ts, UTC).isoformat(timespec="seconds")


def with_intervals(result: dict[str, Any]) -> dict[str, Any]:
    """A stored close result whose Scores all carry ``success_interval`` (one stored before
    intervals existed gets it from its counts)."""
    return {**with_interval(result),
            "games": {g: with_interval(v) for g, v in result.get("games", {}).items()}}


def attached(card: ScorecardRecord) -> dict[str, Any]:
    """Where a scorecard was played from and what its client attached, as views show them."""
    meta = card.meta or {}
    return {"source": card.source, "tags": meta.get("tags") or [],
            "source_url": meta.get("source_url"), "opaque": meta.get("opaque")}


class Scorecards:
    """Opening, viewing and closing the scorecards of keys, over ``cache`` (their sessions, and
    the games, store, limits and clock)."""

    def __init__(self, cache: SessionCache, rounds: Rounds) -> None:
        self.cache, self.rounds = cache, rounds
        self.games, self.store, self.limits, self.clock = (cache.games, cache.store,
                                                           cache.limits, cache.clock)

    async def open(self, key: KeyRecord, source: str | None = None,
                   meta: dict[str, Any] | None = None) -> tuple[ScorecardRecord, int]:
        """A scorecard that may play every served game once; ``source`` says where it is played
        from (``browser`` for the play page), ``meta`` what the client attached (kept as given)."""
        self.rounds.require_one_open(g.version.version for g in self.games)
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

    async def owned(self, key: KeyRecord, scorecard_id: str) -> ScorecardRecord:
        """This key's stored scorecard; ``NotFound`` for an unknown id or another key's."""
        record = await self.store.scorecard(scorecard_id)
        if record is None or record.key_hash != key.key_hash:
            raise NotFound(f"no scorecard {scorecard_id!r} for this key")
        return record

    async def view(self, key: KeyRecord, scorecard_id: str) -> dict[str, Any]:
        """A scorecard of this key as it stands: each game's progress, or its Score once closed."""
        card = await self.owned(key, scorecard_id)
        if card.closed is not None and card.result is not None:
            result = with_intervals(card.result)
            games = {g: {"session_id": result["session_ids"][g], "state": "GAME_OVER", **v}
                     for g, v in result["games"].items()}
            return self._card_view(card, games, result)
        started = {s.record.game: s for s in await self.cache.stored(key, card)}
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

    @staticmethod
    def _progress(s: Session) -> dict[str, Any]:
        live = score(s.episodes)
        playing = s.state == IN_PROGRESS  # an expired session keeps a stale in-flight list
        return {"session_id": s.id, "state": s.state, "parallel": s.parallel,
                "episodes": s.length, "finished": s.finished,
                "in_flight": list(s.in_flight) if playing else [],
                "tier": s.tier if playing and s.in_flight else None,
                "solved": live["solved"], "deadlocked": sum(e.deadlocked for e in s.episodes),
                "total_actions": live["total_actions"], "last_active": iso(s.last_active)}

    @staticmethod
    def _card_view(record: ScorecardRecord, games: dict[str, Any],
                   result: dict[str, Any] | None) -> dict[str, Any]:
        return {"scorecard_id": record.id, "name": record.name,
                "version": result["version"] if result else record.version,
                "opened_at": iso(record.opened), "closed": result is not None,
                "closed_at": iso(record.closed), "games": games,
                "score": None if result is None else {
                    k: result[k] for k in (*SCORE_FIELDS, *ADAPTIVE_FIELDS) if k in result},
                **attached(record)}

    async def close(self, key: KeyRecord, scorecard_id: str) -> dict[str, Any]:
        """Lock, score and post a scorecard; a second close returns the first result.

        The score is computed from the sessions as stored, and the close is stored only if
        none of them moved meanwhile (else it is computed again)."""
        for _ in range(RETRIES):
            card = await self.owned(key, scorecard_id)
            if card.closed is not None and card.result is not None:
                return with_intervals(card.result)
            sessions = await self.cache.stored(key, card)
            now = self.clock()  # the time the round is checked at is the time stored
            for version in {s.record.version for s in sessions} or {card.version}:
                self.rounds.require_open(version, "; this scorecard was not closed before it, "
                                                  "so it is not ranked", at=now)
            for s in sessions:
                s.close()  # an adaptive session's unplayed episodes padded as failures
            played: dict[str, tuple[str | None, str, Run]] = {
                s.record.game: (s.id, s.record.version, s) for s in sessions}
            if not played:  # nothing started: the first game, every episode unsolved
                game, version = next(iter(card.games.items()))
                entry = entry_for(self.games, game, version, f"scorecard {scorecard_id}")
                played[game] = (None, version, entry.new_run())
                played[game][2].close()
            # each Score as it stands now, an adaptive one's ability with it: frozen in the
            # stored result, whatever a later refit of the pool's items says
            scores = {g: run.score() for g, (_, _, run) in played.items()}
            first = next(iter(played))
            result = {**scores[first], "scorecard_id": card.id, "name": card.name,
                      "version": played[first][1], "closed": True, "games": scores,
                      "session_ids": {g: v[0] for g, v in played.items()},
                      "versions": {g: v[1] for g, v in played.items()}}
            final = [Final(s.id, s.seq, tuple(record_of(r) for r in s.episodes))
                     for s in sessions]
            try:
                stored = await self.store.close_scorecard(card.id, now, result, final)
            except StaleSession:
                continue
            for s in sessions:
                self.cache.drop(s.id)
            return with_intervals(stored)
        raise Unavailable("the scorecard's sessions are being played elsewhere; retry")
