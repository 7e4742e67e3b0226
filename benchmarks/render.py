"""Render time per frame for each look, as the server draws: one painter per level made at load,
then a frame per action (RGB, and the ARC face's palette indices), beside the renderer it
replaced (``engine.pictures.render.render``, the 16-colour picture served before looks existed).

Frames are drawn for the states of random walks on real levels: ``datasets/VERSION`` (8x8),
and the shared environment's reference boards (6x6 to 15x15, kept in tests/fixtures/).
Every look is timed in the same run, rounds interleaved, best round kept.

    .venv/bin/python benchmarks/render.py [--version demo] [--frames 4000] [--rounds 5]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
# this file's folder would hide the ``engine`` package behind benchmarks/engine.py
sys.path[0] = str(ROOT)

from engine.levels import Level, State, parse_xsb  # noqa: E402
from engine.pictures.look import ARC, SHARED, Look, draw_theme, painter  # noqa: E402
from engine.pictures.render import render  # noqa: E402
from engine.rules import step  # noqa: E402


def demo_levels(datasets: Path, version: str) -> list[Level]:
    import polars as pl

    path = datasets / version / "levels.parquet"
    if not path.is_file():
        raise SystemExit(f"no {path}: build it first (make dataset VERSION={version})")
    return [parse_xsb(x) for x in pl.read_parquet(path, columns=["xsb"])["xsb"]]


def reference_levels() -> list[Level]:
    """The shared environment's reference boards, as kept with the tests."""
    cases = ROOT / "tests" / "fixtures" / "reference_look" / "cases.json"
    return [parse_xsb(c["xsb"]) for c in json.loads(cases.read_text())]


def walks(levels: list[Level], frames: int, rng: np.random.Generator
          ) -> list[tuple[int, State, int]]:
    """(level number, state, step) of random walks, ``frames`` in all, levels in turn."""
    out: list[tuple[int, State, int]] = []
    per = max(1, frames // len(levels))
    for i, level in enumerate(levels):
        state = level.start
        for n in range(per):
            out.append((i, state, n))
            state = step(level, state, int(rng.integers(4)))[0]
    return out


def looks(rng: np.random.Generator) -> dict[str, Callable[[int], Look]]:
    """Each look by name, as a function of the level number (themes are per level)."""
    themes = [draw_theme(rng, noise=False) for _ in range(256)]
    noisy = [draw_theme(rng, noise=True) for _ in range(256)]
    return {"shared": lambda i: SHARED, "arc": lambda i: ARC,
            "themed": lambda i: Look("themed", themes[i % 256]),
            "themed+noise": lambda i: Look("themed", noisy[i % 256], 1000 + i)}


def time_per_frame(fn: Callable[[int, State, int], object],
                   states: list[tuple[int, State, int]]) -> float:
    began = time.perf_counter()
    for i, state, n in states:
        fn(i, state, n)
    return 1e6 * (time.perf_counter() - began) / len(states)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--version", default="demo")
    parser.add_argument("--datasets", default=str(ROOT / "datasets"))
    parser.add_argument("--frames", type=int, default=4000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    sets = {f"{args.version} (8x8)": demo_levels(Path(args.datasets), args.version)}
    sets["reference (6x6-15x15)"] = reference_levels()
    print(f"us per frame, best of {args.rounds} interleaved rounds of {args.frames} frames; "
          "painters made once per level (as at server load)")
    print(f"{'boards':<22} {'look':<13} {'RGB frame':>10} {'ARC face':>9} {'vs before':>10}")
    for name, levels in sets.items():
        states = walks(levels, args.frames, rng)
        cases: dict[str, Callable[[int, State, int], object]] = {
            "before": lambda i, s, n, lv=levels: render(lv[i], s)}
        arc_faces: dict[str, Callable[[int, State, int], object]] = {}
        for look, of in looks(rng).items():
            painters = [painter(lv, of(i)) for i, lv in enumerate(levels)]
            cases[look] = lambda i, s, n, p=painters: p[i].frame(s, n)
            arc_faces[look] = lambda i, s, n, p=painters: p[i].arc(s)
        best = {k: float("inf") for k in [*cases, *(f"arc:{k}" for k in arc_faces)]}
        for _ in range(args.rounds):
            for k, fn in cases.items():
                best[k] = min(best[k], time_per_frame(fn, states))
            for k, fn in arc_faces.items():
                best[f"arc:{k}"] = min(best[f"arc:{k}"], time_per_frame(fn, states))
        print(f"{name:<22} {'before':<13} {best['before']:>10.1f} {'':>9} {1.0:>9.2f}x")
        for look in arc_faces:
            print(f"{name:<22} {look:<13} {best[look]:>10.1f} {best['arc:' + look]:>9.1f}"
                  f" {best[look] / best['before']:>9.2f}x")
    print("before = engine.pictures.render.render (the 16-colour picture served before looks "
          "existed);"
          " vs before = RGB frame time / before's")


if __name__ == "__main__":
    main()
