"""Running the server process: load the version, open the store, listen until stopped."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import signal
import sqlite3
import sys
import time
from pathlib import Path

from aiohttp import web
from aiohttp.http_exceptions import HttpProcessingError

from serve.app import build_app
from serve.connections import AcceptErrorLog, listen
from serve.dataset import load_version
from serve.limits import ConnectionLimits, Limits
from serve.play import Arena
from serve.sqlite_store import SQLiteStore


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


def serve_forever(root: str | Path, version: str, db: str, host: str, port: int,
                  limits: Limits, synchronous: str = "NORMAL", public: str | None = None,
                  connections: ConnectionLimits | None = None) -> int:
    """Load ``version`` from ``root`` and serve it until SIGINT or SIGTERM; return which. The
    pages give ``public`` as the server's URL (default: the listening address)."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    logging.getLogger("aiohttp.server").addFilter(MalformedRequests())
    t0 = time.perf_counter()
    served = load_version(Path(root), version)
    loaded = time.perf_counter() - t0
    gc.freeze()  # the loaded levels live as long as the process: keep them out of collections
    arena = Arena(served, SQLiteStore(db, synchronous), limits)
    app = build_app(arena, public, connections)
    return asyncio.run(_serve(app, host, port, loaded, served.episodes, db))


class StartError(RuntimeError):
    """The store could not be opened or the address not bound; the message says which."""


async def _serve(app: web.Application, host: str, port: int, loaded: float, episodes: int,
                 db: str) -> int:
    asyncio.get_running_loop().set_exception_handler(AcceptErrorLog())
    runner = web.AppRunner(app, access_log=None, handle_signals=False)
    try:
        await runner.setup()  # opens the store and restores open sessions
    except (OSError, sqlite3.Error, RuntimeError) as e:
        raise StartError(f"cannot open the store {db}: {getattr(e, 'strerror', None) or e}"
                         ) from None
    try:
        site = await listen(runner, host, port)
    except OSError as e:
        await runner.cleanup()
        raise StartError(f"cannot listen on {host}:{port}: {e.strerror or e}") from None
    stop = asyncio.Event()
    stopped_by: list[int] = []
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError):
            loop.add_signal_handler(sig, lambda s=sig: (stopped_by.append(s), stop.set()))
    # said once a stop signal is handled: whoever waits for this line may signal right away
    print(f"serving {episodes} levels on http://{host}:{site.port} (loaded in {loaded:.2f} s, "
          f"store {db})", file=sys.stderr, flush=True)
    await stop.wait()
    await runner.cleanup()
    return stopped_by[0]
