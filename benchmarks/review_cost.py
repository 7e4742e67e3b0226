"""What the fair-play review costs: time and peak memory of ``sokoforge review`` over N synthetic
closed scorecards (issue 36, point 16: it must grow no faster than the actions it reads).

Fills a SQLite store through the store's own calls (keys, scorecards, sessions, one write per
action, close) with N scorecards on the demo (100 levels), a few keys playing several each:
every scorecard plays 1-6 levels, some with the level's optimal solution and some with random
letters, about 20 actions a scorecard (the ratio of the store in the issue, 108,541 actions
for 5,469 scorecards). Then runs ``sokoforge review demo --json`` once in a child process and
prints its wall time and peak resident memory (the child's own ``ru_maxrss``). The store and the
version's panel are kept in ``--cache DIR`` and reused, so two revisions review the same bytes.

    nice -n 10 .venv/bin/python benchmarks/review_cost.py --scorecards 10000 --cache /tmp/rc
        [--code /tmp/main-tree]   # the same store reviewed by another revision's code
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[0] = str(ROOT)

from engine import episode as core  # noqa: E402
from engine.levels import parse_xsb  # noqa: E402
from serve.arena.keys import hash_key  # noqa: E402
from serve.games.episode import PLAYED  # noqa: E402
from serve.stores import (  # noqa: E402
    EpisodeRecord,
    Final,
    KeyRecord,
    ScorecardRecord,
    SessionRecord,
    Write,
    open_store,
)

DEMO = ROOT / "datasets" / "demo"
SOKOFORGE = [sys.executable, "-c", "from sokoforge.cli import main; main()"]
# the review's child reports its own peak (ru_maxrss, KB on Linux) and CPU seconds (user and
# system: on a shared machine they move less with the load than the wall time) on its way out
MEASURED = [sys.executable, "-c", "import atexit, resource, sys; atexit.register(lambda: print("
            "'peak_kb', resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, 'cpu_s', "
            "resource.getrusage(resource.RUSAGE_SELF).ru_utime + "
            "resource.getrusage(resource.RUSAGE_SELF).ru_stime, file=sys.stderr)); "
            "from sokoforge.cli import main; main()"]
T0 = 1_900_000_000.0
AT_ONCE = 64  # scorecards written together: the store batches concurrent calls
DAY = "2026-12-01"


def version_folder(cache: Path) -> Path:
    """A datasets folder in ``cache`` holding the demo with its panel (played once)."""
    datasets = cache / "datasets"
    folder = datasets / "demo"
    if not (folder / "report" / "panel.parquet").is_file():
        folder.mkdir(parents=True, exist_ok=True)
        for name in ("levels.parquet", "manifest.json"):
            shutil.copy(DEMO / name, folder / name)
        subprocess.run([*SOKOFORGE, "panel", "demo", "--datasets", str(datasets), "--quiet"],
                       check=True, cwd=ROOT)
    return datasets


def plays(rng: random.Random, solutions: list[str]) -> dict[int, str]:
    """One scorecard's play: level index to letters (an optimal solution or random steps)."""
    out = {}
    for index in rng.sample(range(len(solutions)), rng.randint(1, 6)):
        if rng.random() < 0.3 and len(solutions[index]) <= 12:
            out[index] = solutions[index]
        else:
            out[index] = "".join(rng.choice("UDLR.") for _ in range(rng.randint(2, 8)))
    return out


