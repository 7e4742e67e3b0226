"""Server speed: N concurrent sessions of random actions on loopback, actions/s and latency.

Starts ``sokoforge serve`` as a child process (its own core, its own store file), then drives
N = 1, 8, 32 and 200 sessions from this process for a fixed time each and prints actions/s and
p50/p99 latency of ``act``. Every action is committed to the store before it is answered.

    python benchmarks/serve.py [--version demo] [--seconds 10] [--sync full|normal] [--no-gzip]
                               [--workers 1,2] [--db sqlite|postgres|postgresql://...]

``--workers 1,2`` starts one server per count and measures them row by row, side by side,
printing the ratio; ``--db postgres`` starts a throw-away PostgreSQL server (as the tests do)
for the stores.

Without the version folder it serves a small set written from the test levels.

``--looks before,arc,shared,themed,themed+noise --sessions 8`` serves the same levels in each
look at once (one server each; ``before`` is the code of ``--before-rev``, default main, taken
by ``git archive``) and measures them in interleaved rounds, printing actions/s beside before's.

``--access-log --sessions 8 --rounds 6`` serves the same levels twice, without and with
``--access-log FILE``, measured the same way: the ratio is the access log's cost.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import select
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import zlib
from pathlib import Path

import aiohttp

ROOT = Path(__file__).resolve().parent.parent
# this file's folder holds engine.py and serve.py scripts: import the packages instead
sys.path[0] = str(ROOT)


def start_server(root: Path, version: str, db: Path | str, sync: str, src: Path = ROOT,
                 workers: int = 1, extra: tuple[str, ...] = ()) -> tuple[subprocess.Popen, str]:
    """``sokoforge serve`` of the code in ``src`` (with ``extra`` options) as a child process,
    and its base URL."""
    code = "from sokoforge.cli import main; main()"
    proc = subprocess.Popen(
        [sys.executable, "-c", code, "serve", "--datasets", str(root), "--version", version,
         "--db", str(db), "--port", "0", "--sync", sync, "--sessions-per-key", "1000",
         "--sessions-total", "1000", "--scorecards-per-day", "100000",
         "--connections-per-address", "1000",  # every session is its own connection
         *(["--workers", str(workers)] if workers != 1 else []), *extra],
        stderr=subprocess.PIPE, text=True, cwd=src)
    line = ""
    deadline = time.monotonic() + 300  # a fresh source tree compiles its kernels first
    while "serving" not in line:
        if proc.poll() is not None or time.monotonic() > deadline:
            raise SystemExit(f"server did not start: {line}{proc.stderr.read()}")
        if select.select([proc.stderr], [], [], 1.0)[0]:
            line = proc.stderr.readline()
    print(line.strip())
    return proc, line.split(" on ")[1].split(" ")[0]


class Wire:
    """A minimal keep-alive HTTP/1.1 client, so the client's own cost stays small beside the
    server's on a shared 2-core machine."""

    def __init__(self, base: str, key: str, gzip: bool) -> None:
        self.host, port = base.removeprefix("http://").split(":")
        self.port = int(port)
        self.head = (f"Host: {self.host}\r\nX-API-Key: {key}\r\nContent-Type: application/json"
                     f"\r\nAccept-Encoding: {'gzip' if gzip else 'identity'}\r\n")

    async def open(self) -> None:
        self.reader, self.writer = await asyncio.open_connection(self.host, self.port)

    async def post(self, path: str, body: bytes = b"") -> tuple[int, bytes]:
        self.writer.write(f"POST {path} HTTP/1.1\r\n{self.head}Content-Length: {len(body)}"
                          f"\r\n\r\n".encode() + body)
        status = int((await self.reader.readline()).split()[1])
        length, gzipped = 0, False
        while (line := await self.reader.readline()) != b"\r\n":
            name, _, value = line.decode().partition(":")
            if name.lower() == "content-length":
                length = int(value)
            elif name.lower() == "content-encoding":
                gzipped = "gzip" in value
        data = await self.reader.readexactly(length)
        return status, zlib.decompress(data, 31) if gzipped else data

    def close(self) -> None:
        self.writer.close()


