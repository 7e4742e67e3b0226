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
from pathlib import Path
from typing import NamedTuple

import numpy as np
import polars as pl

from engine import episode as core
from engine.agents.panel import PANEL, PanelAgent, episode
from engine.agents.reference import (
    REFERENCE_AGENTS,
    REFERENCE_TURNS,
    ReferenceAgent,
    reference_episode,
)
from engine.levels import parse_xsb, symmetries
from pipeline.difficulty.panel import PANEL_FILE, pushes_of
from pipeline.difficulty.reference_play import REFERENCE_FILE
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


def reference_turned(levels: pl.DataFrame, agent: ReferenceAgent, turn: int) -> pl.DataFrame:
    """A reference agent on each board under symmetry ``turn``."""
    rows = []
    for i, x, m in levels.select("index", "xsb", "max_steps").iter_rows():
        level = parse_xsb(symmetries(parse_xsb(x))[turn])
        e = reference_episode(level, int(m), agent)
        rows.append(_row(i, e.solved, e.steps, e.steps, pushes_of(level, e.actions)))
    return pl.DataFrame(rows)


def epsilon(levels: pl.DataFrame, agent: PanelAgent | ReferenceAgent | None, eps: float,
            seed: int) -> pl.DataFrame:
    """``agent`` replanning every step from the state it stands on (its first action is the
    same whatever the horizon), a random move instead with chance ``eps`` (no agent: random
    play)."""
    rng = np.random.default_rng(seed)
    rows = []
    for i, x, m in levels.select("index", "xsb", "max_steps").iter_rows():
        level = parse_xsb(x)
        game, moves, pushes = core.begin(level, int(m)), 0, 0
        while not game.over:
            action = int(rng.integers(4))
            if agent is not None and rng.random() >= eps:
                plan = (reference_episode(level, 1, agent, state=game.state)
                        if isinstance(agent, ReferenceAgent)
                        else episode(level, 1, agent, seed, state=game.state))
                action = plan.actions[0] if plan.actions else action
            game, step = core.step(game, action)
            moves, pushes = moves + step.moved, pushes + step.pushed
        rows.append(_row(i, game.solved, game.steps, moves, pushes))
    return pl.DataFrame(rows)


def chosen(levels: pl.DataFrame, solve: set[int], seed: int, wasted: int = 2,
           through: bool = False) -> pl.DataFrame:
    """A cheater that solves exactly the levels ``solve`` and gives up the rest (waits out
    its budget): each solved with ``wasted`` wasted pushes first (``through``: one to three
    pairs more through the solution), then the optimum from there, padded with detours to
    1.1-1.5 times the optimal moves."""
    rng = np.random.default_rng(seed)
    rows = []
    for i, om, op, m in levels.select("index", "optimal_moves", "optimal_pushes",
                                      "max_steps").iter_rows():
        if i not in solve:
            rows.append(_row(i, False, int(m), int(m), 0))
            continue
        extra_pushes = wasted + (2 * int(rng.integers(1, 4)) if through else 0)
        moves = int(om * rng.uniform(1.1, 1.5)) + 4 * extra_pushes
        moves = min(moves, int(m))
        rows.append(_row(i, True, moves, moves, op + extra_pushes))
    return pl.DataFrame(rows)


def easiest(levels: pl.DataFrame, among: set[int], k: int) -> set[int]:
    """The ``k`` easiest levels of ``among`` by the version's difficulty."""
    pick = levels.filter(pl.col("index").is_in(sorted(among))).sort("difficulty", "index")
    return set(pick["index"].head(k).to_list())


def shaped(levels: pl.DataFrame, ref: review.Reference, total: float, seed: int
           ) -> set[int]:
    """Give-ups shaped by difficulty: each level solved with its frontier chance shifted so
    that ``total`` are expected (a cheater that plays like a strong honest agent)."""
    rng = np.random.default_rng(seed)
    chances = review.shifted(ref.levels["frontier_chance"].to_numpy(), total)
    return {int(i) for i, c in zip(ref.levels["index"], chances, strict=True)
            if rng.random() < c}


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


