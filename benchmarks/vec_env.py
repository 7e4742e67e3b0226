"""Vector env speed: steps+renders per second at N boards, the single env measured beside it.

Uniform random actions (drawn before timing, cycled) on a public version's levels (public-A,
8x8, three crates, the shared look, by default), episodes reset as they end. Each N runs
for about ``--seconds`` after a warm-up; ``copy`` is the env's ``copy=`` (True: new arrays
every step, as Gymnasium's checks ask; False: the env's own buffers). Rates are per
wall-clock second and per CPU second of this process (the fair figure on a shared machine);
"x C port" compares the latter with the public Latent Sokoban C port, measured on these
machines at 790,000 steps+renders/s on one core.

    .venv/bin/python benchmarks/vec_env.py [--version public-A] [--envs 1 64 1024 4096]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import gymnasium
import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import sokoforge_gym  # noqa: E402, F401  (registers the environment)

REFERENCE = 790_000
TARGET_RATIO = 20
TARGET_N = 1024


def single_rate(version: str, datasets: Path, seconds: float) -> tuple[float, float]:
    """Steps per second of ``gymnasium.make`` (one board), resets included: per wall-clock
    second and per CPU second of this process."""
    env = gymnasium.make("sokoforge/Sokoban-v0", version=version, datasets=datasets)
    env.reset(seed=0)
    actions = np.random.default_rng(0).integers(0, 4, 4096).tolist()
    for a in actions[:200]:  # warm-up
        if any(env.step(a)[2:4]):
            env.reset()
    steps, began, cpu = 0, time.perf_counter(), time.process_time()
    while time.perf_counter() - began < seconds:
        for a in actions[:256]:
            _, _, terminated, truncated, _ = env.step(a)
            if terminated or truncated:
                env.reset()
        steps += 256
        actions = actions[256:] + actions[:256]
    return (steps / (time.perf_counter() - began), steps / (time.process_time() - cpu))


def vector_rate(version: str, datasets: Path, n: int, copy: bool, seconds: float
                ) -> tuple[float, float, int, int]:
    """Steps+renders per second of the vector env with ``n`` boards (per wall-clock second,
    per CPU second), the bytes of its boards (the version's levels, held once) and of its
    per-env state besides the observation buffer."""
    env = gymnasium.make_vec("sokoforge/Sokoban-v0", num_envs=n,
                             vectorization_mode="vector_entry_point", version=version,
                             datasets=datasets, copy=copy)
    env.reset(seed=0)
    table = np.random.default_rng(0).integers(0, 4, (64, n))
    for row in table[:8]:  # warm-up
        env.step(row)
    calls, began, cpu = 0, time.perf_counter(), time.process_time()
    while time.perf_counter() - began < seconds:
        for row in table:
            env.step(row)
        calls += len(table)
    rate = calls * n / (time.perf_counter() - began)
    cpu_rate = calls * n / (time.process_time() - cpu)
    inner = env.unwrapped
    state = sum(a.nbytes for a in (*inner._episodes, *inner._out))
    boards = inner.slots.nbytes
    env.close()
    return rate, cpu_rate, boards, state


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--version", default="public-A")
    parser.add_argument("--datasets", type=Path, default=ROOT / "datasets")
    parser.add_argument("--envs", type=int, nargs="+", default=[1, 64, 1024, 4096])
    parser.add_argument("--seconds", type=float, default=3.0)
    args = parser.parse_args()
    print(f"version {args.version}; load average {os.getloadavg()[0]:.2f} on "
          f"{os.cpu_count()} cores; one process")
    single, single_cpu = single_rate(args.version, args.datasets, args.seconds)
    print(f"single env (gymnasium.make): {single:,.0f} steps/s, {single_cpu:,.0f} per CPU "
          "second")
    print(f"{'N':>5} {'copy':>5} {'steps/s':>11} {'per CPU s':>11} {'x single':>9} "
          f"{'x C port':>9} {'obs MB':>7} {'boards MB':>9} {'state B/env':>11}")
    rows = {}
    for n in args.envs:
        for copy in (False, True):
            rate, cpu_rate, boards, state = vector_rate(args.version, args.datasets, n, copy,
                                                        args.seconds)
            rows[n, copy] = rate, cpu_rate
            obs_mb = n * 2 * 64 * 64 * 3 / 1e6
            print(f"{n:>5} {str(copy):>5} {rate:>11,.0f} {cpu_rate:>11,.0f} "
                  f"{rate / single:>9.1f} {cpu_rate / REFERENCE:>9.2f} {obs_mb:>7.1f} "
                  f"{boards / 1e6:>9.2f} {state / n:>11.0f}")
    if (TARGET_N, False) in rows:
        rate, cpu_rate = rows[TARGET_N, False]
        met = cpu_rate >= REFERENCE and rate >= TARGET_RATIO * single
        print(f"N={TARGET_N}, copy=False: {cpu_rate / REFERENCE:.2f}x the C port per CPU "
              f"second, {rate / single:.0f}x the single env side by side; target (>= 1x and "
              f">= {TARGET_RATIO}x): {'met' if met else 'NOT met'}")
    print(f"load average after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
