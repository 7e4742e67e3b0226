"""A second family of search agents, used only to check that difficulty labels generalise.

Unlike the reference planner (weighted push distances, dead-square and freeze pruning, a
learned heuristic), these agents replan every step with plain A* (f = g + h) or greedy
best-first search (f = h) over a Manhattan box-distance heuristic, prune only crates pushed
into non-goal corners, and escape loops by charging each visited state one move per visit.
"""

from __future__ import annotations

__all__ = [
    "AGENT_BUDGETS", "AGENT_KINDS", "AgentSpec", "MAX_AGENT_BUDGET", "VALIDATION_AGENTS",
    "agent_kernel", "box_distance", "corner_dead", "count_visit", "play_agent", "visits",
]

from typing import NamedTuple

import numpy as np

from engine.agents.planner import (
    _estimate,
    _find,
    _heap_push,
    _successor,
    action_offsets,
    board_arrays,
    lookahead_arrays,
    node_of,
    pop_open,
    start_lookahead,
    state_key,
    state_table,
)
from engine.kernel_cache import njit
from engine.levels import Level

AGENT_KINDS = ("astar", "greedy")
AGENT_BUDGETS = (64, 256, 1024)
MAX_AGENT_BUDGET = 1 << 16


class AgentSpec(NamedTuple):
    """One validation agent: its search (``astar`` or ``greedy``) and expansions per step."""

    kind: str
    budget: int

    @property
    def name(self) -> str:
        return f"{self.kind}-{self.budget}"


VALIDATION_AGENTS = tuple(AgentSpec(k, b) for k in AGENT_KINDS for b in AGENT_BUDGETS)


@njit(cache=True)
def box_distance(passable: np.ndarray, goal: np.ndarray, width: int) -> np.ndarray:
    """Manhattan distance from every cell to its nearest goal, ignoring walls."""
    n = passable.size
    out = np.full(n, 1 << 20, np.int64)
    for c in range(n):
        for g in range(n):
            if goal[g]:
                d = abs(c // width - g // width) + abs(c % width - g % width)
                if d < out[c]:
                    out[c] = d
    return out


@njit(cache=True)
def corner_dead(passable: np.ndarray, goal: np.ndarray, width: int) -> np.ndarray:
    """Non-goal floor cells with a wall above or below and one left or right."""
    dead = np.zeros(passable.size, np.bool_)
    for c in range(passable.size):
        if passable[c] and not goal[c]:
            vertical = not passable[c - width] or not passable[c + width]
            horizontal = not passable[c - 1] or not passable[c + 1]
            dead[c] = vertical and horizontal
    return dead


@njit(cache=True, inline="always")
def visits(v_keys: np.ndarray, v_count: np.ndarray, key: int) -> int:
    """How often the episode stood on ``key`` so far (``state_table``'s counts)."""
    s = _find(v_keys, key)
    return v_count[s] if v_keys[s] == key else 0


@njit(cache=True)
def count_visit(v_keys: np.ndarray, v_count: np.ndarray, key: int) -> None:
    """Count one more visit of ``key``."""
    s = _find(v_keys, key)
    v_keys[s] = key
    v_count[s] += 1


@njit(cache=True)
def agent_kernel(passable: np.ndarray, goal: np.ndarray, width: int, start_key: int,
                 n_crates: int, max_steps: int, budget: int, greedy: bool,
                 actions: np.ndarray) -> tuple[bool, int]:
    """Play one episode; return (solved, steps), the actions taken written to ``actions``
    (int8, at least ``max_steps`` long)."""
    offs = action_offsets(width)
    dist = box_distance(passable, goal, width)
    dead = corner_dead(passable, goal, width)
    t_keys, t_node, n_key, n_g, n_h, n_first, n_closed, heap = lookahead_arrays(budget)
    v_keys, v_count = state_table(max_steps)
    cur = start_key
    steps = 0
    while True:
        if _estimate(cur, dist, n_crates) == 0:
            return True, steps
        if steps >= max_steps:
            return False, steps
        count_visit(v_keys, v_count, cur)
        n_nodes = 1
        size = start_lookahead(t_keys, t_node, n_key, n_g, n_h, n_first, n_closed, heap, cur,
                               _estimate(cur, dist, n_crates))
        expanded = 0
        target = -1
        while size > 0 and expanded < budget:
            i, size = pop_open(heap, size, n_closed)
            if i < 0:
                break
            if _estimate(n_key[i], dist, n_crates) == 0:
                target = i
                break
            expanded += 1
            for a in range(4):
                nk, pushed = _successor(n_key[i], a, passable, offs, n_crates)
                if nk == n_key[i] or (pushed >= 0 and dead[pushed]):
                    continue
                ng = n_g[i] + 1
                j = node_of(t_keys, t_node, n_key, n_closed, n_nodes, nk)
                if j < n_nodes:
                    if n_closed[j] or ng >= n_g[j]:
                        continue
                else:
                    n_nodes += 1
                    n_h[j] = _estimate(nk, dist, n_crates) + visits(v_keys, v_count, nk)
                n_g[j] = ng
                n_first[j] = a if i == 0 else n_first[i]
                f = n_h[j] if greedy else ng + n_h[j]
                size = _heap_push(heap, size, (f << 40) | (n_h[j] << 20) | j)
        if target < 0:
            best = -1
            for j in range(1, n_nodes):
                f = n_h[j] if greedy else n_g[j] + n_h[j]
                score = (f << 40) | (n_h[j] << 20) | j
                if best < 0 or score < best:
                    best = score
                    target = j
            if target < 0:
                return False, steps
        actions[steps] = n_first[target]
        cur, _ = _successor(cur, n_first[target], passable, offs, n_crates)
        steps += 1


def play_agent(level: Level, max_steps: int, agent: AgentSpec) -> bool:
    """Whether ``agent`` solves ``level`` from its start within ``max_steps``."""
    if agent.kind not in AGENT_KINDS or not 1 <= agent.budget <= MAX_AGENT_BUDGET:
        raise ValueError(f"unknown validation agent {agent}")
    passable, goal = board_arrays(level)
    solved, _ = agent_kernel(passable, goal, level.width, state_key(level.start),
                             level.n_crates, int(max_steps), agent.budget,
                             agent.kind == "greedy", np.empty(int(max_steps), np.int8))
    return bool(solved)
