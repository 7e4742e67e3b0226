"""Vector env speed: steps+renders per second at N boards, the single env measured beside it.

Uniform random actions (drawn before timing, cycled) on a public version's levels (public-A,
8x8, three crates, the shared look, by default), episodes reset as they end. Each N runs
for about ``--seconds`` after a warm-up; ``copy`` is the env's ``copy=`` (True: new arrays
every step, as Gymnasium's checks ask; False: the env's own buffers). Rates are per
wall-clock second and per CPU second of this process (the fair figure on a shared machine);
"x C port" compares the latter with the public Latent Sokoban C port, measured on these
machines at 790,000 steps+renders/s on one core. Then, for a spec's fresh levels (public/A
by default): the first reset's time, steps/s while drawing, and the bytes each sub-env holds
besides its pictures, beside a version's, at ``--memory-envs``.

    .venv/bin/python benchmarks/vec_env.py [--version public-A] [--envs 1 64 1024 4096]
        [--spec public/A] [--memory-envs 1024 4096] [--workers 1]
"""

from __future__ import annotations

import argparse
import gc
import os
import sys
import time
import tracemalloc
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
    boards, state = held_bytes(env.unwrapped)
    env.close()
    return rate, cpu_rate, boards, state


def held_bytes(inner: gymnasium.vector.VectorEnv) -> tuple[int, int]:
    """Bytes an env holds besides its observation buffer: its board slots and drawn levels
    (a spec's compressed rows), and its per-episode state and outcomes."""
    fresh = getattr(inner, "_fresh", None)
    boards = inner.slots.nbytes + (fresh.nbytes if fresh is not None else 0)
    state = sum(a.nbytes for a in (*inner._episodes, *inner._out))
    return boards, state


def memory_run(source: dict[str, str], datasets: Path, n: int, workers: int, steps: int
               ) -> tuple[float, float, int, int, int]:
    """``n`` boards of ``source`` (version= or spec=): seconds of the first reset (a spec's
    worker start included), steps+renders per second over ``steps`` steps (a spec drawing
    fresh levels as episodes end), the bytes held after them, and the bytes Python traced
    (tracemalloc: the env with all it allocated, observation space and worker pool included)."""
    table = np.random.default_rng(0).integers(0, 4, (steps, n))
    gc.collect()
    tracemalloc.start()
    env = gymnasium.make_vec("sokoforge/Sokoban-v0", num_envs=n,
                             vectorization_mode="vector_entry_point", datasets=datasets,
                             copy=False, workers=workers, **source)
    began = time.perf_counter()
    env.reset(seed=0)
    first = time.perf_counter() - began
    began = time.perf_counter()
    for row in table:
        env.step(row)
    rate = steps * n / (time.perf_counter() - began)
    gc.collect()
    traced = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    boards, state = held_bytes(env.unwrapped)
    env.close()
    return first, rate, boards, state, traced


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--version", default="public-A")
    parser.add_argument("--datasets", type=Path, default=ROOT / "datasets")
    parser.add_argument("--envs", type=int, nargs="+", default=[1, 64, 1024, 4096])
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--spec", default="public/A")
    parser.add_argument("--memory-envs", type=int, nargs="+", default=[1024, 4096])
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--spec-steps", type=int, default=100)
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
    print(f"memory (first reset, then {args.spec_steps} steps; spec {args.spec} drawing fresh "
          f"levels in {args.workers} worker(s)):")
    print(f"{'N':>5} {'source':>9} {'first reset s':>13} {'steps/s':>9} {'obs MB':>7} "
          f"{'boards+drawn MB':>15} {'held B/env':>10} {'traced B/env':>12}")
    from joblib.externals.loky import ProcessPoolExecutor  # noqa: F401  (imports not traced)

    for n in args.memory_envs:
        obs = n * 2 * 64 * 64 * 3
        for name, source in (("version", {"version": args.version}),
                             ("spec", {"spec": args.spec})):
            first, rate, boards, state, traced = memory_run(source, args.datasets, n,
                                                            args.workers, args.spec_steps)
            print(f"{n:>5} {name:>9} {first:>13.1f} {rate:>9,.0f} {obs / 1e6:>7.1f} "
                  f"{boards / 1e6:>15.2f} {(boards + state) / n:>10,.0f} "
                  f"{(traced - obs) / n:>12,.0f}")
    print(f"load average after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
