"""The native agent protocol (that of the public Latent Sokoban server): its route
declarations, frames and handlers.

Handlers only translate: declared inputs in, ``serve.play.Arena`` calls, JSON shapes out.
"""

from __future__ import annotations

__all__ = [
    "ATTACHED", "CARD_META", "EPISODE_STEP", "FRAME", "GAME_NAME", "HANDLERS", "LEADERBOARD",
    "LEADERBOARD_QUERY", "NAME_PATTERN", "NAME_RULE", "REPLAY", "RESULT", "ROUTES", "SCORE",
    "SCORECARD", "SCORECARD_ID", "SESSION_ID", "SHAPE", "SOURCE", "SPEC", "STANDINGS", "STEP",
    "Tags", "VERSION_NAME", "act", "card_meta", "close_scorecard", "create_key", "frame",
    "frame_pieces", "get_leaderboard", "get_line", "get_replay", "get_scorecard", "get_session",
    "get_spec", "get_standings", "get_standings_file", "observation", "open_scorecard",
    "reply_frame", "reply_pieces",
    "reset_session", "start_game",
]

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from aiohttp import web

from pipeline.precision import METHOD, PAIRED_METHOD
from pipeline.scores.pooled import ABOVE_METHOD
from pipeline.versions.rounds import STANDINGS_JSON
from serve.arena.cache import Session
from serve.games import framezip
from serve.games.episode import IN_PROGRESS, EpisodeRun, Outcome
from serve.games.framezip import Picture
from serve.play import Arena
from serve.stores import KeyRecord
from serve.web.schema import (
    ANY,
    BOOLEAN,
    INT,
    INTEGER,
    MAP,
    NUMBER,
    STR,
    TEXT,
    Field,
    HandlerArgs,
    Invalid,
    Route,
    arr,
    encodable,
    maybe,
    obj,
    string,
)
from serve.web.web import (
    accepts_gzip,
    api_key,
    client_ip,
    json_body_only,
    reply,
    reply_bytes,
    same_site_only,
)

NAME_PATTERN = r"[A-Za-z0-9_.\-][A-Za-z0-9_. \-]{0,38}[A-Za-z0-9_.\-]"
NAME_RULE = ("2-40 letters, digits, '_', '.', '-' or spaces, not starting or ending with a "
             "space")  # NAME_PATTERN in words: the 422 for a name and the docs say it
SCORECARD_ID = r"sc-[0-9a-f]{24}"  # as serve.arena.scorecards makes them
SESSION_ID = r"gs-[0-9a-f]{24}"
GAME_NAME = r"[A-Za-z0-9_.\-]{1,64}"
VERSION_NAME = r"[A-Za-z0-9][A-Za-z0-9_.\-]{0,63}"  # check_version_name's: never . or ..
SHAPE = [64, 64, 3]
_TOKEN = re.compile(r"\\u0000(\d+)")

LEADERBOARD_QUERY = (
    Field("version", STR, "must be a dataset version name (default: the served version of "
          "game, else of the first game)", required=False, pattern=VERSION_NAME),
    Field("game", STR, "must be a served game's name (default: the first game)",
          required=False, pattern=GAME_NAME),
    Field("limit", INT, "how many entries", required=False, minimum=1, maximum=1000,
          default=100))
_SCORECARD = Field("scorecard_id", STR, "the scorecard's id", pattern=SCORECARD_ID,
                   refers_to="scorecard")
_SESSION = Field("session_id", STR, "the session's id", pattern=SESSION_ID, refers_to="session")
_GAME = Field("game", STR, "the game's name", pattern=GAME_NAME, refers_to="game")
_VERSION = Field("version", STR, "must be a dataset version's name", pattern=VERSION_NAME)
_STANDINGS_FILE = Field("file", STR, "must be standings.json, standings.csv or standings.sha256",
                        pattern=r"standings\.(?:json|csv|sha256)")

# -- the answers' shapes ------------------------------------------------------------------------
INTERVAL = {**arr(NUMBER), "minItems": 2, "maxItems": 2,
            "description": f"[lo, hi] of the success rate: {METHOD}; it covers the agent's "
                           "rate over every draw of levels the game's spec could make"}
