"""The ARC-AGI-3 face: the served version as one ARC game for agents built on the arc-agi toolkit.

Handlers translate the ARC-AGI-3 REST calls into the ``serve.play.Arena`` operations of the
native protocol (same keys, scorecards, sessions, budgets, scores and leaderboard) and answer
in the API's shapes (``serve.arc.arc_wire``); refusals are ``{"error": CODE, "message"}``.
"""

from __future__ import annotations

__all__ = [
    "ANON_PREFIX", "ActionArgs", "FRAME_DATA", "GAME", "GAME_ID_PATTERN", "HANDLERS", "REASONING",
    "ROUTES", "SCORECARD", "STATES", "TAG", "action_handler", "anonkey", "bind",
    "close_scorecard", "game", "games", "get_scorecard", "open_scorecard", "reset",
]

import secrets
from collections.abc import Awaitable, Callable
from dataclasses import replace
from functools import partial
from typing import Any, Required, TypedDict

from aiohttp import web

from engine.rules import WAIT
from serve import native
from serve.arc import arc_wire as w
from serve.arena.cache import Session
from serve.arena.errors import Conflict, PlayError, RoundClosed, StepAhead
from serve.games.episode import IN_PROGRESS, Outcome
from serve.games.games import GameEntry
from serve.native import SCORECARD_ID, SESSION_ID
from serve.play import Arena
from serve.stores import ANONYMOUS, KeyRecord, StoreUnavailable
from serve.web.schema import (
    ANY,
    BOOLEAN,
    INT,
    INTEGER,
    JSON,
    MAP,
    NUMBER,
    STR,
    TEXT,
    Field,
    HandlerArgs,
    Invalid,
    Route,
    Unknown,
    arr,
    maybe,
    obj,
    string,
)
from serve.web.web import (
    ARENA,
    STORE_UNAVAILABLE,
    client_ip,
    closes_connection,
    http_status,
    identified,
    inputs,
    refusal_detail,
    register,
    reply,
    reply_bytes,
    same_site_only,
)

TAG = "arc-agi-3"
STATES = [w.NOT_PLAYED, w.NOT_FINISHED, w.WIN, w.GAME_OVER]
ANON_PREFIX = ANONYMOUS
GAME_ID_PATTERN = r"sokoban(?:[-_][A-Za-z0-9_.\-]{1,64})?"
_GAME_ID = Field("game_id", STR, "the game: its id from GET /api/games (or 'sokoban-VERSION'; "
                 "the base id 'sokoban' where one game is served)", pattern=GAME_ID_PATTERN,
                 refers_to="game")
_CARD_ID = Field("card_id", STR, "the scorecard", pattern=SCORECARD_ID, refers_to="scorecard")
_GUID = Field("guid", STR, "the session id a RESET returned", pattern=SESSION_ID,
              refers_to="game")
_XY = (Field("x", INT, "accepted for ACTION6 and ignored", required=False, minimum=0,
             maximum=63),
       Field("y", INT, "accepted for ACTION6 and ignored", required=False, minimum=0,
             maximum=63))
_STEP = replace(native.STEP, description=(
    "this change's number: the game's actions and restarts so far plus one (the RESET that "
    "starts the game is none). A step already played is answered with the frame it was "
    "answered with and not played again; one further ahead is a 409 STEP_AHEAD. A RESET "
    "where the game allows no restarts changes nothing and ignores it"))
REASONING = Field("reasoning", ANY, "any JSON the agent attaches, at most "
                  f"{w.MAX_REASONING_BYTES // 1024} KB; echoed in action_input",
                  required=False, max_bytes=w.MAX_REASONING_BYTES)
_CMD_ERRORS = {200: "FrameData", 400: "bad body, the game is over, or a scorecard or session "
               "of a version this server does not serve", 401: "missing or unknown key",
               404: "unknown game, scorecard or guid (or another key's)",
               409: "the version's round is over, or a step that skips ahead",
               429: "too many games in flight"}

# -- the answers' shapes ------------------------------------------------------------------------
GAME = obj({"game_id": string(GAME_ID_PATTERN), "title": TEXT, "tags": arr(TEXT),
            "baseline_actions": arr(INTEGER), "class_name": TEXT, "default_fps": INTEGER})
