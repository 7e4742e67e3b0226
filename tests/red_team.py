"""The red team: cheaters and honest agents that play a served game over HTTP, frames only.

Every agent is a client of the reference client (``serve.client.play``): it sees the 64x64
observation and the goal image and nothing else. Each one first reads the board off the
frame (``decode``: two pixels per cell of the shared look, one in each picture, checked by
drawing the board again), as a world model would; what it does next is what sets it apart.

Cheaters search the decoded board without limit (``engine.search.solver.solve``) and replay the
optimal solution: plainly (``Decoder``), with detours that push nothing and a quarter of the
levels given up (``DetourDecoder``), with one wasted push first so that no level is solved
in its optimal pushes (``PaddedDecoder``), only on the easier two thirds (or half, or third) by the
decoded level's state count, playing a weak honest agent on the rest (``ThrottledDecoder``),
or on a second scorecard of a key whose first one played at random ("probe then replay").

Honest agents keep the benchmark's rule: the panel's families (``engine.agents.panel``) at a budget
of dynamics calls per step (``PanelPlayer``), the same with an epsilon of random moves
(``EpsilonPlayer``), and random play. A panel agent is deterministic, so its whole episode is
computed at the episode's first frame and replayed, the moves it would make step by step; a
frame that is not the state the agent expected (after a random move) makes it plan again.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from engine.agents.panel import PanelAgent, episode
from engine.agents.reference import (
    REFERENCE_AGENTS,
    REFERENCE_TURNS,
    ReferenceAgent,
    reference_episode,
)
from engine.levels import MAX_SIDE, Level, LevelError, State, _dihedral, canonical_id, parse_xsb
from engine.pictures.look import (
    BOX,
    BOX_ON_GOAL,
    FLOOR,
    FLOOR_ALT,
    GOAL,
    PLAYER,
    SHARED_THEME,
    SIZE,
    WALL,
    painter,
)
from engine.rules import board_array, delta, lurd_to_actions, step_on
from engine.search.solver import solve
from serve.client import Connection, RandomAgent, play

log = logging.getLogger(__name__)

HORIZON = 400  # steps an honest agent plans for: more than any level's step budget
Agent = Any  # reset() and act(obs, goal, action_history) -> int, as serve.client plays


# ----------------------------------------------------------------------------- the decoder

class Geometry(NamedTuple):
    """Where a board of ``height`` x ``width`` cells sits in the 64x64 picture."""

    height: int
    width: int
    cell: int  # pixels a side
    top: int
    left: int

    def centres(self) -> tuple[np.ndarray, np.ndarray]:
        """Row and column pixel of every cell's centre, row-major."""
        rows = self.top + np.arange(self.height) * self.cell + self.cell // 2
        cols = self.left + np.arange(self.width) * self.cell + self.cell // 2
        return np.repeat(rows, self.width), np.tile(cols, self.height)


