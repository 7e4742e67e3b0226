"""Running the server: load the versions, claim the store, listen until stopped.

With ``workers`` above 1 the parent forks that many worker processes after loading (they
share the loaded levels copy-on-write); each listens on the same port (``SO_REUSEPORT``, the
kernel spreads connections) and opens the shared store itself. The parent holds the port
while they start, replaces a worker that dies, and forwards SIGINT/SIGTERM. A SQLite store is
claimed by the parent first (exclusive lock, integrity check, schema), so one server and its
workers own it; a PostgreSQL store may be shared by several servers (a fleet).
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import os
import select
import signal
import socket
import sys
import time
from pathlib import Path

from aiohttp import web
from aiohttp.http_exceptions import HttpProcessingError

from serve.access_log import AccessLog
from serve.app import build_app
from serve.dataset import load_version
from serve.games import Registry
from serve.limits import Limits
from serve.play import Arena
from serve.store import StoreError, is_postgres, open_store

log = logging.getLogger("sokoforge.serve")
READY_SECONDS = 120.0


class MalformedRequests(logging.Filter):
    """aiohttp logs an unparseable request with a traceback quoting the offending bytes,
    which may be a header holding a key; such a request is the client's fault, so its
    record keeps one line naming the fault and drops the traceback."""

    def filter(self, record: logging.LogRecord) -> bool:
        fault = record.exc_info[1] if record.exc_info else None
        if isinstance(fault, HttpProcessingError) and 400 <= (fault.code or 400) < 500:
            record.msg = f"{record.getMessage()}: malformed HTTP ({type(fault).__name__})"
            record.args = ()
            record.levelno, record.levelname = logging.WARNING, "WARNING"
            record.exc_info = record.exc_text = None
        return True


class StartError(RuntimeError):
    """The store could not be opened or the address not bound; the message says which."""


def serve_forever(root: str | Path, versions: list[str] | str, db: str, host: str, port: int,
                  limits: Limits, synchronous: str = "NORMAL", workers: int = 1,
                  access_log: str | None = None) -> None:
    """Load ``versions`` (one game each) from ``root`` and serve them until SIGINT or SIGTERM;
    ``access_log`` is a file (appended to by every worker) or ``-`` for one JSON line per
    request."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    logging.getLogger("aiohttp.server").addFilter(MalformedRequests())
    t0 = time.perf_counter()
    names = [versions] if isinstance(versions, str) else list(versions)
    games = Registry(load_version(Path(root), v) for v in names)
    loaded = time.perf_counter() - t0
    gc.freeze()  # the loaded levels live as long as the process: keep them out of collections
    lock = None
    if not is_postgres(db):
        from serve.sqlite_store import claim, release

        try:
            lock = claim(db)
        except StoreError as e:
            raise StartError(str(e)) from None
    try:
        levels = sum(g.episodes for g in games)
        about = (f"serving {levels} levels of {', '.join(games.names)} on http://{host}:"
                 "{port} " + f"(loaded in {loaded:.2f} s, store {_shown(db)}")
        if access_log not in (None, "-"):
            try:  # refused here, once, rather than by each worker
                open(access_log, "a").close()
            except OSError as e:
                raise StartError(f"cannot write the access log {access_log}: "
                                 f"{e.strerror or e}") from None
        if workers == 1:
            asyncio.run(_serve(games, db, synchronous, limits, host, port, about,
                               access_log=access_log))
        else:
            _supervise(games, db, synchronous, limits, host, port, workers, about, access_log)
    finally:
        if lock is not None:
            release(db, lock)


def _shown(db: str) -> str:
    """The store's location without a password."""
    if is_postgres(db) and "@" in db:
        scheme, _, rest = db.partition("://")
        user, _, where = rest.rpartition("@")
        return f"{scheme}://{user.split(':')[0]}@{where}"
    return db