# an ability with its 95% interval, and the success it equates to (``pipeline.scores.adaptive``)
_ABILITY = obj({"theta": NUMBER, "low": NUMBER, "high": NUMBER})
_EQUATED = obj({"value": NUMBER, "low": NUMBER, "high": NUMBER})
# what an adaptive game's Score adds (``serve.games.adaptive``)
_ADAPTIVE_SCORE = {
    "ability": {**_ABILITY,
                "description": "an adaptive game's: the ability estimate on its pool's scale, "
                               "with its 95% interval"},
    "equated_success": {**_EQUATED,
                        "description": "an adaptive game's: the expected success on the "
                        "standard game's ramp at that ability, with its 95% interval; compare "
                        "this across games, not success_rate (near 0.5 by design)"}}
SCORE = obj({"episodes": INTEGER, "solved": INTEGER, "success_rate": NUMBER,
             "success_interval": INTERVAL, "move_efficiency": NUMBER,
             "avg_steps_solved": NUMBER, "deadlock_rate": NUMBER, "total_actions": INTEGER},
            _ADAPTIVE_SCORE)
_OBSERVATION = obj({"obs": TEXT, "goal": TEXT, "shape": arr(INTEGER), "dtype": TEXT,
                    "encoding": TEXT})
_EPISODE = obj({"index": INTEGER, "of": INTEGER, "steps_used": INTEGER, "max_steps": INTEGER,
                "step": {**INTEGER, "description": "this episode's changes stored since it "
                         "began (moves, no-ops, level restarts); number its next action "
                         "step + 1 in episode_step"}})
FRAME = obj(
    {"session_id": string(SESSION_ID), "game": TEXT,
     "state": string(enum=["IN_PROGRESS", "GAME_OVER"]),
     "step": {**INTEGER, "description": "the session's changes stored so far (actions and "
                                       "restarts); number the next one step + 1"},
     "last": obj({"action": INTEGER, "moved": BOOLEAN, "pushed": BOOLEAN, "solved": BOOLEAN,
                  "episode_done": BOOLEAN}, {"episode": INTEGER}, nullable=True),
     "result": obj({}, SCORE["properties"])},
    {"episode": _EPISODE, "observation": maybe(_OBSERVATION),
     "episodes": arr(obj({**_EPISODE["properties"], "observation": _OBSERVATION})),
     "tier": obj({"index": INTEGER, "of": INTEGER, "range": arr(INTEGER)}),
     "finished": INTEGER, "acted_episode": maybe(INTEGER)})
_PROGRESS = obj({"session_id": maybe(TEXT), "state": TEXT, "episodes": INTEGER},
                {**SCORE["properties"], "finished": INTEGER, "parallel": INTEGER,
                 "in_flight": arr(INTEGER), "tier": maybe(INTEGER), "deadlocked": INTEGER,
                 "last_active": maybe(TEXT)})
# where a scorecard was played from and what its client attached when opening it
ATTACHED = {"source": maybe(string("browser")), "tags": arr(TEXT), "source_url": maybe(TEXT),
            "opaque": {"nullable": True}}
# the fair-play review's verdict on a scorecard (``sokoforge review``; a mark, not a removal)
VERDICT = string("consistent|needs review")
CLEARED = {**obj({"at": TEXT, "date": TEXT}, nullable=True),
           "description": "when a person read the scorecard's source and cleared it (sokoforge "
                          "review --clear), else null: a mark, the ranking unchanged"}
REVIEW = {**obj({"version": TEXT, "verdict": VERDICT},
                {"evidence": arr(TEXT), "cleared": CLEARED}, nullable=True),
          "description": "the fair-play review's verdict once one has run (else null), with "
                         "its evidence for the key that played the scorecard"}
SCORECARD = obj({"scorecard_id": string(SCORECARD_ID), "name": TEXT, "version": TEXT,
                 "opened_at": maybe(TEXT), "closed": BOOLEAN, "closed_at": maybe(TEXT),
                 "games": {"type": "object", "additionalProperties": _PROGRESS},
                 "score": maybe(SCORE)}, {**ATTACHED, "review": REVIEW})
RESULT = obj({**{k: SCORE["properties"][k] for k in SCORE["required"]},
              "scorecard_id": string(SCORECARD_ID), "name": TEXT, "version": TEXT,
              "closed": BOOLEAN, "games": {"type": "object", "additionalProperties": SCORE}},
             {"session_ids": {"type": "object", "additionalProperties": maybe(TEXT)},
              **_ADAPTIVE_SCORE})
