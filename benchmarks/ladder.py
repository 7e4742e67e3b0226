"""Cost of the compute ladder beside one reference-planner run and the fast predictor.

Every level of a version (default: the committed demo) is played once by the planner at the
rule's budget, climbed up the whole ladder (8 seeds, budgets 4 to 262,144 dynamics calls per
step, with early stop) and scored by the predictor, in the same run; per tier the script
prints seconds per level and the ladder's ratio to one planner run. This is why builds
predict compute_to_solve and only a spec with ``compute = "measured"`` plays the ladder.

    .venv/bin/python benchmarks/ladder.py [--version demo] [--datasets datasets] [--tiers 0,3]
                                          [--limit N]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

# Run as a script, this file's folder comes first on sys.path and would hide the packages.
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).parent.resolve()]

import polars as pl  # noqa: E402

from engine.agents.ladder import climb  # noqa: E402
from engine.agents.planner import plan  # noqa: E402
from engine.levels import parse_xsb  # noqa: E402
from pipeline.difficulty.difficulty import score_levels  # noqa: E402


def _timed(fn) -> float:
    began = time.perf_counter()
    fn()
    return time.perf_counter() - began


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--version", default="demo")
    parser.add_argument("--datasets", type=Path, default=Path("datasets"))
    parser.add_argument("--tiers", default=None, help="comma-separated tiers (default: all)")
    parser.add_argument("--limit", type=int, default=None, help="levels per tier (default: all)")
    args = parser.parse_args()
    table = pl.read_parquet(args.datasets / args.version / "levels.parquet").sort("index")
    tiers = sorted(set(table["tier"].to_list()))
    if args.tiers:
        tiers = [int(t) for t in args.tiers.split(",")]
    first = parse_xsb(table["xsb"][0])
    plan(first, 10)
    climb(first, 10, rungs=2)  # compile (or load) every kernel before timing
    score_levels(table)
    print(f"{args.version}: seconds per level")
    print(f"{'tier':>4} {'levels':>6} {'opt mean':>8} {'planner':>9} {'ladder':>9} "
          f"{'predictor':>10} {'ladder/planner':>15}")
    for tier in tiers:
        part = table.filter(pl.col("tier") == tier)
        part = part if args.limit is None else part.head(args.limit)
        group = [(parse_xsb(x), int(m)) for x, m in zip(part["xsb"], part["max_steps"],
                                                       strict=True)]
        n = len(group)
        t_plan = _timed(lambda g=group: [plan(lv, b) for lv, b in g])
        t_ladder = _timed(lambda g=group: [climb(lv, b) for lv, b in g])
        t_pred = _timed(lambda p=part: score_levels(p))
        print(f"{tier:>4} {n:>6} {part['optimal_moves'].mean():>8.1f} {t_plan / n:>9.4f} "
              f"{t_ladder / n:>9.3f} {t_pred / n:>10.6f} {t_ladder / t_plan:>15.0f}")


if __name__ == "__main__":
    main()