async def _serve(games: Registry, db: str, synchronous: str, limits: Limits, host: str,
                 port: int, about: str, ready_fd: int | None = None,
                 access_log: str | None = None) -> None:
    """One serving process: its own store connection, its app, until SIGINT or SIGTERM."""
    arena = Arena(games, open_store(db, synchronous), limits)
    app = build_app(arena, AccessLog(access_log) if access_log else None)
    runner = web.AppRunner(app, access_log=None, handle_signals=False)
    try:
        await runner.setup()  # opens the store
        if is_postgres(db):  # a SQLite store was checked when it was claimed
            await arena.store.integrity(f"the store {_shown(db)}")
    except (OSError, StoreError, RuntimeError) as e:
        raise StartError(f"cannot open the store {_shown(db)}: "
                         f"{getattr(e, 'strerror', None) or e}") from None
    except Exception as e:  # a database driver's own errors
        raise StartError(f"cannot open the store {_shown(db)}: {e}") from None
    site = web.TCPSite(runner, host, port, reuse_port=ready_fd is not None)
    try:
        await site.start()
    except OSError as e:
        await runner.cleanup()
        raise StartError(f"cannot listen on {host}:{port}: {e.strerror or e}") from None
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError):
            loop.add_signal_handler(sig, stop.set)
    bound = site._server.sockets[0].getsockname()[1] if site._server else port  # port 0 -> real
    if ready_fd is None:
        print(about.replace("{port}", str(bound)) + ")", file=sys.stderr, flush=True)
    else:
        os.write(ready_fd, b"ok")
        os.close(ready_fd)
    await stop.wait()
    await runner.cleanup()


def _reserve(host: str, port: int) -> tuple[socket.socket, int]:
    """A socket bound to the port (a free one for 0) with ``SO_REUSEPORT``, never listening:
    it holds the port for the workers, which bind it too and do listen."""
    if not hasattr(socket, "SO_REUSEPORT"):
        raise StartError("--workers above 1 needs SO_REUSEPORT, which this platform lacks; "
                         "run one worker per port behind a proxy instead")
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    if port:
        # SO_REUSEPORT would also let this server share a port another one (of this user)
        # listens on, splitting its clients between the two: a plain bind first refuses that
        with socket.socket(family, socket.SOCK_STREAM) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                probe.bind((host, port))
            except OSError as e:
                raise StartError(f"cannot listen on {host}:{port}: {e.strerror or e}") from None
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    try:
        sock.bind((host, port))
    except OSError as e:
        sock.close()
        raise StartError(f"cannot listen on {host}:{port}: {e.strerror or e}") from None
    return sock, sock.getsockname()[1]


def _fork_worker(games: Registry, db: str, synchronous: str, limits: Limits, host: str,
                 port: int, access_log: str | None) -> tuple[int, int]:
    """Start one worker; returns its pid and the pipe it reports readiness (or a fault) on."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the worker
        os.close(read)
        code = 0
        try:
            for sig in (signal.SIGINT, signal.SIGTERM):
                signal.signal(sig, signal.SIG_DFL)
            asyncio.run(_serve(games, db, synchronous, limits, host, port, "", write,
                               access_log))
        except BaseException as e:  # noqa: BLE001 - the parent reports it
            with contextlib.suppress(OSError):
                os.write(write, f"error {e}".encode()[:4000])
            code = 1
        finally:
            logging.shutdown()
            os._exit(code)
    os.close(write)
    return pid, read


def _await_ready(pid: int, read: int) -> None:
    ready, _, _ = select.select([read], [], [], READY_SECONDS)
    said = os.read(read, 4096).decode(errors="replace") if ready else ""
    os.close(read)
    if said != "ok":
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
        raise StartError(said.removeprefix("error ") or f"worker {pid} did not start")


def _supervise(games: Registry, db: str, synchronous: str, limits: Limits, host: str,
               port: int, workers: int, about: str, access_log: str | None = None) -> None:
    """Run ``workers`` processes on one port until SIGINT or SIGTERM; replace any that dies."""
    reservation, port = _reserve(host, port)
    children: set[int] = set()
    stopping = False

    def stop(signum: int, frame: object) -> None:
        nonlocal stopping
        stopping = True
        for child in list(children):
            with contextlib.suppress(ProcessLookupError):
                os.kill(child, signal.SIGTERM)

    def start_one() -> None:
        pid, read = _fork_worker(games, db, synchronous, limits, host, port, access_log)
        children.add(pid)
        _await_ready(pid, read)

    signal.signal(signal.SIGINT, stop)
    signal.signal(signal.SIGTERM, stop)
    try:
        for _ in range(workers):
            start_one()
    except BaseException:
        stop(signal.SIGTERM, None)
        for child in list(children):
            with contextlib.suppress(ChildProcessError):
                os.waitpid(child, 0)
        raise
    print(about.replace("{port}", str(port)) + f", workers {' '.join(map(str, sorted(children)))})",
          file=sys.stderr, flush=True)
    while children:
        try:
            pid, status = os.wait()
        except ChildProcessError:
            break
        children.discard(pid)
        if not stopping:
            log.warning("worker %d ended (status %d); starting another", pid, status)
            try:
                start_one()
            except StartError as e:
                log.error("a new worker did not start: %s", e)
    reservation.close()
