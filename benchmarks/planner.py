"""Reference-planner speed beside the optimal solver and the grade features, on one version.

Every level of the version (default: the committed demo) is played once by the planner with its
step budget, solved once by the forward solver and counted once for optimal solutions, all in
the same run; the script prints per-level times per tier and the planner's ratio to the solver.
Calibration and every audit play whole pools with the planner: these figures are their cost.

    .venv/bin/python benchmarks/planner.py [--version demo] [--datasets datasets] [--repeat 3]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

# Run as a script, this file's folder comes first on sys.path and would hide the packages.
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).parent.resolve()]

import polars as pl  # noqa: E402

from engine.agents.planner import plan  # noqa: E402
from engine.levels import parse_xsb  # noqa: E402
from engine.search.optimal_paths import optimal_paths  # noqa: E402
from engine.search.solver import solve  # noqa: E402


def _best_of(repeat: int, fn) -> float:
    best = float("inf")
    for _ in range(repeat):
        began = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - began)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--version", default="demo")
    parser.add_argument("--datasets", type=Path, default=Path("datasets"))
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    table = pl.read_parquet(args.datasets / args.version / "levels.parquet")
    levels = [parse_xsb(x) for x in table["xsb"]]
    budgets = table["max_steps"].to_list()
    plan(levels[0], budgets[0])  # compile (or load) every kernel before timing
    solve(levels[0])
    optimal_paths(levels[0])
    print(f"{args.version}: {len(levels)} levels, best of {args.repeat} runs, ms per level")
    print(f"{'tier':>4} {'levels':>6} {'planner':>8} {'solver':>8} {'counting':>9} "
          f"{'planner/solver':>15} {'solved':>7}")
    for tier in sorted(set(table["tier"].to_list())):
        rows = [i for i, t in enumerate(table["tier"].to_list()) if t == tier]
        group = [(levels[i], budgets[i]) for i in rows]
        t_plan = _best_of(args.repeat, lambda g=group: [plan(lv, b) for lv, b in g])
        t_solve = _best_of(args.repeat, lambda g=group: [solve(lv) for lv, _ in g])
        t_count = _best_of(args.repeat, lambda g=group: [optimal_paths(lv) for lv, _ in g])
        solved = sum(plan(lv, b).solved for lv, b in group)
        n = len(group)
        print(f"{tier:>4} {n:>6} {1000 * t_plan / n:>8.3f} {1000 * t_solve / n:>8.3f} "
              f"{1000 * t_count / n:>9.3f} {t_plan / t_solve:>15.2f} {solved:>4}/{n}")


if __name__ == "__main__":
    main()
