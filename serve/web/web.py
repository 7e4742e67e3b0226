"""HTTP plumbing shared by every face: JSON replies (gzip when accepted), keys, errors, binding.

Declared routes are bound here so that each handler receives inputs already checked against
its ``serve.web.schema.Route``; every refusal leaves as JSON ``{"detail": ...}``.
"""

from __future__ import annotations

__all__ = [
    "ARENA", "BODY_CODINGS", "BodyTooSlow", "BodyUnreadable", "CONNECTIONS", "CodingRefused",
    "GZIP_MIN_BYTES", "HTTP_STATUS", "Handler", "KEY_NAME", "MAX_BODY", "PAGE_HEADERS",
    "ROUTER_PATHS", "STORE_UNAVAILABLE", "accepts_gzip", "api_key", "bind", "body_coding",
    "client_ip", "closes_connection", "error", "errors_as_json", "gunzipped", "http_status",
    "identified", "inputs", "json_body_only", "refusal_detail", "register", "reply", "reply_bytes",
    "router_paths", "same_site_only", "unreadable_body",
]

import asyncio
import json
import logging
import re
import zlib
from collections.abc import Awaitable, Callable, Iterable
from typing import Any, cast
from urllib.parse import urlsplit

from aiohttp import web
from aiohttp.client_exceptions import ClientPayloadError
from aiohttp.http_exceptions import PayloadEncodingError
from aiohttp.web_protocol import RequestPayloadError

from serve.arena.errors import (
    BadRequest,
    Conflict,
    Forbidden,
    Limited,
    NotFound,
    PlayError,
    Unauthorized,
    Unavailable,
    Unprocessable,
    UnsupportedMedia,
)
from serve.limits import ConnectionLimits, Network, client_address
from serve.play import Arena
from serve.stores import StoreUnavailable
from serve.web.schema import HandlerArgs, Invalid, NotFinite, Route, Unknown

log = logging.getLogger("sokoforge.serve")
GZIP_MIN_BYTES = 1024
MAX_BODY = 64 * 1024  # the largest request body taken, decoded
ARENA = web.AppKey("arena", Arena)
KEY_NAME = web.RequestKey("key_name", str)  # the name of the key a request was identified by
CONNECTIONS = web.AppKey("connections", ConnectionLimits)
ROUTER_PATHS = web.AppKey("router_paths", dict)
# the pages are plain HTML and CSS (inline styles) and the docs page's own script: nothing else
# may load, and no other site may frame them
PAGE_HEADERS = {
    "Content-Security-Policy": "default-src 'none'; script-src 'self'; style-src 'self' "
                               "'unsafe-inline'; img-src 'self' data:; connect-src 'self'; "
                               "base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer"}

Handler = Callable[[web.Request, Any, Any, HandlerArgs], Awaitable[web.StreamResponse]]


def accepts_gzip(request: web.Request) -> bool:
    """Whether ``Accept-Encoding`` gives gzip a weight above zero: its own entry (or its
    ``x-gzip`` alias) wherever it stands, else the ``*`` entry."""
    weights: dict[str, float] = {}
    for part in request.headers.get("Accept-Encoding", "").lower().split(","):
        coding, *params = (p.strip() for p in part.split(";"))
        coding = "gzip" if coding == "x-gzip" else coding
        if coding in ("gzip", "*") and coding not in weights:
            weight = next((p[2:] for p in params if p.startswith("q=")), "1")
            try:
                weights[coding] = float(weight)
            except ValueError:
                weights[coding] = 0.0
    return weights.get("gzip", weights.get("*", 0.0)) > 0


def _gzip(data: bytes) -> bytes:
    # level 1: the frames are highly repetitive, so fast compression already shrinks them ~10x
    z = zlib.compressobj(1, zlib.DEFLATED, 31)
    return z.compress(data) + z.flush()


def reply_bytes(request: web.Request, body: bytes, content_type: str,
                status: int = 200) -> web.Response:
    headers = {"Vary": "Accept-Encoding", "X-Content-Type-Options": "nosniff"}
    if content_type == "text/html":
        headers.update(PAGE_HEADERS)
    if len(body) >= GZIP_MIN_BYTES and accepts_gzip(request):
        body = _gzip(body)
        headers["Content-Encoding"] = "gzip"
    return web.Response(body=body, status=status, content_type=content_type, headers=headers)


def reply(request: web.Request, data: Any, status: int = 200) -> web.Response:
    """``data`` as JSON, compressed when the client accepts gzip and the body is worth it."""
    body = json.dumps(data, separators=(",", ":")).encode()
    return reply_bytes(request, body, "application/json", status)


def api_key(request: web.Request) -> str | None:
    """The key from ``X-API-Key`` or ``Authorization: Bearer``."""
    key = request.headers.get("X-API-Key")
    if key:
        return key.strip()
    auth = request.headers.get("Authorization", "")
    scheme, _, token = auth.partition(" ")
    return token.strip() or None if scheme.lower() == "bearer" else None


