"""Measure the precision figures on simulated agents of known ability, as the README quotes.

Prints the success interval's coverage per ability on three level populations (the standard
tiers, very unequal tiers, a 20-level game), and the linking's recovery and interval coverage
over a few simulated lines. Deterministic per ``--seed``.

    python scripts/precision_coverage.py [--runs 1000] [--lines 8] [--seed 1]
"""

from __future__ import annotations

import argparse

import numpy as np

from pipeline.scores.simulated_agents import LevelPopulation, interval_coverage, line_check

POPULATIONS = {
    "standard tiers (25, 25, 30, 20)": LevelPopulation(),
    "very unequal tiers": LevelPopulation(tier_means=(-3, -1, 1, 3), spread=0.5),
    "a 20-level game (10, 10)": LevelPopulation(tiers=(10, 10), tier_means=(-1, 1)),
}
ABILITIES = [-3.0, -2.0, -1.0, 0.0, 1.0, 2.0, 3.0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=1000, help="draws of levels per ability")
    parser.add_argument("--lines", type=int, default=8, help="simulated lines to link")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    print(f"success interval coverage, {args.runs} draws of levels per ability:")
    for i, (name, population) in enumerate(POPULATIONS.items()):
        coverage = interval_coverage(population, ABILITIES, args.runs, args.seed + i)
        cells = "  ".join(f"{t:+.0f}: {c:.3f}" for t, c in coverage.items())
        print(f"  {name}: {cells}  (mean {np.mean(list(coverage.values())):.3f})")
    checks = [line_check(30, 3, 0.5, args.seed + s) for s in range(args.lines)]
    corr = [c["correlation"] for c in checks]
    cover = [c["coverage"] for c in checks]
    print(f"linking, {args.lines} lines of 3 versions, 30 agents each playing about half:")
    print(f"  correlation of fitted and true ability: mean {np.mean(corr):.3f}, "
          f"min {np.min(corr):.3f}")
    print(f"  ability interval coverage: mean {np.mean(cover):.3f} "
          f"({len(cover) * 30} intervals), per line {np.min(cover):.2f}-{np.max(cover):.2f}")


if __name__ == "__main__":
    main()
