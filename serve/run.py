"""Running the server: load the versions, claim the store, listen until stopped.

With ``workers`` above 1 the parent forks that many worker processes after loading (they
share the loaded levels copy-on-write); each listens on the same port (``SO_REUSEPORT``, the
kernel spreads connections) and opens the shared store itself. The parent holds the port
while they start, replaces a worker that dies, and forwards SIGINT/SIGTERM; a worker never
outlives the parent (on Linux the kernel kills it when the parent dies, even by SIGKILL). A
SQLite store is claimed by the parent first (exclusive lock, integrity check, schema), so one
server and its workers own it; a PostgreSQL store may be shared by several servers (a fleet).
"""

from __future__ import annotations

__all__ = ["MalformedRequests", "READY_SECONDS", "Serving", "StartError", "StopError",
           "serve_forever"]

import asyncio
import contextlib
import ctypes
import gc
import logging
import os
import select
import signal
import socket
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

from aiohttp import web
from aiohttp.http_exceptions import HttpProcessingError

from engine.errors import SokoforgeError
from pipeline.versions.rounds import RoundBook
from pipeline.versions.serving import ServedVersions
from serve.app import build_app, url_host
from serve.arc.arc_wire import game_id
from serve.games.dataset import load_version
from serve.games.games import Registry
from serve.limits import ConnectionLimits, Limits
from serve.play import Arena
from serve.stores import StoreError, is_postgres, open_store, shown
from serve.web.access_log import AccessLog
from serve.web.connections import AcceptErrorLog, listen

log = logging.getLogger("sokoforge.serve")
READY_SECONDS = 120.0
PR_SET_PDEATHSIG = 1


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


class StartError(SokoforgeError, RuntimeError):
    """The store could not be opened or the address not bound; the message says which."""


class StopError(SokoforgeError, RuntimeError):
    """The server stopped but could not leave its store as a clean stop does (its file was
    replaced under it, its disk is full); the message says what was kept, and where."""