async def identified(request: web.Request, arena: Any) -> Any:
    """The key record of the request's key (401 if none), its name noted for the access log."""
    key = await arena.identify(api_key(request))
    request[KEY_NAME] = key.name
    return key


def same_site_only(request: web.Request) -> None:
    """Refuse (403) a request a browser sends for a page of another site, which would spend
    its visitor's allowances (keys per address): by ``Sec-Fetch-Site`` where the browser
    sends it, else by ``Origin`` against the ``Host`` asked for. Agents send neither."""
    site = request.headers.get("Sec-Fetch-Site")
    if site is not None:
        if site.strip().lower() in ("same-origin", "none"):
            return
    else:
        origin = request.headers.get("Origin")
        if origin is None or urlsplit(origin.strip()).netloc.lower() == request.host.lower():
            return
    raise Forbidden("a page of another site cannot create keys here; create one from this "
                    "server's own pages or from an agent")


def json_body_only(request: web.Request) -> None:
    """Refuse (415) a body not sent as ``application/json``: the types a page of another site
    may post without the browser asking this server first (a form's, ``text/plain``) are
    not taken."""
    if request.content_type != "application/json" or "Content-Type" not in request.headers:
        raise UnsupportedMedia("send the body as JSON with Content-Type: application/json")


def client_ip(request: web.Request, proxies: tuple[Network, ...]) -> str:
    return client_address(request.remote, request.headers.get("X-Forwarded-For"), proxies)


def error(request: web.Request, status: int, detail: str,
          retry_after: int | None = None) -> web.Response:
    """A refusal as ``{"detail"}``; a 429 always says when to retry."""
    response = reply(request, {"detail": detail}, status=status)
    if retry_after is not None or status == 429:
        response.headers["Retry-After"] = str(retry_after or 1)
    return response


# Each kind of refusal's HTTP status: the one place play's refusals meet HTTP.
HTTP_STATUS: dict[type[PlayError], int] = {
    BadRequest: 400, Unauthorized: 401, Forbidden: 403, NotFound: 404, Conflict: 409,
    UnsupportedMedia: 415, Unprocessable: 422, Limited: 429, Unavailable: 503}


STORE_UNAVAILABLE = 503  # the store cannot take or give anything now (its disk, its file)


def http_status(refusal: PlayError) -> int:
    """The HTTP status of a refusal: its kind's, or its nearest parent kind's (400 for any)."""
    for kind in type(refusal).__mro__:
        if kind in HTTP_STATUS:
            return HTTP_STATUS[kind]
    return 400


class BodyTooSlow(web.HTTPRequestTimeout):
    """The body did not arrive within the configured time; the connection is closed."""


class BodyUnreadable(PlayError):
    """The body is not what its ``Content-Encoding`` says (or broke off); the connection is
    closed, as what follows on it cannot be told apart from the rest of this body."""


def unreadable_body(e: BaseException) -> bool:
    """Whether ``e`` is aiohttp failing to read a request body for the client's fault: a
    ``Content-Encoding`` the bytes do not follow, or a body that broke off."""
    return isinstance(e, (RequestPayloadError, PayloadEncodingError, ClientPayloadError))


def closes_connection(e: BaseException) -> bool:
    """Whether the refusal ``e`` leaves the rest of its body unread on the connection (too
    large, too slow, undecodable): its answer then closes the connection, so those bytes are
    never taken for a next request (whose headers would never arrive: a second, unasked 408)."""
    return (isinstance(e, (BodyTooSlow, BodyUnreadable, CodingRefused))
            or isinstance(e, web.HTTPException) and e.status == 413)


@web.middleware
async def errors_as_json(request: web.Request, handler: Callable) -> web.StreamResponse:
    """Every refusal as JSON ``{"detail"}``; an unexpected fault is logged and answered 500."""
    try:
        return await handler(request)
    except PlayError as e:
        response = error(request, http_status(e), e.detail, getattr(e, "retry_after", None))
        if closes_connection(e):
            response.force_close()
        return response
    except StoreUnavailable as e:
        return error(request, STORE_UNAVAILABLE, str(e))
    except Unknown as e:
        return error(request, 404, str(e))
    except Invalid as e:
        return error(request, 422, str(e))
    except web.HTTPException as e:
        if e.status < 400:
            raise
        response = error(request, e.status, refusal_detail(request, e))
        if "Allow" in e.headers:  # a 405 says which methods the path does take
            response.headers["Allow"] = e.headers["Allow"]
        if closes_connection(e):
            response.force_close()
        return response
    except ConnectionResetError:
        # the client went away mid-request: not a fault of ours, and nobody reads the answer
        return error(request, 400, "the connection was lost before the request arrived")
    except Exception:
        log.exception("unexpected fault on %s %s", request.method, request.path)
        return error(request, 500, "internal error; retry, and report it if it persists")


