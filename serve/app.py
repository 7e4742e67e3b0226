"""The aiohttp application: the protocol faces, the documentation and the HTML pages.

``build_app`` wires an ``Arena`` (game logic over a store) to the routes; start-up opens the
store (sessions load from it when first used), a background task expires idle ones.
"""

from __future__ import annotations

__all__ = [
    "ACCESS_LOG", "EXPIRY_SWEEP_SECONDS", "FACES", "MAX_BODY", "PAGE_ROUTES", "PUBLIC_URL",
    "all_routes", "build_app", "public_url", "url_host",
]

import asyncio
import contextlib
import ipaddress
from importlib import resources
from typing import Any
from urllib.parse import urlsplit

from aiohttp import web

from serve import native
from serve.arc import arc
from serve.arena.errors import NotFound
from serve.browser import browser, pages
from serve.limits import ConnectionLimits
from serve.play import Arena
from serve.stores import StoreUnavailable
from serve.web.access_log import AccessLog
from serve.web.access_log import middleware as access_middleware
from serve.web.schema import MAP, TEXT, HandlerArgs, Route, obj, openapi
from serve.web.web import (
    ARENA,
    CONNECTIONS,
    MAX_BODY,
    ROUTER_PATHS,
    bind,
    errors_as_json,
    reply,
    reply_bytes,
    router_paths,
)

PUBLIC_URL = web.AppKey("public_url", str)

EXPIRY_SWEEP_SECONDS = 30.0

PAGE_ROUTES = (
    Route("openapi", "GET", "/api/openapi.json", "This schema.", tag="documentation",
          responses={200: "the OpenAPI document"},
          bodies={200: obj({"openapi": TEXT, "info": MAP, "paths": MAP})}, store=False),
    Route("docs", "GET", "/api/docs", "An interactive page built from the schema.",
          tag="documentation", json_response=False, responses={200: "HTML"}, store=False),
    Route("landing", "GET", "/", "What is served and how to connect.", tag="pages",
          json_response=False, responses={200: "HTML"}, store=False),
    Route("leaderboard_page", "GET", "/leaderboard", "The leaderboard as an HTML table.",
          tag="pages", json_response=False,
          query=native.LEADERBOARD_QUERY,
          responses={200: "HTML", 404: "a game this server does not serve",
                     422: "bad version, game or limit"}),
)


# each protocol face is a module with ROUTES (declarations) and HANDLERS (by operation), and
# maybe its own ``bind`` (the ARC-AGI-3 face answers refusals in its API's shape)
FACES = (native, arc, browser)


def all_routes() -> list[Route]:
    return [r for face in FACES for r in face.ROUTES] + list(PAGE_ROUTES)


def public_url(text: str) -> str:
    """``text`` as the base URL the pages tell clients to use (scheme, host, port, maybe a
    path), without a trailing slash; ``ValueError`` says what is wrong with it."""
    try:
        parts = urlsplit(text.strip())
        parts.port  # noqa: B018 - raises on a port that is not a number in 0-65535
    except ValueError as e:
        raise ValueError(f"{text!r} is not a URL: {e}") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"{text!r}: expected http://HOST[:PORT][/PATH] or https://...")
    if parts.query or parts.fragment or parts.username or parts.password:
        raise ValueError(f"{text!r}: no query, fragment or credentials in a public URL")
    return f"{parts.scheme}://{parts.netloc}{parts.path}".rstrip("/")


def _local_origin(request: web.Request) -> str:
    """The address the server is reached at on this machine: the listening socket's own, never
    the client's ``Host`` header (which anyone can set)."""
    sockname = request.transport.get_extra_info("sockname") if request.transport else None
    if not sockname:
        return "http://localhost"
    return f"http://{url_host(str(sockname[0]))}:{sockname[1]}"


def url_host(host: str) -> str:
    """``host`` as a URL writes it: an IPv6 address in brackets (``[::]``), others as given."""
    with contextlib.suppress(ValueError):
        if ipaddress.ip_address(host).version == 6:
            return f"[{host}]"
    return host


ACCESS_LOG = web.AppKey("access_log", AccessLog)