REPLAY = obj({"session_id": string(SESSION_ID), "name": maybe(TEXT), "game": TEXT,
              "version": TEXT, "state": TEXT, "owner_view": BOOLEAN,
              "episodes": arr(obj({"index": INTEGER, "finished": BOOLEAN, "solved": BOOLEAN,
                                   "steps": INTEGER, "optimal": maybe(INTEGER),
                                   "deadlocked": BOOLEAN}, {"actions": string("[UDLR.|]*"),
                                                            "level": INTEGER}))})
# an adaptive game's entry: one per name, pooled over its closed scorecards (pipeline.scores.pooled)
POOLED_ENTRY = {
    "ability": {**_ABILITY,
                "description": "an adaptive game's: the ability pooled over all the name's "
                               "closed scorecards, with its 95% interval"},
    "equated_success": {**_EQUATED,
                        "description": "the expected success on the standard game's ramp at "
                                       "that ability, with its interval"},
    "scorecards": {**INTEGER, "description": "how many closed scorecards the entry pools"},
    "scorecard_ids": arr(string(SCORECARD_ID))}
LEADERBOARD = obj({"version": TEXT, "served_version": TEXT, "versions": arr(TEXT),
                   "entries": arr(obj({
                       "rank": INTEGER, "name": TEXT, "success_rate": NUMBER,
                       "move_efficiency": NUMBER, "deadlock_rate": NUMBER, "solved": INTEGER,
                       "episodes": INTEGER, "avg_steps_solved": NUMBER,
                       "total_actions": INTEGER, "scorecard_id": string(SCORECARD_ID),
                       "session_id": maybe(TEXT), "submitted_at": maybe(TEXT),
                       "success_interval": INTERVAL,
                       "indistinguishable_from_above": {
                           **maybe(BOOLEAN), "description": f"against the entry ranked just "
                           f"above, on the same levels: {PAIRED_METHOD} (null for the first); "
                           f"on an adaptive game, whose sessions show their own levels: "
                           f"{ABOVE_METHOD}"},
                       "paired_p_above": {**maybe(NUMBER),
                                          "description": "that test's p-value"}},
                       {"source": maybe(TEXT), "cleared": CLEARED, **POOLED_ENTRY,
                        "review": {**maybe(VERDICT), "description": (
                            "the fair-play review's verdict on this scorecard (null before a "
                            "review has run, or when it did not judge it): a flag for a "
                            "person to look, the ranking unchanged")}}))},
                  {"game": maybe(TEXT), "served": MAP, "precision": MAP,
                   "adaptive": {**BOOLEAN, "description": "an adaptive game's board: entries "
                                "ranked by pooled ability; their raw success_rate is near 0.5 "
                                "by design and compares with no other game"},
                   "reviewed": {**BOOLEAN, "description": "whether a fair-play review of the "
                                "version has run (sokoforge review, round close)"},
                   "bound": {**obj({"solved": INTEGER, "levels": INTEGER, "text": TEXT},
                                   nullable=True),
                             "description": "what passes the fair-play review unflagged: "
                                            "more than `solved` of `levels` solved needs "
                                            "source review (null before a review with one)"}})
LINE = obj({"version": TEXT, "game": TEXT, "versions": arr(TEXT), "scales": arr(arr(TEXT)),
            "links": arr(obj({"a": TEXT, "b": TEXT, "keys": INTEGER, "linked": BOOLEAN})),
            "notes": arr(TEXT), "model": TEXT,
            "entries": arr(obj({"rank": INTEGER, "name": TEXT, "scale": INTEGER,
                                "ability": NUMBER,
                                "ability_interval": {**arr(NUMBER), "description": (
                                    "[lo, hi], 95%, of the ability on the line's scale")},
                                "versions": {"type": "object", "additionalProperties": obj(
                                    {"episodes": INTEGER, "solved": INTEGER,
                                     "success_rate": NUMBER, "success_interval": INTERVAL})}}))})
STANDINGS = obj({"format": INTEGER, "version": TEXT, "columns": arr(TEXT),
                 "entries": {**arr(MAP), "description": "one object per ranked name, its keys "
                             "the columns (standings.csv has the same rows)"}})