def serve_forever(root: str | Path, versions: list[str] | str, db: str, host: str, port: int,
                  limits: Limits, *, synchronous: str = "NORMAL", public: str | None = None,
                  connections: ConnectionLimits | None = None, workers: int = 1,
                  access_log: str | None = None, as_game: str | None = None) -> int:
    """Load ``versions`` (one game each) from ``root`` and serve them until SIGINT or SIGTERM;
    return which. The pages give ``public`` as the server's URL (default: the listening
    address); ``access_log`` is a file (appended to by every worker) or ``-`` (stdout) for
    one JSON line per request; ``as_game`` names the game of the (one) version served
    instead of its own game's name (a pool served alone as ``standard``)."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    logging.getLogger("aiohttp.server").addFilter(MalformedRequests())
    t0 = time.perf_counter()
    names = [versions] if isinstance(versions, str) else list(versions)
    loaded_versions = [load_version(Path(root), v) for v in names]
    if as_game is not None:
        loaded_versions = [replace(v, game=as_game) for v in loaded_versions]
    games = Registry(loaded_versions)
    loaded = time.perf_counter() - t0
    gc.freeze()  # the loaded levels live as long as the process: keep them out of collections
    lock = None
    created = False  # a store this start made: removed again if the start fails
    if not is_postgres(db):
        from serve.stores.sqlite_file import claim, release, remove_unused

        created = not Path(db).exists()
        try:
            lock = claim(db)
        except StoreError as e:
            raise StartError(str(e)) from None
    claim_versions = ServedVersions(Path(root) / v for v in names)  # reveal refuses them
    try:
        levels = sum(len(g.version.levels) for g in games)  # a pool's all, not a session's
        named = ", ".join(f"{g.name} (version {g.version.version})" for g in games)
        base = f"http://{url_host(host)}:"
        about = (f"serving {levels} levels of {named} on {base}"
                 "{port} " + f"(loaded in {loaded:.2f} s, store {shown(db)}{{end}}\n"
                 + _addresses(games, base + "{port}"))
        if access_log not in (None, "-"):
            try:  # refused here, once, rather than by each worker
                open(access_log, "a").close()
            except OSError as e:
                raise StartError(f"cannot write the access log {access_log}: "
                                 f"{e.strerror or e}") from None
        served = Serving(games, db, synchronous, limits, public, connections, access_log,
                         RoundBook(Path(root)), None if lock is None else lock.fd)
        if workers == 1:
            stopped_by = asyncio.run(served.run(host, port, about))
        else:
            stopped_by = _supervise(served, host, port, workers, about)
    except BaseException as e:
        claim_versions.release()
        if lock is not None:
            with contextlib.suppress(StoreError):  # the fault that ended it is the one said
                release(db, lock)
            if created and isinstance(e, StartError):  # it served nothing: it leaves nothing
                remove_unused(db)
        raise
    claim_versions.release()
    if lock is not None:
        try:
            release(db, lock)
        except StoreError as e:
            raise StopError(f"stopped; {e}") from None
    return stopped_by


def _addresses(games: Registry, base: str) -> str:
    """The start-up lines after the first: where people and agents find what is served."""
    lines = [("home", f"{base}/"), ("API docs", f"{base}/api/docs")]
    lines += [(f"play {g.name}", f"{base}/play/{g.name}") for g in games if g.public]
    ids = ", ".join(game_id(g.version.version) for g in games)
    lines.append(("ARC face", f"ARC_BASE_URL={base} (game{'s' if len(games) > 1 else ''} "
                              f"{ids})"))
    return "\n".join(f"  {what + ':':<{_WIDTH}} {where}" for what, where in lines)


_WIDTH = 16


def _stopper(sig: int, stopped_by: list[int], stop: asyncio.Event) -> Callable[[], None]:
    """The handler of a stop signal: note which one came, then stop serving."""
    def handle() -> None:
        stopped_by.append(sig)
        stop.set()
    return handle


@dataclass(frozen=True)
class Serving:
    """What every serving process of one server runs: the games, the store, the limits."""

    games: Registry
    db: str
    synchronous: str
    limits: Limits
    public: str | None
    connections: ConnectionLimits | None
    access_log: str | None = None
    rounds: RoundBook | None = None
    store_fd: int | None = None  # the lock on the SQLite file claimed, shared by the workers

    async def run(self, host: str, port: int, about: str, ready_fd: int | None = None) -> int:
        """One serving process: its own store connection and app, until SIGINT or SIGTERM
        (returned). A worker (``ready_fd``) shares the port and reports readiness on it."""
        asyncio.get_running_loop().set_exception_handler(AcceptErrorLog())
        arena = Arena(self.games, open_store(self.db, self.synchronous, self.store_fd),
                      self.limits, rounds=self.rounds)
        app = build_app(arena, self.public, self.connections,
                        AccessLog(self.access_log) if self.access_log else None)
        runner = web.AppRunner(app, access_log=None, handle_signals=False)
        where = shown(self.db)
        try:
            await runner.setup()  # opens the store
            if is_postgres(self.db):  # a SQLite store was checked when it was claimed
                await arena.store.integrity(f"the store {where}")
        except (OSError, StoreError, RuntimeError) as e:
            raise StartError(f"cannot open the store {where}: "
                             f"{getattr(e, 'strerror', None) or e}") from None
        except Exception as e:  # a database driver's own errors
            raise StartError(f"cannot open the store {where}: {e}") from None
        try:
            site = await listen(runner, host, port, reuse_port=ready_fd is not None)
        except OSError as e:
            await runner.cleanup()
            raise StartError(f"cannot listen on {host}:{port}: {e.strerror or e}") from None
        stop = asyncio.Event()
        stopped_by: list[int] = []
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            with contextlib.suppress(NotImplementedError):
                loop.add_signal_handler(sig, _stopper(sig, stopped_by, stop))
        # said once a stop signal is handled: whoever waits for this may signal right away
        if ready_fd is None:
            print(about.replace("{port}", str(site.port)).replace("{end}", ")"), file=sys.stderr,
                  flush=True)
        else:
            os.write(ready_fd, b"ok")
            os.close(ready_fd)
        await stop.wait()
        await runner.cleanup()
        return stopped_by[0]


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


def _fork_worker(served: Serving, host: str, port: int) -> tuple[int, int]:
    """Start one worker; returns its pid and the pipe it reports readiness (or a fault) on."""
    read, write = os.pipe()
    parent = os.getpid()
    pid = os.fork()
    if pid == 0:  # the worker
        os.close(read)
        code = 0
        try:
            _die_with(parent)
            for sig in (signal.SIGINT, signal.SIGTERM):
                signal.signal(sig, signal.SIG_DFL)
            asyncio.run(served.run(host, port, "", write))
        except BaseException as e:  # noqa: BLE001 - the parent reports it
            with contextlib.suppress(OSError):
                os.write(write, f"error {e}".encode()[:4000])
            code = 1
        finally:
            logging.shutdown()
            os._exit(code)
    os.close(write)
    return pid, read


def _die_with(parent: int) -> None:
    """Have the kernel kill this worker when ``parent`` dies (Linux ``PR_SET_PDEATHSIG``), so
    no orphan keeps serving, or holding the store, after its server is gone."""
    if sys.platform.startswith("linux"):
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_SET_PDEATHSIG) failed")
    if os.getppid() != parent:  # it died before the request was made
        os._exit(1)


def _await_ready(pid: int, read: int) -> None:
    ready, _, _ = select.select([read], [], [], READY_SECONDS)
    said = os.read(read, 4096).decode(errors="replace") if ready else ""
    os.close(read)
    if said != "ok":
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
        raise StartError(said.removeprefix("error ") or f"worker {pid} did not start")


def _how_it_ended(status: int) -> str:
    """A child's wait status in words: ``was killed by SIGKILL``, ``exited with status 1``."""
    if os.WIFSIGNALED(status):
        number = os.WTERMSIG(status)
        with contextlib.suppress(ValueError):
            return f"was killed by {signal.Signals(number).name}"
        return f"was killed by signal {number}"
    return f"exited with status {os.waitstatus_to_exitcode(status)}"


def _supervise(served: Serving, host: str, port: int, workers: int, about: str) -> int:
    """Run ``workers`` processes on one port until SIGINT or SIGTERM (returned, and passed
    on to them as SIGTERM); replace any that dies meanwhile."""
    reservation, port = _reserve(host, port)
    children: set[int] = set()
    stopped_by: list[int] = []

    def stop(signum: int, frame: object) -> None:
        stopped_by.append(signum)
        for child in list(children):
            with contextlib.suppress(ProcessLookupError):
                os.kill(child, signal.SIGTERM)

    def start_one() -> int:
        pid, read = _fork_worker(served, host, port)
        children.add(pid)
        _await_ready(pid, read)
        return pid

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
    pids = " ".join(map(str, sorted(children)))
    print(about.replace("{port}", str(port)).replace("{end}", f", workers {pids})"),
          file=sys.stderr, flush=True)
    while children:
        try:
            pid, status = os.wait()
        except ChildProcessError:
            break
        children.discard(pid)
        if not stopped_by:
            log.warning("worker %d %s; starting another", pid, _how_it_ended(status))
            try:
                log.warning("worker %d serves in place of worker %d", start_one(), pid)
            except StartError as e:
                log.error("a new worker did not start: %s", e)
    reservation.close()
    return stopped_by[0] if stopped_by else signal.SIGTERM