class Judged(NamedTuple):
    """One scorecard judged: flagged or not, its smallest voting p, solved, the version's
    reference best and bound, and whether ``near_optimal`` alone would have flagged it."""

    flagged: bool
    p: float
    solved: int
    frontier: int
    bound: int
    near: bool


def judged(rows: pl.DataFrame, ref: review.Reference,
           earlier: tuple[pl.DataFrame, ...] = ()) -> Judged:
    """How the review judges ``rows`` (after ``earlier`` scorecards of the same key)."""
    plays = [review.ScorecardPlay(f"sc-{n}", "k", "k", n, n + 1, r)
             for n, r in enumerate((*earlier, rows))]
    last = review.review_scorecards(plays, ref)[-1]
    p = min(s.p_value for s in last.signals if s.votes and s.p_value is not None)
    near = next(s for s in last.signals if s.name == "near_optimal")
    return Judged(last.verdict == "needs review", p, last.solved, last.frontier_solved,
                  last.bound, near.p_value is not None and near.p_value < review.THRESHOLD)


def versions(seeds: list[int], cache: Path) -> list[Path]:
    """The demo and a standard build of each seed, each with its panel and reference (played
    into ``cache`` unless there)."""
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
        if not (folder / "report" / REFERENCE_FILE).exists():
            subprocess.run([*SOKOFORGE, "panel", name, "--datasets", str(cache), "--quiet"],
                           check=True)
        out.append(folder)
    return out


HONEST = "honest"
CHEATER = "cheater"
OVER = "over"