_RANGE = obj({"min": INTEGER, "max": INTEGER}, {"mean": NUMBER})
SPEC = obj({"version": TEXT, "game": TEXT, "games": arr(TEXT), "episodes": INTEGER,
            "tiers": arr(obj({"index": INTEGER, "levels": INTEGER, "range": arr(INTEGER),
                              "crates": INTEGER, "optimal_moves": _RANGE,
                              "max_steps": _RANGE})),
            "observation": MAP, "actions": MAP, "limits": MAP, "levels_sha256": TEXT},
           {"boards": arr(arr(INTEGER)), "step_budget": MAP,
            "seed_commitment": maybe(TEXT), "rotated_from": maybe(TEXT),
            "restarts": string(enum=["none", "level", "game"]), "look": MAP,
            "game_specs": MAP,
            "adaptive": {**obj({"pool": INTEGER, "episodes": INTEGER, "parallel": INTEGER}),
                         "description": "an adaptive game's: its pool's levels, the episodes "
                                        "a session plays, chosen `parallel` at a time"}})

_SESSION_LINKS = {"act": ("act", {"session_id": "/session_id"}),
                  "reset": ("reset_session", {"session_id": "/session_id"}),
                  "current": ("get_session", {"session_id": "/session_id"}),
                  "replay": ("get_replay", {"session_id": "/session_id"})}

MAX_TAGS, MAX_TAG_CHARS = 32, 64
# the client's number for a change of a session, so that sending it again is safe
STEP = Field("step", INT, "this change's number: the Frame's step plus one. A step already "
             "played is answered as it was and not played again (so a lost answer is retried "
             "by sending the same request); one further ahead is a 409", required=False,
             minimum=1)
# the same within one episode: what a client playing several episodes at once numbers by
EPISODE_STEP = Field("episode_step", INT, "this action's number within its episode (sent with "
                     "episode, instead of step): the episode's step in the Frame plus one. One "
                     "already played is answered as it was and not played again, even once "
                     "the episode is over (so each episode in flight retries safely on its "
                     "own); one further ahead is a 409", required=False, minimum=1)


@dataclass(frozen=True)
class Tags(Field):
    """A list of at most ``MAX_TAGS`` strings of 1-``MAX_TAG_CHARS`` characters."""

    def check(self, value: Any) -> Any:
        if not (isinstance(value, list) and len(value) <= MAX_TAGS and all(
                isinstance(t, str) and 1 <= len(t) <= MAX_TAG_CHARS
                for t in value)):
            raise Invalid(f"{self.name} must be {self.description}")
        if not all(encodable(t) for t in value):  # as every other string: no lone surrogate
            raise Invalid(f"{self.name} must be Unicode text; one holds an unpaired surrogate")
        return value

    def openapi(self) -> dict:
        return {"description": self.description, "type": "array", "maxItems": MAX_TAGS,
                "items": {"type": "string", "minLength": 1, "maxLength": MAX_TAG_CHARS}}


# what a client may attach to a scorecard when opening it (the ARC-AGI-3 toolkit sends these),
# kept as given within these bounds and shown back with the scorecard
CARD_META = (
    Tags("tags", ANY, f"a list of at most {MAX_TAGS} strings of 1-{MAX_TAG_CHARS} characters",
         required=False),
    Field("source_url", STR, "a URL of at most 512 characters", required=False,
          pattern=r"[^\x00-\x1f]{0,512}"),
    Field("opaque", ANY, "any JSON, at most 4 KB", required=False, max_bytes=4096))
SOURCE = Field("source", STR, "'browser' for a run a person plays on the play page (a tag "
               "on the scorecard and its results; omit for an agent)", required=False,
               pattern="browser")


def card_meta(args: HandlerArgs) -> dict[str, Any]:
    """The ``CARD_META`` values a request gave."""
    given: Mapping[str, object] = args
    return {f.name: given[f.name] for f in CARD_META if given.get(f.name) is not None}