async def drive(base: str, key: str, n: int, seconds: float, gzip: bool) -> dict:
    """N workers, one connection and one session each, random actions until the deadline."""
    latencies: list[float] = []
    deadline = time.perf_counter() + seconds

    async def worker(seed: int) -> None:
        rng = random.Random(seed)
        wire = Wire(base, key, gzip)
        await wire.open()
        try:
            while time.perf_counter() < deadline:
                sid = json.loads((await wire.post("/api/scorecards"))[1])["scorecard_id"]
                start = f"/api/scorecards/{sid}/games/standard/start"
                gid = json.loads((await wire.post(start))[1])["session_id"]
                over = False
                # random actions need no observation: the body is read, not decoded
                while not over and time.perf_counter() < deadline:
                    t0 = time.perf_counter()
                    status, body = await wire.post(f"/api/sessions/{gid}/act",
                                                   b'{"action":%d}' % rng.randrange(4))
                    latencies.append(time.perf_counter() - t0)
                    if status != 200:
                        raise SystemExit(f"act answered {status}: {body[:200]!r}")
                    over = b'"state":"GAME_OVER"' in body
        finally:
            wire.close()

    return await timed(n, worker, latencies)


async def timed(n: int, worker, latencies: list[float]) -> dict:
    """Run ``worker(0)`` .. ``worker(n-1)`` at once; actions/s and p50/p99 of the latencies
    (seconds) they appended."""
    t0, cpu0 = time.perf_counter(), time.process_time()
    await asyncio.gather(*(worker(i) for i in range(n)))
    elapsed, cpu = time.perf_counter() - t0, time.process_time() - cpu0
    latencies.sort()

    def pct(p: float) -> float:
        return 1000 * latencies[min(len(latencies) - 1, int(p * len(latencies)))]

    return {"n": n, "actions": len(latencies), "per_s": len(latencies) / elapsed,
            "p50": pct(0.50), "p99": pct(0.99), "client_cpu": cpu / elapsed}


