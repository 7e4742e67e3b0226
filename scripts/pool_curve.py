"""Compute the difficulty model's reliability curve on its held-out calibration pool.

Redraws the pool from the seed pipeline/specs/difficulty.json records, replays it with the
reference planner, and writes pipeline/specs/difficulty_pool_curve.json, which the audit report
draws beside the version's own curve. Usage: python scripts/pool_curve.py [--jobs N]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

from pipeline.calibrate import held_out_pool, pool_curve
from pipeline.difficulty.difficulty import load_model
from pipeline.difficulty.reliability import POOL_CURVE_PATH, save_pool_curve
from pipeline.errors import PipelineError
from pipeline.spec import load_spec
from pipeline.workers import Workers


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--out", type=Path, default=POOL_CURVE_PATH)
    args = parser.parse_args()
    model = load_model()
    try:
        template = load_spec(model.info["pool"]["template"])
        with tempfile.TemporaryDirectory(prefix="sokoforge-pool-") as work:
            held = held_out_pool(model, template, Path(work), Workers(jobs=args.jobs))
    except PipelineError as e:
        print(f"pool curve: {e}", file=sys.stderr)
        return 1
    data = pool_curve(model, held)
    save_pool_curve(data, args.out)
    print(f"{data['levels']} levels, {data['failures']} planner failures, Brier {data['brier']} "
          f"(base rate {data['brier_base_rate']}); written to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