_RUN = obj({"id": TEXT, "guid": maybe(TEXT), "score": NUMBER, "levels_completed": INTEGER,
            "actions": INTEGER, "resets": INTEGER, "state": string(enum=STATES),
            "completed": BOOLEAN, "level_scores": arr(NUMBER), "level_actions": arr(INTEGER),
            "level_baseline_actions": arr(INTEGER)})
SCORECARD = obj({"card_id": string(SCORECARD_ID), "score": NUMBER,
                 "environments": arr(obj({"id": TEXT, "runs": arr(_RUN)})),
                 "tags_scores": arr(MAP), "name": TEXT, "version": TEXT, "closed": BOOLEAN,
                 "result": maybe(MAP), "success_interval": maybe(arr(NUMBER)),
                 "tags": arr(TEXT), "source_url": maybe(TEXT),
                 "opaque": {"nullable": True}})
FRAME_DATA = obj({"game_id": string(GAME_ID_PATTERN), "guid": string(SESSION_ID),
                  "state": string(enum=STATES), "levels_completed": INTEGER,
                  "win_levels": INTEGER,
                  "action_input": obj({"id": INTEGER, "data": MAP}, {"reasoning": {}}),
                  "available_actions": arr(INTEGER), "full_reset": BOOLEAN,
                  "frame": arr(arr(arr(INTEGER)))})

_route = partial(Route, tag=TAG, error_schema="ArcError", invalid_status=400)

ROUTES = (
    _route("arc_games", "GET", "/api/games", "ARC-AGI-3: the games served (one per version).",
           responses={200: "list of game objects"}, bodies={200: arr(GAME)}, store=False),
    _route("arc_anonkey", "GET", "/api/games/anonkey",
           "ARC-AGI-3: a new key under an anonymous name (anon-...): it plays, but a round's "
           "standings leave it out, and anonymous keys have their own daily allowance per "
           "address, apart from named keys'; refused to pages of other sites.",
           responses={200: "{api_key}", 400: "sent by a page of another site (Sec-Fetch-Site "
                      "or Origin)", 429: "too many anonymous keys today"},
           bodies={200: obj({"api_key": TEXT})},
           head=False),  # a GET that creates a key: a HEAD must not
    _route("arc_game", "GET", "/api/games/{game_id}", "ARC-AGI-3: one game by full or base id.",
           params=(_GAME_ID,), responses={200: "the game object", 404: "unknown game"},
           bodies={200: GAME}, store=False),
    _route("arc_open", "POST", "/api/scorecard/open",
           "ARC-AGI-3: open a scorecard (tags, source_url and opaque are kept and shown with "
           "it; competition_mode is accepted and ignored).", auth=True,
           body=native.CARD_META,
           responses={200: "{card_id}", 400: "the body is not a JSON object, or a field of "
                      "it out of bounds", 401: "missing or unknown key",
                      409: "the round of every served version is over",
                      429: "daily scorecard limit reached"},
           bodies={200: obj({"card_id": string(SCORECARD_ID)})},
           links={"view": ("arc_scorecard", {"card_id": "/card_id"})}),
    _route("arc_close", "POST", "/api/scorecard/close",
           "ARC-AGI-3: close, score and post a scorecard to the leaderboard; again returns the "
           "same scorecard.", auth=True, body=(_CARD_ID,),
           responses={200: "the scorecard", 400: "bad body, or a scorecard of another version",
                      401: "missing or unknown key",
                      404: "unknown scorecard (or another key's)",
                      409: "a scorecard of a round that is over (it is not ranked)"},
           bodies={200: SCORECARD}),
    _route("arc_scorecard", "GET", "/api/scorecard/{card_id}",
           "ARC-AGI-3: the scorecard, live or closed.", auth=True, params=(_CARD_ID,),
           responses={200: "the scorecard", 400: "a scorecard of another version",
                      401: "missing or unknown key",
                      404: "unknown scorecard (or another key's)"},
           bodies={200: SCORECARD}),
    _route("arc_reset", "POST", "/api/cmd/RESET",
           "ARC-AGI-3: start the game on a scorecard. With the guid of a started game: where "
           "the game allows restarts (its title and restarts-MODE tag say), the current level "
           "again if an action was taken in it since it began, else the whole game; where it "
           "allows none (hidden benchmark games), its current frame, nothing replayed.",
           auth=True,
           body=(_CARD_ID, _GAME_ID, replace(_GUID, description="the session, once started",
                                             required=False, nullable=True), _STEP),
           responses={**_CMD_ERRORS, 503: "the store did not take it; retry"},
           bodies={200: FRAME_DATA}),
    *[_route(f"arc_action{n}", "POST", f"/api/cmd/ACTION{n}",
             f"ARC-AGI-3: {'move ' + 'up down left right'.split()[n - 1] if n in w.MOVES else
                           'a no-op that uses a step'}.", auth=True,
             body=(_GAME_ID, _GUID, *_XY, REASONING, _STEP),
             responses={**_CMD_ERRORS, 503: "the action could not be stored and was not played; "
                        "retry it"}, bodies={200: FRAME_DATA}) for n in range(1, 8)],
)