def _geometries() -> Iterator[Geometry]:
    for h in range(3, MAX_SIDE + 1):
        for w in range(3, MAX_SIDE + 1):
            c = SIZE // max(h, w)
            yield Geometry(h, w, c, (SIZE - h * c) // 2, (SIZE - w * c) // 2)


GEOMETRIES = tuple(_geometries())
_COLOUR_CODE = {bytes(rgb): code for code, rgb in enumerate(SHARED_THEME.colours.tolist())}


def _codes(picture: np.ndarray, geometry: Geometry) -> np.ndarray | None:
    """The element code under each cell's centre pixel, or None where a colour is not one of
    the shared look's."""
    rows, cols = geometry.centres()
    pixels = picture[rows, cols]
    codes = [_COLOUR_CODE.get(bytes(p)) for p in pixels.tolist()]
    if any(c is None for c in codes):
        return None
    return np.array(codes, dtype=np.int64)


def _board(obs: np.ndarray, goal: np.ndarray, geometry: Geometry) -> Level | None:
    """The level read from the two pictures in ``geometry``, its start the state shown."""
    seen, goals = _codes(obs, geometry), _codes(goal, geometry)
    if seen is None or goals is None or (seen == PLAYER).sum() != 1:
        return None
    shape = (geometry.height, geometry.width)
    crates = tuple(int(c) for c in np.flatnonzero((seen == BOX) | (seen == BOX_ON_GOAL)))
    player = int(np.flatnonzero(seen == PLAYER)[0])
    if not set(seen.tolist()) <= {WALL, FLOOR, FLOOR_ALT, GOAL, BOX, BOX_ON_GOAL, PLAYER}:
        return None
    try:
        return Level(geometry.height, geometry.width, (seen == WALL).reshape(shape),
                     (goals == BOX_ON_GOAL).reshape(shape), State(player, crates))
    except LevelError:
        return None


def decode(obs: np.ndarray, goal: np.ndarray) -> Level:
    """The board shown by ``obs`` (its start: the state shown) and ``goal``, read in the
    level's geometry: the first whose reading, drawn again, gives both pictures to the byte,
    found on the level's first frame and kept by its goal image. ``ValueError`` if none."""
    geometry = _KNOWN.get(goal.tobytes()) or _geometry(obs, goal)
    level = _board(obs, goal, geometry)
    if level is None:
        raise ValueError("this frame is not a board of the shared look")
    return level


_KNOWN: dict[bytes, Geometry] = {}  # goal image -> its level's geometry


def _geometry(obs: np.ndarray, goal: np.ndarray) -> Geometry:
    for geometry in GEOMETRIES:
        level = _board(obs, goal, geometry)
        if level is None:
            continue
        drawn = painter(level)
        if np.array_equal(drawn.frame(), obs) and np.array_equal(drawn.goal(), goal):
            _KNOWN[goal.tobytes()] = geometry
            return geometry
    raise ValueError("no board of the shared look draws this frame")


# ------------------------------------------------------------------------ playing a script

class Scripted:
    """An agent that reads the state off each frame and plays a script of actions planned
    from it (``plan``); a frame that is not the state the script expected is planned again,
    a script played out is followed by ``more`` (by default planned again), and an empty
    plan falls back on ``idle`` (one action)."""

    def __init__(self, seed: int) -> None:
        self.rng = np.random.default_rng(seed)
        self.script: list[int] = []
        self.expect: State | None = None

    def reset(self) -> None:
        self.script, self.expect = [], None

    def act(self, obs: np.ndarray, goal: np.ndarray, action_history: list[int]) -> int:
        level = decode(obs, goal)
        state = level.start
        if state != self.expect:
            self.script = self.plan(level, first=not action_history)
        elif not self.script:
            self.script = self.more(level)
        action = self.script.pop(0) if self.script else self.idle(level)
        self.expect = step_on(board_array(level), level.width, state, action)[0]
        return int(action)

    def plan(self, level: Level, first: bool) -> list[int]:
        raise NotImplementedError

    def more(self, level: Level) -> list[int]:
        return self.plan(level, first=False)

    def idle(self, level: Level) -> int:
        return int(self.rng.integers(4))


def _free(level: Level, state: State, action: int) -> bool:
    """Whether ``action`` walks the player onto an empty floor cell (moves, pushes nothing)."""
    target = state.player + delta(action, level.width)
    return bool(level.floor.flat[target]) and target not in state.crates


def _wall(level: Level, state: State, action: int) -> bool:
    """Whether ``action`` walks into a wall: a no-op that still uses a step."""
    return bool(level.walls.flat[state.player + delta(action, level.width)])


def wander(level: Level, state: State, rng: np.random.Generator) -> int:
    """A random action that pushes nothing: onto a free cell or into a wall."""
    safe = [a for a in range(4) if _free(level, state, a) or _wall(level, state, a)]
    return int(rng.choice(safe)) if safe else int(rng.integers(4))


_BACK = (1, 0, 3, 2)  # the action that undoes each one


def detour(level: Level, state: State, length: int, rng: np.random.Generator) -> list[int]:
    """``length`` random moves that push nothing, then the way back: the player ends where it
    started and no crate has moved (walks into walls are no-ops with no way back needed)."""
    out, back = [], []
    player = state.player
    for _ in range(length):
        here = State(player, state.crates)
        a = wander(level, here, rng)
        out.append(a)
        if _free(level, here, a):
            back.append(_BACK[a])
            player += delta(a, level.width)
    return out + back[::-1]


def with_detours(level: Level, solution: list[int], rng: np.random.Generator,
                 most: int) -> list[int]:
    """``solution`` with one to three detours inserted at random steps, ``most`` extra
    steps at most in all."""
    board = board_array(level)
    states = [level.start]
    for a in solution:
        states.append(step_on(board, level.width, states[-1], a)[0])
    at = sorted(rng.choice(len(solution) + 1, size=int(rng.integers(1, 4)), replace=True))
    out, done, spent = [], 0, 0
    for i in at:
        out += solution[done:i]
        done = i
        extra = detour(level, states[i], int(rng.integers(1, 5)), rng)
        if spent + len(extra) <= most:
            out += extra
            spent += len(extra)
    return out + solution[done:]


def optimal(level: Level) -> list[int]:
    """The fewest-moves solution from the state shown (the cheat: search without limit)."""
    result = solve(level)
    return lurd_to_actions(result.solution) if result.solution is not None else []


# -------------------------------------------------------------------------------- cheaters

class Decoder(Scripted):
    """Decode, solve to optimal, replay: the plain cheat."""

    def plan(self, level: Level, first: bool) -> list[int]:
        return optimal(level)


class DetourDecoder(Scripted):
    """The plain cheat disguised: a quarter of the levels given up (wandered through without
    a push), the rest solved with detours that push nothing (as many extra steps as the
    solution has, at most, so the step budget of three times the optimum holds)."""

    give_up = 0.25

    def reset(self) -> None:
        super().reset()
        self.quit = bool(self.rng.random() < self.give_up)

    def plan(self, level: Level, first: bool) -> list[int]:
        if self.quit:
            return []
        solution = optimal(level)
        return with_detours(level, solution, self.rng, most=len(solution))

    def idle(self, level: Level) -> int:
        return wander(level, level.start, self.rng)


def walks(level: Level, state: State) -> dict[int, list[int]]:
    """The shortest walk (pushing nothing) to every cell the player can reach from ``state``."""
    paths = {state.player: []}
    queue = [state.player]
    for cell in queue:
        here = State(cell, state.crates)
        for a in range(4):
            nxt = cell + delta(a, level.width)
            if nxt not in paths and _free(level, here, a):
                paths[nxt] = paths[cell] + [a]
                queue.append(nxt)
    return paths


def openings(level: Level, state: State) -> Iterator[tuple[list[int], State]]:
    """Every way to go on from ``state`` with one push: a walk, then the push, and where it
    leads."""
    board = board_array(level)
    for cell, path in walks(level, state).items():
        for a in range(4):
            after, _, pushed = step_on(board, level.width, State(cell, state.crates), a)
            if pushed:
                yield path + [a], after


class PaddedDecoder(Scripted):
    """The cheat that hides its optimal pushes: an opening of one push (two where one will
    not do) chosen so that the optimal solution after it takes more pushes in all than the
    level's optimum, then that solution, the shortest such; every level is solved, push-
    optimally only where no opening of two pushes allows otherwise."""

    def plan(self, level: Level, first: bool) -> list[int]:
        best = solve(level)
        if best.solution is None or best.pushes is None or not first:
            return optimal(level)
        starts = [([], level.start, 0)]
        for _ in range(2):
            padded, grown = None, []
            for before, state, pushes in starts:
                for opening, after in openings(level, state):
                    rest = solve(level, after)
                    if rest.solution is None or rest.pushes is None:
                        continue
                    grown.append((before + opening, after, pushes + 1))
                    plan = before + opening + lurd_to_actions(rest.solution)
                    if (pushes + 1 + rest.pushes > best.pushes
                            and (padded is None or len(plan) < len(padded))):
                        padded = plan
            if padded is not None:
                return padded
            starts = grown
        return lurd_to_actions(best.solution)


class ThrottledDecoder(DetourDecoder):
    """The cheat throttled by difficulty: solved with detours only when the decoded level's
    search is among the easier share (``states`` expanded by the solver at most, a quantile
    of a public version's levels, ``throttle_states``); a weak honest agent plays the rest."""

    give_up = 0.0

    def __init__(self, seed: int, states: int, weak: PanelAgent) -> None:
        super().__init__(seed)
        self.states, self.weak = states, weak
        self.honest: PanelPlayer | None = None

    def reset(self) -> None:
        super().reset()
        self.honest = None

    def plan(self, level: Level, first: bool) -> list[int]:
        if first:
            result = solve(level)
            if result.solution is None or result.states_expanded > self.states:
                self.honest = PanelPlayer(self.weak, int(self.rng.integers(1 << 30)))
            else:
                solution = lurd_to_actions(result.solution)
                return with_detours(level, solution, self.rng, most=len(solution))
        if self.honest is not None:
            return self.honest.plan(level, first)
        return super().plan(level, first)

    def more(self, level: Level) -> list[int]:
        return self.honest.more(level) if self.honest is not None else super().more(level)

    def idle(self, level: Level) -> int:
        return int(self.rng.integers(4)) if self.honest is not None else super().idle(level)


class ChosenDecoder(Scripted):
    """The cheater that has read the review: it solves only the levels it chose (``chosen``,
    by ``canonical_id``: what some within-rule play solves, plus a few), each with one or two
    wasted pushes first (``PaddedDecoder``'s opening, so none is push-optimal) and detours
    after, and gives the others up, wandering without a push until the budget runs out."""

    def __init__(self, seed: int, chosen: frozenset[str]) -> None:
        super().__init__(seed)
        self.chosen = chosen
        self.padded = PaddedDecoder(seed)
        self.quit = False

    def plan(self, level: Level, first: bool) -> list[int]:
        if first:
            self.quit = canonical_id(level) not in self.chosen
        if self.quit:
            return []
        solution = self.padded.plan(level, first)
        return with_detours(level, solution, self.rng, most=len(solution) // 3)

    def idle(self, level: Level) -> int:
        return wander(level, level.start, self.rng)


def chosen_sets(levels: Any, panel: Any, played: Any, shaped: Any = None,
                ks: tuple[int, ...] = (0, 4, 8, 16)) -> dict[str, frozenset[str]]:
    """The level sets a cheater that has read the review chooses, by row: the union of the
    within-rule panel's solves plus the ``k`` easiest others (by difficulty), the same for
    the reference's plays, the best reference play's solves plus ``k``; ``shaped``: more
    rows of its own (a row -> level indices)."""
    import polars as pl

    ids = {int(i): canonical_id(parse_xsb(x)) for i, x in zip(levels["index"], levels["xsb"],
                                                              strict=True)}
    order = levels.sort("difficulty", "index")["index"].to_list()

    def plus(base: set[int], k: int) -> frozenset[str]:
        more = [i for i in order if i not in base][:k]
        return frozenset(ids[i] for i in base | set(more))

    within = panel.filter(pl.col("budget") <= 256)
    union = set(within.filter(pl.col("solved"))["index"].to_list())
    reached = set(played.filter(pl.col("solved"))["index"].to_list())
    best = (played.group_by("agent", "turn").agg(pl.col("solved").sum())
            .sort("solved", "agent", "turn", descending=[True, False, False]).row(0))
    mine = set(played.filter((pl.col("agent") == best[0]) & (pl.col("turn") == best[1])
                             & pl.col("solved"))["index"].to_list())
    out = {}
    for k in ks:
        out[f"knows the panel: its union + {k}"] = plus(union, k)
        out[f"knows the reference: its union + {k}"] = plus(reached, k)
        out[f"the best reference play's solves + {k}"] = plus(mine, k)
    for row, indices in (shaped or {}).items():
        out[row] = frozenset(ids[int(i)] for i in indices)
    return out


# ---------------------------------------------------------------------------- honest agents

class Turned(NamedTuple):
    """A level under one of its 8 rotations and reflections, and the way back for actions."""

    level: Level
    back: tuple[int, ...]  # the original action of each action on the turned board


def turn(level: Level, symmetry: int) -> Turned:
    """``level`` (its start the state shown) under symmetry ``symmetry`` (0-7, 0 the identity,
    in ``engine.levels``' order): the same game, the agent's ties broken in other directions."""
    cells = _dihedral(np.arange(level.height * level.width).reshape(level.height, level.width))
    where = cells[symmetry]  # where[r, c]: the original cell shown at (r, c)
    place = {int(cell): i for i, cell in enumerate(where.ravel())}
    state = State(place[level.start.player], tuple(sorted(place[c] for c in level.start.crates)))
    turned = Level(where.shape[0], where.shape[1], level.walls.ravel()[where],
                   level.goals.ravel()[where], state)
    back = []
    for dr, dc in ((-1, 0), (1, 0), (0, -1), (0, 1)):  # up, down, left, right on the turned
        r0, c0 = divmod(int(where[1, 1]), level.width)
        r1, c1 = divmod(int(where[1 + dr, 1 + dc]), level.width)
        back.append(((-1, 0), (1, 0), (0, -1), (0, 1)).index((r1 - r0, c1 - c0)))
    return Turned(turned, tuple(back))


class PanelPlayer(Scripted):
    """A panel agent (family and budget in dynamics calls per step) on the decoded board: the
    moves ``engine.agents.panel.episode`` makes from the state shown; random moves once it is stuck.
    With a ``symmetry`` other than 0 it plays the board turned (``turn``): an honest agent of
    the same family and budget that is not the panel's own, its ties broken otherwise.

    Its episode is computed a doubling horizon at a time (1, 2, 4... steps, each run a prefix
    of the next), so it thinks about as long before each action as a step of the agent does,
    not the whole episode's search before the first one (what the review's timing reads)."""

    def __init__(self, agent: PanelAgent, seed: int, symmetry: int = 0) -> None:
        super().__init__(seed)
        self.agent, self.seed, self.symmetry = agent, seed, symmetry
        self.turned: Turned | None = None
        self.horizon = self.given = 0
        self.cut = False

    def plan(self, level: Level, first: bool) -> list[int]:
        self.turned, self.horizon, self.given = turn(level, self.symmetry), 1, 0
        return self._next()

    def more(self, level: Level) -> list[int]:
        if not self.cut:
            return self.plan(level, first=False)  # stuck: plan afresh from here
        self.horizon = min(2 * self.horizon, HORIZON)
        return self._next()

    def _next(self) -> list[int]:
        if self.turned is None:
            return []
        played = episode(self.turned.level, self.horizon, self.agent, self.seed)
        self.cut = played.steps == self.horizon < HORIZON and not played.solved
        fresh, self.given = played.actions[self.given:], played.steps
        return [self.turned.back[a] for a in fresh]


class ReferencePlayer(PanelPlayer):
    """A reference agent (``engine.agents.reference``) played as ``PanelPlayer`` plays a panel
    agent, on a board turned by a symmetry the reference's file was not played on."""

    def __init__(self, agent: ReferenceAgent, seed: int, symmetry: int) -> None:
        super().__init__(PanelAgent("planner", agent.budget), seed, symmetry)
        self.reference = agent

    def _next(self) -> list[int]:
        if self.turned is None:
            return []
        played = reference_episode(self.turned.level, self.horizon, self.reference)
        self.cut = played.steps == self.horizon < HORIZON and not played.solved
        fresh, self.given = played.actions[self.given:], played.steps
        return [self.turned.back[a] for a in fresh]


class EpsilonPlayer(PanelPlayer):
    """A panel agent that takes a random move instead of its own with probability ``eps``,
    and plans again from where that move led."""

    def __init__(self, agent: PanelAgent, seed: int, eps: float, symmetry: int = 0) -> None:
        super().__init__(agent, seed, symmetry)
        self.eps = eps

    def act(self, obs: np.ndarray, goal: np.ndarray, action_history: list[int]) -> int:
        if action_history and self.rng.random() < self.eps:
            self.expect = None  # plan again from wherever it lands
            return int(self.rng.integers(4))
        return super().act(obs, goal, action_history)


# ------------------------------------------------------------------------------ the entrants

Factory = Callable[[], Agent]


class Entrant(NamedTuple):
    """One key of the red team: its row in the table, whether it cheats or keeps the rule (or
    plays with more compute than the rule allows), and one agent factory per scorecard it
    plays in turn; the review is judged on the last scorecard."""

    row: str
    kind: str  # "cheater", "honest" (within the rule) or "over" (over the 256-call rule)
    scorecards: tuple[Factory, ...]


def _panel(family: str, budget: int, seed: int, symmetry: int) -> Factory:
    return lambda: PanelPlayer(PanelAgent(family, budget), seed, symmetry)


def _symmetry(seed: int, i: int) -> int:
    """A turn other than the identity for the ``i``-th honest agent of run ``seed``: none of
    them is the panel's own agent, which the review compares with."""
    return 1 + (seed + i) % 7


THROTTLE_SHARES = (2 / 3, 1 / 2, 1 / 3)  # the throttled decoders' easier shares of the levels


def entrants(seed: int, public: Path, families: tuple[str, ...] = (
        "planner", "greedy", "breadth", "rollout"), budgets: tuple[int, ...] = (64, 256),
        over: tuple[int, ...] = (1024,),
        chosen: dict[str, frozenset[str]] | None = None) -> list[Entrant]:
    """The whole red team for one run ``seed``: the cheaters (a throttled decoder per share of
    ``THROTTLE_SHARES``, its bound read off the ``public`` version), the honest families at
    ``budgets`` (and at the ``over`` budgets), an epsilon-greedy planner and random play; with
    ``chosen`` (``chosen_sets``), a ``ChosenDecoder`` per row of it.
    Every honest panel agent plays the board turned (``_symmetry``), so it is a member of its
    family that the version's panel does not hold."""
    s = seed * 1000
    weak = PanelAgent("planner", 64)
    team = [
        Entrant("decoder", "cheater", (lambda: Decoder(s + 1),)),
        Entrant("detour decoder", "cheater", (lambda: DetourDecoder(s + 2),)),
        Entrant("push-padded decoder", "cheater", (lambda: PaddedDecoder(s + 3),)),
        Entrant("probe then replay", "cheater", (lambda: RandomAgent(s + 4),
                                                  lambda: Decoder(s + 5))),
    ]
    for i, share in enumerate(THROTTLE_SHARES):
        bound = throttle_states(public, share)
        team.append(Entrant(f"throttled decoder, easier {_fraction(share)}", "cheater",
                            (partial(ThrottledDecoder, s + 6 + i, bound, weak),)))
    for i, (row, levels) in enumerate((chosen or {}).items()):
        team.append(Entrant(row, "cheater", (partial(ChosenDecoder, s + 40 + i, levels),)))
    for budget in budgets:
        team += [Entrant(f"{f}-{budget}", "honest",
                         (_panel(f, budget, s + 10, _symmetry(seed, i)),))
                 for i, f in enumerate(families)]
    unplayed = [t for t in range(1, 8) if t not in REFERENCE_TURNS]
    team += [Entrant(f"reference {a.name} turned", "honest",
                     (partial(ReferencePlayer, a, s + 15, unplayed[(seed + i) % len(unplayed)]),))
             for i, a in enumerate(REFERENCE_AGENTS)]
    eps = _symmetry(seed, len(families))
    team += [Entrant("epsilon-greedy planner-256", "honest",
                     (lambda: EpsilonPlayer(PanelAgent("planner", 256), s + 20, 0.1, eps),)),
             Entrant("random", "honest", (lambda: RandomAgent(s + 21),))]
    for budget in over:
        team += [Entrant(f"{f}-{budget}", "over",
                         (_panel(f, budget, s + 30, _symmetry(seed, i)),))
                 for i, f in enumerate(families)]
    return team


def _fraction(share: float) -> str:
    return {2 / 3: "2/3", 1 / 2: "1/2", 1 / 3: "1/3"}.get(share, f"{share:.2f}")


def throttle_states(public: Path, share: float = 2 / 3) -> int:
    """The throttled decoder's bound: the solver's states expanded that the easier ``share`` of
    a public version's levels stay within (what a cheater can learn of the game's levels)."""
    import polars as pl

    states = pl.read_parquet(public / "levels.parquet")["states_expanded"].to_numpy()
    return int(np.quantile(states, share))


class Card(NamedTuple):
    """A scorecard the red team played: whose, which of its key's, its id and its Score."""

    entrant: Entrant
    turn: int  # 0 for the key's first scorecard
    scorecard_id: str
    score: dict

    @property
    def judged(self) -> bool:
        """Whether the review is judged on this card (its key's last)."""
        return self.turn == len(self.entrant.scorecards) - 1


def key_name(row: str) -> str:
    """``row`` as a leaderboard name (letters, digits, ``_ . -`` and spaces, 40 at most)."""
    name = re.sub(r"[^A-Za-z0-9_. -]", "", row.replace("/", " of "))
    return re.sub(r" +", " ", name).strip()[:40].strip()


async def register(url: str, name: str) -> str:
    """A new key named ``name``: how a key plays several scorecards of its own."""
    conn = Connection(url)
    try:
        return str((await conn.call("POST", "/api/keys", {"name": name}))["api_key"])
    finally:
        await conn.close()


async def play_entrant(url: str, entrant: Entrant, name: str) -> list[Card]:
    """Register ``name`` and play each of the entrant's scorecards in turn with its key."""
    key = await register(url, name)
    cards = []
    for turn, factory in enumerate(entrant.scorecards):
        out = await play(url, factory, key=key, echo=log.debug)
        cards.append(Card(entrant, turn, out["scorecard_id"], out["score"]))
    return cards


async def play_team(url: str, team: list[Entrant], prefix: str = "",
                    at_once: int = 4) -> list[Card]:
    """Every entrant played through the server at ``url`` (``at_once`` keys at a time), each
    under the name ``prefix + row``; the cards in the team's order."""
    gate = asyncio.Semaphore(at_once)

    async def one(entrant: Entrant) -> list[Card]:
        async with gate:
            return await play_entrant(url, entrant, key_name(prefix + entrant.row))

    played = await asyncio.gather(*(one(e) for e in team))
    return [card for cards in played for card in cards]
