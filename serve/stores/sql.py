"""The SQL both store backends run, written once with ``?`` placeholders.

SQLite takes it as it is; PostgreSQL's driver wants ``$1, $2, ...``, which ``numbered``
gives. Only statements whose text is the same on both live here.
"""

from __future__ import annotations

__all__ = [
    "ACTION_TIMES", "ANONYMOUS", "BROWSER", "CARD", "CLOSE_SESSION", "EPISODES", "EXPIRE",
    "HEAD", "INSERT_ACTION", "INSERT_STANDING", "LIVE", "LIVE_OF_KEY", "MISCOUNTED", "SESSION",
    "PLAYED_ACTIONS", "PLAYED_CARDS", "PLAYED_EPISODES", "PLAYED_SESSIONS", "STEPS", "VERSIONS",
    "WRITE_EPISODE",
    "card_record", "conditional_write", "episode_rows", "leaderboard", "numbered", "played_episode",
    "played_episodes", "played_sessions", "standing", "standing_rows",
]

import json
import re

from serve.stores.interface import (
    EpisodeRecord,
    PlayedEpisode,
    PlayedSession,
    ScorecardRecord,
    SessionRecord,
    Standing,
    Write,
)

SESSION = ("SELECT id, scorecard_id, key_hash, game, version, parallel, state, created, "
           "last_active, seq, writer FROM sessions")
EPISODES = ("SELECT idx, done, solved, deadlocked, steps, actions, snapshot FROM episodes "
            "WHERE session_id=? ORDER BY idx")
WRITE_EPISODE = ("UPDATE episodes SET done=?, solved=?, deadlocked=?, steps=?, actions=?, "
                 "snapshot=? WHERE session_id=? AND idx=?")
CARD = "SELECT id, key_hash, name, games, opened, closed, result, source, meta FROM scorecards"
HEAD = "SELECT seq, writer, state, last_active FROM sessions WHERE id=?"
STEPS = "SELECT episode, action FROM actions WHERE session_id=? AND seq<=? ORDER BY seq"
INSERT_ACTION = ("INSERT INTO actions (session_id, seq, episode, action, at, ms) "
                 "VALUES (?,?,?,?,?,?)")
ACTION_TIMES = "SELECT ms FROM actions WHERE session_id=? ORDER BY seq"
LIVE_OF_KEY = ("SELECT count(*) FROM sessions WHERE key_hash=? AND state='IN_PROGRESS' "
               "AND last_active>=?")
LIVE = "SELECT count(*) FROM sessions WHERE state='IN_PROGRESS' AND last_active>=?"
LIVE_OF_ADDRESS = ("SELECT count(*) FROM sessions WHERE address=? AND state='IN_PROGRESS' "
                   "AND last_active>=?")
INSERT_SESSION = ("INSERT INTO sessions (id, scorecard_id, key_hash, game, version, parallel, "
                  "state, created, last_active, seq, writer, address) "
                  "VALUES (?,?,?,?,?,?,?,?,?,?,?,?)")
EXPIRE = "UPDATE sessions SET state='EXPIRED' WHERE state='IN_PROGRESS' AND last_active<?"
CLOSE_SESSION = "UPDATE sessions SET state='GAME_OVER' WHERE id=? AND seq=?"
INSERT_STANDING = "INSERT INTO standings VALUES (?,?,?,?,?,?,?,?,?,?,?)"
# sessions whose action count disagrees with their stored actions (a damaged store)
MISCOUNTED = ("SELECT count(*) FROM sessions s WHERE s.seq != "
              "(SELECT count(*) FROM actions a WHERE a.session_id = s.id)")
# The share of a standing's episodes lost: deadlocked, or never played (no step taken), so
# that among runs that solved alike, one that walked away from the game does not outrank one
# that played it (for every run that played each episode, it is its deadlock rate).
LOST = """coalesce((SELECT avg(CASE WHEN e.deadlocked OR e.steps = 0 THEN 1.0 ELSE 0.0 END)
                    FROM episodes e WHERE e.session_id = st.session_id), 1.0)"""
ANONYMOUS = "anon-"  # the name prefix of the keys minted for keyless play, reserved for them


def leaderboard(exclude_anonymous: bool) -> str:
    """Each name's best result on a version (``?``) closed before a time (``?``), at most a
    number (``?``) of them; anonymous keys' results left out if ``exclude_anonymous``."""
    named = f"AND substr(name, 1, {len(ANONYMOUS)}) <> '{ANONYMOUS}'" if exclude_anonymous else ""
    return f"""
    SELECT scorecard_id, name, closed, result, session_id,
           (SELECT source FROM scorecards s WHERE s.id = c.scorecard_id)
    FROM (SELECT *, row_number() OVER (
              PARTITION BY key_hash ORDER BY success_rate DESC,
              move_efficiency DESC, lost ASC, closed ASC) AS pick
          FROM (SELECT st.*, {LOST} AS lost FROM standings st
                WHERE version=? AND closed<? {named}) AS r) AS c
    WHERE pick = 1
    ORDER BY success_rate DESC, move_efficiency DESC, lost ASC, closed ASC
    LIMIT ?"""


VERSIONS = "SELECT DISTINCT version FROM standings ORDER BY 1"
# The review's read of a version (one ``?`` each): its closed scorecards' records, their
# sessions on it, those sessions' episodes that took a step or were solved, and their actions
_ON_VERSION = ("SELECT s.id FROM sessions s JOIN scorecards c ON c.id = s.scorecard_id "
               "WHERE s.version = ? AND c.closed IS NOT NULL")
