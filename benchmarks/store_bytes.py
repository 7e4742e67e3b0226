"""What the actions' arrival times cost on disk: bytes per action with and without the column.

Fills one SQLite store through ``SQLiteStore.write`` (the server's own path): ``--sessions``
sessions of ``--actions`` actions each, played at once, each action arriving a random think
time after the one before (exponential, mean ``--think-ms``), so the stored times are those
of sessions lasting minutes to hours. Then the same store is copied twice, its actions table
rebuilt alike in both (with the ``ms`` column, and as stores before it had the table), each
vacuumed, and the actions table is measured in both, side by side: its rows' payload
(``dbstat``), its pages and the whole file, per stored action.

    python benchmarks/store_bytes.py [--sessions 40] [--actions 500] [--think-ms 400]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import random
import sqlite3
import sys
import tempfile
from pathlib import Path
from typing import NamedTuple

ROOT = Path(__file__).resolve().parent.parent
sys.path[0] = str(ROOT)

from serve.stores import (  # noqa: E402 - after the path is set
    EpisodeRecord,
    KeyRecord,
    ScorecardRecord,
    SessionRecord,
    Write,
)
from serve.stores.sqlite import SQLiteStore  # noqa: E402

START = 1_900_000_000.0
# the actions table as the stores before arrival times created it
ACTION_COLUMNS = ("session_id TEXT NOT NULL, seq INTEGER NOT NULL, episode INTEGER NOT NULL, "
                  "action INTEGER NOT NULL, at REAL NOT NULL")
DAY = "2030-01-01"


class Sizes(NamedTuple):
    """One copy of the store, measured: the actions table's payload and pages, the file."""

    actions: int
    payload: int
    pages: int
    file: int


async def fill(path: Path, sessions: int, actions: int, think_ms: float, seed: int) -> None:
    """``sessions`` sessions of ``actions`` actions each, written as the server writes them."""
    store = SQLiteStore(path)
    await store.start()
    rng = random.Random(seed)
    try:
        await store.create_key(KeyRecord("k", "bench"), "a", DAY, 1)
        for n in range(sessions):
            await store.open_scorecard(ScorecardRecord(f"sc-{n}", "k", "bench",
                                                       {"standard": "v"}, START), DAY, sessions)
            await store.create_session(SessionRecord(
                f"gs-{n:024d}", f"sc-{n}", "k", "standard", "v", 1, "IN_PROGRESS", START,
                START, 0, "w0"), range(1), sessions, sessions, 0)
        gaps = [[rng.expovariate(1 / think_ms) for _ in range(actions)] for _ in range(sessions)]
        await asyncio.gather(*(play(store, f"gs-{n:024d}", gaps[n]) for n in range(sessions)))
    finally:
        await store.close()


async def play(store: SQLiteStore, sid: str, gaps: list[float]) -> None:
    ms = 0.0
    for seq, gap in enumerate(gaps):
        ms += gap
        row = EpisodeRecord(0, False, False, False, seq + 1, "U", "1:1,2")
        await store.write(Write(sid, seq, "w0" if seq == 0 else "w", "w", START + ms / 1000,
                                seq % 4, 0, (row,), None, round(ms)))


def measured(path: Path) -> Sizes:
    with contextlib.closing(sqlite3.connect(path)) as conn:
        conn.execute("VACUUM")
        count = conn.execute("SELECT count(*) FROM actions").fetchone()[0]
        payload, pages = conn.execute("SELECT sum(payload), sum(pgsize) FROM dbstat "
                                      "WHERE name='actions'").fetchone()
    return Sizes(count, payload, pages, path.stat().st_size)


def copies(store: Path, folder: Path) -> tuple[Path, Path]:
    """The store twice, its actions table rebuilt alike in both (rows copied in key order
    into the table as created): as it is, and without the ``ms`` column."""
    out = []
    for name, columns in (("with", ACTION_COLUMNS + ", ms INTEGER"), ("without", ACTION_COLUMNS)):
        path = folder / f"{name}.sqlite"
        with contextlib.closing(sqlite3.connect(store)) as conn:
            conn.execute(f"VACUUM INTO '{path}'")
        kept = ", ".join(c.split()[0] for c in columns.split(", "))
        with contextlib.closing(sqlite3.connect(path, isolation_level=None)) as conn:
            conn.executescript(f"""BEGIN;
                ALTER TABLE actions RENAME TO played;
                CREATE TABLE actions ({columns}, PRIMARY KEY (session_id, seq)) WITHOUT ROWID;
                INSERT INTO actions SELECT {kept} FROM played ORDER BY session_id, seq;
                DROP TABLE played;
                COMMIT;""")
        out.append(path)
    return out[0], out[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sessions", type=int, default=40)
    parser.add_argument("--actions", type=int, default=500, help="per session")
    parser.add_argument("--think-ms", type=float, default=400.0,
                        help="mean time between two actions of a session")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        asyncio.run(fill(folder / "store.sqlite", args.sessions, args.actions, args.think_ms,
                         args.seed))
        kept, dropped = copies(folder / "store.sqlite", folder)
        with_ms, without = measured(kept), measured(dropped)
    assert with_ms.actions == without.actions == args.sessions * args.actions
    n = with_ms.actions
    longest = args.actions * args.think_ms / 1000
    print(f"{n} actions, {args.sessions} sessions of {args.actions} (about {longest:.0f} s each)")
    print(f"{'per action':<28}{'without ms':>12}{'with ms':>12}{'ms costs':>12}{'ratio':>8}")
    for label, a, b in (("actions rows' payload (B)", without.payload, with_ms.payload),
                        ("actions table's pages (B)", without.pages, with_ms.pages),
                        ("whole file (B)", without.file, with_ms.file)):
        print(f"{label:<28}{a / n:>12.2f}{b / n:>12.2f}{(b - a) / n:>12.2f}{b / a:>8.3f}")


if __name__ == "__main__":
    main()