def _served_game(arena: Arena, requested: str) -> GameEntry:
    """The served game ``requested`` names (``arc_wire.games_named``): exactly one, else
    refused, never another game."""
    playable = [g for g in arena.games if g.episodes <= w.MAX_LEVELS]
    named = w.games_named(requested, [g.version.version for g in arena.games])
    ids = ", ".join(repr(w.game_id(g.version.version)) for g in playable)
    if len(named) > 1:
        raise w.ArcError(404, w.GAME_NOT_AVAILABLE_ERROR,
                         f"game id {requested!r} names {len(named)} served games; ask for one "
                         f"by its own id: GET /api/games lists {ids}")
    entry = arena.games.by_version(named[0]) if named else None
    if entry is None:
        raise w.ArcError(404, w.GAME_NOT_AVAILABLE_ERROR,
                         f"game {requested!r} is not served here; GET /api/games lists {ids}")
    if entry.episodes > w.MAX_LEVELS:
        raise w.ArcError(404, w.GAME_NOT_AVAILABLE_ERROR,
                         f"this version has {entry.episodes} levels, more than the "
                         f"{w.MAX_LEVELS} an ARC game can count; use the native protocol")
    return entry


def _info(entry: GameEntry) -> dict[str, Any]:
    v = entry.version
    # a pool's levels are chosen as a session plays: no episode's optimum is known before
    baselines = [lv.optimal_moves for lv in v.levels] if v.pool is None else []
    return w.game_info(v.version, v.game, baselines, entry.restarts)


def _frame(request: web.Request, session: Session, grids: list[bytes], action: int,
           data: dict[str, Any], *, reasoning: Any, full_reset: bool) -> web.Response:
    return reply_bytes(request, _frame_body(session, grids, action, data, reasoning, full_reset),
                       "application/json")


def _frame_body(session: Session, grids: list[bytes], action: int, data: dict[str, Any],
                reasoning: Any, full_reset: bool) -> bytes:
    """The FrameData of ``session`` as it is now."""
    solved = sum(e.solved for e in session.episodes)
    return w.frame_data(game=w.game_id(session.version.version), guid=session.id, grids=grids,
                        state=w.arc_state(session.state == IN_PROGRESS, solved, session.length),
                        levels_completed=solved, win_levels=session.length,
                        action=action, data=data, reasoning=reasoning, full_reset=full_reset)


def _current(session: Session) -> list[bytes]:
    """The picture the agent is looking at: the episode in play, or the last one played."""
    if session.in_flight:
        run = session.episodes[session.in_flight[0]]
    else:
        played = [e for e in session.episodes if e.game is not None]
        run = played[-1] if played else session.episodes[-1]
    return [w.grid(run.served.painter, run.game.state if run.game is not None else None)]


async def _runs(arena: Arena, key: KeyRecord, view: dict[str, Any]) -> list[dict[str, Any]]:
    """The ARC runs of a scorecard: one per game started on it."""
    runs = []
    for progress in view["games"].values():
        if progress["session_id"] is None:
            continue
        replay = await arena.replay(progress["session_id"], key)
        episodes = replay["episodes"]
        solved = sum(e["solved"] for e in episodes)
        state = w.arc_state(replay["state"] == IN_PROGRESS, solved, len(episodes))
        runs.append(w.run(w.game_id(replay["version"]), replay["session_id"], state, episodes))
    return runs