def cpu_seconds(pid: int) -> float:
    """User plus system CPU time so far of a process and its live children, the server's
    workers (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    return ((int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
            + sum(cpu_seconds(int(c)) for c in children))


async def register(base: str) -> str:
    async with aiohttp.ClientSession() as http:
        async with http.post(f"{base}/api/keys", json={"name": f"bench {os.getpid()}"}) as r:
            return (await r.json())["api_key"]


def dataset(root: Path, version: str, tmp: Path) -> tuple[Path, str]:
    """``root/version`` if it is built, else a set written from the test levels into ``tmp``."""
    if (root / version / "levels.parquet").is_file():
        return root, version
    sys.path.insert(0, str(ROOT / "tests"))
    from serve_support import LEVELS, write_dataset

    write_dataset(tmp, "bench", LEVELS * 17)
    print(f"no {root}/{version}: serving {len(LEVELS) * 17} test levels")
    return tmp, "bench"


def with_look(root: Path, version: str, look: str, tmp: Path) -> tuple[Path, str]:
    """A copy of ``root/version`` whose spec draws ``look`` (``themed+noise``: themed with
    noise; themes from seed 0), with the theme columns and sha256 the look needs."""
    import polars as pl

    from pipeline.spec import spec_from_dict
    from pipeline.stages.write import level_looks
    from pipeline.versions.tables import sha256_file, write_parquet

    name, noise = look.removesuffix("+noise"), look.endswith("+noise")
    folder = tmp / "looks" / look / version
    folder.mkdir(parents=True)
    manifest = json.loads((root / version / "manifest.json").read_text())
    spec = spec_from_dict({**manifest["spec"], "look": name, "noise": noise})
    df = pl.read_parquet(root / version / "levels.parquet")
    df = df.with_columns(*level_looks(spec, 0, df["index"].to_list()))
    write_parquet(df, folder / "levels.parquet")
    manifest["spec"] = spec.to_dict()
    manifest["files"]["levels.parquet"]["sha256"] = sha256_file(folder / "levels.parquet")
    (folder / "manifest.json").write_text(json.dumps(manifest, indent=2))
    return folder.parent, version


def source_of(rev: str, tmp: Path) -> Path:
    """The package source of git revision ``rev``, unpacked into ``tmp`` (for ``before``)."""
    out = tmp / "before-src"
    out.mkdir()
    archive = subprocess.run(["git", "archive", rev, "engine", "pipeline", "serve", "sokoforge"],
                             cwd=ROOT,
                             capture_output=True, check=False)
    if archive.returncode != 0:
        raise SystemExit(f"git archive {rev}: {archive.stderr.decode().strip()}")
    subprocess.run(["tar", "-x", "-C", str(out)], input=archive.stdout, check=True)
    return out


def compare_looks(args: argparse.Namespace, root: Path, version: str, tmp: Path) -> None:
    """Every look served at once, one server each, measured in interleaved rounds."""
    looks = args.looks.split(",")
    servers: dict[str, tuple[subprocess.Popen, str]] = {}
    try:
        for look in looks:
            if look == "before":
                where, src = (root, version), source_of(args.before_rev, tmp)
            else:
                where, src = with_look(root, version, look, tmp), ROOT
            servers[look] = start_server(*where, tmp / f"{look}.sqlite", args.sync, src)
        interleaved(args, servers, f"before = {args.before_rev}'s code (the 16-colour picture)")
    finally:
        for proc, _ in servers.values():
            proc.send_signal(signal.SIGTERM)
            proc.wait(30)


def compare_access_log(args: argparse.Namespace, root: Path, version: str, tmp: Path) -> None:
    """The same levels served without and with an access log (to a file), side by side."""
    servers: dict[str, tuple[subprocess.Popen, str]] = {}
    try:
        servers["no log"] = start_server(root, version, tmp / "plain.sqlite", args.sync)
        servers["access log"] = start_server(root, version, tmp / "logged.sqlite", args.sync,
                                             extra=("--access-log", str(tmp / "access.log")))
        interleaved(args, servers, "a JSON line per request to a file")
        lines = (tmp / "access.log").read_text().count("\n")
        print(f"the access log holds {lines} lines", flush=True)
    finally:
        for proc, _ in servers.values():
            proc.send_signal(signal.SIGTERM)
            proc.wait(30)


def interleaved(args: argparse.Namespace, servers: dict[str, tuple[subprocess.Popen, str]],
                note: str) -> None:
    """Measure every server at each session count in ``--rounds`` interleaved rounds, in
    alternating order (so a shared machine's load falls on all alike); print medians and the
    ratio to the first."""
    keys = {name: asyncio.run(register(base)) for name, (_, base) in servers.items()}
    for name, (_, base) in servers.items():  # warm caches and lazy imports first
        asyncio.run(drive(base, keys[name], 2, 1.0, not args.no_gzip))
    sessions = [int(x) for x in args.sessions.split(",")]
    rates: dict[tuple[str, int], list[float]] = {}
    cpus: dict[tuple[str, int], list[float]] = {}
    for round_ in range(args.rounds):
        for n in sessions:
            # every other round in reverse order, so that none is always measured right
            # after another (whose store may still be checkpointing)
            order = list(servers.items())[::-1 if round_ % 2 else 1]
            for name, (proc, base) in order:
                cpu = cpu_seconds(proc.pid)
                r = asyncio.run(drive(base, keys[name], n, args.seconds, not args.no_gzip))
                cpu = cpu_seconds(proc.pid) - cpu
                rates.setdefault((name, n), []).append(r["per_s"])
                cpus.setdefault((name, n), []).append(1e6 * cpu / max(1, r["actions"]))
    names = list(servers)
    print(f"{args.rounds} interleaved rounds of {args.seconds:g} s each; median of rounds; "
          f"{note}")
    print(f"{'server':<13} {'sessions':>8} {'actions/s':>10} {'server CPU us/action':>21}"
          f" {'vs ' + names[0]:>12}")
    for n in sessions:
        base_rate = statistics.median(rates[(names[0], n)])
        for name in names:
            rate = statistics.median(rates[(name, n)])
            print(f"{name:<13} {n:>8} {rate:>10.0f} "
                  f"{statistics.median(cpus[(name, n)]):>21.0f} {rate / base_rate:>11.1%}",
                  flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--version", default="demo")
    parser.add_argument("--datasets", default=str(ROOT / "datasets"))
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--sessions", default="1,8,32,200")
    parser.add_argument("--sync", choices=["normal", "full"], default="normal")
    parser.add_argument("--no-gzip", action="store_true")
    parser.add_argument("--looks", default="",
                        help="compare looks, e.g. before,arc,shared,themed,themed+noise")
    parser.add_argument("--before-rev", default="main")
    parser.add_argument("--access-log", action="store_true",
                        help="compare a server writing an access log with one that does not")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--workers", default="1",
                        help="server processes on the port; a list (1,2) starts one server "
                        "per count and measures them row by row, side by side, with ratios")
    parser.add_argument("--db", default="sqlite",
                        help="sqlite (a temporary file), postgres (a throw-away server) or a "
                        "postgresql:// URL")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root, version = dataset(Path(args.datasets), args.version, Path(tmp))
        if args.looks:
            compare_looks(args, root, version, Path(tmp))
            return
        if args.access_log:
            compare_access_log(args, root, version, Path(tmp))
            return
        compare_workers(args, root, version, Path(tmp))


def compare_workers(args: argparse.Namespace, root: Path, version: str, tmp: Path) -> None:
    """One server per ``--workers`` count on its own store, measured row by row."""
    workers = [int(x) for x in args.workers.split(",")]
    cluster = None
    if args.db == "postgres":
        sys.path.insert(0, str(ROOT / "tests"))
        from postgres_support import Cluster

        cluster = Cluster().start()
    servers: list[tuple[int, subprocess.Popen, str]] = []
    try:
        for count in workers:
            db = args.db
            if db == "sqlite":
                db = str(tmp / f"bench-{count}.sqlite")
            elif cluster is not None:
                db = cluster.database()
            servers.append((count, *start_server(root, version, db, args.sync,
                                                 workers=count)))
        keys = [asyncio.run(register(base)) for _, _, base in servers]
        print(f"store {args.db.split('://')[0]} synchronous={args.sync.upper()}, "
              f"gzip={'off' if args.no_gzip else 'on'}, {args.seconds:g} s per row, "
              f"{os.cpu_count()} cores")
        print(f"{'workers':>7} {'sessions':>8} {'actions':>8} {'actions/s':>10} "
              f"{'p50 ms':>8} {'p99 ms':>8} {'server CPU us/action':>21} {'client CPU':>10}")
        for n in (int(x) for x in args.sessions.split(",")):
            rates = []
            for (count, proc, base), key in zip(servers, keys, strict=True):
                cpu = cpu_seconds(proc.pid)
                r = asyncio.run(drive(base, key, n, args.seconds, not args.no_gzip))
                cpu = cpu_seconds(proc.pid) - cpu
                rates.append(r["per_s"])
                print(f"{count:>7} {r['n']:>8} {r['actions']:>8} {r['per_s']:>10.0f} "
                      f"{r['p50']:>8.2f} {r['p99']:>8.2f} "
                      f"{1e6 * cpu / max(1, r['actions']):>21.0f} "
                      f"{r['client_cpu']:>10.0%}", flush=True)
            for count, rate in list(zip(workers, rates, strict=True))[1:]:
                print(f"{'':>7} {n:>8} workers {count} / {workers[0]}: "
                      f"{rate / rates[0]:.2f}x actions/s", flush=True)
    finally:
        for _, proc, _ in servers:
            proc.send_signal(signal.SIGTERM)
            proc.wait(30)
        if cluster is not None:
            cluster.stop()


if __name__ == "__main__":
    main()
