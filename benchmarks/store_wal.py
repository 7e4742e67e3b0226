"""What bounding the write-ahead log costs the SQLite store: writes/s, latency and the log's peak,
the code of a git revision (``before``) beside the working tree's (``now``), side by side.

Each measurement is a child process running ``SQLiteStore.write`` (the server's own write
path, without HTTP, so the store alone is measured at loads far above a server's) for
``--seconds``: N sessions, each writing its next action as soon as the last is stored, with
episode rows the size a served one has. A thread samples the log's size every millisecond.
Rounds alternate the order of the two codes, so a shared machine's load falls on both alike;
the medians of the rounds are printed, with now's writes/s as a ratio of before's.

    python benchmarks/store_wal.py [--before-rev main] [--sessions 4,32,64] [--seconds 3]
                                   [--rounds 3]
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def source_of(rev: str, tmp: Path) -> Path:
    """The ``serve`` and ``engine`` packages of git revision ``rev``, unpacked into ``tmp``."""
    out = tmp / "before-src"
    out.mkdir()
    archive = subprocess.run(["git", "archive", rev, "engine", "serve"], cwd=ROOT,
                             capture_output=True, check=False)
    if archive.returncode != 0:
        raise SystemExit(f"git archive {rev}: {archive.stderr.decode().strip()}")
    subprocess.run(["tar", "-x", "-C", str(out)], input=archive.stdout, check=True)
    return out


async def writes(folder: Path, sessions: int, seconds: float) -> dict:
    """``sessions`` sessions writing for ``seconds`` through the store of the code on the
    path: writes/s, the 50th and 99th latency percentiles and the log's largest size."""
    from serve.stores import EpisodeRecord, KeyRecord, ScorecardRecord, SessionRecord, Write
    from serve.stores.sqlite import SQLiteStore

    db = folder / "store.sqlite"
    store = SQLiteStore(db)
    await store.start()
    await store.create_key(KeyRecord("k", "bench"), "a", "d", 1)
    for n in range(sessions):
        await store.open_scorecard(ScorecardRecord(f"sc-{n}", "k", "bench", {"standard": "v"},
                                                   0.0), "d", sessions)
        await store.create_session(SessionRecord(f"gs-{n}", f"sc-{n}", "k", "standard", "v", 1,
                                                 "IN_PROGRESS", 0.0, 0.0, 0, "w0"),
                                   range(6), sessions, sessions, 0.0)
    timed = "ms" in {f.name for f in dataclasses.fields(Write)}
    largest, stop = [0], threading.Event()

    def watch() -> None:
        while not stop.wait(0.001):
            try:
                largest[0] = max(largest[0], os.stat(f"{db}-wal").st_size)
            except FileNotFoundError:
                pass

    latencies: list[float] = []
    deadline = time.monotonic() + seconds

    async def play(n: int) -> None:
        seq = 0
        while time.monotonic() < deadline:
            row = EpisodeRecord(seq % 6, False, False, False, seq, "UDLR" * (seq % 30),
                                "7:" + "1,2;" * 30)
            write = Write(f"gs-{n}", seq, "w0" if seq == 0 else "w", "w", time.time(), seq % 4,
                          seq % 6, (row,), None, **({"ms": seq} if timed else {}))
            t0 = time.perf_counter()
            await store.write(write)
            latencies.append(time.perf_counter() - t0)
            seq += 1

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    await asyncio.gather(*(play(n) for n in range(sessions)))
    stop.set()
    watcher.join()
    await store.close()
    latencies.sort()
    return {"per_s": len(latencies) / seconds, "p50": latencies[len(latencies) // 2],
            "p99": latencies[int(len(latencies) * 0.99)], "wal": largest[0]}


def measured(src: Path, sessions: int, seconds: float) -> dict:
    """One measurement in a child process running the code in ``src``."""
    with tempfile.TemporaryDirectory() as folder:
        done = subprocess.run([sys.executable, __file__, "--child", str(src), folder,
                               str(sessions), str(seconds)], capture_output=True, text=True,
                              check=False, env={**os.environ, "PYTHONPATH": str(src)})
    if done.returncode != 0:
        raise SystemExit(f"the measurement of {src} failed: {done.stderr.strip()}")
    return json.loads(done.stdout)


def main() -> None:
    if sys.argv[1:2] == ["--child"]:
        src, folder, sessions, seconds = sys.argv[2:6]
        sys.path[0] = src
        print(json.dumps(asyncio.run(writes(Path(folder), int(sessions), float(seconds)))))
        return
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--before-rev", default="main")
    parser.add_argument("--sessions", default="4,32,64")
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    counts = [int(n) for n in args.sessions.split(",")]
    with tempfile.TemporaryDirectory() as tmp:
        codes = {"before": source_of(args.before_rev, Path(tmp)), "now": ROOT}
        runs: dict[tuple[str, int], list[dict]] = {}
        for round_ in range(args.rounds):
            for n in counts:
                for name in list(codes)[::-1 if round_ % 2 else 1]:
                    runs.setdefault((name, n), []).append(
                        measured(codes[name], n, args.seconds))
    print(f"{args.rounds} interleaved rounds of {args.seconds:g} s; median of rounds; before = "
          f"{args.before_rev}'s code")
    print(f"{'code':<7}{'sessions':>9}{'writes/s':>10}{'p50 ms':>8}{'p99 ms':>8}"
          f"{'largest WAL MB':>16}{'vs before':>11}")
    for n in counts:
        base = statistics.median(r["per_s"] for r in runs[("before", n)])
        for name in codes:
            got = runs[(name, n)]
            rate = statistics.median(r["per_s"] for r in got)
            print(f"{name:<7}{n:>9}{rate:>10.0f}"
                  f"{statistics.median(r['p50'] for r in got) * 1e3:>8.2f}"
                  f"{statistics.median(r['p99'] for r in got) * 1e3:>8.2f}"
                  f"{max(r['wal'] for r in got) / 2**20:>16.2f}{rate / base:>10.1%}")


if __name__ == "__main__":
    main()
