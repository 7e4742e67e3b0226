"""Trajectory speed: frames per second written to Parquet, one worker against two, side by side.

Episodes of 8x8 three-crate levels (fresh levels of ``public/A`` by default, or ``--from`` a
public version), the default mix of random, solver and perturbed episodes, each set written
to a fresh folder after a small warm-up run (numba cache, worker processes). The reference is
the public Latent Sokoban generator: 10,341 frames of such episodes in 132 s (78 frames/s).

    .venv/bin/python benchmarks/trajectories.py [--episodes N] [--jobs 1 2] [--from VERSION]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from pipeline.spec import load_spec  # noqa: E402
from pipeline.trajectories import (  # noqa: E402
    Plan,
    spec_source,
    version_source,
    write_trajectories,
)
from pipeline.workers import Workers  # noqa: E402

REFERENCE_FPS = 10_341 / 132
TARGET_FPS = 20_000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=4096)
    parser.add_argument("--shard-episodes", type=int, default=256)
    parser.add_argument("--jobs", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--from", dest="version", default=None)
    parser.add_argument("--datasets", type=Path, default=ROOT / "datasets")
    args = parser.parse_args()
    source = (version_source(args.datasets, args.version) if args.version
              else spec_source(load_spec("public/A"), args.datasets))
    print(f"source: {args.version or 'fresh levels of public/A'}; {args.episodes} episodes, "
          f"{args.shard_episodes} a shard; load average {os.getloadavg()[0]:.2f} "
          f"on {os.cpu_count()} cores")
    rows, digests = [], set()
    with tempfile.TemporaryDirectory(prefix="sokoforge-traj-") as tmp:
        for jobs in args.jobs:  # warm-up: compiled kernels loaded, worker processes started
            warm = Plan(source, args.seed + 1, 2 * jobs * 16, shard_episodes=16)
            write_trajectories(warm, Path(tmp) / f"warm{jobs}", Workers(jobs, show_progress=False))
        for jobs in args.jobs:
            plan = Plan(source, args.seed, args.episodes, shard_episodes=args.shard_episodes)
            out = Path(tmp) / f"jobs{jobs}"
            began = time.perf_counter()
            manifest = write_trajectories(plan, out, Workers(jobs, show_progress=False))
            seconds = time.perf_counter() - began
            frames = sum(c["frames"] for c in manifest["counts"].values())
            size = sum(p.stat().st_size for p in out.rglob("*.parquet"))
            digests.add((out / "manifest.json").read_bytes())
            rows.append((jobs, frames, seconds, frames / seconds, size))
    print(f"{'jobs':>4} {'frames':>8} {'seconds':>8} {'frames/s':>9} {'x public':>9} "
          f"{'MB':>6} {'bytes/frame':>11}")
    for jobs, frames, seconds, fps, size in rows:
        print(f"{jobs:>4} {frames:>8} {seconds:>8.2f} {fps:>9.0f} {fps / REFERENCE_FPS:>9.0f} "
              f"{size / 1e6:>6.1f} {size / frames:>11.0f}")
    if len(rows) > 1:
        print(f"jobs {rows[-1][0]} vs {rows[0][0]}: {rows[-1][3] / rows[0][3]:.2f}x")
    met = max(r[3] for r in rows) >= TARGET_FPS
    print(f"target {TARGET_FPS} frames/s: {'met' if met else 'NOT met'}; same bytes at every "
          f"job count: {len(digests) == 1}")
    print(f"load average after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