ROUTES = (
    Route("create_key", "POST", "/api/keys",
          "Create a key bound to a unique leaderboard name; the key is shown once.",
          body=(Field("name", STR, f"must be {NAME_RULE}", pattern=NAME_PATTERN),),
          responses={201: "the new key (shown once): `api_key`, sent as X-API-Key from then on",
                     403: "sent by a page of another site (Sec-Fetch-Site or Origin)",
                     409: "name taken (or starting with anon-, kept for anonymous keys)",
                     415: "a JSON body not sent as application/json",
                     422: f"a name that is not {NAME_RULE}, or a body that is not JSON (a form's)",
                     429: "too many keys from this address today"},
          bodies={201: obj({"api_key": string(r"lsk-[A-Za-z0-9_\-]+"), "name": TEXT,
                            "note": TEXT})}),
    Route("open_scorecard", "POST", "/api/scorecards",
          "Open a scorecard; it counts against the key's daily allowance. Tags, a source URL "
          "and opaque JSON are kept as given and shown with it.", auth=True,
          body=(SOURCE, *CARD_META),
          responses={200: "the new scorecard", 401: "missing or unknown key",
                     409: "the round of every served version is over",
                     429: "daily scorecard limit reached"},
          links={"start": ("start_game", {"scorecard_id": "/scorecard_id", "game": "/games/0"}),
                 "view": ("get_scorecard", {"scorecard_id": "/scorecard_id"}),
                 "close": ("close_scorecard", {"scorecard_id": "/scorecard_id"})},
          bodies={200: obj({"scorecard_id": string(SCORECARD_ID), "games": arr(TEXT),
                            "episodes_per_game": INTEGER, "version": TEXT,
                            "opened_today": INTEGER, "daily_limit": INTEGER},
                           {"episodes_by_game": MAP})}),
    Route("start_game", "POST", "/api/scorecards/{scorecard_id}/games/{game}/start",
          "Start the one session of a game on a scorecard; returns the first Frame.", auth=True,
          params=(_SCORECARD, _GAME),
          query=(Field("parallel", INT, "episodes of the current tier kept in flight (of an "
                       "adaptive game: of the current block, whose unplayed episodes are fewer "
                       "when its spec's parallel is smaller; the next block is chosen when "
                       "every episode of this one has ended)",
                       required=False, minimum=1, maximum=32, default=1),),
          responses={200: "the first Frame", 401: "missing or unknown key",
                     404: "unknown scorecard or game (or another key's)",
                     409: "game already started, scorecard closed, the version's round is "
                          "over, or a scorecard opened on a version this server does not "
                          "serve", 422: "bad parallel",
                     429: "too many sessions in flight (per key, per address or in total)",
                     503: "the store did not take it"},
          bodies={200: FRAME}, links=_SESSION_LINKS),
    Route("act", "POST", "/api/sessions/{session_id}/act",
          "Play one action (0 up, 1 down, 2 left, 3 right); returns the next Frame.", auth=True,
          params=(_SESSION,),
          body=(Field("action", INT, "0 up, 1 down, 2 left, 3 right", minimum=0, maximum=3),
                Field("episode", INT, "the episode the action is for (required when several "
                      "are in flight)", required=False, minimum=0),
                STEP, EPISODE_STEP),
          responses={200: "the next Frame (for a step already played, the Frame it was "
                          "answered with)",
                     400: "several episodes in flight and none named, or episode_step "
                          "without episode or with step",
                     401: "missing or unknown key",
                     404: "unknown or expired session (or another key's)",
                     409: "session over, episode not in flight, the version's round is over, "
                          "a session of a version this server does not serve, or a step that "
                          "skips ahead or was played as another change",
                     422: "malformed body or action",
                     503: "the action could not be stored and was not played; retry it"},
          bodies={200: FRAME}, links=_SESSION_LINKS),
    Route("reset_session", "POST", "/api/sessions/{session_id}/reset",
          "Restart, where the game allows it (its spec's restarts): the current level (its "
          "steps stay used) if an action was taken in it since it began, else, where allowed, "
          "the whole game; returns the Frame, with restarted 'level' or 'game'.", auth=True,
          params=(_SESSION,),
          body=(Field("episode", INT, "the episode to restart (required when several are in "
                      "flight)", required=False, minimum=0), STEP),
          responses={200: "the Frame after the restart",
                     400: "several episodes in flight and none named",
                     401: "missing or unknown key",
                     404: "unknown or expired session (or another key's)",
                     409: "the game allows no restarts, the session or its round is over, the "
                          "episode is not in flight, the session is of a version this "
                          "server does not serve, or a step that skips ahead or was played as "
                          "another change",
                     422: "malformed body",
                     503: "the restart could not be stored and was not made; retry it"},
          bodies={200: FRAME}, links=_SESSION_LINKS),
    Route("get_session", "GET", "/api/sessions/{session_id}",
          "The session's current Frame (last is null), for a client that lost an answer.",
          auth=True, params=(_SESSION,),
          responses={200: "the current Frame", 401: "missing or unknown key",
                     404: "unknown or expired session (or another key's)",
                     409: "session over (its scorecard is closed), or of another version"},
          bodies={200: FRAME}),
    Route("get_scorecard", "GET", "/api/scorecards/{scorecard_id}",
          "Live per-game progress of an open or closed scorecard.", auth=True,
          params=(_SCORECARD,),
          responses={200: "the scorecard", 401: "missing or unknown key",
                     404: "unknown scorecard (or another key's)",
                     409: "an open scorecard of another version"},
          bodies={200: SCORECARD}),
    Route("close_scorecard", "POST", "/api/scorecards/{scorecard_id}/close",
          "Lock, score and post a scorecard; unfinished episodes count as unsolved. "
          "Closing again returns the same Score.", auth=True, params=(_SCORECARD,),
          responses={200: "the Score", 401: "missing or unknown key",
                     404: "unknown scorecard (or another key's)",
                     409: "an open scorecard of another version, or of a round that is over "
                          "(it is not ranked)"},
          bodies={200: RESULT}),
    Route("get_replay", "GET", "/api/replays/{session_id}",
          "Per-episode outcomes of a session; the action strings of a public game's (public "
          "or published) to anyone, of a hidden game's only to the key that played it.",
          params=(_SESSION,), responses={200: "the replay", 404: "unknown session"},
          bodies={200: REPLAY}),
    Route("get_leaderboard", "GET", "/api/leaderboard",
          "Each name's best closed scorecard of a version (or a served game's), ranked; on "
          "an adaptive game, each name's ability pooled over all its closed scorecards.",
          query=LEADERBOARD_QUERY,
          responses={200: "the ranking", 404: "a game this server does not serve",
                     422: "bad version, game or limit"},
          bodies={200: LEADERBOARD}),
    Route("get_line", "GET", "/api/leaderboard/line",
          "The served version's line (versions rotated from one another) on one ability "
          "scale, from the closed scorecards of every version of it: each name's ability and "
          "its 95% interval beside its raw success per version.",
          query=(LEADERBOARD_QUERY[1],),
          responses={200: "the linked abilities", 404: "no fit of the line (or an unknown game)",
                     422: "bad game"},
          bodies={200: LINE}, store=False),
    Route("get_standings", "GET", "/api/standings/{version}",
          "A closed round's final standings, as `sokoforge round close` wrote them "
          "(standings.json): each named player's best scorecard closed in time, ranked.",
          params=(_VERSION,),
          responses={200: "the standings", 404: "no closed round of that version",
                     422: "bad version name"},
          bodies={200: STANDINGS}, store=False),
    Route("get_standings_file", "GET", "/api/standings/{version}/{file}",
          "A file of a closed round's final standings: standings.json, standings.csv, or "
          "standings.sha256 (their digests: `sha256sum -c` checks the other two beside it).",
          params=(_VERSION, _STANDINGS_FILE), json_response=False,
          responses={200: "the file", 404: "no closed round of that version",
                     422: "bad version name or file name"}, store=False),
    Route("get_spec", "GET", "/api/spec", "The live numbers of the served set, read from the data.",
          responses={200: "the spec"}, bodies={200: SPEC}, store=False),
)


