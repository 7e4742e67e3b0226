"""The reference: the strongest replanning agents within the rule that the project knows.

The compute frontier the review tests a whole score against (``pipeline.scores.review``): at
every step each agent searches at most ``RULE_BUDGET`` dynamics calls from the current state
and takes one action. The rule's currency: one call is one predicted transition of one
candidate state, so an expansion that tries the four actions is four calls
(``CALLS_PER_EXPANSION``); evaluating a state's heuristic is not a call. Against the panel's
planner (``engine.agents.planner``) each one has

- a push-level lower bound: the cheapest matching of crates to goals by push distance (exact,
  by a dynamic programme over the goals taken, at most 7 crates), dead where none exists;
- dead-square and 2x2 freeze pruning, as the panel's planner;
- local-search-space learning (LSS-LRTA*): after each lookahead every state it closed learns
  its distance to the lookahead's frontier, not only the current one, so a dead end is left
  in a few steps instead of many;
- ties between equal f broken toward fewer pushes left, then toward the player's nearness
  to a crate that is off its goal.

The families differ in the weight on the bound (``REFERENCE_FAMILIES``): a weight of 2 keeps
the lookahead broad (the panel's planner's weight), a larger one makes it greedier and
deeper. Nothing here keeps a search
across steps (the rule on banked compute, README "Fair play"): what an agent carries from one
step to the next is its learned heuristic only, as the panel's planner does.
"""

from __future__ import annotations

__all__ = [
    "REFERENCE_AGENTS", "REFERENCE_BUDGET", "REFERENCE_FAMILIES", "REFERENCE_TURNS",
    "ReferenceAgent", "goal_distances", "matching_bound", "reference_episode",
    "reference_kernel",
]

from typing import NamedTuple

import numpy as np

from engine.agents.panel import PanelEpisode
from engine.agents.planner import (
    _FAR,
    CALLS_PER_EXPANSION,
    _find,
    _frozen_square,
    _heap_push,
    _learned,
    _successor,
    action_offsets,
    board_arrays,
    lookahead_arrays,
    node_of,
    pop_open,
    power_of_two,
    push_distance,
    state_key,
)
from engine.kernel_cache import njit
from engine.levels import Level, State

REFERENCE_BUDGET = 256  # dynamics calls per step: the rule's
REFERENCE_FAMILIES = {"match-2": 2, "match-3": 3, "match-5": 5}  # family -> weight on the bound
REFERENCE_TURNS = (0, 1, 2, 3)  # the board's symmetries it is played on (engine.levels)
_MAX_GOALS = 7  # crates in a 64-bit key: 8 bits each beside the player's


class ReferenceAgent(NamedTuple):
    """One reference agent: its family (the weight on its bound) and its budget in dynamics
    calls per step."""

    family: str
    budget: int = REFERENCE_BUDGET

    @property
    def name(self) -> str:
        return f"{self.family}-{self.budget}"


REFERENCE_AGENTS = tuple(ReferenceAgent(f) for f in REFERENCE_FAMILIES)


@njit(cache=True)
def goal_distances(passable: np.ndarray, goal: np.ndarray, width: int) -> np.ndarray:
    """Goals x cells: the fewest pushes taking a lone crate from each cell to each goal
    (``FAR`` where it cannot), one pull search from each goal."""
    goals = np.flatnonzero(goal)
    out = np.empty((goals.size, passable.size), np.int64)
    for g in range(goals.size):
        one = np.zeros(passable.size, np.bool_)
        one[goals[g]] = True
        out[g] = push_distance(passable, one, width)
    return out


@njit(cache=True)
def matching_bound(key: int, dist: np.ndarray, n_crates: int, best: np.ndarray) -> int:
    """The cheapest assignment of the crates of ``key`` to distinct goals by push distance
    (``dist`` from ``goal_distances``): a lower bound on the pushes left; ``_FAR`` or more
    when no assignment avoids a dead pairing. ``best`` is scratch of 2^goals entries."""
    n_goals = dist.shape[0]
    size = 1 << n_goals
    best[:size] = _FAR * 64
    best[0] = 0
    for mask in range(size):
        cost = best[mask]
        if cost >= _FAR * 64:
            continue
        i = 0  # the crate to place next: as many crates are placed as goals are taken
        m = mask
        while m:
            i += m & 1
            m >>= 1
        if i >= n_crates:
            continue
        cell = (key >> (8 * (i + 1))) & 255
        for g in range(n_goals):
            if mask & (1 << g):
                continue
            d = dist[g, cell]
            if d >= _FAR:
                continue
            nxt = mask | (1 << g)
            if cost + d < best[nxt]:
                best[nxt] = cost + d
    out = _FAR * 64
    for mask in range(size):
        placed = 0
        m = mask
        while m:
            placed += m & 1
            m >>= 1
        if placed == n_crates and best[mask] < out:
            out = best[mask]
    return min(out, _FAR)


