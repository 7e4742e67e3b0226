"""Rotation on agents it never saw: each panel family held out of the matching in turn.

For each chain, a standard version is built; then, for every held-out family, rotations
follow one another, each matched (compute, optimum, grade, the reference planner's count, as
``sokoforge rotate``) on the panel without that family, and with no rule that sees that
family (holding out ``planner`` also drops the reference planner's outcome, which is
planner-256's); the held-out family's agents are then measured on the chosen levels. Fresh
unmatched builds (other seeds) give the difference a redraw makes. Printed per held-out
family: mean abs(solved - PREV's solved) over its agents, for the rotations and for fresh
builds, their ratio with a bootstrap interval over chains; also for matching without the
panel and with the whole panel (family not held out). The rotations of one chain step draw
from one generator pool (``--per-slot`` candidates per slot, solved, graded, played by the
planner and the panel); each enlarges its own copy with ``rotate``'s targeted draws for the
slots it could not match, so no matching's result depends on which others ran.

The noise floor column estimates the best any matching on the same information could do: each
level's chance that the held-out agent solves it, given the other families' outcomes (at the
matched budgets), the tier and the grade (the rate among the pools' candidates alike in these,
shrunk towards the tier's rate), and the mean abs difference two sets give whose levels are
matched on that chance exactly, sqrt(2/pi) * sqrt(sum 2p(1-p)) over the builds' levels, as a
fraction of what fresh builds differ.

``--pool-cache DIR`` keeps every built version and pool (with every profile agent's outcome
and steps) in DIR and reuses them: the same seeds give the same tables, so a second run
evaluates the matching alone, in minutes.

    .venv/bin/python benchmarks/rotation.py [--chains 4] [--steps 3] [--fresh 4] [--jobs 2]
        [--per-slot 8] [--spec standard] [--pool-cache DIR]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import numpy as np
import polars as pl

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from engine.agents.panel import PANEL, PANEL_FAMILIES, PanelAgent  # noqa: E402
from pipeline.difficulty.panel import play_table  # noqa: E402
from pipeline.rotate import MAX_ENLARGEMENTS, draw_targets  # noqa: E402
from pipeline.scores import matching  # noqa: E402
from pipeline.scores.equivalence import allowed_gap, planner_solved  # noqa: E402
from pipeline.scores.matching import MatchError, PanelRule, match, targets  # noqa: E402
from pipeline.seeds import ENLARGE  # noqa: E402
from pipeline.spec import load_spec  # noqa: E402
from pipeline.stages.build import build  # noqa: E402
from pipeline.stages.generate import generate  # noqa: E402
from pipeline.stages.grade import grade  # noqa: E402
from pipeline.stages.slot_draws import draw  # noqa: E402
from pipeline.stages.solve import solve  # noqa: E402
from pipeline.workers import Workers  # noqa: E402

PROFILE_BUDGETS = (16, 32, 64, 128, 256, 512, 1024)
PROFILE = tuple(PanelAgent(f, b) for f in PANEL_FAMILIES for b in PROFILE_BUDGETS)
PROFILE_NAMES = [a.name for a in PROFILE]
PANEL_AT = [PROFILE_NAMES.index(a.name) for a in PANEL]  # the panel's columns in the profile
HOLD = set(PANEL_AT)  # the profile agents whose solved counts are held within the tolerance


class Cache:
    """Tables by key, kept in memory and, given a folder, on disk for later runs."""

    def __init__(self, folder: Path | None) -> None:
        self.folder, self.held = folder, {}
        if folder is not None:
            folder.mkdir(parents=True, exist_ok=True)

    def table(self, key: str, compute: Callable[[], pl.DataFrame]) -> pl.DataFrame:
        if key in self.held:
            return self.held[key]
        path = None if self.folder is None else self.folder / f"{key}.parquet"
        if path is not None and path.is_file():
            table = pl.read_parquet(path)
        else:
            table = compute()
            if path is not None:
                part = path.with_suffix(".part")
                table.write_parquet(part)
                part.replace(path)
        self.held[key] = table
        return table


def judged(table: pl.DataFrame, spec, workers: Workers) -> pl.DataFrame:
    """``table`` with max_steps, the planner's outcome and every profile agent's outcome and
    steps (``profile``, ``profile_steps``)."""
    if "max_steps" not in table.columns:
        table = table.with_columns(pl.Series(
            "max_steps", [spec.max_steps(m) for m in table["optimal_moves"].to_list()],
            dtype=pl.Int32))
    table = table.with_columns(pl.Series("planner_solved", planner_solved(table, workers)))
    solved, steps = play_table(table, workers, PROFILE)
    return table.with_columns(
        pl.Series("profile", solved.tolist(), dtype=pl.List(pl.Boolean)),
        pl.Series("profile_steps", steps.tolist(), dtype=pl.List(pl.Int32)))


def graded(candidates: Path, spec, workers: Workers) -> pl.DataFrame:
    """Candidates (a generator's table) solved, graded and judged."""
    solved = solve(candidates, candidates.with_suffix(".solve.parquet"), workers)
    done = grade(solved, candidates.with_suffix(".grade.parquet"), workers)
    return judged(pl.read_parquet(done), spec, workers)


class Pool:
    """One chain step's candidates: the generator's for its seed, plus targeted draws for
    slots that found no candidate, as rotate draws them."""

    def __init__(self, spec, seed: int, workers: Workers, tmp: Path, cache: Cache) -> None:
        self.spec, self.seed, self.workers, self.tmp, self.rounds = spec, seed, workers, tmp, 0
        self.cache = cache
        key = f"{spec.name}-pool-{seed}-{spec.candidates_per_slot}"
        self.table = cache.table(key, lambda: graded(
            generate(spec, seed, tmp / f"gen{seed}.parquet", workers), spec, workers))

    def enlarge(self, wanted: pl.DataFrame) -> None:
        self.rounds += 1
        wanted_targets = draw_targets(wanted)
        digest = hashlib.sha256(json.dumps([repr(t) for t in wanted_targets])
                                .encode()).hexdigest()[:16]
        key = f"{self.spec.name}-draw-{self.seed}-{self.rounds}-{digest}"

        def compute() -> pl.DataFrame:
            drawn = draw(self.spec, self.seed, ENLARGE, self.rounds, wanted_targets,
                         self.workers)
            if not drawn.height:
                return self.table.clear()
            path = self.tmp / f"draw{self.seed}-{self.rounds}.parquet"
            drawn.write_parquet(path)
            return graded(path, self.spec, self.workers)

        extra = self.cache.table(key, compute)
        if extra.height:
            self.table = pl.concat([self.table, extra], how="vertical_relaxed")


def with_panel(table: pl.DataFrame, columns: list[int]) -> pl.DataFrame:
    """``table`` whose ``panel`` (and ``panel_steps``) columns hold the profile agents at
    positions ``columns``."""
    matrix = np.array(table["profile"].to_list(), dtype=bool)
    steps = np.array(table["profile_steps"].to_list(), dtype=np.int32)
    return table.with_columns(
        pl.Series("panel", matrix[:, columns].tolist(), dtype=pl.List(pl.Boolean)),
        pl.Series("panel_steps", steps[:, columns].tolist(), dtype=pl.List(pl.Int32)))


def rotate_once(prev: pl.DataFrame, pool: Pool, spec, used: tuple[set, set],
                keep: list[int] | None, planner: bool) -> tuple[pl.DataFrame, str]:
    """PREV's successor chosen from ``pool`` as rotate's select chooses, matching on the
    profile agents ``keep`` (None: without the panel), and on the reference planner's
    outcome when ``planner``; how it was matched."""
    goal = targets(prev, spec)
    gap = allowed_gap(goal.height) if planner else None
    for attempt in range(MAX_ENLARGEMENTS + 2):
        want, cands = goal, pool.table
        if not planner:
            want, cands = want.drop("planner_solved"), cands.drop("planner_solved")
        if keep is None:
            want, cands, rule = want.drop("panel", strict=False), cands, None
        else:
            want, cands = with_panel(want, keep), with_panel(cands, keep)
            held = tuple(i for i, k in enumerate(keep) if k in HOLD)
            rule = PanelRule(tuple(PROFILE_NAMES[k] for k in keep), spec.panel_tolerance, held)
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
    """Solved levels per panel agent."""
    return np.array(table["profile"].to_list(), dtype=bool)[:, PANEL_AT].sum(axis=0)


def interval(values: np.ndarray, rng: np.random.Generator, n: int = 2000) -> tuple[float, float]:
    """95% bootstrap interval of the mean of ``values`` (first axis resampled)."""
    picks = rng.integers(0, len(values), size=(n, len(values)))
    means = values[picks].mean(axis=1)
    return float(np.quantile(means, 0.025)), float(np.quantile(means, 0.975))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--chains", type=int, default=4)
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--fresh", type=int, default=4)
    parser.add_argument("--per-slot", type=int, default=8)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--seed", type=int, default=7000)
    parser.add_argument("--spec", default="standard")
    parser.add_argument("--pool-cache", type=Path, default=None)
    parser.add_argument("--budgets", default="64,256,1024",
                        help="the budgets of each matched family the matching sees")
    parser.add_argument("--panel-cost", type=int, default=matching.PANEL_COST)
    parser.add_argument("--steps-cost", type=int, default=matching.STEPS_COST)
    parser.add_argument("--hold", choices=("panel", "all"), default="panel")
    parser.add_argument("--held-out-only", action="store_true")
    parser.add_argument("--tolerance", type=int, default=None,
                        help="each held agent's solved count within this of PREV's "
                             "(default: the spec's panel_tolerance)")
    args = parser.parse_args()
    began = time.perf_counter()
    spec = load_spec(args.spec)
    if args.tolerance is not None:
        spec = replace(spec, panel_tolerance=args.tolerance)
    pool_spec = replace(spec, candidates_per_slot=args.per_slot)
    workers = Workers(jobs=args.jobs, show_progress=False)
    cache = Cache(args.pool_cache)
    matching.PANEL_COST, matching.STEPS_COST = args.panel_cost, args.steps_cost
    if args.hold == "all":
        HOLD.update(range(len(PROFILE)))
    budgets = {int(b) for b in args.budgets.split(",")}
    families = {f: [k for k, a in enumerate(PANEL) if a.family == f] for f in PANEL_FAMILIES}
    seen = {f: [k for k, a in enumerate(PROFILE) if a.family == f and a.budget in budgets]
            for f in PANEL_FAMILIES}
    # which profile agents each matching sees, and whether the reference planner's outcome
    modes: dict[str, tuple[list[int] | None, bool]] = {
        "no panel": (None, True), "whole panel": (sorted(sum(seen.values(), [])), True)}
    modes |= {f"without {f}": (sorted(sum((v for g, v in seen.items() if g != f), [])),
                               f != "planner") for f in PANEL_FAMILIES}
    if args.held_out_only:
        modes = {m: v for m, v in modes.items() if m.startswith("without")}
    diffs: dict[str, list[np.ndarray]] = {m: [] for m in modes}
    fresh_diffs: list[list[np.ndarray]] = []
    relaxed = {m: 0 for m in modes}
    with tempfile.TemporaryDirectory(prefix="sokoforge-rotation-") as tmp_name:
        tmp = Path(tmp_name)
        datasets = tmp / "datasets"
        bases, fresh, candidates = [], [], []
        for c in range(args.chains + args.fresh):
            name, seed = f"v{c}", args.seed + c

            def built(name: str = name, seed: int = seed) -> pl.DataFrame:
                build(name, datasets=datasets, spec=spec, seed=seed, workers=workers,
                      excluded_versions=[])
                return judged(pl.read_parquet(datasets / name / "levels.parquet"), spec,
                              workers)

            table = cache.table(f"{spec.name}-build-{seed}", built)
            (bases if c < args.chains else fresh).append(table)
            print(f"built {name} ({time.perf_counter() - began:.0f} s)", flush=True)
        for base in bases:
            fresh_diffs.append([counts(f) - counts(base) for f in fresh])
        for c, base in enumerate(bases):
            prevs = dict.fromkeys(modes, base)
            used = {m: ({*base["canonical_id"]}, {*base["wall_layout_id"]}) for m in modes}
            for step in range(args.steps):
                seed = args.seed + 1000 * (c + 1) + step
                candidates.append(Pool(pool_spec, seed, workers, tmp, cache).table)
                for mode, (keep, planner) in modes.items():
                    # each mode its own pool: the same generator's candidates, enlarged for
                    # its own unmatched slots only
                    pool = Pool(pool_spec, seed, workers, tmp, cache)
                    new, how = rotate_once(prevs[mode], pool, spec, used[mode], keep, planner)
                    relaxed[mode] += how != "matched"
                    diffs[mode].append(counts(new) - counts(prevs[mode]))
                    prevs[mode] = new
                print(f"chain {c} rotation {step + 1}: {candidates[-1].height} candidates "
                      f"({time.perf_counter() - began:.0f} s)", flush=True)
    floors = {f: noise_floor(bases + fresh, candidates, f, seen) for f in PANEL_FAMILIES}
    report(args, spec, diffs, fresh_diffs, families, relaxed, floors, began)


def noise_floor(builds: list[pl.DataFrame], pools: list[pl.DataFrame], family: str,
                seen: dict[str, list[int]], prior: float = 4.0) -> float:
    """Mean abs(solved - PREV's) of one of ``family``'s agents between two sets matched
    exactly on each level's chance that it solves, given what a matching without the family
    sees (see the module's text); averaged over the family's agents and ``builds``."""
    others = sorted(k for g, ks in seen.items() if g != family for k in ks)
    pool = pl.concat([p.select("tier", "grade", "profile") for p in pools])
    outcomes = np.array(pool["profile"].to_list(), dtype=bool)

    def keys(table: pl.DataFrame, matrix: np.ndarray) -> list[tuple]:
        return [(*row, t, g) for row, t, g in zip(matrix[:, others].astype(int).tolist(),
                                                 table["tier"], table["grade"], strict=True)]

    pool_keys = keys(pool, outcomes)
    tiers = pool["tier"].to_numpy()
    spreads = []
    for agent in (k for k, a in enumerate(PROFILE) if a.family == family and k in PANEL_AT):
        solved: dict[tuple, list[int]] = {}
        for key, hit in zip(pool_keys, outcomes[:, agent].tolist(), strict=True):
            solved.setdefault(key, []).append(hit)
        for version in builds:
            matrix = np.array(version["profile"].to_list(), dtype=bool)
            chances = []
            for key in keys(version, matrix):
                hits, rate = solved.get(key, []), outcomes[tiers == key[-2], agent].mean()
                chances.append((sum(hits) + prior * rate) / (len(hits) + prior))
            p = np.array(chances)
            spreads.append(np.sqrt(2 / np.pi) * np.sqrt((2 * p * (1 - p)).sum()))
    return float(np.mean(spreads))


def report(args, spec, diffs, fresh_diffs, families, relaxed, floors, began) -> None:
    """Print the table: per held-out family, rotations against fresh builds."""
    rng = np.random.default_rng(0)
    # chains x rotations x agents, and chains x fresh builds x agents
    signed = {m: np.array(d).reshape(args.chains, args.steps, -1) for m, d in diffs.items()}
    per = {m: np.abs(d) for m, d in signed.items()}
    redraws = np.abs(np.array(fresh_diffs))
    print(f"\nmean abs(solved - PREV's solved), levels of {spec.n_levels}; {args.chains} chains"
          f" of {args.steps} rotations, {args.chains * args.fresh} fresh build pairs; matched "
          f"budgets {args.budgets}, panel cost {args.panel_cost}, steps cost {args.steps_cost}, "
          f"held {args.hold}, {args.per_slot} candidates per slot; load average "
          f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} cores; "
          f"{time.perf_counter() - began:.0f} s")
    head = f"{'held-out family':<16}{'no panel':>10}{'whole':>8}{'held out':>10}{'fresh':>8}" \
           f"{'held out / fresh':>18}{'95% interval':>16}{'floor / fresh':>15}" \
           f"{'held out, signed':>18}"
    print(head)
    ratios = []
    # the ratio's interval resamples chains (each with its rotations and its fresh pairs)
    picks = rng.integers(0, args.chains, size=(2000, args.chains))
    boot = []
    for f, ks in families.items():
        held = per[f"without {f}"][:, :, ks].mean(axis=(1, 2))
        redraw = redraws[:, :, ks].mean(axis=(1, 2))
        whole = float(per["whole panel"][:, :, ks].mean()) if "whole panel" in per else np.nan
        plain = float(per["no panel"][:, :, ks].mean()) if "no panel" in per else np.nan
        ratio = held.mean() / redraw.mean()
        ratios.append(ratio)
        samples = held[picks].mean(axis=1) / redraw[picks].mean(axis=1)
        boot.append(samples)
        lo, hi = np.quantile(samples, [0.025, 0.975])
        print(f"{f:<16}{plain:>10.2f}{whole:>8.2f}{held.mean():>10.2f}{redraw.mean():>8.2f}"
              f"{ratio:>18.2f}{f'{lo:.2f}-{hi:.2f}':>16}{floors[f] / redraw.mean():>15.2f}"
              f"{signed[f'without {f}'][:, :, ks].mean():>+18.2f}")
    lo, hi = np.quantile(np.mean(boot, axis=0), [0.025, 0.975])
    floor = np.mean([floors[f] / redraws[:, :, ks].mean() for f, ks in families.items()])
    print(f"mean ratio held out / fresh: {np.mean(ratios):.2f} (95% interval over chains "
          f"{lo:.2f}-{hi:.2f}); noise floor / fresh {floor:.2f}")
    print("rotations whose panel tolerance had to be relaxed: "
          + ", ".join(f"{m} {n}" for m, n in relaxed.items()))


if __name__ == "__main__":
    main()
