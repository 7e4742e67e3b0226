"""Panel speed: ``sokoforge panel`` on the 100-level demo version, in fresh processes.

A first run warms the numba cache (not reported); then the command runs on one worker and on
two, side by side, each in a new process (interpreter start and imports included), and every
agent's time on the 100 levels is measured in this process, one agent after another; last,
what counting each episode's pushes (panel.parquet's ``pushes``, replayed through the rules)
adds, beside the panel without it.

    .venv/bin/python benchmarks/panel.py [--jobs 1 2]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import polars as pl  # noqa: E402

from engine.agents.panel import PANEL, play  # noqa: E402
from engine.levels import parse_xsb  # noqa: E402
from pipeline.difficulty.panel import play_episodes, play_table  # noqa: E402
from pipeline.versions.tables import sha256_file  # noqa: E402
from pipeline.workers import Workers  # noqa: E402

TARGET_SECONDS = 60.0
DEMO = ROOT / "datasets" / "demo"


def run_command(jobs: int) -> tuple[float, str]:
    """``sokoforge panel demo --jobs N`` in a new process: wall seconds, the file's sha256."""
    with tempfile.TemporaryDirectory(prefix="sokoforge-panel-") as tmp:
        shutil.copytree(DEMO, Path(tmp) / "demo")
        began = time.perf_counter()
        out = subprocess.run([str(Path(sys.executable).parent / "sokoforge"), "panel", "demo",
                              "--jobs", str(jobs), "--quiet", "--datasets", tmp],
                             capture_output=True, text=True)
        wall = time.perf_counter() - began
        if out.returncode != 0:
            sys.exit(f"panel failed:\n{out.stderr.strip()}")
        return wall, sha256_file(Path(tmp) / "demo" / "report" / "panel.parquet")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, nargs="+", default=[1, 2])
    args = parser.parse_args()
    run_command(1)  # warm the numba cache
    table = pl.read_parquet(DEMO / "levels.parquet").sort("index")
    levels = [(parse_xsb(x), int(m)) for x, m in zip(table["xsb"], table["max_steps"],
                                                      strict=True)]
    print(f"agent panel ({len(PANEL)} agents) on the {len(levels)} levels of datasets/demo; "
          f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    print(f"{'agent':<14}{'seconds':>9}{'solved':>8}")
    total = 0.0
    for agent in PANEL:
        began = time.process_time()
        solved = sum(play(level, steps, agent)[0] for level, steps in levels)
        spent = time.process_time() - began
        total += spent
        print(f"{agent.name:<14}{spent:>9.2f}{solved:>8}")
    print(f"{'all agents':<14}{total:>9.2f}  (cpu seconds, this process)")
    walls = {}
    for jobs in args.jobs:
        walls[jobs], sha = run_command(jobs)
        print(f"sokoforge panel demo --jobs {jobs}: {walls[jobs]:.2f} s (process wall)  "
              f"panel.parquet {sha[:12]}")
    if len(walls) > 1:
        a, b = min(walls), max(walls)
        print(f"speed-up {b} jobs vs {a}: {walls[a] / walls[b]:.2f}x")
    quiet = Workers(show_progress=False)
    began = time.process_time()
    play_table(table, quiet)
    bare = time.process_time() - began
    began = time.process_time()
    play_episodes(table, quiet)
    counted = time.process_time() - began
    print(f"solved and steps: {bare:.2f} cpu s; with each episode's pushes: {counted:.2f} "
          f"cpu s ({counted / bare:.2f}x)")
    best = min(walls.values())
    print(f"best: {best:.2f} s (target <= {TARGET_SECONDS:.0f} s on 2 cores: "
          f"{'met' if best <= TARGET_SECONDS else 'NOT met'})")


if __name__ == "__main__":
    main()
