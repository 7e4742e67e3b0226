"""The ARC-AGI-3 face beside the native protocol: actions/s and latency on one server.

Starts ``sokoforge serve`` as a child process (as ``benchmarks/serve.py`` does) and, for each N,
drives N concurrent sessions of random moves through the native ``act`` route and then through
``/api/cmd/ACTION1-4`` for the same time, printing both rows and their ratio.

    python benchmarks/arc.py [--version demo] [--seconds 5] [--sessions 1,8]
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import json
import random
import signal
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
_spec = importlib.util.spec_from_file_location("serve_bench", ROOT / "benchmarks" / "serve.py")
bench = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bench)


async def drive_arc(base: str, key: str, game: str, n: int, seconds: float) -> dict:
    """N workers, one connection and one ARC game each, random ACTION1-4 until the deadline."""
    latencies: list[float] = []
    deadline = time.perf_counter() + seconds

    async def worker(seed: int) -> None:
        rng = random.Random(seed)
        wire = bench.Wire(base, key, True)
        await wire.open()
        try:
            while time.perf_counter() < deadline:
                card = json.loads((await wire.post("/api/scorecard/open", b"{}"))[1])["card_id"]
                reset = json.dumps({"card_id": card, "game_id": game}).encode()
                guid = json.loads((await wire.post("/api/cmd/RESET", reset))[1])["guid"]
                body = json.dumps({"game_id": game, "guid": guid}).encode()
                over = False
                while not over and time.perf_counter() < deadline:
                    t0 = time.perf_counter()
                    status, answer = await wire.post(f"/api/cmd/ACTION{rng.randrange(1, 5)}", body)
                    latencies.append(time.perf_counter() - t0)
                    if status != 200:
                        raise SystemExit(f"ACTION answered {status}: {answer[:200]!r}")
                    over = b'"state":"NOT_FINISHED"' not in answer
        finally:
            wire.close()

    return await bench.timed(n, worker, latencies)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--version", default="demo")
    parser.add_argument("--datasets", default=str(ROOT / "datasets"))
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--sessions", default="1,8")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root, version = bench.dataset(Path(args.datasets), args.version, Path(tmp))
        proc, base = bench.start_server(root, version, Path(tmp) / "bench.sqlite", "normal")
        try:
            key = asyncio.run(bench.register(base))
            game = f"sokoban-{version}"
            print(f"{args.seconds:g} s per row, gzip on, store synchronous=NORMAL")
            print(f"{'face':>7} {'sessions':>8} {'actions/s':>10} {'p50 ms':>8} {'p99 ms':>8} "
                  f"{'server CPU us/action':>21}")
            # warm both paths (caches, first-call costs) before measuring
            asyncio.run(bench.drive(base, key, 2, 1.0, True))
            asyncio.run(drive_arc(base, key, game, 2, 1.0))
            for n in (int(x) for x in args.sessions.split(",")):
                rows = {}
                for face in ("native", "arc"):
                    cpu = bench.cpu_seconds(proc.pid)
                    run = (bench.drive(base, key, n, args.seconds, True) if face == "native"
                           else drive_arc(base, key, game, n, args.seconds))
                    r = asyncio.run(run)
                    r["cpu"] = 1e6 * (bench.cpu_seconds(proc.pid) - cpu) / max(1, r["actions"])
                    rows[face] = r
                    print(f"{face:>7} {n:>8} {r['per_s']:>10.0f} {r['p50']:>8.2f} "
                          f"{r['p99']:>8.2f} {r['cpu']:>21.0f}", flush=True)
                print(f"{'arc/native':>16} {rows['arc']['per_s'] / rows['native']['per_s']:>10.2f}"
                      f" {rows['arc']['p50'] / rows['native']['p50']:>8.2f}"
                      f" {rows['arc']['p99'] / rows['native']['p99']:>8.2f}"
                      f" {rows['arc']['cpu'] / rows['native']['cpu']:>21.2f}", flush=True)
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(30)


if __name__ == "__main__":
    main()
