"""Build a spec for many consecutive seeds in one process and count how many build.

Every seed must build: a slot that select cannot fill gets more candidates before a build may
fail. The builds go to a temporary folder that is removed at the end.

    .venv/bin/python scripts/seed_sweep.py [--start 0] [--count 200] [--spec standard]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from pipeline.errors import PipelineError  # noqa: E402
from pipeline.spec import load_spec  # noqa: E402
from pipeline.stages.build import build  # noqa: E402
from pipeline.workers import Workers  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--start", type=int, default=0)
    parser.add_argument("--count", type=int, default=200)
    parser.add_argument("--spec", default="standard")
    args = parser.parse_args()
    spec = load_spec(args.spec)
    workers = Workers(show_progress=False)
    seeds = range(args.start, args.start + args.count)
    failed: list[tuple[int, str]] = []
    began, cpu = time.perf_counter(), time.process_time()
    with tempfile.TemporaryDirectory(prefix="sokoforge-sweep-") as tmp:
        for seed in seeds:
            try:
                build(f"s{seed}", datasets=Path(tmp), spec=spec, seed=seed, workers=workers,
                      excluded_versions=[])
            except PipelineError as e:
                failed.append((seed, str(e)))
                print(f"seed {seed}: {e}", flush=True)
    wall, cpu = time.perf_counter() - began, time.process_time() - cpu
    print(f"{args.spec}: {len(seeds) - len(failed)} of {len(seeds)} seeds built "
          f"(seeds {seeds.start}-{seeds.stop - 1}) in {wall:.0f} s wall, {cpu:.0f} s cpu")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