@njit(cache=True)
def _near_crate(key: int, goal: np.ndarray, width: int, n_crates: int) -> int:
    """Manhattan distance from the player to the nearest crate off its goal (a tie-break;
    0 when every crate is home)."""
    player = key & 255
    pr, pc = player // width, player % width
    out = 0
    for i in range(n_crates):
        c = (key >> (8 * (i + 1))) & 255
        if goal[c]:
            continue
        d = abs(c // width - pr) + abs(c % width - pc)
        if out == 0 or d < out:
            out = d
    return out


@njit(cache=True)
def reference_kernel(passable: np.ndarray, goal: np.ndarray, width: int, start_key: int,
                     n_crates: int, max_steps: int, budget: int, weight: int,
                     actions: np.ndarray) -> tuple[bool, int]:
    """Play one episode within ``budget`` dynamics calls per step with the bound weighted by
    ``weight``; return (solved, steps), the actions taken written to ``actions`` (int8,
    ``max_steps`` long)."""
    offs = action_offsets(width)
    dist = goal_distances(passable, goal, width)
    gdist = push_distance(passable, goal, width)
    scratch = np.empty(1 << max(1, dist.shape[0]), np.int64)
    expansions = max(1, budget // CALLS_PER_EXPANSION)
    t_keys, t_node, n_key, n_g, n_h, n_first, n_closed, heap = lookahead_arrays(expansions)
    n_kids = np.full(n_key.size * 4, -1, np.int64)  # each closed node's children
    n_bound = np.empty(n_key.size, np.int64)  # pushes left (the unweighted bound)
    # every step stores at most its lookahead's closed states: room for all, half full at most
    lh_keys = np.full(power_of_two(2 * (max_steps + 1) * (expansions + 1) + 16), -1, np.int64)
    lh_vals = np.zeros(lh_keys.size, np.int64)
    cur = start_key
    steps = 0
    while True:
        bound_cur = matching_bound(cur, dist, n_crates, scratch)
        if bound_cur == 0:
            return True, steps
        if steps >= max_steps or bound_cur >= _FAR:
            return False, steps
        h_root = _learned(lh_keys, lh_vals, cur, weight * bound_cur)
        t_keys[:] = -1
        n_key[0], n_g[0], n_h[0], n_first[0], n_closed[0] = cur, 0, h_root, -1, False
        n_bound[0] = bound_cur
        s = _find(t_keys, cur)
        t_keys[s] = cur
        t_node[s] = 0
        size = _heap_push(heap, 0, _priority(h_root, bound_cur, 0, 0))
        n_nodes, calls, goal_node = 1, 0, -1
        while size > 0 and calls + CALLS_PER_EXPANSION <= budget:
            i, size = pop_open(heap, size, n_closed)
            if i < 0:
                break
            if n_bound[i] == 0:
                goal_node = i
                n_closed[i] = False  # a goal is a frontier state, not an interior one
                break
            for a in range(CALLS_PER_EXPANSION):
                n_kids[4 * i + a] = -1
                nk, pushed = _successor(n_key[i], a, passable, offs, n_crates)
                calls += 1
                # the planner's pruning, written out as plan_kernel has it: through a shared
                # njit predicate the planner ran at half speed (benchmarks/kernels.py)
                if nk == n_key[i]:
                    continue
                if pushed >= 0:
                    if gdist[pushed] >= _FAR:
                        continue
                    if _frozen_square(nk, pushed, passable, goal, width, n_crates):
                        continue
                ng = n_g[i] + 1
                j = node_of(t_keys, t_node, n_key, n_closed, n_nodes, nk)
                if j == n_nodes:
                    b = matching_bound(nk, dist, n_crates, scratch) if pushed >= 0 \
                        else n_bound[i]
                    if b >= _FAR:
                        t_keys[_find(t_keys, nk)] = -2  # dead: never a node (-2 is no key)
                        continue
                    n_nodes += 1
                    n_bound[j] = b
                    n_h[j] = _learned(lh_keys, lh_vals, nk, weight * b)
                    n_g[j] = ng
                    n_first[j] = a if i == 0 else n_first[i]
                elif n_closed[j] or ng >= n_g[j]:
                    n_kids[4 * i + a] = j
                    continue
                else:
                    n_g[j] = ng
                    n_first[j] = a if i == 0 else n_first[i]
                n_kids[4 * i + a] = j
                tie = _near_crate(nk, goal, width, n_crates)
                size = _heap_push(heap, size, _priority(ng + n_h[j], n_bound[j], tie, j))
        target = goal_node
        if target < 0:
            best = -1
            for j in range(1, n_nodes):
                if n_closed[j]:
                    continue
                score = _priority(n_g[j] + n_h[j], n_bound[j], 0, j)
                if best < 0 or score < best:
                    best = score
                    target = j
            if target < 0:
                return False, steps
            _learn(n_kids, n_h, n_closed, n_nodes, n_key, lh_keys, lh_vals)
        a = n_first[target]
        cur, _ = _successor(cur, a, passable, offs, n_crates)  # the environment's step
        actions[steps] = a
        steps += 1


@njit(cache=True, inline="always")
def _priority(f: int, pushes_left: int, near: int, node: int) -> int:
    """A heap item: f first, then the pushes left, then the player's nearness, then the
    node (f < 2^23, pushes < 2^13, nearness < 2^8, node < 2^20)."""
    return ((min(f, (1 << 22) - 1) << 41) | (min(pushes_left, (1 << 13) - 1) << 28)
            | (min(near, 255) << 20) | node)


@njit(cache=True)
def _learn(n_kids: np.ndarray, n_h: np.ndarray, n_closed: np.ndarray, n_nodes: int,
           n_key: np.ndarray, lh_keys: np.ndarray, lh_vals: np.ndarray) -> None:
    """LSS-LRTA*'s update: every closed state of the lookahead learns h = 1 + its best
    child's h (unit moves), from the open frontier inward, never lowered; then stored."""
    value = np.empty(n_nodes, np.int64)
    for j in range(n_nodes):
        value[j] = (1 << 40) if n_closed[j] else n_h[j]
    changed = True
    while changed:  # Bellman-Ford over the few closed nodes: at most their count of passes
        changed = False
        for j in range(n_nodes):
            if not n_closed[j]:
                continue
            for r in range(4):
                k = n_kids[4 * j + r]
                if k >= 0 and value[k] + 1 < value[j]:
                    value[j] = value[k] + 1
                    changed = True
    for j in range(n_nodes):
        if n_closed[j] and value[j] < (1 << 40) and value[j] > n_h[j]:
            n_h[j] = value[j]
            s = _find(lh_keys, n_key[j])
            lh_keys[s] = n_key[j]
            lh_vals[s] = value[j]


def reference_episode(level: Level, max_steps: int, agent: ReferenceAgent,
                      state: State | None = None) -> PanelEpisode:
    """``agent``'s episode on ``level`` from ``state`` (default: its start) within
    ``max_steps``: solved, steps and the actions (0-3) a client of the server would send.
    Deterministic: the same level, state and agent give the same episode."""
    if agent.family not in REFERENCE_FAMILIES or agent.budget < CALLS_PER_EXPANSION:
        raise ValueError(f"unknown reference agent {agent}")
    state = level.start if state is None else state
    if len(state.crates) > _MAX_GOALS:
        raise ValueError(f"the reference plays at most {_MAX_GOALS} crates, not "
                         f"{len(state.crates)}")
    passable, goal = board_arrays(level)
    actions = np.zeros(max(0, int(max_steps)), np.int8)
    solved, steps = reference_kernel(passable, goal, level.width, state_key(state),
                                     len(state.crates), int(max_steps), agent.budget,
                                     REFERENCE_FAMILIES[agent.family], actions)
    return PanelEpisode(bool(solved), int(steps), tuple(int(a) for a in actions[:steps]))
