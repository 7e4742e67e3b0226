"""The server's side of each TCP connection: read deadlines, a cap per address, JSON refusals.

aiohttp waits forever for a request's headers and caps nothing per client, so a few hundred
slow sockets could hold every descriptor; ``listen`` serves an app with ``GuardedHandler``,
which closes a connection that is idle or slow to send its headers, refuses one address more
than its share, and answers a malformed request in JSON without echoing what it sent.
"""

from __future__ import annotations

__all__ = [
    "ACCEPT_FAULT", "ACCEPT_LOG_SECONDS", "AcceptErrorLog", "Guard", "GuardedHandler",
    "GuardedSite", "REFUSAL_RETRY_SECONDS", "listen", "raw_response",
]

import asyncio
import json
import logging
import time
from collections import Counter
from typing import Any

from aiohttp import web
from aiohttp.web_protocol import RequestHandler

from serve.limits import ConnectionLimits, Network, address_subject, trusted
from serve.web.web import ARENA, CONNECTIONS, unreadable_body

log = logging.getLogger("sokoforge.serve")
REFUSAL_RETRY_SECONDS = 5
ACCEPT_LOG_SECONDS = 10.0
ACCEPT_FAULT = "socket.accept() out of system resource"


def raw_response(status: int, reason: str, detail: str,
                 headers: dict[str, str] | None = None) -> bytes:
    """A whole HTTP/1.1 answer with a JSON ``{"detail"}`` body that closes the connection,
    for refusals sent before (or instead of) a request reaching the application."""
    body = json.dumps({"detail": detail}).encode()
    head = "".join(f"{k}: {v}\r\n" for k, v in (headers or {}).items())
    return (f"HTTP/1.1 {status} {reason}\r\nContent-Type: application/json; charset=utf-8\r\n"
            f"Content-Length: {len(body)}\r\n{head}Connection: close\r\n\r\n").encode() + body


class Guard:
    """The connection rules of one listening site, and its count of connections per address."""

    def __init__(self, limits: ConnectionLimits, proxies: tuple[Network, ...] = ()) -> None:
        self.limits = limits
        self.proxies = proxies
        self.open: Counter[str] = Counter()

    def admit(self, peer: str) -> str | None:
        """The subject a new connection from ``peer`` counts against, or None if refused."""
        if trusted(peer, self.proxies):
            return ""  # a proxy carries many clients: not capped
        subject = address_subject(peer)
        if self.open[subject] >= self.limits.per_address:
            return None
        self.open[subject] += 1
        return subject

    def release(self, subject: str) -> None:
        if subject:
            self.open[subject] -= 1
            if self.open[subject] <= 0:
                del self.open[subject]