async def _scorecard(arena: Arena, key: KeyRecord, card_id: str) -> dict[str, Any]:
    view = await arena.scorecard_view(key, card_id)
    return w.scorecard(card_id, await _runs(arena, key, view), name=view["name"],
                       version=view["version"], closed=view["closed"], result=view["score"],
                       meta={k: view[k] for k in ("tags", "source_url", "opaque")})


# -- handlers --------------------------------------------------------------------------------
async def games(request: web.Request, arena: Arena, key: None, args: HandlerArgs) -> web.Response:
    """ARC-AGI-3 ``GET /api/games``: the served games an ARC client may play."""
    return reply(request, [_info(g) for g in arena.games if g.episodes <= w.MAX_LEVELS])


async def anonkey(request: web.Request, arena: Arena, key: None, args: HandlerArgs) -> web.Response:
    """An anonymous API key for keyless ARC play (same site only)."""
    same_site_only(request)
    address = client_ip(request, arena.limits.trusted_proxies)
    api = await arena.create_key(ANON_PREFIX + secrets.token_hex(6), address, anonymous=True)
    return reply(request, {"api_key": api})


async def game(request: web.Request, arena: Arena, key: None, args: HandlerArgs) -> web.Response:
    """One served game's ARC info."""
    return reply(request, _info(_served_game(arena, request.match_info["game_id"])))


async def open_scorecard(request: web.Request, arena: Arena, key: KeyRecord,
                         args: HandlerArgs) -> web.Response:
    """ARC ``open_scorecard``: a scorecard on the key; its card id."""
    card, _ = await arena.open_scorecard(key, meta=native.card_meta(args))
    return reply(request, {"card_id": card.id})


async def close_scorecard(request: web.Request, arena: Arena, key: KeyRecord,
                          args: HandlerArgs) -> web.Response:
    """ARC ``close_scorecard``: close it; its final scorecard."""
    await arena.close(key, args["card_id"])
    return reply(request, await _scorecard(arena, key, args["card_id"]))


async def get_scorecard(request: web.Request, arena: Arena, key: KeyRecord,
                        args: HandlerArgs) -> web.Response:
    """ARC ``GET /api/scorecard/{card_id}``: a scorecard's runs so far."""
    return reply(request, await _scorecard(arena, key, request.match_info["card_id"]))


async def reset(request: web.Request, arena: Arena, key: KeyRecord,
                args: HandlerArgs) -> web.Response:
    """Start the game on a scorecard; with the guid of a started one, restart it as its
    ``restarts`` allows (the current level after an action in it, else the whole game), or
    where it allows none, answer its current frame."""
    entry = _served_game(arena, args["game_id"])
    game = w.game_id(entry.version.version)
    card_id, guid = args["card_id"], args["guid"]
    view = await arena.scorecard_view(key, card_id)
    if view["closed"]:
        raise w.ArcError(400, w.VALIDATION_ERROR,
                         f"scorecard {card_id} is closed; open a new one to play again")
    started = (view["games"].get(entry.name) or {}).get("session_id")
    full_reset = False
    if guid is not None and guid != started:
        raise w.ArcError(404, w.GAME_NOT_STARTED_ERROR,
                         f"no game {guid!r} on scorecard {card_id}; send RESET without a guid "
                         "to start one")
    if started is None:
        try:
            session = await arena.start(key, card_id, entry.name, 1,
                                        client_ip(request, arena.limits.trusted_proxies))
            full_reset = True
        except Conflict:  # a concurrent RESET started it first
            view = await arena.scorecard_view(key, card_id)
            started = (view["games"].get(entry.name) or {}).get("session_id")
            if started is None:
                raise
    data = {"game_id": game}
    if not full_reset and started is not None:  # started here or by the concurrent RESET
        if guid is not None and entry.restarts != "none":
            body = await arena.restart(key, started, None, lambda session, scope: _frame_body(
                session, _current(session), 0, data, None, scope == "game"), args["step"])
            return reply_bytes(request, body, "application/json")
        session = await arena.current(key, started)  # 404 once expired, like an action
    return _frame(request, session, _current(session), 0, data, reasoning=None,
                  full_reset=full_reset)