PLAYED_CARDS = (CARD + " WHERE closed IS NOT NULL AND id IN (SELECT scorecard_id FROM sessions "
                "WHERE version = ?) ORDER BY opened, id")
PLAYED_SESSIONS = (SESSION + f" WHERE id IN ({_ON_VERSION}) ORDER BY scorecard_id, created, id")
PLAYED_EPISODES = ("SELECT session_id, idx, done, solved, deadlocked, steps, actions, snapshot "
                   f"FROM episodes WHERE session_id IN ({_ON_VERSION}) AND (steps > 0 OR "
                   "solved) ORDER BY session_id, idx")
PLAYED_ACTIONS = ("SELECT session_id, episode, action, ms FROM actions WHERE session_id IN "
                  f"({_ON_VERSION}) ORDER BY session_id, seq")
BROWSER = "browser"  # the source of a scorecard a person played on the play page


def played_episodes(include_browser: bool, browser_only: bool) -> str:
    """Every episode of the closed scorecards' sessions on a version (one ``?``), filtered by
    the scorecard's source."""
    where = ("AND c.source = 'browser'" if browser_only else
             "" if include_browser else "AND coalesce(c.source, '') <> 'browser'")
    return ("SELECT c.id, c.key_hash, c.name, c.source, e.idx, e.solved, e.steps, e.deadlocked, "
            "e.done, c.closed FROM scorecards c JOIN sessions s ON s.scorecard_id = c.id "
            "JOIN episodes e ON e.session_id = s.id "
            f"WHERE s.version = ? AND c.closed IS NOT NULL {where} "
            "ORDER BY c.closed, c.id, s.game, e.idx")


def numbered(sql: str) -> str:
    """``?`` placeholders as PostgreSQL's ``$1, $2, ...``."""
    count = iter(range(1, sql.count("?") + 1))
    return re.sub(r"\?", lambda _: f"${next(count)}", sql)


def conditional_write(write: Write) -> tuple[str, tuple]:
    """The compare-and-set of a session row for ``write`` and its arguments: it changes one
    row only if the stored count and writer are the expected ones and the session may still
    be played (or, for a game restart, revived while its scorecard is open)."""
    if write.session_state == "IN_PROGRESS":
        playable = ("state IN ('IN_PROGRESS', 'GAME_OVER') AND (SELECT closed FROM scorecards "
                    "c WHERE c.id = sessions.scorecard_id) IS NULL")
    else:
        playable = "state='IN_PROGRESS'"
    sql = ("UPDATE sessions SET seq=seq+1, writer=?, last_active=?, state=coalesce(?, state) "
           f"WHERE id=? AND seq=? AND writer=? AND {playable}")
    return sql, (write.writer, write.at, write.session_state, write.session_id, write.expected,
                 write.expected_writer)


def episode_rows(session_id: str, episodes) -> list[tuple]:
    return [(e.done, e.solved, e.deadlocked, e.steps, e.actions, e.snapshot, session_id,
             e.index) for e in episodes]


def standing_rows(scorecard_id: str, result: dict, key_hash: str, name: str,
                  closed: float) -> list[tuple]:
    """One standings row per game the closed scorecard's result scores."""
    return [(scorecard_id, game, result["versions"][game], key_hash, name, closed,
             result["session_ids"][game], score["success_rate"], score["move_efficiency"],
             score["deadlock_rate"], json.dumps(score)) for game, score in result["games"].items()]


def card_record(row) -> ScorecardRecord:
    """A ``CARD`` row as its record."""
    return ScorecardRecord(row[0], row[1], row[2], json.loads(row[3]), row[4], row[5],
                           json.loads(row[6]) if row[6] else None, row[7],
                           json.loads(row[8]) if row[8] else None)


def played_episode(row) -> PlayedEpisode:
    """A ``played_episodes`` row (SQLite's integers or PostgreSQL's booleans) as a record."""
    return PlayedEpisode(row[0], row[1], row[2], row[3], int(row[4]), bool(row[5]), int(row[6]),
                         bool(row[7]), bool(row[8]), float(row[9]))


def standing(row) -> Standing:
    """A ``LEADERBOARD`` row as its record."""
    return Standing(row[0], row[4], row[1], row[2], json.loads(row[3]), row[5])


def played_sessions(cards, sessions, episodes, actions
                    ) -> list[tuple[ScorecardRecord, list[PlayedSession]]]:
    """``Store.played_sessions`` from the rows of ``PLAYED_CARDS``, ``PLAYED_SESSIONS``,
    ``PLAYED_EPISODES`` and ``PLAYED_ACTIONS`` (SQLite's integers or PostgreSQL's booleans)."""
    per_episodes: dict[str, list[EpisodeRecord]] = {}
    for r in episodes:
        per_episodes.setdefault(r[0], []).append(EpisodeRecord(
            int(r[1]), bool(r[2]), bool(r[3]), bool(r[4]), int(r[5]), r[6], r[7]))
    per_actions: dict[str, list[tuple[int, int, int | None]]] = {}
    for r in actions:
        per_actions.setdefault(r[0], []).append((int(r[1]), int(r[2]), r[3]))
    per_card: dict[str, list[PlayedSession]] = {}
    for r in sessions:
        record = SessionRecord(*r)
        per_card.setdefault(record.scorecard_id, []).append(PlayedSession(
            record, tuple(per_episodes.get(record.id, ())),
            tuple(per_actions.get(record.id, ()))))
    out = []
    for r in cards:
        card = card_record(r)
        out.append((card, per_card.get(card.id, [])))
    return out
