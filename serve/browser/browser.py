"""The browser face: play a public game, a scorecard's page and its replays, the pages' scripts.

A person plays through the same protocol as an agent (the play page's script opens a
scorecard with source ``browser``, starts a session and acts); these routes only serve the
pages and the replays. Which key looks at a page is known only to its script, which sends the
key kept in the browser's localStorage as ``X-API-Key`` to the JSON route of the replays:
a hidden game's boards and actions go to the key that played them and to no one else.
"""

from __future__ import annotations

__all__ = [
    "EPISODE_REPLAY", "EpisodeArgs", "GameArgs", "HANDLERS", "ROUTES", "SCRIPTS", "SolutionArgs",
    "add_scripts", "get_episode_replay", "get_solution", "play_page", "scorecard_page", "script",
]

from importlib import resources
from typing import TypedDict

from aiohttp import web

from serve.arena.errors import NotFound
from serve.browser import pages
from serve.native import GAME_NAME, SCORECARD_ID, SESSION_ID
from serve.play import Arena
from serve.web.schema import (
    BOOLEAN,
    INTEGER,
    STR,
    TEXT,
    Field,
    HandlerArgs,
    Route,
    arr,
    obj,
    string,
)
from serve.web.web import api_key, reply, reply_bytes

SCRIPTS = ("board.js", "play.js", "scorecard.js")
FAVICON = "favicon.svg"

EPISODE_REPLAY = obj({"session_id": string(SESSION_ID), "game": TEXT, "version": TEXT,
                      "episode": INTEGER, "actions": string("[UDLR.|]*"), "solved": BOOLEAN,
                      "steps": INTEGER, "optimal": INTEGER, "max_steps": INTEGER,
                      "deadlocked": BOOLEAN, "shape": arr(INTEGER), "encoding": TEXT,
                      "goal": TEXT, "pictures": arr(TEXT), "sequence": arr(INTEGER)})

SOLUTION_REPLAY = obj({"game": TEXT, "version": TEXT, "episode": INTEGER,
                      "actions": string("[UDLR]*"), "steps": INTEGER, "optimal": INTEGER,
                      "max_steps": INTEGER, "shape": arr(INTEGER), "encoding": TEXT,
                      "goal": TEXT, "pictures": arr(TEXT), "sequence": arr(INTEGER)})

ROUTES = (
    Route("play_page", "GET", "/play/{game}",
          "Play a public game in the browser (a hidden game is refused).", tag="pages",
          params=(Field("game", STR, "the game's name", pattern=GAME_NAME, refers_to="game"),),
          json_response=False, responses={200: "HTML", 404: "HTML: unknown or hidden game"},
          store=False),
    Route("scorecard_page", "GET", "/scorecards/{scorecard_id}",
          "A scorecard's page: tags, Score, per-episode outcomes and a replay viewer.",
          tag="pages", json_response=False,
          params=(Field("scorecard_id", STR, "the scorecard's id", pattern=SCORECARD_ID,
                        refers_to="scorecard"),),
          responses={200: "HTML", 404: "HTML: no scorecard of that id; JSON ({detail}): an id "
                                       "not of the form sc- and 24 hex digits"}),
    Route("get_episode_replay", "GET", "/api/replays/{session_id}/episodes/{episode}",
          "One played episode's observations rendered from its stored actions: for a public "
          "game to anyone, for a hidden game only to the key that played it.",
          params=(Field("session_id", STR, "the session's id", pattern=SESSION_ID,
                        refers_to="session"),
                  Field("episode", STR, "the episode's index", pattern="[0-9]{1,6}",
                        refers_to="episode")),
          responses={200: "the pictures, the goal and the step sequence",
                     404: "unknown session or episode, or a hidden game of another key"},
          bodies={200: EPISODE_REPLAY}),
    Route("get_solution", "GET", "/api/solutions/{game}/{episode}",
          "A public game's level played by its optimal solution, as a replay's observations "
          "(a hidden game's levels are never shown).",
          params=(Field("game", STR, "the game's name", pattern=GAME_NAME, refers_to="game"),
                  Field("episode", STR, "the level's index in play order (from 0)",
                        pattern="[0-9]{1,6}", refers_to="episode")),
          responses={200: "the pictures, the goal and the step sequence",
                     404: "unknown or hidden game, or no such level"},
          bodies={200: SOLUTION_REPLAY}, store=False),
)


def _html(request: web.Request, text: str, status: int = 200) -> web.Response:
    return reply_bytes(request, text.encode(), "text/html", status)


class GameArgs(TypedDict):
    """``/play/{game}``'s argument."""

    game: str


class EpisodeArgs(TypedDict):
    """A replay's path: the session and the episode's index (its digits)."""

    session_id: str
    episode: str


class SolutionArgs(TypedDict):
    """A solution's path: the game and the level's index in play order (its digits)."""

    game: str
    episode: str


async def play_page(request: web.Request, arena: Arena, key: None,
                    args: GameArgs) -> web.Response:
    name = args["game"]
    entry = arena.games.get(name)
    if entry is None or not entry.public:
        return _html(request, pages.refusal(
            404, f"No game {name!r} to play here",
            "Only public games (practice sets and imported collections) can be played in the "
            "browser; a hidden benchmark game is played by agents through the API."), 404)
    return _html(request, pages.play({"name": entry.name, "version": entry.version.version,
                                      "episodes": entry.episodes, "restarts": entry.restarts,
                                      "order": entry.version.order}))


async def scorecard_page(request: web.Request, arena: Arena, key: None,
                         args: HandlerArgs) -> web.Response:
    card_id = args["scorecard_id"]
    try:
        view = await arena.scorecard_outcomes(card_id)
    except NotFound:
        return _html(request, pages.refusal(404, "No such scorecard",
                                            f"There is no scorecard {card_id!r} here."), 404)
    return _html(request, pages.scorecard(view))


async def get_episode_replay(request: web.Request, arena: Arena, key: None,
                             args: EpisodeArgs) -> web.Response:
    viewer = await arena.owner_of(api_key(request))
    return reply(request, await arena.replay_frames(args["session_id"], int(args["episode"]),
                                                    viewer))


async def get_solution(request: web.Request, arena: Arena, key: None,
                       args: SolutionArgs) -> web.Response:
    return reply(request, arena.solution_frames(args["game"], int(args["episode"])))


async def script(request: web.Request) -> web.Response:
    """A static file of the pages: a script (always revalidated) or the icon."""
    name = request.match_info.get("script", FAVICON)
    body = resources.files("serve").joinpath("static", name).read_bytes()
    icon = name == FAVICON
    response = reply_bytes(request, body, "image/svg+xml" if icon else "application/javascript")
    response.headers["Cache-Control"] = "max-age=86400" if icon else "no-cache"
    return response


HANDLERS = {"play_page": play_page, "scorecard_page": scorecard_page,
            "get_episode_replay": get_episode_replay, "get_solution": get_solution}


def add_scripts(app: web.Application) -> None:
    """The pages' scripts and icon, same origin (the pages' Content-Security-Policy allows no
    other); the icon also where a browser asks for one unprompted, ``/favicon.ico``."""
    names = "|".join(s.replace(".", "\\.") for s in (*SCRIPTS, FAVICON))
    app.router.add_get(f"/static/{{script:(?:{names})}}", script)
    app.router.add_get("/favicon.ico", script)