def build_app(arena: Arena, public: str | None = None,
              connections: ConnectionLimits | None = None,
              access_log: AccessLog | None = None) -> web.Application:
    """The application serving ``arena``; its store is opened and closed with the app, and
    so is ``access_log`` (one JSON line per request) when given.

    ``public`` is the base URL the pages give (default: the listening address);
    ``connections`` the read deadlines and per-address cap that ``serve.web.connections`` applies.
    """
    # ARC-AGI-3 clients join base URL and path verbatim: a base ending in '/' asks for
    # '//api/...', which is redirected (308: method and body kept) to the merged path
    merge_slashes = web.normalize_path_middleware(append_slash=False, merge_slashes=True)
    middlewares: list[Any] = [errors_as_json, merge_slashes]
    if access_log is not None:
        middlewares.insert(0, access_middleware(access_log))
    app = web.Application(middlewares=middlewares, client_max_size=MAX_BODY)
    app[ARENA] = arena
    if access_log is not None:
        app[ACCESS_LOG] = access_log
    app[CONNECTIONS] = connections or ConnectionLimits()
    app[ROUTER_PATHS] = router_paths(all_routes())
    if public is not None:
        app[PUBLIC_URL] = public_url(public)
    for face in FACES:
        for route in face.ROUTES:
            getattr(face, "bind", bind)(app, route, face.HANDLERS[route.operation])
    handlers = {"openapi": _openapi, "docs": _docs, "landing": _landing,
                "leaderboard_page": _leaderboard_page}
    for route in PAGE_ROUTES:
        bind(app, route, handlers[route.operation])
    app.router.add_get("/api/docs/{asset:docs\\.(?:js|css)}", _asset)
    browser.add_scripts(app)
    app.cleanup_ctx.append(_lifetime)
    return app


async def _lifetime(app: web.Application):
    arena: Arena = app[ARENA]
    access_log = app.get(ACCESS_LOG)
    if access_log is not None:
        access_log.start()
    await arena.store.start()
    arena.rounds.serve_from(await arena.store.identity(),
                            [g.version.version for g in arena.games])

    async def sweep() -> None:
        while True:
            await asyncio.sleep(EXPIRY_SWEEP_SECONDS)
            # a store that cannot be written now (said in the log) is swept again later
            with contextlib.suppress(StoreUnavailable):
                await arena.expire_idle()

    task = asyncio.create_task(sweep())
    yield
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
    await arena.store.close()
    if access_log is not None:
        access_log.stop()


async def _openapi(request: web.Request, arena: Arena, key: None,
                   args: HandlerArgs) -> web.Response:
    served = ", ".join(f"{g} {v}" for g, v in arena.games.versions().items())
    doc = openapi(all_routes(), title=f"sokoforge: {served}", version=arena.version.version,
                  description="The agent protocol over hidden dataset versions (one game "
                              "each): keys, scorecards, sessions of rendered frames, scores, "
                              "leaderboard. Safe retries: number each change of a session "
                              "with `step` (the Frame's step plus one); a step sent again is "
                              "answered as it was first and played once, so a lost answer "
                              "is retried by sending the same request.")
    return reply(request, doc)


def _static(name: str) -> bytes:
    return resources.files("serve").joinpath("static", name).read_bytes()


async def _docs(request: web.Request, arena: Arena, key: None, args: HandlerArgs) -> web.Response:
    return reply_bytes(request, _static("docs.html"), "text/html")


async def _asset(request: web.Request) -> web.Response:
    name = request.match_info["asset"]
    kind = "application/javascript" if name.endswith(".js") else "text/css"
    return reply_bytes(request, _static(name), kind)


async def _landing(request: web.Request, arena: Arena, key: None,
                   args: HandlerArgs) -> web.Response:
    origin = request.app.get(PUBLIC_URL) or _local_origin(request)
    return reply_bytes(request, pages.landing(arena.spec(), origin).encode(), "text/html")


async def _leaderboard_page(request: web.Request, arena: Arena, key: None,
                            args: HandlerArgs) -> web.Response:
    if args["version"] is not None or args["game"] is not None:
        boards = [await arena.leaderboard(args["version"], args["limit"], args["game"])]
    else:  # every served game's version, one table each
        boards = [await arena.leaderboard(None, args["limit"], g) for g in arena.games.names]
    playable = frozenset(g.name for g in arena.games if g.public)
    lines = []
    for board in boards:  # a served version's line, where `sokoforge irt --line` linked it
        if board.get("game") and board["version"] == board["served"].get(board["game"]):
            try:
                lines.append(arena.line(board["game"]))
            except NotFound:
                pass
    return reply_bytes(request, pages.leaderboard(boards, playable, lines).encode(),
                       "text/html")
