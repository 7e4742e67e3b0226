"""Test support for the server: a small dataset written from XSB levels, and a running server.

The dataset is built here from a handful of levels solved by the engine, so the server tests
do not depend on the pipeline; the server runs in a thread on 127.0.0.1 and a free port.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import http.client
import json
import os
import select
import signal
import threading
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from engine.levels import canonical_id, parse_xsb, to_xsb
from engine.search.solver import solve

# Two tiers: three one-crate levels, then three two-crate levels, easiest first.
LEVELS = [
    """
########
#      #
#@ $  .#
#      #
########""",
    """
#######
#.    #
#  $  #
#   @ #
#######""",
    """
######
#@   #
# $  #
#  # #
#.   #
######""",
    """
#######
#.  . #
# $$  #
#  @  #
#######""",
    """
########
#@     #
# $ $  #
#   ## #
#.    .#
########""",
    """
#######
#  .  #
# $#$ #
#  .@ #
#######""",
]
STEP_MULTIPLE = 3


def write_dataset(root: Path, version: str = "t1", levels: list[str] = LEVELS) -> dict:
    """Write ``root/version`` (levels.parquet with DESIGN.md's columns, and manifest.json)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = []
    for text in levels:
        level = parse_xsb(text.strip("\n"))
        result = solve(level)
        assert result.status == "solved", text
        rows.append((level, result))
    rows.sort(key=lambda r: (r[0].n_crates, r[1].moves))
    tier_of = {n: t for t, n in enumerate(sorted({lv.n_crates for lv, _ in rows}))}
    cols: dict[str, tuple[list, Any]] = {
        "index": ([i for i in range(len(rows))], pa.int16()),
        "tier": ([tier_of[lv.n_crates] for lv, _ in rows], pa.int8()),
        "n_crates": ([lv.n_crates for lv, _ in rows], pa.int8()),
        "height": ([lv.height for lv, _ in rows], pa.int8()),
        "width": ([lv.width for lv, _ in rows], pa.int8()),
        "xsb": ([to_xsb(lv) for lv, _ in rows], pa.string()),
        "optimal_moves": ([r.moves for _, r in rows], pa.int16()),
        "optimal_pushes": ([r.pushes for _, r in rows], pa.int16()),
        "solution": ([r.solution for _, r in rows], pa.string()),
        "max_steps": ([STEP_MULTIPLE * r.moves for _, r in rows], pa.int16()),
        "difficulty": ([float(r.moves) for _, r in rows], pa.float32()),
        "grade": ([tier_of[lv.n_crates] for lv, _ in rows], pa.int8()),
        "canonical_id": ([canonical_id(lv) for lv, _ in rows], pa.string()),
    }
    table = pa.table({k: pa.array(v, type=t) for k, (v, t) in cols.items()})
    folder = root / version
    folder.mkdir(parents=True)
    pq.write_table(table, folder / "levels.parquet")
    digest = hashlib.sha256((folder / "levels.parquet").read_bytes()).hexdigest()
    manifest = {"format": 1, "version": version, "game": "standard",
                "spec": {"budget": {"multiple": STEP_MULTIPLE, "floor": 0}},
                "seed_commitment": {"salt": "00", "sha256": "0" * 64},
                "files": {"levels.parquet": {"sha256": digest, "rows": len(rows)}},
                "generator": {"package_version": "test"}, "rotated_from": None}
    (folder / "manifest.json").write_text(json.dumps(manifest, indent=2))
    return {"rows": table.to_pylist(), "manifest": manifest}


def served_dataset(root: Path, version: str = "t1") -> dict:
    """The test levels written under ``root`` as ``version`` and loaded as the server serves
    them: ``root``, the written ``rows`` and the ``served`` version."""
    from serve.games.dataset import load_version

    info = write_dataset(root, version)
    return {"root": root, "rows": info["rows"], "served": load_version(root, version)}


def visible_version(root: Path, version: str, game: str, visibility: str | None,
                    levels: list[str] = LEVELS) -> dict:
    """``write_dataset`` of ``game`` whose manifest says ``visibility`` (None: says nothing,
    a hidden set)."""
    info = write_dataset(root, version, levels)
    path = root / version / "manifest.json"
    manifest = json.loads(path.read_text())
    manifest["game"] = game
    if visibility is not None:
        manifest["visibility"] = visibility
    path.write_text(json.dumps(manifest, indent=2))
    return info


class Api:
    """A blocking JSON client for tests: ``call`` returns (status, parsed body)."""

    def __init__(self, base: str, key: str | None = None) -> None:
        self.host, self.port = base.removeprefix("http://").split(":")
        self.key = key
        self.seen: list[str] = []  # every raw body, for leak checks

    def raw(self, method: str, path: str, body: Any = None, headers: dict | None = None,
            data: bytes | None = None) -> tuple[int, dict, bytes]:
        conn = http.client.HTTPConnection(self.host, int(self.port), timeout=30)
        hdrs = {"Content-Type": "application/json"}
        if self.key:
            hdrs["X-API-Key"] = self.key
        hdrs.update(headers or {})
        payload = data if data is not None else (None if body is None else json.dumps(body))
        conn.request(method, path, body=payload, headers=hdrs)
        res = conn.getresponse()
        raw = res.read()
        out = (res.status, dict(res.getheaders()), raw)
        conn.close()
        return out

    def call(self, method: str, path: str, body: Any = None, **kw: Any) -> tuple[int, Any]:
        status, headers, raw = self.raw(method, path, body, **kw)
        text = raw.decode()
        self.seen.append(text)
        ctype = headers.get("Content-Type", "")
        return status, json.loads(text) if ctype.startswith("application/json") else text

    def ok(self, method: str, path: str, body: Any = None, status: int = 200, **kw: Any) -> Any:
        got, data = self.call(method, path, body, **kw)
        assert got == status, (method, path, got, data)
        return data


class ServerThread:
    """The aiohttp app on 127.0.0.1 and a free port, in a thread with its own event loop."""

    def __init__(self, arena: Any, public: str | None = None, connections: Any = None,
                 access_log: Any = None) -> None:
        from serve.app import build_app

        self.app = build_app(arena, public, connections, access_log)
        self.arena = arena
        self.loop = asyncio.new_event_loop()
        self.ready = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.base = ""

    def _run(self) -> None:
        from aiohttp import web

        from serve.web.connections import listen

        asyncio.set_event_loop(self.loop)
        self.runner = web.AppRunner(self.app, access_log=None, handle_signals=False)
        self.loop.run_until_complete(self.runner.setup())
        self.site = self.loop.run_until_complete(listen(self.runner, "127.0.0.1", 0))
        self.base = f"http://127.0.0.1:{self.site.port}"
        self.ready.set()
        self.loop.run_forever()
        self.loop.run_until_complete(self.runner.cleanup())
        self.loop.close()

    def __enter__(self) -> ServerThread:
        self.thread.start()
        assert self.ready.wait(30)
        return self

    def __exit__(self, *exc: Any) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(30)


@contextmanager
def server(served: Any, db: Path, clock: Any = None, public: str | None = None,
           connections: Any = None, access_log: Any = None, rounds: Any = None, **limits: Any):
    """A running server over ``served`` with store ``db``, limit overrides and maybe a clock,
    a public URL, connection limits, an access log and the rounds' ``RoundBook``."""
    import time

    from serve.limits import Limits
    from serve.play import Arena
    from serve.stores.sqlite import SQLiteStore

    # every test client comes from 127.0.0.1: only a test of that limit sets it
    limits.setdefault("sessions_per_address", 1000)
    arena = Arena(served, SQLiteStore(db, "NORMAL"), Limits(**limits), clock=clock or time.time,
                  rounds=rounds)
    with ServerThread(arena, public, connections, access_log) as running:
        yield running


