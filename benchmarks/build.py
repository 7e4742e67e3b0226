"""Build speed: the standard 100-level game built in a fresh process, stage by stage.

A tiny build runs first so the numba cache is warm; then each configuration is built in its
own new Python process (interpreter start and imports included in "process"), side by side in
one run: one worker against two, and with ``--scatter`` the goal-first generator against the
classic scatter procedure (random boards kept when the forward optimum lands in the band).
Beside each build, "panel" is what ``make dataset`` adds: ``sokoforge panel`` on the built
version. With ``--rotate`` the built version is also rotated once, and the time the rotation
spends in the agent panel (PREV, the candidates, the verdict, NEW's panel.parquet) is shown.

    .venv/bin/python benchmarks/build.py [--seed S] [--jobs 1 2] [--pool K] [--scatter]
        [--rotate]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from pipeline.spec import load_spec  # noqa: E402
from pipeline.stages.build import STAGES  # noqa: E402
from pipeline.versions.tables import sha256_file  # noqa: E402

TARGET_SECONDS = 2.0

# Runs in the fresh process: build one version, print the stage timings as JSON.
_RUNNER = """
import json, sys, time
began = time.perf_counter()
from pathlib import Path
from pipeline.stages.build import build
from pipeline.spec import load_spec, spec_from_dict
from sokoforge.cli import skip_last_collection
skip_last_collection()  # as the sokoforge command does
from pipeline.workers import Workers
from pipeline.difficulty.panel import write_panel
import pipeline.rotate as rotation
datasets, spec_json, seed, jobs = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
spec = spec_from_dict(json.loads(spec_json))
workers = Workers(jobs=jobs, show_progress=False)
imported = time.perf_counter()
result = build("bench", datasets=Path(datasets), spec=spec, seed=seed, workers=workers)
done = time.perf_counter()
write_panel(Path(datasets), "bench", workers)
paneled = time.perf_counter()
timing = {"imports": imported - began, "build": done - imported, "panel": paneled - done,
          "stages": result.timings, "stage_cpu": result.cpu,
          "levels": str(result.path / "levels.parquet")}
if sys.argv[5] == "rotate":
    spent = [0.0]
    def timed(fn):
        def run(*args, **kwargs):
            t = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                spent[0] += time.perf_counter() - t
        return run
    rotation.with_panel = timed(rotation.with_panel)
    rotation.write_panel = timed(rotation.write_panel)
    t = time.perf_counter()
    rotation.rotate("bench-r", "bench", datasets=Path(datasets), seed=seed + 1, workers=workers)
    timing |= {"rotate": time.perf_counter() - t, "rotate_panel": spent[0]}
print(json.dumps(timing))
"""


def run_build(spec: dict, seed: int, jobs: int, rotate: bool = False) -> dict:
    """Build ``spec`` in a new process (then play the panel on it, and with ``rotate``
    rotate it once); its timings plus the process's wall time."""
    with tempfile.TemporaryDirectory(prefix="sokoforge-bench-") as tmp:
        cpu_before = _children_cpu()
        began = time.perf_counter()
        out = subprocess.run(
            [sys.executable, "-c", _RUNNER, tmp, json.dumps(spec), str(seed), str(jobs),
             "rotate" if rotate else "build"],
            cwd=ROOT, capture_output=True, text=True, check=False)
        wall = time.perf_counter() - began
        cpu = _children_cpu() - cpu_before
        if out.returncode != 0:
            sys.exit(f"build failed:\n{out.stderr.strip()}")
        result = json.loads(out.stdout.strip().splitlines()[-1])
        result["process"] = wall
        result["cpu"] = cpu
        result["sha256"] = sha256_file(Path(result.pop("levels")))
    return result