def observation(run: EpisodeRun, images: list[Picture] | None = None) -> dict:
    """The observation object; with ``images``, the base64 strings are left as tokens that
    ``frame_pieces`` splices back in (JSON-encoding 16 KB strings costs more than the rest)."""
    assert run.obs is not None
    if images is None:
        return {"obs": run.obs.b64, "goal": run.served.goal.b64, "shape": SHAPE,
                "dtype": "uint8", "encoding": "base64-raw"}
    images += (run.obs, run.served.goal)
    return {"obs": f"\x00{len(images) - 2}", "goal": f"\x00{len(images) - 1}", "shape": SHAPE,
            "dtype": "uint8", "encoding": "base64-raw"}


def _episode(run: EpisodeRun, of: int) -> dict:
    return {"index": run.index, "of": of, "steps_used": run.steps,
            "max_steps": run.served.max_steps, "step": len(run.actions)}


def frame(session: Session, outcome: Outcome | None,
          images: list[Picture] | None = None, restarted: str | None = None) -> dict:
    """The Frame after ``outcome`` (None on start): serial or parallel shape by the session."""
    over = session.state != IN_PROGRESS
    of = session.length
    out: dict[str, Any] = {"session_id": session.id, "game": session.record.game,
                           "state": "GAME_OVER" if over else "IN_PROGRESS", "step": session.seq}
    if session.parallel == 1:
        index = session.in_flight[0] if session.in_flight else (
            outcome.episode if outcome else len(session.episodes) - 1)
        run = session.episodes[index]
        out["episode"] = _episode(run, of)
        out["observation"] = None if over else observation(run, images)
    else:
        tiers = session.tiers  # an adaptive game's are its blocks
        t = min(session.tier, len(tiers) - 1)
        out["episodes"] = [{**_episode(session.episodes[i], of),
                            "observation": observation(session.episodes[i], images)}
                           for i in session.in_flight]
        out["tier"] = {"index": t, "of": len(tiers), "range": list(tiers[t])}
        out["finished"] = session.finished
        out["acted_episode"] = outcome.episode if outcome else None
    if outcome is None:
        out["last"] = None
    else:
        out["last"] = {"action": outcome.action, "moved": outcome.moved,
                       "pushed": outcome.pushed, "solved": outcome.solved,
                       "episode_done": outcome.episode_done}
        if session.parallel > 1:
            out["last"]["episode"] = outcome.episode
    out["result"] = session.score() if over else {}
    if restarted is not None:
        out["restarted"] = restarted
    return out


