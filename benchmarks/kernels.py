"""The engine's kernels timed on two trees side by side: this one and another (``--against``),
each with a numba cache of its own, so a move or a change of the engine shows its cost.

Every kernel family plays the committed demo's levels: the rules (replay), the solver, the
solvable set, reachable counts, optimal paths, dead squares, the planner, the validation
agents, the panel, the compute ladder, a look's frames, episodes drawn at speed (frames) and
the vector env's steps (64 boards). Per tree, the first process on an empty cache compiles
every kernel; then ``--runs`` processes alternate between the trees, each timing its imports
and first calls (kernels loaded from the cache) and the best of ``--repeat`` calls of each
family. Times are CPU seconds of the process (the fair figure on a shared machine; the kernels
run on one thread). Modules are found by file name under each tree's ``engine/``, so the two
trees may lay the engine out differently. Ratios are the other tree's time over this one's.

    .venv/bin/python benchmarks/kernels.py --against ../other-tree [--runs 3] [--repeat 5]
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# Run as a script, this file's folder comes first on sys.path and its engine.py would hide the
# ``engine`` package.
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).parent.resolve()]
# the families in the order they are printed; "load" is the imports and first calls
FAMILIES = ("load", "rules", "solver", "solvable set", "reachable", "optimal paths",
            "dead squares", "planner", "validation agents", "panel", "ladder", "look frames",
            "frames", "vector env")


def engine_module(name: str):
    """The engine module whose file is ``name``.py, wherever the tree keeps it."""
    import engine

    root = Path(engine.__file__).resolve().parent
    found = sorted(root.rglob(f"{name}.py"))
    if len(found) != 1:
        raise SystemExit(f"{len(found)} files named {name}.py under {root}")
    parts = found[0].relative_to(root).with_suffix("").parts
    return importlib.import_module(".".join(("engine", *parts)))


def families(tree: Path) -> dict[str, object]:
    """Each family's call, on the tree's demo levels (imported and called once: the load)."""
    import gymnasium
    import numpy as np
    import polars as pl

    import sokoforge_gym  # noqa: F401  (registers the environment)

    levels_mod, rules, solver = (engine_module(n) for n in ("levels", "rules", "solver"))
    reverse, reachable, paths = (engine_module(n) for n in ("reverse", "reachable",
                                                             "optimal_paths"))
    deadlock, planner, agents = (engine_module(n) for n in ("deadlock", "planner",
                                                             "validation_agents"))
    panel, ladder, look, frames = (engine_module(n) for n in ("panel", "ladder", "look",
                                                               "frames"))
    table = pl.read_parquet(tree / "datasets" / "demo" / "levels.parquet")
    levels = [levels_mod.parse_xsb(x) for x in table["xsb"]]
    budgets = table["max_steps"].to_list()
    solutions = table["solution"].to_list()
    few = list(zip(levels[::10], budgets[::10], strict=True))
    actions = np.random.default_rng(0).integers(0, 4, 200)
    atlases = [frames.TileAtlas.for_level(lv) for lv in levels]
    env = gymnasium.make_vec("sokoforge/Sokoban-v0", num_envs=64,
                             vectorization_mode="vector_entry_point", version="public-A",
                             datasets=tree / "datasets")
    env.reset(seed=0)
    steps = np.random.default_rng(0).integers(0, 4, (32, 64))

    def vector_steps() -> None:
        for row in steps:
            env.step(row)

    return {
        "rules": lambda: [rules.replay(lv, s) for lv, s in zip(levels, solutions, strict=True)],
        "solver": lambda: [solver.solve(lv) for lv in levels],
        # the solvable sets are kept per board: forgotten first, so the search runs each time
        "solvable set": lambda: (reverse._recent.clear(),
                                 [reverse.solvable_set(lv) for lv in levels]),
        "reachable": lambda: [reachable.reachable_stats(lv) for lv in levels[::4]],
        "optimal paths": lambda: [paths.optimal_paths(lv) for lv in levels],
        "dead squares": lambda: [deadlock.dead_squares(lv) for lv in levels],
        "planner": lambda: [planner.plan(lv, b) for lv, b in zip(levels, budgets, strict=True)],
        "validation agents": lambda: [agents.play_agent(lv, b, agents.VALIDATION_AGENTS[0])
                                      for lv, b in zip(levels, budgets, strict=True)],
        "panel": lambda: [panel.play_panel(lv, b) for lv, b in few],
        "ladder": lambda: [ladder.climb(lv, b, rungs=2) for lv, b in few],
        "look frames": lambda: [look.painter(lv).frame() for lv in levels],
        "frames": lambda: [frames.play(atlas, actions) for atlas in atlases],
        "vector env": vector_steps,
    }


def child(repeat: int) -> None:
    """Time this process's tree (the first on ``sys.path``): one JSON line of seconds."""
    calls = families(Path(os.environ["KERNELS_TREE"]))
    for call in calls.values():
        call()
    times = {"load": time.process_time()}   # the process's CPU time so far: imports, loads
    for name, call in calls.items():
        best = float("inf")
        for _ in range(repeat):
            t = time.process_time()
            call()
            best = min(best, time.process_time() - t)
        times[name] = best
    import engine

    print(json.dumps({"engine": engine.__file__, "times": times}))


def children_cpu() -> float:
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


def run(tree: Path, cache: Path, repeat: int) -> dict[str, float]:
    """One process on ``tree`` with the numba cache ``cache``: the family times."""
    env = {**os.environ, "PYTHONPATH": str(tree), "NUMBA_CACHE_DIR": str(cache),
           "KERNELS_TREE": str(tree)}
    out = subprocess.run([sys.executable, __file__, "--child", "--repeat", str(repeat)],
                         cwd=tree, env=env, check=True, capture_output=True, text=True)
    seen = json.loads(out.stdout.strip().splitlines()[-1])
    if not Path(seen["engine"]).resolve().is_relative_to(tree):
        raise SystemExit(f"{tree}: the process imported {seen['engine']}")
    return seen["times"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--against", type=Path, required="--child" not in sys.argv)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.repeat)
        return
    trees = {"this": ROOT, "other": args.against.resolve()}
    with tempfile.TemporaryDirectory(prefix="sokoforge-kernels-") as tmp:
        caches = {k: Path(tmp) / k for k in trees}
        compile_s = {}
        for k, tree in trees.items():
            began = children_cpu()
            run(tree, caches[k], 1)
            compile_s[k] = children_cpu() - began
        best: dict[str, dict[str, float]] = {k: {} for k in trees}
        for _ in range(args.runs):
            for k, tree in trees.items():
                for name, t in run(tree, caches[k], args.repeat).items():
                    best[k][name] = min(best[k].get(name, float("inf")), t)
    print(f"this: {trees['this']}\nother: {trees['other']}")
    print(f"best of {args.runs} processes per tree, alternating; each family best of "
          f"{args.repeat} calls; CPU ms")
    print(f"{'family':<18} {'this':>9} {'other':>9} {'other/this':>10}")
    print(f"{'compile (cold)':<18} {1000 * compile_s['this']:>9.0f} "
          f"{1000 * compile_s['other']:>9.0f} {compile_s['other'] / compile_s['this']:>10.3f}")
    for name in FAMILIES:
        a, b = best["this"][name], best["other"][name]
        print(f"{name:<18} {1000 * a:>9.2f} {1000 * b:>9.2f} {b / a:>10.3f}")


if __name__ == "__main__":
    main()
