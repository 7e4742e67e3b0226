"""Does an adaptive scorecard measure better than the standard one? Offline, agents not the panel.

Builds (into ``--cache``, kept) a pool of the adaptive spec with its panel and item parameters
(``sokoforge build --spec adaptive``, ``sokoforge panel``) and ``--builds`` fresh standard
versions. The agents are not the panel: its four families at other budgets (32, 128, 512
calls a step) on boards turned by a symmetry, lazy epsilon-greedy planners (a random move
with chance eps, then a new plan from there), and random play. Each plays every level once.

- truth: the agent's success over all the standard builds' levels;
- standard: one build's success, against the truth of the other builds (leave one out);
- adaptive: ``--sessions`` simulated sessions per agent and length L (25, 50, 100): levels
  chosen by ``pipeline.scores.adaptive`` from the pool, the agent's own outcome on each,
  scored as ``equated_success`` with the pool's measured model error (report/items.json).
  Sessions of all agents take turns, so the exposure counts (which cap a level at 25% of
  sessions) are a mix of agents, as on a server.

Prints RMSE overall and per ability band, the adaptive 95% intervals' coverage, the largest
exposure of a level, and the sessions needed to tell two agents 0.05 apart.

    nice -n 10 .venv/bin/python benchmarks/adaptive.py --builds 10 [--seed 1] [--cache DIR]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import polars as pl

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from engine import episode as core  # noqa: E402
from engine.agents.panel import PANEL_FAMILIES, PanelAgent, episode  # noqa: E402
from engine.levels import parse_xsb, symmetries  # noqa: E402
from pipeline.precision import Z95  # noqa: E402
from pipeline.scores import adaptive as ad  # noqa: E402
from pipeline.scores.items import model_sd, read_items  # noqa: E402
from pipeline.spec import load_spec  # noqa: E402
from pipeline.workers import Workers  # noqa: E402

SOKOFORGE = [sys.executable, "-c", "from sokoforge.cli import main; main()"]
LENGTHS = (25, 50, 100)
BANDS = ((0.0, 0.3), (0.3, 0.6), (0.6, 1.01))


@dataclass(frozen=True)
class Agent:
    """An agent outside the panel: a family at a budget on turned boards, with a chance
    ``eps`` of a random move (then a fresh plan); family None is random play."""

    family: str | None
    budget: int = 0
    turn: int = 1
    eps: float = 0.0

    @property
    def name(self) -> str:
        if self.family is None:
            return "random"
        return f"{self.family}-{self.budget}" + (f" eps {self.eps}" if self.eps else
                                                 f" turned {self.turn}")


AGENTS = (*(Agent(f, b) for f in PANEL_FAMILIES for b in (32, 128, 512)),
          Agent("planner", 256, 0, 0.1), Agent("greedy", 256, 0, 0.2),
          Agent("planner", 128, 0, 0.3), Agent("greedy", 64, 0, 0.4),
          Agent("breadth", 128, 0, 0.5), Agent(None))


def play(item: tuple[Agent, str, int, int]) -> bool:
    """Whether the agent solves the level (``xsb`` in ``max_steps``; ``seed`` its draws)."""
    agent, xsb, max_steps, seed = item
    level = parse_xsb(xsb)
    if agent.family is not None and agent.eps == 0:
        turned = parse_xsb(symmetries(level)[agent.turn])
        return bool(episode(turned, max_steps, PanelAgent(agent.family, agent.budget),
                            agent.turn).solved)
    rng = np.random.default_rng(seed)
    game, plan = core.begin(level, max_steps), []
    while not game.over:
        if agent.family is None or rng.random() < agent.eps:
            action, plan = int(rng.integers(4)), []
        else:
            if not plan:
                plan = list(episode(level, max_steps - game.steps,
                                    PanelAgent(agent.family, agent.budget), seed,
                                    state=game.state).actions)
            action = plan.pop(0) if plan else int(rng.integers(4))
        game, _ = core.step(game, action)
    return bool(game.solved)


def versions(cache: Path, builds: int) -> tuple[Path, list[Path]]:
    """The pool (with panel and items) and the standard builds, built into ``cache``."""
    cache.mkdir(parents=True, exist_ok=True)
    def made(name: str, *args: str) -> Path:
        folder = cache / name
        if not (folder / "manifest.json").exists():
            say(f"building {name}")
            subprocess.run([*SOKOFORGE, "build", name, *args, "--datasets", str(cache),
                            "--jobs", "2", "--quiet"], check=True)
        return folder

    pool = made("pool", "--spec", "adaptive", "--seed", "101")
    if not (pool / "report" / "items.json").exists():
        say("playing the panel on the pool and calibrating it")
        subprocess.run([*SOKOFORGE, "panel", "pool", "--datasets", str(cache), "--jobs", "2",
                        "--quiet"], check=True)
    return pool, [made(f"std-{201 + i}", "--seed", str(201 + i)) for i in range(builds)]


def outcomes(folder: Path, workers: Workers) -> dict[str, np.ndarray]:
    """Every agent's outcome on every level of the version in ``folder``, by agent name
    (kept beside it in ``agents.npz``: the agents are deterministic)."""
    kept = folder.parent / f"{folder.name}.agents.npz"
    if kept.exists():
        with np.load(kept) as saved:
            if set(saved.files) == {a.name for a in AGENTS}:
                return {name: saved[name] for name in saved.files}
    rows = pl.read_parquet(folder / "levels.parquet").sort("index").select(
        "xsb", "max_steps").rows()
    items = [(agent, x, int(m), i) for agent in AGENTS for i, (x, m) in enumerate(rows)]
    say(f"playing {len(AGENTS)} agents on the {len(rows)} levels of {folder.name}")
    solved = np.array(workers.map(play, items, label="agents"), dtype=bool)
    out = {agent.name: part for agent, part in
           zip(AGENTS, solved.reshape(len(AGENTS), len(rows)), strict=True)}
    np.savez(kept, **out)  # type: ignore[arg-type]
    return out


def session(items: pl.DataFrame, solved: np.ndarray, length: int, *, parallel: int,
            rng: np.random.Generator, counts: np.ndarray, sessions: int,
            shares: dict[int, float], top: int, error: float
            ) -> tuple[ad.Equated, np.ndarray]:
    """One simulated session of ``length`` levels: its equated success and the levels shown
    (``counts`` of earlier ``sessions`` cap exposure; ``error`` is the pool's model error)."""
    a, b = items["discrimination"].to_numpy(), items["difficulty"].to_numpy()
    tiers = items["tier"].to_numpy()
    shown = np.array([], dtype=np.int64)
    while shown.size < length:
        theta = ad.estimate(a, b, shown, solved[shown]).theta
        block = ad.choose_block(theta, a, b, tiers, shown, shares,
                                parallel=min(parallel, length - shown.size), rng=rng,
                                blocked=ad.over_exposed(counts, sessions), top=top)
        shown = np.concatenate([shown, np.array(block, dtype=np.int64)])
    weights = ad.ramp_weights(tiers, shares)
    return ad.equated_success(a, b, weights, ad.posterior(a, b, shown, solved[shown]),
                              model_sd=error), shown


def say(line: str) -> None:
    """A progress line, on stderr (the figures go to stdout)."""
    print(f"... {line}", file=sys.stderr, flush=True)


def rmse(errors: list[float]) -> float:
    return float(np.sqrt(np.mean(np.square(errors)))) if errors else float("nan")


def band_of(truth: float) -> int:
    return next(i for i, (lo, hi) in enumerate(BANDS) if lo <= truth < hi)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cache", type=Path, default=Path("/tmp/adaptive-bench"))
    parser.add_argument("--builds", type=int, default=5)
    parser.add_argument("--sessions", type=int, default=10)
    parser.add_argument("--parallel", type=int, default=1)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0, help="the sessions' random draws")
    parser.add_argument("--top", type=int, default=ad.TOP,
                        help="each pick at random among this many most informative levels")
    args = parser.parse_args()
    began = time.perf_counter()
    pool, standards = versions(args.cache, args.builds)
    workers = Workers(jobs=args.jobs, show_progress=False)
    items, error = read_items(pool), model_sd(pool)
    on_pool = outcomes(pool, workers)
    on_builds = [outcomes(f, workers) for f in standards]
    played = time.perf_counter() - began
    shares = load_spec("standard").tier_shares()
    truth = {a.name: float(np.mean([b[a.name].mean() for b in on_builds])) for a in AGENTS}
    errors: dict[str, list[tuple[float, float]]] = {"standard 100": []}
    for name in truth:
        for j, build in enumerate(on_builds):
            rest = np.mean([b[name].mean() for k, b in enumerate(on_builds) if k != j])
            errors["standard 100"].append((float(build[name].mean() - rest), float(rest)))
    mean_of: dict[tuple[int, str], list[float]] = {}
    covered: dict[int, list[bool]] = {n: [] for n in LENGTHS}
    widths: dict[int, list[float]] = {n: [] for n in LENGTHS}
    exposure: dict[int, float] = {}
    rng = np.random.default_rng(args.seed)
    for length in LENGTHS:
        say(f"{args.sessions * len(AGENTS)} adaptive sessions of {length} levels")
        errors[f"adaptive {length}"] = []
        counts, sessions = np.zeros(items.height, dtype=np.int64), 0
        for _ in range(args.sessions):
            for agent in AGENTS:
                eq, shown = session(items, on_pool[agent.name], length, parallel=args.parallel,
                                    rng=rng, counts=counts, sessions=sessions, shares=shares,
                                    top=args.top, error=error)
                counts[shown] += 1
                sessions += 1
                t = truth[agent.name]
                mean_of.setdefault((length, agent.name), []).append(eq.value)
                errors[f"adaptive {length}"].append((eq.value - t, t))
                covered[length].append(eq.low <= t <= eq.high)
                widths[length].append(eq.high - eq.low)
        exposure[length] = float(counts.max() / sessions)
    print(f"agents: {len(AGENTS)}; truth over {len(standards)} standard builds; pool of "
          f"{items.height}; {args.sessions} sessions per agent and length; parallel "
          f"{args.parallel}; top {args.top}; seed {args.seed}; agents' play {played:.0f} s")
    for a in AGENTS:
        print(f"  {a.name:<22} truth {truth[a.name]:.3f}  pool {on_pool[a.name].mean():.3f}  "
              f"adaptive 50 mean {np.mean(mean_of[50, a.name]):.3f}")
    print(f"{'scorecard':<14}{'RMSE':>7}" + "".join(f"{f'{lo:.1f}-{hi:.1f}':>11}"
                                                  for lo, hi in BANDS) + f"{'cases':>7}")
    for kind, pairs in errors.items():
        by_band = [[e for e, t in pairs if band_of(t) == i] for i in range(len(BANDS))]
        print(f"{kind:<14}{rmse([e for e, _ in pairs]):>7.4f}"
              + "".join(f"{rmse(b):>7.4f} ({len(b):>2})" for b in by_band) + f"{len(pairs):>7}")
    for length in LENGTHS:
        print(f"adaptive {length}: 95% coverage {np.mean(covered[length]):.3f} of "
              f"{len(covered[length])}, mean width {np.mean(widths[length]):.3f}, largest "
              f"exposure {exposure[length]:.3f} over {args.sessions * len(AGENTS)} sessions")
    for kind in ("standard 100", "adaptive 50"):
        middle = [e for e, t in errors[kind] if band_of(t) == 1]
        sd = rmse(middle)
        need = int(np.ceil(2 * (Z95 * sd / 0.05) ** 2))
        print(f"{kind}: sessions per agent to tell two middle-band agents 0.05 apart "
              f"(1.96 sd of the difference of means): {need} (one session's RMSE {sd:.4f})")
    print(f"total {time.perf_counter() - began:.0f} s")


if __name__ == "__main__":
    main()