def frame_pieces(session: Session, outcome: Outcome | None,
                 restarted: str | None = None) -> list[bytes | Picture]:
    """The Frame as JSON text pieces and the pictures between them: base64 is ASCII without
    quotes or backslashes, so it stands in JSON as it is."""
    images: list[Picture] = []
    pieces: list[Any] = _TOKEN.split(
        json.dumps(frame(session, outcome, images, restarted), separators=(",", ":")))
    for i in range(0, len(pieces), 2):
        pieces[i] = pieces[i].encode()
    for i in range(1, len(pieces), 2):
        pieces[i] = images[int(pieces[i])]
    return pieces


def reply_frame(request: web.Request, session: Session, outcome: Outcome | None,
                restarted: str | None = None) -> web.Response:
    return reply_pieces(request, frame_pieces(session, outcome, restarted))


def reply_pieces(request: web.Request, pieces: list[bytes | Picture]) -> web.Response:
    """A Frame's ``frame_pieces`` as the answer, gzipped when the client accepts it."""
    if accepts_gzip(request):
        return web.Response(body=framezip.gzipped(pieces), content_type="application/json",
                            headers={"Content-Encoding": "gzip", "Vary": "Accept-Encoding"})
    return web.Response(body=framezip.plain(pieces), content_type="application/json",
                        headers={"Vary": "Accept-Encoding"})


async def create_key(request: web.Request, arena: Arena, key: None,
                     args: HandlerArgs) -> web.Response:
    """Mint an API key for a name (same site, JSON body): shown once, stored hashed."""
    same_site_only(request)
    json_body_only(request)
    address = client_ip(request, arena.limits.trusted_proxies)
    api_key = await arena.create_key(args["name"], address)
    return reply(request, {"api_key": api_key, "name": args["name"],
                           "note": "Keep this key: it is shown once and stored only as a hash. "
                                   "Send it as the X-API-Key header."}, status=201)


async def open_scorecard(request: web.Request, arena: Arena, key: KeyRecord,
                         args: HandlerArgs) -> web.Response:
    """Open a scorecard on the key for every served game; its id and the day's count."""
    card, opened = await arena.open_scorecard(key, args["source"], card_meta(args))
    return reply(request, {"scorecard_id": card.id, "games": list(card.games),
                           "episodes_per_game": arena.version.episodes,
                           "episodes_by_game": {g.name: g.episodes for g in arena.games},
                           "version": arena.version.version, "opened_today": opened,
                           "daily_limit": arena.limits.scorecards_per_key_per_day})


