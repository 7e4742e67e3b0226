"""The access log: one JSON line per request, for operators, written off the serving loop.

A middleware notes each answered request (time, method, route template, status, latency,
bytes, client address, key name) as a tuple on a deque; a writer thread wakes a few times a
second and turns what piled up into JSON lines, written at once, so the loop never formats
or waits for a write and the thread is not woken per request. A key itself is
never noted, only the name it is bound to, and paths are the route templates, never raw paths
(which hold session and scorecard ids).
"""

from __future__ import annotations

__all__ = ["AccessLog", "FLUSH_SECONDS", "UNMATCHED", "line", "middleware", "route_template"]

import sys
import threading
import time
from collections import deque
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from functools import lru_cache
from json.encoder import encode_basestring as _quoted
from pathlib import Path
from typing import IO

from aiohttp import web

from serve.limits import forwarded_client
from serve.web.web import ARENA, KEY_NAME

FLUSH_SECONDS = 0.2  # how often the writer wakes to write what piled up
UNMATCHED = "(no route)"


class AccessLog:
    """JSON lines to ``target`` (a file path, appended to, or ``-`` for stdout) by a writer
    thread; ``note`` only queues a tuple. Several worker processes may append to one file:
    each batch is one ``write`` of whole lines to a file opened for appending."""

    def __init__(self, target: str | Path) -> None:
        self.target = str(target)
        self._notes: deque[tuple] = deque()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._stream: IO[str] | None = None

    def start(self) -> None:
        """Open the target (``OSError`` if it cannot be) and start the writer."""
        if self._thread is not None:
            return
        self._stream = (sys.stdout if self.target == "-" else
                        open(self.target, "a", encoding="utf-8", buffering=1 << 16))
        self._stop.clear()
        self._thread = threading.Thread(target=self._write, name="access-log", daemon=True)
        self._thread.start()

    def note(self, at: float, method: str, route: str, status: int, *, seconds: float,
             size: int, client: str, key_name: str | None) -> None:
        self._notes.append((at, method, route, status, seconds, size, client, key_name))

    def stop(self) -> None:
        """Write what is noted, then stop the writer and close the file."""
        if self._thread is None:
            return
        self._stop.set()
        self._thread.join()
        self._thread = None
        if self._stream is not None and self._stream is not sys.stdout:
            self._stream.close()
        self._stream = None

    def _write(self) -> None:
        while not self._stop.wait(FLUSH_SECONDS):
            self._flush()
        self._flush()

    def _flush(self) -> None:
        lines = []
        while self._notes:  # appends may go on meanwhile: popleft takes each note once
            lines.append(line(self._notes.popleft()))
        if lines:
            assert self._stream is not None
            self._stream.write("".join(lines))
            self._stream.flush()


def line(note: tuple) -> str:
    """One note as its JSON line, written field by field (the writer shares the serving
    process's interpreter, so its cost per line counts)."""
    at, method, route, status, seconds, size, client, key_name = note
    whole = int(at)
    return (f'{{"time":"{_second(whole)}.{int((at - whole) * 1000):03d}+00:00",'
            f'"method":{_known(method)},"route":{_known(route)},"status":{status},'
            f'"ms":{seconds * 1000:.3f},"bytes":{size},"client":{_quoted(client)},'
            f'"key":{"null" if key_name is None else _quoted(key_name)}}}\n')


@lru_cache(maxsize=4)
def _second(whole: int) -> str:
    return datetime.fromtimestamp(whole, UTC).strftime("%Y-%m-%dT%H:%M:%S")


@lru_cache(maxsize=256)
def _known(text: str) -> str:
    """A method or a route template as a JSON string (few of them: kept once made)."""
    return _quoted(text)


def route_template(request: web.Request) -> str:
    """The template of the route that answered (``/api/sessions/{session_id}/act``)."""
    resource = request.match_info.route.resource
    return resource.canonical if resource is not None else UNMATCHED


def middleware(log: AccessLog) -> Callable[..., Awaitable[web.StreamResponse]]:
    """The middleware noting every request on ``log``; it sits outside the error middleware,
    so it sees the status each refusal leaves with."""

    @web.middleware
    async def logged(request: web.Request,
                     handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
                     ) -> web.StreamResponse:
        t0 = time.perf_counter()
        try:
            response = await handler(request)
        except web.HTTPException as e:  # a redirect (merged slashes) leaves as an exception
            _note(log, request, e.status, t0, len((e.text or "").encode()))
            raise
        size = response.content_length or 0
        _note(log, request, response.status, t0, size)
        return response

    return logged


def _note(log: AccessLog, request: web.Request, status: int, t0: float, size: int) -> None:
    client = forwarded_client(request.remote, request.headers.get("X-Forwarded-For"),
                              request.app[ARENA].limits.trusted_proxies)
    log.note(time.time(), request.method, route_template(request), status,
             seconds=time.perf_counter() - t0, size=size, client=client,
             key_name=request.get(KEY_NAME))