class ActionArgs(TypedDict, total=False):
    """``ACTION1``-``ACTION7``'s body: the game and session it plays (both required), the
    ignored ACTION6 coordinates, the agent's reasoning and the step."""

    game_id: Required[str]
    guid: Required[str]
    x: int | None
    y: int | None
    reasoning: JSON
    step: int | None


def action_handler(number: int) -> Callable[..., Awaitable[web.Response]]:
    """The handler of ``POST /api/cmd/ACTION{number}``."""
    move = w.MOVES.get(number, WAIT)

    async def act(request: web.Request, arena: Arena, key: KeyRecord,
                  args: ActionArgs) -> web.Response:
        """ARC ``ACTION{number}``: one move (or a wait) in the game; the frame after it."""
        game = w.game_id(_served_game(arena, args["game_id"]).version.version)
        data: dict[str, Any] = {"game_id": game}
        if number == 6:
            data.update({k: args[k] for k in ("x", "y") if args[k] is not None})

        def answer(session: Session, outcome: Outcome) -> bytes:
            run = session.episodes[outcome.episode]
            grids = [w.grid(run.served.painter, run.game.state)]
            if outcome.episode_done and session.in_flight:
                nxt = session.episodes[session.in_flight[0]]
                grids.append(w.grid(nxt.served.painter, nxt.game.state))
            return _frame_body(session, grids, number, data, args["reasoning"], False)

        body = await arena.act(key, args["guid"], move, None, answer, args["step"])
        return reply_bytes(request, body, "application/json")

    return act


HANDLERS: dict[str, Callable[..., Awaitable[web.Response]]] = {
    "arc_games": games, "arc_anonkey": anonkey, "arc_game": game,
    "arc_open": open_scorecard, "arc_close": close_scorecard, "arc_scorecard": get_scorecard,
    "arc_reset": reset, **{f"arc_action{n}": action_handler(n) for n in range(1, 8)}}


def _refusal(request: web.Request, error: w.ArcError,
             retry_after: int | None = None) -> web.Response:
    response = reply(request, error.body(), status=error.status)
    if error.status == 429:  # every limit says when trying again makes sense
        response.headers["Retry-After"] = str(retry_after or 1)
    return response


def bind(app: web.Application, route: Route, handler: Callable[..., Awaitable[Any]]) -> None:
    """Register an ARC route: declared inputs checked, every refusal in the API's shape.

    The native ``serve.web.web.bind`` answers ``{"detail"}``, which ARC clients do not read.
    """
    not_found = w.GAME_NOT_STARTED_ERROR if route.path.startswith("/api/cmd/") else (
        w.NOT_FOUND_ERROR)

    async def endpoint(request: web.Request) -> web.StreamResponse:
        arena = request.app[ARENA]
        try:
            key = await identified(request, arena) if route.auth else None
            return await handler(request, arena, key, await inputs(request, route))
        except web.HTTPException as e:  # a body over the size limit, or too slow
            if e.status < 400:
                raise
            response = _refusal(request, w.ArcError.from_status(e.status,
                                                                refusal_detail(request, e)))
            if closes_connection(e):
                response.force_close()
            return response
        except w.ArcError as e:
            return _refusal(request, e)
        except RoundClosed as e:
            return _refusal(request, w.ArcError(409, w.ROUND_CLOSED_ERROR, e.detail))
        except StepAhead as e:
            return _refusal(request, w.ArcError(409, w.STEP_AHEAD_ERROR, e.detail))
        except StoreUnavailable as e:
            return _refusal(request, w.ArcError.from_status(STORE_UNAVAILABLE, str(e)))
        except PlayError as e:
            response = _refusal(request, w.ArcError.from_status(http_status(e), e.detail,
                                                                not_found),
                                getattr(e, "retry_after", None))
            if closes_connection(e):
                response.force_close()
            return response
        except Unknown as e:
            code = w.GAME_NOT_AVAILABLE_ERROR if e.field == "game_id" else not_found
            return _refusal(request, w.ArcError(404, code, str(e)))
        except Invalid as e:
            return _refusal(request, w.ArcError(400, w.VALIDATION_ERROR, str(e)))

    register(app, route, endpoint)
