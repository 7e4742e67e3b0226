"""Rotation on agents it never saw: each panel family held out of the matching in turn.

For each chain, a standard version is built; then, for every held-out family, three rotations
follow one another, each matched (compute, optimum, grade, the reference planner's count, as
``sokoforge rotate``) on the panel without that family; the held-out family's agents are then
measured on the chosen levels. Fresh unmatched builds (other seeds) give the difference a
redraw makes. Printed per held-out family: mean abs(solved - PREV's solved) over its agents,
for the rotations and for fresh builds, and their ratio; also for today's matching without the
panel and with the whole panel (family not held out). The rotations of one chain step share
one candidate pool (the generator at ``--per-slot`` candidates per slot, solved, graded,
played by the planner and the panel), in place of ``rotate``'s targeted enlargements.

    .venv/bin/python benchmarks/rotation.py [--chains 4] [--steps 3] [--fresh 4] [--jobs 2]
        [--per-slot 8] [--spec standard]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import polars as pl

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from engine.panel import PANEL, PANEL_FAMILIES  # noqa: E402
from pipeline.build import build  # noqa: E402
from pipeline.equivalence import allowed_gap, planner_solved  # noqa: E402
from pipeline.generate import generate  # noqa: E402
from pipeline.grade import grade  # noqa: E402
from pipeline.matching import MatchError, PanelRule, match, targets  # noqa: E402
from pipeline.panel import with_outcomes  # noqa: E402
from pipeline.rotate import MAX_ENLARGEMENTS, draw_targets  # noqa: E402
from pipeline.seeds import ENLARGE  # noqa: E402
from pipeline.slot_draws import draw  # noqa: E402
from pipeline.solve import solve  # noqa: E402
from pipeline.spec import load_spec  # noqa: E402
from pipeline.workers import Workers  # noqa: E402

NAMES = [a.name for a in PANEL]


def judged(table: pl.DataFrame, spec, workers: Workers) -> pl.DataFrame:
    """``table`` with max_steps, the planner's outcome and the panel's (all agents)."""
    if "max_steps" not in table.columns:
        table = table.with_columns(pl.Series(
            "max_steps", [spec.max_steps(m) for m in table["optimal_moves"].to_list()],
            dtype=pl.Int32))
    table = table.with_columns(pl.Series("planner_solved", planner_solved(table, workers)))
    return with_outcomes(table, workers)


def graded(candidates: Path, spec, workers: Workers) -> pl.DataFrame:
    """Candidates (a generator's table) solved, graded and judged."""
    solved = solve(candidates, candidates.with_suffix(".solve.parquet"), workers)
    done = grade(solved, candidates.with_suffix(".grade.parquet"), workers)
    return judged(pl.read_parquet(done), spec, workers)


class Pool:
    """One chain step's candidates: the generator's for its seed, plus targeted draws for
    slots that found no candidate, as rotate draws them."""

    def __init__(self, spec, seed: int, workers: Workers, tmp: Path) -> None:
        self.spec, self.seed, self.workers, self.tmp, self.rounds = spec, seed, workers, tmp, 0
        self.table = graded(generate(spec, seed, tmp / f"gen{seed}.parquet", workers), spec,
                            workers)

    def enlarge(self, wanted: pl.DataFrame) -> None:
        self.rounds += 1
        drawn = draw(self.spec, self.seed, ENLARGE, self.rounds, draw_targets(wanted),
                     self.workers)
        if drawn.height:
            path = self.tmp / f"draw{self.seed}-{self.rounds}.parquet"
            drawn.write_parquet(path)
            self.table = pl.concat([self.table, graded(path, self.spec, self.workers)],
                                   how="vertical_relaxed")


def keep_agents(table: pl.DataFrame, keep: list[int]) -> pl.DataFrame:
    """``table`` whose ``panel`` column holds only the agents at positions ``keep``."""
    matrix = np.array(table["panel"].to_list(), dtype=bool)
    return table.with_columns(pl.Series("panel", matrix[:, keep].tolist(),
                                        dtype=pl.List(pl.Boolean)))


def rotate_once(prev: pl.DataFrame, pool: Pool, spec, used: tuple[set, set],
                keep: list[int] | None) -> tuple[pl.DataFrame, str]:
    """PREV's successor chosen from ``pool`` as rotate's select chooses, matching on the
    panel agents ``keep`` (None: without the panel); how it was matched."""
    goal = targets(prev, spec)
    gap = allowed_gap(goal.height)
    for attempt in range(MAX_ENLARGEMENTS + 2):
        if keep is None:
            want, cands, rule = goal.drop("panel"), pool.table.drop("panel"), None
        else:
            want, cands = keep_agents(goal, keep), keep_agents(pool.table, keep)
            rule = PanelRule(tuple(NAMES[k] for k in keep), spec.panel_tolerance)
            if attempt > MAX_ENLARGEMENTS:
                rule = None  # reported: the tolerance could not be held
        try:
            rows = match(want, cands, used[0], used[1], planner_gap=gap, panel=rule)
            break
        except MatchError as e:
            if attempt < MAX_ENLARGEMENTS:
                pool.enlarge(goal.filter(pl.col("index").is_in(e.unmatched)))
    else:
        raise MatchError("no match even without the panel's tolerance", [])
    how = "matched" if keep is None or rule is not None else "panel tolerance relaxed"
    chosen = pool.table[rows].drop("slot").with_columns(goal["slot"], goal["index"])
    used[0].update(chosen["canonical_id"].to_list())
    used[1].update(chosen["wall_layout_id"].to_list())
    return chosen, how


def counts(table: pl.DataFrame) -> np.ndarray:
    return np.array(table["panel"].to_list(), dtype=bool).sum(axis=0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--chains", type=int, default=4)
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--fresh", type=int, default=4)
    parser.add_argument("--per-slot", type=int, default=8)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--seed", type=int, default=7000)
    parser.add_argument("--spec", default="standard")
    args = parser.parse_args()
    began = time.perf_counter()
    spec = load_spec(args.spec)
    pool_spec = replace(spec, candidates_per_slot=args.per_slot)
    workers = Workers(jobs=args.jobs, show_progress=False)
    families = {f: [k for k, a in enumerate(PANEL) if a.family == f] for f in PANEL_FAMILIES}
    # which agents each matching uses: today's (no panel), the whole panel, all but a family
    modes = {"no panel": None, "whole panel": list(range(len(PANEL)))}
    modes |= {f"without {f}": [k for k in range(len(PANEL)) if k not in ks]
              for f, ks in families.items()}
    diffs: dict[str, list[np.ndarray]] = {m: [] for m in modes}
    fresh_diffs: list[np.ndarray] = []
    relaxed = {m: 0 for m in modes}
    with tempfile.TemporaryDirectory(prefix="sokoforge-rotation-") as tmp_name:
        tmp = Path(tmp_name)
        datasets = tmp / "datasets"
        bases, fresh = [], []
        for c in range(args.chains + args.fresh):
            name = f"v{c}"
            build(name, datasets=datasets, spec=spec, seed=args.seed + c, workers=workers,
                  excluded_versions=[])
            table = judged(pl.read_parquet(datasets / name / "levels.parquet"), spec, workers)
            (bases if c < args.chains else fresh).append(table)
            print(f"built {name} ({time.perf_counter() - began:.0f} s)", flush=True)
        for base in bases:
            fresh_diffs += [np.abs(counts(f) - counts(base)) for f in fresh]
        for c, base in enumerate(bases):
            prevs = dict.fromkeys(modes, base)
            used = {m: ({*base["canonical_id"]}, {*base["wall_layout_id"]}) for m in modes}
            for step in range(args.steps):
                pool = Pool(pool_spec, args.seed + 1000 * (c + 1) + step, workers, tmp)
                for mode, keep in modes.items():
                    new, how = rotate_once(prevs[mode], pool, spec, used[mode], keep)
                    relaxed[mode] += how != "matched"
                    diffs[mode].append(np.abs(counts(new) - counts(prevs[mode])))
                    prevs[mode] = new
                print(f"chain {c} rotation {step + 1}: pool of {pool.table.height} "
                      f"({time.perf_counter() - began:.0f} s)", flush=True)
    fresh_mean = np.mean(fresh_diffs, axis=0)
    print(f"\nmean abs(solved - PREV's solved), levels of {spec.n_levels}; {args.chains} chains"
          f" of {args.steps} rotations, {len(fresh_diffs)} fresh build pairs; load average "
          f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} cores; {time.perf_counter() - began:.0f}"
          " s")
    head = f"{'held-out family':<16}{'no panel':>10}{'whole':>8}{'held out':>10}{'fresh':>8}" \
           f"{'held out / fresh':>18}{'no panel / fresh':>18}"
    print(head)
    ratios = []
    for f, ks in families.items():
        held = float(np.mean(np.array(diffs[f"without {f}"])[:, ks]))
        whole = float(np.mean(np.array(diffs["whole panel"])[:, ks]))
        plain = float(np.mean(np.array(diffs["no panel"])[:, ks]))
        redraw = float(np.mean(fresh_mean[ks]))
        ratios.append(held / redraw)
        print(f"{f:<16}{plain:>10.2f}{whole:>8.2f}{held:>10.2f}{redraw:>8.2f}"
              f"{held / redraw:>18.2f}{plain / redraw:>18.2f}")
    print(f"mean ratio held out / fresh: {np.mean(ratios):.2f}")
    print("rotations whose panel tolerance had to be relaxed: "
          + ", ".join(f"{m} {n}" for m, n in relaxed.items()))


if __name__ == "__main__":
    main()