class SolutionAgent:
    """An agent that knows the stored solutions: it recognises the level by its goal image
    and plays the solution step by step (``solutions`` is filled in by the test)."""

    solutions: dict[bytes, list[int]] = {}

    def reset(self) -> None:
        pass

    def act(self, obs: Any, goal: Any, action_history: list[int]) -> int:
        return self.solutions[goal.tobytes()][len(action_history)]


def solutions_by_goal(rows: list[dict]) -> dict[bytes, list[int]]:
    """Each level's goal image (raw bytes) mapped to its stored solution as actions."""
    from engine.pictures.look import painter
    from engine.rules import lurd_to_actions

    out = {painter(parse_xsb(r["xsb"])).goal().tobytes(): lurd_to_actions(r["solution"])
           for r in rows}
    assert len(out) == len(rows), "goal images must tell the levels apart"
    return out


class Process:
    """``sokoforge serve`` as a process of its own (forked from a warm interpreter:
    ``warm_cli``), on a free port it reports at start-up; ``workers`` lists its worker
    processes' pids when it runs several."""

    def __init__(self, root, db, *extra: str, versions: tuple[str, ...] = ("t1",),
                 env: dict | None = None, cwd: Path | None = None) -> None:
        import warm_cli

        store = [] if db is None else ["--db", str(db)]
        self.proc = warm_cli.start(
            ["serve", *versions, "--datasets", str(root), *store, "--port", "0", "--sync",
             "normal", *extra],
            env=None if env is None else {**os.environ, **env}, cwd=cwd)
        deadline = time.monotonic() + 90
        line = ""
        while "serving" not in line:
            ready, _, _ = select.select([self.proc.stderr], [], [], 1.0)
            assert time.monotonic() < deadline and self.proc.poll() is None, line
            if ready:
                line = self.proc.stderr.readline()
        self.base = line.split(" on ")[1].split(" ")[0]
        self.workers = ([int(p) for p in line.split("workers ")[1].rstrip(")\n").split()]
                        if "workers " in line else [])

    def kill9(self) -> None:
        os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait(10)

    def stop(self) -> None:
        """SIGTERM, as an operator stops it, and wait for a clean exit."""
        self.proc.send_signal(signal.SIGTERM)
        assert self.proc.wait(30) == 0