def refusal_detail(request: web.Request, e: web.HTTPException) -> str:
    """What an aiohttp refusal (no route, wrong method, body too large or too slow) says."""
    return {404: f"no route {request.path}; see /api/docs",
            405: f"{request.method} is not allowed on {request.path}",
            408: "the request body did not arrive in time",
            413: "request body too large"}.get(e.status, e.reason)


def bind(app: web.Application, route: Route, handler: Handler) -> None:
    """Register ``handler`` for ``route``; it gets the key record (if the route needs one)
    and the body and query values checked against the route's declarations."""
    async def endpoint(request: web.Request) -> web.StreamResponse:
        arena = request.app[ARENA]
        key = await identified(request, arena) if route.auth else None
        return await handler(request, arena, key, await inputs(request, route))

    register(app, route, endpoint)


async def inputs(request: web.Request, route: Route) -> HandlerArgs:
    """The path, query and body values of ``request`` checked against ``route``'s
    declarations."""
    args = route.parse_path(request.match_info)
    args.update(route.parse_query(request.query) if route.query else {})
    if route.body is not None:
        coding = body_coding(request)
        limits = request.app.get(CONNECTIONS) or ConnectionLimits()
        try:
            async with asyncio.timeout(limits.body_seconds):
                raw = await request.read()
            if coding is not None:  # gzip or x-gzip: aiohttp decodes no body itself
                raw = gunzipped(raw, MAX_BODY)
        except TimeoutError:
            raise BodyTooSlow() from None
        except Exception as e:
            if not (unreadable_body(e) or isinstance(e, zlib.error)):
                raise
            raise BodyUnreadable(f"the body is not {coding} as its Content-Encoding says" if
                                 coding else "the body broke off before its end") from None
        try:
            args.update(route.parse_body(raw))
        except NotFinite as e:
            raise BadRequest(str(e)) from None
    return cast(HandlerArgs, args)  # the fields' names are HandlerArgs' keys


BODY_CODINGS = ("gzip", "x-gzip", "identity")  # what a request body may be sent in


class CodingRefused(UnsupportedMedia):
    """A request body in a ``Content-Encoding`` the server does not decode; its bytes are
    left unread, so the answer closes the connection."""


def body_coding(request: web.Request) -> str | None:
    """The request body's ``Content-Encoding`` if it is one of ``BODY_CODINGS`` (None when
    there is none); any other, or several, is refused before a byte of the body is read."""
    coding = request.headers.get("Content-Encoding", "").strip().lower()
    if coding in ("", "identity"):
        return None
    if coding not in BODY_CODINGS:
        raise CodingRefused(f"a request body in Content-Encoding {coding[:40]!r} is not taken; "
                            "send it as gzip or uncompressed")
    return coding


def gunzipped(data: bytes, limit: int) -> bytes:
    """``data`` gunzipped, refused (413) when it would grow past ``limit`` bytes."""
    unzip = zlib.decompressobj(31)
    out = unzip.decompress(data, limit + 1)
    if len(out) > limit or unzip.unconsumed_tail:
        raise web.HTTPRequestEntityTooLarge(max_size=limit, actual_size=len(out))
    if not unzip.eof or unzip.unused_data:
        raise zlib.error("not one whole gzip member")
    return out


def router_paths(routes: Iterable[Route]) -> dict[str, str]:
    """Each route's path for aiohttp's router, by operation: a ``{parameter}`` does not match
    a literal segment another route has in its place (``/api/games/{game_id}`` is not
    ``/api/games/anonkey``), so every path belongs to one declared route and its methods."""
    split = {r.operation: r.path.split("/") for r in routes}
    out = {}
    for op, segments in split.items():
        path = []
        for i, segment in enumerate(segments):
            if segment.startswith("{"):
                literals = sorted({other[i] for o, other in split.items() if o != op
                                   and len(other) == len(segments)
                                   and other[:i] == segments[:i] and not other[i].startswith("{")})
                if literals:
                    taken = "|".join(re.escape(lit) for lit in literals)
                    segment = f"{{{segment[1:-1]}:(?!(?:{taken})$)[^/]+}}"
            path.append(segment)
        out[op] = "/".join(path)
    return out


def register(app: web.Application, route: Route,
             endpoint: Callable[[web.Request], Awaitable[web.StreamResponse]]) -> None:
    """Add ``endpoint`` under ``route``'s method, path (``router_paths``) and name; a GET
    also answers HEAD unless the route says otherwise."""
    endpoint.__name__ = route.operation
    path = app.get(ROUTER_PATHS, {}).get(route.operation, route.path)
    if route.method == "GET":
        app.router.add_get(path, endpoint, name=route.operation, allow_head=route.head)
    else:
        app.router.add_route(route.method, path, endpoint, name=route.operation)
