"""Rotate a chain of versions for many seeds, with the public splits present, and count failures.

For each seed a version of the spec is built in a temporary datasets folder holding copies of
the repository's public splits (``datasets/public-*``, whose levels and wall layouts no
version may reuse), then rotated ``--chain`` times in a row, each rotation from the last. Every
rotation must succeed; the folder is removed at the end.

    .venv/bin/python scripts/rotation_sweep.py [--start 0] [--count 10] [--chain 10]
        [--spec standard] [--jobs 1]

SIGTERM stops it at once (its workers killed, its folder removed) with exit status 143.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from pipeline.errors import PipelineError  # noqa: E402
from pipeline.rotate import rotate  # noqa: E402
from pipeline.spec import Spec, load_spec  # noqa: E402
from pipeline.stages.build import build  # noqa: E402
from pipeline.workers import Terminated, Workers, sigterm_raises  # noqa: E402


def with_public_splits(datasets: Path, source: Path = ROOT / "datasets") -> list[str]:
    """Copy the public splits of ``source`` into ``datasets``; their names."""
    names = sorted(p.name for p in source.glob("public-*") if (p / "manifest.json").is_file())
    for name in names:
        shutil.copytree(source / name, datasets / name)
    return names


def rotation_chain(datasets: Path, spec: Spec, seed: int, length: int, workers: Workers
                   ) -> list[str]:
    """Build ``c{seed}-0`` from ``seed`` and rotate it ``length`` times in a row (public
    seeds derived from ``seed``); the names of the versions made, base first. A rotation
    that fails raises ``PipelineError``."""
    names = [f"c{seed}-0"]
    build(names[0], datasets=datasets, spec=spec, seed=seed, workers=workers)
    for step in range(1, length + 1):
        names.append(f"c{seed}-{step}")
        rotate(names[-1], names[-2], datasets=datasets, seed=seed * 1000 + step,
               workers=workers)
    return names


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--start", type=int, default=0)
    parser.add_argument("--count", type=int, default=10)
    parser.add_argument("--chain", type=int, default=10)
    parser.add_argument("--spec", default="standard")
    parser.add_argument("--jobs", type=int, default=1)
    args = parser.parse_args()
    spec = load_spec(args.spec)
    workers = Workers(jobs=args.jobs, show_progress=False)
    seeds = range(args.start, args.start + args.count)
    failed: list[tuple[int, str]] = []
    began, rotations = time.perf_counter(), 0
    with tempfile.TemporaryDirectory(prefix="sokoforge-rotation-sweep-") as tmp:
        datasets = Path(tmp)
        public = with_public_splits(datasets)
        for seed in seeds:
            try:
                rotations += len(rotation_chain(datasets, spec, seed, args.chain, workers)) - 1
            except PipelineError as e:
                failed.append((seed, str(e)))
                print(f"seed {seed}: {e}", flush=True)
            print(f"seed {seed} done ({time.perf_counter() - began:.0f} s)", flush=True)
    print(f"{args.spec}: {len(seeds) - len(failed)} of {len(seeds)} chains of {args.chain} "
          f"rotations succeeded (seeds {seeds.start}-{seeds.stop - 1}; {rotations} rotations; "
          f"public splits present: {', '.join(public)}) in {time.perf_counter() - began:.0f} s")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    try:
        with sigterm_raises():  # SIGTERM unwinds: the workers killed, the temporary folder gone
            main()
    except Terminated:
        print("terminated", file=sys.stderr)
        sys.exit(143)