def _children_cpu() -> float:
    """User + system CPU seconds of every finished child process (workers included)."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _row(label: str, r: dict, stages: list[str]) -> str:
    cells = "".join(f"{r['stages'].get(s, 0.0):>10.2f}" for s in stages)
    return (f"{label:<22}{r['process']:>9.2f}{r['cpu']:>9.2f}{r['imports']:>9.2f}"
            f"{r['build']:>9.2f}{cells}{r['panel']:>9.2f}"
            f"  {r['sha256'][:12]}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seed", type=int, default=2026)
    parser.add_argument("--jobs", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--pool", type=int, default=0, metavar="K",
                        help="also time the standard game with K candidates per slot")
    parser.add_argument("--scatter", action="store_true",
                        help="also time scatter against goal-first generation")
    parser.add_argument("--rotate", action="store_true",
                        help="also rotate the standard game once and time its panel work")
    args = parser.parse_args()
    standard = load_spec("standard").to_dict()
    tiny = load_spec("tiny").to_dict()
    run_build(tiny, 1, 1)  # warm the numba cache; not reported

    stages = list(STAGES)
    head = f"{'build':<22}{'process':>9}{'cpu':>9}{'imports':>9}{'build':>9}" + "".join(
        f"{s:>10}" for s in stages) + f"{'panel':>9}  levels sha256"
    load = os.getloadavg()[0]
    print(f"seconds; process = fresh interpreter to exit (wall); cpu = its CPU time, workers "
          f"included; imports = package imports; load average {load:.1f} on "
          f"{os.cpu_count()} cores")
    print(head)
    results = {}
    for jobs in args.jobs:
        results[jobs] = run_build(standard, args.seed, jobs)
        print(_row(f"standard, {jobs} job(s)", results[jobs], stages))
    if 1 in results:
        r = results[1]
        print(f"{'  cpu of 1 job':<22}{'':>9}{'':>9}{'':>9}{sum(r['stage_cpu'].values()):>9.2f}"
              + "".join(f"{r['stage_cpu'].get(s, 0.0):>10.2f}" for s in stages))
    same = len({r["sha256"] for r in results.values()}) == 1
    print(f"identical levels.parquet across job counts: {'yes' if same else 'NO'}")
    if len(args.jobs) > 1:
        a, b = min(args.jobs), max(args.jobs)
        print(f"speed-up {b} jobs vs {a}: {results[a]['process'] / results[b]['process']:.2f}x"
              " (process wall)")
    for jobs, r in results.items():
        print(f"make dataset adds the panel: {r['panel']:.2f} s with {jobs} job(s), "
              f"{r['panel'] / r['build'] * 100:.0f} % of the build")
    best = min(r["process"] for r in results.values())
    print(f"best end-to-end: {best:.2f} s (target <= {TARGET_SECONDS:.1f} s: "
          f"{'met' if best <= TARGET_SECONDS else 'NOT met'})")

    if args.rotate:
        jobs = max(args.jobs)
        r = run_build(standard, args.seed, jobs, rotate=True)
        print(f"\nrotation of the standard game, {jobs} job(s): {r['rotate']:.1f} s, of which "
              f"the agent panel {r['rotate_panel']:.1f} s "
              f"({r['rotate_panel'] / r['rotate'] * 100:.0f} %)")

    if args.pool:
        big = dict(standard, candidates_per_slot=args.pool)
        print(f"\nstandard game, {args.pool} candidates per slot")
        print(head)
        pool = {jobs: run_build(big, args.seed, jobs) for jobs in args.jobs}
        for jobs, r in pool.items():
            print(_row(f"pool {args.pool}, {jobs} job(s)", r, stages))
        if len(args.jobs) > 1:
            a, b = min(args.jobs), max(args.jobs)
            print(f"speed-up {b} jobs vs {a}: {pool[a]['process'] / pool[b]['process']:.2f}x")

    if args.scatter:
        jobs = min(args.jobs)
        scatter = run_build(dict(standard, method="scatter", max_attempts=100_000), args.seed,
                            jobs)
        goal = results.get(jobs) or run_build(standard, args.seed, jobs)
        print(f"\nstandard game, goal-first against scatter, {jobs} job(s)")
        print(head)
        print(_row("goal_first", goal, stages))
        print(_row("scatter", scatter, stages))
        print(f"generate stage, scatter / goal_first: "
              f"{scatter['stages']['generate'] / goal['stages']['generate']:.1f}x wall, "
              f"{scatter['stage_cpu']['generate'] / goal['stage_cpu']['generate']:.1f}x cpu")


if __name__ == "__main__":
    main()
