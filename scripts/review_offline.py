"""Measure the fair-play review offline, as the README's Fair play section quotes it.

Scores simulated agents' episodes directly with ``pipeline.scores.review`` (no server, no store) on
the demo and on standard builds of the given seeds (built with their panel into ``--cache``
unless there): honest agents within the rule (the panel's families at 64 and 256 calls a step
on the boards turned three ways, epsilon-greedy variants, random play), the families at
1,024 calls, and decoders that know the optimal solutions (plain, detouring and giving up a
quarter, throttled to the easier two thirds, replaying what a random probe saw, and one that
knows the panel's results). Prints the flagged count per kind, then how far a throttled
decoder may go unflagged.

    python scripts/review_offline.py [--seeds 11 12 13] [--cache /tmp/review-cache]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np
import polars as pl

from engine import episode as core
from engine.agents.panel import PANEL, PanelAgent, episode
from engine.levels import parse_xsb, symmetries
from pipeline.difficulty.panel import PANEL_FILE, pushes_of
from pipeline.scores import review

ROOT = Path(__file__).resolve().parent.parent
SOKOFORGE = [sys.executable, "-c", "from sokoforge.cli import main; main()"]


def _row(index: int, solved: bool, steps: int, moves: int, pushes: int) -> dict:
    return {"index": index, "played": True, "solved": solved, "steps": steps, "moves": moves,
            "pushes": pushes, "restarts": 0, "think_ms": None, "pace_ms": None}


def turned(levels: pl.DataFrame, agent: PanelAgent, turn: int) -> pl.DataFrame:
    """``agent`` on each board under symmetry ``turn`` (what it solves, steps and pushes do
    not depend on the turn; its search's tie-breaks do)."""
    rows = []
    for i, x, m in levels.select("index", "xsb", "max_steps").iter_rows():
        level = parse_xsb(symmetries(parse_xsb(x))[turn])
        e = episode(level, int(m), agent, turn)
        rows.append(_row(i, e.solved, e.steps, e.steps, pushes_of(level, e.actions)))
    return pl.DataFrame(rows)


def epsilon(levels: pl.DataFrame, agent: PanelAgent | None, eps: float, seed: int
            ) -> pl.DataFrame:
    """``agent`` replanning every step, a random move instead with chance ``eps`` (no agent:
    random play)."""
    rng = np.random.default_rng(seed)
    rows = []
    for i, x, m in levels.select("index", "xsb", "max_steps").iter_rows():
        level = parse_xsb(x)
        game, moves, pushes = core.begin(level, int(m)), 0, 0
        while not game.over:
            action = int(rng.integers(4))
            if agent is not None and rng.random() >= eps:
                plan = episode(level, int(m) - game.steps, agent, seed, state=game.state)
                action = plan.actions[0] if plan.actions else action
            game, step = core.step(game, action)
            moves, pushes = moves + step.moved, pushes + step.pushed
        rows.append(_row(i, game.solved, game.steps, moves, pushes))
    return pl.DataFrame(rows)


def decoder(levels: pl.DataFrame, seed: int, detours: int = 0, give_up: float = 0.0,
            share: float = 1.0, by: str = "difficulty", weak: pl.DataFrame | None = None,
            padded: bool = False) -> pl.DataFrame:
    """A decoder replaying optimal solutions with up to ``detours`` pairs of moves that push
    nothing, giving up a share ``give_up`` at random, and solving only the easiest ``share``
    of the levels by ``by`` (``weak``'s play on the rest); ``padded``: one wasted push and its
    moves first, so that no level is solved in its optimal pushes or moves."""
    rng = np.random.default_rng(seed)
    key = levels[by].cast(pl.Float64)
    cut = key.quantile(share) if share < 1 else np.inf
    rows = []
    for k, (i, om, op, m) in enumerate(levels.select(
            "index", "optimal_moves", "optimal_pushes", "max_steps").iter_rows()):
        if key[k] > cut and weak is not None:
            rows.append(weak.row(k, named=True))
        elif rng.random() < give_up:
            rows.append(_row(i, False, int(m), int(m), 0))
        else:
            extra = min(2 * int(rng.integers(0, detours + 1)) + 4 * padded, int(m) - om)
            rows.append(_row(i, True, om + extra, om + extra, op + padded))
    return pl.DataFrame(rows)


def judged(rows: pl.DataFrame, ref: review.Reference,
           earlier: tuple[pl.DataFrame, ...] = ()) -> tuple[bool, float]:
    """Whether the review flags ``rows``, and its smallest voting p-value."""
    plays = [review.ScorecardPlay(f"sc-{n}", "k", "k", n, n + 1, r)
             for n, r in enumerate((*earlier, rows))]
    last = review.review_scorecards(plays, ref)[-1]
    p = min(s.p_value for s in last.signals if s.votes and s.p_value is not None)
    return last.verdict == "needs review", p


def versions(seeds: list[int], cache: Path) -> list[Path]:
    """The demo (its panel played into ``cache``) and a standard build of each seed."""
    out = []
    for name, seed in [("demo", None), *((f"review-s{s}", s) for s in seeds)]:
        folder = cache / name
        if not (folder / "manifest.json").exists():
            if seed is None:
                folder.mkdir(parents=True)
                for f in ("levels.parquet", "manifest.json"):
                    (folder / f).write_bytes((ROOT / "datasets" / "demo" / f).read_bytes())
            else:
                subprocess.run([*SOKOFORGE, "build", name, "--seed", str(seed), "--datasets",
                                str(cache), "--quiet"], check=True)
        if not (folder / "report" / PANEL_FILE).exists():
            subprocess.run([*SOKOFORGE, "panel", name, "--datasets", str(cache), "--quiet"],
                           check=True)
        out.append(folder)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[11, 12, 13])
    parser.add_argument("--cache", type=Path, default=Path("/tmp/review-cache"))
    args = parser.parse_args()
    flags: dict[str, list[tuple[bool, float, int]]] = defaultdict(list)
    sweep: dict[tuple[str, float], list[tuple[bool, int]]] = defaultdict(list)
    for folder in versions(args.seeds, args.cache):
        levels = pl.read_parquet(folder / "levels.parquet").sort("index").with_columns(
            pl.col("reachable_states").alias("state_space"))
        ref = review.reference(levels, pl.read_parquet(folder / "report" / PANEL_FILE))

        def note(kind: str, rows: pl.DataFrame, *earlier: pl.DataFrame,
                 ref: review.Reference = ref) -> None:
            flagged, p = judged(rows, ref, earlier)
            flags[kind].append((flagged, p, int(rows["solved"].sum())))

        for agent in PANEL:
            kind = ("families at 1,024 calls (outside the rule)" if agent.budget > 256
                    else f"{agent.name}, turned boards")
            for turn in (1, 2, 3):
                note(kind, turned(levels, agent, turn))
        for family in ("planner", "greedy", "breadth"):
            for seed in (1, 2):
                note("epsilon-greedy 0.1 at 256 calls",
                     epsilon(levels, PanelAgent(family, 256), 0.1, seed))
        weak = epsilon(levels, PanelAgent("greedy", 64), 0.1, 1)
        for seed in (1, 2, 3):
            probe = epsilon(levels, None, 1.0, seed)
            note("random play", probe)
            note("decoder", decoder(levels, seed))
            note("decoder, detours, a quarter given up", decoder(levels, seed, 4, 0.25))
            note("decoder, a wasted push first", decoder(levels, seed, padded=True))
            note("decoder, easier two thirds, weak on the rest",
                 decoder(levels, seed, 4, share=2 / 3, weak=weak))
            note("the same with a wasted push first",
                 decoder(levels, seed, 4, share=2 / 3, weak=weak, padded=True))
            note("random probe, then the solutions", decoder(levels, seed), probe)
        known = ref.levels.filter(~pl.col("hard"))["index"].to_list()  # the panel's results
        note("decoder of the levels the panel solves in optimal pushes",
             decoder(levels.with_columns(known=(~pl.col("index").is_in(known)).cast(pl.Int8)),
                     1, 4, share=0.0, by="known", weak=epsilon(levels, None, 1.0, 9)))
        for by in ("difficulty", "state_space"):
            for share in (0.2, 0.3, 0.4, 0.5, 0.6, 0.67):
                for seed in (1, 2):
                    rows = decoder(levels, seed, 4, share=share, by=by, weak=weak)
                    sweep[by, share].append((judged(rows, ref)[0], int(rows["solved"].sum())))
        print(f"{folder.name}: done", file=sys.stderr)
    print(f"{'agents':<48}{'flagged':>9}{'mean solved':>13}{'min voting p':>14}")
    for kind, seen in flags.items():
        print(f"{kind:<48}{sum(f for f, _, _ in seen):>4}/{len(seen):<4}"
              f"{np.mean([s for _, _, s in seen]):>13.1f}{min(p for _, p, _ in seen):>14.2g}")
    print("\nthrottled decoder: the easiest share of levels solved optimally (with detours), "
          "a weak agent on the rest")
    print(f"{'by':<13}{'share':>6}{'flagged':>9}{'mean solved':>13}{'most solved unflagged':>23}")
    for (by, share), seen in sweep.items():
        unflagged = [s for f, s in seen if not f]
        print(f"{by:<13}{share:>6.2f}{sum(f for f, _ in seen):>4}/{len(seen):<4}"
              f"{np.mean([s for _, s in seen]):>13.1f}"
              f"{max(unflagged) if unflagged else '-':>23}")


if __name__ == "__main__":
    main()