async def put(store, n: int, card: dict[int, str], levels: list[tuple]) -> int:
    """Store scorecard ``n`` playing ``card`` as a server would; its stored actions."""
    name = f"agent-{n % 997}"
    key = hash_key(f"key-{n % 997}")
    cid, sid, opened = f"sc-{n:024x}", f"gs-{n:024x}", T0 + n
    await store.open_scorecard(ScorecardRecord(cid, key, name, {"standard": "demo"}, opened),
                               DAY, 10**9)
    await store.create_session(SessionRecord(sid, cid, key, "standard", "demo", 1, "IN_PROGRESS",
                                             opened, opened, 0, "w"),
                               range(len(levels)), 10**9, 10**9, opened - 60)
    seq, records = 0, []
    for index, letters in card.items():
        xsb, max_steps = levels[index]
        game = core.begin(parse_xsb(xsb), max_steps)
        played = ""
        for letter in letters:
            game, _ = core.step(game, PLAYED.index(letter))
            played += letter
            record = EpisodeRecord(index, game.over, game.solved, False, game.steps, played)
            await store.write(Write(sid, seq, "w", "w", opened + seq / 10, PLAYED.index(letter),
                                    index, (record,), None, 100 * seq))
            seq += 1
        records.append(EpisodeRecord(index, True, game.solved, False, game.steps, played))
    solved = sum(r.solved for r in records)
    score = {"episodes": len(levels), "solved": solved, "success_rate": solved / len(levels),
             "move_efficiency": 1.0 if solved else 0.0, "avg_steps_solved": 0.0,
             "deadlock_rate": 0.0, "total_actions": seq}
    result = {**score, "scorecard_id": cid, "name": name, "version": "demo", "closed": True,
              "games": {"standard": score}, "session_ids": {"standard": sid},
              "versions": {"standard": "demo"}}
    await store.close_scorecard(cid, opened + seq, result, [Final(sid, seq, tuple(records))])
    return seq


async def fill(path: Path, datasets: Path, count: int) -> int:
    """``count`` scorecards into a new store at ``path``; the actions stored."""
    import polars as pl

    table = pl.read_parquet(datasets / "demo" / "levels.parquet").sort("index")
    levels = [(x, int(m)) for x, m in zip(table["xsb"], table["max_steps"], strict=True)]
    solutions = [s.upper() for s in table["solution"]]
    rng = random.Random(16)
    store = open_store(str(path))
    await store.start()
    try:
        for n in range(997):
            await store.create_key(KeyRecord(hash_key(f"key-{n}"), f"agent-{n}"), "addr", DAY,
                                   10**9)
        actions = 0
        for start in range(0, count, AT_ONCE):
            batch = range(start, min(count, start + AT_ONCE))
            done = await asyncio.gather(*(put(store, n, plays(rng, solutions), levels)
                                          for n in batch))
            actions += sum(done)
    finally:
        await store.close()
    return actions


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scorecards", type=int, default=10_000)
    parser.add_argument("--cache", type=Path, required=True)
    parser.add_argument("--code", type=Path, default=ROOT,
                        help="Review with the sokoforge in this tree (e.g. `git archive main` "
                             "unpacked), the store filled by this one: before and after.")
    args = parser.parse_args()
    args.cache.mkdir(parents=True, exist_ok=True)
    datasets = version_folder(args.cache)
    store = args.cache / f"review-{args.scorecards}.sqlite"
    facts = args.cache / f"review-{args.scorecards}.json"
    if not facts.is_file():
        for stale in args.cache.glob(store.name + "*"):
            stale.unlink()
        began = time.perf_counter()
        actions = asyncio.run(fill(store, datasets, args.scorecards))
        facts.write_text(json.dumps({"scorecards": args.scorecards, "actions": actions}))
        print(f"filled {store}: {args.scorecards} scorecards, {actions} actions in "
              f"{time.perf_counter() - began:.0f} s", flush=True)
    actions = json.loads(facts.read_text())["actions"]
    began = time.perf_counter()
    done = subprocess.run([*MEASURED, "review", "demo", "--db", str(store), "--datasets",
                           str(datasets), "--json"], capture_output=True, text=True,
                          cwd=args.code)
    took = time.perf_counter() - began
    if done.returncode != 0:
        raise SystemExit(done.stderr.strip())
    figures = done.stderr.split("peak_kb")[-1].split()
    peak_mb, cpu = int(figures[0]) / 1024, float(figures[2])
    reviewed = sum(1 for line in done.stdout.splitlines() if line.startswith("{"))
    print(f"review of {reviewed} scorecards ({actions} actions) by {args.code}: {took:.1f} s "
          f"wall, {cpu:.1f} s CPU, peak {peak_mb:.0f} MB")


if __name__ == "__main__":
    main()
