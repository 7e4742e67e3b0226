"""The agent panel: four families of search agents that play a level differently, at budgets.

Every agent replans after each step within a budget of dynamics calls per step (the rule's
currency: one call is one successor of one action, ``engine.agents.planner._successor``):

- ``planner``: the reference planner (``engine.agents.planner``), learning real-time A* over push
  distances with dead-square and freeze pruning; ``planner-256`` is the reference run.
- ``greedy``: greedy best-first over Manhattan box distances with corner pruning and a
  visit-count penalty (``engine.agents.validation_agents``), budget / 4 expansions.
- ``breadth``: a breadth-first lookahead (no heuristic inside the search) to as deep as the
  budget reaches, then a step toward the visited state with the fewest pushes left.
- ``rollout``: Monte-Carlo rollouts of random moves from the current state; the first move
  of the rollout that came closest to the goals is taken.

``breadth`` and ``rollout`` share the panel's loop escape: a state occupied n times before
counts n pushes further from the goals. Everything is deterministic per panel seed.
"""

from __future__ import annotations

__all__ = [
    "PANEL", "PANEL_BUDGETS", "PANEL_FAMILIES", "PanelAgent", "PanelEpisode", "REFERENCE_AGENT",
    "ROLLOUT_DEPTH", "breadth_kernel", "episode", "play", "play_panel", "rollout_kernel",
]

from typing import NamedTuple

import numpy as np

from engine.agents.planner import (
    _EMPTY,
    _FAR,
    CALLS_PER_EXPANSION,
    HEURISTIC_WEIGHT,
    _estimate,
    _find,
    _successor,
    action_offsets,
    board_arrays,
    plan_kernel,
    power_of_two,
    push_distance,
    state_key,
    state_table,
)
from engine.agents.validation_agents import agent_kernel, count_visit, visits
from engine.kernel_cache import njit
from engine.levels import Level, State

PANEL_FAMILIES = ("planner", "greedy", "breadth", "rollout")
PANEL_BUDGETS = (64, 256, 1024)  # dynamics calls per step
ROLLOUT_DEPTH = 16  # moves per random rollout
REFERENCE_AGENT = "planner-256"


class PanelAgent(NamedTuple):
    """One agent of the panel: its family and its budget in dynamics calls per step."""

    family: str
    budget: int

    @property
    def name(self) -> str:
        return f"{self.family}-{self.budget}"


PANEL = tuple(PanelAgent(f, b) for f in PANEL_FAMILIES for b in PANEL_BUDGETS)


@njit(cache=True)
def breadth_kernel(passable: np.ndarray, goal: np.ndarray, width: int, start_key: int,
                   n_crates: int, max_steps: int, budget: int,
                   actions: np.ndarray) -> tuple[bool, int]:
    """Play one episode with a breadth-first lookahead of ``budget`` calls per step; return
    (solved, steps), the actions taken written to ``actions`` (int8, ``max_steps`` long)."""
    offs = action_offsets(width)
    gdist = push_distance(passable, goal, width)
    cap = budget + 8
    q_key = np.empty(cap, np.int64)
    q_first = np.empty(cap, np.int64)
    seen = np.empty(power_of_two(4 * cap), np.int64)
    v_keys, v_count = state_table(max_steps)
    cur = start_key
    steps = 0
    while True:
        if _estimate(cur, gdist, n_crates) == 0:
            return True, steps
        if steps >= max_steps:
            return False, steps
        count_visit(v_keys, v_count, cur)
        seen[:] = _EMPTY
        seen[_find(seen, cur)] = cur
        q_key[0] = cur
        q_first[0] = -1
        head, tail, calls = 0, 1, 0
        best, best_first, found = _FAR * 64, -1, -1
        while head < tail and calls + CALLS_PER_EXPANSION <= budget and found < 0:
            key = q_key[head]
            first = q_first[head]
            head += 1
            for a in range(4):
                nk, pushed = _successor(key, a, passable, offs, n_crates)
                calls += 1
                if nk == key or (pushed >= 0 and gdist[pushed] >= _FAR):
                    continue
                s = _find(seen, nk)
                if seen[s] == nk:
                    continue
                seen[s] = nk
                f = a if first < 0 else first
                h = _estimate(nk, gdist, n_crates)
                if h == 0:
                    found = f
                    break
                score = h + visits(v_keys, v_count, nk)
                if score < best:  # breadth-first order: the shallowest of equals wins
                    best, best_first = score, f
                q_key[tail] = nk
                q_first[tail] = f
                tail += 1
        a = found if found >= 0 else best_first
        if a < 0:
            return False, steps
        actions[steps] = a
        cur, _ = _successor(cur, a, passable, offs, n_crates)  # the environment's step
        steps += 1