class GuardedHandler(RequestHandler):
    """aiohttp's connection handler with a header deadline, a per-address cap and JSON errors.

    Idle connections (before the first request or between requests) close after
    ``idle_seconds`` through aiohttp's keep-alive timer; a request whose headers started
    arriving must complete them within ``header_seconds`` (a 408 then closes it). Bodies are
    timed and decoded where they are read (``serve.web.web.inputs``): aiohttp decodes none, so a
    coding the server does not take is refused before its bytes are read.
    """

    def __init__(self, manager: Any, guard: Guard, **kwargs: Any) -> None:
        limits = guard.limits
        super().__init__(manager, keepalive_timeout=limits.idle_seconds,
                         lingering_time=min(10.0, limits.body_seconds),
                         access_log=None,  # type: ignore[arg-type]  # None: no aiohttp log
                         auto_decompress=False, **kwargs)
        self._guard = guard
        self._subject: str | None = None
        self._header_timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        peer = transport.get_extra_info("peername")
        self._subject = self._guard.admit(peer[0] if peer else "unknown")
        if self._subject is None:
            transport.write(raw_response(  # type: ignore[attr-defined]
                429, "Too Many Requests",
                f"this address has {self._guard.limits.per_address} connections open, the "
                "limit; reuse or close one", {"Retry-After": str(REFUSAL_RETRY_SECONDS)}))
            transport.close()
            return
        super().connection_made(transport)

    def connection_lost(self, exc: BaseException | None) -> None:
        if self._subject is None:
            return  # refused: aiohttp never saw this connection
        self._guard.release(self._subject)
        self._subject = None
        self._stop_header_timer()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if self._subject is None:
            return  # refused: whatever it sends before the close is not read
        super().data_received(data)
        if self._request_in_progress or self._messages or self._force_close:
            self._stop_header_timer()  # headers complete: the request is being handled
        elif data and self._header_timer is None:
            self._header_timer = self._loop.call_later(self._guard.limits.header_seconds,
                                                       self._headers_late)

    def _stop_header_timer(self) -> None:
        if self._header_timer is not None:
            self._header_timer.cancel()
            self._header_timer = None

    def _headers_late(self) -> None:
        self._header_timer = None
        if self._request_in_progress or self._messages or self.transport is None:
            return
        self.transport.write(raw_response(
            408, "Request Timeout", f"the request headers did not arrive within "
            f"{self._guard.limits.header_seconds:g} s"))
        self.force_close()

    def log_exception(self, *args: Any, **kw: Any) -> None:
        """aiohttp's log of a fault it caught; one reading the rest of a body the client
        broke (an undecodable or vanished body left behind an answer) is the client's, and
        leaves one line without a traceback."""
        fault = kw.get("exc_info")
        if isinstance(fault, BaseException) and (unreadable_body(fault) or isinstance(
                fault, ConnectionError)):
            log.warning("a request body the client broke off or mis-encoded was dropped (%s)",
                        type(fault).__name__)
            return
        super().log_exception(*args, **kw)

    def handle_error(self, request: Any, status: int = 500, exc: BaseException | None = None,
                     message: str | None = None) -> web.StreamResponse:
        """aiohttp's answer to a request it could not parse (or a fault it caught), as JSON
        that names the kind of fault and never quotes the request."""
        super().handle_error(request, status, exc, message)  # logs; refuses if already sent
        if status >= 500:
            detail = "internal error; retry, and report it if it persists"
        else:
            kind = f" ({type(exc).__name__})" if exc is not None else ""
            detail = f"malformed HTTP request{kind}; send HTTP/1.1 with valid headers"
        response = web.json_response({"detail": detail}, status=status)
        response.force_close()
        return response


class GuardedSite(web.TCPSite):
    """A TCP site whose connections are served by ``GuardedHandler`` under one ``Guard``."""

    def __init__(self, runner: web.AppRunner, host: str, port: int, guard: Guard,
                 reuse_port: bool = False) -> None:
        super().__init__(runner, host, port, reuse_port=reuse_port)
        self.guard = guard

    async def start(self) -> None:
        await web.BaseSite.start(self)  # registers the site with its runner
        manager = self._runner.server
        assert manager is not None
        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(
            lambda: GuardedHandler(manager, self.guard, loop=loop), self._host, self._port,
            backlog=self._backlog, reuse_port=self._reuse_port)
        self._bound_port = self._server.sockets[0].getsockname()[1]


async def listen(runner: web.AppRunner, host: str, port: int,
                 reuse_port: bool = False) -> GuardedSite:
    """Start serving ``runner``'s app on ``host:port`` (0 picks a free port: ``site.port``)
    under the app's ``ConnectionLimits``; its arena's trusted proxies are not capped. With
    ``reuse_port`` the port is shared with the server's other workers (each caps its own
    connections)."""
    app = runner.app
    guard = Guard(app.get(CONNECTIONS, ConnectionLimits()), app[ARENA].limits.trusted_proxies)
    site = GuardedSite(runner, host, port, guard, reuse_port)
    await site.start()
    return site


class AcceptErrorLog:
    """An event loop exception handler that logs running out of descriptors at accept() at
    most once per ``every`` seconds, as one line with a count, instead of a traceback per
    attempt; every other context goes to the loop's default handler."""

    def __init__(self, every: float = ACCEPT_LOG_SECONDS, clock: Any = time.monotonic) -> None:
        self.every = every
        self.clock = clock
        self.last: float | None = None
        self.missed = 0

    def __call__(self, loop: asyncio.AbstractEventLoop, context: dict) -> None:
        if context.get("message") != ACCEPT_FAULT:
            loop.default_exception_handler(context)
            return
        now = self.clock()
        if self.last is not None and now - self.last < self.every:
            self.missed += 1
            return
        fault = context.get("exception")
        reason = getattr(fault, "strerror", None) or fault
        log.warning("cannot accept connections: %s (%d more such failures since the last "
                    "report); open connections are served, new ones wait", reason, self.missed)
        self.last, self.missed = now, 0