def team(levels: pl.DataFrame, ref: review.Reference, panel: pl.DataFrame,
         frontier: pl.DataFrame) -> list[tuple[str, str, pl.DataFrame, tuple]]:
    """Every scorecard of one version: (kind, row, its rows, its earlier scorecards)."""
    out: list[tuple[str, str, pl.DataFrame, tuple]] = []
    for agent in PANEL:
        kind = OVER if agent.budget > review.RULE_BUDGET else HONEST
        for turn in (1, 2, 3):
            out.append((kind, f"panel {agent.name}" if kind == HONEST else
                        "panel families at 1,024 calls", turned(levels, agent, turn), ()))
    played = sorted(set(range(8)) - set(REFERENCE_TURNS))
    honest_ref = {}
    for agent in REFERENCE_AGENTS:
        for turn in played:
            rows = reference_turned(levels, agent, turn)
            honest_ref[agent.name, turn] = rows
            out.append((HONEST, f"reference {agent.name}, turns it was not played on", rows, ()))
    for i, agent in enumerate((PanelAgent("planner", 256), PanelAgent("greedy", 256),
                               PanelAgent("breadth", 256), REFERENCE_AGENTS[0])):
        out.append((HONEST, "epsilon-greedy 0.1 at 256 calls",
                    epsilon(levels, agent, 0.1, i + 1), ()))
    for seed in (1, 2, 3):
        out.append((HONEST, "random play", epsilon(levels, None, 1.0, seed), ()))
    # cheaters that know the review: what within-rule play solves, plus k more
    within = panel.filter(pl.col("budget") <= review.RULE_BUDGET)
    union = set(within.filter(pl.col("solved"))["index"].to_list())
    ref_union = set(frontier.filter(pl.col("solved"))["index"].to_list())
    every = set(levels["index"].to_list())
    for k in (0, 4, 8, 12, 16, 24):
        out.append((CHEATER, f"panel's union + {k:>2} (wasted pushes first)",
                    chosen(levels, union | easiest(levels, every - union, k), k), ()))
        out.append((CHEATER, f"reference's union + {k:>2} (wasted pushes first)",
                    chosen(levels, ref_union | easiest(levels, every - ref_union, k), k), ()))
        best = max(honest_ref, key=lambda key: int(honest_ref[key]["solved"].sum()))
        mine = set(honest_ref[best].filter(pl.col("solved"))["index"].to_list())
        out.append((CHEATER, f"an honest reference agent's solves + {k:>2}",
                    chosen(levels, mine | easiest(levels, every - mine, k), k,
                           through=True), ()))
    for extra in (0, 5, 10, 15, 20):
        for seed in (1, 2):
            solve = shaped(levels, ref, ref.frontier_solved + extra, seed)
            out.append((CHEATER, f"give-ups shaped by difficulty, reference + {extra:>2}",
                        chosen(levels, solve, seed, wasted=1, through=bool(seed % 2)), ()))
    weak = epsilon(levels, PanelAgent("greedy", 64), 0.1, 1)
    for seed in (1, 2, 3):
        probe = epsilon(levels, None, 1.0, seed)
        out.append((CHEATER, "decoder", decoder(levels, seed), ()))
        out.append((CHEATER, "decoder, detours, a quarter given up",
                    decoder(levels, seed, 4, 0.25), ()))
        out.append((CHEATER, "decoder, a wasted push first", decoder(levels, seed, padded=True),
                    ()))
        out.append((CHEATER, "decoder, easier two thirds, weak on the rest",
                    decoder(levels, seed, 4, share=2 / 3, weak=weak), ()))
        out.append((CHEATER, "random probe, then the solutions", decoder(levels, seed),
                    (probe,)))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[11, 12, 13])
    parser.add_argument("--cache", type=Path, default=Path("/tmp/review-cache"))
    args = parser.parse_args()
    rows: list[dict] = []
    for folder in versions(args.seeds, args.cache):
        levels = pl.read_parquet(folder / "levels.parquet").sort("index")
        panel = pl.read_parquet(folder / "report" / PANEL_FILE)
        frontier = pl.read_parquet(folder / "report" / REFERENCE_FILE)
        ref = review.reference(levels, panel, frontier)
        best_panel = int(panel.filter(pl.col("budget") <= review.RULE_BUDGET)
                         .group_by("agent").agg(pl.col("solved").sum())["solved"].max())
        print(f"{folder.name}: panel's best within the rule {best_panel}, the reference's "
              f"best {ref.frontier_solved}, bound K = {review.bound(ref)}", flush=True)
        for kind, row, played, earlier in team(levels, ref, panel, frontier):
            j = judged(played, ref, earlier)
            rows.append({"version": folder.name, "kind": kind, "row": row, **j._asdict()})
    table = pl.DataFrame(rows)
    print(f"\n{'agents':<56}{'kind':>8}{'flagged':>9}{'solved':>12}{'margin':>9}"
          f"{'min p':>9}{'near':>6}")
    for (kind, row), g in table.group_by("kind", "row", maintain_order=True):
        margin = g["solved"] - g["frontier"]
        print(f"{row:<56}{kind:>8}{int(g['flagged'].sum()):>4}/{g.height:<4}"
              f"{g['solved'].min():>5}-{g['solved'].max():<5}{margin.max():>+8}"
              f"{g['p'].min():>10.2g}{int(g['near'].sum()):>4}")
    honest = table.filter(pl.col("kind") == HONEST)
    cheaters = table.filter(pl.col("kind") == CHEATER)
    passed = cheaters.filter(~pl.col("flagged"))
    above = passed.filter(pl.col("solved") > pl.col("bound"))
    print(f"\nhonest within the rule flagged: {int(honest['flagged'].sum())}/{honest.height}"
          f" (near_optimal alone would flag {int(honest['near'].sum())}); cheaters flagged "
          f"{int(cheaters['flagged'].sum())}/{cheaters.height} (near_optimal alone: "
          f"{int(cheaters['near'].sum())}); cheaters above K unflagged: {above.height}")
    if passed.height:
        print("largest margin over the reference's best of an unflagged cheater: "
              f"{int((passed['solved'] - passed['frontier']).max()):+d}")
    for (version,), g in table.group_by("version", maintain_order=True):
        h = g.filter(pl.col("kind") == HONEST)
        c = g.filter(pl.col("kind") == CHEATER)
        pc = c.filter(~pl.col("flagged"))
        print(f"{version}: frontier {g['frontier'][0]}, K {g['bound'].max()}, honest flagged "
              f"{int(h['flagged'].sum())}/{h.height}, cheaters flagged "
              f"{int(c['flagged'].sum())}/{c.height}, largest unflagged margin "
              f"{int((pc['solved'] - pc['frontier']).max()) if pc.height else '-'}")


if __name__ == "__main__":
    main()