@njit(cache=True, inline="always")
def _random(state: np.ndarray) -> int:
    """A 64-bit linear congruential generator held in ``state[0]``: its next 31 high bits."""
    x = state[0] * 6364136223846793005 + 1442695040888963407  # wraps, as intended
    state[0] = x
    return (x >> 33) & 0x7FFFFFFF


@njit(cache=True)
def rollout_kernel(passable: np.ndarray, goal: np.ndarray, width: int, start_key: int,
                   n_crates: int, max_steps: int, budget: int, depth: int,
                   seed: int, actions: np.ndarray) -> tuple[bool, int]:
    """Play one episode with ``budget // depth`` random rollouts of ``depth`` calls per step;
    return (solved, steps), the actions taken written to ``actions`` (int8, ``max_steps``
    long)."""
    offs = action_offsets(width)
    gdist = push_distance(passable, goal, width)
    v_keys, v_count = state_table(max_steps)
    rng = np.array([seed * -7046029254386353131 + 0x5DEECE66D], np.int64)
    depth = max(1, min(depth, budget))
    rollouts = max(1, budget // depth)
    cur = start_key
    steps = 0
    while True:
        if _estimate(cur, gdist, n_crates) == 0:
            return True, steps
        if steps >= max_steps:
            return False, steps
        count_visit(v_keys, v_count, cur)
        best, best_depth, best_first = _FAR * 64, depth + 1, -1
        for _ in range(rollouts):
            key, first = cur, -1
            for d in range(depth):
                a = _random(rng) & 3
                nk, pushed = _successor(key, a, passable, offs, n_crates)
                if nk == key or (pushed >= 0 and gdist[pushed] >= _FAR):
                    continue
                key = nk
                if first < 0:
                    first = a
                h = _estimate(key, gdist, n_crates)
                score = -1 if h == 0 else h + visits(v_keys, v_count, key)
                if score < best or (score == best and d < best_depth):
                    best, best_depth, best_first = score, d, first
                if h == 0:
                    break
        if best_first < 0:
            return False, steps
        actions[steps] = best_first
        cur, _ = _successor(cur, best_first, passable, offs, n_crates)  # the environment's step
        steps += 1


class PanelEpisode(NamedTuple):
    """One agent's episode: solved or not, the steps it took and its actions (0-3)."""

    solved: bool
    steps: int
    actions: tuple[int, ...]


def episode(level: Level, max_steps: int, agent: PanelAgent, seed: int = 0,
            state: State | None = None) -> PanelEpisode:
    """``agent``'s episode on ``level`` from ``state`` (default: its start) within
    ``max_steps``, its actions included: the moves a client of the server would send.

    Deterministic: the same level, state, agent and panel ``seed`` give the same episode (the
    seed draws the rollouts' moves; the searches break ties by a fixed order).
    """
    if agent.family not in PANEL_FAMILIES or agent.budget < CALLS_PER_EXPANSION:
        raise ValueError(f"unknown panel agent {agent}")
    state = level.start if state is None else state
    passable, goal = board_arrays(level)
    args = (passable, goal, level.width, state_key(state), len(state.crates), int(max_steps))
    actions = np.zeros(max(0, int(max_steps)), np.int8)
    if agent.family == "planner":
        solved, steps, taken, _ = plan_kernel(*args, agent.budget, HEURISTIC_WEIGHT, 0)
        actions[:steps] = taken
    elif agent.family == "greedy":
        solved, steps = agent_kernel(*args, agent.budget // CALLS_PER_EXPANSION, True, actions)
    elif agent.family == "breadth":
        solved, steps = breadth_kernel(*args, agent.budget, actions)
    else:
        solved, steps = rollout_kernel(*args, agent.budget, ROLLOUT_DEPTH, int(seed), actions)
    return PanelEpisode(bool(solved), int(steps), tuple(int(a) for a in actions[:steps]))


def play(level: Level, max_steps: int, agent: PanelAgent, seed: int = 0) -> tuple[bool, int]:
    """``(solved, steps)`` of ``agent`` playing ``level`` from its start within ``max_steps``
    (``episode`` without its actions)."""
    solved, steps, _ = episode(level, max_steps, agent, seed)
    return solved, steps


def play_panel(level: Level, max_steps: int, agents: tuple[PanelAgent, ...] = PANEL,
               seed: int = 0) -> tuple[tuple[bool, ...], tuple[int, ...]]:
    """Every agent's ``(solved, steps)`` on ``level``, in the order of ``agents``."""
    results = [play(level, max_steps, agent, seed) for agent in agents]
    return tuple(r[0] for r in results), tuple(r[1] for r in results)
