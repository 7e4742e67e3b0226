"""The browser face: play a public game, a scorecard's page and its replays, the pages' scripts.

A person plays through the same protocol as an agent (the play page's script opens a
scorecard with source ``browser``, starts a session and acts); these routes only serve the
pages and the replays. Which key looks at a page is known only to its script, which sends the
key kept in the browser's localStorage as ``X-API-Key`` to the JSON route of the replays:
a hidden game's boards and actions go to the key that played them and to no one else.
"""

from __future__ import annotations

from importlib import resources

from aiohttp import web

from serve import pages
from serve.play import Arena, NotFound
from serve.schema import Route
from serve.web import api_key, reply, reply_bytes

SCRIPTS = ("board.js", "play.js", "scorecard.js")
MAX_EPISODE_DIGITS = 6

ROUTES = (
    Route("play_page", "GET", "/play/{game}",
          "Play a public game in the browser (a hidden game is refused).", tag="pages",
          json_response=False, responses={200: "HTML", 404: "HTML: unknown or hidden game"}),
    Route("scorecard_page", "GET", "/scorecards/{scorecard_id}",
          "A scorecard's page: tags, Score, per-episode outcomes and a replay viewer.",
          tag="pages", json_response=False, responses={200: "HTML", 404: "HTML: no scorecard"}),
    Route("get_episode_replay", "GET", "/api/replays/{session_id}/episodes/{episode}",
          "One played episode's observations rendered from its stored actions: for a public "
          "game to anyone, for a hidden game only to the key that played it.",
          responses={200: "the pictures, the goal and the step sequence",
                     404: "unknown session or episode, or a hidden game of another key"}),
)


def _html(request: web.Request, text: str, status: int = 200) -> web.Response:
    return reply_bytes(request, text.encode(), "text/html", status)


async def play_page(request: web.Request, arena: Arena, key: None, args: dict) -> web.Response:
    name = request.match_info["game"]
    entry = arena.games.get(name)
    if entry is None or not entry.public:
        return _html(request, pages.refusal(
            404, f"No game {name!r} to play here",
            "Only public games (practice sets and imported collections) can be played in the "
            "browser; a hidden benchmark game is played by agents through the API."), 404)
    return _html(request, pages.play({"name": entry.name, "version": entry.version.version,
                                      "episodes": entry.episodes, "restarts": entry.restarts}))


async def scorecard_page(request: web.Request, arena: Arena, key: None,
                         args: dict) -> web.Response:
    card_id = request.match_info["scorecard_id"]
    try:
        view = await arena.scorecard_outcomes(card_id)
    except NotFound:
        return _html(request, pages.refusal(404, "No such scorecard",
                                            f"There is no scorecard {card_id!r} here."), 404)
    return _html(request, pages.scorecard(view))


async def get_episode_replay(request: web.Request, arena: Arena, key: None,
                             args: dict) -> web.Response:
    text = request.match_info["episode"]
    if not text.isdigit() or len(text) > MAX_EPISODE_DIGITS:
        raise NotFound(f"no episode {text!r}: episodes are numbered 0, 1, 2, ...")
    viewer = await arena.owner_of(api_key(request))
    return reply(request, await arena.replay_frames(request.match_info["session_id"],
                                                    int(text), viewer))


async def script(request: web.Request) -> web.Response:
    name = request.match_info["script"]
    body = resources.files("serve").joinpath("static", name).read_bytes()
    response = reply_bytes(request, body, "application/javascript")
    response.headers["Cache-Control"] = "no-cache"
    return response


HANDLERS = {"play_page": play_page, "scorecard_page": scorecard_page,
            "get_episode_replay": get_episode_replay}


def add_scripts(app: web.Application) -> None:
    """The pages' scripts, same origin (the pages' Content-Security-Policy allows no other)."""
    names = "|".join(s.replace(".", "\\.") for s in SCRIPTS)
    app.router.add_get(f"/static/{{script:(?:{names})}}", script)