async def start_game(request: web.Request, arena: Arena, key: KeyRecord,
                     args: HandlerArgs) -> web.Response:
    """Start a game on a scorecard with ``parallel`` episodes at once; its first frame."""
    session = await arena.start(key, request.match_info["scorecard_id"],
                                request.match_info["game"], args["parallel"],
                                client_ip(request, arena.limits.trusted_proxies))
    return reply_frame(request, session, None)


async def act(request: web.Request, arena: Arena, key: KeyRecord,
              args: HandlerArgs) -> web.Response:
    """One action in one episode of a session; the frame after it."""
    pieces = await arena.act(key, request.match_info["session_id"], args["action"],
                             args["episode"], frame_pieces, args["step"],
                             episode_step=args["episode_step"])
    return reply_pieces(request, pieces)


async def reset_session(request: web.Request, arena: Arena, key: KeyRecord,
                        args: HandlerArgs) -> web.Response:
    """Restart an episode (or the game, as the game allows); the frame after it."""
    pieces = await arena.restart(key, request.match_info["session_id"], args["episode"],
                                 lambda session, scope: frame_pieces(session, None, scope),
                                 args["step"])
    return reply_pieces(request, pieces)


async def get_session(request: web.Request, arena: Arena, key: KeyRecord,
                      args: HandlerArgs) -> web.Response:
    """A session's current frame (its own key only)."""
    return reply_frame(request, await arena.current(key, request.match_info["session_id"]), None)


async def get_scorecard(request: web.Request, arena: Arena, key: KeyRecord,
                        args: HandlerArgs) -> web.Response:
    """A scorecard's progress and scores so far (its own key only)."""
    return reply(request, await arena.scorecard_view(key, request.match_info["scorecard_id"]))


async def close_scorecard(request: web.Request, arena: Arena, key: KeyRecord,
                          args: HandlerArgs) -> web.Response:
    """Close a scorecard: its sessions end and its result is final."""
    return reply(request, await arena.close(key, request.match_info["scorecard_id"]))


async def get_replay(request: web.Request, arena: Arena, key: None,
                     args: HandlerArgs) -> web.Response:
    """A session's episodes and actions; its owner sees them before the round closes."""
    viewer = await arena.owner_of(api_key(request))
    return reply(request, await arena.replay(request.match_info["session_id"], viewer))


async def get_leaderboard(request: web.Request, arena: Arena, key: None,
                          args: HandlerArgs) -> web.Response:
    """Each name's best closed result on a version (one game), ranked."""
    return reply(request, await arena.leaderboard(args["version"], args["limit"],
                                                  args["game"]))


async def get_standings(request: web.Request, arena: Arena, key: None,
                        args: HandlerArgs) -> web.Response:
    """A closed round's final standings (standings.json)."""
    data = arena.rounds.standings_file(request.match_info["version"], STANDINGS_JSON)
    return reply_bytes(request, data, "application/json")


async def get_standings_file(request: web.Request, arena: Arena, key: None,
                             args: HandlerArgs) -> web.Response:
    """One of a closed round's standings files (json, csv or sha256)."""
    name = request.match_info["file"]
    data = arena.rounds.standings_file(request.match_info["version"], name)
    kind = {"json": "application/json", "csv": "text/csv"}.get(name.rpartition(".")[2],
                                                               "text/plain")
    return reply_bytes(request, data, kind)


async def get_line(request: web.Request, arena: Arena, key: None,
                   args: HandlerArgs) -> web.Response:
    """The calibrated line of a game: its ability scale's anchors."""
    return reply(request, arena.line(args["game"]))


async def get_spec(request: web.Request, arena: Arena, key: None,
                   args: HandlerArgs) -> web.Response:
    """The served versions' specs: what a client needs to know before playing."""
    return reply(request, arena.spec())


HANDLERS = {"create_key": create_key, "open_scorecard": open_scorecard, "start_game": start_game,
            "act": act, "reset_session": reset_session, "get_session": get_session,
            "get_scorecard": get_scorecard, "close_scorecard": close_scorecard,
            "get_replay": get_replay,
            "get_leaderboard": get_leaderboard, "get_line": get_line, "get_spec": get_spec,
            "get_standings": get_standings, "get_standings_file": get_standings_file}