def corner_walk(budget: int) -> list[int]:
    return [(1, 3, 0, 2)[i // 2 % 4] for i in range(budget)]


def policy(rows: list[dict], frame: dict) -> int:
    """Solve even episodes, shove crates around in odd ones: solved, failed and dead episodes."""
    from engine.rules import lurd_to_actions

    ep = frame["episode"]
    if ep["index"] % 2 == 0:
        return lurd_to_actions(rows[ep["index"]]["solution"])[ep["steps_used"]]
    return corner_walk(ep["max_steps"])[ep["steps_used"]]


def play(client: Api | list[Api], rows: list[dict], frame: dict,
         limit: int | None = None) -> dict:
    """Play ``policy`` until the game is over (or ``limit`` actions); several clients (of
    several servers) take turns, one action each."""
    clients = client if isinstance(client, list) else [client]
    done = 0
    while frame["state"] != "GAME_OVER" and (limit is None or done < limit):
        frame = clients[done % len(clients)].ok(
            "POST", f"/api/sessions/{frame['session_id']}/act", {"action": policy(rows, frame)})
        done += 1
    return frame


def _http_message(stream: Any) -> bytes:
    """One HTTP/1.1 request or answer read whole from a socket's binary file (its headers and
    a ``Content-Length`` body); b"" once the peer closed."""
    head = b""
    while not head.endswith(b"\r\n\r\n"):
        line = stream.readline()
        if not line:
            return b""
        head += line
    length = next((int(line.split(b":", 1)[1]) for line in head.split(b"\r\n")
                   if line.lower().startswith(b"content-length:")), 0)
    return head + stream.read(length)


class LossyProxy:
    """A proxy on 127.0.0.1 and a free port (``base``) in front of the server at ``target``.

    It passes each request on and reads the server's whole answer; for a request whose line
    holds ``path_part``, with probability ``rate`` (drawn from ``seed``), it then closes the
    client's connection instead of passing the answer back: served, but the answer lost; it
    passes the others back ``delay`` seconds late. ``dropped`` counts the answers lost,
    ``passed`` those passed back (of every request).
    """

    def __init__(self, target: str, rate: float, seed: int, path_part: bytes = b"/act",
                 delay: float = 0.0) -> None:
        import random
        import socket

        self.host, port = target.removeprefix("http://").split(":")
        self.port = int(port)
        self.rate, self.path_part, self.delay = rate, path_part, delay
        self.rng = random.Random(seed)
        self.lock = threading.Lock()
        self.dropped = self.passed = 0
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.base = f"http://127.0.0.1:{self.listener.getsockname()[1]}"
        self.thread = threading.Thread(target=self._accept, daemon=True)

    def __enter__(self) -> LossyProxy:
        self.thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.listener.close()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return  # closed
            threading.Thread(target=self._relay, args=(client,), daemon=True).start()

    def _drop(self, request: bytes) -> bool:
        with self.lock:
            drop = (self.path_part in request.split(b"\r\n", 1)[0]
                    and self.rng.random() < self.rate)
            if drop:
                self.dropped += 1
            else:
                self.passed += 1
            return drop

    def _relay(self, client: Any) -> None:
        import socket

        upstream = socket.create_connection((self.host, self.port))
        from_client, from_server = client.makefile("rb"), upstream.makefile("rb")
        try:
            while request := _http_message(from_client):
                upstream.sendall(request)
                answer = _http_message(from_server)
                if not answer or self._drop(request):
                    return
                if self.path_part in request.split(b"\r\n", 1)[0]:
                    time.sleep(self.delay)
                client.sendall(answer)
        except OSError:
            return  # the client went away
        finally:
            for end in (client, upstream):
                with contextlib.suppress(OSError):
                    end.shutdown(socket.SHUT_RDWR)
            for part in (from_client, from_server, client, upstream):
                part.close()
