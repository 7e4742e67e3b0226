"""What a pool's round costs once it was played: the leaderboard, the review, `irt`'s refit of
its items and `round close`, timed on a built and calibrated pool (issue 38's cost).

Copies the pool (``sokoforge build POOL --spec adaptive`` then ``sokoforge panel POOL``) into a
scratch datasets folder, opens its round, and plays ``--names`` simulated agents through the
server's own play layer (``serve.play.Arena``, in process, on a SQLite store), each
``--sessions`` adaptive sessions to their end: an agent of ability theta solves a level with
the pool's calibrated probability (by its optimal solution) and otherwise waits out its
budget. Then prints the largest share of sessions that showed one level (the server's
exposure cap at work) and times each operation on that store, once.

    .venv/bin/python benchmarks/pool_ops.py --datasets /tmp/pools --pool pool1k
        [--names 20] [--sessions 3] [--seed 0]
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import polars as pl

ROOT = Path(__file__).resolve().parent.parent
sys.path[0] = str(ROOT)

from engine.rules import lurd_to_actions  # noqa: E402
from pipeline.scores.adaptive import success_probability  # noqa: E402
from pipeline.versions.round_log import record_served  # noqa: E402
from pipeline.versions.rounds import iso, open_round  # noqa: E402
from serve.games.dataset import load_version  # noqa: E402
from serve.limits import Limits  # noqa: E402
from serve.play import Arena  # noqa: E402
from serve.stores import open_store  # noqa: E402

WAIT = 4  # an action that only uses a step


async def play_sessions(arena: Arena, thetas: np.ndarray, sessions: int,
                        solutions: list[list[int]], rng: np.random.Generator) -> int:
    """Every name plays ``sessions`` sessions to their end; the actions taken."""
    pool = arena.version.pool
    assert pool is not None, "not a pool: build it with --spec adaptive"
    actions = 0
    for n, theta in enumerate(thetas):
        key = await arena.identify(await arena.create_key(f"agent-{n:02d}", "127.0.0.1"))
        for _ in range(sessions):
            card, _ = await arena.open_scorecard(key)
            session = await arena.start(key, card.id, arena.game, 1, "127.0.0.1")
            while session.in_flight:
                episode = session.in_flight[0]
                level = session.episodes[episode].served
                p = float(success_probability(theta, pool.discrimination[[level.index]],
                                              pool.difficulty[[level.index]]).item())
                plan = (solutions[level.index] if rng.random() < p
                        else [WAIT] * level.max_steps)
                for action in plan:
                    session = await arena.act(key, session.id, action, episode,
                                              lambda s, _: s)
                    actions += 1
            await arena.close(key, card.id)
        print(f"  {n + 1}/{len(thetas)} names played ({actions} actions)", flush=True)
    return actions


def timed(what: str, call):
    began = time.perf_counter()
    out = call()
    print(f"{what}: {time.perf_counter() - began:.2f} s", flush=True)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--datasets", type=Path, required=True)
    parser.add_argument("--pool", required=True)
    parser.add_argument("--names", type=int, default=20)
    parser.add_argument("--sessions", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--refresh", type=float, default=None,
                        help="seconds a process keeps a pool's exposure counts (default the "
                             "server's)")
    args = parser.parse_args()

    from click.testing import CliRunner

    from serve.records.standings import GRACE_SECONDS, close_round
    from sokoforge.cli import main as cli

    scratch = Path(tempfile.mkdtemp(prefix="pool-ops-"))
    datasets = scratch / "datasets"
    shutil.copytree(args.datasets / args.pool, datasets / args.pool)
    db = str(scratch / "store.sqlite")
    version = timed("load the pool as a worker does", lambda: load_version(datasets, args.pool))
    rows = pl.read_parquet(datasets / args.pool / "levels.parquet").sort("index")
    solutions = [lurd_to_actions(s) for s in rows["solution"]]
    rnd = open_round(datasets, args.pool, time.time() + 3600)
    rng = np.random.default_rng(args.seed)
    thetas = np.linspace(-2.0, 2.0, args.names)

    async def play() -> int:
        store = open_store(db)
        await store.start()
        try:
            record_served(datasets / args.pool, await store.identity(), iso(time.time()))
            arena = Arena(version, store, Limits(keys_per_address_per_day=10**6,
                                                 scorecards_per_key_per_day=10**6))
            if args.refresh is not None:
                arena.cache.exposures.refresh = args.refresh
            began = time.perf_counter()
            actions = await play_sessions(arena, thetas, args.sessions, solutions, rng)
            print(f"play: {args.names * args.sessions} sessions, {actions} actions in "
                  f"{time.perf_counter() - began:.1f} s")
            shown, sessions = await store.shown_levels(args.pool)
            top = max(shown.values(), default=0)
            print(f"largest exposure through the server: {top}/{sessions} sessions "
                  f"({top / max(sessions, 1):.3f})")
            for what, call in (("leaderboard (pooled, first)", arena.leaderboard),
                               ("leaderboard (pooled, again)", arena.leaderboard)):
                began = time.perf_counter()
                await call(args.pool)
                print(f"{what}: {time.perf_counter() - began:.2f} s")
            return actions
        finally:
            await store.close()

    asyncio.run(play())
    runner = CliRunner()
    for what, argv in (("sokoforge review", ["review", args.pool]),
                       ("sokoforge irt (refit of items.parquet)", ["irt", args.pool])):
        out = timed(what, lambda argv=argv: runner.invoke(
            cli, [*argv, "--db", db, "--datasets", str(datasets)]))
        if out.exit_code != 0:
            raise SystemExit(f"{what} failed: {out.output.strip()}")
    closing = timed("round close", lambda: close_round(
        datasets, args.pool, db, now=rnd.closes + GRACE_SECONDS + 1, sleep=lambda s: None))
    print(f"round close ranked {len(closing.rows)} names")
    shutil.rmtree(scratch)


if __name__ == "__main__":
    main()
